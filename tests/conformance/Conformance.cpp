// Runs ONNX backend node tests (tier1.txt) through the importer and a target, comparing
// with the expected outputs. The tests run in forked worker processes, each taking the next
// --batch tests in turn, so a crash or hang in one test is reported as that test's failure
// (the next worker goes on after it) instead of ending the run, while the per-process start
// (an OpenCL driver loading its kernel library, LLVM's initialization) is paid once a batch.
// Tests named in an --xfail list are expected to fail (XFAIL); one of them passing is an
// error (XPASS), so the list stays honest.
#include <functional>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include <CLI/CLI.hpp>

#include "nnc/driver/Driver.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"

namespace fs = std::filesystem;
using namespace nnc;

namespace {

struct Options {
  std::string shared;
  std::string list;
  std::string xfail;
  std::string target = "interp";
  std::string cpu;
  std::string filter;
  std::string suite = "node"; // node: ONNX node tests; models: shared/models
  std::string check = "run";  // run: compare outputs; roundtrip: print/parse/print
  bool optimize = true;
  bool openclOptimize = true;
  bool openclProgramCache = true;
  std::string openclType; // the device type whose graph passes run (empty: the device's)
  bool verbose = false;
  int timeoutSeconds = 120;
  int batch = 64; // tests per worker process (1: a process per test)
  double rtol = 1e-3;
  double atol = 1e-7;
};

/// Print, parse, print: the two texts must be identical.
std::string roundTrip(const Graph &g, const std::string &what) {
  std::string first = printGraph(g);
  Expected<std::unique_ptr<Graph>> parsed = parseGraph(first, what);
  if (!parsed)
    return "parse of printed IR failed: " + parsed.error().message();
  std::string second = printGraph(**parsed);
  if (first == second)
    return "";
  size_t i = 0;
  while (i < first.size() && i < second.size() && first[i] == second[i])
    ++i;
  size_t line = static_cast<size_t>(std::count(first.begin(), first.begin() + i, '\n')) + 1;
  return fmt::format("{}: print/parse/print differs at line {}", what, line);
}

/// A data set's inputs (input_K.pb, read as the model's types say) and the model loaded with
/// them known; `boundary` receives how its outputs group the graph's.
struct LoadedSet {
  std::unique_ptr<Graph> graph;
  driver::ModelInputs inputs;
  OnnxBoundary boundary;
};

Expected<LoadedSet> loadWithInputs(const fs::path &model, const fs::path &set) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<driver::ModelFile> file,
                       driver::ModelFile::open(model.string()));
  const std::vector<std::string> &names = file->inputNames();
  NNC_ASSIGN_OR_RETURN(std::vector<ValueForm> forms, file->inputForms());
  LoadedSet ls;
  for (size_t k = 0;; ++k) {
    fs::path p = set / fmt::format("input_{}.pb", k);
    if (!fs::exists(p))
      break;
    ValueForm::Kind kind = k < forms.size() ? forms[k].kind : ValueForm::Kind::Tensor;
    NNC_ASSIGN_OR_RETURN(OnnxValue v, driver::readValueFile(p.string(), kind));
    if (k < names.size())
      ls.inputs.add(names[k], std::move(v));
    else
      for (Tensor &t : v.tensors)
        ls.inputs.tensors.push_back(std::move(t));
  }
  NNC_ASSIGN_OR_RETURN(ls.graph, file->load(ls.inputs.known, ls.inputs.forms, &ls.boundary));
  return ls;
}

/// Imports with the first data set's inputs known, then checks the round trip of the
/// imported graph and of the optimized one (by the CPU pipeline for `cpu`).
std::string roundTripTest(const fs::path &dir, const CpuTarget &cpu) {
  Expected<LoadedSet> ls = loadWithInputs(dir / "model.onnx", dir / "test_data_set_0");
  if (!ls)
    return ls.error().message();
  Graph &g = *ls->graph;
  std::string r = roundTrip(g, "imported");
  if (!r.empty())
    return r;
  if (Error e = driver::optimize(g, cpu))
    return "optimize: " + e.message();
  return roundTrip(g, "optimized");
}

/// Runs one test; returns "" on success or the reason it failed. Runs in a worker process,
/// which chooses an OpenCL target's device for each test (chooseDevice).
std::string runTest(const fs::path &dir, driver::Target target, const Options &opts) {
  if (Error e = driver::chooseDevice(target))
    return e.message();
  bool optimize = opts.optimize;
  fs::path model = dir / "model.onnx";
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return "no test_data_set_* folder";
  for (const fs::path &set : sets) {
    Expected<LoadedSet> ls = loadWithInputs(model, set);
    if (!ls)
      return ls.error().message();
    Graph &g = *ls->graph;
    if (optimize)
      if (Error e = driver::optimize(g, target))
        return "optimize: " + e.message();
    driver::ExecOptions eo;
    eo.openclOptimize = opts.openclOptimize;
    eo.openclProgramCache = opts.openclProgramCache;
    Expected<std::vector<Tensor>> flat = driver::execute(g, ls->inputs.tensors, target, eo);
    if (!flat)
      return flat.error().message();
    Expected<std::vector<OnnxValue>> outs =
        driver::groupOutputs(ls->boundary.outputs, std::move(*flat));
    if (!outs)
      return outs.error().message();
    for (size_t k = 0;; ++k) {
      fs::path p = set / fmt::format("output_{}.pb", k);
      if (!fs::exists(p)) {
        if (k != outs->size())
          return fmt::format("{} outputs but {} expected", outs->size(), k);
        break;
      }
      if (k >= outs->size())
        return fmt::format("missing output {}", k);
      Expected<OnnxValue> want = driver::readValueFile(p.string(), (*outs)[k].form.kind);
      if (!want)
        return want.error().message();
      std::string diff = driver::compareValues(*want, (*outs)[k], opts.rtol, opts.atol);
      if (!diff.empty())
        return fmt::format("{}: output {}: {}", set.filename().string(), k, diff);
    }
  }
  return "";
}

/// Writes all of `data` to `fd`; false when the reader is gone.
bool writeAll(int fd, const std::string &data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Runs `f` in a forked child and returns what it returned ("" when the child died).
std::string inChild(const std::function<std::string()> &f) {
  int fds[2];
  if (pipe(fds) != 0)
    return "";
  std::cout.flush();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    (void)writeAll(fds[1], f());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0)
    msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return msg;
}

/// One test's verdict in a worker process: "" on success, else the reason it failed.
std::string runOne(const fs::path &dir, driver::Target target, const Options &opts) {
  return opts.check == "roundtrip" ? roundTripTest(dir, target.cpu) : runTest(dir, target, opts);
}

/// Runs the tests `names` (folders of `root`) in forked workers of at most `opts.batch` tests
/// each and calls `report(i, verdict)` for each test in order as its verdict arrives ("" when
/// it passed). A worker
/// sends "LENGTH\n" and the verdict per test; a test that crashes its worker, or takes more
/// than the timeout, gets that as its verdict and the next worker starts after it.
void runInWorkers(const fs::path &root, const std::vector<std::string> &names,
                  driver::Target target, const Options &opts,
                  const std::function<void(size_t, const std::string &)> &report) {
  size_t batch = static_cast<size_t>(std::max(opts.batch, 1));
  for (size_t next = 0; next < names.size();) {
    size_t end = std::min(next + batch, names.size());
    int fds[2];
    if (pipe(fds) != 0) {
      report(next++, fmt::format("pipe: {}", std::strerror(errno)));
      continue;
    }
    std::cout.flush();
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      report(next++, fmt::format("fork: {}", std::strerror(errno)));
      continue;
    }
    if (pid == 0) {
      close(fds[0]);
      for (size_t i = next; i < end; ++i) {
        std::string r = runOne(root / names[i], target, opts);
        if (!writeAll(fds[1], fmt::format("{}\n", r.size()) + r))
          break;
      }
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    std::string buf;
    bool ended = false; // the worker closed its end (finished or died)
    auto deadline = [&] {
      return std::chrono::steady_clock::now() + std::chrono::seconds(opts.timeoutSeconds);
    };
    auto due = deadline();
    while (next < end) {
      // A whole verdict in the buffer: report it and start the next test's clock.
      if (size_t nl = buf.find('\n'); nl != std::string::npos) {
        size_t len = std::stoul(buf.substr(0, nl));
        if (buf.size() >= nl + 1 + len) {
          report(next++, buf.substr(nl + 1, len));
          buf.erase(0, nl + 1 + len);
          due = deadline();
          continue;
        }
      }
      if (ended)
        break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          due - std::chrono::steady_clock::now());
      pollfd p{fds[0], POLLIN, 0};
      int ready = opts.timeoutSeconds > 0
                      ? poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)))
                      : poll(&p, 1, -1);
      if (ready < 0 && errno == EINTR)
        continue;
      if (ready == 0) { // the test in flight ran out of time
        kill(pid, SIGKILL);
        report(next++, fmt::format("timed out after {} s", opts.timeoutSeconds));
        break;
      }
      char chunk[4096];
      ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n > 0)
        buf.append(chunk, static_cast<size_t>(n));
      else
        ended = true;
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (next < end && ended) { // the worker died in the test in flight
      if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        report(next++, fmt::format("crashed with signal {} ({})", sig, strsignal(sig)));
      } else {
        report(next++, fmt::format("the worker exited with status {} without a verdict",
                                   WIFEXITED(st) ? WEXITSTATUS(st) : -1));
      }
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  const char *envShared = std::getenv("NNC_SHARED");
  opts.shared = envShared ? envShared : NNC_SHARED_DIR;
  CLI::App app{"Runs the ONNX backend node tests listed in tier1.txt through nnc."};
  app.add_option("--shared", opts.shared, "The shared folder (onnx-tests/ inside)");
  app.add_option("--list", opts.list, "Test list (default: SHARED/onnx-tests/tier1.txt)");
  app.add_option("--xfail", opts.xfail,
                 "Tests expected to fail on this target, one per line ('#' comments)");
  app.add_option("--target", opts.target, "Target to run on");
  app.add_option("--cpu", opts.cpu,
                 "CPU code: native, x86-64-v4 or x86-64-v3 (default: $NNC_CPU, else native)");
  app.add_option("--filter", opts.filter, "Only tests whose name matches this regex");
  app.add_option("--suite", opts.suite, "node (ONNX node tests) or models (shared/models)")
      ->check(CLI::IsMember({"node", "models"}));
  app.add_option("--check", opts.check, "run (compare outputs) or roundtrip (text IR)")
      ->check(CLI::IsMember({"run", "roundtrip"}));
  app.add_option("--rtol", opts.rtol, "Relative tolerance");
  app.add_option("--atol", opts.atol, "Absolute tolerance");
  app.add_flag("!--no-optimize", opts.optimize, "Skip the graph optimization pipeline");
  app.add_flag("!--opencl-no-program-cache", opts.openclProgramCache,
               "opencl: build every program from source without nnc's program-binary cache "
               "(PoCL then compiles each kernel once, not also for the binary)");
  app.add_flag("!--opencl-opt-disable", opts.openclOptimize,
               "opencl: build programs with -cl-opt-disable (much faster builds)");
  app.add_option("--opencl-passes-for", opts.openclType,
                 "opencl: run the graph passes of this device type (gpu, cpu) instead of the "
                 "device's own, e.g. a GPU's conv lowering on PoCL");
  app.add_option("--timeout", opts.timeoutSeconds, "Seconds per test (0: no limit)");
  app.add_option("--batch", opts.batch,
                 "Tests per worker process (1: each test in a process of its own)")
      ->check(CLI::PositiveNumber);
  app.add_flag("-v,--verbose", opts.verbose, "Print every test");
  CLI11_PARSE(app, argc, argv);

  Expected<CpuTarget> cpu =
      opts.cpu.empty() ? CpuTarget::fromEnvironment() : CpuTarget::parse(opts.cpu);
  if (!cpu) {
    bool known = opts.cpu.empty() ? bool(CpuTarget::fromEnvironment(/*runsHere=*/false))
                                  : bool(CpuTarget::parse(opts.cpu, /*runsHere=*/false));
    if (known) { // a level this host cannot run
      std::cout << "SKIPPED: " << cpu.error().message() << "\n";
      return 77;
    }
    std::cerr << "nnc-conformance: --cpu: " << cpu.error().message() << "\n";
    return 2;
  }
  // The target, made once here but for an OpenCL device, which each test's child chooses.
  Expected<driver::Target> target = driver::parseTarget(opts.target, *cpu);
  if (!target) {
    std::cerr << "nnc-conformance: " << target.error().message() << "\n";
    return 2;
  }
  target->openclType = opts.openclType;
  if (*target == driver::Target::OpenCL) {
    // Probed in a child: the OpenCL driver must not start in this process, whose forked
    // children would inherit it without its threads (PoCL's pthread device then never runs a
    // command a second executable enqueues).
    std::string probe = inChild([&]() -> std::string {
      Expected<OpenCLDeviceInfo> d = pickOpenCLDevice(target->platform, target->device);
      if (!d)
        return "!" + d.error().message();
      return fmt::format("OpenCL device {}.{}: {} ({})", d->platform, d->device, d->deviceName,
                         d->platformName);
    });
    if (probe.empty() || probe[0] == '!') {
      std::cout << "SKIPPED: no OpenCL device to run --target " << opts.target
                << " on: " << (probe.empty() ? "the probe crashed" : probe.substr(1)) << "\n";
      return 77;
    }
    std::cout << probe << "\n";
  }
  fs::path nodeDir = fs::path(opts.shared) / "onnx-tests" / "node";
  std::vector<std::string> tests;
  if (opts.suite == "models") {
    nodeDir = fs::path(opts.shared) / "models";
    if (!fs::is_directory(nodeDir)) {
      std::cout << "SKIPPED: models not found at " << nodeDir.string()
                << " (set NNC_SHARED to the shared folder)\n";
      return 77;
    }
    for (const auto &e : fs::directory_iterator(nodeDir))
      if (fs::exists(e.path() / "model.onnx"))
        tests.push_back(e.path().filename().string());
    std::sort(tests.begin(), tests.end());
  } else {
    if (opts.list.empty())
      opts.list = (fs::path(opts.shared) / "onnx-tests" / "tier1.txt").string();
    if (!fs::is_directory(nodeDir) || !fs::exists(opts.list)) {
      std::cout << "SKIPPED: ONNX node tests not found at " << nodeDir.string()
                << " (set NNC_SHARED to the shared folder)\n";
      return 77;
    }
    std::ifstream list(opts.list);
    for (std::string line; std::getline(list, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
        line.pop_back();
      if (!line.empty() && line[0] != '#')
        tests.push_back(line);
    }
  }
  std::set<std::string> xfail;
  if (!opts.xfail.empty()) {
    std::ifstream in(opts.xfail);
    if (!in) {
      std::cerr << "nnc-conformance: --xfail " << opts.xfail << ": cannot read\n";
      return 2;
    }
    for (std::string line; std::getline(in, line);) {
      line = line.substr(0, line.find('#'));
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      size_t b = line.find_first_not_of(" \t");
      if (b != std::string::npos)
        xfail.insert(line.substr(b));
    }
  }
  std::regex filter(opts.filter.empty() ? ".*" : opts.filter);
  int passed = 0, failed = 0, xfailed = 0, xpassed = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> chosen;
  for (const std::string &t : tests)
    if (std::regex_search(t, filter))
      chosen.push_back(t);
  runInWorkers(nodeDir, chosen, *target, opts, [&](size_t i, const std::string &r) {
    const std::string &t = chosen[i];
    if (xfail.count(t)) {
      if (r.empty()) {
        ++xpassed;
        std::cout << "XPASS " << t << ": passes but is listed in " << opts.xfail
                  << " (remove it from the list)\n";
      } else {
        ++xfailed;
        std::cout << "XFAIL " << t << ": " << r << "\n";
      }
    } else if (r.empty()) {
      ++passed;
      if (opts.verbose)
        std::cout << "PASS " << t << "\n";
    } else {
      ++failed;
      std::cout << "FAIL " << t << ": " << r << "\n";
    }
    std::cout.flush();
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("{} suite, {} check, target {}{}: {} tests in {:.1f} s\n", opts.suite,
                           opts.check, opts.target,
                           *target == driver::Target::Cpu ? " (" + cpu->str() + ")" : "",
                           passed + failed + xfailed + xpassed, secs);
  std::cout << passed << " passed, " << failed << " failed";
  if (!opts.xfail.empty())
    std::cout << ", " << xfailed << " expected failures (XFAIL), " << xpassed
              << " unexpected passes (XPASS)";
  std::cout << "\n";
  return failed == 0 && xpassed == 0 ? 0 : 1;
}

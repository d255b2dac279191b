// Runs ONNX backend node tests (tier1.txt) through the importer and a target, comparing
// with the expected outputs. Each test runs in a forked child, so a crash or hang in one
// test is reported as that test's failure instead of ending the run.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>

#include "driver/Driver.h"

namespace fs = std::filesystem;
using namespace nnc;

namespace {

struct Options {
  std::string shared;
  std::string list;
  std::string target = "interp";
  std::string filter;
  bool optimize = true;
  bool verbose = false;
  int timeoutSeconds = 120;
};

/// Runs one test; returns "" on success or the reason it failed.
std::string runTest(const fs::path &dir, driver::Target target, bool optimize) {
  fs::path model = dir / "model.onnx";
  Expected<std::vector<std::string>> names = driver::modelInputNames(model.string());
  if (!names)
    return names.error().message();
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return "no test_data_set_* folder";
  for (const fs::path &set : sets) {
    std::vector<Tensor> inputs;
    std::map<std::string, Tensor> known;
    for (size_t k = 0;; ++k) {
      fs::path p = set / fmt::format("input_{}.pb", k);
      if (!fs::exists(p))
        break;
      Expected<Tensor> t = driver::readTensorFile(p.string());
      if (!t)
        return t.error().message();
      if (k < names->size())
        known[(*names)[k]] = *t;
      inputs.push_back(*t);
    }
    Expected<std::unique_ptr<Graph>> g = driver::loadModel(model.string(), known);
    if (!g)
      return g.error().message();
    if (optimize)
      if (Error e = driver::optimize(**g))
        return "optimize: " + e.message();
    Expected<std::vector<Tensor>> outs = driver::execute(**g, inputs, target);
    if (!outs)
      return outs.error().message();
    for (size_t k = 0;; ++k) {
      fs::path p = set / fmt::format("output_{}.pb", k);
      if (!fs::exists(p)) {
        if (k != outs->size())
          return fmt::format("{} outputs but {} expected", outs->size(), k);
        break;
      }
      Expected<Tensor> want = driver::readTensorFile(p.string());
      if (!want)
        return want.error().message();
      if (k >= outs->size())
        return fmt::format("missing output {}", k);
      std::string diff = driver::compareTensors(*want, (*outs)[k]);
      if (!diff.empty())
        return fmt::format("{}: output {}: {}", set.filename().string(), k, diff);
    }
  }
  return "";
}

/// Forks, runs the test in the child with a timeout, and returns its verdict.
std::string runIsolated(const fs::path &dir, driver::Target target, const Options &opts) {
  int fds[2];
  if (pipe(fds) != 0)
    return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(opts.timeoutSeconds));
    std::string r = runTest(dir, target, opts.optimize);
    if (r.empty())
      r = "OK";
    (void)!write(fds[1], r.data(), r.size());
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
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return sig == SIGALRM ? fmt::format("timed out after {} s", opts.timeoutSeconds)
                          : fmt::format("crashed with signal {} ({})", sig, strsignal(sig));
  }
  if (msg == "OK")
    return "";
  return msg.empty() ? "child exited without a verdict" : msg;
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  const char *envShared = std::getenv("NNC_SHARED");
  opts.shared = envShared ? envShared : NNC_SHARED_DIR;
  CLI::App app{"Runs the ONNX backend node tests listed in tier1.txt through nnc."};
  app.add_option("--shared", opts.shared, "The shared folder (onnx-tests/ inside)");
  app.add_option("--list", opts.list, "Test list (default: SHARED/onnx-tests/tier1.txt)");
  app.add_option("--target", opts.target, "Target to run on");
  app.add_option("--filter", opts.filter, "Only tests whose name matches this regex");
  app.add_flag("!--no-optimize", opts.optimize, "Skip the graph optimization pipeline");
  app.add_option("--timeout", opts.timeoutSeconds, "Seconds per test");
  app.add_flag("-v,--verbose", opts.verbose, "Print every test");
  CLI11_PARSE(app, argc, argv);

  Expected<driver::Target> target = driver::parseTarget(opts.target);
  if (!target) {
    std::cerr << "nnc-conformance: " << target.error().message() << "\n";
    return 2;
  }
  fs::path nodeDir = fs::path(opts.shared) / "onnx-tests" / "node";
  if (opts.list.empty())
    opts.list = (fs::path(opts.shared) / "onnx-tests" / "tier1.txt").string();
  if (!fs::is_directory(nodeDir) || !fs::exists(opts.list)) {
    std::cout << "SKIPPED: ONNX node tests not found at " << nodeDir.string()
              << " (set NNC_SHARED to the shared folder)\n";
    return 77;
  }
  std::ifstream list(opts.list);
  std::vector<std::string> tests;
  for (std::string line; std::getline(list, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    if (!line.empty() && line[0] != '#')
      tests.push_back(line);
  }
  std::regex filter(opts.filter.empty() ? ".*" : opts.filter);
  int passed = 0, failed = 0;
  auto start = std::chrono::steady_clock::now();
  for (const std::string &t : tests) {
    if (!std::regex_search(t, filter))
      continue;
    std::string r = runIsolated(nodeDir / t, *target, opts);
    if (r.empty()) {
      ++passed;
      if (opts.verbose)
        std::cout << "PASS " << t << "\n";
    } else {
      ++failed;
      std::cout << "FAIL " << t << ": " << r << "\n";
    }
    std::cout.flush();
  }
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("target {}: {} tests in {:.1f} s\n", opts.target, passed + failed,
                           secs);
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

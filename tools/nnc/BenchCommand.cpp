// `nnc bench MODEL`: compile time and run latency, optionally beside ONNX Runtime, and the
// OpenCL profile.
#include "Command.h"
#include "CommandUtil.h"
#include "CpuProfile.h"
#include "OrtPeer.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/OpenCL.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

namespace nnc::tools {

namespace {

struct BenchOptions {
  std::string model;
  std::string target = "cpu";
  std::string cpu; // --cpu
  std::string precision = "fp32";
  std::string inputsDir;
  std::vector<std::string> inputs; // NAME=FILE
  std::vector<std::string> shapes; // NAME=D0xD1
  int threads = 0;
  int iterations = 20;
  int warmup = 3;
  bool json = false;
  bool verbose = false;
  bool profile = false;
  std::string trace;  ///< cpu: a Chrome trace of the profiled kernels.
  std::string passes; ///< Empty: the default pipeline.
  std::string tuningCache;
  bool requireTuned = false;
  /// "ort": ONNX Runtime beside nnc, alternating; "tuning:FILE": nnc again with the tuning
  /// cache FILE, alternating (an A/B of schedules that a noisy host's slow spells hit alike).
  std::string compare;
  bool ortSpin = false;
};

/// `nnc bench --profile` on OpenCL: device time per kernel (profiling events), transfers per
/// run, and the host overhead (wall time per run not spent in device commands).
void printOpenCLProfile(const OpenCLExecutable &exe, double medianMs) {
  int64_t runs = std::max<int64_t>(exe.runs(), 1);
  std::vector<KernelTime> times = exe.kernelTimes();
  double kernelMs = 0;
  for (const KernelTime &k : times)
    kernelMs += k.deviceMs;
  std::vector<size_t> order(times.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return times[a].deviceMs > times[b].deviceMs; });
  const OpenCLDeviceInfo &d = exe.device();
  std::cout << fmt::format("profile on opencl:{}.{} ({}), {} runs: {} kernels, device time "
                           "{:.3f} ms per run\n",
                           d.platform, d.device, d.deviceName, runs, times.size(),
                           kernelMs / double(runs));
  for (size_t i = 0; i < order.size() && i < 25; ++i)
    std::cout << fmt::format(
        "  {:10.3f} ms {:5.1f}%  {}\n", times[order[i]].deviceMs / double(runs),
        kernelMs > 0 ? 100 * times[order[i]].deviceMs / kernelMs : 0.0, times[order[i]].name);
  if (order.size() > 25)
    std::cout << fmt::format("  ... {} more kernels\n", order.size() - 25);
  TransferStats t = exe.runTransfers(), w = exe.loadTransfers();
  double transferMs = exe.transferDeviceMs() / double(runs);
  std::cout << fmt::format("transfers per run: {} up ({} bytes), {} down ({} bytes), {:.3f} ms "
                           "device time; at load: {} up ({} bytes of weights)\n",
                           double(t.uploads) / double(runs), t.uploadBytes / runs,
                           double(t.downloads) / double(runs), t.downloadBytes / runs, transferMs,
                           w.uploads, w.uploadBytes);
  std::cout << fmt::format("host overhead: {:.3f} ms per run (median wall {:.3f} ms - device "
                           "{:.3f} ms)\n",
                           std::max(0.0, medianMs - kernelMs / double(runs) - transferMs), medianMs,
                           kernelMs / double(runs) + transferMs);
}

/// The largest |a - b| over every element of every output (as doubles); infinity when the
/// outputs differ in number or shape.
double maxAbsDifference(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
  if (a.size() != b.size())
    return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].extents() != b[i].extents())
      return INFINITY;
    for (int64_t k = 0; k < a[i].numElements(); ++k)
      m = std::max(m, std::fabs(a[i].elementAsDouble(k) - b[i].elementAsDouble(k)));
  }
  return m;
}

int benchCommand(const BenchOptions &o) {
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, o.precision))
    return fail(e);
  warnIfBf16IsSlower(*target, o.threads);
  if (o.iterations < 1 || o.warmup < 0 || o.threads < 0)
    return fail("--iterations must be at least 1, --warmup and --threads at least 0");
  // The model file is read once (its inputs listed, then imported); "compile" counts from here.
  auto t0 = Clock::now();
  Expected<std::unique_ptr<driver::ModelFile>> file = driver::ModelFile::open(o.model);
  if (!file)
    return fail(file.takeError());
  Expected<std::map<std::string, Tensor>> byName =
      readInputs((*file)->inputNames(), o.inputsDir, o.inputs);
  if (!byName)
    return fail(byName.takeError());
  Expected<std::map<std::string, Extents>> shapeSpecs = parseShapeSpecs(o.shapes);
  if (!shapeSpecs)
    return fail(shapeSpecs.takeError());

  Expected<std::unique_ptr<Graph>> g = (*file)->load(*byName);
  if (!g)
    return fail(g.takeError());
  if (Error e = driver::runPasses(**g, *target, o.passes))
    return fail(e);
  // Inputs not given are random, of the declared (or --shape) extents.
  std::vector<Tensor> inputs;
  std::mt19937 rng(42);
  for (const Value *v : (*g)->inputs()) {
    auto it = byName->find(v->name());
    if (it != byName->end()) {
      inputs.push_back(it->second);
      continue;
    }
    auto sit = shapeSpecs->find(v->name());
    Extents e = sit != shapeSpecs->end() ? sit->second : defaultExtents(*v);
    inputs.push_back(randomTensor(v->dtype(), e, rng));
  }
  // The inputs' extents: the executable of each compiled model is the one for these shapes.
  std::vector<Extents> shapes;
  for (const Tensor &t : inputs)
    shapes.push_back(t.extents());
  bool profile = o.profile || !o.trace.empty();
  if (profile && *target == driver::Target::Interp)
    return fail("--profile and --trace go with --target cpu or opencl");
  if (!o.trace.empty() && *target != driver::Target::Cpu)
    return fail("--trace goes with --target cpu (on OpenCL, --profile gives device times)");
  // The peer: the same model file, inputs and thread count, timed alternately with nnc.
  std::unique_ptr<tools::OrtPeer> ort;
  std::vector<Tensor> ortInputs;
  const std::string kTuningPeer = "tuning:";
  std::string peerCache; // --compare tuning:FILE
  if (o.compare.rfind(kTuningPeer, 0) == 0) {
    peerCache = o.compare.substr(kTuningPeer.size());
    if (peerCache.empty())
      return fail("--compare tuning:FILE: name the tuning cache");
    if (*target == driver::Target::Interp)
      return fail("--compare tuning:FILE goes with --target cpu or opencl");
    if (std::error_code ec; !std::filesystem::is_regular_file(peerCache, ec))
      return fail(fmt::format("--compare tuning:{}: no such file", peerCache));
  } else if (!o.compare.empty()) {
    if (o.compare != "ort")
      return fail(fmt::format("--compare: unknown peer '{}' (known: ort, tuning:FILE)", o.compare));
    if (!isOnnx(o.model))
      return fail("--compare ort needs an .onnx model (ONNX Runtime reads the same file)");
    int ortThreads = *target == driver::Target::Cpu ? effectiveThreads(o.threads) : 1;
    Expected<std::unique_ptr<tools::OrtPeer>> peer =
        tools::OrtPeer::open(o.model, ortThreads, o.ortSpin);
    if (!peer)
      return fail(peer.takeError());
    ort = std::move(*peer);
    for (const std::string &name : ort->inputNames()) {
      const std::vector<Value *> &ins = (*g)->inputs();
      auto it =
          std::find_if(ins.begin(), ins.end(), [&](const Value *v) { return v->name() == name; });
      if (it == ins.end())
        return fail(fmt::format("--compare ort: ONNX Runtime's input '{}' is not an input of "
                                "nnc's graph",
                                name));
      ortInputs.push_back(inputs[static_cast<size_t>(it - ins.begin())]);
    }
  }
  driver::ExecOptions eo;
  eo.threads = o.threads;
  eo.verbose = o.verbose;
  eo.profile = o.profile;
  eo.tuningCache = o.tuningCache;
  eo.passes = o.passes;
  Expected<std::unique_ptr<driver::Runner>> runner = driver::Runner::create(**g, *target, eo);
  if (!runner)
    return fail(runner.takeError());
  std::string cache = "none";
  TuningUse tuningUse;
  double kernelCompileMs = 0;
  int64_t kernels = -1;
  if (CpuModel *cpu = (*runner)->cpuModel()) {
    Expected<Executable *> exe = cpu->executableFor(shapes);
    if (exe) {
      cache = (*exe)->fromCache() ? "hit" : "miss";
      kernelCompileMs = (*exe)->compileMs();
      kernels = static_cast<int64_t>((*exe)->kernels().size());
      tuningUse = (*exe)->tuningUse();
      if (int rc = reportTuning(**exe, o.requireTuned))
        return rc;
    } else if (Expected<std::vector<Tensor>> first = (*runner)->run(inputs); !first) {
      return fail(first.takeError()); // shapes that depend on input values compile here
    }
  }
  double compileMs = msSince(t0);
  // --compare tuning:FILE: the same graph compiled again, its tunable kernels configured from
  // FILE (the defaults where FILE has no record), compiled here so no timed run compiles.
  std::unique_ptr<driver::Runner> tuned;
  TuningUse peerTuningUse;
  if (!peerCache.empty()) {
    driver::ExecOptions peo = eo;
    peo.profile = false;
    peo.tuningCache = peerCache;
    Expected<std::unique_ptr<driver::Runner>> r = driver::Runner::create(**g, *target, peo);
    if (!r)
      return fail(r.takeError());
    tuned = std::move(*r);
    if (CpuModel *cpu = tuned->cpuModel()) {
      Expected<Executable *> exe = cpu->executableFor(shapes);
      if (exe)
        peerTuningUse = (*exe)->tuningUse();
    }
  }

  for (int i = 0; i < o.warmup; ++i) {
    Expected<std::vector<Tensor>> outs = (*runner)->run(inputs);
    if (!outs)
      return fail(outs.takeError());
  }
  // The peer's warmup, and how far its outputs are from nnc's (same inputs).
  auto peerRun = [&]() { return ort ? ort->run(ortInputs) : tuned->run(inputs); };
  bool peer = ort || tuned;
  double peerMaxDiff = 0;
  if (peer) {
    Expected<std::vector<Tensor>> mine = (*runner)->run(inputs);
    if (!mine)
      return fail(mine.takeError());
    for (int i = 0; i < std::max(o.warmup, 1); ++i) {
      Expected<std::vector<Tensor>> theirs = peerRun();
      if (!theirs)
        return fail(theirs.takeError());
      if (i == 0)
        peerMaxDiff = maxAbsDifference(*mine, *theirs);
    }
  }
  OpenCLExecutable *profiled = nullptr;
  Executable *cpuProfiled = nullptr;
  if (profile) {
    Expected<Executable *> exe = (*runner)->cpuModel()->executableFor(shapes);
    if (!exe)
      return fail(exe.takeError());
    profiled = dynamic_cast<OpenCLExecutable *>(*exe);
    if (profiled)
      profiled->resetRunCounters(); // the timed runs only
    else if ((*exe)->setProfiling(true))
      cpuProfiled = *exe;
  }
  std::vector<double> times, peerTimes, cpuTimes;
  // The process's CPU time (all its threads, a spinning pool's too): at 1 thread, on a host
  // shared with other work, a run without the scheduler's waits.
  auto processCpuMs = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  };
  for (int i = 0; i < o.iterations; ++i) {
    // With a peer, the order flips every iteration so neither always runs on a warm cache.
    for (int turn = 0; turn < (peer ? 2 : 1); ++turn) {
      bool peerTurn = peer && (turn == 0) == (i % 2 == 1);
      auto t = Clock::now();
      double cpu0 = processCpuMs();
      Expected<std::vector<Tensor>> outs = peerTurn ? peerRun() : (*runner)->run(inputs);
      if (!outs)
        return fail(outs.takeError());
      (peerTurn ? peerTimes : times).push_back(msSince(t));
      if (!peerTurn)
        cpuTimes.push_back(processCpuMs() - cpu0);
    }
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = medianOf(times);
  // The peer's figures (ONNX Runtime or the --compare tuning: build), once for every report.
  double peerMedian = peer ? medianOf(peerTimes) : 0;
  double peerMin = peer ? *std::min_element(peerTimes.begin(), peerTimes.end()) : 0;
  double ratio = peer ? median / peerMedian : 0;
  double p90 = sorted[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * double(n))) - 1)];
  double mean = 0;
  for (double t : times)
    mean += t / double(n);
  int threads = *target == driver::Target::Cpu ? effectiveThreads(o.threads) : 1;
  std::optional<ProfileReport> report;
  if (cpuProfiled) {
    cpuProfiled->setProfiling(false);
    // After the timed runs: measuring the peak the first time takes about a second.
    Expected<MachinePeak> peak = machinePeak(o.threads, target->cpu);
    if (!peak)
      return fail(peak.takeError());
    report = makeProfileReport(*cpuProfiled, median, *peak);
    if (!o.trace.empty()) {
      std::ofstream f(o.trace, std::ios::binary);
      f << profileTrace(*report, *cpuProfiled);
      f.close();
      if (!f)
        return fail(fmt::format("--trace {}: cannot write", o.trace));
    }
  }
  if (o.json) {
    std::cout << fmt::format(
        "{{\"model\": \"{}\", \"target\": \"{}\", \"threads\": {}, \"iterations\": {}, "
        "\"warmup\": {}, \"compile_ms\": {:.3f}, \"kernel_compile_ms\": {:.3f}, "
        "\"compile_cache\": \"{}\", \"median_ms\": {:.6f}, \"p90_ms\": {:.6f}, "
        "\"min_ms\": {:.6f}, \"mean_ms\": {:.6f}, \"median_cpu_ms\": {:.6f}, "
        "\"tuned_kernels\": {}, \"tunable_kernels\": {}{}{}{}{}}}\n",
        jsonEscape(o.model), driver::targetName(*target), threads, o.iterations, o.warmup,
        compileMs, kernelCompileMs, cache, median, p90, sorted.front(), mean,
        medianOf(cpuTimes), tuningUse.tuned,
        tuningUse.tunable, kernels >= 0 ? fmt::format(", \"kernels\": {}", kernels) : std::string(),
        ort ? fmt::format(", \"peer\": \"ort\", \"ort_version\": \"{}\", \"ort_median_ms\": "
                          "{:.6f}, \"ort_min_ms\": {:.6f}, \"ratio\": {:.4f}, "
                          "\"ort_max_abs_diff\": {:.3g}",
                          ort->version(), peerMedian, peerMin, ratio, peerMaxDiff)
            : std::string(),
        tuned ? fmt::format(", \"peer\": \"tuning\", \"peer_cache\": \"{}\", "
                            "\"peer_tuned_kernels\": {}, \"peer_median_ms\": {:.6f}, "
                            "\"peer_min_ms\": {:.6f}, \"ratio\": {:.4f}, "
                            "\"peer_max_abs_diff\": {:.3g}",
                            jsonEscape(peerCache), peerTuningUse.tuned, peerMedian, peerMin, ratio,
                            peerMaxDiff)
              : std::string(),
        report ? ", \"profile\": " + profileJson(*report) : std::string());
  } else {
    std::cout << fmt::format("{}: target {}, {} thread(s)\n", o.model, driver::targetName(*target),
                             threads);
    std::cout << fmt::format("compile {:.2f} ms{}\n", compileMs,
                             cache == "none" ? "" : ", compile cache: " + cache);
    std::cout << fmt::format("{} iterations ({} warmup): median {:.3f} ms, p90 {:.3f} ms, min "
                             "{:.3f} ms\n",
                             o.iterations, o.warmup, median, p90, sorted.front());
    if (ort)
      std::cout << fmt::format("onnxruntime {} ({}), alternating: median {:.3f} ms, min {:.3f} "
                               "ms; nnc/ort {:.3f}; max |nnc - ort| {:.3g}\n",
                               ort->version(), ort->libraryPath(), peerMedian, peerMin, ratio,
                               peerMaxDiff);
    if (tuned)
      std::cout << fmt::format("tuning cache {} ({} of {} tunable kernels from it), alternating: "
                               "median {:.3f} ms, min {:.3f} ms; nnc/it {:.3f}; max |nnc - it| "
                               "{:.3g}\n",
                               peerCache, peerTuningUse.tuned, peerTuningUse.tunable, peerMedian,
                               peerMin, ratio, peerMaxDiff);
  }
  if (profiled)
    printOpenCLProfile(*profiled, median);
  if (report && !o.json)
    std::cout << profileTable(*report);
  return 0;
}

class BenchCommand : public Command {
public:
  explicit BenchCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("bench", "Measure compile time and run latency");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("--target", o_.target, "cpu (default), interp, opencl[:P.D] or auto");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--precision", o_.precision, kPrecisionOptionHelp);
    cmd_->add_flag("--profile", o_.profile,
                   "cpu: each kernel's time, graph nodes and rate against this machine's "
                   "peak, worst first; opencl: device time per kernel, transfers and host "
                   "overhead");
    cmd_->add_option("--trace", o_.trace,
                     "cpu: write the profiled kernels as a Chrome trace (Perfetto); implies "
                     "--profile");
    cmd_->add_option("--threads", o_.threads, "cpu: threads (default: all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd_->add_option("--iterations", o_.iterations, "Timed runs (default 20)");
    cmd_->add_option("--warmup", o_.warmup, "Untimed runs first (default 3)");
    cmd_->add_option("--passes", o_.passes,
                     "Pipeline to run instead of the standard one (`none`: no pass)");
    cmd_->add_option("--inputs-dir", o_.inputsDir, "Inputs (default: random)");
    cmd_->add_option("--input", o_.inputs, "NAME=FILE (.pb or .npy); repeatable");
    cmd_->add_option("--shape", o_.shapes, "NAME=D0xD1x... for a symbolic random input");
    cmd_->add_flag("--json", o_.json, "Print one JSON object");
    cmd_->add_flag("-v,--verbose", o_.verbose,
                   "Say when the cache of per-shape programs drops one (symbolic shapes)");
    cmd_->add_option("--cache", o_.tuningCache,
                     "cpu, opencl: the tuning cache (default "
                     "$NNC_TUNING_CACHE or ~/.cache/nnc/tuning.db)");
    cmd_->add_flag("--require-tuned", o_.requireTuned,
                   "cpu: fail when a tunable kernel has no tuned config");
    cmd_->add_option("--compare", o_.compare,
                     "ort: time ONNX Runtime (libonnxruntime.so via dlopen; NNC_ORT_LIBRARY "
                     "or bench/ort/node_modules) alternately on the same inputs and threads; "
                     "tuning:FILE: nnc again with the tuning cache FILE, alternately (an A/B "
                     "of kernel configs)");
    cmd_->add_flag("--ort-spin", o_.ortSpin,
                   "With --compare ort: let ORT's idle pool threads spin (its default; off "
                   "here, as nnc's workers sleep after a bounded spin)");
  }
  int run() override { return benchCommand(o_); }

private:
  BenchOptions o_;
};

} // namespace

std::unique_ptr<Command> addBenchCommand(CLI::App &app) {
  return std::make_unique<BenchCommand>(app);
}

} // namespace nnc::tools

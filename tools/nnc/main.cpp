// nnc: the compiler's command-line interface (run, bench, tune, cache, check, inspect, compile).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>

#include "Inspect.h"
#include "OrtPeer.h"
#include "Tune.h"
#include "driver/Driver.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

namespace fs = std::filesystem;
using namespace nnc;

namespace {

int fail(const std::string &msg) {
  std::cerr << "nnc: error: " << msg << "\n";
  return 1;
}

int fail(const Error &e) { return fail(e.message()); }

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Prints every unsupported operator and attribute; returns true when there were any.
bool reportUnsupported(const std::string &model, const std::vector<OnnxIssue> &issues) {
  if (issues.empty())
    return false;
  std::cerr << "nnc: error: " << model << ": " << issues.size()
            << " unsupported operator(s) or attribute(s):\n";
  for (const OnnxIssue &i : issues)
    std::cerr << "  node '" << i.node << "' (" << i.opType << "): " << i.message << "\n";
  return true;
}

bool isOnnx(const std::string &path) { return fs::path(path).extension() == ".onnx"; }

// ---- run -------------------------------------------------------------------------------------

struct RunOptions {
  std::string model;
  std::string inputsDir;
  std::string outputDir;
  std::string expectedDir;
  std::vector<std::string> inputs; // NAME=FILE
  std::string target = "cpu";
  std::string outputFormat = "pb";
  int threads = 0;
  bool optimize = true;
  bool quiet = false;
  std::string tuningCache;
  bool requireTuned = false;
};

/// Prints the tuned-kernel line on stderr; fails under --require-tuned when one is missing.
int reportTuning(const Executable &exe, bool requireTuned) {
  const TuningUse &u = exe.tuningUse();
  if (u.tunable == 0)
    return 0;
  std::cerr << "nnc: " << tools::tunedKernelsLine(u) << "\n";
  if (requireTuned && u.tuned < u.tunable)
    return fail(fmt::format("--require-tuned: {} of {} tunable kernels have no tuned config "
                            "for this device (run `nnc tune`)",
                            u.tunable - u.tuned, u.tunable));
  return 0;
}

/// The threads a pool of `requested` threads has (0: all cores).
int effectiveThreads(int requested) {
  if (requested > 0)
    return requested;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

/// Reads the inputs named by --inputs-dir (input_K.pb by position) and --input NAME=FILE, by
/// input name.
Expected<std::map<std::string, Tensor>> readInputs(const std::vector<std::string> &names,
                                                   const std::string &inputsDir,
                                                   const std::vector<std::string> &specs) {
  std::map<std::string, Tensor> byName;
  if (!inputsDir.empty()) {
    if (!fs::is_directory(inputsDir))
      return makeError("--inputs-dir {}: no such directory", inputsDir);
    for (size_t k = 0; k < names.size(); ++k) {
      fs::path p = fs::path(inputsDir) / fmt::format("input_{}.pb", k);
      if (!fs::exists(p))
        continue;
      NNC_ASSIGN_OR_RETURN(byName[names[k]], driver::readTensorFile(p.string()));
    }
  }
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return makeError("--input '{}': expected NAME=FILE", spec);
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    if (std::find(names.begin(), names.end(), name) == names.end())
      return makeError("--input '{}': the model has no input named '{}'", spec, name);
    NNC_ASSIGN_OR_RETURN(byName[name], driver::readTensorFile(file));
  }
  return byName;
}

/// Parses --shape NAME=2x3x4 (NAME= for a scalar) into extents by input name.
Expected<std::map<std::string, Extents>> parseShapeSpecs(const std::vector<std::string> &specs) {
  std::map<std::string, Extents> shapes;
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return makeError("--shape '{}': expected NAME=D0xD1x... (e.g. x=1x3x224x224)", spec);
    Extents e;
    std::string dims = spec.substr(eq + 1);
    size_t pos = 0;
    while (pos < dims.size()) {
      size_t x = dims.find('x', pos);
      std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char *end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        return makeError("--shape '{}': '{}' is not a dimension", spec, d);
      e.push_back(v);
      if (x == std::string::npos)
        break;
      pos = x + 1;
    }
    shapes[spec.substr(0, eq)] = e;
  }
  return shapes;
}

/// The extents of an input's declared type, each symbolic dim taken as 1 (with a note on
/// stderr; --shape gives other sizes).
Extents defaultExtents(const Value &v) {
  Extents e;
  for (const Dim &d : v.shape())
    e.push_back(d.isStatic() ? d.value() : 1);
  if (!isStatic(v.shape()))
    std::cerr << fmt::format("nnc: note: input '{}' is {}; using {} (set it with --shape "
                             "{}=D0xD1x...)\n",
                             v.name(), v.type().str(), extentsStr(e), v.name());
  return e;
}

/// The concrete extents of each graph input: from `given`, else its declared type.
Expected<std::vector<Extents>> inputExtents(const Graph &g,
                                            const std::map<std::string, Extents> &given) {
  std::vector<Extents> out;
  for (const Value *v : g.inputs()) {
    auto it = given.find(v->name());
    if (it != given.end()) {
      out.push_back(it->second);
      continue;
    }
    out.push_back(defaultExtents(*v));
  }
  for (const auto &[name, e] : given) {
    bool found = false;
    for (const Value *v : g.inputs())
      found |= v->name() == name;
    if (!found)
      return makeError("--shape {}: the model has no input named '{}'", name, name);
  }
  return out;
}

/// Loads and optimizes a model, then specializes its input shapes (for inspect and compile).
Expected<std::unique_ptr<Graph>> loadStatic(const std::string &model,
                                            const std::vector<std::string> &shapeSpecs) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, driver::loadModel(model));
  NNC_TRY(driver::optimize(*g));
  NNC_ASSIGN_OR_RETURN(auto given, parseShapeSpecs(shapeSpecs));
  NNC_ASSIGN_OR_RETURN(std::vector<Extents> shapes, inputExtents(*g, given));
  Expected<std::unique_ptr<Graph>> s = specializeShapes(*g, shapes, driver::interpreterEvaluator());
  if (!s)
    return makeError("{}; `nnc run` and `nnc bench` compile such a graph in stages as the data "
                     "arrives, but inspect and compile need every shape ahead of time",
                     s.error().message());
  return s;
}

/// Every non-constant node lowered to kernels, in order (as Executable::compile does).
Expected<std::vector<kir::Kernel>> lowerGraph(const Graph &g) {
  std::vector<kir::Kernel> kernels;
  std::vector<Node *> nodes = g.nodes();
  NNC_ASSIGN_OR_RETURN(std::vector<LoweringUnit> units, loweringUnits(g));
  for (const LoweringUnit &u : units) {
    size_t i = std::find(nodes.begin(), nodes.end(), u.node) - nodes.begin();
    std::string op((u.anchor ? u.anchor : u.node)->opName());
    std::replace_if(op.begin(), op.end(), [](char c) { return !std::isalnum(c); }, '_');
    NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks,
                         lowerUnit(u, fmt::format("n{}_{}{}", i, op,
                                                  u.members.empty() ? "" : "_fused")));
    for (kir::Kernel &k : ks)
      kernels.push_back(std::move(k));
  }
  return kernels;
}

/// A random tensor of `type` with `extents`: floats uniform in [-1, 1), integers and bools
/// zero (they are usually indices or shapes).
Tensor randomTensor(DType dtype, const Extents &extents, std::mt19937 &rng) {
  Tensor t = Tensor::zeros(dtype, extents);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  if (dtype == DType::F32) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = u(rng);
  } else if (dtype == DType::F64) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<double>()[i] = u(rng);
  }
  return t;
}

std::string previewTensor(const Tensor &t) {
  std::string s;
  int64_t n = std::min<int64_t>(t.numElements(), 8);
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      s += ", ";
    if (isFloat(t.dtype()))
      s += fmt::format("{:.6g}", t.elementAsDouble(i));
    else if (isStorageOnly(t.dtype()))
      s += fmt::format("0x{:02x}", static_cast<const uint8_t *>(t.rawData())[i]);
    else
      s += std::to_string(t.elementAsInt(i));
  }
  if (t.numElements() > n)
    s += ", ...";
  return "[" + s + "]";
}

/// Parses --target; `auto` says on stderr which target it picked.
Expected<driver::Target> parseTargetOption(const std::string &name) {
  std::string note;
  Expected<driver::Target> t = driver::parseTarget(name, &note);
  if (t && !note.empty())
    std::cerr << note << "\n";
  return t;
}

int runCommand(const RunOptions &o) {
  Expected<driver::Target> target = parseTargetOption(o.target);
  if (!target)
    return fail(target.takeError());
  if (o.outputFormat != "pb" && o.outputFormat != "npy")
    return fail(fmt::format("--output-format must be pb or npy, not '{}'", o.outputFormat));
  if (isOnnx(o.model)) {
    Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(o.model);
    if (!issues)
      return fail(issues.takeError());
    if (reportUnsupported(o.model, *issues))
      return 1;
  }
  Expected<std::vector<std::string>> names = driver::modelInputNames(o.model);
  if (!names)
    return fail(names.takeError());

  // Inputs: DIR/input_K.pb by position, then NAME=FILE overrides.
  Expected<std::map<std::string, Tensor>> read = readInputs(*names, o.inputsDir, o.inputs);
  if (!read)
    return fail(read.takeError());
  std::map<std::string, Tensor> &byName = *read;
  std::vector<Tensor> inputs;
  for (const std::string &n : *names) {
    auto it = byName.find(n);
    if (it == byName.end())
      return fail(fmt::format("no value for model input '{}' (give --inputs-dir or --input "
                              "{}=FILE)",
                              n, n));
    inputs.push_back(it->second);
  }

  auto t0 = Clock::now();
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model, byName);
  if (!g)
    return fail(g.takeError());
  if (o.optimize)
    if (Error e = driver::optimize(**g))
      return fail(e);
  driver::ExecOptions eo;
  eo.threads = o.threads;
  eo.tuningCache = o.tuningCache;
  Expected<std::unique_ptr<driver::Runner>> runner = driver::Runner::create(**g, *target, eo);
  if (!runner)
    return fail(runner.takeError());
  std::string cacheNote;
  if (CpuModel *cpu = (*runner)->cpuModel()) {
    std::vector<Extents> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.extents());
    // Compile before the timed run. Where shapes depend on input values, run() compiles
    // (and reports any error) instead.
    Expected<Executable *> exe = cpu->executableFor(shapes);
    if (exe) {
      cacheNote = fmt::format(", {} kernels, compile cache: {}", (*exe)->kernels().size(),
                              (*exe)->fromCache() ? "hit" : "miss");
      if (!o.quiet || o.requireTuned)
        if (int rc = reportTuning(**exe, o.requireTuned))
          return rc;
    }
  }
  double compileMs = msSince(t0);
  auto t1 = Clock::now();
  Expected<std::vector<Tensor>> outs = (*runner)->run(inputs);
  if (!outs)
    return fail(outs.takeError());
  double runMs = msSince(t1);

  if (!o.outputDir.empty()) {
    std::error_code ec;
    fs::create_directories(o.outputDir, ec);
    if (ec)
      return fail(fmt::format("--output-dir {}: {}", o.outputDir, ec.message()));
    for (size_t k = 0; k < outs->size(); ++k) {
      fs::path p = fs::path(o.outputDir) / fmt::format("output_{}.{}", k, o.outputFormat);
      if (Error e = driver::writeTensorFile(p.string(), (*outs)[k], (*g)->outputs()[k]->name()))
        return fail(e);
    }
  }
  if (!o.quiet) {
    for (size_t k = 0; k < outs->size(); ++k) {
      const Tensor &t = (*outs)[k];
      std::cout << fmt::format("output {} '{}': {}{} {}\n", k, (*g)->outputs()[k]->name(),
                               dtypeName(t.dtype()), extentsStr(t.extents()), previewTensor(t));
    }
    std::cout << fmt::format("target {}: compile {:.2f} ms{}, run {:.3f} ms\n",
                             driver::targetName(*target), compileMs, cacheNote, runMs);
  }
  if (!o.expectedDir.empty()) {
    int bad = 0;
    for (size_t k = 0; k < outs->size(); ++k) {
      fs::path p = fs::path(o.expectedDir) / fmt::format("output_{}.pb", k);
      Expected<Tensor> want = driver::readTensorFile(p.string());
      if (!want)
        return fail(want.takeError());
      std::string diff = driver::compareTensors(*want, (*outs)[k]);
      if (!diff.empty()) {
        std::cerr << fmt::format("nnc: output {} differs from {}: {}\n", k, p.string(), diff);
        ++bad;
      }
    }
    if (bad)
      return 1;
    std::cout << fmt::format("all {} outputs match {} (rtol 1e-3, atol 1e-7)\n", outs->size(),
                             o.expectedDir);
  }
  return 0;
}

// ---- bench -----------------------------------------------------------------------------------

struct BenchOptions {
  std::string model;
  std::string target = "cpu";
  std::string inputsDir;
  std::vector<std::string> inputs; // NAME=FILE
  std::vector<std::string> shapes; // NAME=D0xD1
  int threads = 0;
  int iterations = 20;
  int warmup = 3;
  bool json = false;
  bool profile = false;
  std::string passes; ///< Empty: the default pipeline.
  std::string tuningCache;
  bool requireTuned = false;
  std::string compare; ///< "ort": ONNX Runtime beside nnc, alternating.
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
    std::cout << fmt::format("  {:10.3f} ms {:5.1f}%  {}\n", times[order[i]].deviceMs / double(runs),
                             kernelMs > 0 ? 100 * times[order[i]].deviceMs / kernelMs : 0.0,
                             times[order[i]].name);
  if (order.size() > 25)
    std::cout << fmt::format("  ... {} more kernels\n", order.size() - 25);
  TransferStats t = exe.runTransfers(), w = exe.loadTransfers();
  double transferMs = exe.transferDeviceMs() / double(runs);
  std::cout << fmt::format("transfers per run: {} up ({} bytes), {} down ({} bytes), {:.3f} ms "
                           "device time; at load: {} up ({} bytes of weights)\n",
                           double(t.uploads) / double(runs), t.uploadBytes / runs,
                           double(t.downloads) / double(runs), t.downloadBytes / runs,
                           transferMs, w.uploads, w.uploadBytes);
  std::cout << fmt::format("host overhead: {:.3f} ms per run (median wall {:.3f} ms - device "
                           "{:.3f} ms)\n",
                           std::max(0.0, medianMs - kernelMs / double(runs) - transferMs), medianMs,
                           kernelMs / double(runs) + transferMs);
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
  Expected<driver::Target> target = parseTargetOption(o.target);
  if (!target)
    return fail(target.takeError());
  if (o.iterations < 1 || o.warmup < 0 || o.threads < 0)
    return fail("--iterations must be at least 1, --warmup and --threads at least 0");
  Expected<std::vector<std::string>> names = driver::modelInputNames(o.model);
  if (!names)
    return fail(names.takeError());
  Expected<std::map<std::string, Tensor>> byName = readInputs(*names, o.inputsDir, o.inputs);
  if (!byName)
    return fail(byName.takeError());
  Expected<std::map<std::string, Extents>> shapeSpecs = parseShapeSpecs(o.shapes);
  if (!shapeSpecs)
    return fail(shapeSpecs.takeError());

  auto t0 = Clock::now();
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model, *byName);
  if (!g)
    return fail(g.takeError());
  if (o.passes.empty()) {
    if (Error e = driver::optimize(**g))
      return fail(e);
  } else {
    Expected<PassPipeline> pipeline = PassPipeline::parse(o.passes == "none" ? "" : o.passes);
    if (!pipeline)
      return fail(pipeline.takeError());
    PassContext ctx;
    ctx.evaluate = driver::interpreterEvaluator();
    if (Error e = pipeline->run(**g, ctx))
      return fail(e);
  }
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
  if (o.profile && *target != driver::Target::OpenCL)
    return fail("--profile goes with --target opencl (on the CPU, use NNC_DEBUG=profile)");
  // The peer: the same model file, inputs and thread count, timed alternately with nnc.
  std::unique_ptr<tools::OrtPeer> ort;
  std::vector<Tensor> ortInputs;
  if (!o.compare.empty()) {
    if (o.compare != "ort")
      return fail(fmt::format("--compare: unknown peer '{}' (known: ort)", o.compare));
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
      auto it = std::find_if(ins.begin(), ins.end(),
                             [&](const Value *v) { return v->name() == name; });
      if (it == ins.end())
        return fail(fmt::format("--compare ort: ONNX Runtime's input '{}' is not an input of "
                                "nnc's graph",
                                name));
      ortInputs.push_back(inputs[static_cast<size_t>(it - ins.begin())]);
    }
  }
  driver::ExecOptions eo;
  eo.threads = o.threads;
  eo.profile = o.profile;
  eo.tuningCache = o.tuningCache;
  Expected<std::unique_ptr<driver::Runner>> runner = driver::Runner::create(**g, *target, eo);
  if (!runner)
    return fail(runner.takeError());
  std::string cache = "none";
  TuningUse tuningUse;
  double kernelCompileMs = 0;
  int64_t kernels = -1;
  if (CpuModel *cpu = (*runner)->cpuModel()) {
    std::vector<Extents> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.extents());
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

  for (int i = 0; i < o.warmup; ++i) {
    Expected<std::vector<Tensor>> outs = (*runner)->run(inputs);
    if (!outs)
      return fail(outs.takeError());
  }
  // The peer's warmup, and how far its outputs are from nnc's (same inputs).
  double ortMaxDiff = 0;
  if (ort) {
    Expected<std::vector<Tensor>> mine = (*runner)->run(inputs);
    if (!mine)
      return fail(mine.takeError());
    for (int i = 0; i < std::max(o.warmup, 1); ++i) {
      Expected<std::vector<Tensor>> theirs = ort->run(ortInputs);
      if (!theirs)
        return fail(theirs.takeError());
      if (i == 0)
        ortMaxDiff = maxAbsDifference(*mine, *theirs);
    }
  }
  OpenCLExecutable *profiled = nullptr;
  if (o.profile) {
    std::vector<Extents> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.extents());
    Expected<Executable *> exe = (*runner)->cpuModel()->executableFor(shapes);
    if (!exe)
      return fail(exe.takeError());
    profiled = dynamic_cast<OpenCLExecutable *>(*exe);
    if (profiled)
      profiled->resetRunCounters(); // the timed runs only
  }
  std::vector<double> times, ortTimes;
  for (int i = 0; i < o.iterations; ++i) {
    // With a peer, the order flips every iteration so neither always runs on a warm cache.
    for (int turn = 0; turn < (ort ? 2 : 1); ++turn) {
      bool peerTurn = ort && (turn == 0) == (i % 2 == 1);
      auto t = Clock::now();
      Expected<std::vector<Tensor>> outs = peerTurn ? ort->run(ortInputs) : (*runner)->run(inputs);
      if (!outs)
        return fail(outs.takeError());
      (peerTurn ? ortTimes : times).push_back(msSince(t));
    }
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = medianOf(times);
  double p90 = sorted[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * double(n))) - 1)];
  double mean = 0;
  for (double t : times)
    mean += t / double(n);
  int threads = *target == driver::Target::Cpu ? effectiveThreads(o.threads) : 1;
  if (o.json) {
    std::string model = o.model;
    std::string esc;
    for (char c : model)
      esc += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    std::cout << fmt::format(
        "{{\"model\": \"{}\", \"target\": \"{}\", \"threads\": {}, \"iterations\": {}, "
        "\"warmup\": {}, \"compile_ms\": {:.3f}, \"kernel_compile_ms\": {:.3f}, "
        "\"compile_cache\": \"{}\", \"median_ms\": {:.6f}, \"p90_ms\": {:.6f}, "
        "\"min_ms\": {:.6f}, \"mean_ms\": {:.6f}, \"tuned_kernels\": {}, "
        "\"tunable_kernels\": {}{}{}}}\n",
        esc, driver::targetName(*target), threads, o.iterations, o.warmup, compileMs,
        kernelCompileMs, cache, median, p90, sorted.front(), mean, tuningUse.tuned,
        tuningUse.tunable,
        kernels >= 0 ? fmt::format(", \"kernels\": {}", kernels) : std::string(),
        ort ? fmt::format(", \"peer\": \"ort\", \"ort_version\": \"{}\", \"ort_median_ms\": "
                          "{:.6f}, \"ort_min_ms\": {:.6f}, \"ratio\": {:.4f}, "
                          "\"ort_max_abs_diff\": {:.3g}",
                          ort->version(), medianOf(ortTimes),
                          *std::min_element(ortTimes.begin(), ortTimes.end()),
                          median / medianOf(ortTimes), ortMaxDiff)
            : std::string());
  } else {
    std::cout << fmt::format("{}: target {}, {} thread(s)\n", o.model,
                             driver::targetName(*target), threads);
    std::cout << fmt::format("compile {:.2f} ms{}\n", compileMs,
                             cache == "none" ? "" : ", compile cache: " + cache);
    std::cout << fmt::format("{} iterations ({} warmup): median {:.3f} ms, p90 {:.3f} ms, min "
                             "{:.3f} ms\n",
                             o.iterations, o.warmup, median, p90, sorted.front());
    if (ort)
      std::cout << fmt::format("onnxruntime {} ({}), alternating: median {:.3f} ms, min {:.3f} "
                               "ms; nnc/ort {:.3f}; max |nnc - ort| {:.3g}\n",
                               ort->version(), ort->libraryPath(), medianOf(ortTimes),
                               *std::min_element(ortTimes.begin(), ortTimes.end()),
                               median / medianOf(ortTimes), ortMaxDiff);
  }
  if (profiled)
    printOpenCLProfile(*profiled, median);
  return 0;
}

// ---- devices ---------------------------------------------------------------------------------

int devicesCommand() {
  std::string cpu = hostCpuDescription(), features;
  for (const char *f : {"avx512f", "avx2", "fma", "neon", "sve"})
    if (cpu.find(std::string("+") + f + ",") != std::string::npos ||
        cpu.find(std::string("+") + f + " ") != std::string::npos)
      features += std::string(" ") + f;
  std::cout << fmt::format("cpu: {}, {} threads, features:{}\n", cpu.substr(0, cpu.find(' ')),
                           effectiveThreads(0), features.empty() ? " -" : features);
  Expected<std::vector<OpenCLDeviceInfo>> devs = listOpenCLDevices();
  if (!devs) {
    std::cout << "opencl: none (" << devs.error().message() << ")\n";
    return 0;
  }
  for (const OpenCLDeviceInfo &d : *devs)
    std::cout << fmt::format("opencl:{}.{}: {} [{}] on {} ({}): {} compute units, {} MHz, {} MiB "
                             "global, {} KiB local, work-group <= {}, fp64 {}, fp16 {}; {}, "
                             "driver {}\n",
                             d.platform, d.device, d.deviceName, d.type, d.platformName,
                             d.vendor, d.computeUnits, d.maxClockMHz, d.globalMemBytes >> 20,
                             d.localMemBytes >> 10, d.maxWorkGroupSize, d.fp64 ? "yes" : "no",
                             d.fp16 ? "yes" : "no", d.version, d.driverVersion);
  Expected<OpenCLDeviceInfo> best = pickOpenCLDevice();
  if (best)
    std::cout << fmt::format("--target auto: {}\n",
                             best->type == "gpu"
                                 ? fmt::format("opencl:{}.{}", best->platform, best->device)
                                 : std::string("cpu (no OpenCL GPU)"));
  return 0;
}

// ---- check -----------------------------------------------------------------------------------

int checkCommand(const std::string &model, const std::string &targetName) {
  Expected<driver::Target> target = parseTargetOption(targetName);
  if (!target)
    return fail(target.takeError());
  if (*target == driver::Target::OpenCL) {
    Expected<OpenCLDeviceInfo> d = pickOpenCLDevice(target->platform, target->device);
    if (!d)
      return fail(d.takeError());
    std::cout << fmt::format("target opencl:{}.{}: {} ({})\n", d->platform, d->device,
                             d->deviceName, d->platformName);
  }
  if (!isOnnx(model)) {
    Expected<std::unique_ptr<Graph>> g = driver::loadModel(model);
    if (!g)
      return fail(g.takeError());
    std::cout << model << ": valid IR, " << (*g)->numNodes() << " nodes\n";
    return 0;
  }
  Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(model);
  if (!issues)
    return fail(issues.takeError());
  if (reportUnsupported(model, *issues))
    return 1;
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(model);
  if (!g)
    return fail(g.takeError());
  std::cout << model << ": every operator is supported (" << (*g)->numNodes()
            << " IR nodes)\n";
  return 0;
}

// ---- inspect ---------------------------------------------------------------------------------

struct InspectOptions {
  std::string model;
  std::string after;
  std::string format = "text";
  std::string passes;
  bool printAfterAll = false;
  bool stats = false;
  bool plan = false;
  bool json = false;
  bool kernels = false;
  bool llvm = false;
  bool assembly = false;
  std::vector<std::string> shapes; // NAME=D0xD1
  int threads = 0;
};

/// `nnc inspect --plan`: the buffer plan of the compiled model.
int inspectPlan(const InspectOptions &o) {
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes);
  if (!g)
    return fail(g.takeError());
  CpuOptions opts;
  opts.threads = o.threads;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**g, opts);
  if (!exe)
    return fail(exe.takeError());
  std::cout << (o.json ? (*exe)->plan().json() : (*exe)->plan().str());
  return 0;
}

/// `nnc inspect --kernels [--llvm|--asm]`: the generated kernels, their LLVM IR or assembly.
int inspectKernels(const InspectOptions &o) {
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes);
  if (!g)
    return fail(g.takeError());
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(**g);
  if (!kernels)
    return fail(kernels.takeError());
  if (o.llvm || o.assembly) {
    Expected<std::string> text = o.llvm ? emitLLVMIR(*kernels) : emitAssembly(*kernels);
    if (!text)
      return fail(text.takeError());
    std::cout << *text;
    return 0;
  }
  for (const kir::Kernel &k : *kernels)
    std::cout << kir::printKernel(k) << "\n";
  return 0;
}

int inspectCommand(const InspectOptions &o) {
  if ((o.llvm || o.assembly) && !o.kernels)
    return fail("--llvm and --asm go with --kernels");
  if (o.llvm && o.assembly)
    return fail("give one of --llvm and --asm");
  if (o.plan)
    return inspectPlan(o);
  if (o.kernels)
    return inspectKernels(o);
  if (o.json)
    return fail("--json goes with --plan (for the graph, use --format=json)");
  if (o.format != "text" && o.format != "dot" && o.format != "json")
    return fail(fmt::format("--format must be text, dot or json, not '{}'", o.format));
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model);
  if (!g)
    return fail(g.takeError());
  PassPipeline pipeline = PassPipeline::defaultPipeline();
  if (!o.passes.empty()) {
    Expected<PassPipeline> p = PassPipeline::parse(o.passes);
    if (!p)
      return fail(p.takeError());
    pipeline = *p;
  }
  if (o.after == "import") {
    pipeline = *PassPipeline::parse("");
  } else if (!o.after.empty()) {
    const auto &names = pipeline.passes();
    auto it = std::find(names.begin(), names.end(), o.after);
    if (it == names.end())
      return fail(fmt::format("--after={}: not in the pipeline '{}' (or use --after=import)",
                              o.after, pipeline.str()));
    std::string prefix;
    for (auto p = names.begin(); p != it + 1; ++p)
      prefix += (prefix.empty() ? "" : ",") + *p;
    pipeline = *PassPipeline::parse(prefix);
  }
  PassContext ctx;
  ctx.evaluate = driver::interpreterEvaluator();
  ctx.printAfterAll = o.printAfterAll;
  ctx.stats = o.stats;
  if (Error e = pipeline.run(**g, ctx))
    return fail(e);
  if (o.format == "dot")
    tools::printDot(**g, std::cout);
  else if (o.format == "json")
    tools::printJson(**g, std::cout);
  else
    printGraph(**g, std::cout);
  return 0;
}

// ---- compile ---------------------------------------------------------------------------------

struct CompileOptions {
  std::string model;
  std::string output;
  std::string emit;
  std::string target = "cpu";
  std::vector<std::string> shapes;
};

int compileCommand(const CompileOptions &opts) {
  CompileOptions o = opts;
  Expected<driver::Target> target = driver::parseTarget(o.target);
  if (!target)
    return fail(target.takeError());
  bool opencl = *target == driver::Target::OpenCL;
  if (o.emit.empty())
    o.emit = opencl ? "cl" : "obj";
  static const char *kinds[] = {"nir", "kernels", "ll", "asm", "obj", "cl"};
  if (std::find(std::begin(kinds), std::end(kinds), o.emit) == std::end(kinds))
    return fail(fmt::format("--emit must be nir, kernels, ll, asm, obj or cl, not '{}'", o.emit));
  if (opencl != (o.emit == "cl") && o.emit != "nir" && o.emit != "kernels")
    return fail(fmt::format("--emit {} does not go with --target {}", o.emit, o.target));
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes);
  if (!g)
    return fail(g.takeError());
  auto writeText = [&](const std::string &text) -> int {
    std::ofstream f(o.output, std::ios::binary);
    if (!f)
      return fail(fmt::format("-o {}: cannot open for writing", o.output));
    f << text;
    f.close();
    if (!f)
      return fail(fmt::format("-o {}: write failed", o.output));
    return 0;
  };
  if (o.emit == "nir")
    return writeText(printGraph(**g));
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(**g);
  if (!kernels)
    return fail(kernels.takeError());
  if (o.emit == "kernels") {
    std::string text;
    for (const kir::Kernel &k : *kernels)
      text += kir::printKernel(k) + "\n";
    return writeText(text);
  }
  if (o.emit == "cl") {
    // Checked with libclang, so kernel errors come with line numbers without an OpenCL runtime.
    Expected<OpenCLProgram> prog = emitOpenCL(*kernels);
    if (!prog)
      return fail(prog.takeError());
    if (int rc = writeText(prog->source))
      return rc;
    if (Error e = checkOpenCLSource(prog->source, o.output))
      return fail(e);
    return 0;
  }
  if (o.emit == "obj") {
    if (Error e = emitObjectFile(*kernels, o.output))
      return fail(e);
    return 0;
  }
  Expected<std::string> text = o.emit == "ll" ? emitLLVMIR(*kernels) : emitAssembly(*kernels);
  if (!text)
    return fail(text.takeError());
  return writeText(*text);
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"nnc: a tensor compiler for neural networks.\n"
               "Commands: run, bench, tune, cache, check, inspect, compile, devices, help. `nnc COMMAND --help` for "
               "details."};
  app.set_version_flag("--version", std::string("nnc ") + NNC_VERSION);
  app.require_subcommand(0, 1);

  RunOptions run;
  CLI::App *runCmd = app.add_subcommand("run", "Run a model on inputs and write its outputs");
  runCmd->add_option("model", run.model, "Model file (.onnx or .nir)")->required();
  runCmd->add_option("--inputs-dir", run.inputsDir, "Folder with input_K.pb (ONNX test layout)");
  runCmd->add_option("--input", run.inputs, "NAME=FILE (.pb or .npy); repeatable");
  runCmd->add_option("--output-dir", run.outputDir, "Write output_K.pb (or .npy) here");
  runCmd->add_option("--output-format", run.outputFormat, "pb or npy");
  runCmd->add_option("--expected-dir", run.expectedDir,
                     "Compare outputs with output_K.pb here (exit 1 when they differ)");
  runCmd->add_option("--target", run.target, "cpu (default), interp, opencl[:P.D] or auto");
  runCmd->add_option("--threads", run.threads, "cpu: threads (default: all cores; 1: serial)")
      ->check(CLI::NonNegativeNumber);
  runCmd->add_flag("!--no-optimize", run.optimize, "Skip the graph optimization pipeline");
  runCmd->add_flag("-q,--quiet", run.quiet, "Print nothing on success");
  runCmd->add_option("--cache", run.tuningCache, "cpu: the tuning cache (default "
                                                 "$NNC_TUNING_CACHE or ~/.cache/nnc/tuning.db)");
  runCmd->add_flag("--require-tuned", run.requireTuned,
                   "cpu: fail when a tunable kernel has no tuned config");

  BenchOptions bench;
  CLI::App *benchCmd = app.add_subcommand("bench", "Measure compile time and run latency");
  benchCmd->add_option("model", bench.model, "Model file (.onnx or .nir)")->required();
  benchCmd->add_option("--target", bench.target, "cpu (default), interp, opencl[:P.D] or auto");
  benchCmd->add_flag("--profile", bench.profile,
                     "opencl: device time per kernel, transfers and host overhead");
  benchCmd->add_option("--threads", bench.threads, "cpu: threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  benchCmd->add_option("--iterations", bench.iterations, "Timed runs (default 20)");
  benchCmd->add_option("--warmup", bench.warmup, "Untimed runs first (default 3)");
  benchCmd->add_option("--passes", bench.passes,
                       "Pipeline to run instead of the standard one (`none`: no pass)");
  benchCmd->add_option("--inputs-dir", bench.inputsDir, "Inputs (default: random)");
  benchCmd->add_option("--input", bench.inputs, "NAME=FILE (.pb or .npy); repeatable");
  benchCmd->add_option("--shape", bench.shapes, "NAME=D0xD1x... for a symbolic random input");
  benchCmd->add_flag("--json", bench.json, "Print one JSON object");
  benchCmd->add_option("--cache", bench.tuningCache, "cpu: the tuning cache (default "
                                                     "$NNC_TUNING_CACHE or ~/.cache/nnc/tuning.db)");
  benchCmd->add_flag("--require-tuned", bench.requireTuned,
                     "cpu: fail when a tunable kernel has no tuned config");
  benchCmd->add_option("--compare", bench.compare,
                       "ort: time ONNX Runtime (libonnxruntime.so via dlopen; NNC_ORT_LIBRARY "
                       "or bench/ort/node_modules) alternately on the same inputs and threads");
  benchCmd->add_flag("--ort-spin", bench.ortSpin,
                     "With --compare ort: let ORT's idle pool threads spin (its default; off "
                     "here, as nnc's workers sleep after a bounded spin)");
  tools::TuneCommands tuneCommands(app);

  std::string checkModel, checkTarget = "cpu";
  CLI::App *checkCmd =
      app.add_subcommand("check", "List every unsupported operator and attribute of a model");
  checkCmd->add_option("model", checkModel, "Model file")->required();
  checkCmd->add_option("--target", checkTarget,
                       "cpu (default), interp, opencl[:P.D] (also checks the device) or auto");

  CLI::App *devCmd = app.add_subcommand("devices", "List the CPU and every OpenCL device");

  InspectOptions insp;
  CLI::App *inspCmd = app.add_subcommand("inspect", "Print a model's IR after the passes");
  inspCmd->add_option("model", insp.model, "Model file (.onnx or .nir)")->required();
  inspCmd->add_option("--after", insp.after,
                      "Stop after this pass of the pipeline (`import`: before any pass)");
  inspCmd->add_option("--format", insp.format, "text, dot or json");
  inspCmd->add_option("--passes", insp.passes, "Pipeline to run (default: the standard one)");
  inspCmd->add_flag("--print-ir-after-all", insp.printAfterAll, "Print the IR after each pass");
  inspCmd->add_flag("--stats", insp.stats, "Per-pass statistics on stderr");
  inspCmd->add_flag("--plan", insp.plan, "The CPU buffer plan (sizes, offsets, live ranges)");
  inspCmd->add_flag("--json", insp.json, "With --plan: as JSON");
  inspCmd->add_flag("--kernels", insp.kernels, "The generated CPU kernels and schedules");
  inspCmd->add_flag("--llvm", insp.llvm, "With --kernels: their optimized LLVM IR");
  inspCmd->add_flag("--asm", insp.assembly, "With --kernels: their host assembly");
  inspCmd->add_option("--shape", insp.shapes, "NAME=D0xD1x... for a symbolic input");
  inspCmd->add_option("--threads", insp.threads, "Threads of the executable (--plan)");

  CompileOptions comp;
  CLI::App *compCmd = app.add_subcommand("compile", "Write what the compiler produces");
  compCmd->add_option("model", comp.model, "Model file (.onnx or .nir)")->required();
  compCmd->add_option("-o,--output", comp.output, "Output file")->required();
  compCmd->add_option("--emit", comp.emit,
                      "nir, kernels, ll, asm, obj (default for cpu) or cl (OpenCL C, checked "
                      "with libclang; default for opencl)");
  compCmd->add_option("--target", comp.target, "cpu (default) or opencl");
  compCmd->add_option("--shape", comp.shapes, "NAME=D0xD1x... for a symbolic input");

  CLI::App *helpCmd = app.add_subcommand("help", "Show help");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  if (runCmd->parsed())
    return runCommand(run);
  if (benchCmd->parsed())
    return benchCommand(bench);
  if (checkCmd->parsed())
    return checkCommand(checkModel, checkTarget);
  if (devCmd->parsed())
    return devicesCommand();
  if (int rc = tuneCommands.run(); rc >= 0)
    return rc;
  if (compCmd->parsed())
    return compileCommand(comp);
  if (inspCmd->parsed())
    return inspectCommand(insp);
  if (helpCmd->parsed() || argc == 1) {
    std::cout << app.help();
    return argc == 1 ? 1 : 0;
  }
  return 0;
}

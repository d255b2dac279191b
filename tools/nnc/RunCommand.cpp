// `nnc run MODEL`: run a model on inputs (ONNX test-data layout), write and check its outputs.
#include "Command.h"
#include "CommandUtil.h"
#include "CpuProfile.h"
#include "nnc/support/Debug.h"

#include <cmath>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

namespace nnc::tools {

namespace {

struct RunOptions {
  std::string model;
  std::string inputsDir;
  std::string outputDir;
  std::string expectedDir;
  std::vector<std::string> inputs; // NAME=FILE
  std::string target = "cpu";
  std::string cpu; // --cpu
  std::string precision = "fp32";
  std::string outputFormat = "pb";
  int threads = 0;
  bool optimize = true;
  std::string passes; ///< Empty: the target's pipeline.
  bool quiet = false;
  bool verbose = false;
  std::string tuningCache;
  bool requireTuned = false;
};

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

/// What --precision bf16 costs in accuracy: the model compiled and run again in fp32 on the
/// same inputs, and per floating-point output the largest |bf16 - fp32|, that relative to the
/// fp32 output's range, and how many rows (along the last axis) keep their arg-max (top-1).
Error reportPrecisionDifference(const RunOptions &o, const driver::Target &target,
                                const driver::ModelInputs &in,
                                const std::vector<Tensor> &outs) {
  driver::Target fp32 = target;
  fp32.cpu.precision = CpuTarget::Precision::F32;
  const std::vector<Tensor> &inputs = in.tensors;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, driver::loadModel(o.model, in.known, in.forms));
  if (o.optimize)
    NNC_TRY(driver::runPasses(*g, fp32, o.passes));
  driver::ExecOptions eo;
  eo.threads = o.threads;
  eo.tuningCache = o.tuningCache;
  eo.passes = o.passes;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<driver::Runner> runner,
                       driver::Runner::create(*g, fp32, eo));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> want, runner->run(inputs));
  for (size_t k = 0; k < outs.size() && k < want.size(); ++k) {
    const Tensor &a = outs[k], &e = want[k];
    if (!isFloat(e.dtype()) || a.extents() != e.extents())
      continue;
    double maxDiff = 0, lo = 0, hi = 0;
    for (int64_t i = 0; i < e.numElements(); ++i) {
      double x = a.elementAsDouble(i), y = e.elementAsDouble(i);
      maxDiff = std::max(maxDiff, std::abs(x - y));
      lo = i ? std::min(lo, y) : y;
      hi = i ? std::max(hi, y) : y;
    }
    std::string top1;
    int64_t row = e.rank() ? e.extents().back() : 1;
    if (row > 1) {
      int64_t rows = e.numElements() / row, same = 0;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t ia = r * row, ie = r * row;
        for (int64_t j = r * row; j < (r + 1) * row; ++j) {
          ia = a.elementAsDouble(j) > a.elementAsDouble(ia) ? j : ia;
          ie = e.elementAsDouble(j) > e.elementAsDouble(ie) ? j : ie;
        }
        same += ia == ie;
      }
      top1 = fmt::format(", top-1 the same in {}/{} rows", same, rows);
    }
    std::cout << fmt::format("precision bf16: output {} '{}': largest |bf16 - fp32| {:.4g} "
                             "({:.3g} of the fp32 output's range [{:.4g}, {:.4g}]){}\n",
                             k, g->outputs()[k]->name(), maxDiff,
                             hi > lo ? maxDiff / (hi - lo) : 0.0, lo, hi, top1);
  }
  return Error::success();
}

int runCommand(const RunOptions &o) {
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, o.precision))
    return fail(e);
  warnIfBf16IsSlower(*target, o.threads);
  if (o.outputFormat != "pb" && o.outputFormat != "npy")
    return fail(fmt::format("--output-format must be pb or npy, not '{}'", o.outputFormat));
  // The model file is read once: checked, its inputs listed, then imported. "compile" counts
  // from here.
  auto t0 = Clock::now();
  PhaseTimer readTime("read model");
  Expected<std::unique_ptr<driver::ModelFile>> file = driver::ModelFile::open(o.model);
  if (!file)
    return fail(file.takeError());
  readTime.stop();
  if (reportUnsupported(o.model, (*file)->check()))
    return 1;
  const std::vector<std::string> &names = (*file)->inputNames();
  Expected<std::vector<ValueForm>> forms = (*file)->inputForms();
  if (!forms)
    return fail(forms.takeError());

  // Inputs: DIR/input_K.pb by position, then NAME=FILE overrides. A sequence or optional
  // input gives the graph as many inputs as it holds tensors (OnnxBoundary).
  PhaseTimer inputsTime("read inputs");
  Expected<std::map<std::string, OnnxValue>> read =
      readInputValues(names, *forms, o.inputsDir, o.inputs);
  if (!read)
    return fail(read.takeError());
  driver::ModelInputs in;
  for (const std::string &n : names) {
    auto it = read->find(n);
    if (it == read->end())
      return fail(fmt::format("no value for model input '{}' (give --inputs-dir or --input "
                              "{}=FILE)",
                              n, n));
    in.add(n, std::move(it->second));
  }
  const std::vector<Tensor> &inputs = in.tensors;
  inputsTime.stop();
  PhaseTimer importTime("import");
  OnnxBoundary boundary;
  Expected<std::unique_ptr<Graph>> g = (*file)->load(in.known, in.forms, &boundary);
  if (!g)
    return fail(g.takeError());
  importTime.stop();
  PhaseTimer optimizeTime("graph passes");
  if (o.optimize)
    if (Error e = driver::runPasses(**g, *target, o.passes))
      return fail(e);
  optimizeTime.stop();
  PhaseTimer compileTime("compile executable");
  driver::ExecOptions eo;
  eo.threads = o.threads;
  eo.verbose = o.verbose;
  eo.tuningCache = o.tuningCache;
  eo.passes = o.passes;
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
      // The tuned-kernel line only where tuning is in play: a tuning cache named with --cache,
      // --require-tuned, or configs found in the default cache (someone ran `nnc tune`).
      bool asked = !o.tuningCache.empty() || o.requireTuned || (*exe)->tuningUse().tuned > 0;
      if ((!o.quiet && asked) || o.requireTuned)
        if (int rc = reportTuning(**exe, o.requireTuned))
          return rc;
    }
  }
  compileTime.stop();
  double compileMs = msSince(t0);
  auto t1 = Clock::now();
  Expected<std::vector<Tensor>> outs = (*runner)->run(inputs);
  if (!outs)
    return fail(outs.takeError());
  double runMs = msSince(t1);
  // The model's outputs: a sequence or optional groups the graph outputs it holds.
  Expected<std::vector<OnnxValue>> values = driver::groupOutputs(boundary.outputs, *outs);
  if (!values)
    return fail(values.takeError());

  if (!o.outputDir.empty()) {
    std::error_code ec;
    fs::create_directories(o.outputDir, ec);
    if (ec)
      return fail(fmt::format("--output-dir {}: {}", o.outputDir, ec.message()));
    for (size_t k = 0; k < values->size(); ++k) {
      fs::path p = fs::path(o.outputDir) / fmt::format("output_{}.{}", k, o.outputFormat);
      if (Error e = driver::writeValueFile(p.string(), (*values)[k], boundary.outputNames[k]))
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
  if (target->cpu.precision == CpuTarget::Precision::BF16)
    if (Error e = reportPrecisionDifference(o, *target, in, *outs))
      return fail(e.withContext("the fp32 run beside --precision bf16"));
  if (!o.expectedDir.empty()) {
    int bad = 0;
    for (size_t k = 0; k < values->size(); ++k) {
      fs::path p = fs::path(o.expectedDir) / fmt::format("output_{}.pb", k);
      Expected<OnnxValue> want = driver::readValueFile(p.string(), (*values)[k].form.kind);
      if (!want)
        return fail(want.takeError());
      std::string diff = driver::compareValues(*want, (*values)[k]);
      if (!diff.empty()) {
        std::cerr << fmt::format("nnc: output {} differs from {}: {}\n", k, p.string(), diff);
        ++bad;
      }
    }
    if (bad)
      return 1;
    std::cout << fmt::format("all {} outputs match {} (rtol 1e-3, atol 1e-7)\n", values->size(),
                             o.expectedDir);
  }
  return 0;
}

class RunCommand : public Command {
public:
  explicit RunCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("run", "Run a model on inputs and write its outputs");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("--inputs-dir", o_.inputsDir, "Folder with input_K.pb (ONNX test layout)");
    cmd_->add_option("--input", o_.inputs, "NAME=FILE (.pb or .npy); repeatable");
    cmd_->add_option("--output-dir", o_.outputDir, "Write output_K.pb (or .npy) here");
    cmd_->add_option("--output-format", o_.outputFormat, "pb or npy");
    cmd_->add_option("--expected-dir", o_.expectedDir,
                     "Compare outputs with output_K.pb here (exit 1 when they differ)");
    cmd_->add_option("--target", o_.target, "cpu (default), interp, opencl[:P.D] or auto");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--precision", o_.precision,
                     std::string(kPrecisionOptionHelp) +
                         "; bf16 also runs fp32 and prints the largest difference");
    cmd_->add_option("--threads", o_.threads, "cpu: threads (default: all cores; 1: serial)")
        ->check(CLI::NonNegativeNumber);
    CLI::Option *noOptimize =
        cmd_->add_flag("!--no-optimize", o_.optimize, "Skip the graph optimization pipeline");
    cmd_->add_option("--passes", o_.passes,
                     "Pipeline to run instead of the target's (`nnc inspect --print-pipeline` "
                     "prints it; `none`: no pass)")
        ->excludes(noOptimize);
    cmd_->add_flag("-q,--quiet", o_.quiet, "Print nothing on success");
    cmd_->add_flag("-v,--verbose", o_.verbose,
                   "Say when the cache of per-shape programs drops one (symbolic shapes)");
    cmd_->add_option("--cache", o_.tuningCache,
                     "cpu, opencl: the tuning cache (default "
                     "$NNC_TUNING_CACHE or ~/.cache/nnc/tuning.db)");
    cmd_->add_flag("--require-tuned", o_.requireTuned,
                   "cpu: fail when a tunable kernel has no tuned config");
  }
  int run() override { return runCommand(o_); }

private:
  RunOptions o_;
};

} // namespace

std::unique_ptr<Command> addRunCommand(CLI::App &app) {
  return std::make_unique<RunCommand>(app);
}

} // namespace nnc::tools

// The shared driver behind `nnc` and `nnc-conformance`.
#include "nnc/driver/Driver.h"

#include <cmath>
#include <filesystem>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/TuningCache.h"
#include "nnc/support/Debug.h"
#include "nnc/support/Warning.h"

namespace nnc::driver {

namespace fs = std::filesystem;

namespace {
bool hasExtension(const std::string &path, const char *ext) {
  return fs::path(path).extension() == ext;
}
} // namespace

Expected<Target> parseTarget(const std::string &name, const CpuTarget &cpu, std::string *note) {
  if (name == "interp")
    return Target(Target::Interp, cpu);
  if (name == "cpu")
    return Target(Target::Cpu, cpu);
  if (name == "auto") {
    Expected<OpenCLDeviceInfo> d = pickOpenCLDevice();
    if (d && d->type == "gpu") {
      Target t(Target::OpenCL, cpu);
      t.platform = d->platform;
      t.device = d->device;
      t.gpu = d->target();
      if (note)
        *note = fmt::format("nnc: target auto: opencl:{}.{} ({}, {})", d->platform, d->device,
                            d->deviceName, d->platformName);
      return t;
    }
    if (note)
      *note = fmt::format("nnc: target auto: cpu (no OpenCL GPU{})",
                          d ? fmt::format("; OpenCL has only {}", d->deviceName)
                            : ": " + d.error().message());
    return Target(Target::Cpu, cpu);
  }
  if (name == "opencl" || name.rfind("opencl:", 0) == 0) {
    Target t(Target::OpenCL, cpu);
    if (name.size() > 7) {
      std::string spec = name.substr(7);
      size_t dot = spec.find('.');
      try {
        size_t used = 0;
        t.platform = std::stoi(spec.substr(0, dot), &used);
        if (used != spec.substr(0, dot).size())
          throw std::invalid_argument(spec);
        t.device = 0;
        if (dot != std::string::npos) {
          t.device = std::stoi(spec.substr(dot + 1), &used);
          if (used != spec.size() - dot - 1)
            throw std::invalid_argument(spec);
        }
      } catch (const std::exception &) {
        return makeError("target '{}': expected opencl:PLATFORM.DEVICE (e.g. opencl:0.0)", name);
      }
      if (t.platform < 0 || t.device < 0)
        return makeError("target '{}': platform and device indices are >= 0", name);
    }
    return t;
  }
  return makeError("unknown target '{}' (available: cpu, interp, opencl[:P.D], auto)", name);
}

Error chooseDevice(Target &t) {
  if (t != Target::OpenCL || t.gpu)
    return Error::success();
  NNC_ASSIGN_OR_RETURN(OpenCLDeviceInfo d, pickOpenCLDevice(t.platform, t.device));
  t.gpu = d.target();
  return Error::success();
}

Expected<Target> makeTarget(const std::string &name, const CpuTarget &cpu, std::string *note) {
  NNC_ASSIGN_OR_RETURN(Target t, parseTarget(name, cpu, note));
  NNC_TRY(chooseDevice(t));
  return t;
}

Error setPrecision(Target &t, const std::string &name) {
  if (name != "fp32" && name != "f32" && t != Target::Cpu)
    return makeError("--precision {}: only the cpu target has it (target {})", name, t.name());
  return t.cpu.setPrecision(name);
}

std::string targetName(const Target &t) {
  return t.name();
}

namespace {
Error checkModelPath(const std::string &path) {
  std::error_code ec;
  NNC_USER_CHECK(fs::exists(path, ec), "{}: no such file", path);
  NNC_USER_CHECK(!fs::is_directory(path, ec), "{}: is a directory, not a model file", path);
  return Error::success();
}
} // namespace

namespace {
/// The boundary of a graph whose inputs and outputs are tensors (a .nir file).
OnnxBoundary tensorBoundary(const Graph &g) {
  OnnxBoundary b;
  auto form = [](const Value *v) {
    ValueForm f;
    f.dtype = v->dtype();
    f.elements = {v->type()};
    return f;
  };
  for (const Value *v : g.inputs()) {
    b.inputNames.push_back(v->name());
    b.inputs.push_back(form(v));
  }
  for (const Value *v : g.outputs()) {
    b.outputNames.push_back(v->name());
    b.outputs.push_back(form(v));
  }
  return b;
}
} // namespace

Expected<std::unique_ptr<Graph>> loadModel(const std::string &path,
                                           const std::map<std::string, Tensor> &knownInputs,
                                           const std::map<std::string, ValueForm> &inputForms,
                                           OnnxBoundary *boundary) {
  NNC_TRY(checkModelPath(path));
  if (hasExtension(path, ".nir")) {
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseGraphFile(path));
    if (Error e = verify(*g))
      return e.withContext(path);
    if (boundary)
      *boundary = tensorBoundary(*g);
    return g;
  }
  ImportOptions opts;
  opts.knownInputs = knownInputs;
  opts.inputForms = inputForms;
  opts.evaluate = interpreterEvaluator();
  return importOnnxFile(path, opts, boundary);
}

Expected<std::unique_ptr<ModelFile>> ModelFile::open(const std::string &path) {
  NNC_TRY(checkModelPath(path));
  std::unique_ptr<ModelFile> f(new ModelFile());
  if (hasExtension(path, ".nir")) {
    NNC_ASSIGN_OR_RETURN(f->nir_, parseGraphFile(path));
    if (Error e = verify(*f->nir_))
      return e.withContext(path);
    for (Value *v : f->nir_->inputs())
      f->names_.push_back(v->name());
    return f;
  }
  NNC_ASSIGN_OR_RETURN(f->onnx_, OnnxModel::load(path));
  f->names_ = f->onnx_->inputNames();
  return f;
}

std::vector<OnnxIssue> ModelFile::check() const {
  return onnx_ ? onnx_->check() : std::vector<OnnxIssue>();
}

Expected<std::vector<ValueForm>> ModelFile::inputForms() const {
  if (onnx_)
    return onnx_->inputForms();
  return std::vector<ValueForm>(names_.size());
}

Expected<std::unique_ptr<Graph>> ModelFile::load(const std::map<std::string, Tensor> &knownInputs,
                                                 const std::map<std::string, ValueForm> &inputForms,
                                                 OnnxBoundary *boundary) {
  if (nir_) {
    if (boundary)
      *boundary = tensorBoundary(*nir_);
    return std::move(nir_);
  }
  NNC_USER_CHECK(onnx_ != nullptr, "the model was loaded already");
  ImportOptions opts;
  opts.knownInputs = knownInputs;
  opts.inputForms = inputForms;
  opts.evaluate = interpreterEvaluator();
  Expected<std::unique_ptr<Graph>> g = onnx_->import(opts, boundary);
  onnx_.reset(); // the parsed file is no longer needed
  return g;
}

Expected<std::vector<std::string>> modelInputNames(const std::string &path) {
  NNC_TRY(checkModelPath(path));
  if (hasExtension(path, ".nir")) {
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseGraphFile(path));
    std::vector<std::string> names;
    for (Value *v : g->inputs())
      names.push_back(v->name());
    return names;
  }
  return onnxGraphInputNames(path);
}

Expected<Tensor> readTensorFile(const std::string &path) {
  if (hasExtension(path, ".npy"))
    return readNpyFile(path);
  return readTensorProtoFile(path);
}

Error writeTensorFile(const std::string &path, const Tensor &t, const std::string &name) {
  if (hasExtension(path, ".npy"))
    return writeNpyFile(path, t);
  return writeTensorProtoFile(path, t, name);
}

Expected<OnnxValue> readValueFile(const std::string &path, ValueForm::Kind kind) {
  if (kind == ValueForm::Kind::Tensor) {
    NNC_ASSIGN_OR_RETURN(Tensor t, readTensorFile(path));
    return OnnxValue::ofTensor(std::move(t));
  }
  NNC_USER_CHECK(!hasExtension(path, ".npy"),
                 "{}: a sequence or optional value is read from a .pb file (SequenceProto or "
                 "OptionalProto), not .npy",
                 path);
  return readOnnxValueFile(path, kind);
}

Error writeValueFile(const std::string &path, const OnnxValue &v, const std::string &name) {
  if (v.form.kind == ValueForm::Kind::Tensor && v.tensors.size() == 1)
    return writeTensorFile(path, v.tensors[0], name);
  NNC_USER_CHECK(!hasExtension(path, ".npy"),
                 "{}: output '{}' is {}: it is written as .pb (--output-format pb)", path, name,
                 v.form.str());
  return writeOnnxValueFile(path, v, name);
}

Expected<std::vector<OnnxValue>> groupOutputs(const std::vector<ValueForm> &forms,
                                              std::vector<Tensor> outs) {
  std::vector<OnnxValue> values;
  size_t at = 0;
  for (const ValueForm &f : forms) {
    NNC_USER_CHECK(at + f.elements.size() <= outs.size(),
                   "the graph has {} outputs, fewer than the model's outputs hold", outs.size());
    OnnxValue v;
    v.form = f;
    for (size_t i = 0; i < f.elements.size(); ++i)
      v.tensors.push_back(std::move(outs[at++]));
    values.push_back(std::move(v));
  }
  NNC_USER_CHECK(at == outs.size(), "the graph has {} outputs but the model's outputs hold {}",
                 outs.size(), at);
  return values;
}

void ModelInputs::add(const std::string &name, OnnxValue v) {
  if (v.form.kind == ValueForm::Kind::Tensor && v.tensors.size() == 1)
    known[name] = v.tensors[0];
  else
    forms[name] = v.form;
  for (Tensor &t : v.tensors)
    tensors.push_back(std::move(t));
}

PassContext::Evaluator interpreterEvaluator() {
  return [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
}

Specializer shapeSpecializer() {
  return [](const Graph &g, const std::vector<Extents> &shapes, const std::map<int, Tensor> &values,
            std::set<int> *wanted) {
    return specializeShapes(g, shapes, interpreterEvaluator(), values, wanted,
                            /*allowDataDependent=*/true);
  };
}

namespace {

/// The pipeline `passes` names (`--passes`: PassPipeline::parse's text, "none" for no pass),
/// or with "" the one of `target` (a PassPipeline::forTarget name).
Expected<PassPipeline> chosenPipeline(std::string_view target, std::string_view passes) {
  if (passes.empty())
    return PassPipeline::forTarget(target);
  return PassPipeline::parse(passes == "none" ? std::string_view() : passes);
}

/// Runs `pipeline` on `g` for `target` (the interpreter as constant folding's evaluator), then
/// the verifier.
Error runPipeline(Graph &g, const Target &target, const PassPipeline &pipeline,
                  bool verifyEach) {
  PassContext ctx;
  ctx.cpu = target.cpu;
  ctx.evaluate = interpreterEvaluator();
  ctx.verifyEach = verifyEach;
  ctx.stats = debugEnabled("time");
  NNC_TRY(pipeline.run(g, ctx));
  return verify(g);
}

/// The CPU pipeline's passes from layout-nchwc on (shapeSpecializer(Target)), taken from the
/// pipeline itself: the blocked layout, Winograd and the weight packing need static shapes,
/// and the fusion passes regroup what they made. layout-nhwc is left out: it runs on integer
/// convs, which the specialized graph already holds in their channels-last form. `passes`
/// ("": the CPU's, "none": no pass) is the pipeline the graph went through; without a
/// layout-nchwc the result is empty.
Expected<PassPipeline> specializedPasses(std::string_view passes) {
  NNC_ASSIGN_OR_RETURN(PassPipeline cpu, chosenPipeline("cpu", passes));
  std::string kept;
  bool from = false;
  for (const std::string &pass : cpu.passes()) { // entries with their options
    from = from || pass.rfind("layout-nchwc", 0) == 0;
    if (from && pass.rfind("layout-nhwc", 0) != 0)
      kept += (kept.empty() ? "" : ",") + pass;
  }
  NNC_USER_CHECK(!kept.empty() || !passes.empty(),
                 "the CPU pipeline has no layout-nchwc pass to rerun");
  return PassPipeline::parse(kept);
}

bool allStatic(const Graph &g) {
  for (const Value *in : g.inputs())
    if (!isStatic(in->shape()))
      return false;
  for (const Node *n : g.nodes())
    for (const Value *v : n->results())
      if (!isStatic(v->shape()))
        return false;
  return true;
}

bool hasFloatConv(const Graph &g) {
  for (const Node *n : g.nodes())
    if (n->kind() == OpKind::Conv && n->result()->dtype() == DType::F32)
      return true;
  return false;
}

/// The static-shape passes (specializedPasses) on `s`, a specialized CPU graph whose shapes
/// are all static, their fusion groups formed again with the convs' new kernels and the
/// packed weights; the panels come from `packed` when given. `passes` as specializedPasses.
Error staticShapePasses(Graph &s, const CpuTarget &cpu, std::shared_ptr<PackedWeightCache> packed,
                        std::string_view passes) {
  NNC_ASSIGN_OR_RETURN(PassPipeline pipeline, specializedPasses(passes));
  if (pipeline.passes().empty())
    return Error::success();
  for (Node *n : s.nodes())
    n->removeAttr(kFusionGroupAttr);
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = interpreterEvaluator();
  ctx.stats = debugEnabled("time");
  ctx.packedWeights = std::move(packed);
  NNC_TRY(pipeline.run(s, ctx));
  return verify(s);
}

} // namespace

Specializer shapeSpecializer(const Target &target, std::string_view passes) {
  Specializer base = shapeSpecializer();
  if (target != Target::Cpu)
    return base;
  CpuTarget cpu = target.cpu;
  auto packed = std::make_shared<PackedWeightCache>();
  return [base, cpu, packed, passes = std::string(passes)](
             const Graph &g, const std::vector<Extents> &shapes,
             const std::map<int, Tensor> &values,
             std::set<int> *wanted) -> Expected<std::unique_ptr<Graph>> {
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> s, base(g, shapes, values, wanted));
    // A graph that was static already had these passes; one with f32 convs (a staged model
    // whose first stage decides no shape, such as RAFT) still gets them again, as it did
    // before symbolic graphs got them whatever they hold: RAFT-small measured 7% slower
    // without (its Winograd GEMMs 0.35 -> 0.46 ms, not located).
    if (allStatic(*s) && (!allStatic(g) || hasFloatConv(*s)))
      NNC_TRY(staticShapePasses(*s, cpu, packed, passes));
    return s;
  };
}

Expected<std::unique_ptr<Graph>> specializeAhead(const Graph &g, const std::vector<Extents> &shapes,
                                                 const Target &target) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> s,
                       specializeShapes(g, shapes, interpreterEvaluator()));
  if (target == Target::Cpu && !allStatic(g) && allStatic(*s))
    NNC_TRY(staticShapePasses(*s, target.cpu, nullptr, {}));
  return s;
}

std::string pipelineTarget(const Target &t) {
  // The interpreter runs what the CPU would: its graph is the CPU's.
  if (t != Target::OpenCL)
    return "cpu";
  std::string type = t.openclType;
  if (type.empty())
    type = t.gpu ? t.gpu->type : "gpu";
  return type == "cpu" ? "opencl-cpu" : "opencl";
}

Error optimize(Graph &g, const Target &target, bool verifyEach) {
  NNC_ASSIGN_OR_RETURN(PassPipeline pipeline, PassPipeline::forTarget(pipelineTarget(target)));
  return runPipeline(g, target, pipeline, verifyEach);
}

Error optimize(Graph &g, const CpuTarget &cpu, bool verifyEach) {
  return optimize(g, Target(Target::Cpu, cpu), verifyEach);
}

Error runPasses(Graph &g, const Target &target, std::string_view passes) {
  NNC_ASSIGN_OR_RETURN(PassPipeline pipeline, chosenPipeline(pipelineTarget(target), passes));
  return runPipeline(g, target, pipeline, /*verifyEach=*/true);
}

Expected<TuneSummary> tuneModel(const std::string &model, const Target &target,
                                const std::map<std::string, Extents> &shapes,
                                const std::string &cachePath, TuneOptions opts) {
  NNC_USER_CHECK(target == Target::Cpu || target == Target::OpenCL,
                 "target {}: only cpu and opencl kernels are tunable", targetName(target));
  opts.cpu = target.cpu;
  opts.opencl.reset();
  if (target == Target::OpenCL) {
    NNC_USER_CHECK(target.gpu && target.gpu->platform >= 0,
                   "target {}: tuning needs an OpenCL device here", targetName(target));
    // The device chosen for the target, described as the tuner's fingerprint needs it.
    NNC_ASSIGN_OR_RETURN(OpenCLDeviceInfo d,
                         pickOpenCLDevice(target.gpu->platform, target.gpu->device));
    opts.opencl = d;
  }
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, loadModel(model));
  NNC_TRY(optimize(*g, target));
  for (const auto &[name, e] : shapes) {
    bool known = false;
    for (const Value *in : g->inputs())
      known = known || in->name() == name;
    NNC_USER_CHECK(known, "{}: the model has no input '{}' to give a shape", model, name);
  }
  // Symbolic inputs take their extents from `shapes`; the graph is specialized on them.
  std::vector<Extents> extents;
  bool symbolic = false;
  for (const Value *in : g->inputs()) {
    if (auto it = shapes.find(in->name()); it != shapes.end()) {
      extents.push_back(it->second);
      symbolic = true;
    } else if (std::optional<Extents> e = staticExtents(in->type().shape)) {
      extents.push_back(*e);
    } else {
      return makeError("{}: input '{}' has the symbolic shape {}; tuning needs its extents",
                       model, in->name(), shapeStr(in->type().shape));
    }
  }
  if (symbolic) {
    NNC_ASSIGN_OR_RETURN(g, specializeAhead(*g, extents, target));
  }
  for (const Node *n : g->nodes())
    for (const Value *v : n->results())
      NNC_USER_CHECK(isStatic(v->shape()),
                     "{}: value %{} has the symbolic type {}; tuning needs static shapes", model,
                     v->name(), v->type().str());
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<TuningCache> cache,
                       TuningCache::open(cachePath.empty() ? TuningCache::defaultPath() : cachePath));
  return tuneGraph(*g, *cache, opts);
}

Expected<std::unique_ptr<Runner>> Runner::create(const Graph &g, Target target,
                                                 const ExecOptions &opts) {
  std::unique_ptr<Runner> r(new Runner(target));
  r->graph_ = &g;
  if (target == Target::Cpu || target == Target::OpenCL) {
    CpuOptions cpu(target.cpu);
    cpu.threads = opts.threads;
    cpu.verbose = opts.verbose;
    if (target == Target::OpenCL) {
      NNC_USER_CHECK(target.gpu && target.gpu->platform >= 0,
                     "target {}: no OpenCL device chosen to run on", targetName(target));
      OpenCLOptions cl(target.cpu, *target.gpu);
      cl.profile = opts.profile;
      cl.optimize = opts.openclOptimize;
      if (!opts.openclProgramCache)
        cl.cacheDir = "";
      // Tuned configs measured on this device (`nnc tune --target opencl`).
      if (opts.useTuningCache) {
        std::string path = opts.tuningCache.empty() ? TuningCache::defaultPath() : opts.tuningCache;
        if (!opts.tuningCache.empty() || std::filesystem::exists(path)) {
          // The chosen device as the cache's fingerprint names it (driver and platform too).
          NNC_ASSIGN_OR_RETURN(OpenCLDeviceInfo device,
                               pickOpenCLDevice(target.gpu->platform, target.gpu->device));
          NNC_ASSIGN_OR_RETURN(std::unique_ptr<TuningCache> cache, TuningCache::open(path));
          cl.tuning = std::make_shared<CachedConfigs>(
              std::shared_ptr<TuningCache>(std::move(cache)), openclDeviceFingerprint(device));
        }
      }
      cpu.compileWith = [cl](const Graph &sg) -> Expected<std::unique_ptr<Executable>> {
        NNC_ASSIGN_OR_RETURN(std::unique_ptr<OpenCLExecutable> exe,
                             OpenCLExecutable::compile(sg, cl));
        return std::unique_ptr<Executable>(std::move(exe));
      };
    }
    // Tuned configs measured on this CPU.
    if (target == Target::Cpu && opts.useTuningCache) {
      std::string path = opts.tuningCache.empty() ? TuningCache::defaultPath() : opts.tuningCache;
      if (!opts.tuningCache.empty() || std::filesystem::exists(path)) {
        // Tuned configs only make kernels faster: a cache that cannot be opened (corrupted,
        // unreadable, on a full or read-only disk) is skipped, and said so.
        Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path);
        if (cache)
          cpu.tuning =
              std::make_shared<CachedConfigs>(std::shared_ptr<TuningCache>(std::move(*cache)),
                                              cpuDeviceFingerprint(opts.threads, target.cpu));
        else
          warnOnce(fmt::format("{}; compiling without tuned configs", cache.error().message()));
      }
    }
    PhaseTimer t("runner: clone graph");
    NNC_ASSIGN_OR_RETURN(r->cpu_,
                         CpuModel::create(g.clone(), cpu, shapeSpecializer(target, opts.passes)));
  }
  return r;
}

Expected<std::vector<Tensor>> Runner::run(const std::vector<Tensor> &inputs) {
  switch (target_.kind) {
  case Target::Interp:
    return interpret(*graph_, inputs);
  case Target::Cpu:
  case Target::OpenCL:
    return cpu_->run(inputs);
  }
  return makeError("unknown target");
}

Expected<std::vector<Tensor>> execute(const Graph &g, const std::vector<Tensor> &inputs,
                                      Target target, const ExecOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Runner> r, Runner::create(g, target, opts));
  return r->run(inputs);
}

std::string compareTensors(const Tensor &expected, const Tensor &actual, double rtol, double atol) {
  if (expected.dtype() != actual.dtype())
    return fmt::format("dtype {} but expected {}", dtypeName(actual.dtype()),
                       dtypeName(expected.dtype()));
  if (expected.extents() != actual.extents())
    return fmt::format("shape {} but expected {}", extentsStr(actual.extents()),
                       extentsStr(expected.extents()));
  DType t = expected.dtype();
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < expected.numElements(); ++i) {
    bool ok;
    if (isFloat(t)) {
      double e = expected.elementAsDouble(i), a = actual.elementAsDouble(i);
      if (std::isnan(e) || std::isnan(a))
        ok = std::isnan(e) && std::isnan(a);
      else if (std::isinf(e) || std::isinf(a))
        ok = e == a;
      else
        ok = std::fabs(a - e) <= atol + rtol * std::fabs(e);
      if (!ok && first.empty())
        first = fmt::format("element {}: {} but expected {}", i, a, e);
    } else if (isStorageOnly(t)) {
      ok = static_cast<const uint8_t *>(expected.rawData())[i] ==
           static_cast<const uint8_t *>(actual.rawData())[i];
      if (!ok && first.empty())
        first = fmt::format("element {}: bits 0x{:02x} but expected 0x{:02x}", i,
                            static_cast<const uint8_t *>(actual.rawData())[i],
                            static_cast<const uint8_t *>(expected.rawData())[i]);
    } else {
      ok = expected.elementAsInt(i) == actual.elementAsInt(i);
      if (t == DType::U64)
        ok = expected.data<uint64_t>()[i] == actual.data<uint64_t>()[i];
      if (!ok && first.empty())
        first = fmt::format("element {}: {} but expected {}", i, actual.elementAsInt(i),
                            expected.elementAsInt(i));
    }
    if (!ok)
      ++bad;
  }
  if (bad == 0)
    return "";
  return fmt::format("{} of {} elements differ; first: {}", bad, expected.numElements(), first);
}

std::string compareValues(const OnnxValue &expected, const OnnxValue &actual, double rtol,
                          double atol) {
  const ValueForm &e = expected.form, &a = actual.form;
  // A tensor compares equal to a present optional tensor: ONNX test data writes some
  // optional outputs as plain tensors.
  auto optTensor = [](const ValueForm &f) {
    return f.kind == ValueForm::Kind::Tensor ||
           (f.kind == ValueForm::Kind::Optional && f.present && !f.ofSequence);
  };
  bool sameKind = e.kind == a.kind || (optTensor(e) && optTensor(a));
  if (!sameKind || e.holdsSequence() != a.holdsSequence() || e.present != a.present)
    return fmt::format("{} but expected {}", a.str(), e.str());
  if (expected.tensors.size() != actual.tensors.size())
    return fmt::format("{} but expected {}", a.str(), e.str());
  for (size_t i = 0; i < expected.tensors.size(); ++i) {
    std::string d = compareTensors(expected.tensors[i], actual.tensors[i], rtol, atol);
    if (!d.empty())
      return e.holdsSequence() ? fmt::format("tensor {}: {}", i, d) : d;
  }
  return "";
}

} // namespace nnc::driver

// The `nnc._nnc` extension module: compile an ONNX model and run it on numpy arrays, over the
// driver API that the `nnc` CLI uses (nnc/driver/Driver.h, driver/).
//
// Copies: an input is copied once into an nnc Tensor (64-byte aligned, as generated code
// expects), and once more before that only when it is not C-contiguous. Outputs are not
// copied: each returned array views the nnc Tensor's buffer and keeps it alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <unistd.h>

#include "nnc/driver/Driver.h"
#include "nnc/frontend/OnnxExport.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Printer.h"
#include "nnc/runtime/BufferPlan.h"
#include "nnc/runtime/TuningCache.h"
#include "nnc/train/Trainer.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace nnc::python {

namespace {

/// `nnc.Error`, raised with nnc's own message for everything nnc rejects.
py::object &errorType() {
  static py::object type;
  return type;
}

[[noreturn]] void raise(const Error &e) {
  PyErr_SetString(errorType().ptr(), e.message().c_str());
  throw py::error_already_set();
}

template <typename T> T take(Expected<T> e) {
  if (!e)
    raise(e.takeError());
  return std::move(*e);
}

/// The target `name` for the CPU $NNC_CPU names (else the host), an OpenCL target's device
/// chosen: made once per compile, train or tune call, as the CLI makes it from its options.
driver::Target targetOf(const std::string &name, const std::string &precision = "fp32") {
  CpuTarget cpu = take(CpuTarget::fromEnvironment());
  driver::Target t = take(driver::makeTarget(name, cpu));
  if (Error e = driver::setPrecision(t, precision))
    raise(e);
  return t;
}

/// The numpy dtype of an nnc dtype; nullopt for those numpy lacks (bf16, sub-byte types).
std::optional<py::dtype> numpyDType(DType t) {
  static const std::pair<DType, const char *> kNames[] = {
      {DType::F32, "float32"}, {DType::F64, "float64"}, {DType::F16, "float16"},
      {DType::I8, "int8"},     {DType::U8, "uint8"},    {DType::I16, "int16"},
      {DType::U16, "uint16"},  {DType::I32, "int32"},   {DType::U32, "uint32"},
      {DType::I64, "int64"},   {DType::U64, "uint64"},  {DType::Bool, "bool"}};
  for (const auto &[dtype, name] : kNames)
    if (dtype == t)
      return py::dtype(name);
  return std::nullopt;
}

/// One input or output of a model: name, dtype and shape (ints, or strings for symbolic dims).
struct TensorInfo {
  std::string name;
  py::object dtype; ///< A numpy dtype, or nnc's dtype name where numpy has none.
  py::tuple shape;

  static TensorInfo of(const Value &v) {
    TensorInfo info;
    info.name = v.name();
    std::optional<py::dtype> dt = numpyDType(v.dtype());
    info.dtype = dt ? py::object(*dt) : py::object(py::str(std::string(dtypeName(v.dtype()))));
    py::tuple shape(v.type().shape.size());
    for (size_t i = 0; i < v.type().shape.size(); ++i) {
      const Dim &d = v.type().shape[i];
      shape[i] = d.isStatic() ? py::object(py::int_(d.value())) : py::object(py::str(d.str()));
    }
    info.shape = shape;
    return info;
  }
  std::string repr() const {
    return fmt::format("TensorInfo(name='{}', dtype={}, shape={})", name,
                       py::repr(dtype).cast<std::string>(), py::repr(shape).cast<std::string>());
  }
};

/// An nnc Tensor of dtype `want` holding a copy of `obj` (any array-like); `what` names it in
/// errors.
Tensor tensorOf(const py::handle &obj, DType want, const std::string &what) {
  py::module_ np = py::module_::import("numpy");
  // A copy only where the array is not already C-contiguous (or not an array at all); a 0-d
  // array stays one (numpy's ascontiguousarray would make it [1], which a scalar input is not).
  py::array a = np.attr("asarray")(obj, py::arg("order") = "C");
  std::optional<py::dtype> dt = numpyDType(want);
  if (!dt)
    throw py::type_error(
        fmt::format("{}: its dtype {} has no numpy equivalent", what, dtypeName(want)));
  if (!a.dtype().is(*dt) && !a.dtype().equal(*dt))
    throw py::type_error(fmt::format("{}: the model takes {} ({}), not {}", what,
                                     py::str(*dt).cast<std::string>(), dtypeName(want),
                                     py::str(a.dtype()).cast<std::string>()));
  Extents extents(a.shape(), a.shape() + a.ndim());
  return Tensor::fromBytes(want, extents, a.data());
}

/// An nnc Tensor holding a copy of `obj` for the model input `v`.
Tensor inputTensor(const py::handle &obj, const Value &v) {
  return tensorOf(obj, v.dtype(), fmt::format("input '{}'", v.name()));
}

/// A numpy array viewing `t`'s buffer; the array keeps the tensor alive (no copy). `what`
/// names the tensor in the error for dtypes numpy lacks.
py::array arrayOf(Tensor t, const std::string &what) {
  std::optional<py::dtype> dt = numpyDType(t.dtype());
  if (!dt)
    raise(makeError("{}: its dtype {} has no numpy equivalent", what, dtypeName(t.dtype())));
  std::vector<py::ssize_t> shape(t.extents().begin(), t.extents().end());
  auto *owner = new Tensor(std::move(t));
  py::capsule keep(owner, [](void *p) { delete static_cast<Tensor *>(p); });
  // An empty tensor may have no buffer; numpy still wants a pointer.
  static char empty;
  void *data = owner->rawData();
  return py::array(*dt, shape, data ? data : &empty, keep);
}

/// A compiled model: the graph after the target's passes and a Runner over it.
class Model {
public:
  static std::unique_ptr<Model> compile(const std::string &path, const std::string &targetName,
                                        int threads, const std::string &tuningCache,
                                        bool verbose, const std::string &precision) {
    std::unique_ptr<Model> m(new Model(targetOf(targetName, precision)));
    std::unique_ptr<driver::ModelFile> file = take(driver::ModelFile::open(path));
    std::vector<OnnxIssue> issues = file->check();
    if (!issues.empty()) {
      std::string msg =
          fmt::format("{}: {} unsupported operator(s) or attribute(s):", path, issues.size());
      for (const OnnxIssue &i : issues)
        msg += fmt::format("\n  {} ({}): {}", i.place(), i.opType, i.message);
      raise(Error(msg));
    }
    m->graph_ = take(file->load());
    // What inspect(after=) replays the pipeline on. Constants are shared, not copied.
    m->imported_ = m->graph_->clone();
    if (Error e = driver::optimize(*m->graph_, m->target_))
      raise(e);
    driver::ExecOptions eo;
    eo.threads = threads;
    eo.tuningCache = tuningCache;
    eo.verbose = verbose;
    m->runner_ = take(driver::Runner::create(*m->graph_, m->target_, eo));
    return m;
  }

  std::vector<TensorInfo> inputs() const { return infos(graph_->inputs()); }
  std::vector<TensorInfo> outputs() const { return infos(graph_->outputs()); }
  std::string target() const { return driver::targetName(target_); }

  /// model(a, b) or model({"a": a, "b": b}).
  py::list call(const py::args &args, const py::kwargs &kwargs) {
    const std::vector<Value *> &ins = graph_->inputs();
    std::vector<Tensor> tensors;
    if (args.size() == 1 && py::isinstance<py::dict>(args[0]) && kwargs.empty()) {
      py::dict byName = args[0].cast<py::dict>();
      for (const Value *v : ins) {
        if (!byName.contains(v->name()))
          throw py::key_error(fmt::format("no value for model input '{}'", v->name()));
        tensors.push_back(inputTensor(byName[py::str(v->name())], *v));
      }
      for (const auto &item : byName) {
        std::string key = py::str(item.first).cast<std::string>();
        bool known = false;
        for (const Value *v : ins)
          known = known || v->name() == key;
        if (!known)
          throw py::key_error(
              fmt::format("the model has no input '{}' (inputs: {})", key, inputNames()));
      }
    } else {
      if (!kwargs.empty())
        throw py::type_error("pass inputs by position or as one dict by input name");
      if (args.size() != ins.size())
        throw py::type_error(fmt::format("the model takes {} input(s) ({}), {} given", ins.size(),
                                         inputNames(), args.size()));
      for (size_t i = 0; i < ins.size(); ++i)
        tensors.push_back(inputTensor(args[i], *ins[i]));
    }
    std::optional<Expected<std::vector<Tensor>>> outs;
    {
      // Other Python threads run meanwhile; calls of this model take turns.
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      outs.emplace(runner_->run(tensors));
    }
    std::vector<Tensor> results = take(std::move(*outs));
    lastShapes_.clear();
    for (const Tensor &t : tensors)
      lastShapes_.push_back(t.extents());
    py::list result;
    for (size_t k = 0; k < results.size(); ++k)
      result.append(
          arrayOf(std::move(results[k]), fmt::format("output '{}'", graph_->outputs()[k]->name())));
    return result;
  }

  /// The generated kernels' names, in launch order.
  std::vector<std::string> kernels() {
    std::vector<std::string> names;
    for (const kir::Kernel &k : executable()->kernels())
      names.push_back(k.name);
    return names;
  }
  /// The buffer plan as `nnc inspect --plan` prints it.
  std::string plan() { return executable()->plan().str(); }

  /// The text IR after the pass `after` of the target's pipeline ("import": as imported;
  /// none: after the whole pipeline, what was compiled), as `nnc inspect --after
  /// --full-constants` prints it.
  std::string inspect(const std::optional<std::string> &after) const {
    if (!after)
      return printGraph(*graph_);
    PassPipeline full = take(PassPipeline::forTarget(driver::pipelineTarget(target_)));
    Expected<PassPipeline> prefix = full.upTo(*after);
    if (!prefix)
      raise(makeError("inspect(after='{}'): {}", *after, prefix.takeError().message()));
    std::unique_ptr<Graph> g = imported_->clone();
    PassContext ctx;
    ctx.cpu = target_.cpu;
    ctx.evaluate = driver::interpreterEvaluator();
    if (Error e = prefix->run(*g, ctx))
      raise(e);
    return printGraph(*g);
  }
  /// The pass names of the target's pipeline, in order (what inspect(after=) takes).
  std::vector<std::string> passes() const {
    return take(PassPipeline::forTarget(driver::pipelineTarget(target_))).passes();
  }

private:
  explicit Model(driver::Target target) : target_(std::move(target)) {}

  static std::vector<TensorInfo> infos(const std::vector<Value *> &values) {
    std::vector<TensorInfo> out;
    for (const Value *v : values)
      out.push_back(TensorInfo::of(*v));
    return out;
  }
  std::string inputNames() const {
    std::string s;
    for (const Value *v : graph_->inputs())
      s += (s.empty() ? "'" : ", '") + v->name() + "'";
    return s;
  }

  /// The CPU executable for the inputs' static shapes, else for the last call's shapes.
  Executable *executable() {
    CpuModel *cpu = runner_->cpuModel();
    if (!cpu || target_ != driver::Target::Cpu)
      raise(makeError("kernels and plan are those of the cpu target, not {}",
                      driver::targetName(target_)));
    std::vector<Extents> shapes = lastShapes_;
    if (shapes.empty())
      for (const Value *v : graph_->inputs()) {
        std::optional<Extents> e = staticExtents(v->type().shape);
        if (!e)
          raise(makeError("input '{}' has the symbolic shape {}: call the model once, and the "
                          "kernels and plan are those of that call's shapes",
                          v->name(), shapeStr(v->type().shape)));
        shapes.push_back(*e);
      }
    std::lock_guard<std::mutex> lock(mutex_);
    return take(cpu->executableFor(shapes));
  }

  driver::Target target_;
  std::unique_ptr<Graph> graph_, imported_;
  std::unique_ptr<driver::Runner> runner_;
  std::vector<Extents> lastShapes_;
  std::mutex mutex_; ///< Held while the runner runs or compiles.
};

/// A model given as a path (str or os.PathLike) or as ONNX bytes. Bytes are written to a
/// temporary file, removed with this object, since the importer reads files.
class ModelSource {
public:
  explicit ModelSource(const py::object &model) {
    if (!py::isinstance<py::bytes>(model) && !py::isinstance<py::bytearray>(model)) {
      path_ = py::str(py::module_::import("os").attr("fspath")(model)).cast<std::string>();
      return;
    }
    std::string bytes = py::isinstance<py::bytes>(model)
                            ? model.cast<std::string>()
                            : py::bytes(model.cast<py::bytearray>()).cast<std::string>();
    std::string dir = (fs::temp_directory_path() / "nnc-python-XXXXXX").string();
    if (!mkdtemp(dir.data()))
      raise(makeError("cannot create a temporary folder for the model bytes in {}",
                      fs::temp_directory_path().string()));
    temp_ = fs::path(dir);
    path_ = (*temp_ / "model.onnx").string();
    std::ofstream f(path_, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.good())
      raise(makeError("cannot write the model bytes to {}", path_));
  }
  ModelSource(const ModelSource &) = delete;
  ModelSource &operator=(const ModelSource &) = delete;
  ~ModelSource() {
    std::error_code ec;
    if (temp_)
      fs::remove_all(*temp_, ec);
  }
  const std::string &path() const { return path_; }

  /// Runs `f`; an nnc.Error it raises names "<onnx bytes>" instead of the temporary file.
  template <typename F> auto naming(F &&f) const {
    try {
      return f();
    } catch (py::error_already_set &e) {
      if (!temp_ || !e.matches(errorType()))
        throw;
      std::string msg = py::str(e.value()).cast<std::string>();
      for (size_t at; (at = msg.find(path_)) != std::string::npos;)
        msg.replace(at, path_.size(), "<onnx bytes>");
      PyErr_SetString(errorType().ptr(), msg.c_str());
      throw py::error_already_set();
    }
  }

private:
  std::string path_;
  std::optional<fs::path> temp_;
};

/// nnc::Trainer over an ONNX model's initializers: one compiled train step (forward, backward,
/// optimizer update) whose parameters and optimizer state stay inside it between steps.
class PyTrainer {
public:
  static std::unique_ptr<PyTrainer> create(const py::object &model,
                                           const std::optional<std::vector<std::string>> &params,
                                           const std::string &loss, const std::string &optimizer,
                                           double lr, int64_t batch, const std::string &target,
                                           int threads, double clipNorm, double weightDecay,
                                           double momentum, uint64_t seed) {
    std::unique_ptr<PyTrainer> t(new PyTrainer(model));
    t->source_.naming([&] {
      const std::string &path = t->source_.path();
      TrainOptions to(targetOf(target));
      to.loss = take(parseLoss(loss));
      to.optimizer = take(parseOptimizer(optimizer));
      to.lr = lr;
      to.batch = batch;
      to.clipNorm = clipNorm;
      to.weightDecay = weightDecay;
      to.momentum = momentum;
      to.seed = seed;
      to.exec.threads = threads;
      std::vector<std::string> names = params ? *params : take(onnxInitializerNames(path));
      if (names.empty())
        raise(makeError("{}: the model has no initializers to train", path));
      // Imported without constant folding: a folded transpose(W) would no longer be W.
      ImportOptions io;
      io.forTraining = true;
      std::unique_ptr<Graph> g = take(importOnnxFile(path, io));
      Expected<std::unique_ptr<Trainer>> tr = Trainer::create(*g, names, to);
      if (!tr)
        raise(tr.takeError().withContext(path));
      t->trainer_ = std::move(*tr);
      return 0;
    });
    return t;
  }

  /// One step on a batch and its labels; the batch's loss before the update.
  double step(const py::handle &x, const py::handle &y) {
    Tensor xs = tensorOf(x, trainer_->inputType().dtype, "inputs");
    Tensor ys = tensorOf(y, trainer_->labelType().dtype, "labels");
    std::optional<Expected<double>> loss;
    {
      py::gil_scoped_release release;
      loss.emplace(trainer_->step(xs, ys));
    }
    return take(std::move(*loss));
  }
  /// The trained initializers now, by name (copies: the trainer's own buffers change at every step;
  /// on OpenCL they are read back from the device).
  py::dict parameters() const {
    py::dict out;
    for (const auto &[name, value] : take(trainer_->parameters()))
      out[py::str(name)] = arrayOf(value.clone(), fmt::format("parameter '{}'", name));
    return out;
  }
  /// Writes the model with its initializers replaced by the trained parameters.
  void save(const std::string &out) const {
    source_.naming([&] {
      if (Error e = writeOnnxWithInitializers(source_.path(), out, take(trainer_->parameters())))
        raise(e);
      return 0;
    });
  }
  int64_t steps() const { return trainer_->steps(); }
  std::string stepGraph() const { return printGraph(trainer_->unoptimizedStepGraph()); }

private:
  explicit PyTrainer(const py::object &model) : source_(model) {}
  ModelSource source_; ///< Kept for save(): the trained model is the source with new weights.
  std::unique_ptr<Trainer> trainer_;
};

/// A tuned kernel of nnc.tune's summary.
py::dict tunedKernel(const TuneSummary::Kernel &k) {
  py::dict d;
  d["signature"] = k.problem.signature;
  d["uses"] = k.uses;
  d["default_ms"] = k.defaultMs;
  d["best_ms"] = k.bestMs;
  d["config"] = k.bestConfig;
  d["trials"] = k.measured;
  d["rejected"] = k.rejected;
  return d;
}

/// nnc.tune: measures the best configs of the model's tunable kernels and keeps them in the
/// tuning cache, as `nnc tune` does.
py::list tune(const py::object &model, const std::string &targetName, double budget, int threads,
              int trials, const std::optional<std::string> &cachePath, bool progress,
              const std::map<std::string, std::vector<int64_t>> &shapes) {
  ModelSource source(model);
  return source.naming([&] {
    driver::Target target = targetOf(targetName);
    if (budget <= 0)
      throw py::value_error("budget must be a positive number of seconds");
    std::map<std::string, Extents> extents;
    for (const auto &[name, e] : shapes)
      extents[name] = Extents(e.begin(), e.end());
    TuneOptions opts(target.cpu);
    opts.threads = threads;
    opts.budgetSeconds = budget;
    opts.maxTrials = trials;
    opts.progress = progress;
    std::optional<Expected<TuneSummary>> s;
    {
      py::gil_scoped_release release;
      s.emplace(driver::tuneModel(source.path(), target, extents, cachePath.value_or(""), opts));
    }
    TuneSummary summary = take(std::move(*s));
    py::list out;
    for (const TuneSummary::Kernel &k : summary.kernels)
      out.append(tunedKernel(k));
    return out;
  });
}

} // namespace

PYBIND11_MODULE(_nnc, m) {
  m.doc() = "nnc: compile ONNX models and run them on numpy arrays";
  errorType() = py::reinterpret_borrow<py::object>(PyErr_NewExceptionWithDoc(
      "nnc.Error", "An error nnc reports (bad model, wrong shape).", PyExc_RuntimeError, nullptr));
  m.attr("Error") = errorType();

  py::class_<TensorInfo>(m, "TensorInfo", "A model input or output: name, dtype, shape.")
      .def_readonly("name", &TensorInfo::name)
      .def_readonly("dtype", &TensorInfo::dtype)
      .def_readonly("shape", &TensorInfo::shape, "ints, or strings for symbolic dims")
      .def("__repr__", &TensorInfo::repr);

  py::class_<Model>(m, "Model", "A compiled model; call it with numpy arrays.")
      .def("__call__", &Model::call,
           "model(a, b, ...) or model({'name': a, ...}): runs the model and returns its "
           "outputs as a list of numpy arrays")
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("target", &Model::target)
      .def_property_readonly("kernels", &Model::kernels,
                             "cpu: the generated kernels' names in launch order")
      .def_property_readonly("plan", &Model::plan,
                             "cpu: the buffer plan, as `nnc inspect --plan` prints it")
      .def_property_readonly("passes", &Model::passes,
                             "The target's pass pipeline, in order")
      .def("inspect", &Model::inspect, py::arg("after") = py::none(),
           "The text IR after the pass `after` of the pipeline ('import': as imported; "
           "default: after all of them, as compiled), as `nnc inspect --after` prints it");

  m.def(
      "compile",
      [](const py::object &model, const std::string &target, int threads,
         const std::optional<std::string> &tuningCache, bool verbose,
         const std::string &precision) {
        ModelSource source(model);
        return source.naming([&] {
          return Model::compile(source.path(), target, threads, tuningCache.value_or(""),
                                verbose, precision);
        });
      },
      py::arg("model"), py::arg("target") = "cpu", py::arg("threads") = 1,
      py::arg("tuning_cache") = py::none(), py::arg("verbose") = false,
      py::arg("precision") = "fp32",
      "Compiles an ONNX model (a path, or the model's bytes) for a target ('cpu', 'interp', "
      "'opencl[:P.D]', 'auto'); threads: the cpu thread pool (0: all cores); tuning_cache: "
      "the cache of tuned configs to use (default: nnc's, when it exists); verbose: say on "
      "stderr when the cache of per-shape programs drops one; precision: 'fp32' or 'bf16' "
      "(matmuls with bf16 operands and f32 sums, as `nnc run --precision bf16`).");

  m.def("tune", &tune, py::arg("model"), py::arg("target") = "cpu", py::arg("budget") = 60.0,
        py::arg("threads") = 1, py::arg("trials") = 0, py::arg("cache") = py::none(),
        py::arg("progress") = false,
        py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{},
        "Measures the best configs of the model's tunable kernels (target 'cpu' or "
        "'opencl[:P.D]', timed on that device) within `budget` seconds and "
        "keeps them in the tuning cache (`cache`, default nnc's), which later compiles use. "
        "Returns one dict per kernel: signature, uses, default_ms, best_ms, config, trials, "
        "rejected. shapes: extents of symbolic inputs by name, e.g. {'x': (1, 3, 224, 224)}.");

  py::class_<PyTrainer>(m, "Trainer",
                        "A compiled train step over an ONNX model's initializers: forward, "
                        "backward and the optimizer update in one executable.")
      .def(py::init(&PyTrainer::create), py::arg("model"), py::arg("params") = py::none(),
           py::arg("loss") = "softmax_cross_entropy", py::arg("optimizer") = "adam",
           py::arg("lr") = 1e-3, py::arg("batch") = 32, py::arg("target") = "cpu",
           py::arg("threads") = 0, py::arg("clip_norm") = 0.0, py::arg("weight_decay") = 0.01,
           py::arg("momentum") = 0.9, py::arg("seed") = 0,
           "model: a path or ONNX bytes; its first input takes a batch and its first output "
           "predicts. params: the initializers to train (default: all). loss: "
           "'softmax_cross_entropy' or 'mse'; optimizer: 'sgd', 'momentum', 'nesterov', "
           "'adam', 'adamw' or 'adagrad'. seed: of the dropout masks (a new one each step).")
      .def("step", &PyTrainer::step, py::arg("inputs"), py::arg("labels"),
           "One step on a batch ([batch, ...]) and its labels; returns the batch's loss before "
           "the update.")
      .def_property_readonly(
          "parameters", &PyTrainer::parameters,
          "The trained initializers now, by name (copies): the parameters and the batch "
          "norms' running statistics")
      .def_property_readonly("steps", &PyTrainer::steps)
      .def_property_readonly("step_graph", &PyTrainer::stepGraph,
                             "The train-step graph as text IR, before the target's passes")
      .def("save", &PyTrainer::save, py::arg("path"),
           "Writes the model with the trained initializers (parameters, running statistics).");

  m.def(
      "load_tensor",
      [](const std::string &path) { return arrayOf(take(driver::readTensorFile(path)), path); },
      py::arg("path"), "Reads a tensor from an ONNX TensorProto (.pb) or .npy file.");
}

} // namespace nnc::python

// The `nnc._nnc` extension module: compile an ONNX model and run it on numpy arrays, over the
// driver API that the `nnc` CLI uses (tools/driver/Driver.h).
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

#include "driver/Driver.h"
#include "nnc/runtime/BufferPlan.h"

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

/// An nnc Tensor holding a copy of `obj` (any array-like) for the model input `v`.
Tensor inputTensor(const py::handle &obj, const Value &v) {
  py::module_ np = py::module_::import("numpy");
  // A copy only where the array is not already C-contiguous (or not an array at all).
  py::array a = np.attr("ascontiguousarray")(obj);
  std::optional<py::dtype> want = numpyDType(v.dtype());
  if (!want)
    throw py::type_error(fmt::format("input '{}': its dtype {} has no numpy equivalent", v.name(),
                                     dtypeName(v.dtype())));
  if (!a.dtype().is(*want) && !a.dtype().equal(*want))
    throw py::type_error(fmt::format("input '{}': the model takes {} ({}), not {}", v.name(),
                                     py::str(*want).cast<std::string>(), dtypeName(v.dtype()),
                                     py::str(a.dtype()).cast<std::string>()));
  Extents extents(a.shape(), a.shape() + a.ndim());
  return Tensor::fromBytes(v.dtype(), extents, a.data());
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
                                        int threads, bool verbose) {
    std::unique_ptr<Model> m(new Model());
    m->target_ = take(driver::parseTarget(targetName));
    std::unique_ptr<driver::ModelFile> file = take(driver::ModelFile::open(path));
    std::vector<OnnxIssue> issues = file->check();
    if (!issues.empty()) {
      std::string msg =
          fmt::format("{}: {} unsupported operator(s) or attribute(s):", path, issues.size());
      for (const OnnxIssue &i : issues)
        msg += fmt::format("\n  node '{}' ({}): {}", i.node, i.opType, i.message);
      raise(Error(msg));
    }
    m->graph_ = take(file->load());
    if (Error e = driver::optimize(*m->graph_, m->target_))
      raise(e);
    driver::ExecOptions eo;
    eo.threads = threads;
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

private:
  Model() = default;

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
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<driver::Runner> runner_;
  std::vector<Extents> lastShapes_;
  std::mutex mutex_; ///< Held while the runner runs or compiles.
};

/// The path of `model`: a path (str or os.PathLike) as is; ONNX bytes written to a temporary
/// file (removed by the caller), since the importer reads files.
std::string modelPath(const py::object &model, std::optional<fs::path> *temp) {
  if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model)) {
    std::string bytes = py::isinstance<py::bytes>(model)
                            ? model.cast<std::string>()
                            : py::bytes(model.cast<py::bytearray>()).cast<std::string>();
    std::string dir = (fs::temp_directory_path() / "nnc-python-XXXXXX").string();
    if (!mkdtemp(dir.data()))
      raise(makeError("cannot create a temporary folder for the model bytes in {}",
                      fs::temp_directory_path().string()));
    *temp = fs::path(dir);
    fs::path file = fs::path(dir) / "model.onnx";
    std::ofstream(file, std::ios::binary).write(bytes.data(), bytes.size());
    return file.string();
  }
  return py::str(py::module_::import("os").attr("fspath")(model)).cast<std::string>();
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
                             "cpu: the buffer plan, as `nnc inspect --plan` prints it");

  m.def(
      "compile",
      [](const py::object &model, const std::string &target, int threads, bool verbose) {
        std::optional<fs::path> temp;
        std::string path = modelPath(model, &temp);
        struct Cleanup {
          std::optional<fs::path> &dir;
          ~Cleanup() {
            std::error_code ec;
            if (dir)
              fs::remove_all(*dir, ec);
          }
        } cleanup{temp};
        try {
          return Model::compile(path, target, threads, verbose);
        } catch (py::error_already_set &e) {
          // Name the bytes, not the temporary file, in nnc's message.
          if (!temp || !e.matches(errorType()))
            throw;
          std::string msg = py::str(e.value()).cast<std::string>();
          for (size_t at; (at = msg.find(path)) != std::string::npos;)
            msg.replace(at, path.size(), "<onnx bytes>");
          PyErr_SetString(errorType().ptr(), msg.c_str());
          throw py::error_already_set();
        }
      },
      py::arg("model"), py::arg("target") = "cpu", py::arg("threads") = 1,
      py::arg("verbose") = false,
      "Compiles an ONNX model (a path, or the model's bytes) for a target ('cpu', 'interp', "
      "'opencl[:P.D]', 'auto'); threads: the cpu thread pool (0: all cores); verbose: say on "
      "stderr when the cache of per-shape programs drops one.");

  m.def(
      "load_tensor",
      [](const std::string &path) { return arrayOf(take(driver::readTensorFile(path)), path); },
      py::arg("path"), "Reads a tensor from an ONNX TensorProto (.pb) or .npy file.");
}

} // namespace nnc::python

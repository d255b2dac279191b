// What the nnc CLI and the conformance runner share: loading models, reading and writing
// test data, running a graph on a target, and comparing results.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Target.h"
#include "nnc/ir/Tensor.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/OpenCL.h"
#include "nnc/runtime/TuningCache.h"

namespace nnc::driver {

/// Where a graph runs (the reference interpreter, kernels for the CPU, OpenCL C on a device)
/// and what code is generated for: nnc::Target (ir/Target.h), made once by each entry point
/// and handed down.
using nnc::Target;

/// The target named "interp", "cpu", "opencl", "opencl:P.D" (or "opencl:P"), or "auto" (the
/// best device there is: an OpenCL GPU, else the CPU; `note` then says which in one line),
/// for `cpu`. An OpenCL target's device is chosen here only for "auto"; chooseDevice() does it
/// otherwise. The error lists the targets there are.
Expected<Target> parseTarget(const std::string &name, const CpuTarget &cpu,
                             std::string *note = nullptr);
/// parseTarget, then chooseDevice: what an entry point that runs the code calls once.
Expected<Target> makeTarget(const std::string &name, const CpuTarget &cpu,
                            std::string *note = nullptr);
/// Chooses an OpenCL target's device once (pickOpenCLDevice for t.platform.t.device) and
/// records it in t.gpu; nothing for another kind or a device already chosen. Fails, saying
/// what is missing, when there is no such device. Each entry point calls it once (the
/// conformance runner in each test's child process: the OpenCL driver must not start in the
/// parent it forks from).
Error chooseDevice(Target &t);
/// The matmul precision `name` (--precision, nnc.compile's precision: "fp32" or "bf16") for
/// target `t`'s code (CpuTarget::setPrecision, whose error names what a CPU lacks for bf16);
/// bf16 only for the cpu target.
Error setPrecision(Target &t, const std::string &name);
/// "interp", "cpu", "opencl" or "opencl:P.D" (Target::name()).
std::string targetName(const Target &t);

/// Loads a model: .onnx through the importer, .nir through the text parser. `knownInputs`
/// (by input name) supply compile-time values the model passes as graph inputs;
/// `inputForms` the lengths of its sequence and optional inputs (ImportOptions::inputForms);
/// `boundary`, when given, receives how its inputs and outputs map onto the graph's (.nir:
/// one tensor each).
Expected<std::unique_ptr<Graph>> loadModel(const std::string &path,
                                           const std::map<std::string, Tensor> &knownInputs = {},
                                           const std::map<std::string, ValueForm> &inputForms = {},
                                           OnnxBoundary *boundary = nullptr);

/// A model file read once, for callers that check it, list its inputs and load it (the free
/// functions around it read the file anew each).
class ModelFile {
public:
  static Expected<std::unique_ptr<ModelFile>> open(const std::string &path);
  /// As modelInputNames.
  const std::vector<std::string> &inputNames() const { return names_; }
  /// ONNX: the unsupported operators and attributes (checkOnnxFile); .nir: none.
  std::vector<OnnxIssue> check() const;
  /// The declared forms of the inputs (OnnxModel::inputForms; .nir: tensors).
  Expected<std::vector<ValueForm>> inputForms() const;
  /// As loadModel. Moves the model's data into the graph: call it once.
  Expected<std::unique_ptr<Graph>> load(const std::map<std::string, Tensor> &knownInputs = {},
                                        const std::map<std::string, ValueForm> &inputForms = {},
                                        OnnxBoundary *boundary = nullptr);

private:
  std::unique_ptr<OnnxModel> onnx_;
  std::unique_ptr<Graph> nir_;
  std::vector<std::string> names_;
};
/// Names of the model's inputs in order (ONNX: non-initializer graph inputs).
Expected<std::vector<std::string>> modelInputNames(const std::string &path);

/// Reads a tensor from a .pb (TensorProto) or .npy file, by extension.
Expected<Tensor> readTensorFile(const std::string &path);
/// Writes a tensor as .pb or .npy, by extension.
Error writeTensorFile(const std::string &path, const Tensor &t, const std::string &name);

/// Reads a model input or output of kind `kind` (the model's type for it): a tensor as
/// readTensorFile, a sequence or an optional from a .pb SequenceProto or OptionalProto.
Expected<OnnxValue> readValueFile(const std::string &path, ValueForm::Kind kind);
/// Writes a model value: a tensor as writeTensorFile, a sequence or optional as .pb.
Error writeValueFile(const std::string &path, const OnnxValue &v, const std::string &name);
/// The graph's outputs `outs` grouped into the model's outputs by their `forms`
/// (OnnxBoundary::outputs); an error when the counts do not match.
Expected<std::vector<OnnxValue>> groupOutputs(const std::vector<ValueForm> &forms,
                                              std::vector<Tensor> outs);
/// The inputs of a model read from files, as the importer and the runner take them: the
/// values of tensor inputs (ImportOptions::knownInputs), the forms of sequence and optional
/// ones (ImportOptions::inputForms), and all their tensors in graph-input order.
struct ModelInputs {
  std::map<std::string, Tensor> known;
  std::map<std::string, ValueForm> forms;
  std::vector<Tensor> tensors;
  /// Adds input `name` with value `v`.
  void add(const std::string &name, OnnxValue v);
};

/// The reference interpreter as the evaluator that constant folding and the importer use.
PassContext::Evaluator interpreterEvaluator();

/// nnc::specializeShapes with the interpreter as evaluator, for CpuModel.
Specializer shapeSpecializer();
/// shapeSpecializer, and then, for the CPU, the passes that need static shapes once more on
/// a specialized graph whose shapes all became static: the pipeline ran on the symbolic
/// graph, where layout-nchwc and winograd take no conv and pack-gemm-weights no matmul, so a
/// dynamic-shape model ran every conv as im2col + GEMM and every weight GEMM on an unpacked
/// weight (copied into panels on every run) at any shape. The programs of one specializer
/// share their packed weights (PackedWeightCache). `passes`, when not "", is the pipeline
/// the graph went through in place of the target's (runPasses(g, target, passes)): the
/// static-shape passes are its own from layout-nchwc on, none where it has no layout-nchwc.
Specializer shapeSpecializer(const Target &target, std::string_view passes = {});
/// `g` specialized to the inputs' `shapes` ahead of any run (nnc tune, inspect and compile
/// with --shape: every shape must follow from them), with the static-shape passes of
/// shapeSpecializer(target), so that those commands see the kernels a run of those shapes
/// compiles.
Expected<std::unique_ptr<Graph>> specializeAhead(const Graph &g, const std::vector<Extents> &shapes,
                                                 const Target &target);

/// The name of the graph pipeline a target runs (PassPipeline::forTarget): "cpu" (also for
/// interp); "opencl-cpu" for an OpenCL device of type cpu (Target::openclType, else the
/// type of the chosen device), "opencl" for any other (a GPU) or when none is chosen.
std::string pipelineTarget(const Target &t);

/// Runs the target's optimization pipeline that precedes execution (shape inference,
/// folding, ...), with the verifier after every pass unless `verifyEach` is false.
Error optimize(Graph &g, const Target &target, bool verifyEach = true);
/// optimize() for the CPU target generating code for `cpu`.
Error optimize(Graph &g, const CpuTarget &cpu, bool verifyEach = true);
/// optimize(), or the pipeline `passes` (PassPipeline::parse's text) in place of the
/// target's: "" runs the target's, "none" no pass (`nnc run --passes`, `nnc bench --passes`).
Error runPasses(Graph &g, const Target &target, std::string_view passes);

/// What `nnc tune` and nnc.tune share: loads `model`, optimizes it for `target` (cpu or
/// opencl), specializes symbolic inputs on `shapes` (extents by input name; every other
/// input must be static) and tunes its kernels into the tuning cache at `cachePath` ("":
/// TuningCache::defaultPath()). `opts.cpu` and `opts.opencl` are set from `target` (an OpenCL
/// target's device must be chosen).
Expected<TuneSummary> tuneModel(const std::string &model, const Target &target,
                                const std::map<std::string, Extents> &shapes,
                                const std::string &cachePath, TuneOptions opts);

/// How a target runs a graph.
struct ExecOptions {
  int threads = 0;            ///< cpu: threads of the pool (0: all cores, 1: serial).
  bool profile = false;       ///< opencl: time every kernel with profiling events.
  bool openclOptimize = true; ///< opencl: false builds with -cl-opt-disable (OpenCLOptions).
  /// opencl: false neither reads nor writes the program-binary cache (OpenCLOptions::cacheDir
  /// empty): a program is built from source, and the device is not asked for its binary.
  bool openclProgramCache = true;
  /// cpu, opencl: the tuning cache to take tuned configs from ("": TuningCache::defaultPath(),
  /// used only when it exists; a path given here is created when missing).
  std::string tuningCache;
  bool useTuningCache = true;
  /// cpu, opencl: say on stderr when the cache of per-shape programs drops one.
  bool verbose = false;
  /// cpu: the pipeline the graph went through when not the target's (`--passes`), for the
  /// passes that rerun on a specialized graph (shapeSpecializer).
  std::string passes;
};

/// A graph prepared for repeated runs on one target. For cpu it holds a CpuModel, which
/// compiles once per input-shape signature; for interp it refers to the graph, which must
/// outlive the runner.
class Runner {
public:
  /// An OpenCL target's device must be chosen (chooseDevice).
  static Expected<std::unique_ptr<Runner>> create(const Graph &g, Target target,
                                                  const ExecOptions &opts = {});
  /// Runs on `inputs` (graph-input order).
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs);
  Target target() const { return target_; }
  /// The model that compiles per input-shape signature (null for interp).
  CpuModel *cpuModel() const { return cpu_.get(); }

private:
  explicit Runner(Target target) : target_(std::move(target)) {}
  Target target_;
  const Graph *graph_ = nullptr;
  std::unique_ptr<CpuModel> cpu_;
};

/// Runs `g` on `inputs` (graph-input order) on the target, once (for repeated runs, keep a
/// Runner: on cpu each execute() compiles).
Expected<std::vector<Tensor>> execute(const Graph &g, const std::vector<Tensor> &inputs,
                                      Target target, const ExecOptions &opts = {});

/// numpy.testing.assert_allclose semantics for floats (|a-e| <= atol + rtol*|e|, NaN equals
/// NaN, infinities must match), exact equality for integers, bool and storage types; dtype
/// and extents must match. Returns an empty string when equal, else what differs.
std::string compareTensors(const Tensor &expected, const Tensor &actual, double rtol = 1e-3,
                           double atol = 1e-7);
/// compareTensors over model values: the forms (kind, presence, length) must match, then
/// each tensor.
std::string compareValues(const OnnxValue &expected, const OnnxValue &actual, double rtol = 1e-3,
                          double atol = 1e-7);

} // namespace nnc::driver

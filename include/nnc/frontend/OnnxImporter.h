// Reads ONNX models into an nnc Graph, and ONNX TensorProto / .npy tensors from files.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"
// .npy files are the runtime core's (nnc_runtime_core); callers that read tensor files beside
// models get both kinds here.
#include "nnc/runtime/NpyFile.h"

namespace nnc {

/// The form of a model input or output in ONNX's terms: a tensor, a sequence of tensors, or
/// an optional (holding a tensor, a sequence, or nothing). nnc's IR has tensors only: the
/// importer resolves a sequence to the tensors it holds (a static sequence, its length fixed
/// at import time) and an optional to its value or to nothing, so a sequence input of n
/// tensors is n graph inputs, in order, and an absent optional is none.
struct ValueForm {
  enum class Kind { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  bool present = true;      ///< Optional: holds a value.
  bool ofSequence = false;  ///< Optional: holds (or would hold) a sequence, not a tensor.
  DType dtype = DType::F32; ///< The element type (of the tensor, or of a sequence's tensors).
  /// The tensors it holds, in order: the graph inputs or outputs it takes (one for a tensor,
  /// none for an empty sequence or an absent optional).
  std::vector<TensorType> elements;

  /// A sequence, or an optional of one.
  bool holdsSequence() const {
    return kind == Kind::Sequence || (kind == Kind::Optional && ofSequence);
  }
  /// "a tensor", "a sequence of 3 tensors", "an optional sequence of 2 tensors", "an empty
  /// optional (of a tensor)".
  std::string str() const;
};

/// A model input or output value: its form and the tensors it holds.
struct OnnxValue {
  ValueForm form;
  std::vector<Tensor> tensors;
  /// A plain tensor.
  static OnnxValue ofTensor(Tensor t);
};

/// How the ONNX graph's inputs (initializers excluded) and outputs map onto the imported
/// graph's: each takes as many graph inputs or outputs, in order, as its form holds tensors.
struct OnnxBoundary {
  std::vector<std::string> inputNames;
  std::vector<ValueForm> inputs;
  std::vector<std::string> outputNames;
  std::vector<ValueForm> outputs;
};

struct ImportOptions {
  /// Values for graph inputs, by name. An operator that needs a compile-time value (say
  /// ReduceSum's `axes` or Split's `split`) that the model passes as a graph input takes it
  /// from here; the input stays in the graph's input list (unused) so positions still match.
  std::map<std::string, Tensor> knownInputs;
  /// Evaluates a node on constant operands (pass nnc::evaluateNode, the reference
  /// interpreter). With it, nodes whose operands are all constants are folded while
  /// importing, so lowerings that need compile-time values (axes, split sizes, shapes
  /// computed by Shape/Gather/Concat chains) get them. Without it only `shape` of a static
  /// shape is folded. The frontend does not depend on the runtime; the caller wires it.
  std::function<Expected<std::vector<Tensor>>(const Node &, const std::vector<Tensor> &)>
      evaluate;
  /// Imports the model for nnc::Trainer: every BatchNormalization, whatever its
  /// training_mode, becomes the inference-form batch_norm over its input_mean and input_var,
  /// with its momentum, which the Trainer turns into batch statistics and running-statistic
  /// updates (PyTorch's train() mode); and every training-mode Dropout draws its mask from
  /// dropoutTraining's generator, whose counter is the graph input kStepCounterInput
  /// (added after the model's inputs), so that the Trainer's step count draws a new mask
  /// each step (the Dropout's seed attribute gives way to the Trainer's seed).
  bool forTraining = false;
  /// The forms of the graph inputs that are sequences or optionals, by name: whether each
  /// is present and the types of the tensors it holds (a sequence's length is fixed here).
  /// Every such input needs one; its tensors become graph inputs named NAME.0, NAME.1, ...
  std::map<std::string, ValueForm> inputForms;
};

/// Imports a .onnx file. External data is resolved relative to the model's folder and may
/// not escape it. Errors name the file and the node, operator or attribute at fault.
/// `boundary`, when given, receives how the model's inputs and outputs map onto the graph's.
Expected<std::unique_ptr<Graph>> importOnnxFile(const std::string &path,
                                                const ImportOptions &options = {},
                                                OnnxBoundary *boundary = nullptr);

/// Names of the model's graph inputs that are not initializers, in graph order (the order
/// of ONNX test data's input_K.pb files). Fails when the file cannot be read or parsed.
Expected<std::vector<std::string>> onnxGraphInputNames(const std::string &path);

/// One problem `nnc check` reports: an unsupported operator or attribute (or value).
struct OnnxIssue {
  std::string node;     ///< Node name (or "#index" when unnamed, the index in its graph).
  std::string opType;   ///< ONNX op type with domain if not the default one.
  std::string message;  ///< What is unsupported.
  /// The control-flow nodes and graph attributes the node sits in, outermost first
  /// ("If 'nms' / then_branch", "Loop 'l' / body / If '#3' / else_branch"); empty for a node
  /// of the main graph.
  std::string scope;
  /// Where the node is: "node 'y'", or with its scope "If 'x' / then_branch / node 'y'".
  std::string place() const {
    std::string n = "node '" + node + "'";
    return scope.empty() ? n : scope + " / " + n;
  }
};

/// Lists every unsupported operator and attribute of a model at once, inside subgraphs too
/// (the branches of If, the bodies of Loop and Scan, at any depth). Fails only when the file
/// cannot be read or parsed as a model.
Expected<std::vector<OnnxIssue>> checkOnnxFile(const std::string &path);

/// An ONNX file read and parsed once, for callers that check it, list its inputs and import
/// it (each of importOnnxFile, checkOnnxFile and onnxGraphInputNames parses the file anew).
class OnnxModel {
public:
  /// Reads and parses `path` (the checks of importOnnxFile on the model as a whole).
  static Expected<std::unique_ptr<OnnxModel>> load(const std::string &path);
  ~OnnxModel();
  /// As checkOnnxFile.
  std::vector<OnnxIssue> check() const;
  /// As onnxGraphInputNames.
  std::vector<std::string> inputNames() const;
  /// The declared forms of those inputs (kind, element type; no element types for
  /// sequences, whose length the model does not fix). Fails on a map or sparse input.
  Expected<std::vector<ValueForm>> inputForms() const;
  /// As importOnnxFile. Moves the initializers' data into the graph: call it once.
  Expected<std::unique_ptr<Graph>> import(const ImportOptions &options = {},
                                          OnnxBoundary *boundary = nullptr);

  /// The parsed file (the importer's own).
  struct Loaded;

private:
  explicit OnnxModel(std::unique_ptr<Loaded> m);
  std::unique_ptr<Loaded> m_;
};

/// Reads a serialized onnx.TensorProto (the ONNX test-data .pb files). `name` receives the
/// tensor's name when not null.
Expected<Tensor> readTensorProtoFile(const std::string &path, std::string *name = nullptr);
/// Writes a serialized onnx.TensorProto.
Error writeTensorProtoFile(const std::string &path, const Tensor &t, const std::string &name);
/// Reads a serialized onnx.TensorProto, SequenceProto (of tensors) or OptionalProto (of a
/// tensor or a sequence of tensors), as `kind` says (the model's type of the value: the
/// three messages cannot be told apart by their bytes).
Expected<OnnxValue> readOnnxValueFile(const std::string &path, ValueForm::Kind kind);
/// Writes `v` as the TensorProto, SequenceProto or OptionalProto its form says.
Error writeOnnxValueFile(const std::string &path, const OnnxValue &v, const std::string &name);

} // namespace nnc

// The ONNX-operator lowering table: each ONNX op type maps to a function that emits nnc IR.
// Lowerings live in frontend/onnx/ops/*.cpp, grouped by kind, each group registered by a
// register*Lowerings() function called from Lowering.cpp.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

namespace onnx {
class NodeProto;
class AttributeProto;
class GraphProto;
} // namespace onnx

namespace nnc::onnxfe {

struct ImportedSubgraph;

/// A sequence or optional value, resolved while importing to the tensor values it holds (a
/// static sequence: its length and each element are known at import time). nnc's IR has
/// tensors only; the sequence and optional operators rearrange these lists.
/// One kind of sequence has a length known only at run time: one that a loop appends a
/// tensor to in every step (a Python list appended to in a loop, exported by PyTorch). It is
/// its elements followed by the rows of `rows`, a tensor [steps, ...] (the loop's per-step
/// output); the ops that read it (SequenceAt, SequenceLength, ConcatFromSequence,
/// SequenceInsert at the end) emit tensor ops on `rows`, the others refuse it.
struct StaticValue {
  bool optional = false;    ///< An optional (else a sequence).
  bool present = true;      ///< Optional: holds a value.
  bool ofSequence = true;   ///< A sequence, or an optional holding (or typed to hold) one.
  DType dtype = DType::F32; ///< The element type, known even when there are no elements.
  std::vector<Value *> elements; ///< A sequence's tensors; an optional tensor's one.
  Value *rows = nullptr;         ///< More elements, as the rows of one tensor (see above).

  static StaticValue sequence(DType t, std::vector<Value *> elements) {
    StaticValue v;
    v.dtype = t;
    v.elements = std::move(elements);
    return v;
  }
  /// "sequence", "optional" (for errors).
  const char *kindName() const { return optional ? "optional" : "sequence"; }
};

/// What an ONNX name denotes while importing: a tensor or a static sequence or optional.
using ImportValue = std::variant<Value *, StaticValue>;

/// What a lowering sees of one ONNX node, and how it emits IR.
class LoweringContext {
public:
  virtual ~LoweringContext() = default;

  // ---- The ONNX node ----
  virtual const onnx::NodeProto &proto() const = 0;
  /// The opset version of the node's domain.
  virtual int64_t opset() const = 0;
  /// "node 'name' (OpType)": the place for error messages.
  virtual std::string place() const = 0;
  /// Input i, or null when absent (beyond the list or an empty name).
  virtual Value *input(size_t i) const = 0;
  virtual size_t numInputs() const = 0;
  /// Number of outputs the node declares (including empty-named optional ones).
  virtual size_t numOutputs() const = 0;
  /// True when output i exists and has a non-empty name (is wanted).
  virtual bool hasOutput(size_t i) const = 0;
  /// ImportOptions::forTraining.
  virtual bool forTraining() const = 0;
  /// Input i when it is a sequence or an optional; null when it is a tensor or absent.
  /// Only lowerings registered with OpLowering::composite see such inputs (input() is null
  /// for them); any other operator given one is an error naming the input.
  virtual const StaticValue *compositeInput(size_t i) const = 0;

  // ---- Attributes (defaults when absent; wrong kinds are errors) ----
  virtual bool hasAttr(const std::string &name) const = 0;
  virtual Expected<int64_t> intAttr(const std::string &name, int64_t dflt) const = 0;
  virtual Expected<double> floatAttr(const std::string &name, double dflt) const = 0;
  virtual Expected<std::string> stringAttr(const std::string &name,
                                           const std::string &dflt) const = 0;
  virtual Expected<std::vector<int64_t>> intsAttr(const std::string &name,
                                                  const std::vector<int64_t> &dflt) const = 0;
  virtual Expected<std::vector<double>> floatsAttr(const std::string &name,
                                                   const std::vector<double> &dflt) const = 0;
  virtual Expected<std::vector<std::string>>
  stringsAttr(const std::string &name, const std::vector<std::string> &dflt) const = 0;
  /// A tensor attribute; error when absent.
  virtual Expected<Tensor> tensorAttr(const std::string &name) const = 0;
  /// A graph attribute (If's branches, Loop's and Scan's bodies); error when absent.
  virtual Expected<const onnx::GraphProto *> graphAttr(const std::string &name) const = 0;
  /// Graph attribute `name` imported as a graph of its own (OnnxInternal.h), its inputs typed
  /// `inputTypes`; the outer values it reads are captured.
  virtual Expected<ImportedSubgraph> subgraph(const std::string &name,
                                              const std::vector<TensorType> &inputTypes) = 0;
  /// The same for `gp`, a graph the lowering derived from graph attribute `name`.
  virtual Expected<ImportedSubgraph> subgraph(const onnx::GraphProto &gp, const std::string &name,
                                              const std::vector<TensorType> &inputTypes) = 0;
  /// Graph attribute `name` lowered into this graph in place (an If's taken branch, one step
  /// of an unrolled Loop, SequenceMap's body for one element), its inputs bound to `inputs`
  /// (one per declared input); returns the values of its outputs.
  virtual Expected<std::vector<ImportValue>> inlineSubgraph(const std::string &name,
                                                            const std::vector<ImportValue> &inputs) = 0;

  /// The compile-time value of input i: an initializer, a Constant node's output, a value
  /// folded from constants, or an ImportOptions::knownInputs entry. Error (naming `what`)
  /// when the value is only known at run time.
  virtual Expected<Tensor> constantInput(size_t i, const std::string &what) const = 0;
  /// Like constantInput but without an error: null when not known.
  virtual const Tensor *tryConstantInput(size_t i) const = 0;
  /// The value input i has at import time when it follows from constants and known inputs
  /// through side-effect-free nodes (evaluated, the graph unchanged), e.g. a condition
  /// computed from a shape input; nullopt otherwise.
  virtual std::optional<Tensor> knownInputValue(size_t i) const = 0;

  // ---- Emitting IR (shape rules run at once; their errors name this node) ----
  virtual Graph &graph() = 0;
  /// Emits one op and returns its single (first) result.
  virtual Expected<Value *> emit(OpKind kind, std::vector<Value *> operands,
                                 AttrMap attrs = {}) = 0;
  /// Emits one op with `numResults` results.
  virtual Expected<std::vector<Value *>> emitMulti(OpKind kind, std::vector<Value *> operands,
                                                   AttrMap attrs, int numResults) = 0;
  /// Makes the results of `n`, a node the lowering created with graph().createNode (one
  /// with a body), this node's own, as emit's are: bound to an output, they take its name.
  virtual void adopt(const Node &n) = 0;
  /// A constant node holding `t`.
  virtual Value *constant(const Tensor &t) = 0;
  /// A rank-0 constant of dtype `t` with value `v` (converted).
  virtual Value *scalar(DType t, double v) = 0;
  /// A 1-D i64 constant.
  virtual Value *i64Vector(const std::vector<int64_t> &v) = 0;
  /// Binds ONNX output i to `v` (ignored when the output is not wanted).
  virtual Error setOutput(size_t i, Value *v) = 0;
  /// Binds ONNX output i to a sequence or optional.
  virtual Error setCompositeOutput(size_t i, StaticValue v) = 0;
  /// Binds ONNX output i to whichever `v` holds.
  Error setOutputValue(size_t i, const ImportValue &v) {
    if (const StaticValue *s = std::get_if<StaticValue>(&v))
      return setCompositeOutput(i, *s);
    return setOutput(i, std::get<Value *>(v));
  }
  /// Input i as whichever it is (a null tensor when absent).
  ImportValue inputValue(size_t i) const {
    if (const StaticValue *s = compositeInput(i))
      return *s;
    return input(i);
  }

  /// Input i, or an error naming it (`what`) when a required input is absent.
  Expected<Value *> requiredInput(size_t i, const char *what) const {
    if (Value *v = input(i))
      return v;
    return error("missing required input {} ({})", i, what);
  }
  /// Maps an axis attribute in [-rank, rank) to [0, rank); an error naming `attr` otherwise.
  Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const char *attr = "axis") const {
    if (axis < -rank || axis >= rank)
      return error("attribute '{}' = {} is out of range for an input of rank {}", attr, axis,
                   rank);
    return axis < 0 ? axis + rank : axis;
  }

  /// An Error prefixed with place().
  template <typename... Args> Error error(fmt::format_string<Args...> f, Args &&...args) const {
    return Error(place() + ": " + fmt::format(f, std::forward<Args>(args)...));
  }
};

/// True when `v` holds exactly one element, whatever its rank (a per-tensor scale or zero
/// point: [] and [1, 1] alike).
inline bool oneElement(const Value *v) {
  for (const Dim &d : v->shape())
    if (!d.isStatic() || d.value() != 1)
      return false;
  return true;
}

using LowerFn = std::function<Error(LoweringContext &)>;

struct OpLowering {
  /// Attributes the lowering understands; any other attribute is reported by `nnc check`
  /// and refused by the importer.
  std::vector<std::string> attributes;
  LowerFn lower;
  /// The lowering takes or gives sequences and optionals (LoweringContext::compositeInput).
  bool composite = false;
};

/// ONNX op type (default domain; "ai.onnx.preview:Name" style keys for other domains are
/// written "domain:Name") to its lowering.
using LoweringTable = std::map<std::string, OpLowering>;

/// The full table (built once).
const LoweringTable &loweringTable();

// Registration functions, one per ops/ file.
void registerElementwiseLowerings(LoweringTable &t);
void registerTensorLowerings(LoweringTable &t);
void registerReductionLowerings(LoweringTable &t);
void registerNNLowerings(LoweringTable &t);
void registerLossLowerings(LoweringTable &t);
void registerRecurrentLowerings(LoweringTable &t);
void registerTrainingLowerings(LoweringTable &t);
void registerQuantizeLowerings(LoweringTable &t);
void registerControlFlowLowerings(LoweringTable &t);
/// The ai.onnx.ml operators (ops/ML.cpp), keyed "ai.onnx.ml:Name".
void registerMLLowerings(LoweringTable &t);
void registerSequenceLowerings(LoweringTable &t);
/// RandomUniform, RandomNormal, their -Like forms, Bernoulli, Multinomial (ops/Random.cpp).
void registerRandomLowerings(LoweringTable &t);

} // namespace nnc::onnxfe

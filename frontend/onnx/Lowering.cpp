// The lowering table and the LoweringContext the importer hands to each ONNX node's lowering.
#include "onnx/Lowering.h"

#include <set>

#include "nnc/ir/ShapeUtils.h"
#include "nnc/ir/TensorLimit.h"
#include "nnc/ir/Verifier.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

/// Largest result (elements) folded at import time.
constexpr int64_t kMaxFoldElements = int64_t(1) << 16;
/// The allocation limit while folding one node (its results and the evaluator's scratch).
constexpr int64_t kMaxFoldBytes = int64_t(256) << 20;

/// The attribute's kind, inferred from the set field when an old model leaves `type` unset.
onnx::AttributeProto::AttributeType attrType(const onnx::AttributeProto &a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED)
    return a.type();
  if (a.has_f())
    return onnx::AttributeProto::FLOAT;
  if (a.has_i())
    return onnx::AttributeProto::INT;
  if (a.has_s())
    return onnx::AttributeProto::STRING;
  if (a.has_t())
    return onnx::AttributeProto::TENSOR;
  if (a.has_g())
    return onnx::AttributeProto::GRAPH;
  if (a.floats_size())
    return onnx::AttributeProto::FLOATS;
  if (a.ints_size())
    return onnx::AttributeProto::INTS;
  if (a.strings_size())
    return onnx::AttributeProto::STRINGS;
  return onnx::AttributeProto::UNDEFINED;
}

const char *attrTypeName(onnx::AttributeProto::AttributeType t) {
  switch (t) {
  case onnx::AttributeProto::FLOAT: return "float";
  case onnx::AttributeProto::INT: return "int";
  case onnx::AttributeProto::STRING: return "string";
  case onnx::AttributeProto::TENSOR: return "tensor";
  case onnx::AttributeProto::GRAPH: return "graph";
  case onnx::AttributeProto::FLOATS: return "floats";
  case onnx::AttributeProto::INTS: return "ints";
  case onnx::AttributeProto::STRINGS: return "strings";
  case onnx::AttributeProto::TENSORS: return "tensors";
  case onnx::AttributeProto::GRAPHS: return "graphs";
  case onnx::AttributeProto::SPARSE_TENSOR: return "sparse tensor";
  case onnx::AttributeProto::SPARSE_TENSORS: return "sparse tensors";
  case onnx::AttributeProto::TYPE_PROTO: return "type proto";
  case onnx::AttributeProto::TYPE_PROTOS: return "type protos";
  default: return "undefined";
  }
}

class Context final : public LoweringContext {
public:
  Context(ImportState &st, const onnx::NodeProto &node, size_t index, int64_t opset)
      : st_(st), node_(node), index_(index), opset_(opset) {}

  /// Resolves the node's inputs; a sequence or optional given to a lowering that is not
  /// `composite` is an error naming the input.
  Error resolveInputs(bool composite) {
    for (const std::string &name : node_.input()) {
      composites_.emplace_back();
      if (name.empty()) {
        inputs_.push_back(nullptr);
        continue;
      }
      if (const StaticValue *s = st_.lookupComposite(name)) {
        if (!composite)
          return error("input {} '{}' is a {}; this operator takes tensors", inputs_.size(),
                       name, s->kindName());
        composites_.back() = *s;
        inputs_.push_back(nullptr);
        continue;
      }
      Value *v = st_.lookup(name);
      NNC_ASSERT(v, "{}: input '{}' not resolved by the importer", place(), name);
      inputs_.push_back(v);
    }
    return Error::success();
  }

  const onnx::NodeProto &proto() const override { return node_; }
  int64_t opset() const override { return opset_; }
  std::string place() const override { return nodePlace(node_, index_); }
  Value *input(size_t i) const override { return i < inputs_.size() ? inputs_[i] : nullptr; }
  size_t numInputs() const override { return inputs_.size(); }
  size_t numOutputs() const override { return static_cast<size_t>(node_.output_size()); }
  bool hasOutput(size_t i) const override {
    return i < numOutputs() && !node_.output(static_cast<int>(i)).empty();
  }
  bool forTraining() const override { return st_.forTraining; }
  const StaticValue *compositeInput(size_t i) const override {
    return i < composites_.size() && composites_[i] ? &*composites_[i] : nullptr;
  }

  const onnx::AttributeProto *find(const std::string &name) const {
    for (const auto &a : node_.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  Error kindError(const onnx::AttributeProto &a, const char *want) const {
    return error("attribute '{}' must be {}, got {}", a.name(), want, attrTypeName(attrType(a)));
  }

  bool hasAttr(const std::string &name) const override { return find(name) != nullptr; }
  Expected<int64_t> intAttr(const std::string &name, int64_t dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) != onnx::AttributeProto::INT)
      return kindError(*a, "an int");
    return static_cast<int64_t>(a->i());
  }
  Expected<double> floatAttr(const std::string &name, double dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) == onnx::AttributeProto::INT)
      return static_cast<double>(a->i());
    if (attrType(*a) != onnx::AttributeProto::FLOAT)
      return kindError(*a, "a float");
    return static_cast<double>(a->f());
  }
  Expected<std::string> stringAttr(const std::string &name,
                                   const std::string &dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) != onnx::AttributeProto::STRING)
      return kindError(*a, "a string");
    return a->s();
  }
  Expected<std::vector<int64_t>> intsAttr(const std::string &name,
                                          const std::vector<int64_t> &dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) != onnx::AttributeProto::INTS)
      return kindError(*a, "a list of ints");
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  Expected<std::vector<std::string>>
  stringsAttr(const std::string &name, const std::vector<std::string> &dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) != onnx::AttributeProto::STRINGS)
      return kindError(*a, "a list of strings");
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  }
  Expected<std::vector<double>> floatsAttr(const std::string &name,
                                           const std::vector<double> &dflt) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return dflt;
    if (attrType(*a) == onnx::AttributeProto::INTS)
      return std::vector<double>(a->ints().begin(), a->ints().end());
    if (attrType(*a) != onnx::AttributeProto::FLOATS)
      return kindError(*a, "a list of floats");
    return std::vector<double>(a->floats().begin(), a->floats().end());
  }
  Expected<Tensor> tensorAttr(const std::string &name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return error("missing tensor attribute '{}'", name);
    if (attrType(*a) != onnx::AttributeProto::TENSOR)
      return kindError(*a, "a tensor");
    return tensorFromProto(a->t(), st_.baseDir,
                           fmt::format("{}: attribute '{}'", place(), name));
  }

  Expected<const onnx::GraphProto *> graphAttr(const std::string &name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return error("missing graph attribute '{}'", name);
    if (attrType(*a) != onnx::AttributeProto::GRAPH)
      return kindError(*a, "a graph");
    return &a->g();
  }
  Expected<ImportedSubgraph> subgraph(const std::string &name,
                                      const std::vector<TensorType> &inputTypes) override {
    NNC_ASSIGN_OR_RETURN(const onnx::GraphProto *gp, graphAttr(name));
    return importSubgraph(st_, *gp, inputTypes, place() + " / " + name);
  }
  Expected<ImportedSubgraph> subgraph(const onnx::GraphProto &gp, const std::string &name,
                                      const std::vector<TensorType> &inputTypes) override {
    return importSubgraph(st_, gp, inputTypes, place() + " / " + name);
  }
  Expected<std::vector<ImportValue>>
  inlineSubgraph(const std::string &name, const std::vector<ImportValue> &inputs) override {
    NNC_ASSIGN_OR_RETURN(const onnx::GraphProto *gp, graphAttr(name));
    return inlineGraph(st_, *gp, inputs, place() + " / " + name);
  }

  const Tensor *tryConstantInput(size_t i) const override {
    Value *v = input(i);
    if (!v)
      return nullptr;
    if (v->isGraphInput()) {
      // By the graph input's own name: in a subgraph lowered in place, the node's name for
      // it may be the subgraph's.
      if (!st_.knownInputs)
        return nullptr;
      auto it = st_.knownInputs->find(v->name());
      return it == st_.knownInputs->end() ? nullptr : &it->second;
    }
    Node *p = v->producer();
    if (p->kind() != OpKind::Constant)
      return nullptr;
    const Attribute *a = p->attr("value");
    return a ? std::get_if<Tensor>(a) : nullptr;
  }
  std::optional<Tensor> knownInputValue(size_t i) const override {
    if (const Tensor *t = tryConstantInput(i))
      return *t;
    Value *v = input(i);
    return v ? knownValue(st_, v) : std::nullopt;
  }
  Expected<Tensor> constantInput(size_t i, const std::string &what) const override {
    if (const Tensor *t = tryConstantInput(i))
      return *t;
    if (!input(i))
      return error("{} (input {}) is missing", what, i);
    return error("{} (input {} '{}') must be known at compile time (an initializer, a Constant or "
                 "a value given with --input), but it is computed at run time",
                 what, i, node_.input(static_cast<int>(i)));
  }

  Graph &graph() override { return *st_.graph; }

  Expected<Value *> emit(OpKind kind, std::vector<Value *> operands, AttrMap attrs) override {
    NNC_ASSIGN_OR_RETURN(std::vector<Value *> r,
                         emitMulti(kind, std::move(operands), std::move(attrs), -1));
    return r.at(0);
  }

  Expected<std::vector<Value *>> emitMulti(OpKind kind, std::vector<Value *> operands,
                                           AttrMap attrs, int numResults) override {
    // A shape of a statically shaped value is a constant: fold it so that ops needing
    // compile-time values (reshape targets, axes) see it.
    if (kind == OpKind::ShapeOf && operands.size() == 1 && operands[0]) {
      if (std::optional<Extents> e = staticExtents(operands[0]->shape())) {
        int64_t r = static_cast<int64_t>(e->size());
        auto clampAxis = [&](const char *n, int64_t dflt) {
          auto it = attrs.find(n);
          int64_t v = dflt;
          if (it != attrs.end() && std::holds_alternative<int64_t>(it->second))
            v = std::get<int64_t>(it->second);
          if (v < 0)
            v += r;
          return std::clamp<int64_t>(v, 0, r);
        };
        int64_t s = clampAxis("start", 0), en = clampAxis("end", r);
        std::vector<int64_t> dims;
        for (int64_t i = s; i < en; ++i)
          dims.push_back((*e)[i]);
        return std::vector<Value *>{i64Vector(dims)};
      }
    }
    const OpInfo &info = opInfo(kind);
    if (numResults < 0)
      numResults = info.minResults;
    std::vector<TensorType> placeholder(static_cast<size_t>(numResults));
    Graph &g = graph();
    Node *n = g.createNode(kind, std::move(operands), std::move(placeholder), std::move(attrs),
                           node_.name());
    Error sig = verifyNodeSignature(*n);
    Expected<std::vector<TensorType>> types =
        sig ? Expected<std::vector<TensorType>>(sig) : info.infer(*n);
    if (!types) {
      g.eraseNode(n);
      return types.takeError().withContext(place());
    }
    NNC_ASSERT(types->size() >= n->numResults(), "{}: shape rule gave {} types for {} results",
               n->describe(), types->size(), n->numResults());
    for (size_t i = 0; i < n->numResults(); ++i)
      n->result(i)->setType((*types)[i]);
    if (std::optional<std::vector<Value *>> folded = tryFold(n))
      return *folded;
    for (Value *r : n->results())
      created_.insert(r);
    return n->results();
  }

  /// Replaces `n` by constants when all its operands are constants and an evaluator was
  /// given (ImportOptions::evaluate); nullopt (and `n` untouched) otherwise.
  std::optional<std::vector<Value *>> tryFold(Node *n) {
    // Static dims read through the shape of a partly dynamic value: constants, so that an If
    // testing them is resolved while importing.
    if (std::optional<Tensor> dims = staticShapeElements(*n)) {
      Value *c = constant(*dims);
      graph().eraseNode(n);
      return std::vector<Value *>{c};
    }
    if (!st_.evaluate || !*st_.evaluate || n->numOperands() == 0)
      return std::nullopt;
    // A dequantized u8/i8 weight stays whole for lower-qdq, which runs its matmul on the
    // integer GEMM; the pipeline's constant-fold after lower-qdq folds the ones it leaves.
    if (n->kind() == OpKind::Dequantize && n->operand(0) &&
        (n->operand(0)->dtype() == DType::U8 || n->operand(0)->dtype() == DType::I8))
      return std::nullopt;
    std::vector<Tensor> ops;
    for (size_t i = 0; i < n->numOperands(); ++i) {
      if (!n->operand(i)) {
        ops.push_back(Tensor());
        continue;
      }
      const Tensor *t = n->constantOperand(i);
      if (!t)
        return std::nullopt;
      ops.push_back(*t);
    }
    for (Value *r : n->results())
      if (std::optional<Extents> e = staticExtents(r->shape())) {
        std::optional<int64_t> cnt = checkedNumElements(*e);
        if (!cnt || *cnt > kMaxFoldElements)
          return std::nullopt;
      }
    // Results whose size is data-dependent (Range) are refused before they are allocated.
    Expected<std::vector<Tensor>> res = makeError("not evaluated");
    {
      TensorByteLimit limit(kMaxFoldBytes);
      res = (*st_.evaluate)(*n, ops);
    }
    if (!res || res->size() < n->numResults())
      return std::nullopt;
    for (size_t i = 0; i < n->numResults(); ++i) {
      const Tensor &t = (*res)[i];
      if (t.isNull() || t.numElements() > kMaxFoldElements ||
          t.dtype() != n->result(i)->dtype() || t.rank() != n->result(i)->rank())
        return std::nullopt;
    }
    std::vector<Value *> out;
    for (size_t i = 0; i < n->numResults(); ++i)
      out.push_back(constant((*res)[i]));
    graph().eraseNode(n);
    return out;
  }

  void adopt(const Node &n) override {
    for (Value *r : n.results())
      created_.insert(r);
  }

  Value *constant(const Tensor &t) override {
    Node *n = graph().createNode(OpKind::Constant, {}, {t.type()}, {{"value", Attribute(t)}},
                                 node_.name());
    created_.insert(n->result());
    return n->result();
  }
  Value *scalar(DType t, double v) override {
    Tensor s = Tensor::zeros(t, {});
    if (isStorageOnly(t)) {
      // No arithmetic on storage-only types; the lowering's ops would be rejected anyway, and
      // this error (reported by lowerNode) says why.
      if (!scalarError_)
        scalarError_ = fmt::format("{}: element type {} is storage-only (not supported by this "
                                   "operator; Cast it first)",
                                   place(), dtypeName(t));
      return constant(s);
    }
    setElementFromDouble(s, 0, v);
    return constant(s);
  }
  /// The error recorded by scalar(), if any.
  const std::optional<std::string> &scalarError() const { return scalarError_; }
  Value *i64Vector(const std::vector<int64_t> &v) override {
    return constant(Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v));
  }

  Error setCompositeOutput(size_t i, StaticValue v) override {
    if (!hasOutput(i))
      return Error::success();
    const std::string &name = node_.output(static_cast<int>(i));
    NNC_USER_CHECK(!st_.values.count(name) && !st_.composites.count(name),
                   "{}: output '{}' is already defined (ONNX values must be assigned once)",
                   place(), name);
    st_.composites[name] = std::move(v);
    return Error::success();
  }

  Error setOutput(size_t i, Value *v) override {
    NNC_ASSERT(v, "{}: setOutput({}) with a null value", place(), i);
    if (!hasOutput(i))
      return Error::success();
    const std::string &name = node_.output(static_cast<int>(i));
    NNC_USER_CHECK(!st_.values.count(name) && !st_.composites.count(name),
                   "{}: output '{}' is already defined (ONNX values "
                   "must be assigned once)", place(), name);
    st_.values[name] = v;
    // Values emitted for this node take the ONNX name; a value passed through (Identity)
    // keeps its own.
    if (created_.count(v) && !named_.count(v)) {
      graph().renameValue(v, name);
      named_.insert(v);
    }
    return Error::success();
  }

private:
  ImportState &st_;
  const onnx::NodeProto &node_;
  size_t index_;
  int64_t opset_;
  std::vector<Value *> inputs_;
  std::vector<std::optional<StaticValue>> composites_;
  std::set<Value *> created_;
  std::set<Value *> named_;
  std::optional<std::string> scalarError_;
};

Error lowerConstant(LoweringContext &c) {
  int count = 0;
  for (const char *a : {"value", "value_float", "value_floats", "value_int", "value_ints",
                        "value_string", "value_strings", "sparse_value"})
    count += c.hasAttr(a);
  if (count != 1)
    return c.error("needs exactly one value attribute, has {}", count);
  if (c.hasAttr("value_string") || c.hasAttr("value_strings"))
    return c.error("string constants are unsupported");
  if (c.hasAttr("sparse_value"))
    return c.error("sparse constants (sparse_value) are unsupported");
  Tensor t;
  if (c.hasAttr("value")) {
    NNC_ASSIGN_OR_RETURN(t, c.tensorAttr("value"));
  } else if (c.hasAttr("value_float")) {
    NNC_ASSIGN_OR_RETURN(double v, c.floatAttr("value_float", 0));
    t = Tensor::scalar<float>(DType::F32, static_cast<float>(v));
  } else if (c.hasAttr("value_int")) {
    NNC_ASSIGN_OR_RETURN(int64_t v, c.intAttr("value_int", 0));
    t = Tensor::scalar<int64_t>(DType::I64, v);
  } else if (c.hasAttr("value_floats")) {
    NNC_ASSIGN_OR_RETURN(std::vector<double> v, c.floatsAttr("value_floats", {}));
    std::vector<float> f(v.begin(), v.end());
    t = Tensor::fromVector<float>(DType::F32, {static_cast<int64_t>(f.size())}, f);
  } else {
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> v, c.intsAttr("value_ints", {}));
    t = Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v);
  }
  return c.setOutput(0, c.constant(t));
}

} // namespace

std::string nodePlace(const onnx::NodeProto &n, size_t index) {
  std::string op = n.domain().empty() || n.domain() == "ai.onnx"
                       ? n.op_type()
                       : n.domain() + ":" + n.op_type();
  if (n.name().empty())
    return fmt::format("node '#{}' ({})", index, op);
  return fmt::format("node '{}' ({})", n.name(), op);
}

Error lowerNode(ImportState &state, const onnx::NodeProto &node, size_t index, int64_t opset,
                const OpLowering &lowering) {
  Context ctx(state, node, index, opset);
  NNC_TRY(ctx.resolveInputs(lowering.composite));
  Error e = lowering.lower(ctx);
  if (ctx.scalarError())
    return Error(*ctx.scalarError());
  NNC_TRY(e);
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &name = node.output(i);
    NNC_USER_CHECK(name.empty() || state.values.count(name) || state.composites.count(name),
                   "{}: output {} '{}' is not supported by this lowering", ctx.place(), i, name);
  }
  return Error::success();
}

const LoweringTable &loweringTable() {
  static const LoweringTable table = [] {
    LoweringTable t;
    registerElementwiseLowerings(t);
    registerTensorLowerings(t);
    registerReductionLowerings(t);
    registerNNLowerings(t);
    registerLossLowerings(t);
    registerRecurrentLowerings(t);
    registerTrainingLowerings(t);
    registerQuantizeLowerings(t);
    registerControlFlowLowerings(t);
    registerMLLowerings(t);
    registerSequenceLowerings(t);
    registerRandomLowerings(t);
    t["Constant"] = OpLowering{{"value", "value_float", "value_floats", "value_int", "value_ints"},
                               lowerConstant};
    return t;
  }();
  return table;
}

} // namespace nnc::onnxfe

// Subgraphs (If's branches, Loop's and Scan's bodies): imported as graphs of their own, the
// values of enclosing graphs they read captured as extra inputs; or lowered in place into the
// enclosing graph (inlineGraph: a taken branch, an unrolled step, SequenceMap's body).
#include "onnx/OnnxInternal.h"

#include "nnc/ir/DType.h"

namespace nnc::onnxfe {

Value *ImportState::lookup(const std::string &name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  if (!parent || composites.count(name))
    return nullptr;
  Value *outer = parent->lookup(name);
  if (!outer || inlined)
    return outer;
  return values[name] = capture(outer, name);
}

Value *ImportState::capture(Value *outer, const std::string &name) {
  // A constant is copied, so that lowerings needing compile-time values (Reshape's shape,
  // Slice's axes) see it inside the subgraph as they would outside.
  if (Node *p = outer->producer(); p && p->kind() == OpKind::Constant) {
    Node *c =
        graph->createNode(OpKind::Constant, {}, {outer->type()}, p->attrs(), p->name(), {name});
    return c->result();
  }
  Value *in = graph->addInput(name, outer->type());
  captured.push_back(outer);
  return in;
}

const StaticValue *ImportState::lookupComposite(const std::string &name) {
  auto it = composites.find(name);
  if (it != composites.end())
    return &it->second;
  if (!parent || values.count(name))
    return nullptr;
  const StaticValue *outer = parent->lookupComposite(name);
  if (!outer || inlined)
    return outer;
  StaticValue here = *outer;
  for (size_t i = 0; i < here.elements.size(); ++i)
    here.elements[i] = capture(here.elements[i], fmt::format("{}.{}", name, i));
  if (here.rows)
    here.rows = capture(here.rows, name + ".rows");
  return &(composites[name] = std::move(here));
}

namespace {

/// Most nodes lowered in place over a whole import.
constexpr int64_t kMaxInlinedNodes = int64_t(1) << 20;

/// Checks that `v`, bound to subgraph input `vi`, is of the kind (and element type) the
/// input declares.
Error checkBinding(const onnx::ValueInfoProto &vi, const ImportValue &v,
                   const std::string &place) {
  if (!vi.has_type())
    return Error::success();
  const onnx::TypeProto &t = vi.type();
  const StaticValue *s = std::get_if<StaticValue>(&v);
  if (t.has_tensor_type()) {
    NNC_USER_CHECK(!s, "{}: subgraph input '{}' is a tensor but receives a {}", place,
                   vi.name(), s ? s->kindName() : "");
    Value *x = std::get<Value *>(v);
    NNC_USER_CHECK(x, "{}: subgraph input '{}' receives no value", place, vi.name());
    if (t.tensor_type().elem_type() != 0) {
      std::optional<DType> declared = dtypeFromOnnx(t.tensor_type().elem_type());
      NNC_USER_CHECK(declared == x->dtype(),
                     "{}: subgraph input '{}' is declared with element type {} but receives {}",
                     place, vi.name(), t.tensor_type().elem_type(), x->type().str());
    }
    return Error::success();
  }
  if (t.has_sequence_type())
    NNC_USER_CHECK(s && !s->optional, "{}: subgraph input '{}' is a sequence but receives {}",
                   place, vi.name(), s ? "an optional" : "a tensor");
  else if (t.has_optional_type())
    NNC_USER_CHECK(s && s->optional, "{}: subgraph input '{}' is an optional but receives {}",
                   place, vi.name(), s ? "a sequence" : "a tensor");
  else
    return makeError("{}: subgraph input '{}' has a type that is not a tensor, sequence or "
                     "optional (maps and sparse tensors are unsupported)",
                     place, vi.name());
  return Error::success();
}

/// The checks both ways of importing a subgraph make: its declared inputs match what the
/// operator gives it, and it has no sparse initializers.
Error checkSubgraphShape(const onnx::GraphProto &gp, size_t numInputs, const std::string &place) {
  NNC_USER_CHECK(gp.input_size() == static_cast<int>(numInputs),
                 "{}: the subgraph declares {} inputs; this operator gives it {}", place,
                 gp.input_size(), numInputs);
  NNC_USER_CHECK(gp.sparse_initializer_size() == 0, "{}: sparse initializers are unsupported",
                 place);
  return Error::success();
}

/// The state of a graph nested in `outer` and built into `graph`: the model-wide settings
/// (base folder, evaluator, training mode, opsets, lowering) are the outer graph's.
void initNestedState(ImportState &st, ImportState &outer, Graph *graph) {
  st.graph = graph;
  st.baseDir = outer.baseDir;
  st.evaluate = outer.evaluate;
  st.forTraining = outer.forTraining;
  st.opsets = outer.opsets;
  st.parent = &outer;
  st.lowerGraph = outer.lowerGraph;
}

/// The tensor subgraph output `name` names, or an error when nothing defines it.
Expected<Value *> subgraphOutput(ImportState &st, const std::string &name,
                                 const std::string &place) {
  Value *v = st.lookup(name);
  NNC_USER_CHECK(v,
                 "{}: subgraph output '{}' is not produced by any node, input or "
                 "initializer (of the subgraph or an enclosing graph)",
                 place, name);
  return v;
}

} // namespace

Expected<std::vector<ImportValue>> inlineGraph(ImportState &outer, const onnx::GraphProto &gp,
                                               const std::vector<ImportValue> &inputs,
                                               const std::string &place) {
  NNC_TRY(checkSubgraphShape(gp, inputs.size(), place));
  ImportState *root = &outer;
  while (root->parent)
    root = root->parent;
  root->inlinedNodes += gp.node_size();
  NNC_USER_CHECK(root->inlinedNodes <= kMaxInlinedNodes,
                 "{}: lowering subgraphs in place (the steps of a loop carrying sequences, the "
                 "elements of a SequenceMap) makes more than {} nodes",
                 place, kMaxInlinedNodes);
  ImportState st;
  initNestedState(st, outer, outer.graph);
  st.knownInputs = outer.knownInputs;
  st.inlined = true;
  for (int i = 0; i < gp.input_size(); ++i) {
    const onnx::ValueInfoProto &vi = gp.input(i);
    NNC_USER_CHECK(!vi.name().empty(), "{}: subgraph input {} has no name", place, i);
    NNC_USER_CHECK(!st.values.count(vi.name()) && !st.composites.count(vi.name()),
                   "{}: subgraph input '{}' is declared twice", place, vi.name());
    ImportValue in = inputs[i];
    // A value where the input declares an optional of its type: a present optional (ONNX
    // lets a Loop's optional state become the value it holds).
    if (vi.type().has_optional_type()) {
      if (Value *const *t = std::get_if<Value *>(&in); t && *t) {
        StaticValue o;
        o.optional = true;
        o.ofSequence = false;
        o.dtype = (*t)->dtype();
        o.elements = {*t};
        in = o;
      } else if (StaticValue *s = std::get_if<StaticValue>(&in); s && !s->optional) {
        s->optional = true;
      }
    }
    NNC_TRY(checkBinding(vi, in, place));
    if (const StaticValue *s = std::get_if<StaticValue>(&in))
      st.composites[vi.name()] = *s;
    else
      st.values[vi.name()] = std::get<Value *>(in);
  }
  for (const onnx::TensorProto &t : gp.initializer()) {
    NNC_ASSIGN_OR_RETURN(
        Tensor v,
        tensorFromProto(t, outer.baseDir, fmt::format("{}: initializer '{}'", place, t.name())));
    Node *n = st.graph->createNode(OpKind::Constant, {}, {v.type()}, {{"value", Attribute(v)}},
                                   "", {t.name()});
    st.values[t.name()] = n->result();
  }
  NNC_ASSERT(st.lowerGraph, "{}: the importer set no subgraph lowering", place);
  if (Error e = st.lowerGraph(st, gp))
    return e.withContext(place);
  std::vector<ImportValue> outs;
  for (const onnx::ValueInfoProto &o : gp.output()) {
    if (const StaticValue *s = st.lookupComposite(o.name())) {
      outs.push_back(*s);
      continue;
    }
    NNC_ASSIGN_OR_RETURN(Value * v, subgraphOutput(st, o.name(), place));
    outs.push_back(v);
  }
  return outs;
}

Expected<ImportedSubgraph> importSubgraph(ImportState &outer, const onnx::GraphProto &gp,
                                          const std::vector<TensorType> &inputTypes,
                                          const std::string &place) {
  NNC_TRY(checkSubgraphShape(gp, inputTypes.size(), place));
  auto body = std::make_shared<Graph>(gp.name().empty() ? "body" : gp.name());
  ImportState st;
  initNestedState(st, outer, body.get());
  for (const TensorType &t : inputTypes)
    for (const Dim &d : t.shape)
      if (!d.isStatic())
        body->noteSymbol(d.str());
  for (int i = 0; i < gp.input_size(); ++i) {
    const onnx::ValueInfoProto &vi = gp.input(i);
    NNC_USER_CHECK(!vi.name().empty(), "{}: subgraph input {} has no name", place, i);
    NNC_USER_CHECK(!st.values.count(vi.name()), "{}: subgraph input '{}' is declared twice", place,
                   vi.name());
    const TensorType &t = inputTypes[i];
    if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) {
      std::optional<DType> declared = dtypeFromOnnx(vi.type().tensor_type().elem_type());
      NNC_USER_CHECK(declared == t.dtype,
                     "{}: subgraph input '{}' is declared with element type {} but receives {}",
                     place, vi.name(), vi.type().tensor_type().elem_type(), t.str());
    } else if (vi.has_type()) {
      NNC_USER_CHECK(vi.type().has_tensor_type(),
                     "{}: subgraph input '{}' is not a tensor (a sequence or optional input is "
                     "supported only where the subgraph is lowered in place: SequenceMap, an "
                     "If with a known condition, a Loop carrying sequences)",
                     place, vi.name());
    }
    st.values[vi.name()] = body->addInput(vi.name(), t);
  }
  for (const onnx::TensorProto &t : gp.initializer()) {
    NNC_ASSIGN_OR_RETURN(
        Tensor v,
        tensorFromProto(t, outer.baseDir, fmt::format("{}: initializer '{}'", place, t.name())));
    Node *n = body->createNode(OpKind::Constant, {}, {v.type()}, {{"value", Attribute(v)}}, "",
                               {t.name()});
    st.values[t.name()] = n->result();
  }
  NNC_ASSERT(st.lowerGraph, "{}: the importer set no subgraph lowering", place);
  if (Error e = st.lowerGraph(st, gp))
    return e.withContext(place);
  std::vector<Value *> outs;
  for (const onnx::ValueInfoProto &o : gp.output()) {
    bool composite = st.lookupComposite(o.name()) ||
                     (o.has_type() && (o.type().has_sequence_type() ||
                                       o.type().has_optional_type()));
    NNC_USER_CHECK(!composite,
                   "{}: subgraph output '{}' is a sequence or an optional, which nnc resolves "
                   "while importing: that needs the subgraph lowered in place (the branch of an If "
                   "whose condition is known at import time, the body of a Loop carrying "
                   "sequences or of a SequenceMap), which this one is not",
                   place, o.name());
    if (o.has_type())
      NNC_USER_CHECK(o.type().has_tensor_type(),
                     "{}: subgraph output '{}' is not a tensor (maps and sparse tensors are "
                     "unsupported)",
                     place, o.name());
    NNC_ASSIGN_OR_RETURN(Value * v, subgraphOutput(st, o.name(), place));
    outs.push_back(v);
  }
  body->setOutputs(outs);
  return ImportedSubgraph{std::move(body), std::move(st.captured)};
}

} // namespace nnc::onnxfe

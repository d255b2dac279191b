// Subgraphs (If's branches, Loop's and Scan's bodies): imported as graphs of their own, the
// values of enclosing graphs they read captured as extra inputs.
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

Value *ImportState::lookup(const std::string &name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  if (!parent)
    return nullptr;
  Value *outer = parent->lookup(name);
  if (!outer)
    return nullptr;
  // A constant is copied, so that lowerings needing compile-time values (Reshape's shape,
  // Slice's axes) see it inside the subgraph as they would outside.
  if (Node *p = outer->producer(); p && p->kind() == OpKind::Constant) {
    Node *c =
        graph->createNode(OpKind::Constant, {}, {outer->type()}, p->attrs(), p->name(), {name});
    return values[name] = c->result();
  }
  Value *in = graph->addInput(name, outer->type());
  captured.push_back(outer);
  return values[name] = in;
}

Expected<ImportedSubgraph> importSubgraph(ImportState &outer, const onnx::GraphProto &gp,
                                          const std::vector<TensorType> &inputTypes,
                                          const std::string &place) {
  NNC_USER_CHECK(gp.input_size() == static_cast<int>(inputTypes.size()),
                 "{}: the subgraph declares {} inputs; this operator gives it {}", place,
                 gp.input_size(), inputTypes.size());
  NNC_USER_CHECK(gp.sparse_initializer_size() == 0, "{}: sparse initializers are unsupported",
                 place);
  auto body = std::make_shared<Graph>(gp.name().empty() ? "body" : gp.name());
  ImportState st;
  st.graph = body.get();
  st.baseDir = outer.baseDir;
  st.evaluate = outer.evaluate;
  st.forTraining = outer.forTraining;
  st.opsets = outer.opsets;
  st.parent = &outer;
  st.lowerGraph = outer.lowerGraph;
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
                     "{}: subgraph input '{}' is not a tensor (sequence and optional values are "
                     "unsupported)",
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
    if (o.has_type())
      NNC_USER_CHECK(o.type().has_tensor_type(),
                     "{}: subgraph output '{}' is not a tensor (sequence and optional values are "
                     "unsupported)",
                     place, o.name());
    Value *v = st.lookup(o.name());
    NNC_USER_CHECK(v,
                   "{}: subgraph output '{}' is not produced by any node, input or "
                   "initializer (of the subgraph or an enclosing graph)",
                   place, o.name());
    outs.push_back(v);
  }
  body->setOutputs(outs);
  return ImportedSubgraph{std::move(body), std::move(st.captured)};
}

} // namespace nnc::onnxfe

// The IR verifier.
#include "nnc/ir/Verifier.h"

#include <unordered_set>

#include "nnc/ir/FusionGroup.h"

namespace nnc {

Error verifyNodeSignature(const Node &n) {
  const OpInfo &info = n.info();
  int nops = static_cast<int>(n.numOperands());
  if (nops < info.minOperands || (info.maxOperands >= 0 && nops > info.maxOperands)) {
    if (info.maxOperands < 0)
      return n.error("takes at least {} operands, got {}", info.minOperands, nops);
    if (info.minOperands == info.maxOperands)
      return n.error("takes {} operands, got {}", info.minOperands, nops);
    return n.error("takes {} to {} operands, got {}", info.minOperands, info.maxOperands, nops);
  }
  for (int i = 0; i < std::min(nops, std::max(info.minOperands, 1)); ++i)
    if (!n.operand(i) && i < info.minOperands)
      return n.error("required operand {} is missing", i);
  int nres = static_cast<int>(n.numResults());
  if (nres < info.minResults || (info.maxResults >= 0 && nres > info.maxResults))
    return n.error("has {} results; the op has {} to {}", nres, info.minResults,
                   info.maxResults < 0 ? std::string("any") : std::to_string(info.maxResults));
  for (const AttrSpec &spec : info.attrs) {
    const Attribute *a = n.attr(spec.name);
    if (!a) {
      if (spec.required)
        return n.error("missing required attribute '{}'", spec.name);
      continue;
    }
    if (attrKind(*a) != spec.kind)
      return n.error("attribute '{}' must be {}, got {}", spec.name, attrKindName(spec.kind),
                     attrKindName(attrKind(*a)));
  }
  for (const auto &[name, value] : n.attrs())
    if (!info.findAttr(name))
      return n.error("unknown attribute '{}'", name);
  return Error::success();
}

Error verify(const Graph &g) {
  std::unordered_set<const Value *> defined(g.inputs().begin(), g.inputs().end());
  for (Node *n : g.nodes()) {
    NNC_TRY(verifyNodeSignature(*n));
    for (size_t i = 0; i < n->numOperands(); ++i) {
      Value *op = n->operand(i);
      if (op && !defined.count(op))
        return n->error("operand {} (%{}) is used before it is defined", i, op->name());
    }
    Expected<std::vector<TensorType>> types = n->info().infer(*n);
    if (!types)
      return types.takeError();
    if (types->size() < n->numResults())
      return n->error("shape rule gives {} results, node has {}", types->size(),
                      n->numResults());
    for (size_t i = 0; i < n->numResults(); ++i) {
      const TensorType &want = (*types)[i];
      const TensorType &have = n->result(i)->type();
      bool ok = want.dtype == have.dtype && want.rank() == have.rank();
      for (size_t d = 0; ok && d < want.shape.size(); ++d)
        if (want.shape[d].isStatic() && have.shape[d].isStatic() &&
            want.shape[d].value() != have.shape[d].value())
          ok = false;
      if (!ok)
        return n->error("result %{} is declared {} but its operands give {}",
                        n->result(i)->name(), have.str(), want.str());
    }
    for (Value *r : n->results())
      defined.insert(r);
    if (n->body())
      if (Error e = verify(*n->body()))
        return n->error("body: {}", e.message());
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    Value *o = g.outputs()[i];
    if (!o || !defined.count(o))
      return makeError("graph @{}: output {} is not defined", g.name(), i);
  }
  return fusionGroups(g).takeError();
}

} // namespace nnc

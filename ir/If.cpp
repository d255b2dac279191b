// The `if` node: checking it against its body (both branches of an ONNX If), retyping a body
// for the node's operands, and inlining the taken branch.
#include <unordered_map>
#include <unordered_set>

#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Loop.h"

namespace nnc {

Expected<std::vector<TensorType>> bodyOutputTypes(const Node &n, size_t firstOperand) {
  const Graph *body = n.body();
  if (!body)
    return n.error("has no body");
  if (body->inputs().size() + firstOperand != n.numOperands())
    return n.error("the body takes {} inputs but the node passes it {} operands",
                   body->inputs().size(),
                   n.numOperands() - std::min(firstOperand, n.numOperands()));
  std::unique_ptr<Graph> copy = body->clone();
  for (size_t i = 0; i < copy->inputs().size(); ++i) {
    const Value *x = n.operand(firstOperand + i);
    if (!x)
      return n.error("operand {} is missing", firstOperand + i);
    copy->inputs()[i]->setType(x->type());
  }
  for (Node *b : copy->nodes()) {
    Expected<std::vector<TensorType>> types = b->info().infer(*b);
    if (!types)
      return types.error().withContext(fmt::format("in the body of {}", n.describe()));
    for (size_t r = 0; r < b->numResults() && r < types->size(); ++r)
      b->result(r)->setType((*types)[r]);
  }
  std::vector<TensorType> out;
  for (const Value *v : copy->outputs()) {
    if (!v)
      return n.error("a body output is missing");
    out.push_back(v->type());
  }
  return out;
}

Expected<size_t> ifResults(const Node &n) {
  NNC_ASSERT(n.kind() == OpKind::If, "ifResults of {}", n.describe());
  const Value *cond = n.operand(0);
  if (!cond || cond->dtype() != DType::Bool || !cond->shape().empty())
    return n.error("the condition must be a bool scalar, not {}",
                   cond ? cond->type().str() : std::string("missing"));
  const Graph *body = n.body();
  if (!body)
    return n.error("has no body");
  if (body->inputs().size() + 1 != n.numOperands())
    return n.error("the body takes {} inputs but the node captures {} values",
                   body->inputs().size(), n.numOperands() - 1);
  size_t outs = body->outputs().size();
  if (outs == 0 || outs % 2 != 0)
    return n.error("the body returns {} values; it needs both branches' results", outs);
  return outs / 2;
}

std::vector<Value *> copyIfBranch(Graph &g, Node *n, bool thenBranch) {
  const Graph &body = *n->body();
  const size_t half = body.outputs().size() / 2, first = thenBranch ? 0 : half;
  // Only the nodes the taken half reads are copied.
  std::unordered_set<const Value *> needed;
  for (size_t k = 0; k < half; ++k)
    needed.insert(body.outputs()[first + k]);
  std::vector<Node *> nodes = body.nodes();
  std::vector<bool> copy(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    for (const Value *r : nodes[i]->results())
      copy[i] = copy[i] || needed.count(r);
    if (copy[i])
      for (const Value *o : nodes[i]->operands())
        needed.insert(o);
  }
  std::unordered_map<const Value *, Value *> map;
  for (size_t i = 0; i < body.inputs().size(); ++i)
    map[body.inputs()[i]] = n->operand(i + 1);
  std::vector<Node *> copies;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (copy[i])
      copies.push_back(copyNode(g, *nodes[i], map, n));
  // A fused body's group ids are its own: out here they would join the graph's groups.
  freshFusionGroups(g, copies);
  std::vector<Value *> out;
  for (size_t k = 0; k < half; ++k)
    out.push_back(map.at(body.outputs()[first + k]));
  return out;
}

void inlineIfBranch(Graph &g, Node *n, bool thenBranch) {
  std::vector<Value *> taken = copyIfBranch(g, n, thenBranch);
  for (size_t k = 0; k < taken.size(); ++k)
    g.replaceAllUsesWith(n->result(k), taken[k]);
  g.eraseNode(n);
}

} // namespace nnc

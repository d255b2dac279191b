// splitGraph(): a graph cut in two at a point of its node order.
//
// Algorithm:
//  1. The cut values: results of the first `numFirst` non-constant nodes used by a later node
//     or by a graph output.
//  2. First half: a clone whose outputs are the cut values, with everything after the cut and
//     every node the cut values do not need removed.
//  3. Rest: a clone in which each cut value's uses read a new graph input of the same type and
//     name; the first half's nodes, now unused (constants still used stay), are removed.
#include "nnc/ir/GraphSplit.h"

#include <set>

namespace nnc {

namespace {

/// Erases, last first, every node whose results have no uses.
void eraseUnused(Graph &g) {
  std::vector<Node *> nodes = g.nodes();
  for (size_t i = nodes.size(); i-- > 0;) {
    bool used = false;
    for (Value *r : nodes[i]->results())
      used = used || g.hasUses(r);
    if (!used)
      g.eraseNode(nodes[i]);
  }
}

} // namespace

GraphSplit splitGraph(const Graph &g, size_t numFirst) {
  std::vector<Node *> nodes = g.nodes();
  NNC_ASSERT(numFirst > 0 && numFirst < nodes.size(), "cutting {} nodes after {}",
             nodes.size(), numFirst);
  // 1. Cut values, in node order, by name (the clones keep names).
  std::set<const Value *> usedLater;
  for (size_t i = numFirst; i < nodes.size(); ++i)
    for (const Value *o : nodes[i]->operands())
      usedLater.insert(o);
  for (const Value *o : g.outputs())
    usedLater.insert(o);
  std::vector<std::string> cut;
  for (size_t i = 0; i < numFirst; ++i)
    if (nodes[i]->kind() != OpKind::Constant)
      for (const Value *r : nodes[i]->results())
        if (usedLater.count(r))
          cut.push_back(r->name());

  GraphSplit split;
  // 2. First half.
  split.first = g.clone();
  std::vector<Value *> outs;
  for (const std::string &name : cut)
    outs.push_back(split.first->findValue(name));
  split.first->setOutputs(outs);
  eraseUnused(*split.first);

  // 3. Rest.
  split.rest = g.clone();
  Graph &rest = *split.rest;
  std::vector<Node *> restNodes = rest.nodes();
  for (const std::string &name : cut) {
    Value *v = rest.findValue(name);
    Value *in = rest.addInput(name + ".cut", v->type());
    rest.replaceAllUsesWith(v, in);
  }
  for (size_t i = numFirst; i-- > 0;) {
    Node *n = restNodes[i];
    bool used = false;
    for (Value *r : n->results())
      used = used || rest.hasUses(r);
    if (!used)
      rest.eraseNode(n);
  }
  size_t firstCut = g.inputs().size();
  for (size_t c = 0; c < cut.size(); ++c)
    rest.renameValue(rest.inputs()[firstCut + c], cut[c]);
  return split;
}

} // namespace nnc

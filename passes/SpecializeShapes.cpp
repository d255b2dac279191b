// Specialization of a graph with symbolic dims to concrete input extents (and, where shapes
// depend on them, to the values of small inputs).
//
// Algorithm:
//  1. Clone the graph; give each input its concrete extents, checking rank, static dims and
//     that each symbol binds to one extent.
//  2. Replace the uses of value-specialized inputs with constants.
//  3. Run shape-inference, constant-fold, inline-if, unroll-dynamic-loops and dce until no
//     type changes (shape computations such as Shape -> Gather -> Concat fold into the
//     constants that shape rules read; an If whose condition they make constant becomes its
//     taken branch, so that a data-dependent node inside it (NonMaxSuppression) can end a
//     stage; a loop whose body's shapes depend on the step is unrolled).
//  4. If a result shape is still unknown, report which small inputs that shape may depend
//     on, and fail naming the node (or, when data-dependent shapes are allowed, return the
//     graph: its caller runs it in stages).
#include <algorithm>
#include <set>

#include "nnc/ir/Verifier.h"
#include "nnc/passes/Specialize.h"

namespace nnc {

namespace {

/// Every value's type, for detecting that a round of passes changed nothing.
std::string typeSignature(const Graph &g) {
  std::string s;
  for (const Value *v : g.inputs())
    s += v->type().str() + ";";
  for (const Node *n : g.nodes()) {
    s += std::string(n->opName()) + "(";
    for (const Value *r : n->results())
      s += r->type().str() + ",";
    s += ");";
  }
  return s;
}


/// Operands whose values a result shape may depend on: all but the first, and the first when
/// it is a scalar or an integer vector (ConstantOfShape's shape, Range's bounds).
bool isShapeLikeOperand(const Node &n, size_t j) {
  if (j > 0)
    return true;
  const Value *v = n.operand(j);
  return v->rank() == 0 ||
         (v->rank() == 1 && isInteger(v->dtype()));
}

} // namespace

Expected<std::unique_ptr<Graph>> specializeShapes(const Graph &g,
                                                  const std::vector<Extents> &inputShapes,
                                                  const PassContext::Evaluator &evaluate,
                                                  const std::map<int, Tensor> &values,
                                                  std::set<int> *wanted,
                                                  bool allowDataDependent) {
  NNC_USER_CHECK(inputShapes.size() == g.inputs().size(), "graph '{}' takes {} inputs, got {}",
                 g.name(), g.inputs().size(), inputShapes.size());
  std::unique_ptr<Graph> c = g.clone();
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputShapes.size(); ++i) {
    Value *in = c->inputs()[i];
    const Extents &e = inputShapes[i];
    auto mismatch = [&](const std::string &why) {
      return makeError("input '{}': expected {} but got shape {}{}", in->name(),
                       in->type().str(), extentsStr(e), why);
    };
    if (static_cast<int64_t>(e.size()) != in->rank())
      return mismatch("");
    for (size_t d = 0; d < e.size(); ++d) {
      const Dim &dim = in->shape()[d];
      if (e[d] < 0)
        return mismatch("");
      if (dim.isStatic()) {
        if (dim.value() != e[d])
          return mismatch("");
        continue;
      }
      auto [it, inserted] = symbols.emplace(dim.symbolName(), e[d]);
      if (!inserted && it->second != e[d])
        return mismatch(fmt::format(" ({} is {} elsewhere)", dim.symbolName(), it->second));
    }
    in->setType(TensorType(in->dtype(), shapeFromExtents(e)));
  }
  // Inputs specialized on their values: their uses read a constant (the input stays, unused).
  std::vector<Node *> nodes = c->nodes();
  Node *first = nodes.empty() ? nullptr : nodes.front();
  for (const auto &[i, t] : values) {
    Value *in = c->inputs()[i];
    NNC_USER_CHECK(t.dtype() == in->dtype() && t.extents() == inputShapes[i],
                   "input '{}': expected {} but got {}{}", in->name(), in->type().str(),
                   dtypeName(t.dtype()), extentsStr(t.extents()));
    Node *k = c->createNode(OpKind::Constant, {}, {in->type()}, {{"value", t}}, "",
                            {in->name() + "_value"}, first);
    c->replaceAllUsesWith(in, k->result());
  }

  // Shape inference propagates the extents, constant folding turns shape computations into
  // constants that later shape rules read; repeat until nothing changes.
  Expected<PassPipeline> pipeline =
      PassPipeline::parse("shape-inference,constant-fold,inline-if,unroll-dynamic-loops,dce");
  NNC_ASSERT(pipeline, "{}", pipeline.error().message());
  PassContext ctx;
  ctx.evaluate = evaluate;
  ctx.verifyEach = false;
  std::string before = typeSignature(*c);
  for (int round = 0; round < 64; ++round) {
    NNC_TRY(pipeline->run(*c, ctx));
    std::string after = typeSignature(*c);
    if (after == before)
      break;
    before = std::move(after);
  }
  NNC_TRY(verify(*c));
  for (const Node *n : c->nodes())
    for (const Value *r : n->results()) {
      if (isStatic(r->shape()))
        continue;
      if (wanted) {
        // Graph inputs reachable backwards from the shape-like operands.
        std::vector<const Value *> work;
        for (size_t j = 0; j < n->numOperands(); ++j)
          if (n->operand(j) && isShapeLikeOperand(*n, j))
            work.push_back(n->operand(j));
        std::set<const Value *> seen;
        while (!work.empty()) {
          const Value *v = work.back();
          work.pop_back();
          if (!seen.insert(v).second)
            continue;
          if (v->isGraphInput()) {
            auto pos = std::find(c->inputs().begin(), c->inputs().end(), v);
            int idx = static_cast<int>(pos - c->inputs().begin());
            std::optional<int64_t> count = checkedNumElements(inputShapes[idx]);
            if (count && *count <= kMaxValueSpecializedElements && !values.count(idx))
              wanted->insert(idx);
            continue;
          }
          for (const Value *o : v->producer()->operands())
            if (o)
              work.push_back(o);
        }
      }
      if (allowDataDependent)
        return c;
      return n->error("result %{} has shape {} that the input shapes do not determine (it "
                      "depends on data)",
                      r->name(), r->type().str());
    }
  return c;
}


} // namespace nnc

// Constant folding: evaluates nodes whose operands are all constants with the reference
// interpreter (PassContext::evaluate), and `shape` of any value whose shape is static.
//
// Algorithm:
//  1. Walk nodes in order (so folded results feed later folds in the same walk).
//  2. A `shape` node whose operand has a static shape becomes an i64 constant; so does a
//     `gather` of constant indices from a `shape` whose operand has the picked dims static
//     (the others may be symbols: staticShapeElements).
//  3. A node (other than `constant`) whose present operands are all `constant` results, and
//     each of whose results holds at most kMaxFoldElements more elements than those operands
//     together (foldLimit), is evaluated; each result becomes a `constant` node that takes
//     over the result's name and uses. A result whose size is data-dependent (Range, a shape
//     folded from constants) is evaluated under a tensor byte limit (foldBytes), so a huge one
//     is refused before it is allocated, and is not kept when over the limit.
//  4. An evaluation error is not a folding failure: the node stays, and the error will be
//     reported when the graph runs (with its run-time context).
// Option keep-weight-dequantize=1 leaves a `dequantize` of a constant u8 or i8 tensor (a
// quantized weight) unfolded, so that lower-qdq, which runs after it in the standard
// pipelines, still sees the integer weight and its scale; a plain constant-fold after
// lower-qdq folds the ones it left in floating point.
#include "nnc/ir/ShapeUtils.h"
#include "nnc/ir/TensorLimit.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
/// The most elements a fold may add to the model's constants. A fold that only moves
/// constants (the transpose of a Gemm's transB weight, a reshape, a cast, a weight's
/// blocked layout) folds at any size, since its operands are in the model already: AlexNet's
/// and VGG's first classifier weights (9216 x 4096 and 25088 x 4096) were transposed at run
/// time, on every run, when the limit was on the result alone. A fold that broadcasts a small
/// constant (Expand, Tile, ConstantOfShape) is held to this many elements.
constexpr int64_t kMaxFoldElements = int64_t(1) << 24;

/// Elements each result of a fold of `n` may hold: as many as its constant operands hold
/// together, and kMaxFoldElements more.
int64_t foldLimit(const Node &n) {
  int64_t limit = kMaxFoldElements;
  for (size_t i = 0; i < n.numOperands(); ++i)
    if (const Tensor *t = n.operand(i) ? n.constantOperand(i) : nullptr)
      limit += t->numElements();
  return limit;
}

/// The allocation limit while evaluating: every tensor one node's evaluation makes (results
/// and scratch). Twice the largest result kept, at 8 bytes an element.
int64_t foldBytes(int64_t limitElements) {
  return limitElements * 16;
}

class ConstantFoldPass : public Pass {
public:
  std::string_view name() const override { return "constant-fold"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"keep-weight-dequantize"}));
    NNC_ASSIGN_OR_RETURN(int64_t keep, ctx.intOption(name(), "keep-weight-dequantize", 0, 0));
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->kind() == OpKind::Constant || (keep && isWeightDequantize(*n)))
        continue;
      if (n->kind() == OpKind::ShapeOf && foldShape(g, n)) {
        changed = true;
        continue;
      }
      if (std::optional<Tensor> dims = staticShapeElements(*n)) {
        replaceWithConstants(g, n, {*dims});
        addStat("shapes-folded");
        changed = true;
        continue;
      }
      // A while loop may run for as long as its data say, even forever: it runs when the
      // model does, never at compile time.
      if (!ctx.evaluate || !allOperandsConstant(*n) ||
          (n->kind() == OpKind::Scan && n->getInt("while", 0) != 0))
        continue;
      int64_t limit = foldLimit(*n);
      if (tooLarge(*n, limit))
        continue;
      std::vector<Tensor> operands;
      for (size_t i = 0; i < n->numOperands(); ++i)
        operands.push_back(n->operand(i) ? *n->constantOperand(i) : Tensor());
      Expected<std::vector<Tensor>> results = makeError("not evaluated");
      {
        TensorByteLimit bytes(foldBytes(limit));
        results = ctx.evaluate(*n, operands);
      }
      if (!results || resultsTooLarge(*results, limit))
        continue;
      replaceWithConstants(g, n, *results);
      addStat("nodes-folded");
      changed = true;
    }
    return changed;
  }

private:
  /// dequantize(constant u8/i8, ...): the form of a weight the integer kernels take.
  static bool isWeightDequantize(const Node &n) {
    const Value *x = n.operand(0);
    return n.kind() == OpKind::Dequantize && x &&
           (x->dtype() == DType::U8 || x->dtype() == DType::I8) && n.constantOperand(0);
  }

  static bool allOperandsConstant(const Node &n) {
    for (size_t i = 0; i < n.numOperands(); ++i)
      if (n.operand(i) && !n.constantOperand(i))
        return false;
    return true;
  }

  static bool tooLarge(const Node &n, int64_t limit) {
    for (Value *r : n.results()) {
      std::optional<Extents> e = staticExtents(r->shape());
      if (!e)
        continue; // data-dependent: the evaluation decides
      std::optional<int64_t> count = checkedNumElements(*e);
      if (!count || *count > limit)
        return true;
    }
    return false;
  }

  static bool resultsTooLarge(const std::vector<Tensor> &results, int64_t limit) {
    for (const Tensor &t : results)
      if (t.numElements() > limit)
        return true;
    return false;
  }

  bool foldShape(Graph &g, Node *n) {
    std::optional<Extents> e = staticExtents(n->operand(0)->shape());
    if (!e)
      return false;
    int64_t rank = static_cast<int64_t>(e->size());
    auto clampIndex = [&](int64_t i) {
      if (i < 0)
        i += rank;
      return std::min(std::max<int64_t>(i, 0), rank);
    };
    int64_t start = clampIndex(n->getInt("start", 0));
    int64_t end = clampIndex(n->getInt("end", rank));
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i)
      dims.push_back((*e)[i]);
    replaceWithConstants(
        g, n, {Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(dims.size())}, dims)});
    addStat("shapes-folded");
    return true;
  }

  static void replaceWithConstants(Graph &g, Node *n, const std::vector<Tensor> &results) {
    std::vector<std::pair<Node *, std::string>> created;
    for (size_t i = 0; i < n->numResults(); ++i) {
      Value *old = n->result(i);
      Node *c = g.createNode(OpKind::Constant, {}, {results[i].type()},
                             {{"value", results[i]}}, n->name(), {}, n);
      g.replaceAllUsesWith(old, c->result());
      created.emplace_back(c, old->name());
    }
    g.eraseNode(n);
    for (auto &[c, name] : created)
      g.renameValue(c->result(), name);
  }
};
} // namespace

std::unique_ptr<Pass> createConstantFoldPass() { return std::make_unique<ConstantFoldPass>(); }

} // namespace nnc

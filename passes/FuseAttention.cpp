// Attention fusion: matmul, its epilogue (scale, mask), softmax over the last axis and the
// matmul of that softmax become one fusion group (ir/FusionGroup.h), which code generation
// runs row by row without storing the score matrix whole.
//
// Algorithm (after fuse-epilogue):
//  1. For each softmax s over the last axis whose operand is the result of a matmul m1 (alone,
//     or the root of m1's epilogue group) used only by s, and whose result is used only as
//     operand 0 of a matmul m2 that is in no group:
//  2. Q, K^T and V (m1's operands and m2's operand 1) must have static shapes, one float
//     dtype (f32, f64), the same rank >= 3 and the same batch dims (no broadcasting).
//  3. s and m2 join m1's group (a new one when m1 has none); m2 becomes its root.
#include "FusionStats.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

bool staticFloat(const Value *v, DType t) {
  return v && v->dtype() == t && isStatic(v->shape());
}

class FuseAttentionPass : public Pass {
public:
  std::string_view name() const override { return "fuse-attention"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    fusion::FusionCounters counters(g);
    int64_t nextId = fusion::freshGroupId(g);
    bool changed = false;
    for (Node *s : g.nodes()) {
      if (s->kind() != OpKind::Softmax || s->hasAttr(kFusionGroupAttr))
        continue;
      Value *scores = s->operand(0);
      int64_t rank = scores->rank();
      int64_t axis = s->getInt("axis", -1);
      if (axis < 0)
        axis += rank;
      if (axis != rank - 1 || rank < 3 || g.isOutput(scores) || g.isOutput(s->result()) ||
          g.users(scores).size() != 1)
        continue;
      std::vector<Node *> users = g.users(s->result());
      if (users.size() != 1)
        continue;
      Node *m2 = users[0];
      if (m2->kind() != OpKind::MatMul || m2->hasAttr(kFusionGroupAttr) ||
          m2->operand(0) != s->result() || m2->operand(1) == s->result())
        continue;
      // m1: the producer of the scores, or the anchor of the group that produces them.
      Node *p = scores->producer();
      if (!p)
        continue;
      int64_t id = fusionGroupOf(*p);
      Node *m1 = nullptr;
      if (id < 0) {
        m1 = p->kind() == OpKind::MatMul ? p : nullptr;
      } else {
        for (Node *n : g.nodes())
          if (fusionGroupOf(*n) == id && isEpilogueAnchor(*n))
            m1 = n;
        if (m1 && m1->kind() != OpKind::MatMul)
          m1 = nullptr;
      }
      if (!m1 || m1->result()->shape() != scores->shape())
        continue;
      DType t = scores->dtype();
      const Value *q = m1->operand(0), *kt = m1->operand(1), *v = m2->operand(1);
      if ((t != DType::F32 && t != DType::F64) || !staticFloat(q, t) || !staticFloat(kt, t) ||
          !staticFloat(v, t) || q->rank() != rank || kt->rank() != rank || v->rank() != rank)
        continue;
      bool sameBatch = true;
      for (int64_t d = 0; d + 2 < rank; ++d)
        sameBatch = sameBatch && kt->shape()[d] == q->shape()[d] && v->shape()[d] == q->shape()[d];
      if (!sameBatch)
        continue;
      if (id < 0) {
        id = nextId++;
        m1->setAttr(kFusionGroupAttr, Attribute(id));
      }
      s->setAttr(kFusionGroupAttr, Attribute(id));
      m2->setAttr(kFusionGroupAttr, Attribute(id));
      addStat("attentions");
      changed = true;
    }
    for (const auto &[name, value] : counters.after(g))
      addStat(name, value);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseAttentionPass() { return std::make_unique<FuseAttentionPass>(); }

} // namespace nnc

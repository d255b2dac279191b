// Channel scales into conv weights: conv_nchwc(x * s, W) with s one factor per input channel
// of a single image (a squeeze-excitation's gate, [1, C/b, 1, 1, b]) becomes
// conv_nchwc(x, W * s): the factor moves from every activation element (C x H x W products,
// and the scaled activation written and read back) to the weight (C x O x kh x kw products),
// when the weight is the smaller of the two. Exact in real arithmetic (each product
// x * s * w is only rounded differently); zero padding stays zero.
//
// Algorithm (after layout-nchwc, constant-fold and winograd, before fusion):
//  1. For each conv_nchwc of group 1 whose weight is a constant packed for blocked inputs
//     ([O/b, C/b, kh, kw, b, b]: pack_conv_weight with in_block b, folded), and whose input
//     v = mul(x, s) (either order) has no other user and is not a graph output, where x is
//     [1, C/b, H, W, b] and s is [1, C/b, 1, 1, b]:
//  2. if W has fewer elements than x: the weight becomes mul(W, reshape(s, [1, C/b, 1, 1, b,
//     1])) (s's lane axis on the weight's input-lane axis, broadcast over output channels and
//     taps) and the input x; dce removes the mul.
#include <optional>

#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

std::optional<Extents> extents(const Value *v) {
  return v ? staticExtents(v->shape()) : std::nullopt;
}

int64_t count(const Extents &e) {
  int64_t n = 1;
  for (int64_t d : e)
    n *= d;
  return n;
}

class FoldChannelScalePass : public Pass {
public:
  std::string_view name() const override { return "fold-channel-scale"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *conv : g.nodes()) {
      if (conv->kind() != OpKind::ConvNCHWc || conv->getInt("group", 1) != 1 ||
          conv->numOperands() < 2)
        continue;
      Value *v = conv->operand(0), *w = conv->operand(1);
      Node *m = v ? v->producer() : nullptr;
      std::optional<Extents> we = extents(w), ve = extents(v);
      if (!m || m->kind() != OpKind::Mul || !conv->constantOperand(1) || !we || !ve || we->size() != 6 ||
          ve->size() != 5 || g.isOutput(v) || g.users(v).size() != 1 ||
          v->dtype() != DType::F32 || w->dtype() != DType::F32)
        continue;
      int64_t b = (*ve)[4];
      if ((*we)[4] != b || (*we)[5] != b || (*we)[1] != (*ve)[1] || (*ve)[0] != 1)
        continue;
      Value *x = nullptr, *s = nullptr;
      for (int i = 0; i < 2 && !x; ++i) {
        Value *a = m->operand(i), *c = m->operand(1 - i);
        std::optional<Extents> ae = extents(a), ce = extents(c);
        if (a && c && ae && ce && *ae == *ve && *ce == Extents{1, (*ve)[1], 1, 1, b}) {
          x = a;
          s = c;
        }
      }
      if (!x || count(*we) >= count(*ve))
        continue;
      Extents se{1, (*ve)[1], 1, 1, b, 1};
      Tensor shape = Tensor::fromVector<int64_t>(DType::I64, {6}, se);
      Value *sv = g.createNode(OpKind::Constant, {}, {shape.type()},
                               {{"value", Attribute(shape)}}, "", {s->name() + "_shape"}, conv)
                      ->result();
      Value *s6 = g.createNode(OpKind::Reshape, {s, sv},
                               {TensorType(DType::F32, shapeFromExtents(se))}, {},
                               m->name() + "/to_weight", {s->name() + "_per_weight"}, conv)
                      ->result();
      Value *ws = g.createNode(OpKind::Mul, {w, s6}, {w->type()}, {}, m->name() + "/weight",
                               {w->name() + "_scaled"}, conv)
                      ->result();
      conv->setOperand(0, x);
      conv->setOperand(1, ws);
      if (!g.hasUses(m->result()))
        g.eraseNode(m);
      addStat("scales-folded");
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldChannelScalePass() {
  return std::make_unique<FoldChannelScalePass>();
}

} // namespace nnc

// Folds an inference batch_norm into the conv before it: with
//   s[m] = scale[m] / sqrt(var[m] + epsilon),
// conv(x, w, b) followed by batch_norm is conv(x, w', b') with
//   w'[m, ...] = w[m, ...] * s[m],   b'[m] = (b[m] - mean[m]) * s[m] + bias[m]   (b = 0 if absent).
//
// A batch_norm that follows no such conv (DenseNet's pre-activations after a concat, a norm
// after a pool) becomes the per-channel multiply-add x * s + t, t = bias - mean * s, which the
// elementwise passes fuse with its neighbours and the layout pass runs blocked.
//
// Algorithm:
//  1. For each batch_norm whose operand is the result of a conv used only there, and whose
//     weights, conv bias and batch_norm parameters are all f32/f64 constants with one value
//     per output channel: compute w' and b' in double, insert them as constants and a conv
//     with the same attributes, and point the batch_norm's uses at it (dce removes the rest).
//  2. For each remaining f32/f64 batch_norm whose parameters are constants with one value per
//     channel: s and t in double, as constants of shape [C, 1, ...] (broadcasting along dim
//     1), and add(mul(x, s), t) in its place.
#include <cmath>

#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

const Tensor *constantOf(const Value *v) {
  if (!v || !v->producer() || v->producer()->kind() != OpKind::Constant)
    return nullptr;
  return &v->producer()->getTensor("value");
}

void setElement(Tensor &t, int64_t i, double v) {
  if (t.dtype() == DType::F32)
    t.data<float>()[i] = static_cast<float>(v);
  else
    t.data<double>()[i] = v;
}

class FoldBatchNormPass : public Pass {
public:
  std::string_view name() const override { return "fold-batch-norm"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *bn : g.nodes()) {
      if (bn->kind() != OpKind::BatchNorm)
        continue;
      Value *y = bn->operand(0);
      Node *conv = y ? y->producer() : nullptr;
      if (!conv || conv->kind() != OpKind::Conv || g.isOutput(y) || g.users(y).size() != 1)
        continue;
      DType t = y->dtype();
      if (t != DType::F32 && t != DType::F64)
        continue;
      const Tensor *w = constantOf(conv->operand(1));
      const Tensor *b = conv->operand(2) ? constantOf(conv->operand(2)) : nullptr;
      if (!w || (conv->operand(2) && !b) || w->dtype() != t || w->extents().empty())
        continue;
      int64_t m = w->extents()[0];
      const Tensor *p[4];
      bool ok = !b || b->numElements() == m;
      for (int i = 0; i < 4 && ok; ++i) {
        p[i] = constantOf(bn->operand(i + 1));
        ok = p[i] && p[i]->numElements() == m && isFloat(p[i]->dtype());
      }
      if (!ok)
        continue;
      double eps = bn->getFloat("epsilon");
      Tensor w2 = Tensor::zeros(t, w->extents());
      Tensor b2 = Tensor::zeros(t, {m});
      int64_t per = m ? w->numElements() / m : 0;
      for (int64_t c = 0; c < m; ++c) {
        double s = p[0]->elementAsDouble(c) / std::sqrt(p[3]->elementAsDouble(c) + eps);
        for (int64_t k = 0; k < per; ++k)
          setElement(w2, c * per + k, w->elementAsDouble(c * per + k) * s);
        double bias = b ? b->elementAsDouble(c) : 0.0;
        setElement(b2, c, (bias - p[2]->elementAsDouble(c)) * s + p[1]->elementAsDouble(c));
      }
      Value *wv = conv->operand(1);
      Node *wc = g.createNode(OpKind::Constant, {}, {TensorType(t, shapeFromExtents(w->extents()))},
                              {{"value", Attribute(w2)}}, "", {wv->name() + "_bn"}, conv);
      Node *bc = g.createNode(OpKind::Constant, {}, {TensorType(t, shapeFromExtents({m}))},
                              {{"value", Attribute(b2)}}, "", {bn->result()->name() + "_bias"},
                              conv);
      Node *folded =
          g.createNode(OpKind::Conv, {conv->operand(0), wc->result(), bc->result()},
                       {bn->result()->type()}, conv->attrs(), conv->name(), {}, bn);
      g.replaceAllUsesWith(bn->result(), folded->result());
      std::string name = bn->result()->name();
      g.eraseNode(bn);
      g.eraseNode(conv);
      g.renameValue(folded->result(), name);
      addStat("batch-norms-folded");
      changed = true;
    }
    for (Node *bn : g.nodes())
      if (bn->kind() == OpKind::BatchNorm && toMultiplyAdd(g, bn))
        changed = true;
    return changed;
  }

private:
  /// Step 2.
  bool toMultiplyAdd(Graph &g, Node *bn) {
    Value *x = bn->operand(0);
    DType t = x ? x->dtype() : DType::F32;
    if (!x || (t != DType::F32 && t != DType::F64) || x->rank() < 2 || !x->shape()[1].isStatic())
      return false;
    int64_t c = x->shape()[1].value();
    const Tensor *p[4];
    for (int i = 0; i < 4; ++i) {
      p[i] = constantOf(bn->operand(i + 1));
      if (!p[i] || p[i]->numElements() != c || !isFloat(p[i]->dtype()))
        return false;
    }
    Extents e(static_cast<size_t>(x->rank() - 1), 1);
    e[0] = c;
    Tensor scale = Tensor::zeros(t, e), shift = Tensor::zeros(t, e);
    double eps = bn->getFloat("epsilon");
    for (int64_t k = 0; k < c; ++k) {
      double sk = p[0]->elementAsDouble(k) / std::sqrt(p[3]->elementAsDouble(k) + eps);
      setElement(scale, k, sk);
      setElement(shift, k, p[1]->elementAsDouble(k) - p[2]->elementAsDouble(k) * sk);
    }
    std::string name = bn->result()->name();
    TensorType constType(t, shapeFromExtents(e));
    Node *sc = g.createNode(OpKind::Constant, {}, {constType}, {{"value", Attribute(scale)}}, "",
                            {name + "_scale"}, bn);
    Node *tc = g.createNode(OpKind::Constant, {}, {constType}, {{"value", Attribute(shift)}}, "",
                            {name + "_shift"}, bn);
    Node *mul = g.createNode(OpKind::Mul, {x, sc->result()}, {bn->result()->type()}, {},
                             bn->name(), {}, bn);
    Node *add = g.createNode(OpKind::Add, {mul->result(), tc->result()}, {bn->result()->type()},
                             {}, bn->name(), {}, bn);
    g.replaceAllUsesWith(bn->result(), add->result());
    g.eraseNode(bn);
    g.renameValue(add->result(), name);
    addStat("batch-norms-to-multiply-add");
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

} // namespace nnc

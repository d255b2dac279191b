// A 3-D conv whose leading spatial axis is a batch axis in disguise (kernel 1, stride 1, no
// padding: R(2+1)D's and S3D's (1, 3, 3) spatial convs, a (1, 7, 7) stem) runs as the 2-D conv
// of each of that axis' slices, so it gets the 2-D convs' blocked layout and Winograd (the
// pipelines that run those place this pass before layout-nchwc):
//
//   y = conv(x [N, C, T, H, W], w [K, C/g, 1, kh, kw])
//     = transpose(reshape(conv(reshape(transpose(x) [N, T, C, H, W]) [N*T, C, H, W],
//                              w [K, C/g, kh, kw]) [N*T, K, H', W'])
//                 [N, T, K, H', W']) [N, K, T, H', W'].
//
// The transposes move H*W runs (memcpy-like) and fuse into the layout conversions around the
// blocked conv. On R(2+1)D-18's first (1, 3, 3) conv (64 -> 144 channels on 8 x 56 x 56,
// one thread, AMD EPYC) the 3-D conv (im2col + GEMM) took 71 ms and the 2-D form 43.
//
// Algorithm: for each conv with static shapes and 3 spatial axes (auto_pad NOTSET or VALID)
// whose first spatial axis has kernel 1, stride 1 and no padding, and whose other two are not
// a pointwise conv already (the 3-D pointwise path reads its input in place), insert the
// nodes above (the weight reshaped as a constant when it is one) and point the conv's uses at
// the last transpose; dce removes the old conv. Stat `convs-folded`.
#include "nnc/ir/NNGeometry.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

class FoldConvBatchAxesPass : public Pass {
public:
  std::string_view name() const override { return "fold-conv-batch-axes"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->kind() != OpKind::Conv || n->numResults() != 1)
        continue;
      NNC_ASSIGN_OR_RETURN(bool folded, fold(g, n));
      if (folded) {
        addStat("convs-folded");
        changed = true;
      }
    }
    return changed;
  }

private:
  static Expected<bool> fold(Graph &g, Node *n) {
    Value *x = n->operand(0), *w = n->operand(1), *y = n->result();
    std::optional<Extents> xs = staticExtents(x->shape()), ws = staticExtents(w->shape()),
                           ys = staticExtents(y->shape());
    if (!xs || !ws || !ys || xs->size() != 5 || ws->size() != 5 || ys->size() != 5)
      return false;
    std::string autoPad = n->getString("auto_pad", "NOTSET");
    if (autoPad != "NOTSET" && autoPad != "VALID")
      return false;
    Expected<WindowAttrs> a = readWindowAttrs(*n, 3);
    if (!a)
      return false;
    // The depth axis (spatial 0) must be a batch axis; kernel 1 makes its dilation moot.
    if ((*ws)[2] != 1 || a->strides[0] != 1 || a->pads[0] != 0 || a->pads[3] != 0 ||
        (*ys)[2] != (*xs)[2])
      return false;
    bool pointwise = true;
    for (size_t d = 1; d < 3; ++d)
      pointwise = pointwise && (*ws)[d + 2] == 1 && a->strides[d] == 1 && a->pads[d] == 0 &&
                  a->pads[d + 3] == 0;
    if (pointwise)
      return false;
    int64_t N = (*xs)[0], C = (*xs)[1], T = (*xs)[2], K = (*ys)[1];
    const std::string base = y->name();
    auto constant = [&](const Tensor &t, const std::string &name) {
      return g
          .createNode(OpKind::Constant, {}, {t.type()}, {{"value", Attribute(t)}}, "", {name}, n)
          ->result();
    };
    auto reshape = [&](Value *v, const Extents &to, const std::string &name) -> Value * {
      const Node *p = v->producer();
      if (p && p->kind() == OpKind::Constant)
        return constant(p->getTensor("value").reshaped(to), name);
      Tensor shape = Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(to.size())}, to);
      return g
          .createNode(OpKind::Reshape, {v, constant(shape, name + "_shape")},
                      {TensorType(v->dtype(), shapeFromExtents(to))}, {}, n->name(), {name}, n)
          ->result();
    };
    // Swaps the depth and channel axes (a reshape when the depth is 1: R3D-18's last stage,
    // whose 3x3x3 convs on one frame canonicalize dropped to 1x3x3).
    auto transpose = [&](Value *v, const Extents &to, const std::string &name) {
      if (T == 1)
        return reshape(v, to, name);
      return g
          .createNode(OpKind::Transpose, {v}, {TensorType(v->dtype(), shapeFromExtents(to))},
                      {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}, n->name(), {name}, n)
          ->result();
    };
    Value *xt = transpose(x, {N, T, C, (*xs)[3], (*xs)[4]}, base + "_frames_in");
    Value *x2 = reshape(xt, {N * T, C, (*xs)[3], (*xs)[4]}, base + "_frames_in2d");
    Value *w2 = reshape(w, {(*ws)[0], (*ws)[1], (*ws)[3], (*ws)[4]}, base + "_w2d");
    std::vector<Value *> ops{x2, w2};
    if (n->numOperands() > 2 && n->operand(2))
      ops.push_back(n->operand(2));
    AttrMap attrs{{"strides", std::vector<int64_t>{a->strides[1], a->strides[2]}},
                  {"dilations", std::vector<int64_t>{a->dilations[1], a->dilations[2]}},
                  {"pads", std::vector<int64_t>{a->pads[1], a->pads[2], a->pads[4], a->pads[5]}},
                  {"group", n->getInt("group", 1)}};
    NNC_ASSIGN_OR_RETURN(Node * conv, g.createInferred(OpKind::Conv, ops, attrs, n->name(), 1,
                                                       {base + "_frames_out2d"}, n));
    std::optional<Extents> cs = staticExtents(conv->result()->shape());
    if (!cs || cs->size() != 4 || (*cs)[0] != N * T || (*cs)[1] != K || (*cs)[2] != (*ys)[3] ||
        (*cs)[3] != (*ys)[4])
      return n->error("fold-conv-batch-axes: the 2-D conv of the frames has shape {}, not "
                      "[{}, {}, {}, {}]",
                      conv->result()->type().str(), N * T, K, (*ys)[3], (*ys)[4]);
    Value *y5 = reshape(conv->result(), {N, T, K, (*ys)[3], (*ys)[4]}, base + "_frames_out");
    Value *yt = transpose(y5, *ys, base + "_unfolded");
    if (g.isOutput(y)) {
      // A graph output keeps its name: the new value takes it.
      std::string name = y->name();
      g.renameValue(y, name + "_3d");
      g.renameValue(yt, name);
    }
    g.replaceAllUsesWith(y, yt);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldConvBatchAxesPass() {
  return std::make_unique<FoldConvBatchAxesPass>();
}

} // namespace nnc

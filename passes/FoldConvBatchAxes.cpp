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
// blocked conv, so they cost far less than what the fold saves: the 3-D conv's only path is
// im2col + GEMM, which copies every input value kh*kw times before the GEMM reads it.
//
// A conv with a depth kernel kt > 1 whose spatial window is a 3x3 of stride 1 (R3D-18's and
// MC3-18's 3x3x3 convs) first gathers its depth taps into channels, which leaves a depth
// kernel of 1 to fold as above:
//
//   conv(x, w [K, C, kt, 3, 3]) = conv(concat_dt(slice_dt(pad_depth(x))) [N, kt*C, T', H, W],
//                                      w' [K, kt*C, 1, 3, 3]),  w'[k, dt*C + c] = w[k, c, dt],
//
// slice_dt taking frames dt*dilation + t*stride for the T' output frames. The gathered copy is
// kt times the input, which pays only because the 2-D conv of kt*C channels then runs as
// Winograd (fewer multiplies than the 3-D im2col + GEMM). Hence only for that window: a
// strided window or a larger one (a stride-2 3x3x3 conv, a (3, 7, 7) stem) has no Winograd
// form, and as a 2-D conv of kt*C channels it pays for the copy without that saving (it was
// measured slower that way; the figures are in the commit that added the rule).
//
// Algorithm: for each conv with static shapes and 3 spatial axes (auto_pad NOTSET or VALID)
// whose first spatial axis has kernel 1, stride 1 and no padding, and whose other two are not
// a pointwise conv already (the 3-D pointwise path reads its input in place), insert the
// nodes above (the weight reshaped as a constant when it is one) and point the conv's uses at
// the last transpose; dce removes the old conv. A conv of group 1 with a constant weight, a
// depth kernel above 1 and a 3x3 stride-1 undilated spatial window first gets the pad (when
// the depth is padded), slices and concat above and the gathered constant weight. Stats
// `convs-folded`, `conv-taps-gathered`.
#include <algorithm>

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
  Expected<bool> fold(Graph &g, Node *n) {
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
    bool pointwise = true;
    for (size_t d = 1; d < 3; ++d)
      pointwise = pointwise && (*ws)[d + 2] == 1 && a->strides[d] == 1 && a->pads[d] == 0 &&
                  a->pads[d + 3] == 0;
    if (pointwise)
      return false;
    // The depth axis (spatial 0) must be a batch axis (kernel 1 makes its dilation moot), or
    // become one by gathering its taps.
    bool batchAxis = (*ws)[2] == 1 && a->strides[0] == 1 && a->pads[0] == 0 && a->pads[3] == 0 &&
                     (*ys)[2] == (*xs)[2];
    const Node *wc = w->producer();
    bool gather = !batchAxis && (*ws)[2] > 1 && n->getInt("group", 1) == 1 && wc &&
                  wc->kind() == OpKind::Constant && w->dtype() == DType::F32 && (*ws)[3] == 3 &&
                  (*ws)[4] == 3 && a->strides[1] == 1 && a->strides[2] == 1 &&
                  a->dilations[1] == 1 && a->dilations[2] == 1;
    if (!batchAxis && !gather)
      return false;
    int64_t N = (*xs)[0], C = (*xs)[1], T = (*ys)[2], K = (*ys)[1];
    const std::string base = y->name();
    auto constant = [&](const Tensor &t, const std::string &name) {
      return g
          .createNode(OpKind::Constant, {}, {t.type()}, {{"value", Attribute(t)}}, "", {name}, n)
          ->result();
    };
    auto ints = [&](const std::vector<int64_t> &v, const std::string &name) {
      return constant(Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v),
                      name);
    };
    auto reshape = [&](Value *v, const Extents &to, const std::string &name) -> Value * {
      const Node *p = v->producer();
      if (p && p->kind() == OpKind::Constant)
        return constant(p->getTensor("value").reshaped(to), name);
      return g
          .createNode(OpKind::Reshape,
                      {v, ints(std::vector<int64_t>(to.begin(), to.end()), name + "_shape")},
                      {TensorType(v->dtype(), shapeFromExtents(to))}, {}, n->name(), {name}, n)
          ->result();
    };
    if (gather) {
      NNC_ASSIGN_OR_RETURN(x, gatherTaps(g, n, *a, *xs, (*ws)[2], T, ints));
      xs = staticExtents(x->shape());
      w = constant(gatheredWeight(wc->getTensor("value")), base + "_w_taps");
      ws = Extents{(*ws)[0], (*ws)[1] * (*ws)[2], 1, (*ws)[3], (*ws)[4]};
      C = (*xs)[1];
      addStat("conv-taps-gathered");
    }
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

  /// concat_dt(slice_dt(pad_depth(x))) [N, kt*C, T', H, W]: channel dt*C + c of output frame
  /// t is channel c of padded frame t*stride + dt*dilation.
  template <typename Ints>
  static Expected<Value *> gatherTaps(Graph &g, Node *n, const WindowAttrs &a, const Extents &xs,
                                      int64_t kt, int64_t frames, Ints ints) {
    const std::string base = n->result()->name();
    Value *x = n->operand(0);
    auto fail = [&](Error e) { return e.withContext("fold-conv-batch-axes: conv " + n->name()); };
    if (a.pads[0] != 0 || a.pads[3] != 0) {
      std::vector<int64_t> pads(10, 0);
      pads[2] = a.pads[0];
      pads[7] = a.pads[3];
      Expected<Node *> pad = g.createInferred(OpKind::Pad, {x, ints(pads, base + "_depth_pads")},
                                              {{"mode", std::string("constant")}}, n->name(), 1,
                                              {base + "_depth_padded"}, n);
      if (!pad)
        return fail(pad.takeError());
      x = (*pad)->result();
    }
    std::vector<Value *> taps;
    for (int64_t dt = 0; dt < kt; ++dt) {
      int64_t first = dt * a.dilations[0], end = first + (frames - 1) * a.strides[0] + 1;
      std::string name = fmt::format("{}_tap{}", base, dt);
      Expected<Node *> slice =
          g.createInferred(OpKind::Slice,
                           {x, ints({first}, name + "_starts"), ints({end}, name + "_ends"),
                            ints({2}, name + "_axes"), ints({a.strides[0]}, name + "_steps")},
                           {}, n->name(), 1, {name}, n);
      if (!slice)
        return fail(slice.takeError());
      taps.push_back((*slice)->result());
    }
    Expected<Node *> cat = g.createInferred(OpKind::Concat, taps, {{"axis", int64_t(1)}}, n->name(),
                                            1, {base + "_taps"}, n);
    if (!cat)
      return fail(cat.takeError());
    Value *v = (*cat)->result();
    std::optional<Extents> vs = staticExtents(v->shape());
    if (!vs || *vs != Extents{xs[0], kt * xs[1], frames, xs[3], xs[4]})
      return fail(makeError("the gathered taps have shape {}", v->type().str()));
    return v;
  }

  /// w' [K, kt*C, 1, kh, kw] from w [K, C, kt, kh, kw]: w'[k, dt*C + c] = w[k, c, dt].
  static Tensor gatheredWeight(const Tensor &w) {
    int64_t K = w.dim(0), C = w.dim(1), kt = w.dim(2), plane = w.dim(3) * w.dim(4);
    Tensor out = Tensor::zeros(DType::F32, {K, kt * C, 1, w.dim(3), w.dim(4)});
    const float *src = w.data<float>();
    float *dst = out.data<float>();
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t dt = 0; dt < kt; ++dt)
          std::copy_n(src + ((k * C + c) * kt + dt) * plane, plane,
                      dst + ((k * kt + dt) * C + c) * plane);
    return out;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldConvBatchAxesPass() {
  return std::make_unique<FoldConvBatchAxesPass>();
}

} // namespace nnc

// Winograd convolution: a 3x3, stride-1 conv_nchwc whose weight is constant runs as
// F(m x m, 3x3) (include/nnc/ir/Winograd.h) in three steps, the middle one a batched matmul
// so that the GEMM microkernels, tuner and weight packing do the multiplies:
//   V = winograd_input(x)      [alpha^2, P, C]   (B^T d B per tile and channel)
//   M = matmul(V, U)           [alpha^2, P, K]   (U = G g G^T, computed here at compile time)
//   y = winograd_output(M, b)  [N, Kb, OH, OW, b] (A^T M A per tile, plus the bias)
// Options: `tile` (the largest m tried: 4, the default, or 2) and `min-tiles` (default 8):
// the least number of tiles P for a conv to run with a tile size.
//
// Why a tile count: F(m x m) does (m+2)^2 / (9 m^2) of the direct conv's multiplies (1/4 for
// F(4x4), 4/9 for F(2x2)) but its U is (m+2)^2 / 9 times the conv weight (4x, 1.8x), and the
// matmul reads all of U once per P rows (2P flops per element of U). With few tiles (deep
// layers at batch 1: a 7x7 output is 4 tiles of F(4x4)) it streams megabytes of U for little
// work and loses to the direct conv; with many it is compute bound. The smaller tile has 4x
// the tiles, so a conv too small for F(4x4) may still take F(2x2). Measured on ResNet-18's
// convs (1 thread, AVX-512; bench/winograd.py): F(4x4) is 2.4x faster than the direct conv
// at 56x56x64 (196 tiles), 4x at 28x28x128 (49) and 2.4x at 14x14x256 (16 tiles); at
// 7x7x512 F(4x4) (4 tiles) is no faster and F(2x2) (16 tiles) is faster by 10-30%.
//
// Algorithm: for each conv_nchwc, in graph order, with a blocked input [N, Cb, H, W, b], a
// constant packed weight [Mb, Kc, 3, 3, b, b], group 1, strides and dilations 1, explicit pads
// and static shapes, take the largest tile m <= `tile` with at least min-tiles tiles (none:
// the conv stays):
//  1. Unpack the weight to [Mb*b, Kc*b, 3, 3] (zero padding lanes stay zero) and transform it
//     to the constant U [alpha^2, Kc*b, Mb*b].
//  2. Insert winograd_input, matmul and winograd_output before the conv, replace the conv's
//     result by the output's and erase the conv. pack-gemm-weights later packs U into panels.
#include "nnc/ir/Winograd.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

std::vector<int64_t> intsOr(const Node &n, const char *name, size_t count, int64_t dflt) {
  std::vector<int64_t> v = n.getInts(name, {});
  if (v.empty())
    v.assign(count, dflt);
  return v;
}

bool allOnes(const std::vector<int64_t> &v) {
  for (int64_t x : v)
    if (x != 1)
      return false;
  return true;
}

class WinogradPass : public Pass {
public:
  std::string_view name() const override { return "winograd"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"tile", "min-tiles"}));
    NNC_ASSIGN_OR_RETURN(tile_, ctx.intOption(name(), "tile", 4, 2));
    if (!winogradTileSupported(tile_))
      return makeError("winograd: option tile={} must be 2 or 4", tile_);
    NNC_ASSIGN_OR_RETURN(minTiles_, ctx.intOption(name(), "min-tiles", 8, 1));
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->kind() != OpKind::ConvNCHWc)
        continue;
      NNC_ASSIGN_OR_RETURN(bool rewritten, rewrite(g, n));
      changed |= rewritten;
    }
    return changed;
  }

private:
  int64_t tile_ = 4, minTiles_ = 8;

  Expected<bool> rewrite(Graph &g, Node *conv) {
    Value *x = conv->operand(0), *w = conv->operand(1), *bias = conv->operand(2);
    Node *wc = w->producer();
    if (conv->numResults() != 1 || x->rank() != 5 || x->dtype() != DType::F32 ||
        !staticExtents(x->shape()) || !staticExtents(conv->result()->shape()) || !wc ||
        wc->kind() != OpKind::Constant || w->rank() != 6 || !staticExtents(w->shape()))
      return false;
    const Tensor &wp = wc->getTensor("value");
    int64_t b = x->shape()[4].value();
    int64_t mb = wp.dim(0), kc = wp.dim(1);
    if (wp.dim(2) != 3 || wp.dim(3) != 3 || wp.dim(4) != b || wp.dim(5) != b ||
        conv->getInt("group", 1) != 1 || kc != x->shape()[1].value() ||
        !allOnes(intsOr(*conv, "strides", 2, 1)) || !allOnes(intsOr(*conv, "dilations", 2, 1)) ||
        conv->getString("auto_pad", "NOTSET") != "NOTSET")
      return false;
    std::vector<int64_t> pads = intsOr(*conv, "pads", 4, 0);
    const Shape &ys = conv->result()->shape();
    int64_t N = ys[0].value(), oh = ys[2].value(), ow = ys[3].value(), m = 0;
    for (int64_t cand = tile_; cand >= 2 && m == 0; --cand)
      if (winogradTileSupported(cand) &&
          N * ((oh + cand - 1) / cand) * ((ow + cand - 1) / cand) >= minTiles_)
        m = cand;
    if (m == 0) {
      addStat("convs-too-few-tiles");
      return false;
    }
    // 1. The plain weight [Mb*b, Kc*b, 3, 3], then U.
    int64_t kPad = mb * b, cPad = kc * b;
    Tensor plain = Tensor::zeros(DType::F32, {kPad, cPad, 3, 3});
    const float *src = wp.data<float>();
    float *dst = plain.data<float>();
    for (int64_t o = 0; o < kPad; ++o)
      for (int64_t c = 0; c < cPad; ++c)
        for (int64_t t = 0; t < 9; ++t)
          dst[(o * cPad + c) * 9 + t] = src[((((o / b) * kc + c / b) * 9 + t) * b + c % b) * b + o % b];
    Tensor u = winogradWeight(plain, m, cPad, kPad);
    // 2. The three steps.
    std::string name = conv->result()->name();
    auto fail = [&](Error e) { return e.withContext("winograd: conv " + conv->name()); };
    Expected<Node *> in = g.createInferred(OpKind::WinogradInput, {x},
                                           {{"tile", m}, {"pads", pads}}, conv->name(), -1,
                                           {name + "_wino_in"}, conv);
    if (!in)
      return fail(in.takeError());
    Node *uc = g.createNode(OpKind::Constant, {},
                            {TensorType(DType::F32, shapeFromExtents(u.extents()))},
                            {{"value", Attribute(u)}}, "", {w->name() + "_winograd"}, conv);
    Expected<Node *> mm = g.createInferred(OpKind::MatMul, {(*in)->result(), uc->result()}, {},
                                           conv->name(), -1, {name + "_wino_mm"}, conv);
    if (!mm)
      return fail(mm.takeError());
    std::vector<Value *> ops{(*mm)->result()};
    if (bias)
      ops.push_back(bias);
    Expected<Node *> out = g.createInferred(
        OpKind::WinogradOutput, ops,
        {{"tile", m}, {"height", oh}, {"width", ow}, {"block", b}}, conv->name(), -1, {}, conv);
    if (!out)
      return fail(out.takeError());
    Value *y = (*out)->result();
    if (y->shape() != conv->result()->shape())
      return fail(makeError("the output {} differs from the conv's {}", y->type().str(),
                            conv->result()->type().str()));
    g.replaceAllUsesWith(conv->result(), y);
    g.eraseNode(conv);
    g.renameValue(y, name);
    addStat(fmt::format("convs-rewritten-f{}", m));
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createWinogradPass() { return std::make_unique<WinogradPass>(); }

} // namespace nnc

// Winograd convolution: a 3x3, stride-1 conv_nchwc whose weight is constant runs as
// F(m x m, 3x3) (include/nnc/ir/Winograd.h) in three steps, the middle one a batched matmul
// so that the GEMM microkernels, tuner and weight packing do the multiplies:
//   V = winograd_input(x)      [alpha^2, P, C]   (B^T d B per tile and channel)
//   M = matmul(V, U)           [alpha^2, P, K]   (U = G g G^T, computed here at compile time)
//   y = winograd_output(M, b)  [N, Kb, OH, OW, b] (A^T M A per tile, plus the bias)
// Options: `tile` (the largest m tried: 4, the default, or 2), `balance` (default: the
// target's f32 lanes, 16 for AVX-512, 8 for AVX2) and `min-gain` (percent, default 25), the
// terms of the cost rule below; `pad-rows` (default 1; 0: never) lets V and M take a few zero
// rows past the tiles when that keeps their planes apart in the L1 (planeRows).
//
// Cost rule (per conv and tile size; C and K cancel out). F(m x m) does a^2 / (9 m^2) of the
// direct conv's multiplies (a = m + 2: 1/4 for F(4x4), 4/9 for F(2x2)) in a GEMM that reads
// all of U, a^2 C K floats (4x, 1.8x the conv weight), once per P tile rows: 2P flops per
// float of U. Inside a whole network the weights stream from memory on every run, so the GEMM
// takes about max(flops, balance * 4 * bytes of U) flop-times, `balance` being the flops a
// core does per byte it streams: two FMAs of L lanes a cycle (4L flops) against about 4 bytes
// a cycle of one core's share of memory bandwidth, so L, the target's f32 lanes (a core with
// half the vector width streams the same bytes in twice the flop-times). The direct conv
// takes its flops, half of them under --precision bf16 where its blocks of 16 lanes run bf16
// tiles (CpuTarget::bf16Convs; Winograd's GEMM stays f32). A tile is worth it when
// direct / Winograd >= 1 + min-gain/100
// (the margin pays for the two transforms, about a fifth of the GEMM's time); the tile with
// the best ratio wins. ResNet-18 at batch 1 with balance 16: 56x56 and 28x28 take F(4x4)
// (196 and 49 tiles, ratio 4); 14x14 takes F(2x2) (49 tiles, ratio 2.25, against 1.5 for
// F(4x4)'s 16 tiles and 9.4 MB U); 7x7 stays direct (F(2x2): 16 tiles, ratio 0.86, 16.8 MB U
// per conv). With balance 8 the 7x7 convs take F(4x4) as well.
//
// Algorithm: for each conv_nchwc, in graph order, with a blocked input [N, Cb, H, W, b], a
// constant packed weight [Mb, Kc, 3, 3, b, b], group 1, strides and dilations 1, explicit pads
// and static shapes, take the tile m <= `tile` with the best ratio if it clears min-gain (none:
// the conv stays):
//  1. Unpack the weight to [Mb*b, Kc*b, 3, 3] (zero padding lanes stay zero) and transform it
//     to the constant U [alpha^2, Kc*b, Mb*b].
//  2. Insert winograd_input, matmul (its sums over C in short runs: kGemmSumRun) and
//     winograd_output before the conv, replace the conv's result by the output's and erase
//     the conv. pack-gemm-weights later packs U into panels.
#include <algorithm>

#include "PatternUtil.h"
#include "nnc/ir/Quantize.h"
#include "nnc/ir/Winograd.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

/// The products of a run of partial sums in the GEMM's sums over C (matmul's sum_run). Its
/// rounding is what Winograd adds to a conv's: the output transform scales each M element's
/// error up by A^T's entries (to 3.4 for F(4x4)) into an output that is a small combination
/// of them. In a numpy emulation of the three f32 steps (bench/winograd_points.py's setup,
/// relu'd inputs, 16x16 outputs), exact transforms around the f32 GEMM keep all of F(4x4)'s
/// error; against the direct conv tile (runs of one input block), F(4x4)'s rms error against
/// float64 was 3.9x at 64 channels and 6.7x at 256 with one chain over C, 2.6x and 2.8x with
/// runs of 16 (F(2x2): 1.4x and 2.4x, then 0.9x and 1.0x). FCN-ResNet50's output moved from
/// 1.15e-5 to 0.96e-5 of its range in rms against PyTorch's float64 (ONNX Runtime, without
/// Winograd, 0.89e-5), for 3-8% more GEMM time on ResNet-50 at batch 1 (the runs' additions).
constexpr int64_t kGemmSumRun = 16;

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
    NNC_TRY(ctx.checkOptionNames(name(), {"tile", "balance", "min-gain", "pad-rows"}));
    NNC_ASSIGN_OR_RETURN(tile_, ctx.intOption(name(), "tile", 4, 2));
    if (!winogradTileSupported(tile_))
      return makeError("winograd: option tile={} must be 2 or 4", tile_);
    NNC_ASSIGN_OR_RETURN(CpuTarget cpu, ctx.cpuFor(name()));
    NNC_ASSIGN_OR_RETURN(balance_, ctx.intOption(name(), "balance", cpu.f32Lanes(), 0));
    NNC_ASSIGN_OR_RETURN(minGain_, ctx.intOption(name(), "min-gain", 25, 0));
    NNC_ASSIGN_OR_RETURN(padRows_, ctx.intOption(name(), "pad-rows", 1, 0));
    bf16Direct_ = cpu.bf16Convs();
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
  int64_t tile_ = 4, balance_ = 16, minGain_ = 25, padRows_ = 1;
  /// --precision bf16: the direct conv of 16-lane blocks would run bf16 tiles (the GEMM of
  /// Winograd's stays f32).
  bool bf16Direct_ = false;

  /// direct / Winograd time of F(m x m) on N images of oh x ow outputs (the cost rule).
  double gain(int64_t m, int64_t N, int64_t oh, int64_t ow) const {
    double a2 = double(m + 2) * double(m + 2);
    double tiles = double(winogradTiles(N, oh, ow, m));
    // Per unit of C K: direct 2*9*N*oh*ow flops (in half the time as bf16 tiles); GEMM
    // 2*a2*P flops or a2*4 bytes of U.
    double direct = 18.0 * double(N) * double(oh) * double(ow) / (bf16Direct_ ? 2.0 : 1.0);
    double wino = std::max(2.0 * a2 * tiles, double(balance_) * 4.0 * a2);
    return direct / wino;
  }

  /// The rows of V [planes, rows, C] and M [planes, rows, K]: `tiles`, or a few more (zero)
  /// when that keeps the planes apart in an L1 set. Each tile's transform writes (reads) its
  /// row in all `planes` planes at once, the planes rows*C floats apart; on x86 L1s (64 sets of
  /// 64-byte lines) addresses 4 KiB apart share a set, so when rows*C*4 is a multiple of 4 KiB
  /// all the planes' lines of a tile compete for one set's 8 to 12 ways and evict each other
  /// before they are written whole (a 24-channel conv on 192 x 192: 2304 tiles, every plane
  /// 216 KiB = 54 x 4 KiB apart; with one more row the planes fall in different sets, and
  /// both of its transforms measured faster). The rows taken: the fewest >= tiles whose
  /// planes' first lines fall in no set more than 4 times over both C and K, else the fewest
  /// with the least crowded set, at most tiles/32 more (each extra row is a GEMM row: small
  /// GEMMs, such as ResNet-18's 16-tile ones, measured slower with a 17th row, more than
  /// their transforms gained).
  static int64_t planeRows(int64_t planes, int64_t tiles, const std::vector<int64_t> &widths) {
    auto crowd = [&](int64_t rows) {
      int64_t worst = 0;
      for (int64_t width : widths) {
        std::vector<int64_t> perSet(64, 0);
        int64_t stride = rows * width * 4; // bytes between planes
        for (int64_t e = 0; e < planes; ++e)
          worst = std::max(worst, ++perSet[(e * stride / 64) % 64]);
      }
      return worst;
    };
    int64_t best = tiles, bestCrowd = crowd(tiles);
    for (int64_t rows = tiles; rows <= tiles + tiles / 32 && bestCrowd > 4; ++rows)
      if (int64_t c = crowd(rows); c < bestCrowd) {
        best = rows;
        bestCrowd = c;
      }
    return best;
  }

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
        !allOnes(pattern::intsOr(*conv, "strides", 2, 1)) ||
        !allOnes(pattern::intsOr(*conv, "dilations", 2, 1)) ||
        conv->getString("auto_pad", "NOTSET") != "NOTSET")
      return false;
    std::vector<int64_t> pads = pattern::intsOr(*conv, "pads", 4, 0);
    const Shape &ys = conv->result()->shape();
    int64_t N = ys[0].value(), oh = ys[2].value(), ow = ys[3].value(), m = 0;
    double best = 1.0 + double(minGain_) / 100.0;
    for (int64_t cand = 2; cand <= tile_; ++cand)
      if (winogradTileSupported(cand) && gain(cand, N, oh, ow) >= best) {
        best = gain(cand, N, oh, ow);
        m = cand;
      }
    if (m == 0) {
      addStat("convs-not-worth-it");
      return false;
    }
    // 1. The plain weight [Mb*b, Kc*b, 3, 3], then U.
    int64_t kPad = mb * b, cPad = kc * b;
    Tensor plain = Tensor::zeros(DType::F32, {kPad, cPad, 3, 3});
    const float *src = wp.data<float>();
    float *dst = plain.data<float>();
    for (int64_t o = 0; o < kPad; ++o)
      for (int64_t c = 0; c < cPad; ++c) {
        const float *from = src + (((o / b) * kc + c / b) * 9 * b + c % b) * b + o % b;
        for (int64_t t = 0; t < 9; ++t)
          dst[(o * cPad + c) * 9 + t] = from[t * b * b];
      }
    Tensor u = winogradWeight(plain, m, cPad, kPad);
    // 2. The three steps.
    std::string name = conv->result()->name();
    auto fail = [&](Error e) { return e.withContext("winograd: conv " + conv->name()); };
    int64_t tiles = winogradTiles(N, oh, ow, m);
    int64_t rows = padRows_ ? planeRows((m + 2) * (m + 2), tiles, {cPad, kPad}) : tiles;
    AttrMap inAttrs{{"tile", m}, {"pads", pads}};
    if (rows != tiles) {
      inAttrs["rows"] = rows;
      addStat("convs-rows-padded");
    }
    Expected<Node *> in = g.createInferred(OpKind::WinogradInput, {x}, inAttrs, conv->name(), -1,
                                           {name + "_wino_in"}, conv);
    if (!in)
      return fail(in.takeError());
    Node *uc =
        g.createNode(OpKind::Constant, {}, {TensorType(DType::F32, shapeFromExtents(u.extents()))},
                     {{"value", Attribute(u)}}, "", {w->name() + "_winograd"}, conv);
    Expected<Node *> mm =
        g.createInferred(OpKind::MatMul, {(*in)->result(), uc->result()},
                         {{"sum_run", Attribute(kGemmSumRun)}}, conv->name(), -1,
                         {name + "_wino_mm"}, conv);
    if (!mm)
      return fail(mm.takeError());
    std::vector<Value *> ops{(*mm)->result()};
    if (bias)
      ops.push_back(bias);
    AttrMap outAttrs{{"tile", m}, {"height", oh}, {"width", ow}, {"block", b}};
    if (rows != tiles)
      outAttrs["images"] = N;
    // A conv left in f32 between Q/DQ ops keeps saying why (lower-qdq) on the node that
    // anchors its kernel.
    if (const Attribute *why = conv->attr(kQdqFallbackAttr))
      outAttrs[kQdqFallbackAttr] = *why;
    Expected<Node *> out =
        g.createInferred(OpKind::WinogradOutput, ops, outAttrs, conv->name(), -1, {}, conv);
    if (!out)
      return fail(out.takeError());
    Value *y = (*out)->result();
    if (y->shape() != conv->result()->shape())
      return fail(makeError("the output {} differs from the conv's {}", y->type().str(),
                            conv->result()->type().str()));
    g.replaceAllUsesWith(conv->result(), y);
    g.eraseNode(conv);
    pattern::eraseIfUnusedConstant(g, wc);
    g.renameValue(y, name);
    addStat(fmt::format("convs-rewritten-f{}", m));
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createWinogradPass() {
  return std::make_unique<WinogradPass>();
}

} // namespace nnc

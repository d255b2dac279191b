// Packs constant GEMM weights at compile time: matmul(a, W) with W a constant f32 [K, N]
// matrix (or a batch of them, [B..., K, N], as the winograd pass makes) becomes
// matmul(a, W') {packed_n = N}, W' the constant [B..., ceil(N/nr), K, nr] column panels of W
// (ir/GemmPacking.h) that the GEMM microkernels stream without a run-time copy.
//
// Algorithm: for each matmul without packed_n whose operand 0 has rank >= 2 and static
// extents and whose operand 1 is a Constant node's f32 [..., K, N] result: compute the panels
// (nr: panelWidth, two vectors of the target's f32 registers, four for at most two rows),
// insert them as a constant before the matmul and point the matmul at it; matmuls of the
// same weight and width share one packed constant. The old constant stays for its other
// users (dce removes it otherwise). With PassContext::packedWeights (the per-shape programs
// of a symbolic-shape model), panels that an earlier run made from the same constant are
// taken from there instead of packed again.
// The matmul of an attention group (a softmax feeding operand 0) is left alone.
// matmul_integer's i8 weights are packed the same way into the integer tile's panels
// (packGemmPanelsK4: groups of 4 k rows interleaved per column), nr as the tiles' default
// (CpuTarget::int8PanelWidth); a u8 weight is not (its tiles shift it to i8 while packing at run time).
// Under --precision bf16 (CpuTarget::precision) a [K, N] f32 weight is packed as bf16 instead,
// rounded to nearest even, in the bf16 tile's panels of k pairs (packGemmPanelsBf16): the
// matmul then multiplies f32 by bf16 panels, which its bf16 GEMM template runs with A rounded
// to bf16 and f32 sums. A batch of weight matrices stays f32 (its batch loops move A, which
// the bf16 GEMM packs once). Under bf16 a blocked conv (conv_nchwc of group 1 on a blocked
// input, lanes of 16, an even input block) with a constant weight gets the weight rounded to
// bf16 in pairs of input lanes (packConvWeightBf16Pairs) and its input cast to bf16 (one cast
// per input value), marked bf16_pairs: its bf16 ConvTiles (vdpbf16ps) sum in f32. Its bias,
// result and fused epilogue stay f32; depthwise convs and Winograd's GEMMs stay f32. A conv
// on a plain input (a network's stem: 3 channels, in_block 1) pairs kernel columns instead
// of input lanes (bf16_pairs = 2): its input padded by the conv's pads (and one more column
// where the kernel is odd, whose pair's second column has a zero weight) and cast to bf16,
// its pads then 0, its weight [Mb, C, KH, KW, 1, 16] as [Mb, C, KH, ceil(KW/2), 2, 16]
// (column 2p + l in lane l of pair p) in those pairs. Needs AVX512-BF16 on 512-bit vectors.
// conv_integer(x, W) of group 1 with W a constant i8 [M, C, kernel...] becomes
// conv_integer(x, W') {packed_m = M, kernel_shape}, W' the integer panels of the [K, M] matrix
// of k = (tap, c) that its im2col template multiplies (NHWC patches).
// Where x's zero point term of the tiles' compensation can be nonzero (a zero point is given,
// or x is i8), the integer ops also get the weight matrix's i32 column sums (sum over k) as
// operand 4, a constant, so the tiles do not sum the weight on every run.
#include <algorithm>
#include <map>
#include <set>

#include "PatternUtil.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/GemmPacking.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

/// Columns of a panel: two vectors of the target's f32 registers (at least 16), the
/// microkernel's width for a tile of several rows; four vectors for a matrix-vector product
/// (at most two rows: a recurrent step, a batch-1 linear layer), whose one-row tile then
/// keeps four independent accumulators in flight instead of two (the FMA latency, not the
/// weight stream, bounded the two).
int64_t panelWidth(const CpuTarget &cpu, int64_t rows) {
  int64_t lanes = std::max<int64_t>(8, cpu.f32Lanes());
  return rows <= 2 ? 4 * lanes : 2 * lanes;
}

class PackGemmWeightsPass : public Pass {
public:
  std::string_view name() const override { return "pack-gemm-weights"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_ASSIGN_OR_RETURN(CpuTarget cpu, ctx.cpuFor(name()));
    cache_ = ctx.packedWeights.get();
    bool changed = false;
    std::map<std::pair<const Node *, int64_t>, Value *> packed, packedConv, packedBf16;
    bool bf16 = cpu.precision == CpuTarget::Precision::BF16;
    sums_.clear();
    std::map<const Value *, Value *> bf16Inputs;
    for (Node *mm : g.nodes()) {
      if (mm->kind() == OpKind::ConvNCHWc && cpu.bf16Convs()) {
        changed |= convToBf16(g, *mm, bf16Inputs);
        continue;
      }
      if (mm->kind() == OpKind::ConvInteger && !mm->hasAttr("packed_m")) {
        changed |= packConvInteger(g, *mm, cpu, packedConv);
        continue;
      }
      if (mm->kind() == OpKind::MatMulInteger && !mm->hasAttr("packed_n")) {
        changed |= packInteger(g, *mm, cpu, packed);
        continue;
      }
      if (mm->kind() != OpKind::MatMul || mm->hasAttr("packed_n"))
        continue;
      Value *a = mm->operand(0), *b = mm->operand(1);
      if (!a || !b || a->rank() < 2 || !staticExtents(a->shape()))
        continue;
      if (a->producer() && a->producer()->kind() == OpKind::Softmax)
        continue;
      Node *c = b->producer();
      if (!c || c->kind() != OpKind::Constant || b->dtype() != DType::F32 || b->rank() < 2)
        continue;
      const Tensor &w = c->getTensor("value");
      int64_t n = w.extents().back();
      if (n < 1 || w.numElements() == 0)
        continue;
      // Rows of one product: operand 0's second-to-last dim (its batch dims multiply B's
      // batches, or fold into the rows when B is shared; either way a tile sees this many).
      Extents ae = *staticExtents(a->shape());
      int64_t rows = ae[ae.size() - 2];
      if (w.rank() == 2)
        for (size_t d = 0; d + 2 < ae.size(); ++d)
          rows *= ae[d];
      // One packed copy per weight and panel width: the matmuls of an unrolled recurrence
      // (one per time step) share their weight, which must stay one stream in cache, not a
      // copy per step (an LSTM of 64 steps read 64 MB of panels instead of 1 MB).
      int64_t nr = panelWidth(cpu, rows);
      bool asBf16 = bf16 && w.rank() == 2;
      Value *&pv = (asBf16 ? packedBf16 : packed)[{c, nr}];
      if (!pv) {
        Tensor panels =
            asBf16
                ? cached(w, fmt::format("bf16 {}", nr), [&] { return packGemmPanelsBf16(w, nr); })
                : cached(w, fmt::format("f32 {}", nr), [&] { return packGemmPanels(w, nr); });
        pv = g.createNode(OpKind::Constant, {},
                          {TensorType(panels.dtype(), shapeFromExtents(panels.extents()))},
                          {{"value", Attribute(panels)}}, "",
                          {b->name() + (asBf16 ? "_bf16_panels" : "_panels")}, mm)
                 ->result();
        if (asBf16)
          addStat("weights-packed-bf16");
      } else {
        addStat("packed-weights-shared");
      }
      mm->setOperand(1, pv);
      mm->setAttr("packed_n", Attribute(n));
      addStat("weights-packed");
      changed = true;
      // The unpacked weight is freed as soon as its last matmul moved to the panels (a later
      // node may reuse the erased node's address: forget its entries).
      if (pattern::eraseIfUnusedConstant(g, c))
        for (auto *map : {&packed, &packedBf16})
          for (auto it = map->begin(); it != map->end();)
            it = it->first.first == c ? map->erase(it) : std::next(it);
    }
    fuseBf16Casts(g, bf16Inputs);
    return changed;
  }

private:
  /// A bf16 conv's input cast joins the fusion group that produces its input, as the group's
  /// root, where that group is a conv_nchwc's (or the input is a lone conv_nchwc's result,
  /// which then becomes such a group) and nothing else reads the input: the conv template
  /// keeps the group's sums in f32 scratch and stores the group's result as bf16, once
  /// (codegen/lower/Layout.cpp), instead of an f32 result and a pass that casts it.
  void fuseBf16Casts(Graph &g, const std::map<const Value *, Value *> &inputs) {
    int64_t fresh = 0;
    std::set<const Node *> casts;
    for (const auto &entry : inputs)
      casts.insert(entry.second->producer());
    for (const Node *n : g.nodes())
      fresh = std::max(fresh, fusionGroupOf(*n) + 1);
    // In graph order, so that the new groups' ids do not depend on pointer values.
    for (Node *cast : g.nodes()) {
      if (!casts.count(cast))
        continue;
      const Value *x = cast->operand(0);
      Node *p = x->producer();
      if (!p || g.isOutput(x) || g.users(x).size() != 1)
        continue;
      int64_t gid = fusionGroupOf(*p);
      bool convAnchor = false;
      if (gid >= 0) {
        for (const Node *m : g.nodes())
          convAnchor = convAnchor || (m->kind() == OpKind::ConvNCHWc && fusionGroupOf(*m) == gid);
      } else if (p->kind() == OpKind::ConvNCHWc && p->numResults() == 1) {
        gid = fresh++;
        p->setAttr(kFusionGroupAttr, Attribute(gid));
        convAnchor = true;
      }
      if (!convAnchor)
        continue;
      cast->setAttr(kFusionGroupAttr, Attribute(gid));
      addStat("bf16-casts-fused");
    }
  }

  /// conv_nchwc of group 1 on a blocked f32 input with a constant f32 weight of 16 output
  /// lanes and an even input block: bf16 operands (the weight in pairs of input lanes, the
  /// input cast once per value in `inputs`), bf16_pairs set. An input made in the conv's own
  /// fusion group (a fused view) is left alone.
  bool convToBf16(Graph &g, Node &conv, std::map<const Value *, Value *> &inputs) {
    Node *c = f32ConvWeight(conv);
    if (!c)
      return false;
    Value *x = conv.operand(0), *w = conv.operand(1);
    if (x->rank() == 4)
      return columnPairsToBf16(g, conv, *c);
    const Tensor &wt = c->getTensor("value");
    if (x->rank() != 5 || wt.extents()[5] != 16 || wt.extents()[4] % 2 != 0)
      return false;
    int64_t group = fusionGroupOf(conv);
    if (x->producer() && group >= 0 && fusionGroupOf(*x->producer()) == group)
      return false;
    Value *&xb = inputs[x];
    if (!xb) {
      Node *cast = g.createNode(OpKind::Cast, {x}, {TensorType(DType::BF16, x->shape())},
                                {{"to", Attribute(DType::BF16)}}, "", {x->name() + "_bf16"},
                                &conv);
      xb = cast->result();
    }
    Tensor pairs = cached(wt, "conv bf16 pairs", [&] { return packConvWeightBf16Pairs(wt); });
    Value *wb = g.createNode(OpKind::Constant, {},
                             {TensorType(DType::BF16, shapeFromExtents(pairs.extents()))},
                             {{"value", Attribute(pairs)}}, "", {w->name() + "_bf16_pairs"},
                             &conv)
                    ->result();
    conv.setOperand(0, xb);
    conv.setOperand(1, wb);
    conv.setAttr("bf16_pairs", Attribute(int64_t{1}));
    pattern::eraseIfUnusedConstant(g, c);
    addStat("convs-bf16");
    return true;
  }

  /// The Constant node of an f32 conv_nchwc's packed weight, where the conv (group 1, not yet
  /// bf16) has a static f32 input: a conv that may take bf16 tiles. Null otherwise.
  static Node *f32ConvWeight(const Node &conv) {
    const Value *x = conv.operand(0), *w = conv.operand(1);
    if (conv.getInt("bf16_pairs", 0) != 0 || conv.getInt("group", 1) != 1 || !x || !w ||
        x->dtype() != DType::F32 || w->dtype() != DType::F32 || w->rank() != 6 ||
        !staticExtents(x->shape()))
      return nullptr;
    Node *c = w->producer();
    return c && c->kind() == OpKind::Constant ? c : nullptr;
  }

  /// conv_nchwc (f32ConvWeight's, its weight the constant `c`) on a plain input with a weight
  /// of in_block 1, 16 output lanes and at least two kernel columns, explicit pads and
  /// dilation 1 along W: bf16 tiles over pairs of kernel columns (the file comment),
  /// bf16_pairs = 2.
  bool columnPairsToBf16(Graph &g, Node &conv, Node &c) {
    Value *x = conv.operand(0), *w = conv.operand(1);
    const Tensor &wt = c.getTensor("value");
    const Extents &we = wt.extents();
    // One kernel column would pair with a zero: twice the products, for no gain on f32's.
    if (we[4] != 1 || we[5] != 16 || we[3] < 2)
      return false;
    Expected<WindowAttrs> a = readWindowAttrs(conv, 2);
    if (!a) {
      (void)a.takeError(); // a malformed conv stays as it is, for the verifier to name
      return false;
    }
    if ((!a->autoPad.empty() && a->autoPad != "NOTSET") || a->dilations[1] != 1)
      return false;
    int64_t kw = we[3], pairs = (kw + 1) / 2;
    const std::string &name = x->name();
    std::vector<int64_t> pads{0, 0, a->pads[0], a->pads[1],
                              0, 0, a->pads[2], a->pads[3] + kw % 2};
    Value *padsV =
        g.createNode(OpKind::Constant, {}, {TensorType(DType::I64, shapeFromExtents({8}))},
                     {{"value", Attribute(Tensor::fromVector<int64_t>(DType::I64, {8}, pads))}},
                     "", {name + "_column_pairs_pads"}, &conv)
            ->result();
    Expected<Node *> pad = g.createInferred(OpKind::Pad, {x, padsV},
                                            {{"mode", std::string("constant")}}, "", 1,
                                            {name + "_column_pairs_padded"}, &conv);
    if (!pad) {
      (void)pad.takeError();
      return false;
    }
    Value *padded = (*pad)->result();
    Value *xb = g.createNode(OpKind::Cast, {padded}, {TensorType(DType::BF16, padded->shape())},
                             {{"to", Attribute(DType::BF16)}}, "",
                             {padded->name() + "_bf16"}, &conv)
                    ->result();
    Tensor packed = cached(wt, "conv bf16 column pairs", [&] {
      // [Mb, C, KH, KW, 1, 16] -> [Mb, C, KH, pairs, 2, 16], column 2p + l at (p, l).
      Tensor cols = Tensor::zeros(DType::F32, {we[0], we[1], we[2], pairs, 2, we[5]});
      const float *src = wt.data<float>();
      float *dst = cols.data<float>();
      int64_t rows = we[0] * we[1] * we[2], b = we[5];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < kw; ++k)
          for (int64_t j = 0; j < b; ++j)
            dst[((r * pairs + k / 2) * 2 + k % 2) * b + j] = src[(r * kw + k) * b + j];
      return packConvWeightBf16Pairs(cols);
    });
    Value *wb = g.createNode(OpKind::Constant, {},
                             {TensorType(DType::BF16, shapeFromExtents(packed.extents()))},
                             {{"value", Attribute(packed)}}, "",
                             {w->name() + "_bf16_column_pairs"}, &conv)
                    ->result();
    conv.setOperand(0, xb);
    conv.setOperand(1, wb);
    conv.setAttr("pads", Attribute(std::vector<int64_t>{0, 0, 0, 0}));
    conv.setAttr("bf16_pairs", Attribute(int64_t{2}));
    pattern::eraseIfUnusedConstant(g, &c);
    addStat("convs-bf16-column-pairs");
    return true;
  }

  /// Panels shared with other runs of the pipeline (PassContext::packedWeights), or none.
  PackedWeightCache *cache_ = nullptr;

  /// `make()`, the panels of the constant `w` in the packing `how`, from the cache when there
  /// is one.
  Tensor cached(const Tensor &w, const std::string &how, const std::function<Tensor()> &make) {
    return cache_ ? cache_->get(w, how, make) : make();
  }

  /// The column sums of each packed integer weight (panels value -> sums value).
  std::map<const Value *, Value *> sums_;

  /// Gives the integer op `node`, whose operand 1 is now `panels` (the [K, N] i8 matrix
  /// `km`), the matrix's i32 column sums as operand 4 when its x (operand 0) has a zero point
  /// term: a zero point (operand 2) or an i8 x.
  void addColumnSums(Graph &g, Node &node, Value *panels, const Tensor &km) {
    if (!node.operand(2) && node.operand(0)->dtype() != DType::I8)
      return;
    Value *&sv = sums_[panels];
    if (!sv) {
      int64_t k = km.extents()[0], n = km.extents()[1];
      Tensor sums = Tensor::zeros(DType::I32, {n});
      const auto *src = static_cast<const int8_t *>(km.rawData());
      auto *dst = sums.data<int32_t>();
      for (int64_t r = 0; r < k; ++r)
        for (int64_t j = 0; j < n; ++j)
          dst[j] += src[r * n + j];
      sv = g.createNode(OpKind::Constant, {}, {TensorType(DType::I32, shapeFromExtents({n}))},
                        {{"value", Attribute(sums)}}, "", {panels->name() + "_colsums"}, &node)
               ->result();
    }
    std::vector<Value *> ops = node.operands();
    ops.resize(5, nullptr);
    ops[4] = sv;
    node.setOperands(ops);
  }

  /// conv_integer(x, W) of group 1 with W a constant i8 [M, C, kernel...]: W as the [K, M]
  /// matrix of k = tap * C + c in the integer tile's panels.
  bool packConvInteger(Graph &g, Node &conv, const CpuTarget &cpu,
                       std::map<std::pair<const Node *, int64_t>, Value *> &packed) {
    Value *x = conv.operand(0), *w = conv.operand(1);
    if (!x || !w || x->rank() < 3 || !staticExtents(x->shape()) || w->dtype() != DType::I8 ||
        w->rank() != x->rank() || conv.getInt("group", 1) != 1 || conv.numResults() != 1)
      return false;
    Node *c = w->producer();
    if (!c || c->kind() != OpKind::Constant)
      return false;
    const Tensor &wt = c->getTensor("value");
    const Extents &we = wt.extents();
    int64_t m = we[0], ch = we[1], taps = 1;
    for (size_t d = 2; d < we.size(); ++d)
      taps *= we[d];
    Extents xe = *staticExtents(x->shape());
    if (m < 1 || ch < 1 || taps < 1 || ch != (channelsLast(conv) ? xe.back() : xe[1]))
      return false;
    int64_t nr = cpu.int8PanelWidth();
    Value *&pv = packed[{c, nr}];
    Tensor km = Tensor::zeros(DType::I8, {ch * taps, m});
    const auto *src = static_cast<const uint8_t *>(wt.rawData());
    auto *dst = static_cast<uint8_t *>(km.rawData());
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t ci = 0; ci < ch; ++ci)
        for (int64_t t = 0; t < taps; ++t)
          dst[(t * ch + ci) * m + mi] = src[(mi * ch + ci) * taps + t];
    if (!pv) {
      Tensor panels =
          cached(wt, fmt::format("conv k4 {}", nr), [&] { return packGemmPanelsK4(km, nr); });
      pv = g.createNode(OpKind::Constant, {},
                        {TensorType(DType::I8, shapeFromExtents(panels.extents()))},
                        {{"value", Attribute(panels)}}, "", {w->name() + "_panels"}, &conv)
               ->result();
    } else {
      addStat("packed-weights-shared");
    }
    conv.setOperand(1, pv);
    conv.setAttr("packed_m", Attribute(m));
    conv.setAttr("kernel_shape", Attribute(Extents(we.begin() + 2, we.end())));
    addColumnSums(g, conv, pv, km);
    addStat("weights-packed");
    if (pattern::eraseIfUnusedConstant(g, c))
      for (auto it = packed.begin(); it != packed.end();)
        it = it->first.first == c ? packed.erase(it) : std::next(it);
    return true;
  }

  /// matmul_integer(a, W) with W a constant i8 [..., K, N]: W as the integer tile's panels.
  bool packInteger(Graph &g, Node &mm, const CpuTarget &cpu,
                   std::map<std::pair<const Node *, int64_t>, Value *> &packed) {
    Value *a = mm.operand(0), *b = mm.operand(1);
    if (!a || !b || a->rank() < 2 || !staticExtents(a->shape()) || b->dtype() != DType::I8 ||
        b->rank() < 2)
      return false;
    Node *c = b->producer();
    if (!c || c->kind() != OpKind::Constant)
      return false;
    const Tensor &w = c->getTensor("value");
    int64_t n = w.extents().back();
    if (n < 1 || w.numElements() == 0)
      return false;
    int64_t nr = cpu.int8PanelWidth();
    // Keyed apart from the f32 panels of the same constant (a negative width).
    Value *&pv = packed[{c, -nr}];
    if (!pv) {
      Tensor panels = cached(w, fmt::format("k4 {}", nr), [&] { return packGemmPanelsK4(w, nr); });
      pv = g.createNode(OpKind::Constant, {},
                        {TensorType(DType::I8, shapeFromExtents(panels.extents()))},
                        {{"value", Attribute(panels)}}, "", {b->name() + "_panels"}, &mm)
               ->result();
    } else {
      addStat("packed-weights-shared");
    }
    mm.setOperand(1, pv);
    mm.setAttr("packed_n", Attribute(n));
    if (w.rank() == 2)
      addColumnSums(g, mm, pv, w);
    addStat("weights-packed");
    if (pattern::eraseIfUnusedConstant(g, c))
      for (auto it = packed.begin(); it != packed.end();)
        it = it->first.first == c ? packed.erase(it) : std::next(it);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createPackGemmWeightsPass() {
  return std::make_unique<PackGemmWeightsPass>();
}

} // namespace nnc

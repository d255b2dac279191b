// Blocked channel layout for 2-D f32 convs: conv runs as conv_nchwc on [N, C/b, H, W, b]
// activations, weights are packed once at compile time, and the transforms between layouts
// sit only at the boundaries. Options: `block` (default: the f32 lanes of the host's vector
// registers) and `min-fill` (percent, default 75: the least share of real output channels
// among the padded lanes for a conv to be converted).
//
// Invariant: the padding lanes of a blocked activation (channels >= C) hold finite values
// (zero where a conv or to_nchwc wrote them); a conv reads them only against zero weights.
//
// Algorithm:
//  1. Each eligible conv, in graph order (2-D, f32, constant weight and bias, group 1,
//     depthwise, or groups whose channel counts are multiples of b, or groups of b/2 channels
//     that read the channels they write, regrouped per block with a block-diagonal weight;
//     enough real output channels per padded block), becomes
//       from_nchwc(conv_nchwc(to_nchwc(x), pack_conv_weight(w), to_nchwc(bias)))
//     where a plain input with fewer than b channels is read as it is (no to_nchwc); the
//     transforms of constants are folded by constant-fold. Step 2 runs after each conv.
//  2. Layout-agnostic users of a from_nchwc result move into the blocked layout, their result
//     converted back by a new from_nchwc (worklist until nothing moves): elementwise ops that
//     keep finite padding lanes finite (add, sub, mul, min, max, neg, abs, sigmoid, tanh, erf;
//     relu and clip are max/min), whose other operands are blocked values of the same layout
//     (equal, or broadcast over batch and spatial dims, as a squeeze-excitation scale),
//     single-element constants or per-channel / channel-broadcast constants (unsqueezed to
//     rank 4 and blocked); max_pool (one result) and avg_pool, as 3-D windows with a 1-wide
//     lane axis; reduce_mean/reduce_max/reduce_sum over spatial axes with keepdims; concat
//     along the channels of blocked values, each but the last a whole number of blocks.
//  3. to_nchwc(from_nchwc(v)) with the same block and channel count is v (the transforms
//     cancel); dce removes the from_nchwc nodes left without users.
#include <algorithm>
#include <cstring>
#include <set>

#include "PatternUtil.h"
#include "nnc/ir/Quantize.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

bool isConstant(const Value *v) {
  return v && v->producer() && v->producer()->kind() == OpKind::Constant;
}

bool staticShape(const Value *v) {
  for (const Dim &d : v->shape())
    if (!d.isStatic())
      return false;
  return true;
}

/// Elementwise ops whose result is finite on finite operands (so padding lanes stay finite).
bool keepsLanesFinite(OpKind k) {
  switch (k) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Min:
  case OpKind::Max:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
    return true;
  default:
    return false;
  }
}

class LayoutNCHWcPass : public Pass {
public:
  std::string_view name() const override { return "layout-nchwc"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"block", "min-fill"}));
    NNC_ASSIGN_OR_RETURN(CpuTarget cpu, ctx.cpuFor(name()));
    NNC_ASSIGN_OR_RETURN(block_, ctx.intOption(name(), "block", cpu.f32Lanes(), 1));
    NNC_ASSIGN_OR_RETURN(minFill_, ctx.intOption(name(), "min-fill", 75, 0));
    g_ = &g;
    bool changed = false;
    // Convs in graph order, each followed by the propagation of its result, so that a conv
    // whose input comes from a blocked chain sees the from_nchwc there (convs are never
    // erased by step 2, so the list stays valid).
    std::vector<Node *> convs;
    for (Node *n : g.nodes())
      if (n->kind() == OpKind::Conv)
        convs.push_back(n);
    for (Node *conv : convs) {
      NNC_ASSIGN_OR_RETURN(Node * from, convertConv(conv));
      if (!from)
        continue;
      changed = true;
      NNC_TRY(pattern::propagateToUsers(g, from, [&](Node *u) { return moveIntoBlocked(u); }));
    }
    for (Node *n : g.nodes())
      if (n->kind() == OpKind::ToNCHWc && cancel(n))
        changed = true;
    // The transforms of activations that remain (the others are left for dce).
    for (Node *n : g.nodes())
      if ((n->kind() == OpKind::ToNCHWc || n->kind() == OpKind::FromNCHWc) &&
          !isConstant(n->operand(0)) && g.hasUses(n->result()))
        addStat("transforms-live");
    return changed;
  }

private:
  Graph *g_ = nullptr;
  int64_t block_ = 16;
  /// The least share (percent) of real output channels among the padded ones for a conv to
  /// be converted: padding 6 channels to 16 lanes costs more than the layout gains.
  int64_t minFill_ = 75;

  /// A node before `before` (its result named `<name>_blk` when `name` is given).
  Expected<Value *> make(OpKind k, std::vector<Value *> ops, AttrMap attrs, Node *before,
                         const char *stat = nullptr, const std::string &name = "") {
    std::vector<std::string> names;
    if (!name.empty())
      names.push_back(name + "_blk");
    NNC_ASSIGN_OR_RETURN(Node * n, g_->createInferred(k, std::move(ops), std::move(attrs),
                                                      before->name(), -1, names, before));
    if (stat)
      addStat(stat);
    return n->result();
  }

  Expected<Value *> toBlocked(Value *v, int64_t axis, Node *before) {
    bool activation = !isConstant(v);
    return make(OpKind::ToNCHWc, {v}, {{"block", block_}, {"axis", axis}}, before,
                activation ? "transforms-inserted" : nullptr);
  }

  /// from_nchwc of `blocked` (channels `c`) replacing every use of `old`; returns the node.
  Expected<Node *> replaceWithFrom(Node *old, Value *blocked, int64_t c) {
    NNC_ASSIGN_OR_RETURN(Value * back,
                         make(OpKind::FromNCHWc, {blocked}, {{"axis", int64_t{1}}, {"channels", c}},
                              old, "transforms-inserted"));
    std::string name = old->result()->name();
    g_->replaceAllUsesWith(old->result(), back);
    g_->eraseNode(old);
    g_->renameValue(back, name);
    return back->producer();
  }

  /// Step 1. Returns the from_nchwc after the new conv, or null when `conv` stays.
  Expected<Node *> convertConv(Node *conv) {
    Value *x = conv->operand(0), *w = conv->operand(1), *bias = conv->operand(2);
    if (conv->numResults() != 1 || x->rank() != 4 || x->dtype() != DType::F32 || !staticShape(x) ||
        !isConstant(w) || !staticShape(w) || (bias && !isConstant(bias)))
      return nullptr;
    int64_t c = x->shape()[1].value(), m = w->shape()[0].value(), cg = w->shape()[1].value();
    int64_t group = conv->getInt("group", 1), b = block_;
    if (group < 1 || c % group != 0 || m % group != 0 || cg * group != c || c == 0 || m == 0)
      return nullptr;
    // Groups narrower than a block that read the channels they write (RegNet's groups of 8
    // channels on 16 lanes) are regrouped into one group per block with a block-diagonal
    // weight (zeros across the old groups), so the conv runs blocked; at most half of its
    // multiply-adds are against those zeros. Channels that end inside a block (RegNet-Y-400MF's
    // 104 on 16 lanes) leave the last block's old group beside padding lanes, which it reads
    // against zero weights like the other old groups' channels.
    bool regrouped = false;
    if (group > 1 && cg > 1 && cg < b && b % cg == 0 && b / cg <= 2 && m == c && m / group == cg) {
      w = blockDiagonal(conv, w, group, b);
      group = (c + b - 1) / b;
      cg = b;
      regrouped = true;
      addStat("groups-regrouped");
    }
    bool depthwise = group > 1 && cg == 1 && m == c;
    bool grouped = regrouped || (group > 1 && cg % b == 0 && (m / group) % b == 0);
    if (group > 1 && !depthwise && !grouped)
      return nullptr;
    // A plain input of fewer channels than a block is read as it is (no padding to b lanes),
    // unless it comes out of a blocked chain (whose transforms then cancel).
    bool fromBlocked = x->producer() && x->producer()->kind() == OpKind::FromNCHWc;
    bool plainInput = group == 1 && c < b && !fromBlocked;
    int64_t mb = (m + b - 1) / b;
    if (m * 100 < minFill_ * mb * b) {
      addStat("convs-too-narrow");
      return nullptr;
    }
    AttrMap attrs;
    // qdq_fallback: a conv left in f32 between Q/DQ ops keeps saying why (lower-qdq).
    for (const char *a : {"strides", "pads", "dilations", "auto_pad", kQdqFallbackAttr})
      if (conv->hasAttr(a))
        attrs[a] = conv->attrs().at(a);
    // Depthwise: one group per padded channel.
    attrs["group"] = depthwise ? mb * b : group;
    Value *xb = x;
    if (!plainInput) {
      NNC_ASSIGN_OR_RETURN(xb, toBlocked(x, 1, conv));
    }
    int64_t inBlock = plainInput || depthwise ? 1 : b;
    NNC_ASSIGN_OR_RETURN(Value * wp,
                         make(OpKind::PackConvWeight, {w},
                              {{"in_block", inBlock}, {"out_block", b}}, conv, "weights-packed"));
    std::vector<Value *> ops{xb, wp};
    if (bias) {
      NNC_ASSIGN_OR_RETURN(Value * bb, toBlocked(bias, 0, conv));
      ops.push_back(bb);
    }
    Expected<Value *> y =
        make(OpKind::ConvNCHWc, ops, attrs, conv, nullptr, conv->result()->name());
    if (!y)
      return y.takeError().withContext("layout-nchwc: conv " + conv->name());
    addStat("convs-converted");
    if (depthwise)
      addStat("depthwise-convs");
    return replaceWithFrom(conv, *y, m);
  }

  /// The weight of `conv` (group `group`, c == m channels, groups of cg channels) regrouped
  /// into groups of `b` channels: w'[o, i] = w[o, i - start(o)] for the input channels i of
  /// o's old group, whose first channel is start(o) within o's block, and 0 elsewhere.
  Value *blockDiagonal(Node *conv, Value *w, int64_t group, int64_t b) {
    const Tensor &t = w->producer()->getTensor("value");
    Extents e = t.extents();
    int64_t m = e[0], cg = e[1], taps = e[2] * e[3], perGroup = m / group;
    Tensor out = Tensor::zeros(t.dtype(), {m, b, e[2], e[3]});
    for (int64_t o = 0; o < m; ++o) {
      int64_t offset = (o / perGroup) * cg - (o / b) * b;
      for (int64_t j = 0; j < cg; ++j)
        std::memcpy(static_cast<char *>(out.rawData()) +
                        ((o * b + offset + j) * taps) * dtypeSize(t.dtype()),
                    static_cast<const char *>(t.rawData()) +
                        ((o * cg + j) * taps) * dtypeSize(t.dtype()),
                    taps * dtypeSize(t.dtype()));
    }
    Node *n = g_->createNode(OpKind::Constant, {},
                             {TensorType(t.dtype(), shapeFromExtents(out.extents()))},
                             {{"value", Attribute(out)}}, "", {w->name() + "_regrouped"}, conv);
    return n->result();
  }

  /// The blocked form of operand `v` of a node moving into the blocked layout whose blocked
  /// shape is `shape` (of `c` channels), or null when there is none.
  Expected<Value *> blockedOperand(Value *v, const Shape &shape, int64_t c, Node *before) {
    if (Node *p = v->producer(); p && p->kind() == OpKind::FromNCHWc) {
      // The same layout, its batch and spatial dims equal or broadcast (1): a squeeze-
      // excitation scale [N, C/b, 1, 1, b] against its [N, C/b, H, W, b] activation.
      Value *in = p->operand(0);
      if (p->getInt("channels", 0) != c || in->rank() != 5)
        return nullptr;
      for (size_t d = 0; d < 5; ++d) {
        bool broadcast = (d == 0 || d == 2 || d == 3) && in->shape()[d] == Dim(1);
        if (in->shape()[d] != shape[d] && !broadcast)
          return nullptr;
      }
      return in;
    }
    if (!isConstant(v) || v->rank() > 4 || !staticShape(v))
      return nullptr;
    int64_t count = 1;
    for (const Dim &d : v->shape())
      count *= d.value();
    if (count == 1)
      return v; // broadcasts against any shape
    // Right-align to rank 4; the channel dim must be c or 1, the spatial dims must broadcast.
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < 4 - v->rank(); ++i)
      axes.push_back(i);
    Shape s4(4 - v->rank(), Dim(1));
    s4.insert(s4.end(), v->shape().begin(), v->shape().end());
    for (int d : {0, 2, 3})
      if (s4[d] != Dim(1) && s4[d] != shape[d == 0 ? 0 : d])
        return nullptr;
    if (s4[1] != Dim(c) && s4[1] != Dim(1))
      return nullptr;
    Value *r = v;
    if (!axes.empty()) {
      NNC_ASSIGN_OR_RETURN(r, make(OpKind::Unsqueeze, {v}, {{"axes", axes}}, before));
    }
    if (s4[1] == Dim(1))
      return make(OpKind::Unsqueeze, {r}, {{"axes", std::vector<int64_t>{4}}}, before);
    return toBlocked(r, 1, before);
  }

  /// Step 2. Moves `u` into the blocked layout; returns its new from_nchwc or null.
  Expected<Node *> moveIntoBlocked(Node *u) {
    if (u->numResults() != 1 || u->result()->rank() != 4 || !staticShape(u->result()))
      return nullptr;
    // The blocked layout of the first blocked operand of the result's shape (an elementwise
    // op's others may broadcast against it), else of the first blocked operand.
    const Node *from = nullptr;
    for (Value *v : u->operands())
      if (v && v->producer() && v->producer()->kind() == OpKind::FromNCHWc &&
          (!from ||
           (from->result()->shape() != u->result()->shape() && v->shape() == u->result()->shape())))
        from = v->producer();
    if (!from)
      return nullptr;
    Value *blockedIn = from->operand(0);
    if (blockedIn->shape().back() != Dim(block_))
      return nullptr;
    int64_t c = from->getInt("channels", 0);
    const Shape &outShape = u->result()->shape();
    AttrMap attrs = u->attrs();
    std::vector<Value *> ops;
    if (u->info().elementwise) {
      if (!keepsLanesFinite(u->kind()) || from->result()->shape() != outShape)
        return nullptr;
      for (Value *v : u->operands()) {
        NNC_ASSIGN_OR_RETURN(Value * bv, blockedOperand(v, blockedIn->shape(), c, u));
        if (!bv)
          return nullptr; // a plain activation or an unrelated layout: u stays
        ops.push_back(bv);
      }
    } else if (u->kind() == OpKind::MaxPool || u->kind() == OpKind::AvgPool) {
      if (u->operand(0)->producer() != from)
        return nullptr;
      // A 3-D window over (H, W, lanes) that is 1 wide on the lanes.
      std::vector<int64_t> k = u->getInts("kernel_shape", {});
      if (k.size() != 2)
        return nullptr;
      std::vector<int64_t> s = pattern::intsOr(*u, "strides", 2, 1),
                           d = pattern::intsOr(*u, "dilations", 2, 1),
                           p = pattern::intsOr(*u, "pads", 4, 0);
      attrs["kernel_shape"] = std::vector<int64_t>{k[0], k[1], 1};
      attrs["strides"] = std::vector<int64_t>{s[0], s[1], 1};
      attrs["dilations"] = std::vector<int64_t>{d[0], d[1], 1};
      if (u->hasAttr("pads"))
        attrs["pads"] = std::vector<int64_t>{p[0], p[1], 0, p[2], p[3], 0};
      ops.push_back(blockedIn);
    } else if (u->kind() == OpKind::Concat) {
      // Along the channels, of blocked operands only, each but the last a whole number of
      // blocks (so the padding lanes stay at the end): a concat of the blocks.
      int64_t axis = u->getInt("axis", 0);
      if ((axis < 0 ? axis + 4 : axis) != 1)
        return nullptr;
      c = 0;
      for (size_t i = 0; i < u->numOperands(); ++i) {
        Value *v = u->operand(i);
        Node *p = v ? v->producer() : nullptr;
        if (!p || p->kind() != OpKind::FromNCHWc || p->getInt("axis", 1) != 1)
          return nullptr;
        Value *in = p->operand(0);
        int64_t ci = p->getInt("channels", 0);
        if (in->rank() != 5 || in->shape().back() != Dim(block_) ||
            (i + 1 < u->numOperands() && ci % block_ != 0))
          return nullptr;
        c += ci;
        ops.push_back(in);
      }
      attrs["axis"] = int64_t{1};
    } else if (u->kind() == OpKind::ReduceMean || u->kind() == OpKind::ReduceMax ||
               u->kind() == OpKind::ReduceSum) {
      std::vector<int64_t> axes = u->getInts("axes", {});
      if (u->getInt("keepdims", 1) != 1 || axes.empty())
        return nullptr;
      for (int64_t &a : axes) {
        a = a < 0 ? a + 4 : a;
        if (a != 2 && a != 3)
          return nullptr;
      }
      attrs["axes"] = axes;
      ops.push_back(blockedIn);
    } else {
      return nullptr;
    }
    Expected<Value *> y = make(u->kind(), ops, attrs, u, nullptr, u->result()->name());
    if (!y) // a shape rule refused the blocked form: leave u as it is
      return nullptr;
    addStat("nodes-moved");
    return replaceWithFrom(u, *y, c);
  }

  /// Step 3.
  bool cancel(Node *to) {
    Node *from = to->operand(0)->producer();
    if (!from || from->kind() != OpKind::FromNCHWc || to->getInt("axis", 1) != 1 ||
        from->getInt("axis", 1) != 1)
      return false;
    Value *blocked = from->operand(0);
    if (blocked->shape().back() != Dim(to->getInt("block", 0)) ||
        blocked->shape() != to->result()->shape())
      return false;
    g_->replaceAllUsesWith(to->result(), blocked);
    g_->eraseNode(to);
    addStat("transforms-cancelled", 2);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createLayoutNCHWcPass() {
  return std::make_unique<LayoutNCHWcPass>();
}

} // namespace nnc

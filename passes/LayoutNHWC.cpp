// Channels-last (NHWC) activations through the integer convs of a quantized graph: each
// conv_integer of group 1 reads and writes channels last (channels_last = 1), so its integer
// GEMM reads x's rows of C channels where they are (no per-conv copy into NHWC) and stores its
// requantized result in the GEMM's own [positions, channels] order (no transposed store), and
// a depthwise one runs vectorized along the channels (option `depthwise`, default 1); the
// ops between such convs (the requantizing epilogue, residual adds, dequantize, global pools)
// move into the layout, and transposes remain only at the region's edges, where an op that
// stays channels first (a depthwise conv, a flatten, an f32 consumer) reads the value.
//
// Algorithm (like layout-nchwc's, with transposes as the conversions):
//  1. Each conv_integer of group 1 (or depthwise: group == C == M) with static shapes, in
//     graph order, becomes
//       transpose{to first}(conv_integer{channels_last = 1}(transpose{to last}(x), ...))
//     (to last: perm [0, 2, ..., r-1, 1]; to first: its inverse). Step 2 runs after each.
//  2. Users of a to-first transpose's result move into channels last, their result converted
//     back by a new to-first transpose (worklist until nothing moves): elementwise ops, cast,
//     quantize and dequantize (numpy broadcasting, no axis attribute) whose operands are
//     to-first results of the user's result shape, single-element values, other constants
//     (unsqueezed to the result's rank and transposed to last; constant-fold folds both), or
//     other activations of the result's shape, transposed to last (one transpose either way:
//     of that operand, or of the user's result if it stayed); an operand that is the only use
//     of a dequantize or cast moves with it, so the transpose moves the narrower tensor (a
//     residual's u8 input, not its f32 dequantized value);
//     reduce_mean/reduce_max/reduce_sum over spatial axes with keepdims (the axes renumbered);
//     2-D max_pool (one result) and avg_pool, as 3-D windows over [N, 1, H, W, C] that are 1
//     wide on the channels (an unsqueeze and a squeeze around them: views).
//  3. transpose{to last}(transpose{to first}(v)) is v; dce removes the to-first transposes
//     left without users.
#include "PatternUtil.h"
#include "nnc/ir/NNGeometry.h"
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

/// True when `n` is a transpose by channelsPerm(rank, toLast).
bool isChannelsTranspose(const Node *n, bool toLast) {
  return n && n->kind() == OpKind::Transpose && n->numOperands() == 1 &&
         n->operand(0)->rank() >= 3 &&
         n->getInts("perm", {}) == channelsPerm(size_t(n->operand(0)->rank()), toLast);
}

class LayoutNHWCPass : public Pass {
public:
  std::string_view name() const override { return "layout-nhwc"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"depthwise"}));
    NNC_ASSIGN_OR_RETURN(int64_t dw, ctx.intOption(name(), "depthwise", 1, 0));
    depthwise_ = dw != 0;
    g_ = &g;
    bool changed = false;
    std::vector<Node *> convs;
    for (Node *n : g.nodes())
      if (n->kind() == OpKind::ConvInteger)
        convs.push_back(n);
    for (Node *conv : convs) {
      NNC_ASSIGN_OR_RETURN(Node * from, convertConv(conv));
      if (!from)
        continue;
      changed = true;
      NNC_TRY(pattern::propagateToUsers(g, from, [&](Node *u) { return moveToLast(u); }));
    }
    for (Node *n : g.nodes())
      if (isChannelsTranspose(n, /*toLast=*/true) && cancel(n))
        changed = true;
    for (Node *n : g.nodes())
      if (n->kind() == OpKind::Transpose && !isConstant(n->operand(0)) &&
          g.hasUses(n->result()) &&
          (isChannelsTranspose(n, true) || isChannelsTranspose(n, false)))
        addStat("transforms-live");
    return changed;
  }

private:
  Graph *g_ = nullptr;
  bool depthwise_ = true;

  /// A node before `before` (its result named `<name>_nhwc` when `name` is given).
  Expected<Value *> make(OpKind k, std::vector<Value *> ops, AttrMap attrs, Node *before,
                         const std::string &name = "") {
    std::vector<std::string> names;
    if (!name.empty())
      names.push_back(name + "_nhwc");
    NNC_ASSIGN_OR_RETURN(Node * n, g_->createInferred(k, std::move(ops), std::move(attrs),
                                                      before->name(), -1, names, before));
    return n->result();
  }

  Expected<Value *> transpose(Value *v, bool toLast, Node *before) {
    if (!isConstant(v))
      addStat("transforms-inserted");
    return make(OpKind::Transpose, {v}, {{"perm", channelsPerm(size_t(v->rank()), toLast)}},
                before);
  }

  /// A to-first transpose of `last` replacing every use of `old`; returns its node.
  Expected<Node *> replaceWithFirst(Node *old, Value *last) {
    NNC_ASSIGN_OR_RETURN(Value * back, transpose(last, /*toLast=*/false, old));
    std::string name = old->result()->name();
    g_->replaceAllUsesWith(old->result(), back);
    g_->eraseNode(old);
    g_->renameValue(back, name);
    return back->producer();
  }

  /// Step 1. Returns the to-first transpose after the new conv, or null when `conv` stays.
  Expected<Node *> convertConv(Node *conv) {
    Value *x = conv->operand(0);
    if (conv->numResults() != 1 || channelsLast(*conv) || x->rank() < 3 || !staticShape(x) ||
        !staticShape(conv->result()))
      return nullptr;
    int64_t group = conv->getInt("group", 1);
    bool depthwise = group > 1 && Dim(group) == x->shape()[1] &&
                     Dim(group) == conv->result()->shape()[1];
    if (group != 1 && !(depthwise && depthwise_))
      return nullptr;
    NNC_ASSIGN_OR_RETURN(Value * xl, transpose(x, /*toLast=*/true, conv));
    std::vector<Value *> ops = conv->operands();
    ops[0] = xl;
    AttrMap attrs = conv->attrs();
    attrs["channels_last"] = int64_t{1};
    Expected<Value *> y =
        make(OpKind::ConvInteger, ops, std::move(attrs), conv, conv->result()->name());
    if (!y)
      return y.takeError().withContext("layout-nhwc: conv_integer " + conv->name());
    addStat("convs-converted");
    return replaceWithFirst(conv, *y);
  }

  /// The channels-last form of operand `v` of a pointwise node whose result has the channels-
  /// first shape `shape`, or null when there is none.
  Expected<Value *> lastOperand(Value *v, const Shape &shape, Node *before) {
    if (!v)
      return nullptr;
    if (isChannelsTranspose(v->producer(), /*toLast=*/false))
      return v->shape() == shape ? v->producer()->operand(0) : nullptr;
    if (!staticShape(v) || v->rank() > int64_t(shape.size()))
      return nullptr;
    if (!isConstant(v)) {
      if (v->shape() != shape)
        return nullptr;
      Node *p = v->producer();
      if (p && (p->kind() == OpKind::Dequantize || p->kind() == OpKind::Cast) &&
          g_->users(v).size() == 1 && !g_->isOutput(v) && p->operand(0)->shape() == shape) {
        std::vector<Value *> ops = p->operands();
        bool scalars = true;
        for (size_t i = 1; i < ops.size(); ++i)
          scalars = scalars && ops[i] && isConstant(ops[i]) && ops[i]->rank() <= 1 &&
                    (ops[i]->rank() == 0 || ops[i]->shape()[0] == Dim(1));
        if (scalars) {
          NNC_ASSIGN_OR_RETURN(ops[0], transpose(ops[0], /*toLast=*/true, before));
          Expected<Value *> moved = make(p->kind(), ops, p->attrs(), before, v->name());
          if (moved) {
            addStat("nodes-moved");
            return *moved;
          }
        }
      }
      return transpose(v, /*toLast=*/true, before);
    }
    int64_t count = 1;
    for (const Dim &d : v->shape())
      count *= d.value();
    if (count == 1)
      return v; // broadcasts against any shape
    Value *r = v;
    if (v->rank() < int64_t(shape.size())) {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < int64_t(shape.size()) - v->rank(); ++i)
        axes.push_back(i);
      NNC_ASSIGN_OR_RETURN(r, make(OpKind::Unsqueeze, {v}, {{"axes", axes}}, before));
    }
    return transpose(r, /*toLast=*/true, before);
  }

  /// Step 2. Moves `u` into channels last; returns its new to-first transpose or null.
  Expected<Node *> moveToLast(Node *u) {
    if (u->numResults() != 1 || u->result()->rank() < 3 || !staticShape(u->result()))
      return nullptr;
    const Shape &shape = u->result()->shape();
    const size_t rank = shape.size();
    AttrMap attrs = u->attrs();
    std::vector<Value *> ops;
    const OpKind k = u->kind();
    if (u->info().elementwise || k == OpKind::Cast || k == OpKind::Quantize ||
        k == OpKind::Dequantize) {
      for (Value *v : u->operands()) {
        NNC_ASSIGN_OR_RETURN(Value * lv, lastOperand(v, shape, u));
        if (!lv)
          return nullptr; // an activation in another layout: u stays
        ops.push_back(lv);
      }
    } else if (k == OpKind::ReduceMean || k == OpKind::ReduceMax || k == OpKind::ReduceSum) {
      Node *p = u->operand(0)->producer();
      std::vector<int64_t> axes = u->getInts("axes", {});
      if (u->numOperands() != 1 || !isChannelsTranspose(p, false) ||
          u->getInt("keepdims", 1) != 1 || axes.empty())
        return nullptr;
      for (int64_t &a : axes) {
        a = a < 0 ? a + int64_t(rank) : a;
        if (a < 2 || a >= int64_t(rank))
          return nullptr; // the batch or the channels: u stays
        a -= 1;
      }
      attrs["axes"] = axes;
      ops.push_back(p->operand(0));
    } else if ((k == OpKind::MaxPool && u->numResults() == 1) || k == OpKind::AvgPool) {
      return movePool(u);
    } else {
      return nullptr;
    }
    Expected<Value *> y = make(k, ops, attrs, u, u->result()->name());
    if (!y) // a shape rule refused the channels-last form: leave u as it is
      return nullptr;
    addStat("nodes-moved");
    return replaceWithFirst(u, *y);
  }

  /// Step 2 for a pool `u` of rank 4.
  Expected<Node *> movePool(Node *u) {
    Node *p = u->operand(0)->producer();
    std::vector<int64_t> k = u->getInts("kernel_shape", {});
    if (!isChannelsTranspose(p, /*toLast=*/false) || u->result()->rank() != 4 || k.size() != 2)
      return nullptr;
    std::vector<int64_t> s = pattern::intsOr(*u, "strides", 2, 1),
                         d = pattern::intsOr(*u, "dilations", 2, 1),
                         pads = pattern::intsOr(*u, "pads", 4, 0);
    AttrMap attrs = u->attrs();
    attrs["kernel_shape"] = std::vector<int64_t>{k[0], k[1], 1};
    attrs["strides"] = std::vector<int64_t>{s[0], s[1], 1};
    attrs["dilations"] = std::vector<int64_t>{d[0], d[1], 1};
    if (u->hasAttr("pads"))
      attrs["pads"] = std::vector<int64_t>{pads[0], pads[1], 0, pads[2], pads[3], 0};
    const std::vector<int64_t> one{1};
    NNC_ASSIGN_OR_RETURN(Value * x5,
                         make(OpKind::Unsqueeze, {p->operand(0)}, {{"axes", one}}, u));
    Expected<Value *> y5 = make(u->kind(), {x5}, attrs, u);
    if (!y5) // a shape rule refused the 3-D form: u stays (the unsqueeze is left for dce)
      return nullptr;
    NNC_ASSIGN_OR_RETURN(Value * y, make(OpKind::Squeeze, {*y5}, {{"axes", one}}, u,
                                         u->result()->name()));
    addStat("nodes-moved");
    return replaceWithFirst(u, y);
  }

  /// Step 3.
  bool cancel(Node *toLast) {
    Node *first = toLast->operand(0)->producer();
    if (!isChannelsTranspose(first, /*toLast=*/false))
      return false;
    g_->replaceAllUsesWith(toLast->result(), first->operand(0));
    g_->eraseNode(toLast);
    addStat("transforms-cancelled", 2);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createLayoutNHWCPass() {
  return std::make_unique<LayoutNHWCPass>();
}

} // namespace nnc

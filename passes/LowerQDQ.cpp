// Runs the matmuls and convs of quantize/dequantize (Q/DQ) models on the integer kernels: a
// QAT export wraps each matmul and conv in dequantize ops (activations and constant int8
// weights) and quantizes its result, and everything between ran in f32.
//
// Algorithm (to a fixed point for steps 1, 2 and 2b, then one walk for steps 3 and 4):
//  1. A dequantize sinks below a data-movement op that commutes with it: y = op(DQ(x, s, z))
//     becomes DQ(op(x), s', z'), so x stays u8/i8 in memory from one op to the next. Reshape,
//     flatten, squeeze, unsqueeze, transpose, slice, gather, max_pool (its one result), concat
//     (every operand a DQ with the same scale and zero point) and nearest resize qualify. A
//     per-tensor s and z stay as they are; a per-axis one is only moved where the op does not
//     move data along its axis (s' = s; transpose, squeeze and unsqueeze apply themselves to
//     it, gather reshapes it to the result's rank). max_pool also needs a constant positive
//     scale (so DQ is increasing and commutes with max). Every such move is exact.
//  2. Q(DQ(x, s, z), s, z) is x when x is an 8- or 16-bit integer and s is a constant f32
//     scale in [FLT_MIN, 2^100]: DQ's product (x - z) * s is within an ulp of the real
//     value, and Q's quotient rounds back to x - z exactly for |x - z| < 2^16.
//  2b. Q(max(y, c), s, z) is max(Q(y, s, z), Q(c, s, z)) for a NaN-free y, constants c, s > 0
//     and z (min likewise): Q does not decrease, so it commutes with max and min. A Clip or
//     Relu between DQ(x, s, z) and Q(., s, z) becomes, with step 2, a clamp of x itself.
//  3. matmul(DQ(a, sa, za), DQ(b, sb, zb)) with u8/i8 a and b of rank >= 2, f32 results, and
//     scales and zero points constant along the reduction axis K becomes
//       mul(cast(matmul_integer(a, b, za, zb), f32), sa * sb)
//     (za a scalar or one per row of a, zb a scalar or one per column of b; a constant zero
//     point that is 0 is left out). The i32 sum is exact, so the result differs from the f32
//     path only by f32 rounding (fuse-epilogue runs the cast, the scale and what follows, down
//     to the next quantize, in the integer GEMM's output loop).
//  4. conv(DQ(x, sx, zx), DQ(w, sw, zw), bias?) with u8/i8 x and w, one sx and zx, and sw and
//     zw per output channel (axis 0) at most becomes
//       add(mul(cast(conv_integer(x, w, zx, zw), f32), sx * sw as [M, 1, ...]), bias as
//       [M, 1, ...]),
//     exact in the same way (conv_integer's padding adds nothing, as 0 does to the f32 conv).
// A matmul or conv that reads a dequantize (directly or through other ops) and is not
// rewritten keeps its f32 path and says why in its `qdq_fallback` attribute (ir/Quantize.h).
// Option convs=0 leaves every conv in f32 (step 4 off), for pipelines whose target has no
// integer conv kernel faster than its f32 convs.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "PatternUtil.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Quantize.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

/// A dequantize node's parts.
struct DQ {
  Node *node = nullptr;
  Value *x = nullptr, *scale = nullptr, *zp = nullptr;
  DType to = DType::F32;
};

std::optional<DQ> dqOf(const Value *v) {
  Node *n = v ? v->producer() : nullptr;
  if (!n || n->kind() != OpKind::Dequantize || n->numOperands() != 3 || !n->operand(2))
    return std::nullopt;
  return DQ{n, n->operand(0), n->operand(1), n->operand(2), n->getDType("to")};
}

const Tensor *constantOf(const Value *v) {
  Node *p = v ? v->producer() : nullptr;
  return p && p->kind() == OpKind::Constant ? &p->getTensor("value") : nullptr;
}

bool oneElement(const Value *v) {
  for (const Dim &d : v->shape())
    if (!d.isStatic() || d.value() != 1)
      return false;
  return true;
}

/// The same value, or constants of one dtype, shape and bits.
bool sameValue(const Value *a, const Value *b) {
  if (a == b)
    return true;
  const Tensor *ta = constantOf(a), *tb = constantOf(b);
  return ta && tb && ta->dtype() == tb->dtype() && ta->extents() == tb->extents() &&
         ta->bitwiseEqual(*tb);
}

/// `p`'s static extents padded with leading 1s to rank `r` (how it broadcasts against a value
/// of rank r); nullopt when not static or of a higher rank.
std::optional<Extents> fullExtents(const Value *p, int64_t r) {
  std::optional<Extents> e = staticExtents(p->shape());
  if (!e || static_cast<int64_t>(e->size()) > r)
    return std::nullopt;
  e->insert(e->begin(), r - e->size(), 1);
  return e;
}

/// True when the dequantize's scale and zero point have extent 1 on each of `axes` of its
/// operand (rank r): they do not vary along them.
bool uniformAlong(const DQ &d, int64_t r, const std::vector<int64_t> &axes) {
  for (const Value *p : {d.scale, d.zp}) {
    std::optional<Extents> e = fullExtents(p, r);
    if (!e)
      return false;
    for (int64_t a : axes)
      if (a < 0 || a >= r || (*e)[a] != 1)
        return false;
  }
  return true;
}

bool perTensor(const DQ &d) { return oneElement(d.scale) && oneElement(d.zp); }

/// The integer types whose dequantize the pass moves and cancels.
bool movableType(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::U16 || t == DType::I16;
}

/// A constant f32 scale whose every element q satisfies FLT_MIN <= |q| <= 2^100 (step 2's
/// exactness), and > 0 when `positive`.
bool boundedScale(const Value *s, bool positive) {
  const Tensor *t = constantOf(s);
  if (!t || t->dtype() != DType::F32)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i) {
    float q = t->data<float>()[i];
    if (!std::isfinite(q) || std::fabs(q) < FLT_MIN || std::fabs(q) > 0x1p100f ||
        (positive && q <= 0))
      return false;
  }
  return true;
}

/// Constant i64 vector operand `i` of `n`, if it is one.
std::optional<std::vector<int64_t>> intsOperand(const Node &n, size_t i) {
  const Tensor *t = n.operand(i) ? constantOf(n.operand(i)) : nullptr;
  if (!t || !isInteger(t->dtype()))
    return std::nullopt;
  return t->toInt64Vector();
}

Value *constant(Graph &g, Tensor t, Node *before, const std::string &name) {
  TensorType type = t.type();
  return g.createNode(OpKind::Constant, {}, {type}, {{"value", Attribute(std::move(t))}}, "",
                      {name}, before)
      ->result();
}

Value *i64Constant(Graph &g, const std::vector<int64_t> &v, Node *before,
                   const std::string &name) {
  return constant(g, Tensor::fromVector<int64_t>(DType::I64, {int64_t(v.size())}, v), before,
                  name);
}

/// How a dequantize's scale and zero point follow it below a data-movement op.
enum class ParamMove {
  Same,      ///< s' = s (the op leaves s's varying axes and the rank alone).
  Apply,     ///< s' = op(s at the operand's rank) with the op's attributes.
  GatherDims ///< s' = s at the operand's rank with the gather axis replaced by the indices'.
};

/// Why the dequantize(s) feeding data-movement op `n` cannot sink below it (empty: they can;
/// `move` says how the parameters follow). Not a data-movement op at all: "-".
std::string whyNotSink(const Node &n, ParamMove &move) {
  move = ParamMove::Same;
  if (n.numResults() != 1 || n.body() || n.hasAttr(kFusionGroupAttr))
    return "-";
  std::optional<DQ> d = dqOf(n.operand(0));
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
  case OpKind::Slice:
  case OpKind::Gather:
  case OpKind::MaxPool:
  case OpKind::Concat:
  case OpKind::Resize: break;
  default: return "-";
  }
  if (!d)
    return "-";
  if (!movableType(d->x->dtype()))
    return fmt::format("its operand is dequantized from {}", dtypeName(d->x->dtype()));
  int64_t r = d->x->rank();
  bool whole = perTensor(*d);
  if (whole && std::max(d->scale->rank(), d->zp->rank()) > n.result()->rank())
    return "its one-element scale or zero point has a higher rank than the result";
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
    return whole ? "" : "it reshapes a per-axis quantized tensor";
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
    if (whole)
      return "";
    if (!fullExtents(d->scale, r) || !fullExtents(d->zp, r))
      return "the scale's or zero point's shape is not static";
    move = ParamMove::Apply;
    return "";
  case OpKind::Slice: {
    if (whole)
      return "";
    std::optional<std::vector<int64_t>> axes = intsOperand(n, 3);
    if (!n.operand(3)) {
      std::optional<Extents> starts = staticExtents(n.operand(1)->shape());
      if (!starts || starts->size() != 1)
        return "its starts have no static length";
      axes = std::vector<int64_t>();
      for (int64_t a = 0; a < (*starts)[0]; ++a)
        axes->push_back(a);
    }
    if (!axes)
      return "its axes are not constant";
    for (int64_t &a : *axes)
      a = a < 0 ? a + r : a;
    return uniformAlong(*d, r, *axes) ? "" : "it slices along the quantization axis";
  }
  case OpKind::Gather: {
    int64_t a = n.getInt("axis");
    a = a < 0 ? a + r : a;
    if (whole)
      return "";
    if (!uniformAlong(*d, r, {a}))
      return "it gathers along the quantization axis";
    move = n.operand(1)->rank() == 1 ? ParamMove::Same : ParamMove::GatherDims;
    return "";
  }
  case OpKind::MaxPool: {
    if (!boundedScale(d->scale, /*positive=*/true))
      return "its scale is not a constant positive one (max commutes with an increasing map "
             "only)";
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a < r; ++a)
      spatial.push_back(a);
    return whole || uniformAlong(*d, r, spatial) ? ""
                                                 : "it pools along the quantization axis";
  }
  case OpKind::Resize: {
    if (n.getString("mode") != "nearest")
      return fmt::format("it is a {} resize (only nearest picks input elements)",
                         n.getString("mode"));
    if (n.getString("coordinate_transformation_mode") == "tf_crop_and_resize")
      return "tf_crop_and_resize extrapolates";
    if (whole)
      return "";
    // A per-axis parameter is kept along axes the resize does not scale (a constant scale of
    // exactly 1 maps each output coordinate to the same input coordinate).
    std::optional<std::vector<int64_t>> axes;
    const Tensor *scales = n.operand(2) ? constantOf(n.operand(2)) : nullptr;
    if (!scales || n.operand(3) || !isFloat(scales->dtype()))
      return "it resizes a per-axis quantized tensor by sizes or non-constant scales";
    std::vector<int64_t> listed = n.getInts("axes", {});
    if (listed.empty())
      for (int64_t a = 0; a < r; ++a)
        listed.push_back(a);
    std::vector<int64_t> scaled;
    for (size_t i = 0; i < listed.size() && i < size_t(scales->numElements()); ++i)
      if (scales->elementAsDouble(int64_t(i)) != 1.0)
        scaled.push_back(listed[i] < 0 ? listed[i] + r : listed[i]);
    return uniformAlong(*d, r, scaled) ? "" : "it resizes along the quantization axis";
  }
  case OpKind::Concat: {
    for (size_t i = 1; i < n.numOperands(); ++i) {
      std::optional<DQ> o = dqOf(n.operand(i));
      if (!o)
        return fmt::format("its operand {} is not dequantized", i);
      if (o->x->dtype() != d->x->dtype() || o->to != d->to || !sameValue(o->scale, d->scale) ||
          !sameValue(o->zp, d->zp))
        return fmt::format("its operand {} has another scale, zero point or type", i);
    }
    int64_t a = n.getInt("axis");
    a = a < 0 ? a + r : a;
    return whole || uniformAlong(*d, r, {a}) ? "" : "it concatenates along the quantization axis";
  }
  default: return "-";
  }
}

/// `p` at rank r: unsqueezed at the front.
Expected<Value *> atRank(Graph &g, Value *p, int64_t r, Node *before) {
  if (p->rank() == r)
    return p;
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < r - p->rank(); ++a)
    axes.push_back(a);
  NNC_ASSIGN_OR_RETURN(Node * u, g.createInferred(OpKind::Unsqueeze, {p}, {{"axes", axes}}, "",
                                                  -1, {p->name() + "_r"}, before));
  return u->result();
}

/// `n`'s result, as a constant when its operands are constants and the context can evaluate
/// it (a moved scale or zero point stays a constant that later steps can read), inserted
/// before `before`.
Value *folded(Graph &g, Node *n, const PassContext &ctx, Node *before) {
  if (!ctx.evaluate)
    return n->result();
  std::vector<Tensor> ops;
  for (Value *o : n->operands()) {
    const Tensor *t = constantOf(o);
    if (!t)
      return n->result();
    ops.push_back(*t);
  }
  Expected<std::vector<Tensor>> r = ctx.evaluate(*n, ops);
  if (!r || r->size() != 1)
    return n->result();
  std::string name = n->result()->name();
  g.eraseNode(n);
  return constant(g, std::move((*r)[0]), before, name);
}

/// Step 1: op(DQ(x, s, z)) -> DQ(op(x), s', z').
Expected<bool> sink(Graph &g, Node *n, const PassContext &ctx) {
  ParamMove move;
  if (!whyNotSink(*n, move).empty())
    return false;
  DQ d = *dqOf(n->operand(0));
  int64_t r = d.x->rank();
  std::vector<Value *> ops = n->operands();
  ops[0] = d.x;
  if (n->kind() == OpKind::Concat)
    for (size_t i = 1; i < ops.size(); ++i)
      ops[i] = dqOf(ops[i])->x;
  Value *s = d.scale, *z = d.zp;
  if (move == ParamMove::Apply) {
    AttrMap attrs = n->attrs();
    if (n->kind() == OpKind::Squeeze && n->getInts("axes").empty()) {
      // Squeeze's default (every size-1 axis of x) would also drop s's other size-1 axes.
      std::vector<int64_t> axes;
      for (int64_t a = 0; a < r; ++a)
        if (d.x->shape()[a].isStatic() && d.x->shape()[a].value() == 1)
          axes.push_back(a);
      attrs["axes"] = axes;
    }
    for (Value **p : {&s, &z}) {
      NNC_ASSIGN_OR_RETURN(Value * full, atRank(g, *p, r, n));
      if (full != *p)
        full = folded(g, full->producer(), ctx, n);
      NNC_ASSIGN_OR_RETURN(Node * m, g.createInferred(n->kind(), {full}, attrs, "", -1,
                                                      {(*p)->name() + "_m"}, n));
      *p = folded(g, m, ctx, n);
    }
  } else if (move == ParamMove::GatherDims) {
    int64_t a = n->getInt("axis");
    a = a < 0 ? a + r : a;
    for (Value **p : {&s, &z}) {
      Extents e = *fullExtents(*p, r);
      std::vector<int64_t> shape(e.begin(), e.begin() + a);
      shape.insert(shape.end(), n->operand(1)->rank(), 1);
      shape.insert(shape.end(), e.begin() + a + 1, e.end());
      NNC_ASSIGN_OR_RETURN(Node * m,
                           g.createInferred(OpKind::Reshape,
                                            {*p, i64Constant(g, shape, n, (*p)->name() + "_shape")},
                                            {}, "", -1, {(*p)->name() + "_m"}, n));
      *p = folded(g, m, ctx, n);
    }
  }
  Expected<Node *> moved = g.createInferred(n->kind(), ops, n->attrs(), n->name(), 1,
                                            {n->result()->name() + "_q"}, n);
  if (!moved)
    return false; // the op does not take the integer type: the dequantize stays
  NNC_ASSIGN_OR_RETURN(Node * dq, g.createInferred(OpKind::Dequantize, {(*moved)->result(), s, z},
                                                   {{"to", d.to}}, d.node->name(), 1, {}, n));
  if (dq->result()->type() != n->result()->type()) {
    // Not expected for the ops above; the dequantize then stays where it was.
    g.eraseNode(dq);
    g.eraseNode(*moved);
    return false;
  }
  pattern::replaceChain(g, {n}, n->result(), dq);
  return true;
}

/// Step 2: Q(DQ(x, s, z), s, z) -> x.
bool cancel(Graph &g, Node *q) {
  if (q->kind() != OpKind::Quantize)
    return false;
  std::optional<DQ> d = dqOf(q->operand(0));
  if (!d || !movableType(d->x->dtype()) || d->to != DType::F32 ||
      q->result()->dtype() != d->x->dtype() || !sameValue(q->operand(1), d->scale) ||
      !sameValue(q->operand(2), d->zp) || !boundedScale(d->scale, /*positive=*/false))
    return false;
  // A graph output keeps its name: x takes it, unless x is a graph input or output itself.
  bool output = g.isOutput(q->result());
  if (output && (d->x->isGraphInput() || g.isOutput(d->x)))
    return false;
  std::string name = q->result()->name();
  g.replaceAllUsesWith(q->result(), d->x);
  g.eraseNode(q);
  if (output)
    g.renameValue(d->x, name);
  return true;
}

/// True when `v` is never NaN: a dequantize of an integer with a bounded constant scale, or a
/// max or min of such a value and a non-NaN constant.
bool nanFree(const Value *v, int depth = 0) {
  const Node *p = v ? v->producer() : nullptr;
  if (!p || depth > 8)
    return false;
  if (std::optional<DQ> d = dqOf(v))
    return movableType(d->x->dtype()) && boundedScale(d->scale, /*positive=*/false);
  if ((p->kind() != OpKind::Max && p->kind() != OpKind::Min) || p->numOperands() != 2)
    return false;
  for (int i = 0; i < 2; ++i)
    if (const Tensor *c = constantOf(p->operand(i))) {
      for (int64_t e = 0; e < c->numElements(); ++e)
        if (std::isnan(c->elementAsDouble(e)))
          return false;
      return nanFree(p->operand(1 - i), depth + 1);
    }
  return false;
}

/// Step 2b: Q(max(y, c), s, z) -> max(Q(y, s, z), Q(c, s, z)), and min likewise, for a
/// constant c, a constant positive scale s, a constant z and a NaN-free y (a clamp between a
/// dequantize and a quantize: Clip and Relu). Q is non-decreasing in its operand then, and a
/// non-decreasing map commutes with max and min exactly; Q(c) is folded by the evaluator, so
/// it is the same integer the quantize would give. With step 2 a ReLU6 between DQ(x, s, z) and
/// Q(., s, z) becomes a clamp of x in its own integer type.
bool quantizeBeforeClamp(Graph &g, Node *q, const PassContext &ctx) {
  if (q->kind() != OpKind::Quantize || !ctx.evaluate || !movableType(q->result()->dtype()) ||
      !boundedScale(q->operand(1), /*positive=*/true) || !constantOf(q->operand(2)))
    return false;
  Node *m = q->operand(0)->producer();
  if (!m || (m->kind() != OpKind::Max && m->kind() != OpKind::Min) || m->numOperands() != 2 ||
      !nanFree(m->result()))
    return false;
  int ci = constantOf(m->operand(0)) ? 0 : 1;
  Value *c = m->operand(ci), *y = m->operand(1 - ci);
  if (!constantOf(c) || constantOf(y))
    return false;
  // Whatever does not come out as expected leaves the graph as it was (dead nodes aside, which
  // dce removes): the rewrite is an optimization, never a reason to refuse the model.
  std::vector<Node *> made;
  auto undo = [&] {
    for (auto it = made.rbegin(); it != made.rend(); ++it)
      g.eraseNode(*it);
    return false;
  };
  auto quantize = [&](Value *x, const std::string &name) -> Node * {
    Expected<Node *> n = g.createInferred(OpKind::Quantize, {x, q->operand(1), q->operand(2)},
                                          q->attrs(), q->name(), 1, {name}, q);
    if (!n)
      return nullptr;
    made.push_back(*n);
    return *n;
  };
  Node *qc = quantize(c, c->name() + "_q");
  if (!qc)
    return undo();
  Value *qcv = folded(g, qc, ctx, q);
  if (qcv != qc->result())
    made.pop_back(); // folded into a constant
  Node *qy = constantOf(qcv) ? quantize(y, y->name() + "_q") : nullptr;
  if (!qy)
    return undo();
  Expected<Node *> r = g.createInferred(m->kind(),
                                        ci == 0 ? std::vector<Value *>{qcv, qy->result()}
                                                : std::vector<Value *>{qy->result(), qcv},
                                        {}, m->name(), 1, {}, q);
  if (!r)
    return undo();
  if ((*r)->result()->type() != q->result()->type()) {
    g.eraseNode(*r);
    return undo();
  }
  pattern::replaceChain(g, {q}, q->result(), *r);
  return true;
}

/// The zero point of operand `which` (rank r) of an integer matmul or conv: absent (a constant
/// 0), a scalar, or one value per entry of axis `keep` (A's rows, B's columns, a conv weight's
/// output channels; -1: none) as a 1-D tensor; empty `why` on success.
struct ZeroPoint {
  Value *value = nullptr;
  std::string why;
};

ZeroPoint zeroPointAlong(Graph &g, const DQ &d, int which, int64_t r, int64_t keep,
                         const char *per, Node *before) {
  ZeroPoint out;
  std::optional<Extents> e = fullExtents(d.zp, r);
  if (!e) {
    out.why = fmt::format("operand {}'s zero point has no static shape", which);
    return out;
  }
  if (const Tensor *t = constantOf(d.zp)) {
    bool equal = true, zero = true;
    size_t bytes = dtypeSize(t->dtype());
    const char *raw = static_cast<const char *>(t->rawData());
    for (int64_t i = 0; i < t->numElements(); ++i) {
      equal = equal && std::memcmp(raw, raw + i * bytes, bytes) == 0;
      zero = zero && t->elementAsInt(i) == 0;
    }
    if (zero)
      return out;
    if (equal && t->rank() == 0) {
      out.value = d.zp;
      return out;
    }
    if (equal) {
      Tensor one = Tensor::zeros(t->dtype(), {});
      std::memcpy(one.rawData(), raw, bytes);
      out.value = constant(g, one, before, d.zp->name() + "_scalar");
      return out;
    }
  }
  // One element, or one per `keep` axis entry.
  for (int64_t a = 0; a < r; ++a)
    if (a != keep && (*e)[a] != 1) {
      out.why = fmt::format("operand {}'s zero point varies along axis {} (the integer kernel "
                            "takes one per {})",
                            which, a, per);
      return out;
    }
  std::vector<int64_t> shape;
  if (keep >= 0 && (*e)[keep] != 1)
    shape.push_back((*e)[keep]);
  Expected<Node *> m = g.createInferred(
      OpKind::Reshape, {d.zp, i64Constant(g, shape, before, d.zp->name() + "_shape")}, {}, "", -1,
      {d.zp->name() + "_v"}, before);
  if (!m) {
    out.why = m.takeError().message();
    return out;
  }
  out.value = (*m)->result();
  return out;
}

/// Why operand `i` of an anchor is not a dequantize the rewrite can use: not dequantized, or
/// dequantized behind an op that the dequantize could not sink below.
std::string whyNotDequantized(const Graph &g, const Node &anchor, size_t i) {
  const Value *v = anchor.operand(i);
  for (int depth = 0; v && v->producer() && depth < 16; ++depth) {
    const Node &p = *v->producer();
    if (p.kind() == OpKind::Dequantize)
      return "";
    ParamMove move;
    std::string why = whyNotSink(p, move);
    if (why != "-" && !why.empty())
      return fmt::format("operand {} is dequantized before {}, and the dequantize stays above "
                         "it: {}",
                         i, p.describe(), why);
    // Follow the one non-constant operand of a single-input op.
    const Value *next = nullptr;
    int inputs = 0;
    for (const Value *o : p.operands())
      if (o && !constantOf(o)) {
        next = o;
        ++inputs;
      }
    if (inputs != 1) {
      for (const Value *o : p.operands())
        if (dqOf(o))
          return fmt::format("operand {} is dequantized before {}, which the dequantize "
                             "does not move past",
                             i, p.describe());
      break;
    }
    if (dqOf(next))
      return fmt::format("operand {} is dequantized before {}, which the dequantize does not "
                         "move past",
                         i, p.describe());
    v = next;
  }
  return fmt::format("operand {} is not dequantized (a float activation or weight)", i);
}

/// True when some operand of `anchor` is a dequantize or reaches one through single-input ops.
bool readsDequantize(const Node &anchor) {
  for (const Value *v : anchor.operands()) {
    for (int depth = 0; v && v->producer() && depth < 16; ++depth) {
      const Node &p = *v->producer();
      if (p.kind() == OpKind::Dequantize)
        return true;
      const Value *next = nullptr;
      int inputs = 0;
      for (const Value *o : p.operands())
        if (o && !constantOf(o)) {
          next = o;
          ++inputs;
        }
      if (inputs != 1)
        break;
      v = next;
    }
  }
  return false;
}

class LowerQDQPass : public Pass {
public:
  std::string_view name() const override { return "lower-qdq"; }

  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"convs"}));
    NNC_ASSIGN_OR_RETURN(int64_t convs, ctx.intOption(name(), "convs", 1, 0));
    bool changed = false;
    Error failed = Error::success();
    int64_t moves = pattern::matchToFixedPoint(g, [&](Node *n) {
      if (failed)
        return false;
      if (cancel(g, n)) {
        addStat("qdq-cancelled");
        return true;
      }
      if (quantizeBeforeClamp(g, n, ctx)) {
        addStat("clamp-quantized");
        return true;
      }
      Expected<bool> s = sink(g, n, ctx);
      if (!s) {
        failed = s.takeError();
        return false;
      }
      if (*s)
        addStat("dequantize-sunk");
      return *s;
    });
    NNC_TRY(std::move(failed));
    changed = moves > 0;
    for (Node *n : g.nodes()) {
      bool mm = n->kind() == OpKind::MatMul && !n->hasAttr("packed_n");
      if ((!mm && n->kind() != OpKind::Conv) || !readsDequantize(*n))
        continue;
      NNC_ASSIGN_OR_RETURN(std::string why, mm ? rewriteMatMul(g, n) : rewriteConv(g, n, convs));
      if (why.empty()) {
        addStat(mm ? "matmuls-integer" : "convs-integer");
      } else {
        n->setAttr(kQdqFallbackAttr, Attribute(why));
        addStat(mm ? "matmuls-fp32-fallback" : "convs-fp32-fallback");
      }
      changed = true;
    }
    return changed;
  }

private:
  /// Step 4; the reason it does not apply (the graph unchanged) or "" after rewriting.
  Expected<std::string> rewriteConv(Graph &g, Node *conv, bool enabled) {
    for (size_t i = 0; i < 2; ++i) {
      std::string why = whyNotDequantized(g, *conv, i);
      if (!why.empty())
        return why;
    }
    if (!enabled)
      return std::string("integer convs are off in this pipeline (lower-qdq{convs=0})");
    DQ dx = *dqOf(conv->operand(0)), dw = *dqOf(conv->operand(1));
    for (int i = 0; i < 2; ++i) {
      const DQ &d = i == 0 ? dx : dw;
      DType t = d.x->dtype();
      if (t != DType::U8 && t != DType::I8)
        return fmt::format("operand {} is dequantized from {}; the integer conv takes u8 or i8",
                           i, dtypeName(t));
      if (d.to != DType::F32 || d.scale->dtype() != DType::F32)
        return fmt::format("operand {} is dequantized to {} with a {} scale, not f32", i,
                           dtypeName(d.to), dtypeName(d.scale->dtype()));
    }
    Value *y0 = conv->result();
    int64_t r = dw.x->rank();
    if (y0->dtype() != DType::F32 || r < 3 || dx.x->rank() != r)
      return std::string("the conv is not an f32 conv of rank >= 3");
    // x: one scale and zero point (conv_integer takes one x zero point; a per-channel x scale
    // would vary along the reduction).
    if (!oneElement(dx.scale) || !oneElement(dx.zp))
      return std::string("operand 0's scale or zero point is per-axis; the integer conv takes "
                         "one for x");
    // w: per output channel (axis 0) at most.
    std::vector<int64_t> inner;
    for (int64_t a = 1; a < r; ++a)
      inner.push_back(a);
    if (!uniformAlong(dw, r, inner))
      return std::string("operand 1's scale or zero point varies along an axis other than the "
                         "output channels (axis 0), or has no static shape");
    ZeroPoint zx = zeroPointAlong(g, dx, 0, r, -1, "tensor", conv);
    if (!zx.why.empty())
      return zx.why;
    ZeroPoint zw = zeroPointAlong(g, dw, 1, r, 0, "output channel", conv);
    if (!zw.why.empty())
      return zw.why;
    std::vector<Value *> ops = {dx.x, dw.x};
    if (zx.value || zw.value) {
      ops.push_back(zx.value);
      if (zw.value)
        ops.push_back(zw.value);
    }
    AttrMap attrs;
    for (const char *a : {"strides", "pads", "dilations", "group", "auto_pad"})
      if (const Attribute *v = conv->attr(a))
        attrs[a] = *v;
    const std::string &res = y0->name();
    NNC_ASSIGN_OR_RETURN(Node * ci, g.createInferred(OpKind::ConvInteger, ops, attrs,
                                                     conv->name(), 1, {res + "_i32"}, conv));
    NNC_ASSIGN_OR_RETURN(Node * f, g.createInferred(OpKind::Cast, {ci->result()},
                                                    {{"to", DType::F32}}, conv->name(), 1,
                                                    {res + "_f32"}, conv));
    // The scales as [M, 1, ...] (or one element) against the result [N, M, spatial...].
    std::vector<int64_t> perChannel(r - 1, 1);
    Value *sw = dw.scale;
    if (!oneElement(sw)) {
      perChannel[0] = (*fullExtents(sw, r))[0];
      NNC_ASSIGN_OR_RETURN(Node * m,
                           g.createInferred(OpKind::Reshape,
                                            {sw, i64Constant(g, perChannel, conv,
                                                             sw->name() + "_shape")},
                                            {}, "", -1, {sw->name() + "_c"}, conv));
      sw = m->result();
    }
    NNC_ASSIGN_OR_RETURN(Node * scale, g.createInferred(OpKind::Mul, {dx.scale, sw}, {},
                                                        conv->name(), 1, {res + "_scale"}, conv));
    NNC_ASSIGN_OR_RETURN(Node * y, g.createInferred(OpKind::Mul, {f->result(), scale->result()},
                                                    {}, conv->name(), 1, {}, conv));
    if (Value *bias = conv->operand(2)) {
      std::vector<int64_t> bshape(r - 1, 1);
      std::optional<Extents> be = staticExtents(bias->shape());
      if (!be || be->size() != 1)
        return std::string("the bias has no static 1-D shape");
      bshape[0] = (*be)[0];
      NNC_ASSIGN_OR_RETURN(Node * b, g.createInferred(OpKind::Reshape,
                                                      {bias, i64Constant(g, bshape, conv,
                                                                         res + "_bias_shape")},
                                                      {}, conv->name(), 1, {res + "_bias"}, conv));
      NNC_ASSIGN_OR_RETURN(y, g.createInferred(OpKind::Add, {y->result(), b->result()}, {},
                                               conv->name(), 1, {}, conv));
    }
    if (y->result()->type() != y0->type()) {
      std::string why = fmt::format("the scales give the result type {}, not {}",
                                    y->result()->type().str(), y0->type().str());
      // Everything made above is unused: dce removes it.
      return why;
    }
    pattern::replaceChain(g, {conv}, y0, y);
    return std::string();
  }

  /// Step 3; the reason it does not apply (the graph unchanged) or "" after rewriting.
  Expected<std::string> rewriteMatMul(Graph &g, Node *mm) {
    for (size_t i = 0; i < 2; ++i) {
      std::string why = whyNotDequantized(g, *mm, i);
      if (!why.empty())
        return why;
    }
    DQ da = *dqOf(mm->operand(0)), db = *dqOf(mm->operand(1));
    int64_t ra = da.x->rank(), rb = db.x->rank();
    for (int i = 0; i < 2; ++i) {
      const DQ &d = i == 0 ? da : db;
      DType t = d.x->dtype();
      if (t != DType::U8 && t != DType::I8)
        return fmt::format("operand {} is dequantized from {}; the integer GEMM takes u8 or i8",
                           i, dtypeName(t));
      if (d.to != DType::F32 || d.scale->dtype() != DType::F32)
        return fmt::format("operand {} is dequantized to {} with a {} scale, not f32", i,
                           dtypeName(d.to), dtypeName(d.scale->dtype()));
      if (d.x->rank() < 2)
        return fmt::format("operand {} is 1-D", i);
    }
    if (mm->result()->dtype() != DType::F32)
      return std::string("the result is not f32");
    // The scales and zero points must not vary along K: A's last axis, B's second-to-last.
    if (!uniformAlong(da, ra, {ra - 1}))
      return std::string("operand 0's scale or zero point varies along the reduction axis K "
                         "(or has no static shape)");
    if (!uniformAlong(db, rb, {rb - 2}))
      return std::string("operand 1's scale or zero point varies along the reduction axis K "
                         "(per-axis along axis 0 of a [K, N] weight; the integer GEMM needs it "
                         "per output column)");
    // Zero points first: they may refuse, and then nothing is left behind but dead constants.
    ZeroPoint za = zeroPointAlong(g, da, 0, ra, ra - 2, "row", mm);
    if (!za.why.empty())
      return za.why;
    ZeroPoint zb = zeroPointAlong(g, db, 1, rb, rb - 1, "column", mm);
    if (!zb.why.empty())
      return zb.why;
    std::vector<Value *> ops = {da.x, db.x};
    if (za.value || zb.value) {
      ops.push_back(za.value);
      if (zb.value)
        ops.push_back(zb.value);
    }
    const std::string &res = mm->result()->name();
    NNC_ASSIGN_OR_RETURN(Node * mi, g.createInferred(OpKind::MatMulInteger, ops, {}, mm->name(),
                                                     1, {res + "_i32"}, mm));
    NNC_ASSIGN_OR_RETURN(Node * f, g.createInferred(OpKind::Cast, {mi->result()},
                                                    {{"to", DType::F32}}, mm->name(), 1,
                                                    {res + "_f32"}, mm));
    NNC_ASSIGN_OR_RETURN(Node * scale, g.createInferred(OpKind::Mul, {da.scale, db.scale}, {},
                                                        mm->name(), 1, {res + "_scale"}, mm));
    NNC_ASSIGN_OR_RETURN(Node * y, g.createInferred(OpKind::Mul, {f->result(), scale->result()},
                                                    {}, mm->name(), 1, {}, mm));
    if (y->result()->type() != mm->result()->type()) {
      std::string why = fmt::format("the scales give the result type {}, not {}",
                                    y->result()->type().str(), mm->result()->type().str());
      for (Node *n : {y, scale, f, mi})
        g.eraseNode(n);
      return why;
    }
    pattern::replaceChain(g, {mm}, mm->result(), y);
    return std::string();
  }
};

} // namespace

std::unique_ptr<Pass> createLowerQDQPass() { return std::make_unique<LowerQDQPass>(); }

} // namespace nnc

// Lowerers of the elementwise ops (every NNC_ELEMENTWISE entry of Ops.def, numpy
// broadcasting), of `cast`, `quantize` and `dequantize`: one kernel, one loop nest over the
// (collapsed) output; and the scalar formula of each (pointwiseExpr), which fused groups share.
#include <cmath>
#include <optional>

#include "LowerUtil.h"
#include "Lowerers.h"
#include "nnc/ir/Quantize.h"

namespace nnc::lower {

namespace {

/// Operand `i` of `n` as an immediate when it is a one-element constant (exactImmediate),
/// else `loaded`: a quantize's or dequantize's per-tensor scale and zero point, whose known
/// values let the kernel expansion drop guards (a product of known ranges is never NaN).
kir::Expr immediateOr(const Node &n, size_t i, const kir::Expr &loaded) {
  kir::Expr c = exactImmediate(n.constantOperand(i), loaded->type);
  return c ? c : loaded;
}

/// The value of an immediate (an integer one converted to a float included), else nothing.
std::optional<double> immediateValue(const kir::Expr &e) {
  if (e->kind == kir::ExprKind::FloatImm)
    return e->floatValue;
  if (e->kind == kir::ExprKind::IntImm && dtypeSize(e->type) <= 4)
    return static_cast<double>(e->intValue);
  if (e->kind == kir::ExprKind::Cast && isFloat(e->type))
    return immediateValue(e->args[0]);
  return std::nullopt;
}

/// An integer quantize's last step before its conversion: the whole number r (or NaN)
/// clamped to [lo, hi], NaN to lo. r > lo rather than r >= lo picks lo at r == lo, the same
/// number but for the sign of a zero, which the conversion drops; it is one max instruction
/// on x86, where r >= lo is a compare and a masked move.
kir::Expr clampQuantized(const kir::Expr &r, double lo, double hi) {
  kir::Expr flo = kir::constant(lo, r->type);
  kir::Expr v = kir::select(kir::op(OpKind::Greater, {r, flo}), r, flo);
  return kir::op(OpKind::Min, {v, kir::constant(hi, r->type)});
}

/// The parts of clampQuantized(r, lo, hi) (`e`), if it is one.
struct QuantizedClamp {
  kir::Expr r;
  double lo = 0, hi = 0;
};
std::optional<QuantizedClamp> matchClampQuantized(const kir::Expr &e) {
  using kir::ExprKind;
  if (e->kind != ExprKind::Op || e->op != OpKind::Min)
    return std::nullopt;
  const kir::Expr &sel = e->args[0];
  std::optional<double> hi = immediateValue(e->args[1]);
  if (!hi || sel->kind != ExprKind::Op || sel->op != OpKind::Select)
    return std::nullopt;
  const kir::Expr &cond = sel->args[0], &r = sel->args[1];
  std::optional<double> lo = immediateValue(sel->args[2]);
  if (!lo || cond->kind != ExprKind::Op || cond->op != OpKind::Greater || cond->args[0] != r ||
      cond->args[1] != sel->args[2])
    return std::nullopt;
  return QuantizedClamp{r, *lo, *hi};
}

/// (q - z) for q = clampQuantized(round(v) + z, lo, hi) converted to an integer type, and a
/// dequantize of it whose zero point is the same z: clampQuantized(round(v), lo - z, hi - z),
/// without adding z and subtracting it again (the shifted bounds are exact, and so is the
/// shift of a whole number below 2^24; beyond, both forms saturate alike). nullptr where `x`
/// is not such a quantized value.
kir::Expr shiftedQuantized(const kir::Expr &x, double z, DType w) {
  using kir::ExprKind;
  if (x->kind != ExprKind::Cast || z == 0 || x->args[0]->type != w)
    return nullptr;
  std::optional<QuantizedClamp> c = matchClampQuantized(x->args[0]);
  if (!c || c->r->kind != ExprKind::Op || c->r->op != OpKind::Add)
    return nullptr;
  const kir::Expr &r = c->r->args[0];
  std::optional<double> zq = immediateValue(c->r->args[1]);
  if (!zq || *zq != z || r->kind != ExprKind::Op || r->op != OpKind::Round)
    return nullptr;
  return clampQuantized(r, c->lo - z, c->hi - z);
}

/// max(q, k) or min(q, k) (either order) of an integer quantize's value q = cast(
/// clampQuantized(r, lo, hi)) and an immediate k: q with its clamp's bounds moved instead,
/// cast(clampQuantized(r, lo', hi')) with lo' = max(lo, k), hi' = max(hi, k) (min likewise),
/// since the conversion is monotone and keeps whole numbers within the type's range, where
/// lo and hi must lie; a NaN r still goes to lo'. A Clip or Relu that runs on a Q/DQ model's
/// quantized activations (relu6 on uint8 after the quantize, as the quantization pass places
/// it) then costs nothing. nullptr for anything else.
kir::Expr boundedQuantized(OpKind kind, const std::vector<kir::Expr> &a) {
  if ((kind != OpKind::Max && kind != OpKind::Min) || a.size() != 2)
    return nullptr;
  const bool castFirst = a[0]->kind == kir::ExprKind::Cast;
  const kir::Expr &q = castFirst ? a[0] : a[1], &kv = castFirst ? a[1] : a[0];
  int64_t tlo = 0, thi = 0;
  if (q->kind != kir::ExprKind::Cast || kv->type != q->type || !isInteger(q->type) ||
      !quantizedIntRange(q->type, tlo, thi))
    return nullptr;
  std::optional<double> k = immediateValue(kv);
  std::optional<QuantizedClamp> c = matchClampQuantized(q->args[0]);
  if (!k || !c || c->lo < double(tlo) || c->hi > double(thi) || c->lo > c->hi)
    return nullptr;
  auto bound = [&](double b) { return kind == OpKind::Max ? std::max(b, *k) : std::min(b, *k); };
  return kir::cast(clampQuantized(c->r, bound(c->lo), bound(c->hi)), q->type);
}

/// x / s for an f32 x and quantize `n`'s scale s when s is one constant f32 in [2^-100, 2^100],
/// without a division (a vector division takes 10-16 cycles; this, 4 operations): with
/// y = RN(1/s) folded, q = RN(x y), the remainder x - q s exact by one fma, and q' = RN(q + r y)
/// (Markstein's theorem: y within half an ulp of 1/s and q within an ulp of x/s give the
/// correctly rounded quotient). The theorem needs no underflow: q' can differ from x / s only
/// where |x / s| < 2^-26, which rounds to the same integer. Where |q| >= 2^20 (saturated at
/// any 8- or 16-bit range, or inf or NaN) q itself is used, as the remainder would overflow.
/// nullptr where the scale is not such a constant.
kir::Expr quotientByConstant(const Node &n, const kir::Expr &x) {
  const Tensor *st = n.constantOperand(1);
  if (x->type != DType::F32 || !st || st->dtype() != DType::F32 || st->numElements() != 1)
    return nullptr;
  float sv = st->data<float>()[0];
  if (!(std::fabs(sv) >= 0x1p-100f && std::fabs(sv) <= 0x1p100f))
    return nullptr;
  kir::Expr s = kir::constant(sv, DType::F32), y = kir::constant(1.0f / sv, DType::F32);
  kir::Expr qx = kir::strict(kir::op(OpKind::Mul, {x, y}));
  kir::Expr r = kir::fma(kir::op(OpKind::Neg, {qx}), s, x);
  kir::Expr fixed = kir::fma(r, y, qx);
  kir::Expr small = kir::lt(kir::op(OpKind::Abs, {qx}), kir::constant(0x1p20, DType::F32));
  return kir::select(small, fixed, qx);
}

/// quantize (Ops.def), as ONNX's reference computes it: x / scale in x's dtype (f16 and bf16
/// divide in f32 and round back, as numpy's half division does), then for an integer result
/// round half to even, add the zero point (exact in f32: beyond 2^24 the value saturates
/// anyway) and clamp, NaN going to the low end (a NaN compare is false). f8 results cast the
/// quotient with `saturate`; f4e2m1 adds the zero point first, as the reference does.
kir::Expr quantizeExpr(const Node &n, const std::vector<kir::Expr> &a) {
  DType t = a[0]->type, q = n.result(0)->dtype();
  DType w = t == DType::F64 ? DType::F64 : DType::F32;
  kir::Expr x = kir::cast(a[0], w), s = kir::cast(immediateOr(n, 1, a[1]), w);
  kir::Expr zp = immediateOr(n, 2, a[2]);
  int64_t lo = 0, hi = 0;
  bool toInt = quantizedIntRange(q, lo, hi);
  kir::Expr v = toInt ? quotientByConstant(n, x) : nullptr;
  if (!v)
    v = kir::strict(kir::op(OpKind::Div, {x, s}));
  if (t == DType::F16 || t == DType::BF16)
    v = kir::cast(kir::cast(v, t), w);
  if (toInt) {
    // A zero point known to be 0 adds nothing: round(v) + 0 differs from round(v) only at
    // -0, which the clamp sends to +0 like the sum.
    kir::Expr r = kir::op(OpKind::Round, {v});
    std::optional<double> z = immediateValue(zp);
    if (!z || *z != 0)
      r = kir::strict(kir::op(OpKind::Add, {r, kir::cast(zp, w)}));
    return kir::cast(clampQuantized(r, static_cast<double>(lo), static_cast<double>(hi)), q);
  }
  if (q == DType::F4E2M1)
    v = kir::strict(kir::op(OpKind::Add, {v, kir::cast(zp, w)}));
  return kir::cast(v, q, n.getInt("saturate", 1) != 0, "up");
}

/// dequantize (Ops.def): (x - zero_point) * scale in f32 (f64 for an f64 scale, and for i32
/// x, which the reference rounds to f32 and then subtracts in f64), one rounding to `to`.
/// The float formats' zero point is zero by the spec, and the reference ignores it.
kir::Expr dequantizeExpr(const Node &n, const std::vector<kir::Expr> &a) {
  DType xt = a[0]->type, to = n.result(0)->dtype();
  DType w = a[1]->type == DType::F64 || xt == DType::I32 ? DType::F64 : DType::F32;
  int64_t lo = 0, hi = 0;
  bool integer = xt == DType::I32 || quantizedIntRange(xt, lo, hi);
  kir::Expr x = xt == DType::I32 ? kir::cast(kir::cast(a[0], DType::F32), w) : kir::cast(a[0], w);
  kir::Expr zp = immediateOr(n, 2, a[2]), s = kir::cast(immediateOr(n, 1, a[1]), w);
  std::optional<double> z = immediateValue(zp);
  if (kir::Expr d = integer && z ? shiftedQuantized(a[0], *z, w) : nullptr) {
    // d is -0 where the rounded quotient is, and (q - z) is +0 there: d * s + 0 is the
    // product with +0 for its zero (one fma) where s > 0; otherwise d + 0 first.
    std::optional<double> sv = immediateValue(s);
    if (sv && *sv > 0)
      return kir::cast(kir::fma(d, s, kir::constant(0.0, w)), to);
    d = kir::strict(kir::op(OpKind::Add, {d, kir::constant(0.0, w)}));
    return kir::cast(kir::strict(kir::op(OpKind::Mul, {d, s})), to);
  }
  kir::Expr d = integer ? kir::strict(kir::op(OpKind::Sub, {x, kir::cast(zp, w)})) : x;
  return kir::cast(kir::strict(kir::op(OpKind::Mul, {d, s})), to);
}

/// One kernel: out0[i] = f(in0[bcast(i)], in1[bcast(i)], ...) over the result's extents.
/// With `valueTypes`, the buffers and loads have the values' own dtypes (storage-only ones
/// included: a byte per element, as the executable binds them) rather than movedType. The
/// result is in place over the operands that are not broadcast (read at i only).
Expected<std::vector<kir::Kernel>>
mapKernel(const Node &node, const std::string &prefix,
          const std::function<kir::Expr(const std::vector<kir::Expr> &)> &f,
          bool valueTypes = false) {
  KernelBuilder b(node, prefix);
  Extents out = extentsOf(node.result(0));
  std::vector<Extents> ins;
  for (size_t k = 0; k < node.numOperands(); ++k)
    ins.push_back(extentsOf(node.operand(k)));
  Collapsed c = collapse(out, ins);
  std::vector<int> bufs;
  for (size_t k = 0; k < ins.size(); ++k)
    bufs.push_back(b.operand(k));
  int ob = b.result(0);
  std::vector<std::string> loops;
  kir::Stmt body = b.loopNest(
      c.out,
      [&](const std::vector<kir::Expr> &idx) {
        std::vector<kir::Expr> args;
        for (size_t k = 0; k < ins.size(); ++k) {
          kir::Expr index = broadcastIndex(idx, c.in[k]);
          args.push_back(valueTypes ? kir::load(bufs[k], node.operand(k)->dtype(), index)
                                    : b.load(bufs[k], index));
        }
        return b.store(ob, flatIndex(idx, stridesOf(c.out)), f(args));
      },
      &loops);
  kir::Kernel k = b.finish(body, defaultSchedule(loops, c.out));
  for (size_t i = 0; i < ins.size(); ++i)
    if (c.in[i] == c.out)
      k.buffers[ob].inPlaceOver.push_back(bufs[i]);
  if (valueTypes) {
    for (size_t i = 0; i < ins.size(); ++i)
      k.buffers[bufs[i]].dtype = node.operand(i)->dtype();
    k.buffers[ob].dtype = node.result(0)->dtype();
  }
  return std::vector<kir::Kernel>{std::move(k)};
}

Expected<std::vector<kir::Kernel>> lowerElementwise(const Node &node, const std::string &prefix) {
  const OpInfo &info = node.info();
  if (static_cast<int>(node.numOperands()) != info.arity)
    return node.error("expects {} operands, got {}", info.arity, node.numOperands());
  for (size_t k = 0; k < node.numOperands(); ++k) {
    if (!node.operand(k))
      return node.error("operand {} is missing", k);
    DType t = node.operand(k)->dtype();
    bool ok = node.kind() == OpKind::Select && k == 0 ? t == DType::Bool
                                                      : typeClassAccepts(info.operandTypes, t);
    if (!ok || isStorageOnly(t))
      return node.error("operand {} has dtype {}, which code generation does not support", k,
                        dtypeName(t));
  }
  OpKind kind = node.kind();
  return mapKernel(node, prefix,
                   [kind](const std::vector<kir::Expr> &args) { return kir::op(kind, args); });
}

/// quantize and dequantize: storage-only dtypes (i4, f8, ...) included, as for cast.
Expected<std::vector<kir::Kernel>> lowerQuantizeOp(const Node &node, const std::string &prefix) {
  if (node.numOperands() != 3)
    return node.error("expects 3 operands, got {}", node.numOperands());
  for (size_t k = 0; k < 3; ++k)
    if (!node.operand(k))
      return node.error("operand {} is missing", k);
  return mapKernel(
      node, prefix, [&node](const std::vector<kir::Expr> &a) { return pointwiseExpr(node, a); },
      /*valueTypes=*/true);
}

/// Cast (ONNX rules, runtime/interp/Cast.cpp), storage-only dtypes included: their buffers
/// hold one byte per element and the kernel IR cast converts them with the node's `saturate`
/// (f8 targets) and `round_mode` (f8e8m0 target) options.
Expected<std::vector<kir::Kernel>> lowerCast(const Node &node, const std::string &prefix) {
  if (node.numOperands() != 1 || !node.operand(0))
    return node.error("expects 1 operand");
  DType from = node.operand(0)->dtype(), to = node.result(0)->dtype();
  if (from == to)
    return mapKernel(
        node, prefix, [](const std::vector<kir::Expr> &a) { return a[0]; },
        /*valueTypes=*/true);
  bool saturate = node.getInt("saturate", 1) != 0;
  std::string roundMode = node.getString("round_mode", "up");
  if (roundMode != "up" && roundMode != "down" && roundMode != "nearest")
    return node.error("round_mode must be up, down or nearest, got '{}'", roundMode);
  return mapKernel(
      node, prefix,
      [=](const std::vector<kir::Expr> &a) { return kir::cast(a[0], to, saturate, roundMode); },
      /*valueTypes=*/true);
}

} // namespace

kir::Expr pointwiseExpr(const Node &n, const std::vector<kir::Expr> &args) {
  switch (n.kind()) {
  case OpKind::Cast:
    return kir::cast(args[0], n.result(0)->dtype(), n.getInt("saturate", 1) != 0,
                     n.getString("round_mode", "up"));
  case OpKind::Quantize: return quantizeExpr(n, args);
  case OpKind::Dequantize: return dequantizeExpr(n, args);
  case OpKind::Max:
  case OpKind::Min:
    if (kir::Expr e = boundedQuantized(n.kind(), args))
      return e;
    return kir::op(n.kind(), args);
  default: return kir::op(n.kind(), args);
  }
}

void registerElementwiseLowerers(LowererTable &t) {
#define NNC_ELEMENTWISE(Id, ...) t[OpKind::Id] = lowerElementwise;
#include "nnc/ir/Ops.def"
  t[OpKind::Cast] = lowerCast;
  t[OpKind::Quantize] = lowerQuantizeOp;
  t[OpKind::Dequantize] = lowerQuantizeOp;
}

} // namespace nnc::lower

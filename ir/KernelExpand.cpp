// The expansion of composite scalar ops into primitives, once, before any backend (and the
// kernel evaluator) sees a kernel: after it the backends translate primitives only.
//
// Algorithm, per statement of the (scheduled) loop nest:
//  1. Expand each of the statement's expressions bottom-up (memoized by node, so a shared
//     operand stays shared): f16/bf16 operands are cast to f32 and the result cast back (the
//     value every backend computed before: f32 arithmetic, one rounding at the end); f32 exp,
//     sigmoid, tanh and erf are FastMath.h's templates instantiated with a builder that makes
//     kernel IR, and so is f32 pow; f64 exp, tanh, erf and pow are Calls of the math library; the
//     others are a few compares, selects, bit operations and a Rem. Integer pow by a non-constant
//     exponent adds statements (a loop over the exponent's bits) before the statement.
//  2. Bind every non-trivial node that the statement's expressions (and the added statements)
//     reach more than once to a Decl placed right before the first statement that uses it,
//     in dependency order. Expressions are DAGs but the backends walk trees; without this a
//     nested expansion (erf of exp of ...) would be emitted once per path, and the OpenCL
//     source would grow exponentially. Decls were chosen over memoizing in each backend so
//     that it is written once: the LLVM emitter promotes the locals to registers (the loop
//     vectorizer sees the same SSA values) and the OpenCL printer prints them as locals.
// Arithmetic the expansions create is `strict`: no backend contracts or reassociates it, so
// every backend computes the evaluator's numbers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "nnc/ir/FastMath.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/ScalarOps.h"

namespace nnc::kir {

bool isCompositeOp(OpKind k, DType t) {
  switch (k) {
  case OpKind::Sigmoid:
  case OpKind::Erf:
  case OpKind::Exp:
  case OpKind::Tanh:
  case OpKind::Pow:
  case OpKind::Mod:
  case OpKind::FMod:
  case OpKind::Sign:
  case OpKind::Reciprocal:
  case OpKind::IsNaN:
  case OpKind::IsInf:
  case OpKind::ShiftLeft:
  case OpKind::ShiftRight:
    return true;
  case OpKind::Div:
    return isInteger(t);
  case OpKind::Min:
  case OpKind::Max:
    return isFloat(t);
  default:
    return false;
  }
}

bool isComposite(const ExprNode &e) {
  if (e.kind == ExprKind::Op) {
    size_t typeArg = e.op == OpKind::Select ? 1 : 0;
    return e.args.size() > typeArg && isCompositeOp(e.op, e.args[typeArg]->type);
  }
  if (e.kind != ExprKind::Cast || e.args.size() != 1)
    return false;
  DType from = e.args[0]->type, to = e.type;
  bool decode = isStorageOnly(from) && to == storageCanonical(from);
  bool encode = isStorageOnly(to) && from == storageCanonical(to);
  return from != to && !decode && !encode;
}

namespace {

DType unsignedOf(DType t) {
  switch (t) {
  case DType::I8:
    return DType::U8;
  case DType::I16:
    return DType::U16;
  case DType::I32:
    return DType::U32;
  case DType::I64:
    return DType::U64;
  default:
    return t;
  }
}

/// What is known of a value: it is not NaN and lies in [lo, hi].
struct Range {
  double lo, hi;
};

/// True when `a` and `b` are the same expression, node by node (at most `budget` nodes
/// compared; beyond, false). Loads of one buffer and index are one value within a statement.
bool sameExpr(const Expr &a, const Expr &b, int &budget) {
  if (a == b)
    return true;
  if (--budget < 0 || a->kind != b->kind || a->type != b->type || a->intValue != b->intValue ||
      std::memcmp(&a->floatValue, &b->floatValue, sizeof(double)) != 0 || a->name != b->name ||
      a->buffer != b->buffer || a->op != b->op || a->strict != b->strict ||
      a->saturate != b->saturate || a->roundMode != b->roundMode ||
      a->args.size() != b->args.size())
    return false;
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!sameExpr(a->args[i], b->args[i], budget))
      return false;
  return true;
}

bool trivial(const Expr &e) {
  return e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm || e->kind == ExprKind::Var;
}

Expr strictOp(OpKind k, std::vector<Expr> args) {
  bool flt = isFloat(args[k == OpKind::Select ? 1 : 0]->type);
  Expr e = op(k, std::move(args));
  return flt ? strict(e) : e;
}
Expr eq(Expr a, Expr b) {
  return op(OpKind::Equal, {std::move(a), std::move(b)});
}
Expr gt(Expr a, Expr b) {
  return op(OpKind::Greater, {std::move(a), std::move(b)});
}
Expr lnot(Expr a) {
  return op(OpKind::Not, {std::move(a)});
}
Expr lor(Expr a, Expr b) {
  return op(OpKind::Or, {std::move(a), std::move(b)});
}
Expr lxor(Expr a, Expr b) {
  return op(OpKind::Xor, {std::move(a), std::move(b)});
}
Expr bitAnd(Expr a, Expr b) {
  return op(OpKind::BitAnd, {std::move(a), std::move(b)});
}
Expr bitOr(Expr a, Expr b) {
  return op(OpKind::BitOr, {std::move(a), std::move(b)});
}

/// FastMath.h's builder over the kernel IR: F an f32 expression, I a u32 one, M a bool one.
struct ExprMathBuilder {
  using F = Expr;
  using I = Expr;
  using M = Expr;
  F f(double v) { return floatImm(v, DType::F32); }
  I u(uint32_t v) { return intImm(v, DType::U32); }
  F add(F a, F b) { return strictOp(OpKind::Add, {a, b}); }
  F sub(F a, F b) { return strictOp(OpKind::Sub, {a, b}); }
  F mul(F a, F b) { return strictOp(OpKind::Mul, {a, b}); }
  F div(F a, F b) { return strictOp(OpKind::Div, {a, b}); }
  F neg(F a) { return strictOp(OpKind::Neg, {a}); }
  F abs(F a) { return op(OpKind::Abs, {a}); }
  F fma(F a, F b, F c) { return kir::fma(a, b, c); }
  M lt(F a, F b) { return kir::lt(a, b); }
  M gt(F a, F b) { return kir::op(OpKind::Greater, {a, b}); }
  F select(M m, F a, F b) { return kir::select(m, a, b); }
  I bits(F a) { return bitCast(a, DType::U32); }
  F fromBits(I a) { return bitCast(a, DType::F32); }
  I iadd(I a, I b) { return op(OpKind::Add, {a, b}); }
  I isub(I a, I b) { return op(OpKind::Sub, {a, b}); }
  I shl(I a, int n) { return kir::shl(a, intImm(n, DType::U32)); }
  M eq(F a, F b) { return kir::op(OpKind::Equal, {a, b}); }
  M mand(M a, M b) { return kir::op(OpKind::And, {a, b}); }
  M mor(M a, M b) { return kir::op(OpKind::Or, {a, b}); }
  M mnot(M a) { return kir::op(OpKind::Not, {a}); }
  F floor(F a) { return kir::op(OpKind::Floor, {a}); }
  I shr(I a, int n) { return kir::shr(a, intImm(n, DType::U32)); }
  I iand(I a, I b) { return op(OpKind::BitAnd, {a, b}); }
  I ior(I a, I b) { return op(OpKind::BitOr, {a, b}); }
};

class Expander {
public:
  explicit Expander(std::set<std::string> names) : names_(std::move(names)) {}

  /// `s` (a new node) with its children processed; statements that must precede it in its
  /// block are appended to `out` before it.
  void statement(const Stmt &s, std::vector<Stmt> &out) {
    if (!s) {
      out.push_back(s);
      return;
    }
    Stmt n = std::make_shared<StmtNode>(*s);
    switch (n->kind) {
    case StmtKind::Block: {
      std::vector<Stmt> body;
      for (const Stmt &c : n->body)
        statement(c, body);
      n->body = std::move(body);
      break;
    }
    case StmtKind::For: {
      // The loop variable's range, for the guards of the casts and divisions inside.
      std::optional<Range> outer;
      if (auto it = vars_.find(n->name); it != vars_.end())
        outer = it->second;
      vars_.erase(n->name);
      if (n->extent && n->extent->kind == ExprKind::IntImm && n->extent->intValue > 0)
        vars_[n->name] = Range{0, static_cast<double>(n->extent->intValue - 1)};
      for (Stmt &c : n->body)
        c = single(c);
      vars_.erase(n->name);
      if (outer)
        vars_[n->name] = *outer;
      break;
    }
    case StmtKind::If:
      for (Stmt &c : n->body)
        c = single(c);
      break;
    default:
      break;
    }
    // Step 1: expand the statement's own expressions.
    memo_.clear();
    ranges_.clear();
    integral_.clear();
    prelude_.clear();
    changed_ = false;
    // A NaN-ignoring max/min accumulation keeps its max/min (StmtNode::ignoresNaN: each
    // backend takes its target's instruction); its operands are expanded.
    bool keepOp = n->kind == StmtKind::Assign && n->ignoresNaN && n->value &&
                  n->value->kind == ExprKind::Op;
    for (Expr *slot : {&n->extent, &n->index, &n->value})
      if (*slot)
        *slot = keepOp && slot == &n->value
                    ? withArgs(*slot, [&](const Expr &a) { return expand(a); })
                    : expand(*slot);
    for (Expr &a : n->args)
      a = expand(a);
    if (!changed_) {
      out.push_back(n);
      return;
    }
    // Step 2: bind shared nodes, in the order the statements run.
    std::vector<Stmt> stmts = std::move(prelude_);
    stmts.push_back(n);
    uses_.clear();
    for (const Stmt &t : stmts)
      forEachExpr(t, [&](Expr &e) { count(e); });
    bound_.clear();
    for (const Stmt &t : stmts) {
      forEachExpr(t, [&](Expr &e) { e = bind(e, out); });
      out.push_back(t);
    }
  }

  /// `s` processed, as one statement (a block when something precedes it).
  Stmt single(const Stmt &s) {
    std::vector<Stmt> v;
    statement(s, v);
    return v.size() == 1 ? v[0] : block(std::move(v));
  }

private:
  std::string fresh(const char *stem) {
    std::string n;
    do
      n = fmt::format("{}.{}", stem, next_++);
    while (names_.count(n));
    names_.insert(n);
    return n;
  }

  template <typename Fn> static void forEachExpr(const Stmt &s, Fn &&fn) {
    for (Expr *slot : {&s->extent, &s->index, &s->value})
      if (*slot)
        fn(*slot);
    for (Expr &a : s->args)
      fn(a);
  }

  void count(const Expr &e) {
    if (trivial(e) || uses_[e.get()]++)
      return;
    for (const Expr &a : e->args)
      count(a);
  }

  Expr bind(const Expr &e, std::vector<Stmt> &out) {
    if (trivial(e))
      return e;
    if (auto it = bound_.find(e.get()); it != bound_.end())
      return it->second;
    Expr r = withArgs(e, [&](const Expr &a) { return bind(a, out); });
    if (uses_[e.get()] > 1) {
      std::string name = fresh("cse");
      out.push_back(decl(name, r->type, r));
      r = var(name, r->type);
    }
    bound_[e.get()] = r;
    return r;
  }

  /// `e` with `fn` applied to its operands (the same node when none changes).
  template <typename Fn> static Expr withArgs(const Expr &e, Fn &&fn) {
    std::vector<Expr> args;
    bool changed = false;
    for (const Expr &a : e->args) {
      args.push_back(fn(a));
      changed = changed || args.back() != a;
    }
    if (!changed)
      return e;
    auto n = std::make_shared<ExprNode>(*e);
    n->args = std::move(args);
    return n;
  }

  Expr expand(const Expr &e) {
    if (auto it = memo_.find(e.get()); it != memo_.end())
      return it->second;
    Expr r = withArgs(e, [&](const Expr &a) { return expand(a); });
    if (isComposite(*r)) {
      r = r->kind == ExprKind::Cast ? castOf(r->args[0], r->type, r->saturate, r->roundMode)
                                    : composite(r->op, r->args);
      changed_ = true;
    } else if (r->kind == ExprKind::Op && r->op == OpKind::Select) {
      if (std::optional<bool> c = decided(r->args[0])) {
        r = *c ? r->args[1] : r->args[2];
        changed_ = true;
      }
    }
    memo_[e.get()] = r;
    return r;
  }

  /// A compare that the ranges of its operands decide (neither is NaN where a range is
  /// known): a quantize's guard |x / s| < 2^20 where x is a bounded sum of dequantized values.
  std::optional<bool> decided(const Expr &c) {
    if (c->kind != ExprKind::Op || c->args.size() != 2)
      return std::nullopt;
    bool lt = c->op == OpKind::Less, le = c->op == OpKind::LessEqual;
    bool gt = c->op == OpKind::Greater, ge = c->op == OpKind::GreaterEqual;
    if (!lt && !le && !gt && !ge)
      return std::nullopt;
    std::optional<Range> a = rangeOf(c->args[0]), b = rangeOf(c->args[1]);
    if (!a || !b)
      return std::nullopt;
    if (gt || ge) { // a > b is b < a
      std::swap(a, b);
      lt = gt;
      le = ge;
    }
    if (lt ? a->hi < b->lo : a->hi <= b->lo)
      return true;
    if (lt ? a->lo >= b->hi : a->lo > b->hi)
      return false;
    return std::nullopt;
  }

  Expr composite(OpKind k, const std::vector<Expr> &a) {
    DType t = a[0]->type;
    switch (k) { // on any dtype, f16/bf16 included: they only compare, select and shift
    case OpKind::Min:
    case OpKind::Max:
      return minMax(k == OpKind::Max, a[0], a[1]);
    case OpKind::Div:
      return intDiv(a[0], a[1]);
    case OpKind::ShiftLeft:
    case OpKind::ShiftRight:
      return shift(k == OpKind::ShiftLeft, a[0], a[1]);
    default:
      break;
    }
    if (t == DType::F16 || t == DType::BF16) {
      std::vector<Expr> wide;
      for (const Expr &x : a)
        wide.push_back(convert(x, DType::F32));
      Expr r = composite(k, wide);
      return r->type == DType::Bool ? r : convert(r, t);
    }
    const Expr &x = a[0];
    bool f = isFloat(t), f32 = t == DType::F32;
    ExprMathBuilder b;
    switch (k) {
    case OpKind::Exp:
      return f32 ? fastmath::exp(b, x) : call("exp", {x});
    case OpKind::Tanh:
      return f32 ? fastmath::tanh(b, x) : call("tanh", {x});
    case OpKind::Erf:
      return f32 ? fastmath::erf(b, x) : call("erf", {x});
    case OpKind::Sigmoid: {
      if (f32)
        return fastmath::sigmoid(b, x);
      // f64: t = e^-|x|; 1/(1+t) for x >= 0, t/(1+t) below (the interpreter's two branches).
      Expr e = call("exp", {strictOp(OpKind::Neg, {op(OpKind::Abs, {x})})});
      Expr d = strictOp(OpKind::Add, {constant(1, t), e});
      return select(ge(x, constant(0, t)), strictOp(OpKind::Div, {constant(1, t), d}),
                    strictOp(OpKind::Div, {e, d}));
    }
    case OpKind::Reciprocal:
      return strictOp(OpKind::Div, {constant(1, t), x});
    case OpKind::Sign: {
      Expr one = constant(1, t), zero = constant(0, t);
      if (isUnsignedInteger(t))
        return select(gt(x, zero), one, zero);
      Expr s = select(gt(x, zero), one, select(lt(x, zero), constant(-1, t), zero));
      return f ? select(lnot(eq(x, x)), x, s) : s; // NaN stays
    }
    case OpKind::IsNaN:
      return lnot(eq(x, x));
    case OpKind::IsInf:
      return eq(op(OpKind::Abs, {x}), constant(INFINITY, t));
    case OpKind::Pow:
      if (f32)
        return fastmath::pow(b, x, a[1]);
      return f ? call("pow", {x, a[1]}) : intPow(x, a[1]);
    case OpKind::Mod:
    case OpKind::FMod:
      return remainder(k == OpKind::Mod, x, a[1]);
    default:
      break;
    }
    NNC_ASSERT(false, "expandComposites: {} is not composite", opInfo(k).name);
    return x;
  }

  // ---- The ONNX-level rules (ScalarOps.h) as primitives ----

  /// Float min/max: NaN when either operand is NaN (the canonical quiet NaN), else the
  /// smaller (larger) one, the first on ties. An operand known not to be NaN is not tested.
  Expr minMax(bool isMax, const Expr &x, const Expr &y) {
    Expr pick = isMax ? select(lt(x, y), y, x) : select(lt(y, x), y, x);
    Expr nan;
    for (const Expr &v : {x, y})
      if (!rangeOf(v))
        nan = nan ? lor(nan, lnot(eq(v, v))) : lnot(eq(v, v));
    if (nan)
      return select(nan, constant(NAN, x->type), pick);
    // The select alone spans both operands' ranges; the min or max is tighter (a clamp's
    // bound is what lets a later conversion skip its guards).
    Range rx = *rangeOf(x), ry = *rangeOf(y);
    ranges_[pick] = isMax ? Range{std::max(rx.lo, ry.lo), std::max(rx.hi, ry.hi)}
                          : Range{std::min(rx.lo, ry.lo), std::min(rx.hi, ry.hi)};
    return pick;
  }

  /// Integer division truncating toward zero: a zero divisor gives 0 and -1 negates
  /// (wrapping: INT_MIN / -1 is INT_MIN, where the machine division traps). A divisor known
  /// to be neither is divided by directly.
  Expr intDiv(const Expr &x, const Expr &y) {
    DType t = x->type;
    bool s = isSignedInteger(t);
    Expr zero = constant(0, t);
    auto negated = [&] { return op(OpKind::Sub, {zero, x}); };
    if (y->kind == ExprKind::IntImm) {
      if (y->intValue == 0)
        return zero;
      if (s && y->intValue == -1)
        return negated();
      return quot(x, y);
    }
    std::optional<Range> r = rangeOf(y);
    bool zeroOut = r && (r->lo > 0 || r->hi < 0);
    bool minusOneOut = !s || (r && (r->lo > -1 || r->hi < -1));
    if (zeroOut && minusOneOut)
      return quot(x, y);
    Expr isZero = zeroOut ? nullptr : eq(y, zero);
    Expr isM1 = minusOneOut ? nullptr : eq(y, constant(-1, t));
    Expr bad = isZero && isM1 ? lor(isZero, isM1) : (isZero ? isZero : isM1);
    Expr q = quot(x, select(bad, constant(1, t), y));
    if (isM1)
      q = select(isM1, negated(), q);
    return isZero ? select(isZero, zero, q) : q;
  }

  /// Unsigned shifts: 0 when the amount is at least the bit width (where the machine shift is
  /// undefined), tested only when the amount's range reaches it.
  Expr shift(bool left, const Expr &x, const Expr &y) {
    DType t = x->type;
    double bits = static_cast<double>(dtypeSize(t) * 8);
    Expr zero = constant(0, t);
    std::optional<Range> r = rangeOf(y);
    if (r && r->lo >= bits)
      return zero;
    Expr raw = left ? shl(x, y) : shr(x, y);
    if (r && r->hi < bits)
      return raw;
    return select(op(OpKind::GreaterEqual, {y, constant(bits, t)}), zero, raw);
  }

  /// A Cast (ONNX Cast rules, ScalarOps.h's castNumber) as primitives: a storage-only side is
  /// decoded from or encoded to its canonical type (the one Cast left to the backends), to
  /// bool compares with 0, a float to an integer goes through floatToInt, anything else is a
  /// Convert.
  Expr castOf(const Expr &x, DType to, bool saturate, const std::string &roundMode) {
    DType from = x->type;
    if (from == to)
      return x;
    if (isStorageOnly(from))
      return castOf(storageCast(x, storageCanonical(from), true, ""), to, saturate, roundMode);
    if (isStorageOnly(to))
      return storageCast(castOf(x, storageCanonical(to), true, ""), to, saturate, roundMode);
    if (to == DType::Bool)
      return lnot(eq(x, constant(0, from)));
    if (isFloat(from) && isInteger(to))
      return floatToInt(x, to);
    // Back to the float it was converted from: the same value where that was a whole number
    // the integer holds (a quantized value dequantized again in a requantizing epilogue),
    // but for the sign of a zero (-0 comes back +0: adding +0 does that where -0 can occur).
    if (isFloat(to) && x->kind == ExprKind::Convert && isInteger(from) &&
        x->args[0]->type == to && integralOf(x->args[0])) {
      const Expr &w = x->args[0];
      std::optional<Range> r = rangeOf(w);
      Range held = typeRange(from);
      if (r && r->lo >= held.lo && r->hi <= held.hi)
        return neverNegativeZero(w) ? w : strictOp(OpKind::Add, {w, constant(0, to)});
    }
    return convert(x, to);
  }

  /// A constant that is not -0 (a float immediate, or an integer one converted).
  static bool constantNotNegativeZero(const Expr &e) {
    if (e->kind == ExprKind::FloatImm)
      return !(e->floatValue == 0 && std::signbit(e->floatValue));
    return (e->kind == ExprKind::Cast || e->kind == ExprKind::Convert) &&
           e->args[0]->kind == ExprKind::IntImm;
  }

  /// True when `e` is never -0: a value converted from an integer, a sum with a constant
  /// other than -0 (round to nearest gives -0 only for -0 + -0), a difference from a nonzero
  /// constant or -0, and minima, maxima and selections of such.
  static bool neverNegativeZero(const Expr &e) {
    if (constantNotNegativeZero(e))
      return true;
    if ((e->kind == ExprKind::Cast || e->kind == ExprKind::Convert) && !isFloat(e->args[0]->type))
      return true;
    if (e->kind != ExprKind::Op)
      return false;
    switch (e->op) {
    case OpKind::Add:
      return constantNotNegativeZero(e->args[0]) || constantNotNegativeZero(e->args[1]);
    case OpKind::Sub: {
      const Expr &b = e->args[1];
      if (b->kind == ExprKind::FloatImm)
        return !(b->floatValue == 0 && !std::signbit(b->floatValue));
      return constantNotNegativeZero(b) && b->args[0]->intValue != 0;
    }
    case OpKind::Min:
    case OpKind::Max:
      return neverNegativeZero(e->args[0]) && neverNegativeZero(e->args[1]);
    case OpKind::Select: {
      // select(x > c, x, c) with c >= +0 (a quantize's low clamp): x is positive where taken.
      const Expr &c = e->args[0], &f = e->args[2];
      bool positiveTrue = c->kind == ExprKind::Op && c->op == OpKind::Greater &&
                          c->args[0] == e->args[1] && c->args[1] == f &&
                          f->kind == ExprKind::FloatImm && f->floatValue >= 0;
      return (positiveTrue || neverNegativeZero(e->args[1])) && neverNegativeZero(f);
    }
    default:
      return false;
    }
  }

  /// True when every value `e` takes that is not NaN is a whole number: integers, rounding,
  /// whole constants, and sums, differences, products, negations, magnitudes, minima, maxima
  /// and selections of whole numbers (a float's exact result is whole, and so is its rounding:
  /// floats from 2^24 (f32) on are all whole).
  bool integralOf(const Expr &e) {
    if (auto it = integral_.find(e); it != integral_.end())
      return it->second;
    bool r = false;
    if (!isFloat(e->type)) {
      r = true;
    } else {
      switch (e->kind) {
      case ExprKind::FloatImm:
        r = std::isfinite(e->floatValue) && std::floor(e->floatValue) == e->floatValue;
        break;
      case ExprKind::Cast:
      case ExprKind::Convert:
        r = !isFloat(e->args[0]->type) || integralOf(e->args[0]);
        break;
      case ExprKind::Op:
        switch (e->op) {
        case OpKind::Round:
        case OpKind::Floor:
        case OpKind::Ceil:
          r = true;
          break;
        case OpKind::Add:
        case OpKind::Sub:
        case OpKind::Mul:
        case OpKind::Neg:
        case OpKind::Abs:
        case OpKind::Min:
        case OpKind::Max:
          r = std::all_of(e->args.begin(), e->args.end(),
                          [&](const Expr &a) { return integralOf(a); });
          break;
        case OpKind::Select:
          r = integralOf(e->args[1]) && integralOf(e->args[2]);
          break;
        default:
          break;
        }
        break;
      default:
        break;
      }
    }
    integral_[e] = r;
    return r;
  }

  static Expr storageCast(const Expr &x, DType to, bool saturate, const std::string &roundMode) {
    auto n = std::make_shared<ExprNode>();
    n->kind = ExprKind::Cast;
    n->type = to;
    n->args = {x};
    n->saturate = saturate;
    n->roundMode = roundMode;
    return n;
  }

  /// Float to integer: truncation toward zero; NaN gives 0; beyond the 64-bit range the value
  /// saturates (to the unsigned range for unsigned targets); the 64-bit pattern wraps to the
  /// target. A Convert of an in-range value does the truncation; each guard is left out where
  /// the operand's range shows it cannot fire, and a value known to fit the target converts
  /// to it directly.
  Expr floatToInt(Expr x, DType to) {
    if (x->type == DType::F16 || x->type == DType::BF16)
      x = convert(x, DType::F32); // exact
    DType ft = x->type;
    const double two63 = 9223372036854775808.0, two64 = 18446744073709551616.0;
    std::optional<Range> r = rangeOf(x);
    Range target = typeRange(to);
    // trunc(x) in [lo, hi] fits `to` when lo > min - 1 and hi < max + 1.
    if (r && r->lo > target.lo - 1 && r->hi < target.hi + 1)
      return convert(x, to);
    bool unsignedHigh = isUnsignedInteger(to) && !(r && r->hi < two63);
    DType wide = unsignedHigh ? DType::U64 : DType::I64;
    Expr bits;
    if (r && r->lo > -two63 - 1 && r->hi < two63) {
      bits = convert(convert(x, DType::I64), wide);
    } else {
      Expr v = convert(x, DType::I64);
      if (!(r && r->lo >= -two63))
        v = select(lt(x, constant(-two63, ft)), intImm(INT64_MIN), v);
      if (!(r && r->hi < two63) && !unsignedHigh) // unsignedHigh: the select below takes it
        v = select(ge(x, constant(two63, ft)), intImm(INT64_MAX), v);
      if (!r)
        v = select(lnot(eq(x, x)), intImm(0), v);
      bits = convert(v, wide);
      if (unsignedHigh) {
        // [2^63, 2^64) converts as unsigned; from 2^64 on it saturates.
        Expr high = convert(x, DType::U64);
        if (!(r && r->hi < two64))
          high = select(ge(x, constant(two64, ft)), intImm(-1, DType::U64), high);
        bits = select(ge(x, constant(two63, ft)), high, bits);
      }
    }
    return convert(bits, to);
  }

  // ---- What is known of a value: never NaN, and within [lo, hi] ----

  /// The values of an integer (or bool) dtype.
  static Range typeRange(DType t) {
    if (t == DType::Bool)
      return {0, 1};
    double bits = static_cast<double>(dtypeSize(t) * 8);
    if (isUnsignedInteger(t))
      return {0, std::ldexp(1.0, static_cast<int>(bits)) - 1};
    return {-std::ldexp(1.0, static_cast<int>(bits) - 1),
            std::ldexp(1.0, static_cast<int>(bits) - 1) - 1};
  }

  /// [lo, hi] rounded to the float dtype `t` (rounding is monotonic).
  static Range roundRange(Range r, DType t) {
    auto rd = [&](double v) {
      scalar::Number n;
      n.type = DType::F64;
      n.f = v;
      return scalar::castNumber(n, t).f;
    };
    return {rd(r.lo), rd(r.hi)};
  }

  /// The range of a float arithmetic result from bounds computed in double: widened by more
  /// than any rounding to the result's dtype, unknown when a bound is not finite.
  static std::optional<Range> floatResult(double lo, double hi) {
    if (!std::isfinite(lo) || !std::isfinite(hi))
      return std::nullopt;
    return Range{lo - std::fabs(lo) / 64 - 1e-300, hi + std::fabs(hi) / 64 + 1e-300};
  }

  /// What is known of `e` (nullopt: nothing; a float may be NaN). Memoized per statement:
  /// the expansions' DAGs share operands.
  std::optional<Range> rangeOf(const Expr &e) {
    if (auto it = ranges_.find(e); it != ranges_.end())
      return it->second;
    std::optional<Range> r = computeRange(e);
    ranges_[e] = r;
    return r;
  }

  std::optional<Range> computeRange(const Expr &e) {
    DType t = e->type;
    bool integral = isInteger(t) || t == DType::Bool;
    std::optional<Range> fallback;
    if (integral)
      fallback = typeRange(t);
    switch (e->kind) {
    case ExprKind::IntImm:
      if (isUnsignedInteger(t))
        return Range{double(uint64_t(e->intValue)), double(uint64_t(e->intValue))};
      return Range{double(e->intValue), double(e->intValue)};
    case ExprKind::FloatImm:
      if (std::isnan(e->floatValue))
        return std::nullopt;
      if (isFloat(t))
        return roundRange({e->floatValue, e->floatValue}, t);
      return fallback;
    case ExprKind::Var:
      if (auto it = vars_.find(e->name); it != vars_.end())
        return it->second;
      return fallback;
    case ExprKind::Cast:
    case ExprKind::Convert: {
      DType from = e->args[0]->type;
      if (isStorageOnly(from) || isStorageOnly(t))
        return fallback;
      std::optional<Range> s = rangeOf(e->args[0]);
      if (!s)
        return fallback;
      if (isFloat(t))
        return roundRange(*s, t);
      if (t == DType::Bool)
        return fallback;
      Range r = isFloat(from) ? Range{std::trunc(s->lo), std::trunc(s->hi)} : *s;
      if (r.lo >= fallback->lo && r.hi <= fallback->hi)
        return r;
      return fallback;
    }
    case ExprKind::Op:
      if (std::optional<Range> r = opRange(*e))
        return r;
      return fallback;
    case ExprKind::Fma: { // a * b + c, one rounding: within the bounds of the exact result
      std::optional<Range> a = rangeOf(e->args[0]), b = rangeOf(e->args[1]),
                           c = rangeOf(e->args[2]);
      if (!a || !b || !c)
        return std::nullopt;
      double p[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
      return floatResult(*std::min_element(p, p + 4) + c->lo, *std::max_element(p, p + 4) + c->hi);
    }
    default:
      return fallback;
    }
  }

  std::optional<Range> opRange(const ExprNode &e) {
    DType t = e.type;
    bool flt = isFloat(t);
    std::vector<Range> a;
    for (const Expr &x : e.args) {
      std::optional<Range> r = rangeOf(x);
      if (!r && e.op != OpKind::Select)
        return std::nullopt;
      a.push_back(r ? *r : Range{NAN, NAN});
    }
    // An integer result is known only where it cannot wrap; exact below 2^53.
    auto result = [&](double lo, double hi) -> std::optional<Range> {
      if (flt)
        return floatResult(lo, hi);
      Range tr = typeRange(t);
      if (lo >= tr.lo && hi <= tr.hi && std::fabs(lo) < 0x1p53 && std::fabs(hi) < 0x1p53)
        return Range{lo, hi};
      return std::nullopt;
    };
    switch (e.op) {
    case OpKind::Add: return result(a[0].lo + a[1].lo, a[0].hi + a[1].hi);
    case OpKind::Sub: return result(a[0].lo - a[1].hi, a[0].hi - a[1].lo);
    case OpKind::Mul: {
      double p[4] = {a[0].lo * a[1].lo, a[0].lo * a[1].hi, a[0].hi * a[1].lo, a[0].hi * a[1].hi};
      return result(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
    }
    case OpKind::Neg: return result(-a[0].hi, -a[0].lo);
    case OpKind::Abs:
      if (a[0].lo >= 0)
        return a[0];
      return result(a[0].hi <= 0 ? -a[0].hi : 0, std::max(-a[0].lo, a[0].hi));
    case OpKind::Floor: return Range{std::floor(a[0].lo), std::floor(a[0].hi)};
    case OpKind::Ceil: return Range{std::ceil(a[0].lo), std::ceil(a[0].hi)};
    case OpKind::Round: return Range{std::floor(a[0].lo), std::ceil(a[0].hi)};
    case OpKind::Min: return Range{std::min(a[0].lo, a[1].lo), std::min(a[0].hi, a[1].hi)};
    case OpKind::Max: return Range{std::max(a[0].lo, a[1].lo), std::max(a[0].hi, a[1].hi)};
    case OpKind::Select: {
      // select(x >= k, x, f) is in [k, inf] or f's range, never NaN where f is not: the
      // guard that clamps and sends NaN to the low end (guardedTrueBranch).
      if (std::optional<Range> side = guardedTrueBranch(e)) {
        if (std::isnan(a[1].lo))
          a[1] = *side;
        else if (std::max(a[1].lo, side->lo) <= std::min(a[1].hi, side->hi))
          a[1] = Range{std::max(a[1].lo, side->lo), std::min(a[1].hi, side->hi)};
        else if (!std::isnan(a[2].lo)) // the true branch is never taken
          return a[2];
      }
      if (std::isnan(a[1].lo) || std::isnan(a[2].lo))
        return std::nullopt;
      return Range{std::min(a[1].lo, a[2].lo), std::max(a[1].hi, a[2].hi)};
    }
    default: return std::nullopt;
    }
  }

  /// The values of a select's true branch where its condition compares that branch's value
  /// with a known one: x in [k.lo, inf] where x >= k or x > k holds, in [-inf, k.hi] where
  /// x <= k or x < k does (the compare is false for NaN, so the branch is never NaN). The
  /// false branch learns nothing: it also holds NaN.
  std::optional<Range> guardedTrueBranch(const ExprNode &sel) {
    const Expr &c = sel.args[0], &x = sel.args[1];
    if (c->kind != ExprKind::Op || c->args.size() != 2 || !isFloat(x->type))
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      int budget = 64;
      if (!sameExpr(c->args[side], x, budget))
        continue;
      std::optional<Range> other = rangeOf(c->args[1 - side]);
      if (!other)
        return std::nullopt;
      bool greater = c->op == OpKind::Greater || c->op == OpKind::GreaterEqual;
      bool less = c->op == OpKind::Less || c->op == OpKind::LessEqual;
      if (!greater && !less)
        return std::nullopt;
      if (greater == (side == 0)) // x > k, or k < x
        return Range{other->lo, INFINITY};
      return Range{-INFINITY, other->hi};
    }
    return std::nullopt;
  }

  /// The sign bit of `s` (f32/f64) on the magnitude `m`.
  static Expr copySign(const Expr &m, const Expr &s) {
    DType ft = m->type, it = ft == DType::F32 ? DType::U32 : DType::U64;
    Expr sign = intImm(ft == DType::F32 ? int64_t(0x80000000u) : INT64_MIN, it);
    return bitCast(bitOr(bitCast(m, it), bitAnd(bitCast(s, it), sign)), ft);
  }

  /// ONNX Mod (`python`: the sign of the divisor) or FMod (the sign of the dividend) over a
  /// truncating Rem. Integers: a zero divisor gives 0, and so does -1 (INT_MIN % -1 traps).
  Expr remainder(bool python, const Expr &x, const Expr &y) {
    DType t = x->type;
    Expr zero = constant(0, t);
    if (isFloat(t)) {
      Expr r = rem(x, y);
      if (!python)
        return r;
      Expr fix = op(OpKind::And, {lnot(eq(r, zero)), lxor(lt(r, zero), lt(y, zero))});
      Expr signedZero = copySign(zero, y);
      return select(fix, strictOp(OpKind::Add, {r, y}), select(eq(r, zero), signedZero, r));
    }
    bool s = isSignedInteger(t);
    bool safe = y->kind == ExprKind::IntImm && y->intValue != 0 && !(s && y->intValue == -1);
    Expr bad = safe ? nullptr : eq(y, zero);
    if (!safe && s)
      bad = lor(bad, eq(y, constant(-1, t)));
    Expr r = rem(x, safe ? y : select(bad, constant(1, t), y));
    if (python && s) {
      Expr fix;
      if (y->kind == ExprKind::IntImm)
        fix = y->intValue > 0 ? lt(r, zero) : gt(r, zero);
      else
        fix = op(OpKind::And, {lnot(eq(r, zero)), lxor(lt(r, zero), lt(y, zero))});
      r = select(fix, op(OpKind::Add, {r, y}), r);
    }
    return safe ? r : select(bad, zero, r);
  }

  /// Integer x^y, wrapping; a negative exponent gives the truncated real result (1 for x = 1,
  /// ±1 for x = -1, else 0). By squaring over the exponent's bits: unrolled for a constant
  /// exponent, else a loop of the type's bit width added before the statement.
  Expr intPow(const Expr &x, const Expr &y) {
    DType t = x->type, u = unsignedOf(t);
    Expr one = constant(1, t);
    Expr r;
    if (y->kind == ExprKind::IntImm && y->intValue >= 0) {
      uint64_t e = static_cast<uint64_t>(y->intValue);
      r = one;
      for (Expr base = x; e; e >>= 1) {
        if (e & 1)
          r = op(OpKind::Mul, {r, base});
        if (e > 1)
          base = op(OpKind::Mul, {base, base});
      }
      return r;
    }
    std::string rn = fresh("pow.r"), bn = fresh("pow.b"), en = fresh("pow.e");
    prelude_.push_back(decl(rn, t, one));
    prelude_.push_back(decl(bn, t, x));
    prelude_.push_back(decl(en, u, convert(y, u)));
    Expr rv = var(rn, t), bv = var(bn, t), ev = var(en, u);
    Expr odd = lnot(eq(bitAnd(ev, constant(1, u)), constant(0, u)));
    prelude_.push_back(forLoop(fresh("pow.i"), intImm(static_cast<int64_t>(dtypeSize(t)) * 8),
                               block({assign(rn, select(odd, op(OpKind::Mul, {rv, bv}), rv)),
                                      assign(bn, op(OpKind::Mul, {bv, bv})),
                                      assign(en, shr(ev, constant(1, u)))})));
    r = rv;
    if (!isSignedInteger(t))
      return r;
    Expr zero = constant(0, t), m1 = constant(-1, t);
    Expr even = eq(bitAnd(y, one), zero);
    Expr neg = select(eq(x, one), one, select(eq(x, m1), select(even, one, m1), zero));
    return select(lt(y, zero), neg, r);
  }

  std::set<std::string> names_;
  /// The ranges of the loop variables in scope.
  std::map<std::string, Range> vars_;
  std::map<Expr, std::optional<Range>> ranges_; ///< Holds its keys, so none is reused.
  std::map<Expr, bool> integral_;                ///< Likewise.
  int next_ = 0;
  std::map<const ExprNode *, Expr> memo_;
  std::vector<Stmt> prelude_;
  bool changed_ = false;
  std::map<const ExprNode *, int> uses_;
  std::map<const ExprNode *, Expr> bound_;
};

void collectNames(const Expr &e, std::set<std::string> &names) {
  if (!e)
    return;
  if (e->kind == ExprKind::Var)
    names.insert(e->name);
  for (const Expr &a : e->args)
    collectNames(a, names);
}

void collectNames(const Stmt &s, std::set<std::string> &names) {
  if (!s)
    return;
  if (!s->name.empty())
    names.insert(s->name);
  for (const Expr &e : {s->extent, s->index, s->value})
    collectNames(e, names);
  for (const Expr &e : s->args)
    collectNames(e, names);
  for (const Stmt &c : s->body)
    collectNames(c, names);
}

} // namespace

Stmt expandComposites(const Stmt &body) {
  std::set<std::string> names;
  collectNames(body, names);
  Expander ex(std::move(names));
  return ex.single(body);
}

Expected<Stmt> codegenBody(const Kernel &k) {
  NNC_ASSIGN_OR_RETURN(Stmt body, applySchedule(k));
  return expandComposites(body);
}

} // namespace nnc::kir

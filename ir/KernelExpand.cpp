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
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "nnc/ir/FastMath.h"
#include "nnc/ir/Kernel.h"

namespace nnc::kir {

bool isCompositeOp(OpKind k) {
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
  case OpKind::Round:
    return true;
  default:
    return false;
  }
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
  I shl(I a, int n) { return op(OpKind::ShiftLeft, {a, intImm(n, DType::U32)}); }
  M eq(F a, F b) { return kir::op(OpKind::Equal, {a, b}); }
  M mand(M a, M b) { return kir::op(OpKind::And, {a, b}); }
  M mor(M a, M b) { return kir::op(OpKind::Or, {a, b}); }
  M mnot(M a) { return kir::op(OpKind::Not, {a}); }
  F floor(F a) { return kir::op(OpKind::Floor, {a}); }
  I shr(I a, int n) { return op(OpKind::ShiftRight, {a, intImm(n, DType::U32)}); }
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
    case StmtKind::For:
    case StmtKind::If:
      for (Stmt &c : n->body)
        c = single(c);
      break;
    default:
      break;
    }
    // Step 1: expand the statement's own expressions.
    memo_.clear();
    prelude_.clear();
    changed_ = false;
    for (Expr *slot : {&n->extent, &n->index, &n->value})
      if (*slot)
        *slot = expand(*slot);
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
    if (r->kind == ExprKind::Op && isCompositeOp(r->op)) {
      r = composite(r->op, r->args);
      changed_ = true;
    }
    memo_[e.get()] = r;
    return r;
  }

  Expr composite(OpKind k, const std::vector<Expr> &a) {
    DType t = a[0]->type;
    if (t == DType::F16 || t == DType::BF16) {
      std::vector<Expr> wide;
      for (const Expr &x : a)
        wide.push_back(cast(x, DType::F32));
      Expr r = composite(k, wide);
      return r->type == DType::Bool ? r : cast(r, t);
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
    case OpKind::Round:
      return roundEven(x);
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

  /// The sign bit of `s` (f32/f64) on the magnitude `m`.
  static Expr copySign(const Expr &m, const Expr &s) {
    DType ft = m->type, it = ft == DType::F32 ? DType::U32 : DType::U64;
    Expr sign = intImm(ft == DType::F32 ? int64_t(0x80000000u) : INT64_MIN, it);
    return bitCast(bitOr(bitCast(m, it), bitAnd(bitCast(s, it), sign)), ft);
  }

  /// Round half to even: below 2^p (p the mantissa bits) |x| + 2^p - 2^p rounds |x| to an
  /// integer in the current (nearest-even) mode; from 2^p on, and for inf and NaN, x is exact.
  static Expr roundEven(const Expr &x) {
    DType t = x->type;
    Expr big = constant(t == DType::F32 ? 0x1p23 : 0x1p52, t);
    Expr m = op(OpKind::Abs, {x});
    Expr r = strictOp(OpKind::Sub, {strictOp(OpKind::Add, {m, big}), big});
    return select(lt(m, big), copySign(r, x), x);
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
    prelude_.push_back(decl(en, u, cast(y, u)));
    Expr rv = var(rn, t), bv = var(bn, t), ev = var(en, u);
    Expr odd = lnot(eq(bitAnd(ev, constant(1, u)), constant(0, u)));
    prelude_.push_back(forLoop(fresh("pow.i"), intImm(static_cast<int64_t>(dtypeSize(t)) * 8),
                               block({assign(rn, select(odd, op(OpKind::Mul, {rv, bv}), rv)),
                                      assign(bn, op(OpKind::Mul, {bv, bv})),
                                      assign(en, op(OpKind::ShiftRight, {ev, constant(1, u)}))})));
    r = rv;
    if (!isSignedInteger(t))
      return r;
    Expr zero = constant(0, t), m1 = constant(-1, t);
    Expr even = eq(bitAnd(y, one), zero);
    Expr neg = select(eq(x, one), one, select(eq(x, m1), select(even, one, m1), zero));
    return select(lt(y, zero), neg, r);
  }

  std::set<std::string> names_;
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

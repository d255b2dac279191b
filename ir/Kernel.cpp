// The kernel-level IR: expression and statement builders (with integer folding), the text
// printer, kernel signatures and the kernel verifier.
#include "nnc/ir/Kernel.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "nnc/support/Float16.h"

namespace nnc::kir {

// ---- Integer helpers -------------------------------------------------------------------------

namespace {

/// Bits of an integer dtype (bool counts as 1); 0 for others.
int intBits(DType t) {
  switch (t) {
  case DType::I8:
  case DType::U8: return 8;
  case DType::I16:
  case DType::U16: return 16;
  case DType::I32:
  case DType::U32: return 32;
  case DType::I64:
  case DType::U64: return 64;
  case DType::Bool: return 1;
  default: return 0;
  }
}

/// Wraps a 64-bit pattern to dtype `t` and returns it as IntImm stores it: sign-extended for
/// signed types, zero-extended for unsigned ones (u64 keeps its bit pattern).
int64_t wrapTo(DType t, uint64_t bits) {
  int b = intBits(t);
  if (t == DType::Bool)
    return bits != 0;
  if (b == 64)
    return static_cast<int64_t>(bits);
  uint64_t mask = (uint64_t(1) << b) - 1;
  bits &= mask;
  if (isSignedInteger(t) && (bits >> (b - 1)) & 1)
    bits |= ~mask;
  return static_cast<int64_t>(bits);
}

/// Folds `a kind b` on two integer immediates of type t (the rules of runtime/Scalar.h:
/// wrap-around, division by zero gives 0, mod has the divisor's sign). Returns false when
/// the op is not folded.
bool foldInts(OpKind kind, DType t, int64_t a, int64_t b, int64_t &out) {
  bool uns = isUnsignedInteger(t);
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (kind) {
  case OpKind::Add: out = wrapTo(t, ua + ub); return true;
  case OpKind::Sub: out = wrapTo(t, ua - ub); return true;
  case OpKind::Mul: out = wrapTo(t, ua * ub); return true;
  case OpKind::Div:
    if (b == 0)
      out = 0;
    else if (uns)
      out = wrapTo(t, ua / ub);
    else if (b == -1)
      out = wrapTo(t, uint64_t(0) - ua);
    else
      out = wrapTo(t, static_cast<uint64_t>(a / b));
    return true;
  case OpKind::Mod:
    if (b == 0)
      out = 0;
    else if (uns)
      out = wrapTo(t, ua % ub);
    else if (b == -1)
      out = 0;
    else {
      int64_t r = a % b;
      if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
      out = r;
    }
    return true;
  case OpKind::Min: out = uns ? (ub < ua ? b : a) : (b < a ? b : a); return true;
  case OpKind::Max: out = uns ? (ua < ub ? b : a) : (a < b ? b : a); return true;
  default: return false;
  }
}

bool isIntType(DType t) { return isInteger(t); }

} // namespace

// ---- Expression builders ---------------------------------------------------------------------

static Expr makeExpr(ExprNode n) { return std::make_shared<const ExprNode>(std::move(n)); }

Expr intImm(int64_t v, DType t) {
  NNC_ASSERT(isInteger(t) || t == DType::Bool, "intImm of non-integer dtype {}", dtypeName(t));
  ExprNode n;
  n.kind = ExprKind::IntImm;
  n.type = t;
  n.intValue = wrapTo(t, static_cast<uint64_t>(v));
  return makeExpr(std::move(n));
}

Expr floatImm(double v, DType t) {
  NNC_ASSERT(isFloat(t), "floatImm of non-float dtype {}", dtypeName(t));
  ExprNode n;
  n.kind = ExprKind::FloatImm;
  n.type = t;
  // Held exactly as the dtype holds it, so printing, evaluation and code generation agree.
  switch (t) {
  case DType::F64: n.floatValue = v; break;
  case DType::F16: n.floatValue = halfToFloat(floatToHalf(static_cast<float>(v))); break;
  case DType::BF16: n.floatValue = bf16ToFloat(floatToBf16(static_cast<float>(v))); break;
  default: n.floatValue = static_cast<float>(v); break;
  }
  return makeExpr(std::move(n));
}

Expr constant(double v, DType t) {
  if (isFloat(t))
    return floatImm(v, t);
  NNC_ASSERT(isInteger(t) || t == DType::Bool, "constant of non-arithmetic dtype {}",
             dtypeName(t));
  if (t == DType::Bool)
    return intImm(v != 0 ? 1 : 0, t);
  // Out-of-range values saturate to the type's limits (constant(-inf, i32) is INT32_MIN, the
  // identity of max), NaN gives 0, fractions truncate.
  if (std::isnan(v))
    return intImm(0, t);
  int b = intBits(t);
  bool uns = isUnsignedInteger(t);
  double lo = uns ? 0.0 : -std::ldexp(1.0, b - 1);
  double hi = uns ? std::ldexp(1.0, b) : std::ldexp(1.0, b - 1); // exclusive
  if (v <= lo)
    return intImm(uns ? 0 : (b == 64 ? INT64_MIN : -(int64_t(1) << (b - 1))), t);
  if (v >= hi)
    return intImm(uns ? static_cast<int64_t>(b == 64 ? UINT64_MAX : (uint64_t(1) << b) - 1)
                      : static_cast<int64_t>((uint64_t(1) << (b - 1)) - 1),
                  t);
  if (uns)
    return intImm(static_cast<int64_t>(static_cast<uint64_t>(v)), t);
  return intImm(static_cast<int64_t>(v), t);
}

Expr var(const std::string &name, DType t) {
  NNC_ASSERT(!name.empty(), "var without a name");
  ExprNode n;
  n.kind = ExprKind::Var;
  n.type = t;
  n.name = name;
  return makeExpr(std::move(n));
}

Expr load(int buffer, DType t, Expr index) {
  NNC_ASSERT(index && buffer >= 0, "load: bad buffer or index");
  NNC_ASSERT(index->type == DType::I64, "load: index must be i64, got {}",
             dtypeName(index->type));
  ExprNode n;
  n.kind = ExprKind::Load;
  n.type = t;
  n.buffer = buffer;
  n.args = {std::move(index)};
  return makeExpr(std::move(n));
}

namespace {

/// The result type of elementwise `kind` on `args`, or an error message.
std::string checkOp(OpKind kind, const std::vector<Expr> &args, DType &result) {
  const OpInfo &info = opInfo(kind);
  if (!info.elementwise)
    return fmt::format("'{}' is not an elementwise op", info.name);
  if (static_cast<int>(args.size()) != info.arity)
    return fmt::format("'{}' takes {} operands, got {}", info.name, info.arity, args.size());
  for (const Expr &a : args)
    if (!a)
      return fmt::format("'{}' has a null operand", info.name);
  size_t first = 0;
  if (kind == OpKind::Select) {
    if (args[0]->type != DType::Bool)
      return fmt::format("select condition must be bool, got {}", dtypeName(args[0]->type));
    first = 1;
  }
  DType t = args[first]->type;
  for (size_t k = first; k < args.size(); ++k)
    if (args[k]->type != t)
      return fmt::format("'{}' operand dtypes differ: {} and {}", info.name, dtypeName(t),
                         dtypeName(args[k]->type));
  if (!typeClassAccepts(info.operandTypes, t) || isStorageOnly(t))
    return fmt::format("'{}' operands must have {}, got {}", info.name,
                       typeClassName(info.operandTypes), dtypeName(t));
  result = info.resultClass == ResultClass::BoolResult ? DType::Bool : t;
  return "";
}

} // namespace

Expr op(OpKind kind, std::vector<Expr> args) {
  DType result = DType::I64;
  std::string problem = checkOp(kind, args, result);
  NNC_ASSERT(problem.empty(), "kir::op: {}", problem);

  // Fold integer immediates so that index arithmetic stays small.
  DType t = args[0]->type;
  if (args.size() == 2 && isIntType(t)) {
    const Expr &a = args[0], &b = args[1];
    bool ia = a->kind == ExprKind::IntImm, ib = b->kind == ExprKind::IntImm;
    int64_t out;
    if (ia && ib && foldInts(kind, t, a->intValue, b->intValue, out))
      return intImm(out, t);
    switch (kind) {
    case OpKind::Add:
      if (ib && b->intValue == 0)
        return a;
      if (ia && a->intValue == 0)
        return b;
      break;
    case OpKind::Sub:
      if (ib && b->intValue == 0)
        return a;
      break;
    case OpKind::Mul:
      if (ib && b->intValue == 1)
        return a;
      if (ia && a->intValue == 1)
        return b;
      if ((ib && b->intValue == 0) || (ia && a->intValue == 0))
        return intImm(0, t);
      break;
    case OpKind::Div:
      if (ib && b->intValue == 1)
        return a;
      break;
    case OpKind::Mod:
      if (ib && b->intValue == 1)
        return intImm(0, t);
      break;
    default: break;
    }
  }
  // Constant conditions of index guards.
  if (args.size() == 2 && isIntType(t) && args[0]->kind == ExprKind::IntImm &&
      args[1]->kind == ExprKind::IntImm && !isUnsignedInteger(t)) {
    int64_t a = args[0]->intValue, b = args[1]->intValue;
    switch (kind) {
    case OpKind::Less: return intImm(a < b, DType::Bool);
    case OpKind::LessEqual: return intImm(a <= b, DType::Bool);
    case OpKind::Greater: return intImm(a > b, DType::Bool);
    case OpKind::GreaterEqual: return intImm(a >= b, DType::Bool);
    case OpKind::Equal: return intImm(a == b, DType::Bool);
    default: break;
    }
  }
  if (kind == OpKind::And) {
    for (int k = 0; k < 2; ++k)
      if (args[k]->kind == ExprKind::IntImm)
        return args[k]->intValue ? args[1 - k] : intImm(0, DType::Bool);
  }
  if (kind == OpKind::Select && args[0]->kind == ExprKind::IntImm)
    return args[0]->intValue ? args[1] : args[2];

  ExprNode n;
  n.kind = ExprKind::Op;
  n.type = result;
  n.op = kind;
  n.args = std::move(args);
  return makeExpr(std::move(n));
}

Expr cast(Expr e, DType to) {
  NNC_ASSERT(e, "cast of a null expression");
  if (e->type == to)
    return e;
  if (e->kind == ExprKind::IntImm && isIntType(e->type) && (isIntType(to) || to == DType::Bool))
    return to == DType::Bool ? intImm(e->intValue != 0, DType::Bool) : intImm(e->intValue, to);
  ExprNode n;
  n.kind = ExprKind::Cast;
  n.type = to;
  n.args = {std::move(e)};
  return makeExpr(std::move(n));
}

Expr cast(Expr e, DType to, bool saturate, std::string roundMode) {
  NNC_ASSERT(e, "cast of a null expression");
  if (e->type == to)
    return e;
  if (!isStorageOnly(to))
    return cast(std::move(e), to); // the options only matter for storage-only targets
  ExprNode n;
  n.kind = ExprKind::Cast;
  n.type = to;
  n.args = {std::move(e)};
  n.saturate = saturate;
  n.roundMode = roundMode == "up" ? std::string() : std::move(roundMode);
  return makeExpr(std::move(n));
}

Expr add(Expr a, Expr b) { return op(OpKind::Add, {std::move(a), std::move(b)}); }
Expr sub(Expr a, Expr b) { return op(OpKind::Sub, {std::move(a), std::move(b)}); }
Expr mul(Expr a, Expr b) { return op(OpKind::Mul, {std::move(a), std::move(b)}); }
Expr div(Expr a, Expr b) { return op(OpKind::Div, {std::move(a), std::move(b)}); }
Expr mod(Expr a, Expr b) { return op(OpKind::Mod, {std::move(a), std::move(b)}); }
Expr min(Expr a, Expr b) { return op(OpKind::Min, {std::move(a), std::move(b)}); }
Expr max(Expr a, Expr b) { return op(OpKind::Max, {std::move(a), std::move(b)}); }
Expr select(Expr c, Expr a, Expr b) {
  return op(OpKind::Select, {std::move(c), std::move(a), std::move(b)});
}
Expr lt(Expr a, Expr b) { return op(OpKind::Less, {std::move(a), std::move(b)}); }
Expr ge(Expr a, Expr b) { return op(OpKind::GreaterEqual, {std::move(a), std::move(b)}); }
Expr land(Expr a, Expr b) { return op(OpKind::And, {std::move(a), std::move(b)}); }

bool isIntImm(const Expr &e, int64_t v) {
  return e && e->kind == ExprKind::IntImm && e->intValue == v;
}

// ---- Statement builders ----------------------------------------------------------------------

const char *loopKindName(LoopKind k) {
  switch (k) {
  case LoopKind::Serial: return "serial";
  case LoopKind::Parallel: return "parallel";
  case LoopKind::Vectorized: return "vectorized";
  case LoopKind::Unrolled: return "unrolled";
  }
  return "?";
}

Stmt forLoop(const std::string &v, Expr extent, Stmt body, LoopKind k) {
  NNC_ASSERT(!v.empty() && extent && body, "forLoop: missing name, extent or body");
  NNC_ASSERT(extent->type == DType::I64, "forLoop: extent must be i64, got {}",
             dtypeName(extent->type));
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::For;
  s->name = v;
  s->extent = std::move(extent);
  s->loopKind = k;
  s->body = {std::move(body)};
  return s;
}

Stmt store(int buffer, Expr index, Expr value) {
  NNC_ASSERT(buffer >= 0 && index && value, "store: bad buffer, index or value");
  NNC_ASSERT(index->type == DType::I64, "store: index must be i64, got {}",
             dtypeName(index->type));
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Store;
  s->buffer = buffer;
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

Stmt decl(const std::string &name, DType t, Expr init) {
  NNC_ASSERT(!name.empty() && init, "decl: missing name or initializer");
  NNC_ASSERT(init->type == t, "decl '{}': initializer is {}, not {}", name,
             dtypeName(init->type), dtypeName(t));
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Decl;
  s->name = name;
  s->type = t;
  s->value = std::move(init);
  return s;
}

Stmt assign(const std::string &name, Expr value) {
  NNC_ASSERT(!name.empty() && value, "assign: missing name or value");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Assign;
  s->name = name;
  s->type = value->type;
  s->value = std::move(value);
  return s;
}

Stmt accumulate(const std::string &name, Expr value) {
  Stmt s = assign(name, std::move(value));
  s->reassociate = true;
  return s;
}

Stmt ifThen(Expr cond, Stmt then, Stmt otherwise) {
  NNC_ASSERT(cond && then, "ifThen: missing condition or body");
  NNC_ASSERT(cond->type == DType::Bool, "ifThen: condition must be bool, got {}",
             dtypeName(cond->type));
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::If;
  s->value = std::move(cond);
  s->body = {std::move(then), std::move(otherwise)};
  return s;
}

Stmt block(std::vector<Stmt> stmts) {
  for (const Stmt &s : stmts)
    NNC_ASSERT(s, "block: null statement");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Block;
  s->body = std::move(stmts);
  return s;
}

Stmt gemmTile(const GemmTileShape &shape, int c, Expr aOff, Expr bOff, Expr cOff, Expr kc) {
  NNC_ASSERT(shape.a >= 0 && shape.b >= 0 && c >= 0 && shape.mr > 0 && shape.nr > 0,
             "gemmTile: bad buffers or tile size");
  for (const Expr &e : {aOff, bOff, cOff, kc})
    NNC_ASSERT(e && e->type == DType::I64, "gemmTile: offsets and k extent must be i64");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::GemmTile;
  s->buffer = c;
  s->tile = shape;
  s->args = {std::move(aOff), std::move(bOff), std::move(cOff), std::move(kc)};
  return s;
}

// ---- Printer ---------------------------------------------------------------------------------

namespace {

struct Printer {
  const Kernel *kernel = nullptr;
  bool anonymous = false; ///< Buffers as b0, b1, ... (signatures).

  std::string bufferName(int b) const {
    if (anonymous || !kernel || b < 0 || b >= static_cast<int>(kernel->buffers.size()))
      return fmt::format("b{}", b);
    return kernel->buffers[b].name;
  }

  static const char *infix(OpKind k) {
    switch (k) {
    case OpKind::Add: return "+";
    case OpKind::Sub: return "-";
    case OpKind::Mul: return "*";
    case OpKind::Div: return "/";
    case OpKind::Mod: return "%";
    case OpKind::Less: return "<";
    case OpKind::LessEqual: return "<=";
    case OpKind::Greater: return ">";
    case OpKind::GreaterEqual: return ">=";
    case OpKind::Equal: return "==";
    case OpKind::And: return "&&";
    case OpKind::Or: return "||";
    default: return nullptr;
    }
  }

  static std::string floatText(double v, DType t) {
    std::string s;
    if (std::isnan(v))
      s = "nan";
    else if (std::isinf(v))
      s = v < 0 ? "-inf" : "inf";
    else {
      s = t == DType::F64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
      if (s.find_first_of(".e") == std::string::npos)
        s += ".0";
    }
    return s + std::string(dtypeName(t));
  }

  std::string expr(const Expr &e, bool nested = false) const {
    if (!e)
      return "<null>";
    switch (e->kind) {
    case ExprKind::IntImm:
      if (e->type == DType::Bool)
        return e->intValue ? "true" : "false";
      if (e->type == DType::I64)
        return fmt::format("{}", e->intValue);
      if (e->type == DType::U64)
        return fmt::format("{}u64", static_cast<uint64_t>(e->intValue));
      return fmt::format("{}{}", e->intValue, dtypeName(e->type));
    case ExprKind::FloatImm: return floatText(e->floatValue, e->type);
    case ExprKind::Var: return e->name;
    case ExprKind::Load:
      return fmt::format("{}[{}]", bufferName(e->buffer), e->args.empty() ? "?" : expr(e->args[0]));
    case ExprKind::Cast: {
      std::string opts;
      if (!e->saturate)
        opts += ", saturate=0";
      if (!e->roundMode.empty() && e->roundMode != "up")
        opts += ", round_mode=" + e->roundMode;
      return fmt::format("cast<{}{}>({})", dtypeName(e->type), opts,
                         e->args.empty() ? "?" : expr(e->args[0]));
    }
    case ExprKind::Op: {
      const char *in = infix(e->op);
      if (in && e->args.size() == 2) {
        std::string s = expr(e->args[0], true) + " " + in + " " + expr(e->args[1], true);
        return nested ? "(" + s + ")" : s;
      }
      std::string s(opInfo(e->op).name);
      s += "(";
      for (size_t k = 0; k < e->args.size(); ++k)
        s += (k ? ", " : "") + expr(e->args[k]);
      return s + ")";
    }
    }
    return "?";
  }

  void stmt(const Stmt &s, int indent, std::string &out) const {
    std::string pad(indent * 2, ' ');
    if (!s) {
      out += pad + "<null>\n";
      return;
    }
    switch (s->kind) {
    case StmtKind::For:
      out += fmt::format("{}for {} in 0..{}{}{} {{\n", pad, s->name, expr(s->extent),
                         s->loopKind == LoopKind::Serial ? "" : " ",
                         s->loopKind == LoopKind::Serial ? "" : loopKindName(s->loopKind));
      for (const Stmt &b : s->body)
        stmt(b, indent + 1, out);
      out += pad + "}\n";
      return;
    case StmtKind::Store:
      out += fmt::format("{}{}[{}] = {}\n", pad, bufferName(s->buffer), expr(s->index),
                         expr(s->value));
      return;
    case StmtKind::Decl:
      out += fmt::format("{}var {}: {} = {}\n", pad, s->name, dtypeName(s->type), expr(s->value));
      return;
    case StmtKind::Assign:
      out += fmt::format("{}{} {} {}\n", pad, s->name, s->reassociate ? "=reassoc" : "=",
                         expr(s->value));
      return;
    case StmtKind::If:
      out += fmt::format("{}if {} {{\n", pad, expr(s->value));
      if (!s->body.empty())
        stmt(s->body[0], indent + 1, out);
      if (s->body.size() > 1 && s->body[1]) {
        out += pad + "} else {\n";
        stmt(s->body[1], indent + 1, out);
      }
      out += pad + "}\n";
      return;
    case StmtKind::Block:
      for (const Stmt &b : s->body)
        stmt(b, indent, out);
      return;
    case StmtKind::GemmTile: {
      const GemmTileShape &t = s->tile;
      out += fmt::format("{}gemm_tile {}x{} {}[{}; ldc {}] {}= {}[{}; lda {}, ak {}] * "
                         "{}[{}; ldb {}{}] over k < {}\n",
                         pad, t.mr, t.nr, bufferName(s->buffer), expr(s->args[2]), t.ldc,
                         t.accumulate ? "+" : "", bufferName(t.a), expr(s->args[0]), t.lda, t.ak,
                         bufferName(t.b), expr(s->args[1]), t.ldb,
                         t.prefetchB ? fmt::format(", prefetch +{}", t.prefetchB) : "",
                         expr(s->args[3]));
      return;
    }
    }
  }

  static const char *roleName(BufferRole r) {
    switch (r) {
    case BufferRole::Operand: return "operand";
    case BufferRole::Result: return "result";
    case BufferRole::Scratch: return "scratch";
    case BufferRole::Extent: return "extent";
    }
    return "?";
  }

  std::string kernelText(const Kernel &k) const {
    std::string out = fmt::format("kernel {}(", anonymous ? std::string("_") : k.name);
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      const BufferDecl &d = k.buffers[b];
      out += fmt::format("{}{}: {}[{}] {} {}{}", b ? ", " : "", bufferName(static_cast<int>(b)),
                         dtypeName(d.dtype), d.numElements, roleName(d.role), d.index,
                         d.written ? " written" : "");
    }
    out += ") {\n";
    stmt(k.body, 1, out);
    out += "}\n";
    if (!k.schedule.steps.empty())
      out += "schedule: " + k.schedule.str() + "\n";
    return out;
  }
};

} // namespace

std::string printExpr(const Expr &e) { return Printer().expr(e); }

std::string printStmt(const Stmt &s, int indent) {
  std::string out;
  Printer().stmt(s, indent, out);
  return out;
}

std::string printKernel(const Kernel &k) {
  Printer p;
  p.kernel = &k;
  return p.kernelText(k);
}

std::string Kernel::signature() const {
  Printer p;
  p.kernel = this;
  p.anonymous = true;
  return p.kernelText(*this);
}

// ---- Verifier --------------------------------------------------------------------------------

namespace {

struct Verifier {
  const Kernel &k;
  struct Local {
    std::string name;
    DType type;
    bool mutableLocal; ///< A Decl (assignable); loop variables are not.
  };
  std::vector<Local> scope;
  std::set<std::string> loopNames;
  int parallelDepth = 0;

  explicit Verifier(const Kernel &kernel) : k(kernel) {}

  Error fail(const std::string &msg) const {
    return makeError("kernel {}: {}", k.name, msg);
  }

  const Local *lookup(const std::string &n) const {
    for (size_t i = scope.size(); i-- > 0;)
      if (scope[i].name == n)
        return &scope[i];
    return nullptr;
  }

  Error checkBuffer(int b, const char *what) const {
    if (b < 0 || b >= static_cast<int>(k.buffers.size()))
      return fail(fmt::format("{} of buffer {} which does not exist ({} buffers)", what, b,
                              k.buffers.size()));
    return Error::success();
  }

  Error checkIndex(int b, const Expr &index, const char *what) {
    NNC_TRY(expr(index));
    if (index->type != DType::I64)
      return fail(fmt::format("{} index into '{}' must be i64, got {}", what,
                              k.buffers[b].name, dtypeName(index->type)));
    if (index->kind == ExprKind::IntImm &&
        (index->intValue < 0 || index->intValue >= k.buffers[b].numElements))
      return fail(fmt::format("{} at index {} is out of bounds of '{}' ({} elements)", what,
                              index->intValue, k.buffers[b].name, k.buffers[b].numElements));
    return Error::success();
  }

  Error expr(const Expr &e) {
    if (!e)
      return fail("null expression");
    switch (e->kind) {
    case ExprKind::IntImm:
      if (!isInteger(e->type) && e->type != DType::Bool)
        return fail(fmt::format("integer immediate of type {}", dtypeName(e->type)));
      return Error::success();
    case ExprKind::FloatImm:
      if (!isFloat(e->type))
        return fail(fmt::format("float immediate of type {}", dtypeName(e->type)));
      return Error::success();
    case ExprKind::Var: {
      const Local *l = lookup(e->name);
      if (!l)
        return fail(fmt::format("variable '{}' is not in scope", e->name));
      if (l->type != e->type)
        return fail(fmt::format("variable '{}' is {} but used as {}", e->name,
                                dtypeName(l->type), dtypeName(e->type)));
      return Error::success();
    }
    case ExprKind::Load: {
      NNC_TRY(checkBuffer(e->buffer, "load"));
      if (e->args.size() != 1)
        return fail("load without exactly one index");
      const BufferDecl &d = k.buffers[e->buffer];
      if (e->type != d.dtype)
        return fail(fmt::format("load of {} from '{}' which holds {}", dtypeName(e->type),
                                d.name, dtypeName(d.dtype)));
      return checkIndex(e->buffer, e->args[0], "load");
    }
    case ExprKind::Op: {
      for (const Expr &a : e->args)
        NNC_TRY(expr(a));
      DType result = DType::I64;
      std::string problem = checkOp(e->op, e->args, result);
      if (!problem.empty())
        return fail(problem);
      if (result != e->type)
        return fail(fmt::format("'{}' gives {} but is typed {}", opInfo(e->op).name,
                                dtypeName(result), dtypeName(e->type)));
      return Error::success();
    }
    case ExprKind::Cast:
      if (e->args.size() != 1)
        return fail("cast without exactly one operand");
      NNC_TRY(expr(e->args[0]));
      // Storage-only values are only loaded, stored and cast (no ops take them), so any
      // cast between dtypes is fine; its options must be valid.
      if (!e->roundMode.empty() && e->roundMode != "up" && e->roundMode != "down" &&
          e->roundMode != "nearest")
        return fail(fmt::format("cast to {} with round mode '{}' (up, down or nearest)",
                                dtypeName(e->type), e->roundMode));
      return Error::success();
    }
    return fail("unknown expression kind");
  }

  Error stmt(const Stmt &s) {
    if (!s)
      return fail("null statement");
    switch (s->kind) {
    case StmtKind::For: {
      NNC_TRY(expr(s->extent));
      if (s->extent->type != DType::I64)
        return fail(fmt::format("loop '{}' extent must be i64, got {}", s->name,
                                dtypeName(s->extent->type)));
      if (s->name.empty())
        return fail("loop without a variable name");
      if (!loopNames.insert(s->name).second)
        return fail(fmt::format("loop variable '{}' is used by more than one loop", s->name));
      if (lookup(s->name))
        return fail(fmt::format("loop variable '{}' shadows a local", s->name));
      if (s->body.size() != 1)
        return fail(fmt::format("loop '{}' must have exactly one body statement", s->name));
      bool par = s->loopKind == LoopKind::Parallel;
      if (par && parallelDepth > 0)
        return fail(fmt::format("parallel loop '{}' is nested in another parallel loop",
                                s->name));
      parallelDepth += par;
      scope.push_back({s->name, DType::I64, false});
      Error err = stmt(s->body[0]);
      scope.pop_back();
      parallelDepth -= par;
      return err;
    }
    case StmtKind::Store: {
      NNC_TRY(checkBuffer(s->buffer, "store"));
      const BufferDecl &d = k.buffers[s->buffer];
      if (!d.written)
        return fail(fmt::format("store to '{}' which is not marked written", d.name));
      NNC_TRY(expr(s->value));
      if (s->value->type != d.dtype)
        return fail(fmt::format("store of {} to '{}' which holds {}", dtypeName(s->value->type),
                                d.name, dtypeName(d.dtype)));
      return checkIndex(s->buffer, s->index, "store");
    }
    case StmtKind::Decl:
      NNC_TRY(expr(s->value));
      if (s->value->type != s->type)
        return fail(fmt::format("local '{}' of {} initialized with {}", s->name,
                                dtypeName(s->type), dtypeName(s->value->type)));
      if (lookup(s->name))
        return fail(fmt::format("local '{}' is declared twice in one scope chain", s->name));
      scope.push_back({s->name, s->type, true});
      return Error::success();
    case StmtKind::Assign: {
      NNC_TRY(expr(s->value));
      const Local *l = lookup(s->name);
      if (!l)
        return fail(fmt::format("assignment to undeclared local '{}'", s->name));
      if (!l->mutableLocal)
        return fail(fmt::format("assignment to loop variable '{}'", s->name));
      if (l->type != s->value->type)
        return fail(fmt::format("assignment of {} to local '{}' of {}",
                                dtypeName(s->value->type), s->name, dtypeName(l->type)));
      return Error::success();
    }
    case StmtKind::If: {
      NNC_TRY(expr(s->value));
      if (s->value->type != DType::Bool)
        return fail(fmt::format("if condition must be bool, got {}", dtypeName(s->value->type)));
      if (s->body.empty() || !s->body[0])
        return fail("if without a then-branch");
      for (size_t b = 0; b < s->body.size() && b < 2; ++b) {
        if (!s->body[b])
          continue;
        size_t mark = scope.size();
        Error err = stmt(s->body[b]);
        scope.resize(mark);
        NNC_TRY(err);
      }
      return Error::success();
    }
    case StmtKind::Block: {
      size_t mark = scope.size();
      for (const Stmt &b : s->body) {
        Error err = stmt(b);
        if (err) {
          scope.resize(mark);
          return err;
        }
      }
      scope.resize(mark);
      return Error::success();
    }
    case StmtKind::GemmTile: return gemmTile(*s);
    }
    return fail("unknown statement kind");
  }

  Error gemmTile(const StmtNode &s) {
    const GemmTileShape &t = s.tile;
    if (s.args.size() != 4)
      return fail("gemm_tile without A, B, C offsets and a k extent");
    for (const Expr &e : s.args) {
      NNC_TRY(expr(e));
      if (e->type != DType::I64)
        return fail("gemm_tile offset or k extent is not i64");
    }
    for (int b : {t.a, t.b, s.buffer}) {
      NNC_TRY(checkBuffer(b, "gemm_tile"));
      if (k.buffers[b].dtype != DType::F32)
        return fail(fmt::format("gemm_tile on '{}' of {} (f32 only)", k.buffers[b].name,
                                dtypeName(k.buffers[b].dtype)));
    }
    if (!k.buffers[s.buffer].written)
      return fail(fmt::format("gemm_tile writes '{}' which is not marked written",
                              k.buffers[s.buffer].name));
    if (t.mr <= 0 || t.nr <= 0 || t.lda < 0 || t.ak < 0 || t.ldb < 0 || t.ldc < 0)
      return fail(fmt::format("gemm_tile {}x{} with a negative stride", t.mr, t.nr));
    // With constant offsets and k extent, the last element each operand touches must lie
    // in its buffer.
    auto imm = [](const Expr &e) { return e->kind == ExprKind::IntImm; };
    if (imm(s.args[3]) && s.args[3]->intValue > 0) {
      int64_t kc = s.args[3]->intValue;
      struct Reach {
        int buffer;
        const Expr &off;
        int64_t last;
      } reach[] = {{t.a, s.args[0], (t.mr - 1) * t.lda + (kc - 1) * t.ak},
                   {t.b, s.args[1], (kc - 1) * t.ldb + t.nr - 1},
                   {s.buffer, s.args[2], (t.mr - 1) * t.ldc + t.nr - 1}};
      for (const Reach &r : reach)
        if (imm(r.off) && (r.off->intValue < 0 ||
                           r.off->intValue + r.last >= k.buffers[r.buffer].numElements))
          return fail(fmt::format("gemm_tile reaches element {} of '{}' ({} elements)",
                                  r.off->intValue + r.last, k.buffers[r.buffer].name,
                                  k.buffers[r.buffer].numElements));
    }
    return Error::success();
  }
};

} // namespace

Error verifyKernel(const Kernel &k) {
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const BufferDecl &d = k.buffers[b];
    if (d.numElements < 0)
      return makeError("kernel {}: buffer '{}' has {} elements", k.name, d.name, d.numElements);
  }
  {
    Verifier v(k);
    NNC_TRY(v.stmt(k.body));
  }
  if (!k.schedule.steps.empty()) {
    Expected<Stmt> scheduled = applySchedule(k);
    if (!scheduled)
      return scheduled.takeError();
    Kernel copy;
    copy.name = k.name;
    copy.buffers = k.buffers;
    copy.body = *scheduled;
    Verifier v(copy);
    if (Error e = v.stmt(copy.body))
      return e.withContext("after schedule '" + k.schedule.str() + "'");
  }
  return Error::success();
}

} // namespace nnc::kir

// The kernel-level IR's builders: expressions (with integer folding) and statements. The text
// printer and signatures are in KernelPrinter.cpp, the verifier in KernelVerifier.cpp, the
// schedule transforms in KernelSchedule.cpp, the tree-walking evaluator in KernelEvaluator.cpp.
#include "nnc/ir/Kernel.h"

#include <cmath>

#include <fmt/format.h>

#include "KernelCheck.h"
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

/// Folds `a kind b` on two integer immediates of type t (the rules of nnc/ir/ScalarOps.h:
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

Expr bitCast(Expr e, DType to) {
  NNC_ASSERT(
      e && dtypeSize(e->type) == dtypeSize(to) && (isFloat(e->type) != isFloat(to)) &&
          (e->type == DType::F32 || e->type == DType::F64 || to == DType::F32 || to == DType::F64),
      "bitCast between {} and {}", e ? dtypeName(e->type) : "null", dtypeName(to));
  ExprNode n;
  n.kind = ExprKind::BitCast;
  n.type = to;
  n.args = {std::move(e)};
  return makeExpr(std::move(n));
}

Expr fma(Expr a, Expr b, Expr c) {
  NNC_ASSERT(a && b && c && (a->type == DType::F32 || a->type == DType::F64) &&
                 b->type == a->type && c->type == a->type,
             "fma operands must share f32 or f64");
  ExprNode n;
  n.kind = ExprKind::Fma;
  n.type = a->type;
  n.args = {std::move(a), std::move(b), std::move(c)};
  return makeExpr(std::move(n));
}

Expr rem(Expr a, Expr b) {
  NNC_ASSERT(a && b && a->type == b->type && (isFloat(a->type) || isInteger(a->type)),
             "rem operands must share a numeric dtype");
  ExprNode n;
  n.kind = ExprKind::Rem;
  n.type = a->type;
  n.args = {std::move(a), std::move(b)};
  return makeExpr(std::move(n));
}

Expr call(const std::string &name, std::vector<Expr> args) {
  NNC_ASSERT(!args.empty() && args[0] &&
                 (args[0]->type == DType::F32 || args[0]->type == DType::F64),
             "call {}: operands must be f32 or f64", name);
  ExprNode n;
  n.kind = ExprKind::Call;
  n.type = args[0]->type;
  n.name = name;
  n.args = std::move(args);
  return makeExpr(std::move(n));
}

namespace {
Expr intPrimitive(ExprKind kind, Expr a, Expr b, bool unsignedOnly) {
  NNC_ASSERT(a && b && a->type == b->type && isInteger(a->type) &&
                 (!unsignedOnly || isUnsignedInteger(a->type)),
             "integer primitive operands must share an {} dtype",
             unsignedOnly ? "unsigned" : "integer");
  ExprNode n;
  n.kind = kind;
  n.type = a->type;
  n.args = {std::move(a), std::move(b)};
  return makeExpr(std::move(n));
}
} // namespace

Expr quot(Expr a, Expr b) {
  return intPrimitive(ExprKind::Quot, std::move(a), std::move(b), /*unsignedOnly=*/false);
}
Expr shl(Expr a, Expr b) {
  return intPrimitive(ExprKind::Shl, std::move(a), std::move(b), /*unsignedOnly=*/true);
}
Expr shr(Expr a, Expr b) {
  return intPrimitive(ExprKind::Shr, std::move(a), std::move(b), /*unsignedOnly=*/true);
}

Expr convert(Expr e, DType to) {
  NNC_ASSERT(e && !isStorageOnly(e->type) && !isStorageOnly(to), "convert between {} and {}",
             e ? dtypeName(e->type) : "null", dtypeName(to));
  if (e->type == to)
    return e;
  ExprNode n;
  n.kind = ExprKind::Convert;
  n.type = to;
  n.args = {std::move(e)};
  return makeExpr(std::move(n));
}

Expr strict(Expr e) {
  if (!e || (e->kind != ExprKind::Op && e->kind != ExprKind::Fma) || e->strict)
    return e;
  auto n = std::make_shared<ExprNode>(*e);
  n->strict = true;
  return n;
}

bool isIntImm(const Expr &e, int64_t v) {
  return e && e->kind == ExprKind::IntImm && e->intValue == v;
}

bool mentions(const Expr &e, const std::set<std::string> &names) {
  if (!e)
    return false;
  if (e->kind == ExprKind::Var && names.count(e->name))
    return true;
  for (const Expr &a : e->args)
    if (mentions(a, names))
      return true;
  return false;
}

Expr rewrite(const Expr &e, const std::function<Expr(const Expr &)> &replace) {
  if (!e)
    return e;
  if (Expr r = replace(e))
    return r;
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr &a : e->args) {
    args.push_back(rewrite(a, replace));
    changed = changed || args.back() != a;
  }
  if (!changed)
    return e;
  if (e->kind == ExprKind::Load)
    return load(e->buffer, e->type, args[0]);
  if (e->kind == ExprKind::Op && !e->strict)
    return op(e->op, std::move(args)); // refolds index arithmetic
  auto n = std::make_shared<ExprNode>(*e);
  n->args = std::move(args);
  return n;
}

// ---- Statement builders ----------------------------------------------------------------------

void rewriteStmt(const Stmt &s, const std::function<Expr(const Expr &)> &replace) {
  if (!s)
    return;
  s->extent = rewrite(s->extent, replace);
  s->index = rewrite(s->index, replace);
  s->value = rewrite(s->value, replace);
  for (Expr &a : s->args)
    a = rewrite(a, replace);
  for (const Stmt &b : s->body)
    rewriteStmt(b, replace);
}

const char *gemmElemsName(GemmElems e) {
  return e == GemmElems::U8S8S32 ? "u8s8s32" : e == GemmElems::BF16 ? "bf16" : "f32";
}

const char *loopKindName(LoopKind k) {
  switch (k) {
  case LoopKind::Serial: return "serial";
  case LoopKind::Parallel: return "parallel";
  case LoopKind::Vectorized: return "vectorized";
  case LoopKind::Unrolled: return "unrolled";
  case LoopKind::Scalar:
    return "scalar";
  case LoopKind::GpuBlock:
    return "gpu_block";
  case LoopKind::GpuThread:
    return "gpu_thread";
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

Stmt accumulateIgnoringNaN(const std::string &name, DType t, Expr x, bool isMax) {
  NNC_ASSERT(isFloat(t), "accumulateIgnoringNaN: {} is not a float type", dtypeName(t));
  Stmt s = accumulate(name, op(isMax ? OpKind::Max : OpKind::Min, {var(name, t), std::move(x)}));
  s->ignoresNaN = true;
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

Stmt convTile(const ConvTileShape &shape, int c, std::vector<Expr> args) {
  NNC_ASSERT(shape.x >= 0 && shape.w >= 0 && c >= 0 && shape.cols > 0 && shape.blocks > 0 &&
                 shape.lanes > 0 && args.size() == 8,
             "convTile: bad buffers, tile size or arguments");
  for (const Expr &e : args)
    NNC_ASSERT(e && e->type == DType::I64, "convTile: offsets and extents must be i64");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::ConvTile;
  s->buffer = c;
  s->conv = shape;
  s->args = std::move(args);
  return s;
}

Stmt barrier() {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Barrier;
  return s;
}

Stmt vecLoad(std::vector<std::string> names, DType t, int buffer, Expr index) {
  NNC_ASSERT(names.size() >= 2 && index && index->type == DType::I64,
             "vecLoad: needs lanes and an i64 index");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::VecLoad;
  s->names = std::move(names);
  s->type = t;
  s->buffer = buffer;
  s->index = std::move(index);
  return s;
}

Stmt vecStore(int buffer, Expr index, std::vector<Expr> values) {
  NNC_ASSERT(values.size() >= 2 && index && index->type == DType::I64,
             "vecStore: needs lanes and an i64 index");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::VecStore;
  s->buffer = buffer;
  s->index = std::move(index);
  s->args = std::move(values);
  return s;
}

Stmt prefetch(int buffer, Expr index, bool write) {
  NNC_ASSERT(index && index->type == DType::I64, "prefetch: needs an i64 index");
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::Prefetch;
  s->buffer = buffer;
  s->index = std::move(index);
  s->write = write;
  return s;
}

bool Kernel::hasBuffer(int b) const {
  if (isLocalBuffer(b))
    return b - kLocalBufferBase < static_cast<int>(locals.size());
  return b >= 0 && b < static_cast<int>(buffers.size());
}

DType Kernel::bufferType(int b) const {
  return isLocalBuffer(b) ? locals.at(b - kLocalBufferBase).dtype : buffers.at(b).dtype;
}

int64_t Kernel::bufferElements(int b) const {
  return isLocalBuffer(b) ? locals.at(b - kLocalBufferBase).numElements : buffers.at(b).numElements;
}

const std::string &Kernel::bufferName(int b) const {
  return isLocalBuffer(b) ? locals.at(b - kLocalBufferBase).name : buffers.at(b).name;
}

bool containsBarrier(const Stmt &s) {
  if (!s)
    return false;
  if (s->kind == StmtKind::Barrier)
    return true;
  for (const Stmt &b : s->body)
    if (containsBarrier(b))
      return true;
  return false;
}

bool Kernel::usesWorkGroupMemory() const {
  return !locals.empty() || containsBarrier(body);
}

} // namespace nnc::kir

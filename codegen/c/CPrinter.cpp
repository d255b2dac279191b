// The C-style printer of the kernel IR shared by the C-like emitters (see CPrinter.h).
//
// Values are held in their compute type (float for f16/bf16); an op whose result is f16/bf16
// is rounded to that format right away, like codegen/llvm/Emitter.cpp. Integer arithmetic
// that can overflow is done in the unsigned type (C's signed overflow is undefined; the IR's
// wraps), and every result is cast back to its type (C promotes small integers to int).
#include "c/CPrinter.h"

#include <cmath>
#include <cstring>

#include "nnc/support/Float16.h"
#include "nnc/support/FloatFormats.h"

namespace nnc::cgen {

namespace {

DType unsignedOf(DType t) {
  switch (t) {
  case DType::I8: return DType::U8;
  case DType::I16: return DType::U16;
  case DType::I32: return DType::U32;
  case DType::I64: return DType::U64;
  default: return t;
  }
}


/// The FloatFormat parameters of a float storage format, or nullopt for f8e8m0.
std::optional<fp::FloatFormat> formatOf(DType t) {
  switch (t) {
  case DType::F8E4M3FN: return fp::kE4M3FN;
  case DType::F8E4M3FNUZ: return fp::kE4M3FNUZ;
  case DType::F8E5M2: return fp::kE5M2;
  case DType::F8E5M2FNUZ: return fp::kE5M2FNUZ;
  case DType::F4E2M1: return fp::kF4E2M1;
  default: return std::nullopt;
  }
}

std::string paren(const std::string &s) { return "(" + s + ")"; }

bool isMinMax(OpKind k) { return k == OpKind::Min || k == OpKind::Max; }

} // namespace

std::string CPrinter::varName(const std::string &name) {
  std::string out = "v_";
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += c;
    else if (c == '_')
      out += "__";
    else
      out += fmt::format("_{:02x}", static_cast<unsigned char>(c));
  }
  return out;
}

std::string CPrinter::bufferName(int i) const {
  std::string out = kir::isLocalBuffer(i) ? fmt::format("l{}_", i - kir::kLocalBufferBase)
                                          : fmt::format("b{}_", i);
  for (char c : k_->bufferName(i))
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string CPrinter::barrierStmt() {
  fail("a work-group barrier has no C form");
  return "";
}

std::string CPrinter::vectorLoad(DType, const std::vector<std::string> &, const std::string &,
                                 const std::string &) {
  return "";
}

std::string CPrinter::vectorStore(DType, const std::vector<std::string> &, const std::string &,
                                  const std::string &) {
  return "";
}

std::string CPrinter::fail(const std::string &msg) {
  if (!error_)
    error_ = msg;
  return "0";
}

std::string CPrinter::computeType(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16: return "float";
  case DType::F64: usesDouble_ = true; return "double";
  case DType::I8: return "int8_t";
  case DType::U8: return "uint8_t";
  case DType::I16: return "int16_t";
  case DType::U16: return "uint16_t";
  case DType::I32: return "int32_t";
  case DType::U32: return "uint32_t";
  case DType::I64: return "int64_t";
  case DType::U64: return "uint64_t";
  case DType::Bool: return "bool";
  default: return computeType(DType::U8);
  }
}

std::string CPrinter::storageType(DType t) {
  if (t == DType::F16 || t == DType::BF16)
    return computeType(DType::U16);
  if (t == DType::Bool)
    return computeType(DType::U8);
  return computeType(t);
}

std::string CPrinter::loadElement(DType t, const std::string &buf, const std::string &index) {
  std::string e = buf + "[" + index + "]";
  switch (t) {
  case DType::BF16:
    return fmt::format("{}({})", uintAsFloat(), fmt::format("(({})({}) << 16)",
                                                            computeType(DType::U32), e));
  case DType::Bool: return paren(e + " != 0");
  case DType::F16: return fail("f16 buffers need the dialect's half loads");
  default: return e;
  }
}

std::string CPrinter::storeElement(DType t, const std::string &buf, const std::string &index,
                                   const std::string &value) {
  std::string v = value;
  switch (t) {
  case DType::BF16:
    v = fmt::format("({})({}({}({})) >> 16)", computeType(DType::U16), floatAsUint(),
                    roundBf16Helper(), value);
    break;
  case DType::Bool: v = fmt::format("({}){}", computeType(DType::U8), paren(value)); break;
  case DType::F16: return fail("f16 buffers need the dialect's half stores");
  default: break;
  }
  return buf + "[" + index + "] = " + v + ";";
}

std::string CPrinter::mathFn(const char *name, DType t) {
  return t == DType::F64 ? std::string(name) : std::string(name) + "f";
}

void CPrinter::need(const std::string &name, const std::string &code) {
  if (helperNames_.insert(name).second)
    helpers_.emplace_back(name, code);
}

std::string CPrinter::helpers() const {
  std::string out;
  for (const auto &[name, code] : helpers_)
    out += code + "\n";
  return out;
}

// ---- Literals ---------------------------------------------------------------------------------

std::string CPrinter::intLiteral(int64_t v, DType t) {
  if (t == DType::Bool)
    return v ? "true" : "false";
  std::string ct = computeType(t);
  if (v == INT64_MIN)
    return fmt::format("(({})(-9223372036854775807L - 1))", ct);
  if (t == DType::I64)
    return fmt::format("{}L", v);
  if (t == DType::U64)
    return fmt::format("{}UL", static_cast<uint64_t>(v));
  return fmt::format("(({}){})", ct, v);
}

std::string CPrinter::literal(double v, DType t) {
  if (t == DType::F64) {
    usesDouble_ = true;
    if (std::isnan(v))
      return "((double)NAN)";
    if (std::isinf(v))
      return v > 0 ? "((double)INFINITY)" : "(-(double)INFINITY)";
    return fmt::format("({:a})", v);
  }
  float f = static_cast<float>(v);
  if (std::isnan(f))
    return "NAN";
  if (std::isinf(f))
    return f > 0 ? "INFINITY" : "(-INFINITY)";
  return fmt::format("({:a}f)", static_cast<double>(f));
}

// ---- Expressions ------------------------------------------------------------------------------

std::string CPrinter::roundTo(DType t, const std::string &v) {
  if (t == DType::F16)
    return roundF16Helper() + paren(v);
  if (t == DType::BF16)
    return roundBf16Helper() + paren(v);
  return v;
}

std::string CPrinter::expr(const kir::Expr &ep) {
  if (!ep)
    return fail("null expression");
  const kir::ExprNode &e = *ep;
  if (kir::isComposite(e) && !(e.kind == kir::ExprKind::Op && isMinMax(e.op)))
    return fail("composite " + kir::printExpr(ep) + " reached the printer (codegenBody expands it)");
  switch (e.kind) {
  case kir::ExprKind::IntImm:
    if (isFloat(e.type)) {
      double d = static_cast<double>(e.intValue);
      if (e.type == DType::F16)
        return literal(halfToFloat(floatToHalf(static_cast<float>(d))), e.type);
      if (e.type == DType::BF16)
        return literal(bf16ToFloat(floatToBf16(static_cast<float>(d))), e.type);
      return literal(d, e.type);
    }
    return intLiteral(e.intValue, e.type);
  case kir::ExprKind::FloatImm: {
    if (e.type == DType::F16)
      return literal(halfToFloat(floatToHalf(static_cast<float>(e.floatValue))), e.type);
    if (e.type == DType::BF16)
      return literal(bf16ToFloat(floatToBf16(static_cast<float>(e.floatValue))), e.type);
    if (isFloat(e.type))
      return literal(e.floatValue, e.type);
    if (e.type == DType::Bool)
      return e.floatValue != 0 ? "true" : "false";
    if (isInteger(e.type)) {
      uint64_t bits = fp::floatToIntBits(e.floatValue, isUnsignedInteger(e.type));
      // The low bits of the 64-bit pattern, as the LLVM emitter's cast gives.
      return convertExpr(intLiteral(static_cast<int64_t>(bits), DType::I64), DType::I64, e.type);
    }
    return fail(fmt::format("float constant of {}", dtypeName(e.type)));
  }
  case kir::ExprKind::Var: return varName(e.name);
  case kir::ExprKind::Load: {
    if (!k_->hasBuffer(e.buffer) || e.args.empty())
      return fail(fmt::format("load from buffer {} of {}", e.buffer, k_->buffers.size()));
    return loadElement(k_->bufferType(e.buffer), bufferName(e.buffer), expr(e.args[0]));
  }
  case kir::ExprKind::Op: return opExpr(e);
  case kir::ExprKind::BitCast:
    if (e.args.size() != 1)
      return fail("bitcast needs one operand");
    return bitCast(expr(e.args[0]), e.type);
  case kir::ExprKind::Quot:
  case kir::ExprKind::Shl:
  case kir::ExprKind::Shr: {
    if (e.args.size() != 2)
      return fail("an integer primitive needs two operands");
    const char *o = e.kind == kir::ExprKind::Quot ? "/" : e.kind == kir::ExprKind::Shl ? "<<"
                                                                                          : ">>";
    return fmt::format("(({})({} {} {}))", computeType(e.type), expr(e.args[0]), o,
                       expr(e.args[1]));
  }
  case kir::ExprKind::Convert:
    if (e.args.size() != 1)
      return fail("convert needs one operand");
    return convertExpr(expr(e.args[0]), e.args[0]->type, e.type);
  case kir::ExprKind::Fma:
  case kir::ExprKind::Rem:
  case kir::ExprKind::Call: {
    std::vector<std::string> a;
    for (const kir::Expr &x : e.args)
      a.push_back(expr(x));
    std::string args = fmt::format("({})", fmt::join(a, ", "));
    if (e.kind == kir::ExprKind::Call)
      return mathFn(e.name.c_str(), e.type) + args;
    if (e.kind == kir::ExprKind::Fma)
      return mathFn("fma", e.type) + args;
    if (a.size() != 2)
      return fail("rem needs two operands");
    if (isFloat(e.type))
      return roundTo(e.type, mathFn("fmod", e.type) + args);
    // The expansion of mod/fmod keeps the divisor away from 0 and -1.
    return fmt::format("(({})({} % {}))", computeType(e.type), a[0], a[1]);
  }
  case kir::ExprKind::Cast: // left by the expansion: a storage decode or encode
    if (e.args.size() != 1)
      return fail("cast needs one operand");
    return storageCast(expr(e.args[0]), e.args[0]->type, e);
  }
  return fail("unknown expression kind");
}

std::string CPrinter::convertExpr(const std::string &v, DType from, DType to) {
  if (from == to)
    return v;
  if (isStorageOnly(from) || isStorageOnly(to) || to == DType::Bool)
    return fail(fmt::format("convert from {} to {}", dtypeName(from), dtypeName(to)));
  std::string tt = computeType(to);
  if (isFloat(to)) {
    if (isFloat(from)) {
      if (to == DType::F32 || to == DType::F64)
        return fmt::format("(({}){})", tt, v);
      if (from == DType::F64)
        return roundF64Helper(to) + paren(v);
      return roundTo(to, v);
    }
    if (to == DType::F32 || to == DType::F64)
      return fmt::format("(({}){})", tt, v);
    if (to == DType::F16) // integers beyond 2^24 overflow f16: one float rounding is exact
      return roundTo(to, fmt::format("((float){})", v));
    return roundF64Helper(to) + fmt::format("((double){})", v);
  }
  if (isFloat(from)) // truncates; the value is in range
    return fmt::format("(({}){})", tt, v);
  // Integers: through the 64-bit pattern, which wraps.
  return fmt::format("(({})(({}){}))", tt,
                     computeType(isSignedInteger(from) ? DType::I64 : DType::U64), v);
}

/// A storage decode (to the canonical type) or encode (from it).
std::string CPrinter::storageCast(const std::string &v0, DType from, const kir::ExprNode &e) {
  DType to = e.type;
  std::string v = v0;
  std::string u8 = computeType(DType::U8);
  if (isStorageOnly(from)) {
    DType canon = storageCanonical(from);
    if (int w = subByteWidth(from)) {
      if (isSignedInteger(canon))
        v = fmt::format("(({})(({})(({})({} << {})) >> {}))", computeType(DType::I64),
                        computeType(DType::I8), u8, paren(v), 8 - w, 8 - w);
      else
        v = fmt::format("(({})({} & {}))", computeType(DType::U64), paren(v), (1u << w) - 1);
    } else {
      v = storageHelper(/*encode=*/false, from) + fmt::format("(({}){})", computeType(DType::U32),
                                                              paren(v));
    }
    if (to != canon)
      return fail(fmt::format("cast from {} to {}", dtypeName(from), dtypeName(to)));
    return v;
  }
  if (from != storageCanonical(to))
    return fail(fmt::format("cast from {} to {}", dtypeName(from), dtypeName(to)));
  const std::string &c = v;
  if (int w = subByteWidth(to))
    return fmt::format("(({})({} & {}))", u8, c, (1u << w) - 1);
  fp::E8M0Round mode = fp::E8M0Round::Up;
  if (!e.roundMode.empty() && !fp::parseE8M0Round(e.roundMode.c_str(), mode))
    return fail(fmt::format("cast to {} with round mode '{}'", dtypeName(to), e.roundMode));
  return fmt::format("(({}){}({}, {}, {}))", u8, storageHelper(/*encode=*/true, to), c,
                     e.saturate ? 1 : 0, static_cast<int>(mode));
}

std::string CPrinter::opExpr(const kir::ExprNode &e) {
  std::vector<std::string> a;
  for (const kir::Expr &x : e.args)
    a.push_back(expr(x));
  if (error_)
    return "0";
  size_t typeArg = e.op == OpKind::Select ? 1 : 0;
  const OpInfo &info = opInfo(e.op);
  if (a.size() <= typeArg)
    return fail(fmt::format("op {} has {} operands", info.name, a.size()));
  DType t = e.args[typeArg]->type;
  if (!info.elementwise || !typeClassAccepts(info.operandTypes, t))
    return fail(fmt::format("op {} on {} is not supported", info.name, dtypeName(t)));
  bool f = isFloat(t);
  bool s = isSignedInteger(t);
  std::string ct = computeType(t), ut = computeType(unsignedOf(t));
  auto arity = [&](size_t n) {
    if (a.size() != n)
      fail(fmt::format("op {} expects {} operands, got {}", info.name, n, a.size()));
    return a.size() == n;
  };
  // Wrapping integer arithmetic: in the unsigned type, cast back.
  auto wrap = [&](const char *o) {
    return fmt::format("(({})(({}){} {} ({}){}))", ct, ut, a[0], o, ut, a[1]);
  };
  auto bin = [&](const char *o) { return fmt::format("({} {} {})", a[0], o, a[1]); };
  auto fn1 = [&](const char *name) { return mathFn(name, t) + paren(a[0]); };
  std::string r;
  bool isBoolResult = false;
  if (!info.libm.empty()) { // Ops.def's libm column
    if (arity(1))
      r = roundTo(e.type, fn1(std::string(info.libm).c_str()));
    return r.empty() ? "0" : r;
  }
  switch (e.op) {
  case OpKind::Neg:
    if (arity(1))
      r = f ? paren("-" + a[0]) : fmt::format("(({})(({})0 - ({}){}))", ct, ut, ut, a[0]);
    break;
  case OpKind::Abs:
    if (!arity(1)) break;
    if (f)
      r = fn1("fabs");
    else if (s)
      r = fmt::format("({} < 0 ? ({})(({})0 - ({}){}) : {})", a[0], ct, ut, ut, a[0], a[0]);
    else
      r = a[0];
    break;
  // Integer min/max, and float min/max accumulated with ignoresNaN (the expansion rewrites
  // the others): the smaller (larger) operand, the first on ties.
  case OpKind::Min:
    if (arity(2)) r = fmt::format("({1} < {0} ? {1} : {0})", a[0], a[1]);
    break;
  case OpKind::Max:
    if (arity(2)) r = fmt::format("({0} < {1} ? {1} : {0})", a[0], a[1]);
    break;
  case OpKind::Div: // floats (integer division is a Quot)
    if (arity(2)) r = bin("/");
    break;
  case OpKind::Not: if (arity(1)) r = paren("!" + a[0]); break;
  case OpKind::BitNot: if (arity(1)) r = fmt::format("(({})~{})", ct, a[0]); break;
  case OpKind::Add:
    if (arity(2)) r = f ? bin("+") : wrap("+");
    break;
  case OpKind::Sub:
    if (arity(2)) r = f ? bin("-") : wrap("-");
    break;
  case OpKind::Mul:
    if (arity(2)) r = f ? bin("*") : wrap("*");
    break;
  case OpKind::And:
    if (arity(2)) r = bin("&&");
    break;
  case OpKind::Or:
    if (arity(2)) r = bin("||");
    break;
  case OpKind::Xor:
    if (arity(2)) r = bin("!=");
    break;
  case OpKind::BitAnd:
    if (arity(2)) r = fmt::format("(({}){})", ct, bin("&"));
    break;
  case OpKind::BitOr:
    if (arity(2)) r = fmt::format("(({}){})", ct, bin("|"));
    break;
  case OpKind::BitXor:
    if (arity(2)) r = fmt::format("(({}){})", ct, bin("^"));
    break;
  case OpKind::Equal: if (arity(2)) r = bin("=="); isBoolResult = true; break;
  case OpKind::Less: if (arity(2)) r = bin("<"); isBoolResult = true; break;
  case OpKind::LessEqual: if (arity(2)) r = bin("<="); isBoolResult = true; break;
  case OpKind::Greater: if (arity(2)) r = bin(">"); isBoolResult = true; break;
  case OpKind::GreaterEqual: if (arity(2)) r = bin(">="); isBoolResult = true; break;
  case OpKind::Select:
    if (arity(3)) r = fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
    return r.empty() ? "0" : r;
  default:
    return fail(fmt::format("op {} is not an elementwise op the C printer supports", info.name));
  }
  if (r.empty())
    return "0";
  if (isBoolResult || e.type == DType::Bool)
    return paren(r);
  return roundTo(e.type, r);
}

// ---- Helpers ----------------------------------------------------------------------------------

std::string CPrinter::roundBf16Helper() {
  std::string u32 = computeType(DType::U32);
  need("nnc_round_bf16",
       fmt::format("static inline float nnc_round_bf16(float f) {{ {0} x = {1}(f); "
                   "{0} r = (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x400000u) : "
                   "x + 0x7fffu + ((x >> 16) & 1u); return {2}(r & 0xffff0000u); }}",
                   u32, floatAsUint(), uintAsFloat()));
  return "nnc_round_bf16";
}

/// Correctly rounded f64 -> f16/bf16 (one rounding, as MathLib.cpp's roundToFormat).
std::string CPrinter::roundF64Helper(DType to) {
  usesDouble_ = true;
  bool h = to == DType::F16;
  std::string name = h ? "nnc_round_f64_to_f16" : "nnc_round_f64_to_bf16";
  int manBits = h ? 10 : 7, minExp = h ? -14 : -126;
  double maxFinite = h ? 65504.0 : 3.3895313892515355e38;
  need(name, fmt::format(
                 "static inline float {0}(double x) {{ if (x != x || x == 0 || {1}(x) == "
                 "(double)INFINITY) return (float)x; double a = {1}(x); int ex; {2}(a, &ex); "
                 "int e = ex - 1; int q = (e < {3} ? {3} : e) - {4}; double v = {5}({6}({5}(a, "
                 "-q)), q); if (v > {7}) v = (double)INFINITY; return (float){8}(v, x); }}",
                 name, mathFn("fabs", DType::F64), mathFn("frexp", DType::F64), minExp, manBits,
                 mathFn("ldexp", DType::F64), mathFn("rint", DType::F64),
                 literal(maxFinite, DType::F64), mathFn("copysign", DType::F64)));
  return name;
}

/// Encoders and decoders of the float storage formats (ports of FloatFormats.h).
std::string CPrinter::storageHelper(bool encode, DType t) {
  usesDouble_ = true;
  std::string u32 = computeType(DType::U32);
  std::string fabsD = mathFn("fabs", DType::F64), frexpD = mathFn("frexp", DType::F64),
              ldexpD = mathFn("ldexp", DType::F64), rintD = mathFn("rint", DType::F64);
  std::string name = fmt::format("nnc_{}_{}", encode ? "encode" : "decode", dtypeName(t));
  std::optional<fp::FloatFormat> f = formatOf(t);
  std::string body;
  if (!f) { // f8e8m0
    if (encode)
      body = fmt::format(
          "{0} b = {1}((float)x); {0} e = (b >> 23) & 0xffu; if (e == 0xffu) return 0xffu; "
          "int up = 0; if (mode == 2) {{ up = (b & 0x400000u) && ((b & 0x200000u) || (b & "
          "0x1fffffu) || e > 0); }} else if (mode == 0) {{ up = (b & 0x7fffffu) != 0; }} "
          "if (up && sat && e == 0xfeu) up = 0; return e + (up ? 1u : 0u);",
          u32, floatAsUint());
    else
      body = fmt::format("b &= 0xffu; return b == 0xffu ? (double)NAN : {}(1.0, (int)b - 127);",
                         ldexpD);
  } else if (encode) {
    uint32_t nanPos = f->nanBits(false), nanNeg = f->nanBits(true);
    bool ieee = f->special == fp::Special::IEEE, nonan = f->special == fp::Special::NoNaN;
    bool fnuz = f->special == fp::Special::FNUZ;
    // The format's rules are folded here, so the helper has no constant conditions.
    std::string sat = fmt::format("(sign | {}u)", f->maxBits());
    std::string noSat = ieee ? fmt::format("(sign | {}u)", f->expMask())
                             : fmt::format("(neg ? {}u : {}u)", nanNeg, nanPos);
    std::string satOvf = nonan ? sat : fmt::format("(sat ? {} : {})", sat, noSat);
    std::string infRes = ieee ? fmt::format("(sat ? ovf : (sign | {}u))", f->expMask()) : "ovf";
    body = fmt::format(
        "int neg = signbit(x); {u} sign = neg ? {signBit}u : 0u; if (x != x) return neg ? "
        "{nanNeg}u : {nanPos}u; {u} ovf = {satOvf}; double a = {fabs}(x); if (a == "
        "(double)INFINITY) return {infRes}; if (a == 0) return {zero}; int ex; {frexp}(a, &ex); "
        "int e = ex - 1; int qe = (e < {minNormal} ? {minNormal} : e) - {man}; double q = "
        "{rint}({ldexp}(a, -qe)); double v = {ldexp}(q, qe); if (v > {maxFinite}) return ovf; "
        "if (q == 0) return {zero}; if (v < {ldexp}(1.0, {minNormal})) return sign | ({u})q; "
        "int ve; {frexp}(v, &ve); int vexp = ve - 1; {u} mant = ({u}){ldexp}(v, {man} - vexp) - "
        "{hidden}u; return sign | (({u})(vexp + {bias}) << {man}) | mant;",
        fmt::arg("u", u32), fmt::arg("signBit", f->signBit()), fmt::arg("nanNeg", nanNeg),
        fmt::arg("nanPos", nanPos), fmt::arg("satOvf", satOvf), fmt::arg("infRes", infRes),
        fmt::arg("zero", fnuz ? "0u" : "sign"), fmt::arg("fabs", fabsD),
        fmt::arg("frexp", frexpD), fmt::arg("minNormal", 1 - f->bias),
        fmt::arg("man", f->manBits), fmt::arg("rint", rintD), fmt::arg("ldexp", ldexpD),
        fmt::arg("maxFinite", literal(f->maxFinite(), DType::F64)),
        fmt::arg("hidden", 1u << f->manBits), fmt::arg("bias", f->bias));
  } else {
    std::string special;
    switch (f->special) {
    case fp::Special::IEEE:
      special = fmt::format("if (ef == {}u) return m ? nan : (neg ? -(double)INFINITY : "
                            "(double)INFINITY);",
                            (1u << f->expBits) - 1);
      break;
    case fp::Special::FN:
      special = fmt::format("if (ef == {}u && m == {}u) return nan;", (1u << f->expBits) - 1,
                            (1u << f->manBits) - 1);
      break;
    case fp::Special::FNUZ: special = fmt::format("if (b == {}u) return nan;", f->signBit()); break;
    case fp::Special::NoNaN: break;
    }
    body = fmt::format(
        "b &= {mask}u; int neg = (b & {signBit}u) != 0; {u} ef = (b & {expMask}u) >> {man}; "
        "{u} m = b & {manMask}u; double nan = {copysign}((double)NAN, neg ? -1.0 : 1.0); "
        "{special} double v = ef == 0 ? {ldexp}((double)m, {subExp}) : {ldexp}(1.0 + (double)m "
        "/ {hidden}.0, (int)ef - {bias}); return neg ? -v : v;",
        fmt::arg("mask", (1u << f->width()) - 1), fmt::arg("signBit", f->signBit()),
        fmt::arg("u", u32), fmt::arg("expMask", f->expMask()), fmt::arg("man", f->manBits),
        fmt::arg("manMask", (1u << f->manBits) - 1),
        fmt::arg("copysign", mathFn("copysign", DType::F64)), fmt::arg("special", special),
        fmt::arg("ldexp", ldexpD), fmt::arg("subExp", 1 - f->bias - f->manBits),
        fmt::arg("hidden", 1u << f->manBits), fmt::arg("bias", f->bias));
  }
  if (encode)
    need(name, fmt::format("static inline {0} {1}(double x, int sat, int mode) {{ {2} }}", u32,
                           name, body));
  else
    need(name, fmt::format("static inline double {1}({0} b) {{ {2} }}", u32, name, body));
  return name;
}

// ---- Statements -------------------------------------------------------------------------------

void CPrinter::stmt(const kir::Stmt &sp, int indent, std::string &out) {
  if (!sp || error_)
    return;
  const kir::StmtNode &s = *sp;
  std::string pad(static_cast<size_t>(indent), ' ');
  switch (s.kind) {
  case kir::StmtKind::Block:
    out += pad + "{\n";
    for (const kir::Stmt &c : s.body)
      stmt(c, indent + 2, out);
    out += pad + "}\n";
    return;
  case kir::StmtKind::For: {
    std::string v = varName(s.name);
    if (s.loopKind == kir::LoopKind::Unrolled && s.extent &&
        s.extent->kind == kir::ExprKind::IntImm && s.extent->intValue <= 64)
      out += pad + "#pragma unroll\n";
    out += fmt::format("{}for ({} {} = 0; {} < {}; ++{}) {{\n", pad, computeType(DType::I64), v, v,
                       expr(s.extent), v);
    for (const kir::Stmt &c : s.body)
      stmt(c, indent + 2, out);
    out += pad + "}\n";
    return;
  }
  case kir::StmtKind::Store: {
    if (!k_->hasBuffer(s.buffer)) {
      fail(fmt::format("store to buffer {} of {}", s.buffer, k_->buffers.size()));
      return;
    }
    std::string index = expr(s.index);
    out += pad +
           storeElement(k_->bufferType(s.buffer), bufferName(s.buffer), index, expr(s.value)) +
           "\n";
    return;
  }
  case kir::StmtKind::Barrier:
    out += pad + barrierStmt() + "\n";
    return;
  case kir::StmtKind::Prefetch:
    return; // a CPU cache hint: a device's loads need none (and C leaves it to the compiler)
  case kir::StmtKind::VecLoad: {
    if (!k_->hasBuffer(s.buffer)) {
      fail(fmt::format("vector load from buffer {} of {}", s.buffer, k_->buffers.size()));
      return;
    }
    std::string index = expr(s.index), buf = bufferName(s.buffer);
    std::vector<std::string> lanes(s.names.size());
    for (size_t l = 0; l < lanes.size(); ++l)
      lanes[l] = varName(s.names[l]);
    std::string v = vectorLoad(s.type, lanes, buf, index);
    if (!v.empty()) {
      out += pad + v + "\n";
      return;
    }
    for (size_t l = 0; l < lanes.size(); ++l)
      out += fmt::format("{}{} {} = {};\n", pad, computeType(s.type), lanes[l],
                         loadElement(s.type, buf, fmt::format("({}) + {}", index, l)));
    return;
  }
  case kir::StmtKind::VecStore: {
    if (!k_->hasBuffer(s.buffer)) {
      fail(fmt::format("vector store to buffer {} of {}", s.buffer, k_->buffers.size()));
      return;
    }
    DType t = k_->bufferType(s.buffer);
    std::string index = expr(s.index), buf = bufferName(s.buffer);
    std::vector<std::string> values;
    for (const kir::Expr &a : s.args)
      values.push_back(expr(a));
    std::string v = vectorStore(t, values, buf, index);
    if (!v.empty()) {
      out += pad + v + "\n";
      return;
    }
    for (size_t l = 0; l < values.size(); ++l)
      out += pad + storeElement(t, buf, fmt::format("({}) + {}", index, l), values[l]) + "\n";
    return;
  }
  case kir::StmtKind::Decl:
    out += fmt::format("{}{} {} = {};\n", pad, computeType(s.type), varName(s.name),
                       expr(s.value));
    return;
  case kir::StmtKind::Assign:
    out += fmt::format("{}{} = {};\n", pad, varName(s.name), expr(s.value));
    return;
  case kir::StmtKind::If:
    out += fmt::format("{}if ({}) {{\n", pad, expr(s.value));
    if (!s.body.empty())
      stmt(s.body[0], indent + 2, out);
    if (s.body.size() > 1 && s.body[1]) {
      out += pad + "} else {\n";
      stmt(s.body[1], indent + 2, out);
    }
    out += pad + "}\n";
    return;
  case kir::StmtKind::ConvTile: {
    // The tile's definition as a plain loop nest (one fma per product, in the reduction's
    // order; bf16: W's input lanes in pairs, the exact products added in f32; with sumEvery,
    // runs of dim-0 steps summed from zero, each then added to the running sum).
    const kir::ConvTileShape &t = s.conv;
    const bool bf16 = t.elems == kir::GemmElems::BF16;
    const DType xw = bf16 ? DType::BF16 : DType::F32;
    for (int b : {t.x, t.w, s.buffer, t.init < 0 ? t.x : t.init})
      if (b < 0 || b >= static_cast<int>(k_->buffers.size())) {
        fail(fmt::format("conv_tile on buffer {} of {}", b, k_->buffers.size()));
        return;
      }
    std::string i64t = computeType(DType::I64), f32t = computeType(DType::F32);
    std::string p2 = pad + "  ", p3 = pad + "    ", p4 = pad + "      ";
    out += pad + "{\n";
    out += fmt::format("{}{} ct_x = {}, ct_w = {}, ct_c = {}, ct_i = {};\n", p2, i64t,
                       expr(s.args[0]), expr(s.args[1]), expr(s.args[2]), expr(s.args[3]));
    out += fmt::format("{}{} ct_n0 = {}, ct_n1 = {}, ct_n2 = {}, ct_n3 = {};\n", p2, i64t,
                       expr(s.args[4]), expr(s.args[5]), expr(s.args[6]), expr(s.args[7]));
    out += fmt::format("{}for ({} ct_e = 0; ct_e < {}; ++ct_e) {{\n", p2, i64t,
                       t.blocks * t.cols * t.lanes);
    out += fmt::format("{}{} ct_m = ct_e / {}, ct_r = ct_e / {} % {}, ct_j = ct_e % {};\n", p3,
                       i64t, t.cols * t.lanes, t.lanes, t.cols, t.lanes);
    std::string cIdx = fmt::format("ct_c + ct_m * {} + ct_r * {} + ct_j", t.cblk, t.ccol);
    // The element's initial value: the sum's start, or with runs the running sum's.
    std::string initial =
        t.init < 0 ? std::string("0.0f")
                   : loadElement(DType::F32, bufferName(t.init),
                                 fmt::format("ct_i + ct_m * {} + ct_r * {} + ct_j", t.iblk,
                                             t.icol));
    out += fmt::format("{}{} ct_acc = {};\n", p3, f32t,
                       t.sumEvery > 0 ? std::string("0.0f") : initial);
    if (t.sumEvery > 0)
      out += fmt::format("{}{} ct_total = {};\n", p3, f32t, initial);
    out += fmt::format("{}{} ct_xb = ct_x + ct_r * {}{}, ct_wb = ct_w + ct_m * {} + ct_j{};\n",
                       p3, i64t, t.xcol, t.depthwise ? " + ct_j" : "", t.wblk,
                       bf16 ? " * 2" : "");
    std::string window;
    if (!t.kwCols.empty()) {
      std::string lo, hi;
      for (size_t i = 0; i < t.kwCols.size(); ++i) {
        lo += fmt::format("{}{}", i ? ", " : "", t.kwCols[i][0]);
        hi += fmt::format("{}{}", i ? ", " : "", t.kwCols[i][1]);
      }
      out += fmt::format("{}{} ct_lo[{}] = {{{}}}, ct_hi[{}] = {{{}}};\n", p3, i64t,
                         t.kwCols.size(), lo, t.kwCols.size(), hi);
      window = "if (ct_r >= ct_lo[ct_2] && ct_r < ct_hi[ct_2]) ";
    }
    out += fmt::format("{}for ({} ct_0 = 0; ct_0 < ct_n0; ++ct_0) {{\n", p3, i64t);
    out += fmt::format("{}for ({} ct_1 = 0; ct_1 < ct_n1; ++ct_1)\n", p3, i64t);
    out += fmt::format("{}for ({} ct_2 = 0; ct_2 < ct_n2; ++ct_2)\n", p3, i64t);
    out += fmt::format("{}for ({} ct_3 = 0; ct_3 < ct_n3; ++ct_3)\n", p3, i64t);
    std::string xv = loadElement(
        xw, bufferName(t.x),
        fmt::format("ct_xb + ct_0 * {} + ct_1 * {} + ct_2 * {} + ct_3 * {}", t.xs[0], t.xs[1],
                    t.xs[2], t.xs[3]));
    std::string wv = loadElement(
        xw, bufferName(t.w),
        bf16 ? fmt::format("ct_wb + ct_0 * {} + ct_1 * {} + ct_2 * {} + ct_3 / 2 * {} + ct_3 % 2",
                           t.ws[0], t.ws[1], t.ws[2], 2 * t.ws[3])
             : fmt::format("ct_wb + ct_0 * {} + ct_1 * {} + ct_2 * {} + ct_3 * {}", t.ws[0],
                           t.ws[1], t.ws[2], t.ws[3]));
    out += bf16 ? fmt::format("{}{}ct_acc += {} * {};\n", p4, window, xv, wv)
                : fmt::format("{}{}ct_acc = fma({}, {}, ct_acc);\n", p4, window, xv, wv);
    if (t.sumEvery > 0)
      out += fmt::format("{}if ((ct_0 + 1) % {} == 0 || ct_0 + 1 == ct_n0) {{ ct_total += ct_acc; "
                         "ct_acc = 0.0f; }}\n",
                         p4, t.sumEvery);
    out += p3 + "}\n";
    out += p3 + storeElement(DType::F32, bufferName(s.buffer), cIdx,
                             t.sumEvery > 0 ? "ct_total" : "ct_acc") +
           "\n";
    out += p2 + "}\n" + pad + "}\n";
    return;
  }
  case kir::StmtKind::GemmTile: {
    // The microkernel's definition as a plain loop nest (one fma per product, k in order).
    const kir::GemmTileShape &t = s.tile;
    for (int b : {t.a, t.b, s.buffer})
      if (b < 0 || b >= static_cast<int>(k_->buffers.size())) {
        fail(fmt::format("gemm_tile on buffer {} of {}", b, k_->buffers.size()));
        return;
      }
    std::string i64t = computeType(DType::I64), f32t = computeType(DType::F32);
    std::string p2 = pad + "  ", p3 = pad + "    ", p4 = pad + "      ";
    out += pad + "{\n";
    out += fmt::format("{}{} gt_a = {}, gt_b = {}, gt_c = {}, gt_k = {};\n", p2, i64t,
                       expr(s.args[0]), expr(s.args[1]), expr(s.args[2]), expr(s.args[3]));
    if (t.elems == kir::GemmElems::U8S8S32) {
      // The sum in an unsigned accumulator: it wraps as the i32 sum is defined to, where a
      // signed C or OpenCL int overflowing would be undefined. Each product fits an int.
      std::string u32t = computeType(DType::U32), i32t = computeType(DType::I32);
      out += fmt::format("{}for ({} gt_r = 0; gt_r < {}; ++gt_r) {{\n", p2, i64t, t.mr);
      out += fmt::format("{}for ({} gt_j = 0; gt_j < {}; ++gt_j) {{\n", p3, i64t, t.nr);
      std::string cIdx = fmt::format("gt_c + gt_r * {} + gt_j", t.ldc);
      out += fmt::format("{}{} gt_acc = {};\n", p4, u32t,
                         t.accumulate ? fmt::format("({})({})", u32t,
                                                    loadElement(DType::I32, bufferName(s.buffer),
                                                                cIdx))
                                      : std::string("0u"));
      out += fmt::format(
          "{}for ({} gt_p = 0; gt_p < gt_k; ++gt_p) gt_acc += ({})(({}){} * ({}){});\n", p4,
          i64t, u32t, i32t,
          loadElement(DType::U8, bufferName(t.a), fmt::format("gt_a + gt_r * {} + gt_p", t.lda)),
          i32t,
          loadElement(DType::I8, bufferName(t.b),
                      fmt::format("gt_b + gt_p / 4 * {} + gt_j * 4 + gt_p % 4", t.ldb)));
      out += p4 + storeElement(DType::I32, bufferName(s.buffer), cIdx,
                               fmt::format("({})gt_acc", i32t)) +
             "\n";
      out += p3 + "}\n" + p2 + "}\n" + pad + "}\n";
      return;
    }
    std::string vectors =
        gemmTileVectors(t, bufferName(t.a), bufferName(t.b), bufferName(s.buffer), p2);
    if (!vectors.empty()) {
      out += vectors + pad + "}\n";
      return;
    }
    out += fmt::format("{}for ({} gt_r = 0; gt_r < {}; ++gt_r) {{\n", p2, i64t, t.mr);
    out += fmt::format("{}for ({} gt_j = 0; gt_j < {}; ++gt_j) {{\n", p3, i64t, t.nr);
    std::string cIdx = fmt::format("gt_c + gt_r * {} + gt_j", t.ldc);
    out += fmt::format("{}{} gt_acc = {};\n", p4, f32t,
                       t.accumulate ? loadElement(DType::F32, bufferName(s.buffer), cIdx)
                                    : std::string("0.0f"));
    if (t.elems == kir::GemmElems::BF16) {
      // The bf16 values' products are exact in f32: only the sum rounds, in k order.
      out += fmt::format(
          "{}for ({} gt_p = 0; gt_p < gt_k; ++gt_p) gt_acc += {} * {};\n", p4, i64t,
          loadElement(DType::BF16, bufferName(t.a), fmt::format("gt_a + gt_r * {} + gt_p", t.lda)),
          loadElement(DType::BF16, bufferName(t.b),
                      fmt::format("gt_b + gt_p / 2 * {} + gt_j * 2 + gt_p % 2", t.ldb)));
      out += p4 + storeElement(DType::F32, bufferName(s.buffer), cIdx, "gt_acc") + "\n";
      out += p3 + "}\n" + p2 + "}\n" + pad + "}\n";
      return;
    }
    // With sumEvery: runs of that many k steps, each from zero, added to the running sum.
    const bool runs = t.sumEvery > 0;
    if (runs)
      out += fmt::format("{}{} gt_total = gt_acc;\n{}gt_acc = 0.0f;\n", p4, f32t, p4);
    out += fmt::format(
        "{}for ({} gt_p = 0; gt_p < gt_k; ++gt_p) {{\n{}  gt_acc = fma({}, {}, gt_acc);\n", p4,
        i64t, p4,
        loadElement(DType::F32, bufferName(t.a),
                    fmt::format("gt_a + gt_r * {} + gt_p * {}", t.lda, t.ak)),
        loadElement(DType::F32, bufferName(t.b), fmt::format("gt_b + gt_p * {} + gt_j", t.ldb)));
    if (runs)
      out += fmt::format("{}  if ((gt_p + 1) % {} == 0 || gt_p + 1 == gt_k) {{ gt_total += "
                         "gt_acc; gt_acc = 0.0f; }}\n",
                         p4, t.sumEvery);
    out += p4 + "}\n";
    out += p4 + storeElement(DType::F32, bufferName(s.buffer), cIdx, runs ? "gt_total" : "gt_acc") +
           "\n";
    out += p3 + "}\n" + p2 + "}\n" + pad + "}\n";
    return;
  }
  }
  fail("unknown statement kind");
}

std::string CPrinter::gemmTileVectors(const kir::GemmTileShape &, const std::string &,
                                      const std::string &, const std::string &,
                                      const std::string &) {
  return "";
}

Expected<std::string> CPrinter::printBody(const kir::Kernel &k, const kir::Stmt &body,
                                          int indent) {
  k_ = &k;
  error_.reset();
  std::string out;
  stmt(body, indent, out);
  if (error_)
    return makeError("kernel {}: {}", k.name, *error_);
  return out;
}

} // namespace nnc::cgen

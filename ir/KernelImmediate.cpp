// The number literals of the kernel-IR text form (KernelImmediate.h).
#include "KernelImmediate.h"

#include <cstring>

#include <fmt/format.h>

namespace nnc::kir {

namespace {

using text::Token;

Error errorAt(const Token &at, const std::string &file, const std::string &msg) {
  return makeError("{}:{}:{}: {}", file, at.line, at.col, msg);
}

/// An integer immediate of dtype `t` from the digits `num` of token `at`, refused when it does
/// not fit `t`.
Expected<Expr> intImmediate(const Token &at, const std::string &file, const std::string &num,
                            DType t) {
  bool neg;
  uint64_t mag;
  if (!text::parseIntText(num, neg, mag))
    return errorAt(at, file, fmt::format("malformed number '{}'", at.text));
  int bits = static_cast<int>(dtypeSize(t)) * 8;
  bool fits;
  if (isUnsignedInteger(t))
    fits = !neg && (bits == 64 || mag < (uint64_t(1) << bits));
  else
    fits = neg ? mag <= (uint64_t(1) << (bits - 1)) : mag < (uint64_t(1) << (bits - 1));
  if (!fits)
    return errorAt(at, file, fmt::format("{} is out of range for {}", at.text, dtypeName(t)));
  ExprNode n;
  n.kind = ExprKind::IntImm;
  n.type = t;
  n.intValue = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
  return std::make_shared<const ExprNode>(std::move(n));
}

} // namespace

Expected<Expr> kernelImmediate(const Token &at, const std::string &file) {
  const std::string &s = at.text;
  ExprNode n;
  // A NaN with a payload: the f64 bits, then the dtype.
  if (s.rfind("nan:0x", 0) == 0) {
    std::optional<DType> t = s.size() > 22 ? parseDType(s.substr(22)) : std::nullopt;
    bool neg;
    uint64_t bits;
    if (!t || !isFloat(*t) || !text::parseIntText(s.substr(4, 18), neg, bits))
      return errorAt(at, file, fmt::format("malformed NaN immediate '{}' (nan:0x, the 16 hex "
                                     "digits of its f64 bits, then a float dtype)",
                                     s));
    double v;
    std::memcpy(&v, &bits, sizeof v);
    n.kind = ExprKind::FloatImm;
    n.type = *t;
    n.floatValue = v;
    return std::make_shared<const ExprNode>(std::move(n));
  }
  // The dtype suffix: the shortest tail naming a dtype after which the rest is a number of it
  // (so `1.0bf16` is bf16, not `1.0b` of f16).
  for (size_t p = s.size(); p-- > 1;) {
    char c = s[p];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      continue;
    std::optional<DType> t = parseDType(std::string_view(s).substr(p));
    if (!t)
      continue;
    std::string num = s.substr(0, p);
    if (isFloat(*t)) {
      // Non-f64 immediates hold their dtype's values, which f32 represents exactly.
      Expected<uint64_t> bits =
          text::floatBitsOf(num, *t == DType::F64 ? DType::F64 : DType::F32);
      if (!bits)
        continue;
      n.kind = ExprKind::FloatImm;
      n.type = *t;
      if (*t == DType::F64) {
        std::memcpy(&n.floatValue, &*bits, sizeof n.floatValue);
      } else {
        uint32_t b32 = static_cast<uint32_t>(*bits);
        float f;
        std::memcpy(&f, &b32, sizeof f);
        n.floatValue = f;
      }
      return std::make_shared<const ExprNode>(std::move(n));
    }
    if (isInteger(*t) && !text::looksFloat(num))
      return intImmediate(at, file, num, *t);
  }
  if (text::looksFloat(s))
    return errorAt(at, file, fmt::format("float immediate '{}' needs its dtype, e.g. 0.5f32", s));
  return intImmediate(at, file, s, DType::I64);
}

} // namespace nnc::kir

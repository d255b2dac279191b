// The text-IR parser: a hand-written lexer and recursive-descent parser for the grammar in
// ir/Printer.cpp. Every malformed input gives "FILE:LINE:COL: message".
#include "nnc/ir/Parser.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "TextSyntax.h"
#include "nnc/ir/Verifier.h"
#include "nnc/support/Float16.h"

namespace nnc {

namespace {

enum class Tok { Eof, Ident, Number, String, ValueName, AtName, Punct, Arrow, Bad };

struct Token {
  Tok kind = Tok::Eof;
  std::string text; ///< Decoded for strings and names; the error message for Bad.
  int line = 1, col = 1;
};

std::string charStr(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7f ? fmt::format("'{}'", c) : fmt::format("byte 0x{:02x}", u);
}

std::string describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof:
    return "end of file";
  case Tok::Ident:
    return fmt::format("'{}'", t.text);
  case Tok::Number:
    return fmt::format("number {}", t.text);
  case Tok::String:
    return "a string";
  case Tok::ValueName:
    return fmt::format("value %{}", t.text);
  case Tok::AtName:
    return fmt::format("@{}", t.text);
  case Tok::Punct:
    return fmt::format("'{}'", t.text);
  case Tok::Arrow:
    return "'->'";
  case Tok::Bad:
    return t.text;
  }
  return "?";
}

class Parser {
public:
  Parser(std::string_view src, std::string file) : src_(src), file_(std::move(file)) { advance(); }

  Expected<std::unique_ptr<Graph>> parse();

private:
  /// One `graph @name(...) -> (...) { ... }`, the top-level one or a loop node's body.
  Expected<std::unique_ptr<Graph>> parseOneGraph();
  // ---- Lexer ------------------------------------------------------------------------------
  char peekChar(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool atEnd(size_t ahead = 0) const { return pos_ + ahead >= src_.size(); }
  void bump() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void advance();
  bool lexString(std::string &out);
  bool lexName(std::string &out);
  void lexNumber();
  void badToken(std::string msg) {
    tok_.kind = Tok::Bad;
    tok_.text = std::move(msg);
  }

  // ---- Parser helpers ---------------------------------------------------------------------
  Error errorAt(const Token &t, const std::string &msg) const {
    return makeError("{}:{}:{}: {}", file_, t.line, t.col, t.kind == Tok::Bad ? t.text : msg);
  }
  Error expected(const std::string &what) const {
    return errorAt(tok_, fmt::format("expected {}, got {}", what, describe(tok_)));
  }
  bool isPunct(char c) const { return tok_.kind == Tok::Punct && tok_.text[0] == c; }
  bool isKeyword(std::string_view k) const { return tok_.kind == Tok::Ident && tok_.text == k; }
  bool consumePunct(char c) {
    if (!isPunct(c))
      return false;
    advance();
    return true;
  }
  Error expectPunct(char c) {
    if (consumePunct(c))
      return Error::success();
    return expected(fmt::format("'{}'", c));
  }
  Error expectKeyword(std::string_view k) {
    if (!isKeyword(k))
      return expected(fmt::format("'{}'", k));
    advance();
    return Error::success();
  }

  Error parseType(TensorType &out);
  Error parseValueRef(Value *&out, bool allowNone);
  Error parseNode();
  Error parseAttr(const OpInfo &info, AttrMap &attrs);
  Error parseTensor(Tensor &out);
  Error parseElement(const Token &t, DType dtype, void *dst);
  Expected<int64_t> intOf(const Token &t);
  Expected<double> doubleOf(const Token &t);

  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  Token tok_;
  std::unique_ptr<Graph> g_;
};

void Parser::advance() {
  // Skip white space and // comments.
  for (;;) {
    if (atEnd())
      break;
    char c = peekChar();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      bump();
    } else if (c == '/' && peekChar(1) == '/') {
      while (!atEnd() && peekChar() != '\n')
        bump();
    } else {
      break;
    }
  }
  tok_ = Token();
  tok_.line = line_;
  tok_.col = col_;
  if (atEnd())
    return;
  char c = peekChar();
  if (c == '%' || c == '@') {
    bump();
    tok_.kind = c == '%' ? Tok::ValueName : Tok::AtName;
    if (!lexName(tok_.text))
      return;
    return;
  }
  if (c == '"') {
    tok_.kind = Tok::String;
    lexString(tok_.text);
    return;
  }
  if (c == '-' && peekChar(1) == '>') {
    bump();
    bump();
    tok_.kind = Tok::Arrow;
    return;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    lexNumber();
    return;
  }
  if (text::isIdentStart(c)) {
    size_t start = pos_;
    while (!atEnd() && text::isNameChar(peekChar()))
      bump();
    std::string_view word = src_.substr(start, pos_ - start);
    if (word == "inf" || word == "nan") {
      pos_ = start;
      col_ -= static_cast<int>(word.size());
      lexNumber();
      return;
    }
    tok_.kind = Tok::Ident;
    tok_.text = std::string(word);
    return;
  }
  if (std::strchr("()[]{}<>,:=", c)) {
    bump();
    tok_.kind = Tok::Punct;
    tok_.text = std::string(1, c);
    return;
  }
  badToken(fmt::format("unexpected character {}", charStr(c)));
}

bool Parser::lexName(std::string &out) {
  if (peekChar() == '"')
    return lexString(out);
  size_t start = pos_;
  while (!atEnd() && text::isNameChar(peekChar()))
    bump();
  if (pos_ == start) {
    badToken(atEnd() ? "expected a name, got end of file"
                     : fmt::format("expected a name, got {}", charStr(peekChar())));
    return false;
  }
  out = std::string(src_.substr(start, pos_ - start));
  return true;
}

bool Parser::lexString(std::string &out) {
  bump(); // opening quote
  out.clear();
  for (;;) {
    // Fast path for runs of plain characters (hex blobs of big constants).
    size_t run = src_.find_first_of("\"\\\n", pos_);
    if (run == std::string_view::npos)
      run = src_.size();
    out.append(src_.data() + pos_, run - pos_);
    col_ += static_cast<int>(run - pos_);
    pos_ = run;
    if (atEnd() || peekChar() == '\n') {
      badToken("unterminated string");
      return false;
    }
    char c = peekChar();
    bump();
    if (c == '"')
      return true;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (atEnd()) {
      badToken("unterminated string");
      return false;
    }
    char e = peekChar();
    bump();
    switch (e) {
    case '"':
      out += '"';
      break;
    case '\\':
      out += '\\';
      break;
    case 'n':
      out += '\n';
      break;
    case 't':
      out += '\t';
      break;
    case 'x': {
      auto hexVal = [](char h) {
        if (h >= '0' && h <= '9')
          return h - '0';
        if (h >= 'a' && h <= 'f')
          return h - 'a' + 10;
        if (h >= 'A' && h <= 'F')
          return h - 'A' + 10;
        return -1;
      };
      int hi = atEnd() ? -1 : hexVal(peekChar());
      int lo = atEnd(1) ? -1 : hexVal(peekChar(1));
      if (hi < 0 || lo < 0) {
        badToken("\\x in a string must be followed by two hex digits");
        return false;
      }
      bump();
      bump();
      out += static_cast<char>(hi * 16 + lo);
      break;
    }
    default:
      badToken(fmt::format("unknown escape \\{} in a string", e));
      return false;
    }
  }
}

void Parser::lexNumber() {
  size_t start = pos_;
  if (peekChar() == '-')
    bump();
  if (text::isIdentStart(peekChar())) {
    // inf, nan or nan:0xBITS.
    size_t wordStart = pos_;
    while (!atEnd() &&
           ((peekChar() >= 'a' && peekChar() <= 'z') || (peekChar() >= 'A' && peekChar() <= 'Z')))
      bump();
    std::string_view word = src_.substr(wordStart, pos_ - wordStart);
    if (word == "nan" && peekChar() == ':' && peekChar(1) == '0' && peekChar(2) == 'x') {
      bump();
      while (!atEnd() && text::isNameChar(peekChar()))
        bump();
    }
  } else {
    bool hex = peekChar() == '0' && (peekChar(1) == 'x' || peekChar(1) == 'X');
    while (!atEnd()) {
      char c = peekChar();
      // (A number can start the text: there is no character before it.)
      char prev = pos_ > 0 ? src_[pos_ - 1] : '\0';
      if (text::isNameChar(c) || (!hex && (c == '+' || c == '-') && (prev == 'e' || prev == 'E')))
        bump();
      else
        break;
    }
  }
  tok_.kind = Tok::Number;
  tok_.text = std::string(src_.substr(start, pos_ - start));
  if (tok_.text == "-")
    badToken("expected a number after '-'");
}

// ---- Numbers ----------------------------------------------------------------------------

bool looksFloat(const std::string &s) {
  if (s.find("0x") != std::string::npos || s.find("0X") != std::string::npos)
    return s.rfind("nan", 0) == 0 || s.rfind("-nan", 0) == 0;
  return s.find_first_of(".eEin") != std::string::npos;
}

/// Parses an integer (decimal or 0x hex, optional '-') into a 128-bit-ish pair: magnitude
/// and sign. Returns false on a malformed number or a magnitude above 2^64-1.
bool parseIntText(const std::string &s, bool &negative, uint64_t &magnitude) {
  const char *p = s.data(), *end = s.data() + s.size();
  negative = p < end && *p == '-';
  if (negative)
    ++p;
  int base = 10;
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (p == end)
    return false;
  auto r = std::from_chars(p, end, magnitude, base);
  return r.ec == std::errc() && r.ptr == end;
}

/// Exact bits of a float literal for a float dtype (f32, f64, f16, bf16).
Expected<uint64_t> floatBitsOf(const std::string &s, DType dtype) {
  int width = static_cast<int>(dtypeSize(dtype)) * 8;
  uint64_t signBit = uint64_t(1) << (width - 1);
  uint64_t canonical = dtype == DType::F64   ? text::kCanonicalNaN64
                       : dtype == DType::F32 ? text::kCanonicalNaN32
                       : dtype == DType::F16 ? text::kCanonicalNaNF16
                                             : text::kCanonicalNaNBF16;
  if (s == "nan")
    return canonical;
  if (s == "-nan")
    return canonical | signBit;
  if (s.rfind("nan:", 0) == 0) {
    bool neg;
    uint64_t bits;
    if (!parseIntText(s.substr(4), neg, bits) || neg)
      return makeError("malformed NaN bits '{}'", s);
    if (width < 64 && bits >> width)
      return makeError("NaN bits '{}' do not fit {}", s, dtypeName(dtype));
    return bits;
  }
  const char *b = s.data(), *e = s.data() + s.size();
  bool isInf = s == "inf" || s == "-inf";
  if (dtype == DType::F64) {
    double d;
    if (isInf) {
      d = s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    } else {
      auto r = std::from_chars(b, e, d);
      if (r.ec == std::errc::result_out_of_range)
        return makeError("{} is out of range for {}", s, dtypeName(dtype));
      if (r.ec != std::errc() || r.ptr != e)
        return makeError("malformed number '{}'", s);
    }
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    return bits;
  }
  float f;
  if (isInf) {
    f = s[0] == '-' ? -HUGE_VALF : HUGE_VALF;
  } else {
    auto r = std::from_chars(b, e, f);
    if (r.ec == std::errc::result_out_of_range)
      return makeError("{} is out of range for {}", s, dtypeName(dtype));
    if (r.ec != std::errc() || r.ptr != e)
      return makeError("malformed number '{}'", s);
  }
  if (dtype == DType::F32)
    return uint64_t(floatBits(f));
  uint16_t h = dtype == DType::F16 ? floatToHalf(f) : floatToBf16(f);
  float back = dtype == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
  if (std::isinf(back) && !isInf)
    return makeError("{} is out of range for {}", s, dtypeName(dtype));
  return uint64_t(h);
}

Expected<int64_t> Parser::intOf(const Token &t) {
  bool neg;
  uint64_t mag;
  if (t.kind != Tok::Number)
    return errorAt(t, fmt::format("expected an integer, got {}", describe(t)));
  if (looksFloat(t.text))
    return errorAt(t, fmt::format("expected an integer, got {}", t.text));
  if (!parseIntText(t.text, neg, mag) || (!neg && mag > uint64_t(INT64_MAX)) ||
      (neg && mag > uint64_t(INT64_MAX) + 1))
    return errorAt(t, fmt::format("malformed or out-of-range integer {}", t.text));
  return neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
}

Expected<double> Parser::doubleOf(const Token &t) {
  if (t.kind != Tok::Number)
    return errorAt(t, fmt::format("expected a number, got {}", describe(t)));
  Expected<uint64_t> bits = floatBitsOf(t.text, DType::F64);
  if (!bits)
    return errorAt(t, bits.error().message());
  double d;
  std::memcpy(&d, &*bits, 8);
  return d;
}

// ---- Grammar ----------------------------------------------------------------------------

Error Parser::parseType(TensorType &out) {
  if (tok_.kind != Tok::Ident)
    return expected("a type such as f32[N,3]");
  std::optional<DType> dt = parseDType(tok_.text);
  if (!dt)
    return errorAt(tok_, fmt::format("unknown dtype '{}'", tok_.text));
  advance();
  out = TensorType(*dt, {});
  NNC_TRY(expectPunct('['));
  if (consumePunct(']'))
    return Error::success();
  for (;;) {
    if (tok_.kind == Tok::Number) {
      Expected<int64_t> v = intOf(tok_);
      if (!v)
        return v.takeError();
      if (*v < 0)
        return errorAt(tok_, fmt::format("negative dimension {}", *v));
      out.shape.push_back(Dim(*v));
    } else if (tok_.kind == Tok::Ident || tok_.kind == Tok::String) {
      out.shape.push_back(Dim::symbol(tok_.text));
    } else {
      return expected("a dimension (an integer or a symbol)");
    }
    advance();
    if (consumePunct(']'))
      return Error::success();
    NNC_TRY(expectPunct(','));
  }
}

Error Parser::parseValueRef(Value *&out, bool allowNone) {
  if (allowNone && isKeyword("none")) {
    out = nullptr;
    advance();
    return Error::success();
  }
  if (tok_.kind != Tok::ValueName)
    return expected(allowNone ? "a value (%name) or 'none'" : "a value (%name)");
  out = g_->findValue(tok_.text);
  if (!out)
    return errorAt(tok_, fmt::format("use of undefined value %{}", tok_.text));
  advance();
  return Error::success();
}

Error Parser::parseElement(const Token &t, DType dtype, void *dst) {
  if (t.kind != Tok::Number && !(t.kind == Tok::Ident && dtype == DType::Bool))
    return errorAt(t, fmt::format("expected a {} element, got {}", dtypeName(dtype), describe(t)));
  if (isFloat(dtype)) {
    Expected<uint64_t> bits = floatBitsOf(t.text, dtype);
    if (!bits)
      return errorAt(t, bits.error().message());
    if (dtype == DType::F64) {
      std::memcpy(dst, &*bits, 8);
    } else if (dtype == DType::F32) {
      uint32_t b = static_cast<uint32_t>(*bits);
      std::memcpy(dst, &b, 4);
    } else {
      uint16_t b = static_cast<uint16_t>(*bits);
      std::memcpy(dst, &b, 2);
    }
    return Error::success();
  }
  if (dtype == DType::Bool) {
    uint8_t b;
    if (t.text == "true" || t.text == "1")
      b = 1;
    else if (t.text == "false" || t.text == "0")
      b = 0;
    else
      return errorAt(t, fmt::format("expected true or false, got {}", describe(t)));
    std::memcpy(dst, &b, 1);
    return Error::success();
  }
  bool neg;
  uint64_t mag;
  if (looksFloat(t.text) || !parseIntText(t.text, neg, mag))
    return errorAt(t,
                   fmt::format("expected an integer {} element, got {}", dtypeName(dtype), t.text));
  int bits = static_cast<int>(dtypeSize(dtype)) * 8;
  bool isSigned = isSignedInteger(dtype);
  // Storage-only types are written as their raw byte, 0..255.
  uint64_t maxPos = isSigned ? (uint64_t(1) << (bits - 1)) - 1
                             : (bits == 64 ? UINT64_MAX : (uint64_t(1) << bits) - 1);
  uint64_t maxNeg = isSigned ? uint64_t(1) << (bits - 1) : 0;
  if ((neg && (mag > maxNeg || (!isSigned && mag != 0))) || (!neg && mag > maxPos))
    return errorAt(t, fmt::format("{} is out of range for {}", t.text, dtypeName(dtype)));
  uint64_t v = neg ? 0 - mag : mag;
  std::memcpy(dst, &v, dtypeSize(dtype)); // little-endian: the low bytes
  return Error::success();
}

Error Parser::parseTensor(Tensor &out) {
  NNC_TRY(expectKeyword("dense"));
  NNC_TRY(expectPunct('<'));
  if (isKeyword("null")) {
    advance();
    out = Tensor();
    return expectPunct('>');
  }
  Token typeTok = tok_;
  TensorType type;
  NNC_TRY(parseType(type));
  std::optional<Extents> extents = staticExtents(type.shape);
  if (!extents)
    return errorAt(typeTok, "a tensor's shape must be static, got " + type.str());
  NNC_TRY(expectPunct('>'));
  Expected<Tensor> t = Tensor::create(type.dtype, *extents);
  if (!t)
    return errorAt(typeTok, t.error().message());
  out = *t;
  char *data = static_cast<char *>(out.rawData());
  size_t elemSize = dtypeSize(type.dtype);
  if (isKeyword("hex")) {
    advance();
    if (tok_.kind != Tok::String)
      return expected("a hex string");
    const std::string &hex = tok_.text;
    if (hex.size() != 2 * out.byteSize())
      return errorAt(tok_, fmt::format("hex data has {} digits; {} needs {}", hex.size(),
                                       type.str(), 2 * out.byteSize()));
    for (size_t i = 0; i < out.byteSize(); ++i) {
      int v = 0;
      for (int k = 0; k < 2; ++k) {
        char c = hex[2 * i + k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
          return errorAt(tok_, fmt::format("bad hex digit {} in tensor data", charStr(c)));
        v = v * 16 + d;
      }
      data[i] = static_cast<char>(v);
    }
    advance();
    return Error::success();
  }
  Token open = tok_;
  NNC_TRY(expectPunct('['));
  int64_t n = 0;
  if (!isPunct(']')) {
    for (;;) {
      if (n >= out.numElements())
        return errorAt(tok_, fmt::format("too many elements for {}", type.str()));
      NNC_TRY(parseElement(tok_, type.dtype, data + n * elemSize));
      ++n;
      advance();
      if (isPunct(']'))
        break;
      NNC_TRY(expectPunct(','));
    }
  }
  if (n != out.numElements())
    return errorAt(open,
                   fmt::format("{} has {} elements, got {}", type.str(), out.numElements(), n));
  advance();
  return Error::success();
}

Error Parser::parseAttr(const OpInfo &info, AttrMap &attrs) {
  Token keyTok = tok_;
  if (tok_.kind != Tok::Ident && tok_.kind != Tok::String)
    return expected("an attribute name");
  std::string key = tok_.text;
  const AttrSpec *spec = info.findAttr(key);
  if (!spec)
    return errorAt(keyTok, fmt::format("unknown attribute '{}' for op '{}'", key, info.name));
  if (attrs.count(key))
    return errorAt(keyTok, fmt::format("duplicate attribute '{}'", key));
  advance();
  NNC_TRY(expectPunct('='));
  Token valTok = tok_;
  auto wrongKind = [&]() {
    return errorAt(valTok, fmt::format("attribute '{}' of '{}' must be {}, got {}", key, info.name,
                                       attrKindName(spec->kind), describe(valTok)));
  };
  switch (spec->kind) {
  case AttrKind::Int: {
    if (tok_.kind != Tok::Number || looksFloat(tok_.text))
      return wrongKind();
    Expected<int64_t> v = intOf(tok_);
    if (!v)
      return v.takeError();
    attrs[key] = *v;
    advance();
    break;
  }
  case AttrKind::Float: {
    if (tok_.kind != Tok::Number)
      return wrongKind();
    Expected<double> v = doubleOf(tok_);
    if (!v)
      return v.takeError();
    attrs[key] = *v;
    advance();
    break;
  }
  case AttrKind::String:
    if (tok_.kind != Tok::String)
      return wrongKind();
    attrs[key] = tok_.text;
    advance();
    break;
  case AttrKind::DType: {
    if (tok_.kind != Tok::Ident)
      return wrongKind();
    std::optional<DType> dt = parseDType(tok_.text);
    if (!dt)
      return errorAt(tok_, fmt::format("unknown dtype '{}'", tok_.text));
    attrs[key] = *dt;
    advance();
    break;
  }
  case AttrKind::Ints:
  case AttrKind::Floats: {
    if (!isPunct('['))
      return wrongKind();
    advance();
    std::vector<int64_t> ints;
    std::vector<double> floats;
    if (!isPunct(']')) {
      for (;;) {
        if (spec->kind == AttrKind::Ints) {
          if (tok_.kind == Tok::Number && looksFloat(tok_.text))
            return errorAt(tok_, fmt::format("attribute '{}' of '{}' must be ints, got {}", key,
                                             info.name, tok_.text));
          Expected<int64_t> v = intOf(tok_);
          if (!v)
            return v.takeError();
          ints.push_back(*v);
        } else {
          Expected<double> v = doubleOf(tok_);
          if (!v)
            return v.takeError();
          floats.push_back(*v);
        }
        advance();
        if (isPunct(']'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
    advance();
    if (spec->kind == AttrKind::Ints)
      attrs[key] = std::move(ints);
    else
      attrs[key] = std::move(floats);
    break;
  }
  case AttrKind::Tensor: {
    // The printer's elided form (PrintOptions::elideElementsOver) has no values to read.
    if (isKeyword("dense_resource"))
      return errorAt(valTok, fmt::format("attribute '{}' of '{}' is an elided constant "
                                         "(dense_resource<__elided__>), whose values were not "
                                         "printed; print the graph with `nnc inspect "
                                         "--full-constants` to parse it back",
                                         key, info.name));
    if (!isKeyword("dense"))
      return wrongKind();
    Tensor t;
    NNC_TRY(parseTensor(t));
    attrs[key] = std::move(t);
    break;
  }
  }
  return Error::success();
}

Error Parser::parseNode() {
  // Results.
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (;;) {
    if (tok_.kind != Tok::ValueName)
      return expected(names.empty() ? "a node (%result = op ...) or 'return'" : "a result name");
    if (g_->findValue(tok_.text) || seen.count(tok_.text))
      return errorAt(tok_, fmt::format("redefinition of value %{}", tok_.text));
    names.push_back(tok_.text);
    seen.insert(tok_.text);
    advance();
    if (!consumePunct(','))
      break;
  }
  NNC_TRY(expectPunct('='));
  Token opTok = tok_;
  if (tok_.kind != Tok::Ident)
    return expected("an op name");
  std::optional<OpKind> kind = lookupOp(tok_.text);
  if (!kind)
    return errorAt(tok_, fmt::format("unknown op '{}'", tok_.text));
  const OpInfo &info = opInfo(*kind);
  advance();

  // Operands.
  std::vector<Value *> operands;
  if (consumePunct('(')) {
    if (!consumePunct(')')) {
      for (;;) {
        Value *v;
        NNC_TRY(parseValueRef(v, /*allowNone=*/true));
        operands.push_back(v);
        if (consumePunct(')'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }
  int nops = static_cast<int>(operands.size());
  if (nops < info.minOperands || (info.maxOperands >= 0 && nops > info.maxOperands)) {
    std::string want = info.maxOperands < 0 ? fmt::format("at least {}", info.minOperands)
                       : info.minOperands == info.maxOperands
                           ? std::to_string(info.minOperands)
                           : fmt::format("{} to {}", info.minOperands, info.maxOperands);
    return errorAt(opTok, fmt::format("'{}' takes {} operands, got {}", info.name, want, nops));
  }

  // Attributes.
  AttrMap attrs;
  if (consumePunct('{')) {
    if (!consumePunct('}')) {
      for (;;) {
        NNC_TRY(parseAttr(info, attrs));
        if (consumePunct('}'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }

  // A loop node's body: `body graph @name(...) { ... }`, parsed into its own graph.
  std::shared_ptr<Graph> body;
  if (isKeyword("body")) {
    advance();
    std::unique_ptr<Graph> outer = std::move(g_);
    Expected<std::unique_ptr<Graph>> b = parseOneGraph();
    g_ = std::move(outer);
    if (!b)
      return b.takeError();
    body = std::move(*b);
  }

  // Result types and the optional node name.
  Token colon = tok_;
  NNC_TRY(expectPunct(':'));
  std::vector<TensorType> types;
  for (;;) {
    TensorType t;
    NNC_TRY(parseType(t));
    types.push_back(std::move(t));
    if (!consumePunct(','))
      break;
  }
  if (types.size() != names.size())
    return errorAt(colon,
                   fmt::format("{} results but {} result types", names.size(), types.size()));
  int nres = static_cast<int>(names.size());
  if (nres < info.minResults || (info.maxResults >= 0 && nres > info.maxResults))
    return errorAt(
        opTok,
        fmt::format("'{}' has {} to {} results, got {}", info.name, info.minResults,
                    info.maxResults < 0 ? std::string("any") : std::to_string(info.maxResults),
                    nres));
  std::string nodeName;
  if (tok_.kind == Tok::AtName) {
    nodeName = tok_.text;
    advance();
  }
  Node *n = g_->createNode(*kind, std::move(operands), std::move(types), std::move(attrs),
                           std::move(nodeName), names);
  n->setBody(std::move(body));
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) // createNode would give it a fresh name
      g_->renameValue(n->result(i), "");
  if (Error e = verifyNodeSignature(*n))
    return errorAt(opTok, e.message());
  return Error::success();
}

Expected<std::unique_ptr<Graph>> Parser::parse() {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseOneGraph());
  if (tok_.kind != Tok::Eof)
    return expected("end of file after the graph");
  return g;
}

Expected<std::unique_ptr<Graph>> Parser::parseOneGraph() {
  g_ = std::make_unique<Graph>();
  NNC_TRY(expectKeyword("graph"));
  if (tok_.kind != Tok::AtName)
    return expected("a graph name (@name)");
  g_->setName(tok_.text);
  advance();

  // Inputs.
  NNC_TRY(expectPunct('('));
  if (!consumePunct(')')) {
    for (;;) {
      if (tok_.kind != Tok::ValueName)
        return expected("a graph input (%name: type)");
      Token nameTok = tok_;
      if (g_->findValue(tok_.text))
        return errorAt(tok_, fmt::format("redefinition of value %{}", tok_.text));
      advance();
      NNC_TRY(expectPunct(':'));
      TensorType t;
      NNC_TRY(parseType(t));
      Value *v = g_->addInput(nameTok.text, std::move(t));
      if (nameTok.text.empty()) // addInput would give it a fresh name
        g_->renameValue(v, "");
      if (consumePunct(')'))
        break;
      NNC_TRY(expectPunct(','));
    }
  }

  // Declared output types (optional; checked against the returned values).
  bool haveOutTypes = false;
  Token outTypesTok = tok_;
  std::vector<std::optional<TensorType>> outTypes;
  if (tok_.kind == Tok::Arrow) {
    advance();
    haveOutTypes = true;
    NNC_TRY(expectPunct('('));
    if (!consumePunct(')')) {
      for (;;) {
        if (isKeyword("none")) {
          outTypes.push_back(std::nullopt);
          advance();
        } else {
          TensorType t;
          NNC_TRY(parseType(t));
          outTypes.push_back(std::move(t));
        }
        if (consumePunct(')'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }

  // Body.
  NNC_TRY(expectPunct('{'));
  while (!isKeyword("return"))
    NNC_TRY(parseNode());
  Token retTok = tok_;
  advance();
  std::vector<Value *> outputs;
  if (!isPunct('}')) {
    for (;;) {
      Value *v;
      NNC_TRY(parseValueRef(v, /*allowNone=*/true));
      outputs.push_back(v);
      if (!consumePunct(','))
        break;
    }
  }
  NNC_TRY(expectPunct('}'));
  if (haveOutTypes) {
    if (outTypes.size() != outputs.size())
      return errorAt(retTok, fmt::format("the graph declares {} outputs but returns {} values",
                                         outTypes.size(), outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      bool same = outputs[i] ? outTypes[i] && *outTypes[i] == outputs[i]->type() : !outTypes[i];
      if (!same)
        return errorAt(retTok, fmt::format("output {} is declared {} but the returned value is {}",
                                           i, outTypes[i] ? outTypes[i]->str() : "none",
                                           outputs[i] ? outputs[i]->type().str() : "none"));
    }
  }
  g_->setOutputs(std::move(outputs));
  return std::move(g_);
}

} // namespace

Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text, const std::string &filename) {
  Parser p(text, filename);
  return p.parse();
}

Expected<std::unique_ptr<Graph>> parseGraphFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return makeError("{}: read error", path);
  return parseGraph(ss.str(), path);
}

} // namespace nnc

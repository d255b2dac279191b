// The lexer shared by the graph-IR and kernel-IR parsers, and the number and string rules
// their printers and parsers agree on.
#include "TextSyntax.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "nnc/support/Float16.h"

namespace nnc::text {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c >= 0x20 && c < 0x7f)
        out += static_cast<char>(c);
      else
        out += fmt::format("\\x{:02x}", c);
    }
  }
  out += '"';
  return out;
}

namespace {

/// Words the kernel syntax reads as keywords where a name may stand.
bool isReservedWord(std::string_view s) {
  static constexpr const char *kWords[] = {
      "for",      "in",   "var",   "if",  "else", "barrier", "gemm_tile", "conv_tile", "local", "kernel",
      "schedule", "true", "false", "inf", "nan",  "reassoc", "cast",      "bitcast", "independent"};
  for (const char *w : kWords)
    if (s == w)
      return true;
  // `inff32` and `nanf64` are immediates.
  return s.size() > 3 && (s.substr(0, 3) == "inf" || s.substr(0, 3) == "nan") &&
         parseDType(s.substr(3));
}

} // namespace

std::string kernelName(std::string_view s) {
  bool bare = !s.empty() && isIdentStart(s[0]) && !isReservedWord(s) &&
              s.find("..") == std::string_view::npos && s.back() != '.';
  for (char c : s)
    bare = bare && isNameChar(c);
  return bare ? std::string(s) : quote(s);
}

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

Token Lexer::next() {
  lex();
  prev_ = tok_.kind;
  prevClosed_ = tok_.kind == Tok::Punct && (tok_.text == ")" || tok_.text == "]");
  return tok_;
}

void Lexer::lex() {
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
  if (kernel()) {
    // A '-' right after an operand is the minus operator, else a number's sign.
    bool afterOperand =
        prev_ == Tok::Ident || prev_ == Tok::Number || prev_ == Tok::String || prevClosed_;
    if (c == '-' && !afterOperand &&
        ((peekChar(1) >= '0' && peekChar(1) <= '9') || peekChar(1) == 'i' || peekChar(1) == 'n')) {
      lexNumber();
      return;
    }
    static constexpr const char *kTwoChar[] = {"<=", ">=", "==", "!=", "&&",
                                               "||", "..", ">>", "<<"};
    for (const char *op : kTwoChar)
      if (c == op[0] && peekChar(1) == op[1]) {
        bump();
        bump();
        tok_.kind = Tok::Punct;
        tok_.text = op;
        return;
      }
    if (c != '\0' && std::strchr("+-*/%;!&|^~", c)) {
      bump();
      tok_.kind = Tok::Punct;
      tok_.text = std::string(1, c);
      return;
    }
  }
  if (!kernel() && (c == '%' || c == '@')) {
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
  if (!kernel() && c == '-' && peekChar(1) == '>') {
    bump();
    bump();
    tok_.kind = Tok::Arrow;
    return;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    lexNumber();
    return;
  }
  if (isIdentStart(c)) {
    size_t start = pos_;
    while (atNameChar())
      bump();
    std::string_view word = src_.substr(start, pos_ - start);
    // Kernel syntax: a typed non-finite immediate, `inff32`, is one number.
    bool typedNonFinite = kernel() && word.size() > 3 &&
                          (word.substr(0, 3) == "inf" || word.substr(0, 3) == "nan") &&
                          parseDType(word.substr(3));
    if (word == "inf" || word == "nan" || typedNonFinite) {
      pos_ = start;
      col_ -= static_cast<int>(word.size());
      lexNumber();
      return;
    }
    tok_.kind = Tok::Ident;
    tok_.text = std::string(word);
    return;
  }
  if (c != '\0' && std::strchr("()[]{}<>,:=", c)) { // (strchr finds the terminator)
    bump();
    tok_.kind = Tok::Punct;
    tok_.text = std::string(1, c);
    return;
  }
  badToken(fmt::format("unexpected character {}", charStr(c)));
}

bool Lexer::lexName(std::string &out) {
  if (peekChar() == '"')
    return lexString(out);
  size_t start = pos_;
  while (atNameChar())
    bump();
  if (pos_ == start) {
    badToken(atEnd() ? "expected a name, got end of file"
                     : fmt::format("expected a name, got {}", charStr(peekChar())));
    return false;
  }
  out = std::string(src_.substr(start, pos_ - start));
  return true;
}

bool Lexer::lexString(std::string &out) {
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

void Lexer::lexNumber() {
  size_t start = pos_;
  if (peekChar() == '-')
    bump();
  if (isIdentStart(peekChar())) {
    // inf, nan or nan:0xBITS.
    size_t wordStart = pos_;
    while (!atEnd() &&
           ((peekChar() >= 'a' && peekChar() <= 'z') || (peekChar() >= 'A' && peekChar() <= 'Z')))
      bump();
    std::string_view word = src_.substr(wordStart, pos_ - wordStart);
    if (word == "nan" && peekChar() == ':' && peekChar(1) == '0' && peekChar(2) == 'x') {
      bump();
      while (atNameChar())
        bump();
    }
    // Kernel syntax: the immediate's dtype follows (`inff32`).
    while (kernel() && atNameChar() && peekChar() != '.')
      bump();
  } else {
    bool hex = peekChar() == '0' && (peekChar(1) == 'x' || peekChar(1) == 'X');
    while (!atEnd()) {
      char c = peekChar();
      // (A number can start the text: there is no character before it.)
      char prev = pos_ > 0 ? src_[pos_ - 1] : '\0';
      if (atNameChar() || (!hex && (c == '+' || c == '-') && (prev == 'e' || prev == 'E')))
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
  uint64_t canonical = dtype == DType::F64   ? kCanonicalNaN64
                       : dtype == DType::F32 ? kCanonicalNaN32
                       : dtype == DType::F16 ? kCanonicalNaNF16
                                             : kCanonicalNaNBF16;
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

Expected<std::string> readTextFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return makeError("{}: read error", path);
  return ss.str();
}

} // namespace nnc::text

// Lexical rules and the lexer shared by the text-IR printers and parsers (internal to ir/):
// the graph IR's (Printer.cpp, Parser.cpp) and the kernel IR's (KernelPrinter.cpp,
// KernelParser.cpp).
//
// Graph syntax summary (see ir/Printer.cpp for the full grammar):
//   graph @main(%x: f32[N,784]) -> (f32[N,10]) {
//     %y = matmul(%x, %w) : f32[N,10] @"MatMul_0"
//     return %y
//   }
// Names (%value, @graph, @node, symbolic dims) are bare when they consist of
// [A-Za-z0-9_.] (dims: and start with a letter or '_'), else quoted with C-like escapes.
// The kernel syntax (see KernelPrinter.cpp) adds operators (+ - * / % < <= == && || ..) and
// has no %/@ names; a kernel name that is not bare is quoted the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nnc/ir/DType.h"
#include "nnc/support/Error.h"

namespace nnc::text {

inline bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}
inline bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/// Bit patterns printed as plain `nan` / `-nan`; other NaNs print as `nan:0xBITS`.
constexpr uint64_t kCanonicalNaN64 = 0x7ff8000000000000ull;
constexpr uint32_t kCanonicalNaN32 = 0x7fc00000u;
constexpr uint16_t kCanonicalNaNF16 = 0x7e00;
constexpr uint16_t kCanonicalNaNBF16 = 0x7fc0;

/// A kernel, buffer, loop or local name as the kernel text writes it: bare when it is an
/// identifier that does not read as a keyword or an immediate, else quoted.
std::string kernelName(std::string_view s);

/// `s` as a double-quoted string with C-like escapes (\" \\ \n \t \xHH), as the lexer reads it.
std::string quote(std::string_view s);

enum class Tok { Eof, Ident, Number, String, ValueName, AtName, Punct, Arrow, Bad };

struct Token {
  Tok kind = Tok::Eof;
  std::string text; ///< Decoded for strings and names; the error message for Bad.
  int line = 1, col = 1;
};

/// A character for an error message: "'c'", or "byte 0x07" when it does not print.
std::string charStr(char c);

/// A token for an error message: "'name'", "number 3", "end of file", ...
std::string describe(const Token &t);

/// Splits text into tokens, skipping white space and `//` comments. A malformed token comes
/// back as Tok::Bad with the message in its text; nothing throws.
class Lexer {
public:
  enum class Syntax {
    Graph,  ///< %value and @name tokens, '->'.
    Kernel, ///< Operators (a '-' after an operand is one), `..`; names stop before "..".
  };
  explicit Lexer(std::string_view src, Syntax syntax = Syntax::Graph)
      : src_(src), syntax_(syntax) {}

  Token next();

private:
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
  bool kernel() const { return syntax_ == Syntax::Kernel; }
  /// At a name character that continues the current name or number (kernel syntax: not the
  /// first '.' of "..").
  bool atNameChar() const {
    return !atEnd() && isNameChar(peekChar()) &&
           !(kernel() && peekChar() == '.' && peekChar(1) == '.');
  }
  void lex();
  bool lexString(std::string &out);
  bool lexName(std::string &out);
  void lexNumber();
  void badToken(std::string msg) {
    tok_.kind = Tok::Bad;
    tok_.text = std::move(msg);
  }

  std::string_view src_;
  Syntax syntax_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  Token tok_;
  Tok prev_ = Tok::Eof;
  bool prevClosed_ = false; ///< The previous token was ')' or ']'.
};

// ---- Numbers ------------------------------------------------------------------------------

/// True when a number token is written as a float (a '.', an exponent, inf or nan).
bool looksFloat(const std::string &s);
/// Parses an integer (decimal or 0x hex, optional '-') into magnitude and sign. Returns false
/// on a malformed number or a magnitude above 2^64-1.
bool parseIntText(const std::string &s, bool &negative, uint64_t &magnitude);
/// Exact bits of a float literal for a float dtype (f32, f64, f16, bf16).
Expected<uint64_t> floatBitsOf(const std::string &s, DType dtype);

// ---- Files ----------------------------------------------------------------------------------

/// The whole of a text file (graph IR or kernel IR), or an error naming the path.
Expected<std::string> readTextFile(const std::string &path);

} // namespace nnc::text

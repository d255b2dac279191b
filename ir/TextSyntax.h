// Lexical rules shared by the text-IR printer and parser (internal to ir/).
//
// Syntax summary (see ir/Printer.cpp for the full grammar):
//   graph @main(%x: f32[N,784]) -> (f32[N,10]) {
//     %y = matmul(%x, %w) : f32[N,10] @"MatMul_0"
//     return %y
//   }
// Names (%value, @graph, @node, symbolic dims) are bare when they consist of
// [A-Za-z0-9_.] (dims: and start with a letter or '_'), else quoted with C-like escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

} // namespace nnc::text

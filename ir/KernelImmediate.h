// The number literals of the kernel-IR text form: a token of the lexer's kernel syntax read as
// an integer or float immediate of its dtype suffix. Kept apart from the recursive-descent
// parser (KernelParser.cpp) because it is a grammar of its own, of characters, not tokens.
#pragma once

#include <string>

#include "TextSyntax.h"
#include "nnc/ir/Kernel.h"
#include "nnc/support/Error.h"

namespace nnc::kir {

/// A number token as an immediate: `3` (i64), `3i32`, `7u64`, `0.5f32`, `-inff64`,
/// `nan:0x<16 hex digits of the f64 bits>f32`. Errors read "FILE:LINE:COL: message".
Expected<Expr> kernelImmediate(const text::Token &at, const std::string &file);

} // namespace nnc::kir

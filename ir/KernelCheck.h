// Checks shared by the kernel IR's builders (Kernel.cpp) and its verifier (KernelVerifier.cpp).
#pragma once

#include <string>
#include <vector>

#include "nnc/ir/Kernel.h"

namespace nnc::kir {

/// The result type of elementwise op `kind` on `args` (in `result`), or a message saying what
/// is wrong with them (empty when nothing is).
std::string checkOp(OpKind kind, const std::vector<Expr> &args, DType &result);

} // namespace nnc::kir

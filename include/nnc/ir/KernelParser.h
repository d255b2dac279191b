// The kernel-level IR's text form: parsing (printKernel in Kernel.h writes it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nnc/ir/Kernel.h"

namespace nnc::kir {

/// Parses the kernels of `text`: one or more, each as printKernel writes it (with its
/// `schedule:` line, if any). Errors read "FILE:LINE:COL: message". Names, dtypes and scopes
/// are resolved while parsing (a load names a declared buffer, a variable a loop or local in
/// scope, an op's operands fit it); the rest of verifyKernel's checks are left to it, so that
/// a kernel the verifier rejects can still be written down.
Expected<std::vector<Kernel>> parseKernels(std::string_view text,
                                           const std::string &filename = "<input>");
/// Reads and parses a kernel file (.kir).
Expected<std::vector<Kernel>> parseKernelFile(const std::string &path);

} // namespace nnc::kir

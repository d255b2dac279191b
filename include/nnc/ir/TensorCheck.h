// Checks a concrete tensor against a declared tensor type (the interpreter's and the
// runtime's input checks share it).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nnc/ir/Shape.h"
#include "nnc/ir/Tensor.h"

namespace nnc {

/// Checks that `t` fits a value declared as `type`: same dtype and rank, static dims equal,
/// and each symbol bound to one extent throughout (`symbols` collects the bindings).
/// `place` names the value in the error ("input 'x'").
Error checkAgainstType(const Tensor &t, const TensorType &type,
                       std::map<std::string, int64_t> &symbols, const std::string &place);

} // namespace nnc

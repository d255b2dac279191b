// Index math simplified by the ranges of its loop variables, and the cut of a loop range that
// decides a compare: a fused data-movement nest (ViewFusion) whose concat selects its source
// by channel splits into one nest per source, each with plain affine index math.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnc/ir/Kernel.h"

namespace nnc::lower {

/// Inclusive bounds of each loop variable of an index expression.
using VarRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

/// Inclusive bounds of the integer expression `e` over `ranges` (nullopt when they are not
/// known: a variable without a range, a load, an operation it does not follow).
std::optional<std::pair<int64_t, int64_t>> boundsOf(const kir::Expr &e, const VarRanges &ranges);

/// `e` with what `ranges` decide folded, bottom up: an integer compare that holds (or fails)
/// everywhere becomes true (false), a select of a decided condition its branch, min/max of
/// ordered operands the one it picks, and x / d, x % d of an affine x whose terms not
/// divisible by d stay within one multiple of d the affine quotient and remainder.
kir::Expr simplifyIndexMath(const kir::Expr &e, const VarRanges &ranges);

/// A cut of one loop range that decides an integer compare of `e` undecided over `ranges`:
/// the variable (among `loops`, outermost first) and the first value of its upper part,
/// such that the compare is decided on each side. nullopt when there is none.
std::optional<std::pair<std::string, int64_t>>
decidingCut(const kir::Expr &e, const std::vector<std::string> &loops, const VarRanges &ranges);

/// A cut that moves a division x / d (or x % d) of `e` toward an affine form: x affine and
/// non-negative, its terms whose coefficients d does not divide varying over `ranges` across
/// multiples of d, and `inner` (the loop that must stay inside: the output's contiguous one)
/// among their variables. While another of those variables spans several values, its range is
/// halved; then `inner` is cut where the quotient first changes. nullopt when there is none.
std::optional<std::pair<std::string, int64_t>>
dividingCut(const kir::Expr &e, const std::string &inner, const VarRanges &ranges);

} // namespace nnc::lower

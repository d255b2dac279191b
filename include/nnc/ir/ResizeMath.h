// The host-side scalar math of resize (ONNX Resize-19), shared by the interpreter kernel
// (runtime/interp/Interpolation.cpp) and the lowering (codegen/lower/Resize.cpp), which builds
// its tables with exactly this double arithmetic: the coordinate transformation modes, nearest
// rounding, the linear and cubic coefficients, the antialias filters and exclude_outside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"

namespace nnc::resize {

/// The mode attributes of a resize node.
struct ResizeAttrs {
  std::string mode, ctm, nearestMode;
  double cubicA = -0.75;
  bool excludeOutside = false, antialias = false;
};

/// Reads node's mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
/// exclude_outside and antialias (off for nearest); an error for an unknown mode.
Expected<ResizeAttrs> readResizeAttrs(const Node &node);

struct Tap {
  int64_t index;
  double weight;
};

/// The input taps of one output coordinate along one axis; `extrapolate` when it maps outside
/// the input (tf_crop_and_resize only).
struct AxisTaps {
  std::vector<Tap> taps;
  bool extrapolate = false;
};

/// Interpolation weights for the taps at base + start + k, k = 0..n-1, where the input
/// coordinate is base + ratio with ratio in (0, 1].
std::vector<double> resizeCoefficients(const ResizeAttrs &a, double ratio, double scale,
                                       int64_t &start);

/// The taps (zero weights dropped, indices clamped to the input) of each of the `out` output
/// coordinates of an axis of `in` inputs resized by `scale` (roi bounds for tf_crop_and_resize).
std::vector<AxisTaps> resizeAxisTaps(const ResizeAttrs &a, int64_t in, int64_t out, double scale,
                                     double roiStart, double roiEnd);

} // namespace nnc::resize

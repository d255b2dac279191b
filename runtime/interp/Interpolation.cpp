// Interpreter kernel of resize by per-axis interpolation taps (ONNX Resize-19: nearest, linear,
// cubic, every coordinate transformation mode, antialias, exclude_outside, axes and
// keep_aspect_ratio_policy).
#include <algorithm>
#include <cmath>
#include <optional>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ResizeMath.h"

namespace nnc::interp {

Results evalResize(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  auto operand = [&](size_t i) -> const Tensor * {
    return i < ops.size() && !ops[i].isNull() ? &ops[i] : nullptr;
  };
  NNC_ASSIGN_OR_RETURN(ResizePlan plan,
                       planResize(node, x.extents(), operand(1), operand(2), operand(3)));
  NNC_ASSIGN_OR_RETURN(resize::ResizeAttrs a, resize::readResizeAttrs(node));
  double extrapolation = node.getFloat("extrapolation_value", 0.0);

  // Refuse an absurd output before building per-position tap tables for it.
  std::optional<int64_t> outCount = checkedNumElements(plan.out);
  if (!outCount || *outCount > maxTensorBytes() / static_cast<int64_t>(sizeof(double)))
    return node.error("output {} is too large", extentsStr(plan.out));
  size_t rank = static_cast<size_t>(x.rank());
  std::vector<std::vector<resize::AxisTaps>> taps;
  for (size_t d = 0; d < rank; ++d) {
    if (plan.out[d] > 0 && x.dim(d) == 0)
      return node.error("cannot resize an empty axis {}", d);
    taps.push_back(resize::resizeAxisTaps(a, x.dim(d), plan.out[d], plan.scales[d],
                                          plan.roiStart[d], plan.roiEnd[d]));
  }
  std::vector<double> xv = nn::toDoubles(x);
  std::vector<int64_t> stride = nn::stridesOf(x.extents());
  std::vector<double> yv(static_cast<size_t>(nn::product(plan.out)));
  std::vector<int64_t> oi(rank, 0), ti(rank, 0);
  Extents tapCount(rank);
  for (size_t e = 0; e < yv.size(); ++e) {
    bool extrapolate = false;
    for (size_t d = 0; d < rank; ++d) {
      const resize::AxisTaps &t = taps[d][oi[d]];
      extrapolate = extrapolate || t.extrapolate;
      tapCount[d] = static_cast<int64_t>(t.taps.size());
    }
    double v = 0;
    if (extrapolate) {
      v = extrapolation;
    } else if (nn::product(tapCount) > 0) {
      std::fill(ti.begin(), ti.end(), 0);
      do {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) {
          const resize::Tap &t = taps[d][oi[d]].taps[ti[d]];
          w *= t.weight;
          off += t.index * stride[d];
        }
        v += w * xv[static_cast<size_t>(off)];
      } while (nn::nextIndex(ti, tapCount));
    }
    yv[e] = v;
    nn::nextIndex(oi, plan.out);
  }
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), plan.out, yv));
  return std::vector<Tensor>{y};
}

} // namespace nnc::interp

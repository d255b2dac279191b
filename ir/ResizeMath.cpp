// The host-side scalar math of resize (see nnc/ir/ResizeMath.h).
#include "nnc/ir/ResizeMath.h"

#include <algorithm>
#include <cmath>

namespace nnc::resize {

Expected<ResizeAttrs> readResizeAttrs(const Node &node) {
  ResizeAttrs a;
  a.mode = node.getString("mode", "nearest");
  a.ctm = node.getString("coordinate_transformation_mode", "half_pixel");
  a.nearestMode = node.getString("nearest_mode", "round_prefer_floor");
  a.cubicA = node.getFloat("cubic_coeff_a", -0.75);
  a.excludeOutside = node.getInt("exclude_outside", 0) != 0;
  a.antialias = node.getInt("antialias", 0) != 0 && a.mode != "nearest";
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return node.error("unknown mode '{}'", a.mode);
  return a;
}

std::vector<double> resizeCoefficients(const ResizeAttrs &a, double ratio, double scale,
                                       int64_t &start) {
  if (a.mode == "nearest") {
    start = 0;
    bool ceil;
    if (ratio == 1.0)
      ceil = true;
    else if (a.nearestMode == "round_prefer_ceil")
      ceil = ratio >= 0.5;
    else if (a.nearestMode == "floor")
      ceil = false;
    else if (a.nearestMode == "ceil")
      ceil = true;
    else // round_prefer_floor
      ceil = ratio > 0.5;
    return ceil ? std::vector<double>{0, 1} : std::vector<double>{1, 0};
  }
  if (a.mode == "linear") {
    if (!a.antialias) {
      start = 0;
      return {1 - ratio, ratio};
    }
    double s = std::min(scale, 1.0);
    start = static_cast<int64_t>(std::floor(-1 / s)) + 1;
    int64_t n = 2 - 2 * start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      double v = std::clamp(1 - std::abs((start + k - ratio) * s), 0.0, 1.0);
      c.push_back(v);
      sum += v;
    }
    for (double &v : c)
      v /= sum;
    return c;
  }
  // cubic
  double A = a.cubicA;
  if (!a.antialias) {
    start = -1;
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A,
            ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1, ((A + 2) * q - (A + 3)) * q * q + 1,
            ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A};
  }
  double s = std::min(scale, 1.0);
  start = static_cast<int64_t>(std::floor(-2 / s)) + 1;
  int64_t n = 2 - 2 * start;
  auto kernel = [&](double x) {
    x = std::abs(x);
    if (x <= 1)
      return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
      return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0;
  };
  std::vector<double> c;
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    double v = kernel(s * (start + k - ratio));
    c.push_back(v);
    sum += v;
  }
  for (double &v : c)
    v /= sum;
  return c;
}

std::vector<AxisTaps> resizeAxisTaps(const ResizeAttrs &a, int64_t in, int64_t out, double scale,
                                     double roiStart, double roiEnd) {
  std::vector<AxisTaps> r(static_cast<size_t>(out));
  double outWidth = scale * static_cast<double>(in);
  double inW = static_cast<double>(in);
  for (int64_t o = 0; o < out; ++o) {
    double x = static_cast<double>(o), xo;
    if (a.ctm == "align_corners") {
      xo = outWidth == 1 ? 0 : x * (inW - 1) / (outWidth - 1);
    } else if (a.ctm == "asymmetric") {
      xo = x / scale;
    } else if (a.ctm == "tf_crop_and_resize") {
      xo = outWidth == 1 ? (roiEnd - roiStart) * (inW - 1) / 2
                         : x * (roiEnd - roiStart) * (inW - 1) / (outWidth - 1);
      xo += roiStart * (inW - 1);
      if (xo < 0 || xo > inW - 1) {
        r[o].extrapolate = true;
        continue;
      }
    } else if (a.ctm == "pytorch_half_pixel") {
      xo = outWidth == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (a.ctm == "half_pixel_symmetric") {
      double adjustment = static_cast<double>(out) / outWidth;
      double offset = inW / 2 * (1 - adjustment);
      xo = offset + (x + 0.5) / scale - 0.5;
    } else if (a.ctm == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else { // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    if (!(std::fabs(xo) < 0x1p52)) { // a NaN, infinite or absurd roi
      r[o].extrapolate = true;
      continue;
    }
    double fl = std::floor(xo);
    int64_t base = static_cast<int64_t>(fl);
    double ratio = xo - fl;
    if (ratio == 0) {
      ratio = 1;
      base -= 1;
    }
    int64_t start = 0;
    std::vector<double> c = resizeCoefficients(a, ratio, scale, start);
    if (a.excludeOutside) {
      double sum = 0;
      for (size_t k = 0; k < c.size(); ++k) {
        int64_t idx = base + start + static_cast<int64_t>(k);
        if (idx < 0 || idx >= in)
          c[k] = 0;
        sum += c[k];
      }
      for (double &v : c)
        v /= sum;
    }
    for (size_t k = 0; k < c.size(); ++k) {
      if (c[k] == 0)
        continue;
      int64_t idx = std::clamp<int64_t>(base + start + static_cast<int64_t>(k), 0, in - 1);
      r[o].taps.push_back({idx, c[k]});
    }
  }
  return r;
}

} // namespace nnc::resize

// Interpreter kernel of grid_sample (ONNX GridSample-20, N-D): each output position's grid
// entry is denormalized per spatial axis, put inside the image by the padding rule, and the
// image is interpolated there (nearest, linear or cubic). codegen/lower/GridSample.cpp builds
// the same per-axis taps in kernel IR, with the same operations in the same order.
#include <cmath>
#include <string>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"

namespace nnc::interp {

namespace {

/// ONNX's reflection of x into [lo, hi] (by the near border, as often as it takes); a range
/// of zero width (align_corners on an axis of one) reflects everything to lo.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0)
    return lo;
  if (x < lo) {
    double dx = lo - x, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

struct Tap {
  int64_t index; ///< -1: outside the image (zeros padding).
  double weight;
};

/// The taps of one axis of `size` at normalized coordinate g, in the compute type T.
template <typename T>
void axisTaps(T g, int64_t size, const std::string &mode, const std::string &pad, bool align,
              std::vector<Tap> &taps) {
  T len = static_cast<T>(size);
  T x = align ? (g + T(1)) / T(2) * (len - T(1)) : ((g + T(1)) * len - T(1)) / T(2);
  const T limit = T(16777216); // 2^24
  if (std::isnan(x))
    x = -limit;
  x = std::min(std::max(x, -limit), limit);
  // Half to even on every rank: the ONNX node tests' data rounds volumetric samples so too
  // (ONNX's reference rounds 3-D half away from zero, as PyTorch does; the tests disagree).
  if (mode == "nearest")
    x = std::nearbyint(x);
  double lo = align ? 0.0 : -0.5, hi = align ? double(size - 1) : double(size) - 0.5;
  if (double(x) < lo || double(x) > hi) {
    if (pad == "border")
      x = std::min(std::max(x, T(0)), len - T(1));
    else if (pad == "reflection")
      x = static_cast<T>(reflect(double(x), lo, hi));
  }
  auto pixel = [&](int64_t i) -> int64_t {
    if (pad == "zeros")
      return i >= 0 && i < size ? i : -1;
    if (pad == "border")
      return std::min<int64_t>(std::max<int64_t>(i, 0), size - 1);
    int64_t r = static_cast<int64_t>(reflect(double(i), lo, hi));
    return std::min<int64_t>(std::max<int64_t>(r, 0), size - 1);
  };
  taps.clear();
  if (mode == "nearest") {
    taps.push_back({pixel(static_cast<int64_t>(x)), 1.0});
    return;
  }
  T fl = std::floor(x), t = x - fl;
  int64_t i0 = static_cast<int64_t>(fl);
  if (mode == "linear") {
    taps.push_back({pixel(i0), double(T(1) - t)});
    taps.push_back({pixel(i0 + 1), double(t)});
    return;
  }
  const T a = T(-0.75);
  T u = t + T(1), v = T(1) - t, w = T(2) - t;
  T c0 = ((a * u - T(5) * a) * u + T(8) * a) * u - T(4) * a;
  T c1 = ((a + T(2)) * t - (a + T(3))) * t * t + T(1);
  T c2 = ((a + T(2)) * v - (a + T(3))) * v * v + T(1);
  T c3 = ((a * w - T(5) * a) * w + T(8) * a) * w - T(4) * a;
  T c[4] = {c0, c1, c2, c3};
  for (int k = 0; k < 4; ++k)
    taps.push_back({pixel(i0 - 1 + k), double(c[k])});
}

template <typename T>
Results sample(const Tensor &x, const Tensor &grid, const std::string &mode, const std::string &pad,
               bool align) {
  Extents xe = x.extents(), ge = grid.extents();
  size_t k = xe.size() - 2;
  int64_t n = xe[0], c = xe[1];
  Extents ye{n, c};
  for (size_t d = 1; d + 1 < ge.size(); ++d)
    ye.push_back(ge[d]);
  int64_t positions = 1, image = 1;
  for (size_t d = 1; d + 1 < ge.size(); ++d)
    positions *= ge[d];
  for (size_t d = 0; d < k; ++d)
    image *= xe[2 + d];
  std::vector<double> xv = nn::toDoubles(x), gv = nn::toDoubles(grid);
  std::vector<double> yv(static_cast<size_t>(n * c * positions), 0.0);
  std::vector<int64_t> stride = nn::stridesOf(Extents(xe.begin() + 2, xe.end()));
  std::vector<std::vector<Tap>> taps(k);
  std::vector<int64_t> ti(k);
  Extents tapCount(k);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < positions; ++p) {
      const double *g = &gv[static_cast<size_t>((b * positions + p) * int64_t(k))];
      for (size_t d = 0; d < k; ++d) {
        axisTaps<T>(static_cast<T>(g[k - 1 - d]), xe[2 + d], mode, pad, align, taps[d]);
        tapCount[d] = static_cast<int64_t>(taps[d].size());
      }
      std::fill(ti.begin(), ti.end(), 0);
      do {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0; d < k && off >= 0; ++d) {
          const Tap &t = taps[d][static_cast<size_t>(ti[d])];
          w *= t.weight;
          off = t.index < 0 ? -1 : off + t.index * stride[d];
        }
        if (off < 0)
          continue;
        for (int64_t ch = 0; ch < c; ++ch)
          yv[static_cast<size_t>((b * c + ch) * positions + p)] +=
              w * xv[static_cast<size_t>((b * c + ch) * image + off)];
      } while (nn::nextIndex(ti, tapCount));
    }
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), ye, yv));
  return std::vector<Tensor>{y};
}

} // namespace

Results evalGridSample(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &grid = ops[1];
  Extents xe = x.extents(), ge = grid.extents();
  if (ge.size() != xe.size() || ge.back() != static_cast<int64_t>(xe.size()) - 2 || ge[0] != xe[0])
    return node.error("grid {} does not fit X {}: it must be [N, O1.., {}]", extentsStr(ge),
                      extentsStr(xe), static_cast<int64_t>(xe.size()) - 2);
  std::string mode = node.getString("mode", "linear");
  std::string pad = node.getString("padding_mode", "zeros");
  bool align = node.getInt("align_corners", 0) != 0;
  if (x.dtype() == DType::F64)
    return sample<double>(x, grid, mode, pad, align);
  return sample<float>(x, grid, mode, pad, align);
}

} // namespace nnc::interp

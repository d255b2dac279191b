// Interpreter kernels of the local-window ops: max_pool (with argmax indices), avg_pool and
// lrn; N-D, computed in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::interp {

namespace {

/// The taps of one window along one axis: the input coordinates it covers (padding is never
/// visited, so a huge kernel or pad costs nothing) and how many of its taps lie inside the
/// padded input (for count_include_pad).
struct AxisWindow {
  std::vector<int64_t> in;
  int64_t padded = 0;
};

struct PoolSetup {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial, kernel;
  int64_t inSize = 1, outSize = 1, planes = 1;
  std::vector<int64_t> inStride;
  /// windows[axis][o].
  std::vector<std::vector<AxisWindow>> windows;
};

/// ceil(a / b) for b > 0 without overflow.
int64_t ceilDivPos(int64_t a, int64_t b) {
  return a / b + ((a % b != 0 && a > 0) ? 1 : 0);
}

Expected<PoolSetup> setupPool(const Node &node, const Tensor &x) {
  if (x.rank() < 3)
    return node.error("input must have rank >= 3 (N, C, spatial...), got {}",
                      extentsStr(x.extents()));
  size_t n = static_cast<size_t>(x.rank() - 2);
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  if (ks.size() != n)
    return node.error("kernel_shape has {} values for {} spatial axes", ks.size(), n);
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  PoolSetup s;
  s.planes = x.dim(0) * x.dim(1);
  Extents outExtents{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.dim(i + 2);
    NNC_ASSIGN_OR_RETURN(WindowAxis ax, windowAxis(node, a, i, in, ks[i]));
    s.axes.push_back(ax);
    s.inSpatial.push_back(in);
    s.outSpatial.push_back(ax.out);
    s.kernel.push_back(ks[i]);
    s.inSize *= in;
    outExtents.push_back(ax.out);
  }
  // Refuse an absurd output before building per-position tables for it.
  std::optional<int64_t> outCount = checkedNumElements(outExtents);
  if (!outCount || *outCount > maxTensorBytes() / static_cast<int64_t>(sizeof(double)))
    return node.error("output {} is too large", extentsStr(outExtents));
  for (size_t i = 0; i < n; ++i) {
    const WindowAxis &ax = s.axes[i];
    int64_t in = ax.in;
    s.outSize *= ax.out;
    std::vector<AxisWindow> t(static_cast<size_t>(ax.out));
    for (int64_t o = 0; o < ax.out; ++o) {
      int64_t start = o * ax.stride - ax.padBegin; // input coordinate of tap 0
      // Taps k with 0 <= start + k*dilation < in, and with start + k*dilation < in + padEnd.
      int64_t lo = start >= 0 ? 0 : ceilDivPos(-start, ax.dilation);
      int64_t hi = in - start > 0 ? std::min(ax.kernel, ceilDivPos(in - start, ax.dilation)) : 0;
      for (int64_t k = lo; k < hi; ++k)
        t[o].in.push_back(start + k * ax.dilation);
      int64_t end = in + ax.padEnd - start;
      t[o].padded = end > 0 ? std::min(ax.kernel, ceilDivPos(end, ax.dilation)) : 0;
    }
    s.windows.push_back(std::move(t));
  }
  s.inStride = nn::stridesOf(s.inSpatial);
  return s;
}

/// Calls f(flat input offset, per-axis input coordinates) for each tap of the window of
/// output position `oi` that lies inside the input.
template <typename F>
void forEachWindowTap(const PoolSetup &s, const std::vector<int64_t> &oi, F f) {
  size_t n = s.axes.size();
  Extents count(n);
  for (size_t d = 0; d < n; ++d) {
    count[d] = static_cast<int64_t>(s.windows[d][oi[d]].in.size());
    if (count[d] == 0)
      return;
  }
  std::vector<int64_t> ki(n, 0), coord(n);
  const std::vector<int64_t> &stride = s.inStride;
  do {
    int64_t off = 0;
    for (size_t d = 0; d < n; ++d) {
      coord[d] = s.windows[d][oi[d]].in[ki[d]];
      off += coord[d] * stride[d];
    }
    f(off, coord);
  } while (nn::nextIndex(ki, count));
}

/// The number of taps of the window at `oi` inside the input (or inside the padded input).
double windowCount(const PoolSetup &s, const std::vector<int64_t> &oi, bool includePad) {
  double c = 1;
  for (size_t d = 0; d < s.axes.size(); ++d) {
    const AxisWindow &w = s.windows[d][oi[d]];
    c *= static_cast<double>(includePad ? w.padded : static_cast<int64_t>(w.in.size()));
  }
  return c;
}

} // namespace

Results evalMaxPool(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  NNC_ASSIGN_OR_RETURN(PoolSetup s, setupPool(node, x));
  bool colMajor = node.getInt("storage_order", 0) == 1;
  // Column-major strides of the spatial dims, for storage_order = 1 indices.
  std::vector<int64_t> colStride(s.inSpatial.size(), 1);
  for (size_t d = 1; d < colStride.size(); ++d)
    colStride[d] = colStride[d - 1] * s.inSpatial[d - 1];
  std::vector<double> xv = nn::toDoubles(x);
  std::vector<double> yv(static_cast<size_t>(s.planes * s.outSize));
  std::vector<int64_t> iv(yv.size());
  for (int64_t p = 0; p < s.planes; ++p) {
    const double *src = xv.data() + p * s.inSize;
    std::vector<int64_t> oi(s.axes.size(), 0);
    for (int64_t o = 0; o < s.outSize; ++o) {
      bool any = false, sawNaN = false;
      double best = 0;
      int64_t bestIdx = -1;
      forEachWindowTap(s, oi, [&](int64_t off, const std::vector<int64_t> &coord) {
        double v = src[off];
        if (std::isnan(v)) {
          sawNaN = true;
          return;
        }
        if (!any || v > best) {
          any = true;
          best = v;
          int64_t idx = off;
          if (colMajor) {
            idx = 0;
            for (size_t d = 0; d < coord.size(); ++d)
              idx += coord[d] * colStride[d];
          }
          bestIdx = p * s.inSize + idx;
        }
      });
      if (!any)
        best = sawNaN ? std::numeric_limits<double>::quiet_NaN()
                      : -std::numeric_limits<double>::infinity();
      yv[p * s.outSize + o] = best;
      iv[p * s.outSize + o] = bestIdx;
      nn::nextIndex(oi, s.outSpatial);
    }
  }
  Extents out{x.dim(0), x.dim(1)};
  out.insert(out.end(), s.outSpatial.begin(), s.outSpatial.end());
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), out, yv));
  std::vector<Tensor> results{y};
  if (node.numResults() > 1) {
    NNC_ASSIGN_OR_RETURN(Tensor idx, Tensor::create(DType::I64, out));
    std::copy(iv.begin(), iv.end(), idx.data<int64_t>());
    results.push_back(idx);
  }
  return results;
}

Results evalAvgPool(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (!isFloat(x.dtype()))
    return node.error("expects a float dtype, got {}", dtypeName(x.dtype()));
  NNC_ASSIGN_OR_RETURN(PoolSetup s, setupPool(node, x));
  bool includePad = node.getInt("count_include_pad", 0) != 0;
  std::vector<double> xv = nn::toDoubles(x);
  std::vector<double> yv(static_cast<size_t>(s.planes * s.outSize));
  for (int64_t p = 0; p < s.planes; ++p) {
    const double *src = xv.data() + p * s.inSize;
    std::vector<int64_t> oi(s.axes.size(), 0);
    for (int64_t o = 0; o < s.outSize; ++o) {
      double sum = 0;
      forEachWindowTap(s, oi, [&](int64_t off, const std::vector<int64_t> &) { sum += src[off]; });
      yv[p * s.outSize + o] = sum / windowCount(s, oi, includePad);
      nn::nextIndex(oi, s.outSpatial);
    }
  }
  Extents out{x.dim(0), x.dim(1)};
  out.insert(out.end(), s.outSpatial.begin(), s.outSpatial.end());
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), out, yv));
  return std::vector<Tensor>{y};
}

Results evalLRN(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (!isFloat(x.dtype()) || x.rank() < 2)
    return node.error("expects a float input of rank >= 2, got {} {}", dtypeName(x.dtype()),
                      extentsStr(x.extents()));
  int64_t size = node.getInt("size", 0);
  if (size < 1)
    return node.error("size {} must be >= 1", size);
  double alpha = node.getFloat("alpha", 1e-4), beta = node.getFloat("beta", 0.75),
         bias = node.getFloat("bias", 1.0);
  int64_t n = x.dim(0), c = x.dim(1), inner = 1;
  for (int64_t d = 2; d < x.rank(); ++d)
    inner *= x.dim(d);
  int64_t before = (size - 1) / 2, after = size - 1 - before; // floor and ceil of (size-1)/2
  std::vector<double> xv = nn::toDoubles(x), yv(xv.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci) {
      int64_t lo = std::max<int64_t>(0, ci - before), hi = std::min<int64_t>(c - 1, ci + after);
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          double v = xv[(b * c + k) * inner + i];
          sq += v * v;
        }
        size_t at = static_cast<size_t>((b * c + ci) * inner + i);
        yv[at] = xv[at] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
    }
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), x.extents(), yv));
  return std::vector<Tensor>{y};
}

} // namespace nnc::interp

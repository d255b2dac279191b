// Interpreter kernels of the detection ops: roi_align (ONNX RoiAlign-16) and
// non_max_suppression (ONNX NonMaxSuppression-11), as ONNX's reference computes them.
#include <algorithm>
#include <cmath>
#include <string>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"

namespace nnc::interp {

namespace {

/// Element 0 of an optional one-element operand, or `dflt` when absent or empty.
double scalarOr(const Operands &ops, size_t i, double dflt) {
  if (i >= ops.size() || ops[i].isNull() || ops[i].numElements() == 0)
    return dflt;
  return ops[i].elementAsDouble(0);
}

} // namespace

Results evalRoiAlign(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &rois = ops[1], &bi = ops[2];
  Extents xe = x.extents();
  int64_t n = xe[0], c = xe[1], h = xe[2], w = xe[3];
  int64_t r = rois.extents()[0];
  if (rois.extents()[1] != 4 || bi.numElements() != r)
    return node.error("rois {} and batch_indices {} must be [R, 4] and [R]",
                      extentsStr(rois.extents()), extentsStr(bi.extents()));
  int64_t ph = node.getInt("output_height", 1), pw = node.getInt("output_width", 1);
  int64_t ratio = node.getInt("sampling_ratio", 0);
  double scale = node.getFloat("spatial_scale", 1.0);
  bool avg = node.getString("mode", "avg") == "avg";
  bool halfPixel = node.getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  std::vector<double> xv = nn::toDoubles(x), rv = nn::toDoubles(rois);
  std::vector<int64_t> batch = bi.toInt64Vector();
  std::vector<double> yv(static_cast<size_t>(r * c * ph * pw), 0.0);
  double offset = halfPixel ? 0.5 : 0.0;
  for (int64_t i = 0; i < r; ++i) {
    int64_t b = batch[static_cast<size_t>(i)];
    if (b < 0 || b >= n)
      return node.error("batch index {} is out of range for a batch of {}", b, n);
    const double *roi = &rv[static_cast<size_t>(4 * i)];
    double x0 = roi[0] * scale - offset, y0 = roi[1] * scale - offset;
    double rw = roi[2] * scale - offset - x0, rh = roi[3] * scale - offset - y0;
    if (!halfPixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / double(ph), bw = rw / double(pw);
    // A NaN or absurd roi samples its bins once (the grid count is data, not a loop bound
    // to trust).
    auto gridOf = [&](double extent, int64_t bins) -> int64_t {
      if (ratio > 0)
        return ratio;
      double g = std::ceil(extent / double(bins));
      return g >= 1 && g <= 1e6 ? static_cast<int64_t>(g) : (g > 1e6 ? 1000000 : 0);
    };
    int64_t gh = gridOf(rh, ph), gw = gridOf(rw, pw);
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t oy = 0; oy < ph; ++oy)
      for (int64_t ox = 0; ox < pw; ++ox)
        for (int64_t ch = 0; ch < c; ++ch) {
          const double *img = &xv[static_cast<size_t>((b * c + ch) * h * w)];
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy = y0 + double(oy) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = x0 + double(ox) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v[4] = {0, 0, 0, 0};
              if (!(yy < -1.0 || yy > double(h) || xx < -1.0 || xx > double(w))) {
                yy = std::max(yy, 0.0);
                xx = std::max(xx, 0.0);
                int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
                if (yl >= h - 1) {
                  yh = yl = h - 1;
                  yy = double(yl);
                } else {
                  yh = yl + 1;
                }
                if (xl >= w - 1) {
                  xh = xl = w - 1;
                  xx = double(xl);
                } else {
                  xh = xl + 1;
                }
                double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                v[0] = hy * hx * img[yl * w + xl];
                v[1] = hy * lx * img[yl * w + xh];
                v[2] = ly * hx * img[yh * w + xl];
                v[3] = ly * lx * img[yh * w + xh];
              }
              if (avg) {
                acc += v[0] + v[1] + v[2] + v[3];
              } else {
                double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                acc = first ? m : std::max(acc, m);
                first = false;
              }
            }
          yv[static_cast<size_t>(((i * c + ch) * ph + oy) * pw + ox)] = avg ? acc / count : acc;
        }
  }
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), {r, c, ph, pw}, yv));
  return std::vector<Tensor>{y};
}

namespace {

/// Whether box j suppresses box i: their IoU exceeds `threshold`, in the compute type T as
/// ONNX's reference has it.
template <typename T> bool suppresses(const T *bi, const T *bj, bool centerPoint, T threshold) {
  T xmin[2], xmax[2], ymin[2], ymax[2];
  const T *b[2] = {bi, bj};
  for (int k = 0; k < 2; ++k) {
    if (centerPoint) {
      T hw = b[k][2] / T(2), hh = b[k][3] / T(2);
      xmin[k] = b[k][0] - hw;
      xmax[k] = b[k][0] + hw;
      ymin[k] = b[k][1] - hh;
      ymax[k] = b[k][1] + hh;
    } else {
      xmin[k] = std::min(b[k][1], b[k][3]);
      xmax[k] = std::max(b[k][1], b[k][3]);
      ymin[k] = std::min(b[k][0], b[k][2]);
      ymax[k] = std::max(b[k][0], b[k][2]);
    }
  }
  T ix0 = std::max(xmin[0], xmin[1]), ix1 = std::min(xmax[0], xmax[1]);
  T iy0 = std::max(ymin[0], ymin[1]), iy1 = std::min(ymax[0], ymax[1]);
  if (!(ix1 > ix0) || !(iy1 > iy0))
    return false;
  T inter = (ix1 - ix0) * (iy1 - iy0);
  T a0 = (xmax[0] - xmin[0]) * (ymax[0] - ymin[0]);
  T a1 = (xmax[1] - xmin[1]) * (ymax[1] - ymin[1]);
  T uni = a0 + a1 - inter;
  if (!(inter > 0) || !(a0 > 0) || !(a1 > 0) || !(uni > 0))
    return false;
  return inter / uni > threshold;
}

template <typename T>
std::vector<int64_t> select(const Tensor &boxes, const Tensor &scores, int64_t maxOut,
                            T iouThreshold, bool hasScoreThreshold, T scoreThreshold,
                            bool centerPoint) {
  Extents be = boxes.extents(), se = scores.extents();
  int64_t nb = be[0], nbox = be[1], nc = se[1];
  std::vector<double> bd = nn::toDoubles(boxes), sd = nn::toDoubles(scores);
  std::vector<T> bt(bd.begin(), bd.end());
  std::vector<int64_t> out;
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t cl = 0; cl < nc; ++cl) {
      const double *s = &sd[static_cast<size_t>((b * nc + cl) * nbox)];
      order.clear();
      for (int64_t i = 0; i < nbox; ++i)
        if (!hasScoreThreshold || static_cast<T>(s[i]) > scoreThreshold)
          order.push_back(i);
      // Descending score, ties by ascending index (the reference's BoxInfo order); NaN
      // counts as the largest score.
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
        return (std::isnan(s[a]) && !std::isnan(s[c])) || s[a] > s[c];
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= maxOut)
          break;
        bool keep = true;
        for (int64_t j : kept)
          if (suppresses<T>(&bt[static_cast<size_t>((b * nbox + i) * 4)],
                            &bt[static_cast<size_t>((b * nbox + j) * 4)], centerPoint,
                            iouThreshold)) {
            keep = false;
            break;
          }
        if (!keep)
          continue;
        kept.push_back(i);
        out.insert(out.end(), {b, cl, i});
      }
    }
  return out;
}

} // namespace

Results evalNonMaxSuppression(const Node &node, const Operands &ops) {
  const Tensor &boxes = ops[0], &scores = ops[1];
  Extents be = boxes.extents(), se = scores.extents();
  if (be.size() != 3 || be[2] != 4 || se.size() != 3 || se[0] != be[0] || se[2] != be[1])
    return node.error("boxes {} and scores {} must be [B, n, 4] and [B, classes, n]",
                      extentsStr(be), extentsStr(se));
  // Read as an integer: exporters pass INT64_MAX, which a double does not hold.
  int64_t maxOut = ops.size() > 2 && !ops[2].isNull() && ops[2].numElements() > 0
                       ? std::max<int64_t>(ops[2].elementAsInt(0), 0)
                       : 0;
  bool hasScore = ops.size() > 4 && !ops[4].isNull() && ops[4].numElements() > 0;
  bool center = node.getInt("center_point_box", 0) != 0;
  std::vector<int64_t> rows =
      boxes.dtype() == DType::F64
          ? select<double>(boxes, scores, maxOut, scalarOr(ops, 3, 0), hasScore,
                           scalarOr(ops, 4, 0), center)
          : select<float>(boxes, scores, maxOut, static_cast<float>(scalarOr(ops, 3, 0)), hasScore,
                          static_cast<float>(scalarOr(ops, 4, 0)), center);
  int64_t count = static_cast<int64_t>(rows.size()) / 3;
  return std::vector<Tensor>{Tensor::fromVector<int64_t>(DType::I64, {count, 3}, rows)};
}

} // namespace nnc::interp

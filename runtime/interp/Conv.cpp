// Interpreter kernels of conv (im2col + GEMM) and conv_transpose (GEMM + col2im), N-D with
// groups, dilations and padding; computed in double.
#include <limits>
#include <algorithm>

#include <Eigen/Dense>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::interp {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct ConvSetup {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial, kernel;
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

Expected<ConvSetup> setupConv(const Node &node, const Tensor &x, const Tensor &w, bool transpose) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return node.error("input {} and weight {} must have one rank >= 3", extentsStr(x.extents()),
                      extentsStr(w.extents()));
  size_t n = static_cast<size_t>(x.rank() - 2);
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  ConvSetup s;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.dim(i + 2), k = w.dim(i + 2);
    Expected<WindowAxis> ax =
        transpose ? transposeWindowAxis(node, a, i, in, k) : windowAxis(node, a, i, in, k);
    if (!ax)
      return ax.takeError();
    s.axes.push_back(*ax);
    s.inSpatial.push_back(in);
    s.outSpatial.push_back(ax->out);
    s.kernel.push_back(k);
  }
  // The spatial products, saturated where they overflow (a hostile model's 2^40 x 2^40
  // output): the buffer checks then refuse such a conv by its full shape, and an empty batch
  // still gives its empty result.
  auto product = [](const Extents &e) {
    std::optional<int64_t> n = checkedNumElements(e);
    return n ? *n : std::numeric_limits<int64_t>::max();
  };
  s.inSize = product(s.inSpatial);
  s.outSize = product(s.outSpatial);
  s.kernelSize = product(s.kernel);
  return s;
}

/// Refuses a buffer of prod(dims) doubles that is absurd (or overflows), before allocating it.
Error checkBuffer(const Node &node, const Extents &dims, const char *what) {
  std::optional<int64_t> n = checkedNumElements(dims);
  if (!n || *n > maxTensorBytes() / static_cast<int64_t>(sizeof(double)))
    return node.error("{} {} is too large", what, extentsStr(dims));
  return Error::success();
}

/// Group checks shared by conv and conv_transpose: `group` divides the `c` input channels (a
/// group larger than the channels could only loop over nothing, for a very long time).
Error checkGroup(const Node &node, const Tensor &x, const Tensor &w, int64_t group) {
  int64_t c = x.dim(1);
  if (group < 1 || group > std::max<int64_t>(c, 1) || c % group != 0)
    return node.error("input {} and weight {} do not match group {}", extentsStr(x.extents()),
                      extentsStr(w.extents()), group);
  return Error::success();
}

/// For axis i, kernel tap k and "source" position p (conv: output position; conv_transpose:
/// input position), the position on the other side, or -1 when it falls outside `limit`.
std::vector<std::vector<std::vector<int64_t>>> tapTable(const ConvSetup &s, bool transpose) {
  std::vector<std::vector<std::vector<int64_t>>> t(s.axes.size());
  for (size_t i = 0; i < s.axes.size(); ++i) {
    const WindowAxis &a = s.axes[i];
    int64_t from = transpose ? a.in : a.out, limit = transpose ? a.out : a.in;
    t[i].assign(static_cast<size_t>(a.kernel), std::vector<int64_t>(static_cast<size_t>(from)));
    for (int64_t k = 0; k < a.kernel; ++k)
      for (int64_t p = 0; p < from; ++p) {
        int64_t q = p * a.stride - a.padBegin + k * a.dilation;
        t[i][k][p] = q >= 0 && q < limit ? q : -1;
      }
  }
  return t;
}

/// Visits every (source position, target flat offset or -1) pair for kernel tap `kidx`:
/// the source positions are `from` (row-major flat index), the target positions `to`.
template <typename F>
void forEachTap(const std::vector<std::vector<std::vector<int64_t>>> &table,
                const std::vector<int64_t> &kidx, const Extents &from, const Extents &to, F f) {
  size_t n = from.size();
  std::vector<int64_t> toStride = nn::stridesOf(to);
  int64_t inner = from[n - 1];
  const std::vector<int64_t> &last = table[n - 1][kidx[n - 1]];
  Extents outer(from.begin(), from.end() - 1);
  std::vector<int64_t> oi(n - 1, 0);
  int64_t numOuter = nn::product(outer), src = 0;
  for (int64_t o = 0; o < numOuter; ++o) {
    int64_t base = 0;
    bool valid = true;
    for (size_t d = 0; d + 1 < n; ++d) {
      int64_t q = table[d][kidx[d]][oi[d]];
      if (q < 0) {
        valid = false;
        break;
      }
      base += q * toStride[d];
    }
    for (int64_t p = 0; p < inner; ++p, ++src)
      f(src, valid && last[p] >= 0 ? base + last[p] : -1);
    nn::nextIndex(oi, outer);
  }
}

} // namespace

Results evalConv(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &w = ops[1];
  const Tensor &bias = ops.size() > 2 ? ops[2] : Tensor();
  NNC_ASSIGN_OR_RETURN(ConvSetup s, setupConv(node, x, w, /*transpose=*/false));
  int64_t group = node.getInt("group", 1);
  int64_t batch = x.dim(0), c = x.dim(1), m = w.dim(0);
  NNC_TRY(checkGroup(node, x, w, group));
  if (m % group != 0 || w.dim(1) * group != c)
    return node.error("input {} and weight {} do not match group {}", extentsStr(x.extents()),
                      extentsStr(w.extents()), group);
  if (!bias.isNull() && bias.numElements() != m)
    return node.error("bias has {} values for {} output channels", bias.numElements(), m);
  int64_t cg = c / group, mg = m / group, rows = cg * s.kernelSize;
  Extents out{batch, m};
  out.insert(out.end(), s.outSpatial.begin(), s.outSpatial.end());
  NNC_TRY(checkBuffer(node, out, "output"));
  if (batch * m == 0) {
    NNC_ASSIGN_OR_RETURN(Tensor empty, Tensor::create(x.dtype(), out));
    return std::vector<Tensor>{empty};
  }
  NNC_TRY(checkBuffer(node, {rows, s.outSize}, "im2col buffer"));
  std::vector<double> xv = nn::toDoubles(x), wv = nn::toDoubles(w);
  std::vector<double> bv = bias.isNull() ? std::vector<double>() : nn::toDoubles(bias);
  std::vector<double> col(static_cast<size_t>(rows * s.outSize));
  std::vector<double> yv(static_cast<size_t>(batch * m * s.outSize));
  auto table = tapTable(s, /*transpose=*/false);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < group; ++g) {
      // im2col: row (channel, tap), column output position.
      for (int64_t ci = 0; ci < cg; ++ci) {
        const double *src = xv.data() + ((b * c + g * cg + ci) * s.inSize);
        std::vector<int64_t> kidx(s.kernel.size(), 0);
        for (int64_t kf = 0; kf < s.kernelSize; ++kf) {
          double *dst = col.data() + (ci * s.kernelSize + kf) * s.outSize;
          forEachTap(table, kidx, s.outSpatial, s.inSpatial,
                     [&](int64_t o, int64_t i) { dst[o] = i >= 0 ? src[i] : 0.0; });
          nn::nextIndex(kidx, s.kernel);
        }
      }
      Eigen::Map<const RowMatrix> wm(wv.data() + g * mg * rows, mg, rows);
      Eigen::Map<const RowMatrix> cm(col.data(), rows, s.outSize);
      Eigen::Map<RowMatrix> ym(yv.data() + (b * m + g * mg) * s.outSize, mg, s.outSize);
      if (rows == 0)
        ym.setZero();
      else
        ym.noalias() = wm * cm;
      if (!bv.empty())
        for (int64_t j = 0; j < mg; ++j)
          ym.row(j).array() += bv[g * mg + j];
    }
  NNC_ASSIGN_OR_RETURN(Tensor r, nn::fromDoubles(x.dtype(), out, yv));
  return std::vector<Tensor>{r};
}

Results evalConvTranspose(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &w = ops[1];
  const Tensor &bias = ops.size() > 2 ? ops[2] : Tensor();
  NNC_ASSIGN_OR_RETURN(ConvSetup s, setupConv(node, x, w, /*transpose=*/true));
  int64_t group = node.getInt("group", 1);
  int64_t batch = x.dim(0), c = x.dim(1);
  NNC_TRY(checkGroup(node, x, w, group));
  if (w.dim(0) != c)
    return node.error("input {} and weight {} do not match group {}", extentsStr(x.extents()),
                      extentsStr(w.extents()), group);
  int64_t cg = c / group, mg = w.dim(1), m = mg * group, rows = mg * s.kernelSize;
  if (!bias.isNull() && bias.numElements() != m)
    return node.error("bias has {} values for {} output channels", bias.numElements(), m);
  Extents out{batch, m};
  out.insert(out.end(), s.outSpatial.begin(), s.outSpatial.end());
  NNC_TRY(checkBuffer(node, out, "output"));
  if (batch * m == 0) {
    NNC_ASSIGN_OR_RETURN(Tensor empty, Tensor::create(x.dtype(), out));
    return std::vector<Tensor>{empty};
  }
  NNC_TRY(checkBuffer(node, {rows, s.inSize}, "col2im buffer"));
  std::vector<double> xv = nn::toDoubles(x), wv = nn::toDoubles(w);
  std::vector<double> col(static_cast<size_t>(rows * s.inSize));
  std::vector<double> yv(static_cast<size_t>(batch * m * s.outSize), 0.0);
  auto table = tapTable(s, /*transpose=*/true);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < group; ++g) {
      Eigen::Map<const RowMatrix> wm(wv.data() + g * cg * rows, cg, rows);
      Eigen::Map<const RowMatrix> xm(xv.data() + (b * c + g * cg) * s.inSize, cg, s.inSize);
      Eigen::Map<RowMatrix> cm(col.data(), rows, s.inSize);
      if (cg == 0)
        cm.setZero();
      else
        cm.noalias() = wm.transpose() * xm;
      // col2im: scatter-add each (channel, tap) row into the output.
      for (int64_t mi = 0; mi < mg; ++mi) {
        double *dst = yv.data() + (b * m + g * mg + mi) * s.outSize;
        std::vector<int64_t> kidx(s.kernel.size(), 0);
        for (int64_t kf = 0; kf < s.kernelSize; ++kf) {
          const double *src = col.data() + (mi * s.kernelSize + kf) * s.inSize;
          forEachTap(table, kidx, s.inSpatial, s.outSpatial, [&](int64_t i, int64_t o) {
            if (o >= 0)
              dst[o] += src[i];
          });
          nn::nextIndex(kidx, s.kernel);
        }
      }
    }
  if (!bias.isNull()) {
    std::vector<double> bv = nn::toDoubles(bias);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t p = 0; p < s.outSize; ++p)
          yv[(b * m + j) * s.outSize + p] += bv[j];
  }
  NNC_ASSIGN_OR_RETURN(Tensor r, nn::fromDoubles(x.dtype(), out, yv));
  return std::vector<Tensor>{r};
}

} // namespace nnc::interp

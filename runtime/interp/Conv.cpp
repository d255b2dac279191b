// Interpreter kernels of conv (im2col + GEMM) and conv_transpose (GEMM + col2im), N-D with
// groups, dilations and padding; computed in double.
#include <limits>
#include <algorithm>
#include <cstring>
#include <optional>

#include <Eigen/Dense>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"
#include "nnc/ir/GemmPacking.h"
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

namespace {

/// What conv and conv_integer share: the checked geometry and the sums of products of the
/// operands as doubles (`xv` the input, `wv` the weight, `bv` per output channel or empty),
/// im2col + GEMM per image and group. `outExt` receives the result's extents; an empty
/// batch gives an empty result.
Expected<std::vector<double>> convSums(const Node &node, const Tensor &x, const Tensor &w,
                                       int64_t biasCount, const std::vector<double> &xv,
                                       const std::vector<double> &wv,
                                       const std::vector<double> &bv, Extents &out) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, setupConv(node, x, w, /*transpose=*/false));
  int64_t group = node.getInt("group", 1);
  int64_t batch = x.dim(0), c = x.dim(1), m = w.dim(0);
  NNC_TRY(checkGroup(node, x, w, group));
  if (m % group != 0 || w.dim(1) * group != c)
    return node.error("input {} and weight {} do not match group {}", extentsStr(x.extents()),
                      extentsStr(w.extents()), group);
  if (biasCount >= 0 && biasCount != m)
    return node.error("bias has {} values for {} output channels", biasCount, m);
  int64_t cg = c / group, mg = m / group, rows = cg * s.kernelSize;
  out = {batch, m};
  out.insert(out.end(), s.outSpatial.begin(), s.outSpatial.end());
  NNC_TRY(checkBuffer(node, out, "output"));
  if (batch * m == 0)
    return std::vector<double>();
  NNC_TRY(checkBuffer(node, {rows, s.outSize}, "im2col buffer"));
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
  return yv;
}

} // namespace

Results evalConv(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &w = ops[1];
  const Tensor &bias = ops.size() > 2 ? ops[2] : Tensor();
  std::vector<double> bv = bias.isNull() ? std::vector<double>() : nn::toDoubles(bias);
  Extents out;
  NNC_ASSIGN_OR_RETURN(std::vector<double> yv,
                       convSums(node, x, w, bias.isNull() ? -1 : bias.numElements(),
                                nn::toDoubles(x), nn::toDoubles(w), bv, out));
  if (yv.empty()) {
    NNC_ASSIGN_OR_RETURN(Tensor empty, Tensor::create(x.dtype(), out));
    return std::vector<Tensor>{empty};
  }
  NNC_ASSIGN_OR_RETURN(Tensor r, nn::fromDoubles(x.dtype(), out, yv));
  return std::vector<Tensor>{r};
}

namespace {

/// The [M, C, kernel...] weight of a conv_integer whose operand 1 pack-gemm-weights packed
/// (packed_m, kernel_shape): the panels' [K, M] matrix of k = tap * C + c, reordered.
Expected<Tensor> unpackConvWeight(const Node &node, const Tensor &x, const Tensor &p) {
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  int64_t m = node.getInt("packed_m"), taps = 1;
  for (int64_t v : ks)
    taps *= v;
  int64_t c = x.rank() >= 3 ? x.dim(1) : 0, k = c * taps;
  const Extents &e = p.extents();
  if (x.rank() < 3 || ks.size() + 2 != size_t(x.rank()) || p.rank() != 4 || e[3] != 4 ||
      e[1] != (k + 3) / 4 || e[0] * e[2] < m)
    return node.error("packed operand 1 {} does not hold {} channels of {} rows",
                      extentsStr(e), m, k);
  Tensor km = unpackGemmPanelsK4(p, k, m);
  Extents we{m, c};
  we.insert(we.end(), ks.begin(), ks.end());
  Tensor w = Tensor::zeros(p.dtype(), we);
  const auto *src = static_cast<const uint8_t *>(km.rawData());
  auto *dst = static_cast<uint8_t *>(w.rawData());
  for (int64_t mi = 0; mi < m; ++mi)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < taps; ++t)
        dst[(mi * c + ci) * taps + t] = src[(t * c + ci) * m + mi];
  return w;
}

/// `t` with its axes permuted: result axis i is t's axis perm[i].
Tensor permutedTensor(const Tensor &t, const std::vector<int64_t> &perm) {
  Extents out = permuted(t.extents(), perm), inStride = nn::stridesOf(t.extents());
  Tensor r = Tensor::zeros(t.dtype(), out);
  const size_t es = dtypeSize(t.dtype());
  const auto *src = static_cast<const char *>(t.rawData());
  auto *dst = static_cast<char *>(r.rawData());
  std::vector<int64_t> idx(out.size(), 0);
  for (int64_t i = 0; i < r.numElements(); ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < out.size(); ++d)
      at += idx[d] * inStride[static_cast<size_t>(perm[d])];
    std::memcpy(dst + i * es, src + at * es, es);
    nn::nextIndex(idx, out);
  }
  return r;
}

} // namespace

Results evalConvInteger(const Node &node, const Operands &ops) {
  // channels_last: the same sums on x moved to channels first, the result moved back.
  const bool last = channelsLast(node);
  if (last && ops[0].rank() < 3)
    return node.error("channels_last input {} must have rank >= 3", extentsStr(ops[0].extents()));
  const Tensor x = last ? permutedTensor(ops[0], channelsPerm(ops[0].rank(), false)) : ops[0];
  std::optional<Tensor> unpacked;
  if (node.hasAttr("packed_m")) {
    NNC_ASSIGN_OR_RETURN(Tensor u, unpackConvWeight(node, x, ops[1]));
    unpacked = u;
  }
  const Tensor &w = unpacked ? *unpacked : ops[1];
  for (const Tensor *t : {&x, &w})
    if (t->dtype() != DType::U8 && t->dtype() != DType::I8)
      return node.error("expects u8 or i8 operands, got {}", dtypeName(t->dtype()));
  if (x.rank() < 3 || w.rank() != x.rank())
    return node.error("input {} and weight {} must have one rank >= 3", extentsStr(x.extents()),
                      extentsStr(w.extents()));
  int64_t m = w.dim(0);
  // Zero points as one value per output channel (x's repeated: it has one).
  auto zeroPoints = [&](size_t z, int64_t count) -> Expected<std::vector<double>> {
    std::vector<double> v(static_cast<size_t>(count), 0.0);
    if (ops.size() <= z || ops[z].isNull())
      return v;
    const Tensor &t = ops[z];
    if (t.dtype() != ops[z - 2].dtype() || t.rank() > 1 ||
        (t.numElements() != 1 && (z == 2 || t.numElements() != count)))
      return node.error("zero point {} {} {} must be a scalar{} of its operand's dtype", z,
                        dtypeName(t.dtype()), extentsStr(t.extents()),
                        z == 2 ? "" : " or hold one value per output channel");
    std::vector<double> d = nn::toDoubles(t);
    for (int64_t i = 0; i < count; ++i)
      v[static_cast<size_t>(i)] = d[t.numElements() == 1 ? 0 : static_cast<size_t>(i)];
    return v;
  };
  NNC_ASSIGN_OR_RETURN(std::vector<double> zx, zeroPoints(2, 1));
  NNC_ASSIGN_OR_RETURN(std::vector<double> zw, zeroPoints(3, m));
  std::vector<double> xv = nn::toDoubles(x), wv = nn::toDoubles(w);
  for (double &v : xv)
    v -= zx[0];
  int64_t perChannel = m ? w.numElements() / m : 0;
  for (int64_t i = 0; i < w.numElements(); ++i)
    wv[static_cast<size_t>(i)] -= zw[static_cast<size_t>(i / perChannel)];
  // Each product is an integer below 2^16 in magnitude, so double sums are exact for windows
  // of fewer than 2^37 taps; wider ones are refused rather than rounded.
  if (perChannel >= (int64_t(1) << 37))
    return node.error("windows of {} taps are too wide for exact sums", perChannel);
  Extents out;
  NNC_ASSIGN_OR_RETURN(std::vector<double> yv, convSums(node, x, w, -1, xv, wv, {}, out));
  NNC_ASSIGN_OR_RETURN(Tensor r, Tensor::create(DType::I32, out));
  int32_t *p = r.data<int32_t>();
  // The i32 sum wraps, as the op defines it.
  for (size_t i = 0; i < yv.size(); ++i)
    p[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(yv[i])));
  if (last)
    r = permutedTensor(r, channelsPerm(r.rank(), true));
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

// Interpreter kernels of softmax, log_softmax, hardmax and the normalization ops (computed in
// double; statistics rounded to stash_type where the op has one).
#include <cmath>
#include <limits>

#include "interp/CompositeSupport.h"
#include "interp/Kernels.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::interp {
namespace {

using namespace composite;

/// The verifier guarantees the operand count; a kernel called directly is checked here too.
Error checkOperandCount(const Node &node, const Operands &ops, size_t n) {
  if (ops.size() < n)
    return node.error("expects at least {} operands, got {}", n, ops.size());
  return Error::success();
}

Error checkFloatInput(const Node &node, const Tensor &t, const char *what) {
  if (t.isNull())
    return node.error("{} is missing", what);
  if (!isFloat(t.dtype()))
    return node.error("{} must have a float dtype, got {}", what, dtypeName(t.dtype()));
  return Error::success();
}

/// A rank-1 per-channel operand of length `channels`, as doubles.
Expected<std::vector<double>> perChannel(const Node &node, const Tensor &t, const char *what,
                                         int64_t channels) {
  NNC_TRY(checkFloatInput(node, t, what));
  if (t.rank() != 1 || t.dim(0) != channels)
    return node.error("{} has extents {}, expected [{}]", what, extentsStr(t.extents()), channels);
  return toDoubles(t);
}

enum class AxisOp { Softmax, LogSoftmax, Hardmax };

/// softmax / log_softmax / hardmax along `axis`: outer x n x inner.
Results evalAlongAxis(const Node &node, const Operands &ops, AxisOp op) {
  NNC_TRY(checkOperandCount(node, ops, 1));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  const Extents &e = x.extents();
  int64_t outer = product(e, 0, axis), n = e[axis], inner = product(e, axis + 1, e.size());
  std::vector<double> in = toDoubles(x), out(in.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      auto at = [&](int64_t k) { return base + k * inner; };
      if (op == AxisOp::Hardmax) {
        // The first maximum (a NaN counts as the maximum, like numpy's argmax).
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k) {
          double b = in[at(best)], c = in[at(k)];
          if (!std::isnan(b) && (std::isnan(c) || c > b))
            best = k;
        }
        for (int64_t k = 0; k < n; ++k)
          out[at(k)] = k == best ? 1.0 : 0.0;
        continue;
      }
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        double c = in[at(k)];
        if (std::isnan(c) || c > m)
          m = c;
        if (std::isnan(c))
          break;
      }
      // A row of -inf (or with +inf or NaN) gives NaN, as in the ONNX reference.
      double sum = 0;
      for (int64_t k = 0; k < n; ++k)
        sum += std::exp(in[at(k)] - m);
      if (op == AxisOp::Softmax) {
        for (int64_t k = 0; k < n; ++k)
          out[at(k)] = std::exp(in[at(k)] - m) / sum;
      } else {
        double logSum = std::log(sum);
        for (int64_t k = 0; k < n; ++k)
          out[at(k)] = (in[at(k)] - m) - logSum;
      }
    }
  NNC_ASSIGN_OR_RETURN(Tensor r, fromDoubles(x.dtype(), e, out));
  return std::vector<Tensor>{r};
}

/// A scale or bias operand that broadcasts to `x`, mapped to x's elements.
Expected<std::vector<double>> broadcastOperand(const Node &node, const Tensor &t, const Extents &x,
                                               const char *what) {
  NNC_TRY(checkFloatInput(node, t, what));
  if (!broadcastsTo(t.extents(), x))
    return node.error("{} of extents {} does not broadcast to the input extents {}", what,
                      extentsStr(t.extents()), extentsStr(x));
  std::vector<double> v = toDoubles(t);
  std::vector<int64_t> map = broadcastIndexMap(x, t.extents());
  std::vector<double> r(map.size());
  for (size_t i = 0; i < map.size(); ++i)
    r[i] = v[static_cast<size_t>(map[i])];
  return r;
}

/// Mean and 1/sqrt(var + eps) of `n` values starting at `p` with stride `stride`, rounded to
/// the stash type.
std::pair<double, double> meanInvStd(const std::vector<double> &x, const std::vector<int64_t> &idx,
                                     double eps, DType stash) {
  double n = static_cast<double>(idx.size()), sum = 0;
  for (int64_t i : idx)
    sum += roundTo(stash, x[i]);
  double mean = roundTo(stash, sum / n), sq = 0;
  for (int64_t i : idx) {
    double d = roundTo(stash, x[i]) - mean;
    sq += d * d;
  }
  double inv = roundTo(stash, 1.0 / std::sqrt(sq / n + eps));
  return {mean, inv};
}

} // namespace

Results evalSoftmax(const Node &node, const Operands &ops) {
  return evalAlongAxis(node, ops, AxisOp::Softmax);
}
Results evalLogSoftmax(const Node &node, const Operands &ops) {
  return evalAlongAxis(node, ops, AxisOp::LogSoftmax);
}
Results evalHardmax(const Node &node, const Operands &ops) {
  return evalAlongAxis(node, ops, AxisOp::Hardmax);
}

Results evalLayerNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 2));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  double eps = node.getFloat("epsilon");
  const Extents &e = x.extents();
  NNC_ASSIGN_OR_RETURN(std::vector<double> scale, broadcastOperand(node, ops[1], e, "scale"));
  std::vector<double> bias;
  if (ops.size() > 2 && !ops[2].isNull()) {
    NNC_ASSIGN_OR_RETURN(bias, broadcastOperand(node, ops[2], e, "bias"));
  }
  int64_t rows = product(e, 0, axis), cols = product(e, axis, e.size());
  std::vector<double> in = toDoubles(x), y(in.size()), means(rows), invs(rows);
  std::vector<int64_t> idx(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      idx[c] = r * cols + c;
    auto [mean, inv] = meanInvStd(in, idx, eps, stash);
    means[r] = mean;
    invs[r] = inv;
    for (int64_t i : idx) {
      double normalized = roundTo(x.dtype(), (roundTo(stash, in[i]) - mean) * inv);
      y[i] = normalized * scale[i] + (bias.empty() ? 0.0 : bias[i]);
    }
  }
  Extents statExtents = e;
  for (size_t i = static_cast<size_t>(axis); i < statExtents.size(); ++i)
    statExtents[i] = 1;
  std::vector<Tensor> results;
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(x.dtype(), e, y));
  results.push_back(yt);
  if (node.numResults() > 1) {
    NNC_ASSIGN_OR_RETURN(Tensor mt, fromDoubles(stash, statExtents, means));
    results.push_back(mt);
  }
  if (node.numResults() > 2) {
    NNC_ASSIGN_OR_RETURN(Tensor it, fromDoubles(stash, statExtents, invs));
    results.push_back(it);
  }
  return results;
}

Results evalRMSNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 2));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  double eps = node.getFloat("epsilon");
  const Extents &e = x.extents();
  NNC_ASSIGN_OR_RETURN(std::vector<double> scale, broadcastOperand(node, ops[1], e, "scale"));
  int64_t rows = product(e, 0, axis), cols = product(e, axis, e.size());
  std::vector<double> in = toDoubles(x), y(in.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double v = roundTo(stash, in[r * cols + c]);
      sq += v * v;
    }
    double rms = roundTo(stash, std::sqrt(sq / static_cast<double>(cols) + eps));
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = r * cols + c;
      y[i] = roundTo(x.dtype(), roundTo(stash, in[i]) / rms) * scale[i];
    }
  }
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(ops[1].dtype(), e, y));
  return std::vector<Tensor>{yt};
}

Results evalGroupNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 3));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  if (x.rank() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(x.extents()));
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  int64_t groups = node.getInt("num_groups");
  const Extents &e = x.extents();
  int64_t n = e[0], c = e[1], spatial = product(e, 2, e.size());
  if (groups <= 0 || c % groups != 0)
    return node.error("channel count {} is not divisible by num_groups {}", c, groups);
  NNC_ASSIGN_OR_RETURN(std::vector<double> scale, perChannel(node, ops[1], "scale", c));
  NNC_ASSIGN_OR_RETURN(std::vector<double> bias, perChannel(node, ops[2], "bias", c));
  double eps = node.getFloat("epsilon");
  int64_t perGroup = c / groups * spatial;
  std::vector<double> in = toDoubles(x), y(in.size());
  std::vector<int64_t> idx(static_cast<size_t>(perGroup));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t base = (b * c + g * (c / groups)) * spatial;
      for (int64_t k = 0; k < perGroup; ++k)
        idx[k] = base + k;
      auto [mean, inv] = meanInvStd(in, idx, eps, stash);
      for (int64_t k = 0; k < perGroup; ++k) {
        int64_t i = base + k, ch = g * (c / groups) + k / std::max<int64_t>(spatial, 1);
        double normalized = roundTo(x.dtype(), (roundTo(stash, in[i]) - mean) * inv);
        y[i] = normalized * scale[ch] + bias[ch];
      }
    }
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(x.dtype(), e, y));
  return std::vector<Tensor>{yt};
}

Results evalInstanceNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 3));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  if (x.rank() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(x.extents()));
  const Extents &e = x.extents();
  int64_t n = e[0], c = e[1], spatial = product(e, 2, e.size());
  NNC_ASSIGN_OR_RETURN(std::vector<double> scale, perChannel(node, ops[1], "scale", c));
  NNC_ASSIGN_OR_RETURN(std::vector<double> bias, perChannel(node, ops[2], "bias", c));
  double eps = node.getFloat("epsilon");
  std::vector<double> in = toDoubles(x), y(in.size());
  std::vector<int64_t> idx(static_cast<size_t>(spatial));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t base = (b * c + ch) * spatial;
      for (int64_t k = 0; k < spatial; ++k)
        idx[k] = base + k;
      auto [mean, inv] = meanInvStd(in, idx, eps, DType::F64);
      for (int64_t i : idx)
        y[i] = (in[i] - mean) * inv * scale[ch] + bias[ch];
    }
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(x.dtype(), e, y));
  return std::vector<Tensor>{yt};
}

Results evalBatchNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 5));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  if (x.rank() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(x.extents()));
  const Extents &e = x.extents();
  int64_t n = e[0], c = e[1], spatial = product(e, 2, e.size());
  NNC_ASSIGN_OR_RETURN(std::vector<double> scale, perChannel(node, ops[1], "scale", c));
  NNC_ASSIGN_OR_RETURN(std::vector<double> bias, perChannel(node, ops[2], "bias", c));
  NNC_ASSIGN_OR_RETURN(std::vector<double> mean, perChannel(node, ops[3], "mean", c));
  NNC_ASSIGN_OR_RETURN(std::vector<double> var, perChannel(node, ops[4], "var", c));
  double eps = node.getFloat("epsilon");
  std::vector<double> in = toDoubles(x), y(in.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double inv = 1.0 / std::sqrt(var[ch] + eps);
      for (int64_t k = 0; k < spatial; ++k) {
        int64_t i = (b * c + ch) * spatial + k;
        y[i] = (in[i] - mean[ch]) * inv * scale[ch] + bias[ch];
      }
    }
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(x.dtype(), e, y));
  return std::vector<Tensor>{yt};
}

Results evalLpNorm(const Node &node, const Operands &ops) {
  NNC_TRY(checkOperandCount(node, ops, 1));
  const Tensor &x = ops[0];
  NNC_TRY(checkFloatInput(node, x, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  int64_t p = node.getInt("p");
  if (p != 1 && p != 2)
    return node.error("p must be 1 or 2, got {}", p);
  const Extents &e = x.extents();
  int64_t outer = product(e, 0, axis), n = e[axis], inner = product(e, axis + 1, e.size());
  std::vector<double> in = toDoubles(x), y(in.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      double norm = 0;
      for (int64_t k = 0; k < n; ++k) {
        double v = in[base + k * inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2)
        norm = std::sqrt(norm);
      // A zero vector stays zero (the ONNX test data expects 0, not 0/0).
      for (int64_t k = 0; k < n; ++k)
        y[base + k * inner] = norm == 0 ? 0.0 : in[base + k * inner] / norm;
    }
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(x.dtype(), e, y));
  return std::vector<Tensor>{yt};
}

} // namespace nnc::interp

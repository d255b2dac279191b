// Shape arithmetic of the NN ops shared by shape rules and kernels (see NNGeometry.h).
#include "nnc/ir/NNGeometry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "nnc/ir/ShapeUtils.h"

namespace nnc {

namespace {

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t ceilDiv(int64_t a, int64_t b) {
  return -floorDiv(-a, b);
}

Error checkList(const Node &node, const char *name, const std::vector<int64_t> &v, size_t n,
                int64_t minValue) {
  if (!v.empty() && v.size() != n)
    return node.error("{} has {} values, expected {}", name, v.size(), n);
  for (int64_t x : v)
    if (x < minValue)
      return node.error("{} value {} must be >= {}", name, x, minValue);
  return Error::success();
}

/// r = a * b + c; false when that overflows int64.
bool mulAdd(int64_t a, int64_t b, int64_t c, int64_t &r) {
  return !__builtin_mul_overflow(a, b, &r) && !__builtin_add_overflow(r, c, &r);
}

} // namespace

bool channelsLast(const Node &node) {
  return node.kind() == OpKind::ConvInteger && node.getInt("channels_last", 0) == 1;
}

std::vector<int64_t> channelsPerm(size_t rank, bool toLast) {
  std::vector<int64_t> p{0};
  if (toLast) {
    for (size_t i = 2; i < rank; ++i)
      p.push_back(int64_t(i));
    p.push_back(1);
  } else {
    p.push_back(int64_t(rank) - 1);
    for (size_t i = 1; i + 1 < rank; ++i)
      p.push_back(int64_t(i));
  }
  return p;
}

Expected<WindowAttrs> readWindowAttrs(const Node &node, size_t n) {
  WindowAttrs a;
  a.strides = node.getInts("strides", {});
  a.dilations = node.getInts("dilations", {});
  a.pads = node.getInts("pads", {});
  NNC_TRY(checkList(node, "strides", a.strides, n, 1));
  NNC_TRY(checkList(node, "dilations", a.dilations, n, 1));
  NNC_TRY(checkList(node, "pads", a.pads, 2 * n, 0));
  if (a.strides.empty())
    a.strides.assign(n, 1);
  if (a.dilations.empty())
    a.dilations.assign(n, 1);
  if (a.pads.empty())
    a.pads.assign(2 * n, 0);
  a.autoPad = node.getString("auto_pad", "NOTSET");
  if (a.autoPad.empty())
    a.autoPad = "NOTSET";
  if (a.autoPad != "NOTSET" && a.autoPad != "SAME_UPPER" && a.autoPad != "SAME_LOWER" &&
      a.autoPad != "VALID")
    return node.error("unknown auto_pad '{}'", a.autoPad);
  a.ceilMode = node.getInt("ceil_mode", 0) != 0;
  if (node.kind() == OpKind::ConvTranspose) {
    a.outputPadding = node.getInts("output_padding", {});
    NNC_TRY(checkList(node, "output_padding", a.outputPadding, n, 0));
    if (a.outputPadding.empty())
      a.outputPadding.assign(n, 0);
    a.outputShape = node.getInts("output_shape", {});
    // Older exporters give the full output shape (N, C, spatial...).
    if (a.outputShape.size() == n + 2)
      a.outputShape.erase(a.outputShape.begin(), a.outputShape.begin() + 2);
    NNC_TRY(checkList(node, "output_shape", a.outputShape, n, 1));
  }
  return a;
}

Expected<WindowAxis> windowAxis(const Node &node, const WindowAttrs &a, size_t i, int64_t in,
                                int64_t kernel) {
  size_t n = a.strides.size();
  WindowAxis w;
  w.in = in;
  w.kernel = kernel;
  w.stride = a.strides[i];
  w.dilation = a.dilations[i];
  if (kernel < 1)
    return node.error("kernel size {} of spatial axis {} must be >= 1", kernel, i);
  int64_t eff;
  if (!mulAdd(w.dilation, kernel - 1, 1, eff))
    return node.error("kernel size {} with dilation {} of spatial axis {} is too large", kernel,
                      w.dilation, i);
  if (a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER") {
    w.out = ceilDiv(in, w.stride);
    int64_t total;
    if (!mulAdd(w.out - 1, w.stride, eff - in, total))
      return node.error("padding of spatial axis {} is too large", i);
    total = std::max<int64_t>(0, total);
    w.padBegin = a.autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    w.padEnd = total - w.padBegin;
  } else {
    if (a.autoPad == "NOTSET") {
      w.padBegin = a.pads[i];
      w.padEnd = a.pads[i + n];
    }
    int64_t span;
    if (__builtin_add_overflow(in, w.padBegin, &span) ||
        __builtin_add_overflow(span, w.padEnd, &span))
      return node.error("pads {}+{} of spatial axis {} are too large", w.padBegin, w.padEnd, i);
    span -= eff;
    if (span < 0)
      return node.error("window of size {} (dilated) does not fit spatial axis {} of size {} "
                        "with pads {}+{}",
                        eff, i, in, w.padBegin, w.padEnd);
    if (a.ceilMode) {
      w.out = ceilDiv(span, w.stride) + 1;
      // The last window must start inside the input or the begin padding.
      if ((w.out - 1) * w.stride >= in + w.padBegin)
        --w.out;
    } else {
      w.out = span / w.stride + 1;
    }
  }
  if (w.out <= 0)
    return node.error("spatial axis {} of size {} gives an empty output", i, in);
  return w;
}

Expected<WindowAxis> transposeWindowAxis(const Node &node, const WindowAttrs &a, size_t i,
                                         int64_t in, int64_t kernel) {
  size_t n = a.strides.size();
  WindowAxis w;
  w.in = in;
  w.kernel = kernel;
  w.stride = a.strides[i];
  w.dilation = a.dilations[i];
  if (kernel < 1)
    return node.error("kernel size {} of spatial axis {} must be >= 1", kernel, i);
  int64_t full, eff;
  if (!mulAdd(w.stride, in - 1, a.outputPadding[i], full) ||
      !mulAdd(w.dilation, kernel - 1, 1, eff) || __builtin_add_overflow(full, eff, &full))
    return node.error("output of spatial axis {} is too large (stride {}, kernel {}, dilation {}, "
                      "output_padding {})",
                      i, w.stride, kernel, w.dilation, a.outputPadding[i]);
  bool same = a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER";
  if (same) {
    if (a.outputShape.empty() && __builtin_mul_overflow(in, w.stride, &w.out))
      return node.error("output of spatial axis {} is too large", i);
    if (!a.outputShape.empty())
      w.out = a.outputShape[i];
    int64_t total = full - w.out;
    // Python floor division, as in the ONNX spec's formula.
    w.padBegin = a.autoPad == "SAME_UPPER" ? floorDiv(total, 2) : total - floorDiv(total, 2);
  } else if (!a.outputShape.empty()) {
    // Explicit output shape with explicit (possibly zero) begin pads.
    w.out = a.outputShape[i];
    w.padBegin = a.pads[i];
  } else if (a.autoPad == "VALID") {
    w.out = full;
  } else {
    w.padBegin = a.pads[i];
    if (__builtin_sub_overflow(full - a.pads[i], a.pads[i + n], &w.out))
      return node.error("pads {}+{} of spatial axis {} are too large", a.pads[i], a.pads[i + n],
                        i);
  }
  if (__builtin_sub_overflow(full - w.out, w.padBegin, &w.padEnd))
    return node.error("pads of spatial axis {} are too large", i);
  if (w.out <= 0)
    return node.error("spatial axis {} of size {} gives an empty output", i, in);
  return w;
}

Expected<EinsumLabels> parseEinsum(const Node &node, const std::vector<int64_t> &ranks) {
  std::string eq;
  for (char c : node.getString("equation", ""))
    if (c != ' ')
      eq += c;
  std::string lhs = eq, rhs;
  bool explicitOut = false;
  size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicitOut = true;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    return node.error("equation '{}' names {} operands, got {}", eq, terms.size(), ranks.size());

  // Splits a term into letters before and after its ellipsis.
  struct Term {
    std::string before, after;
    bool ellipsis = false;
  };
  auto split = [&](const std::string &t) -> Expected<Term> {
    Term r;
    size_t e = t.find("...");
    std::string rest = t;
    if (e != std::string::npos) {
      r.ellipsis = true;
      r.before = t.substr(0, e);
      r.after = t.substr(e + 3);
      rest = r.before + r.after;
    } else {
      r.before = t;
    }
    for (char c : rest)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return node.error("bad character '{}' in equation '{}'", c, eq);
    return r;
  };

  EinsumLabels out;
  int ellipsisRank = 0;
  std::vector<Term> parsed;
  for (size_t i = 0; i < terms.size(); ++i) {
    NNC_ASSIGN_OR_RETURN(Term t, split(terms[i]));
    int64_t letters = static_cast<int64_t>(t.before.size() + t.after.size());
    if (t.ellipsis ? letters > ranks[i] : letters != ranks[i])
      return node.error("term '{}' of equation '{}' does not match operand {} of rank {}", terms[i],
                        eq, i, ranks[i]);
    if (t.ellipsis)
      ellipsisRank = std::max<int>(ellipsisRank, static_cast<int>(ranks[i] - letters));
    parsed.push_back(t);
  }
  std::map<int, int> counts;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Term &t = parsed[i];
    std::vector<int> labels;
    for (char c : t.before)
      labels.push_back(static_cast<unsigned char>(c));
    if (t.ellipsis) {
      int e = static_cast<int>(ranks[i] - t.before.size() - t.after.size());
      for (int j = 0; j < e; ++j)
        labels.push_back(256 + ellipsisRank - e + j);
    }
    for (char c : t.after)
      labels.push_back(static_cast<unsigned char>(c));
    for (int l : labels)
      counts[l]++;
    out.operands.push_back(labels);
  }
  if (explicitOut) {
    NNC_ASSIGN_OR_RETURN(Term t, split(rhs));
    std::set<int> seen;
    for (char c : t.before + t.after) {
      int l = static_cast<unsigned char>(c);
      if (!counts.count(l))
        return node.error("output label '{}' of equation '{}' is not an input label", c, eq);
      if (!seen.insert(l).second)
        return node.error("output label '{}' repeats in equation '{}'", c, eq);
    }
    for (char c : t.before)
      out.output.push_back(static_cast<unsigned char>(c));
    if (t.ellipsis)
      for (int j = 0; j < ellipsisRank; ++j)
        out.output.push_back(256 + j);
    for (char c : t.after)
      out.output.push_back(static_cast<unsigned char>(c));
  } else {
    for (int j = 0; j < ellipsisRank; ++j)
      out.output.push_back(256 + j);
    for (auto [l, c] : counts)
      if (l < 256 && c == 1)
        out.output.push_back(l);
  }
  return out;
}

Expected<ResizePlan> planResize(const Node &node, const Extents &in, const Tensor *roi,
                                const Tensor *scales, const Tensor *sizes) {
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes(rank);
  for (int64_t i = 0; i < rank; ++i)
    axes[i] = i;
  if (node.hasAttr("axes")) {
    NNC_ASSIGN_OR_RETURN(axes, normalizeAxes(node.getInts("axes", {}), rank, node));
  }
  size_t na = axes.size();
  if (scales && scales->numElements() == 0)
    scales = nullptr;
  if (sizes && sizes->numElements() == 0)
    sizes = nullptr;
  if (roi && roi->numElements() == 0)
    roi = nullptr;
  if (!scales && !sizes)
    return node.error("needs scales or sizes");
  if (scales && sizes)
    return node.error("takes only one of scales and sizes");

  ResizePlan p;
  p.out = in;
  p.scales.assign(rank, 1.0);
  p.roiStart.assign(rank, 0.0);
  p.roiEnd.assign(rank, 1.0);
  if (roi) {
    if (roi->numElements() != static_cast<int64_t>(2 * na))
      return node.error("roi has {} values, expected {}", roi->numElements(), 2 * na);
    for (size_t i = 0; i < na; ++i) {
      p.roiStart[axes[i]] = roi->elementAsDouble(i);
      p.roiEnd[axes[i]] = roi->elementAsDouble(i + na);
    }
  }
  if (scales) {
    if (scales->numElements() != static_cast<int64_t>(na))
      return node.error("scales has {} values, expected {}", scales->numElements(), na);
    for (size_t i = 0; i < na; ++i) {
      double s = scales->elementAsDouble(i);
      if (!(s > 0) || !std::isfinite(s))
        return node.error("scale {} must be positive and finite", s);
      if (s * static_cast<double>(in[axes[i]]) >= 0x1p62)
        return node.error("scale {} makes axis {} too large", s, axes[i]);
      p.scales[axes[i]] = s;
      p.out[axes[i]] = static_cast<int64_t>(std::floor(s * static_cast<double>(in[axes[i]])));
    }
    return p;
  }
  if (sizes->numElements() != static_cast<int64_t>(na))
    return node.error("sizes has {} values, expected {}", sizes->numElements(), na);
  std::vector<int64_t> sz = sizes->toInt64Vector();
  for (size_t i = 0; i < na; ++i) {
    if (sz[i] < 0)
      return node.error("size {} must not be negative", sz[i]);
    if (in[axes[i]] == 0 && sz[i] != 0)
      return node.error("cannot resize an empty axis {} to {}", axes[i], sz[i]);
  }
  std::string policy = node.getString("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") {
    for (size_t i = 0; i < na; ++i) {
      p.out[axes[i]] = sz[i];
      p.scales[axes[i]] = in[axes[i]] ? static_cast<double>(sz[i]) / in[axes[i]] : 1.0;
    }
    return p;
  }
  if (policy != "not_larger" && policy != "not_smaller")
    return node.error("unknown keep_aspect_ratio_policy '{}'", policy);
  double scale = policy == "not_larger" ? INFINITY : 0;
  for (size_t i = 0; i < na; ++i) {
    double s = in[axes[i]] ? static_cast<double>(sz[i]) / in[axes[i]] : 1.0;
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  for (size_t i = 0; i < na; ++i) {
    p.scales[axes[i]] = scale;
    p.out[axes[i]] = static_cast<int64_t>(scale * static_cast<double>(in[axes[i]]) + 0.5);
  }
  return p;
}

Expected<AttentionMaskLayout> attentionMaskLayout(const Node &node, const Extents &me, DType t,
                                                  int64_t batch, int64_t qHeads, int64_t qLen,
                                                  int64_t total) {
  if (me.empty() || me.size() > 4)
    return node.error("attn_mask must have rank 1 to 4, got extents {}", extentsStr(me));
  if (t != DType::Bool && !isFloat(t))
    return node.error("attn_mask must be bool or float, got {}", dtypeName(t));
  AttentionMaskLayout l;
  l.length = me.back();
  if (l.length > total)
    return node.error("attn_mask length {} exceeds the total sequence length {}", l.length, total);
  int64_t lead[3] = {batch, qHeads, qLen};
  int64_t stride = l.length;
  for (size_t i = me.size() - 1; i-- > 0;) {
    size_t slot = 3 - (me.size() - 1) + i;
    if (me[i] != 1 && me[i] != lead[slot])
      return node.error("attn_mask extents {} do not broadcast to [{}, {}, {}, {}]", extentsStr(me),
                        batch, qHeads, qLen, total);
    l.strides[slot] = me[i] == 1 ? 0 : stride;
    stride *= me[i];
  }
  return l;
}

} // namespace nnc

// ONNX lowerings of operators that are a few existing IR ops each: ReverseSequence (a
// gather_elements along the time axis with indices built from the lengths), Col2Im (a
// scatter-add of the columns into the padded image, then a crop), the DFT windows
// HannWindow, HammingWindow and BlackmanWindow (cosines of a range), MelWeightMatrix (a
// constant of its constant inputs), TensorScatter (a scatter_elements along the sequence
// axis with indices built from the write positions) and CausalConvWithState (a concat, a
// depthwise conv, a slice).
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/ranges.h>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

/// ReverseSequence-10: along time_axis, the first sequence_lens[b] elements of batch entry b
/// reversed and the rest kept: y = gather_elements(x, idx, time_axis) with
/// idx[t, b] = t < len[b] ? len[b] - 1 - t : t, broadcast over the other axes. A length past
/// the time axis reads out of range: gather_elements' error.
Error lowerReverseSequence(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * lens, ctx.requiredInput(1, "sequence_lens"));
  NNC_ASSIGN_OR_RETURN(int64_t batchAxis, ctx.intAttr("batch_axis", 1));
  NNC_ASSIGN_OR_RETURN(int64_t timeAxis, ctx.intAttr("time_axis", 0));
  int64_t rank = x->rank();
  if (rank < 2)
    return ctx.error("input must have rank >= 2, got {}", x->type().str());
  if (!((batchAxis == 0 && timeAxis == 1) || (batchAxis == 1 && timeAxis == 0)))
    return ctx.error("batch_axis {} and time_axis {} must be 0 and 1 in some order", batchAxis,
                     timeAxis);
  if (!isInteger(lens->dtype()) || lens->rank() != 1)
    return ctx.error("sequence_lens must be an integer vector, got {}", lens->type().str());
  const Dim &td = x->shape()[static_cast<size_t>(timeAxis)];
  if (!td.isStatic())
    return ctx.error("the time axis has the symbolic size {}: ReverseSequence needs it static",
                     td.str());
  if (lens->dtype() != DType::I64) {
    NNC_ASSIGN_OR_RETURN(lens, ctx.emit(K::Cast, {lens}, {{"to", DType::I64}}));
  }
  int64_t steps = td.value();
  std::vector<int64_t> t(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i)
    t[static_cast<size_t>(i)] = i;
  // [T, 1] and [1, B] for time_axis 0; [1, T] and [B, 1] for time_axis 1.
  std::vector<int64_t> tShape =
      timeAxis == 0 ? std::vector<int64_t>{steps, 1} : std::vector<int64_t>{1, steps};
  Value *tv = ctx.constant(Tensor::fromVector<int64_t>(DType::I64, tShape, t));
  std::vector<int64_t> lShape =
      timeAxis == 0 ? std::vector<int64_t>{1, -1} : std::vector<int64_t>{-1, 1};
  NNC_ASSIGN_OR_RETURN(Value * lv, ctx.emit(K::Reshape, {lens, ctx.i64Vector(lShape)},
                                            {{"allowzero", Attribute(int64_t(0))}}));
  NNC_ASSIGN_OR_RETURN(Value * last, ctx.emit(K::Sub, {lv, ctx.scalar(DType::I64, 1)}));
  NNC_ASSIGN_OR_RETURN(Value * rev, ctx.emit(K::Sub, {last, tv}));
  NNC_ASSIGN_OR_RETURN(Value * inSeq, ctx.emit(K::Less, {tv, lv}));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.emit(K::Select, {inSeq, rev, tv}));
  if (rank > 2) {
    std::vector<int64_t> withOnes{0, 0};
    withOnes.resize(static_cast<size_t>(rank), 1);
    NNC_ASSIGN_OR_RETURN(idx, ctx.emit(K::Reshape, {idx, ctx.i64Vector(withOnes)},
                                       {{"allowzero", Attribute(int64_t(0))}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * shape, ctx.emit(K::ShapeOf, {x}));
  NNC_ASSIGN_OR_RETURN(Value * full, ctx.emit(K::Expand, {idx, shape}));
  NNC_ASSIGN_OR_RETURN(Value * y,
                       ctx.emit(K::GatherElements, {x, full}, {{"axis", Attribute(timeAxis)}}));
  return ctx.setOutput(0, y);
}

/// Col2Im-18: input [N, C * prod(block), L] holds, per channel and block offset b, the L
/// sliding-block positions l; each adds its value at padded-image position l * stride +
/// b * dilation. So the op is a scatter_elements with reduction add of the columns into
/// zeros of the padded image (indices constant from the constant image_shape and
/// block_shape), then a crop of the pads (a Pad with negative pads).
Error lowerCol2Im(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  if (!ctx.input(1) || !ctx.input(2))
    return ctx.error("needs the inputs image_shape and block_shape");
  NNC_ASSIGN_OR_RETURN(Tensor imageT, ctx.constantInput(1, "image_shape"));
  NNC_ASSIGN_OR_RETURN(Tensor blockT, ctx.constantInput(2, "block_shape"));
  std::vector<int64_t> image = imageT.toInt64Vector(), block = blockT.toInt64Vector();
  size_t k = image.size();
  if (k == 0 || block.size() != k)
    return ctx.error("image_shape [{}] and block_shape [{}] must have one positive length",
                     fmt::join(image, ", "), fmt::join(block, ", "));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> dil,
                       ctx.intsAttr("dilations", std::vector<int64_t>(k, 1)));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                       ctx.intsAttr("strides", std::vector<int64_t>(k, 1)));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       ctx.intsAttr("pads", std::vector<int64_t>(2 * k, 0)));
  if (dil.size() != k || strides.size() != k || pads.size() != 2 * k)
    return ctx.error("dilations and strides need {} values and pads {}", k, 2 * k);
  if (x->rank() != 3 || !x->shape()[1].isStatic() || !x->shape()[2].isStatic())
    return ctx.error("input must be [N, C * prod(block_shape), L] with static C and L, got {}",
                     x->type().str());
  int64_t kSize = 1, blocks = 1, padded = 1;
  std::vector<int64_t> padShape(k), perAxis(k);
  for (size_t d = 0; d < k; ++d) {
    if (image[d] <= 0 || block[d] <= 0 || dil[d] <= 0 || strides[d] <= 0 || pads[d] < 0 ||
        pads[k + d] < 0)
      return ctx.error("sizes, dilations and strides must be positive and pads non-negative");
    padShape[d] = image[d] + pads[d] + pads[k + d];
    int64_t span = dil[d] * (block[d] - 1) + 1;
    perAxis[d] = padShape[d] >= span ? (padShape[d] - span) / strides[d] + 1 : 0;
    kSize *= block[d];
    blocks *= perAxis[d];
    padded *= padShape[d];
    if (kSize > (int64_t(1) << 24) || padded > (int64_t(1) << 32))
      return ctx.error("image_shape [{}] or block_shape [{}] is too large", fmt::join(image, ", "),
                       fmt::join(block, ", "));
  }
  int64_t rows = x->shape()[1].value(), cols = x->shape()[2].value();
  if (rows % kSize != 0 || cols != blocks)
    return ctx.error("input {} does not hold C * {} rows of {} blocks for image_shape [{}]",
                     x->type().str(), kSize, blocks, fmt::join(image, ", "));
  int64_t c = rows / kSize;
  // indices[b * L + l]: the flat padded-image position block offset b of block l adds to.
  std::vector<int64_t> idx(static_cast<size_t>(kSize * blocks));
  std::vector<int64_t> bi(k, 0);
  for (int64_t b = 0; b < kSize; ++b) {
    std::vector<int64_t> li(k, 0);
    for (int64_t l = 0; l < blocks; ++l) {
      int64_t at = 0;
      for (size_t d = 0; d < k; ++d)
        at = at * padShape[d] + li[d] * strides[d] + bi[d] * dil[d];
      idx[static_cast<size_t>(b * blocks + l)] = at;
      for (size_t d = k; d-- > 0;) {
        if (++li[d] < perAxis[d])
          break;
        li[d] = 0;
      }
    }
    for (size_t d = k; d-- > 0;) {
      if (++bi[d] < block[d])
        break;
      bi[d] = 0;
    }
  }
  Attribute noZero(int64_t(0));
  NNC_ASSIGN_OR_RETURN(
      Value * upd, ctx.emit(K::Reshape, {x, ctx.i64Vector({0, c, -1})}, {{"allowzero", noZero}}));
  Value *iv = ctx.constant(Tensor::fromVector<int64_t>(DType::I64, {1, 1, kSize * blocks}, idx));
  NNC_ASSIGN_OR_RETURN(Value * updShape, ctx.emit(K::ShapeOf, {upd}));
  NNC_ASSIGN_OR_RETURN(Value * indices, ctx.emit(K::Expand, {iv, updShape}));
  NNC_ASSIGN_OR_RETURN(Value * n,
                       ctx.emit(K::Slice, {updShape, ctx.i64Vector({0}), ctx.i64Vector({1})}));
  NNC_ASSIGN_OR_RETURN(Value * zShape, ctx.emit(K::Concat, {n, ctx.i64Vector({c, padded})},
                                                {{"axis", Attribute(int64_t(0))}}));
  NNC_ASSIGN_OR_RETURN(Value * zeros,
                       ctx.emit(K::ConstantOfShape, {zShape},
                                {{"value", Attribute(Tensor::zeros(x->dtype(), {1}))}}));
  NNC_ASSIGN_OR_RETURN(Value * sum, ctx.emit(K::ScatterElements, {zeros, indices, upd},
                                             {{"axis", Attribute(int64_t(2))},
                                              {"reduction", Attribute(std::string("add"))}}));
  std::vector<int64_t> shape{0, c};
  shape.insert(shape.end(), padShape.begin(), padShape.end());
  NNC_ASSIGN_OR_RETURN(Value * y,
                       ctx.emit(K::Reshape, {sum, ctx.i64Vector(shape)}, {{"allowzero", noZero}}));
  std::vector<int64_t> crop(2 * (k + 2), 0);
  bool any = false;
  for (size_t d = 0; d < k; ++d) {
    crop[2 + d] = -pads[d];
    crop[k + 4 + d] = -pads[k + d];
    any = any || pads[d] != 0 || pads[k + d] != 0;
  }
  if (any) {
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Pad, {y, ctx.i64Vector(crop)},
                                     {{"mode", Attribute(std::string("constant"))}}));
  }
  return ctx.setOutput(0, y);
}

/// The generalized cosine windows of the DFT family: w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)
/// for n < size, N = size when periodic, size - 1 otherwise; computed in f64 and cast to
/// output_datatype (as ONNX's reference computes them).
Error lowerCosineWindow(LoweringContext &ctx, const std::vector<double> &a) {
  NNC_ASSIGN_OR_RETURN(Value * size, ctx.requiredInput(0, "size"));
  NNC_ASSIGN_OR_RETURN(int64_t periodic, ctx.intAttr("periodic", 1));
  NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("output_datatype", 1));
  std::optional<DType> out = dtypeFromOnnx(static_cast<int>(code));
  if (!out || !isNumeric(*out))
    return ctx.error("unsupported output_datatype {}", code);
  if (!isInteger(size->dtype()) || size->rank() > 1)
    return ctx.error("size must be an integer scalar, got {}", size->type().str());
  if (size->rank() == 1) {
    NNC_ASSIGN_OR_RETURN(size, ctx.emit(K::Reshape, {size, ctx.i64Vector({})},
                                        {{"allowzero", Attribute(int64_t(0))}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * sizeF, ctx.emit(K::Cast, {size}, {{"to", DType::F64}}));
  NNC_ASSIGN_OR_RETURN(
      Value * n, ctx.emit(K::Range, {ctx.scalar(DType::F64, 0), sizeF, ctx.scalar(DType::F64, 1)}));
  Value *period = sizeF;
  if (!periodic) {
    NNC_ASSIGN_OR_RETURN(period, ctx.emit(K::Sub, {sizeF, ctx.scalar(DType::F64, 1)}));
  }
  // 2 pi n / N, as the reference orders it: n * pi * 2 / N.
  NNC_ASSIGN_OR_RETURN(Value * npi, ctx.emit(K::Mul, {n, ctx.scalar(DType::F64, M_PI)}));
  NNC_ASSIGN_OR_RETURN(Value * npi2, ctx.emit(K::Mul, {npi, ctx.scalar(DType::F64, 2)}));
  NNC_ASSIGN_OR_RETURN(Value * phase, ctx.emit(K::Div, {npi2, period}));
  Value *w = ctx.scalar(DType::F64, a[0]);
  for (size_t k = 1; k < a.size(); ++k) {
    Value *arg = phase;
    if (k > 1) {
      NNC_ASSIGN_OR_RETURN(arg, ctx.emit(K::Mul, {phase, ctx.scalar(DType::F64, double(k))}));
    }
    NNC_ASSIGN_OR_RETURN(Value * c, ctx.emit(K::Cos, {arg}));
    NNC_ASSIGN_OR_RETURN(Value * term, ctx.emit(K::Mul, {c, ctx.scalar(DType::F64, a[k])}));
    NNC_ASSIGN_OR_RETURN(w, ctx.emit(k % 2 ? K::Sub : K::Add, {w, term}));
  }
  if (*out != DType::F64) {
    NNC_ASSIGN_OR_RETURN(w, ctx.emit(K::Cast, {w}, {{"to", *out}}));
  }
  return ctx.setOutput(0, w);
}

/// MelWeightMatrix-17: the [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel
/// filters. Its shape is its inputs' values, which models give as constants, so it is built
/// here as a constant, in f64 as ONNX's reference computes it: num_mel_bins + 2 edges equally
/// spaced on the mel scale mel(f) = 2595 log10(1 + f / 700) from lower_edge_hertz to
/// upper_edge_hertz (the step is the range over num_mel_bins + 2), each mapped back to hertz
/// and to the spectrogram bin floor((dft_length + 1) f / sample_rate); filter i rises from
/// edge i to edge i + 1 and falls to edge i + 2.
Error lowerMelWeightMatrix(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("output_datatype", 1));
  std::optional<DType> out = dtypeFromOnnx(static_cast<int>(code));
  if (!out || !isNumeric(*out))
    return ctx.error("unsupported output_datatype {}", code);
  const char *names[] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                         "upper_edge_hertz"};
  double v[5];
  for (size_t i = 0; i < 5; ++i) {
    NNC_ASSIGN_OR_RETURN(Tensor t, ctx.constantInput(i, names[i]));
    if (t.numElements() != 1)
      return ctx.error("{} must be a scalar, got {} elements", names[i], t.numElements());
    if (i < 3 && !isInteger(t.dtype()))
      return ctx.error("{} must be an integer, got {}", names[i], dtypeName(t.dtype()));
    v[i] = t.elementAsDouble(0);
  }
  int64_t bins = static_cast<int64_t>(v[0]), dft = static_cast<int64_t>(v[1]);
  double rate = v[2], lo = v[3], hi = v[4];
  if (bins <= 0 || dft <= 0 || rate <= 0 || bins > (int64_t(1) << 16) || dft > (int64_t(1) << 24))
    return ctx.error("num_mel_bins {}, dft_length {} and sample_rate {} must be positive (and "
                     "at most 65536 bins and 2^24 DFT points)",
                     bins, dft, rate);
  if (!(lo >= 0) || !(hi >= lo) || !std::isfinite(hi))
    return ctx.error("the edges {} Hz to {} Hz must satisfy 0 <= lower <= upper", lo, hi);
  int64_t rows = dft / 2 + 1;
  double melLo = 2595 * std::log10(1 + lo / 700), melHi = 2595 * std::log10(1 + hi / 700);
  double step = (melHi - melLo) / static_cast<double>(bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + melLo) / 2595) - 1);
    edge[static_cast<size_t>(i)] =
        static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / rate));
  }
  std::vector<double> w(static_cast<size_t>(rows * bins), 0.0);
  auto at = [&](int64_t row, int64_t col) -> Expected<double *> {
    if (row < 0 || row >= rows)
      return ctx.error("the mel filter {} reaches spectrogram bin {}, outside the {} bins of "
                       "dft_length {}: lower the upper edge ({} Hz) or raise sample_rate",
                       col, row, rows, dft, hi);
    return &w[static_cast<size_t>(row * bins + col)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    int64_t left = edge[static_cast<size_t>(i)], center = edge[static_cast<size_t>(i + 1)],
            right = edge[static_cast<size_t>(i + 2)];
    if (center == left) {
      NNC_ASSIGN_OR_RETURN(double *p, at(center, i));
      *p = 1;
    } else {
      for (int64_t j = left; j <= center; ++j) {
        NNC_ASSIGN_OR_RETURN(double *p, at(j, i));
        *p = static_cast<double>(j - left) / static_cast<double>(center - left);
      }
    }
    for (int64_t j = center; j < right; ++j) {
      NNC_ASSIGN_OR_RETURN(double *p, at(j, i));
      *p = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
  }
  Value *m = ctx.constant(Tensor::fromVector<double>(DType::F64, {rows, bins}, w));
  if (*out != DType::F64) {
    NNC_ASSIGN_OR_RETURN(m, ctx.emit(K::Cast, {m}, {{"to", *out}}));
  }
  return ctx.setOutput(0, m);
}

/// TensorScatter-24, the KV-cache update: present = past with, per batch entry b, the update's
/// sequence_length rows written along `axis` from write_indices[b] (0 when absent); in
/// "circular" mode the positions wrap modulo max_sequence_length. So a scatter_elements along
/// the axis with indices idx[b, .., s, ..] = write_indices[b] + s (mod max_sequence_length)
/// broadcast over the other axes. In "linear" mode a write past the end (or below
/// -max_sequence_length) is an index out of range: scatter_elements' error, at run time; a
/// negative position counts from the end, as the spec's numpy pseudocode indexes.
Error lowerTensorScatter(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * past, ctx.requiredInput(0, "past_cache"));
  NNC_ASSIGN_OR_RETURN(Value * upd, ctx.requiredInput(1, "update"));
  Value *writeIdx = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "linear"));
  if (mode != "linear" && mode != "circular")
    return ctx.error("mode must be linear or circular, got '{}'", mode);
  int64_t rank = past->rank();
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, ctx.intAttr("axis", -2));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.normalizeAxis(axisAttr, rank));
  if (rank < 2 || axis == 0)
    return ctx.error("past_cache {} needs rank >= 2 and a sequence axis other than the batch "
                     "axis 0 (axis = {})",
                     past->type().str(), axisAttr);
  if (upd->rank() != rank || upd->dtype() != past->dtype())
    return ctx.error("update {} must have past_cache's rank and dtype ({})", upd->type().str(),
                     past->type().str());
  for (int64_t d = 0; d < rank; ++d) {
    const Dim &a = past->shape()[static_cast<size_t>(d)], &b = upd->shape()[static_cast<size_t>(d)];
    if (d != axis && a.isStatic() && b.isStatic() && a.value() != b.value())
      return ctx.error("update {} and past_cache {} differ in axis {}, not only in the sequence "
                       "axis {}",
                       upd->type().str(), past->type().str(), d, axis);
  }
  const Dim &seqDim = upd->shape()[static_cast<size_t>(axis)];
  const Dim &maxDim = past->shape()[static_cast<size_t>(axis)];
  if (seqDim.isStatic() && maxDim.isStatic() && seqDim.value() > maxDim.value())
    return ctx.error("the update's sequence length {} exceeds max_sequence_length {}",
                     seqDim.value(), maxDim.value());
  // s along the axis: [1, .., S, .., 1].
  NNC_ASSIGN_OR_RETURN(Value * updShape, ctx.emit(K::ShapeOf, {upd}));
  NNC_ASSIGN_OR_RETURN(Value * seqLen, ctx.emit(K::Gather, {updShape, ctx.scalar(DType::I64, double(axis))},
                                                {{"axis", Attribute(int64_t(0))}}));
  NNC_ASSIGN_OR_RETURN(Value * s, ctx.emit(K::Range, {ctx.scalar(DType::I64, 0), seqLen,
                                                      ctx.scalar(DType::I64, 1)}));
  std::vector<int64_t> sShape(static_cast<size_t>(rank), 1);
  sShape[static_cast<size_t>(axis)] = -1;
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.emit(K::Reshape, {s, ctx.i64Vector(sShape)},
                                             {{"allowzero", Attribute(int64_t(0))}}));
  if (writeIdx) {
    if (!isInteger(writeIdx->dtype()) || writeIdx->rank() != 1)
      return ctx.error("write_indices must be an integer vector of the batch size, got {}",
                       writeIdx->type().str());
    if (writeIdx->dtype() != DType::I64) {
      NNC_ASSIGN_OR_RETURN(writeIdx, ctx.emit(K::Cast, {writeIdx}, {{"to", DType::I64}}));
    }
    std::vector<int64_t> bShape(static_cast<size_t>(rank), 1);
    bShape[0] = -1;
    NNC_ASSIGN_OR_RETURN(Value * wb, ctx.emit(K::Reshape, {writeIdx, ctx.i64Vector(bShape)},
                                              {{"allowzero", Attribute(int64_t(0))}}));
    NNC_ASSIGN_OR_RETURN(idx, ctx.emit(K::Add, {wb, idx}));
  }
  if (mode == "circular") {
    NNC_ASSIGN_OR_RETURN(Value * pastShape, ctx.emit(K::ShapeOf, {past}));
    NNC_ASSIGN_OR_RETURN(Value * maxLen,
                         ctx.emit(K::Gather, {pastShape, ctx.scalar(DType::I64, double(axis))},
                                  {{"axis", Attribute(int64_t(0))}}));
    NNC_ASSIGN_OR_RETURN(idx, ctx.emit(K::Mod, {idx, maxLen}));
  }
  NNC_ASSIGN_OR_RETURN(Value * full, ctx.emit(K::Expand, {idx, updShape}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::ScatterElements, {past, full, upd},
                                           {{"axis", Attribute(axis)},
                                            {"reduction", Attribute(std::string("none"))}}));
  return ctx.setOutput(0, y);
}

/// CausalConvWithState-27: padded = concat(past_state or zeros [B, C, k - 1], input) along
/// time; output = the depthwise conv (group C, no pads) of padded with weight [C, 1, k] and
/// bias, then x * sigmoid(x) for activation silu/swish; present_state = the last k - 1 steps
/// of padded (empty for k = 1: a slice from past the end).
Error lowerCausalConvWithState(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(1, "weight"));
  Value *bias = ctx.input(2), *past = ctx.input(3);
  NNC_ASSIGN_OR_RETURN(std::string act, ctx.stringAttr("activation", "none"));
  if (act != "none" && act != "silu" && act != "swish")
    return ctx.error("unknown activation '{}' (none, silu or swish)", act);
  if (!isFloat(x->dtype()) || x->rank() != 3)
    return ctx.error("input must be a float [batch, channels, length], got {}", x->type().str());
  if (w->rank() != 3 || !w->shape()[0].isStatic() || !w->shape()[2].isStatic())
    return ctx.error("weight must be [channels, 1, k] with static channels and k, got {}",
                     w->type().str());
  int64_t c = w->shape()[0].value(), k = w->shape()[2].value();
  const Dim &xc = x->shape()[1];
  if (k < 1 || (xc.isStatic() && xc.value() != c) ||
      (w->shape()[1].isStatic() && w->shape()[1].value() != 1))
    return ctx.error("weight {} is not [channels, 1, k >= 1] for input {}", w->type().str(),
                     x->type().str());
  Attribute time(int64_t(2));
  Value *padded = x;
  if (past) {
    if (past->rank() != 3)
      return ctx.error("past_state must be [batch, channels, k - 1], got {}", past->type().str());
    const Dim &pl = past->shape()[2];
    if (pl.isStatic() && pl.value() != k - 1)
      return ctx.error("past_state {} must hold k - 1 = {} steps", past->type().str(), k - 1);
    NNC_ASSIGN_OR_RETURN(padded, ctx.emit(K::Concat, {past, x}, {{"axis", time}}));
  } else if (k > 1) {
    NNC_ASSIGN_OR_RETURN(Value * shape, ctx.emit(K::ShapeOf, {x}));
    NNC_ASSIGN_OR_RETURN(Value * bc,
                         ctx.emit(K::Slice, {shape, ctx.i64Vector({0}), ctx.i64Vector({2})}));
    NNC_ASSIGN_OR_RETURN(Value * zShape, ctx.emit(K::Concat, {bc, ctx.i64Vector({k - 1})},
                                                  {{"axis", Attribute(int64_t(0))}}));
    NNC_ASSIGN_OR_RETURN(Value * zeros,
                         ctx.emit(K::ConstantOfShape, {zShape},
                                  {{"value", Attribute(Tensor::zeros(x->dtype(), {1}))}}));
    NNC_ASSIGN_OR_RETURN(padded, ctx.emit(K::Concat, {zeros, x}, {{"axis", time}}));
  }
  std::vector<Value *> ops{padded, w};
  if (bias)
    ops.push_back(bias);
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::Conv, ops,
                                           {{"strides", Attribute(std::vector<int64_t>{1})},
                                            {"pads", Attribute(std::vector<int64_t>{0, 0})},
                                            {"dilations", Attribute(std::vector<int64_t>{1})},
                                            {"group", Attribute(c)}}));
  if (act != "none") {
    NNC_ASSIGN_OR_RETURN(Value * s, ctx.emit(K::Sigmoid, {y}));
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Mul, {y, s}));
  }
  NNC_TRY(ctx.setOutput(0, y));
  if (!ctx.hasOutput(1))
    return Error::success();
  const int64_t end = std::numeric_limits<int64_t>::max();
  NNC_ASSIGN_OR_RETURN(Value * present,
                       ctx.emit(K::Slice, {padded, ctx.i64Vector({k > 1 ? -(k - 1) : end}),
                                           ctx.i64Vector({end}), ctx.i64Vector({2})}));
  return ctx.setOutput(1, present);
}

} // namespace

void registerComposedLowerings(LoweringTable &t) {
  t["ReverseSequence"] = {{"batch_axis", "time_axis"}, lowerReverseSequence};
  t["Col2Im"] = {{"dilations", "pads", "strides"}, lowerCol2Im};
  t["CausalConvWithState"] = {{"activation"}, lowerCausalConvWithState};
  const std::vector<std::string> window = {"output_datatype", "periodic"};
  t["HannWindow"] = {window, [](LoweringContext &ctx) {
                       return lowerCosineWindow(ctx, {0.5, 0.5});
                     }};
  t["HammingWindow"] = {window, [](LoweringContext &ctx) {
                          return lowerCosineWindow(ctx, {25.0 / 46.0, 1.0 - 25.0 / 46.0});
                        }};
  t["BlackmanWindow"] = {window, [](LoweringContext &ctx) {
                           return lowerCosineWindow(ctx, {0.42, 0.5, 0.08});
                         }};
  t["MelWeightMatrix"] = {{"output_datatype"}, lowerMelWeightMatrix};
  t["TensorScatter"] = {{"axis", "mode"}, lowerTensorScatter};
}

} // namespace nnc::onnxfe

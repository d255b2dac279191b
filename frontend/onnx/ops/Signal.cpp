// ONNX lowerings of the signal operators DFT (17 and 20) and STFT (17) as matrix products with
// constant twiddle matrices: the transformed axis is moved next to the trailing real/imaginary
// axis, the two are flattened and multiplied by a [samples * parts, bins * 2] matrix (for
// STFT after gathering the frames with constant indices and scaling the matrix's rows by the
// window). Sizes must be known at compile time (the signal axis, dft_length, STFT's
// frame_step and frame_length); the matrix holds at most kMaxTwiddle elements, which covers
// complex DFTs of up to 4096 points and one-sided spectra of up to 8190 points.
#include <algorithm>
#include <cmath>
#include <vector>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

/// The most elements a twiddle matrix may have (256 MiB in f32).
constexpr int64_t kMaxTwiddle = int64_t(1) << 26;

Attribute intA(int64_t v) {
  return Attribute(v);
}

/// cos and sin of 2 pi r / n for 0 <= r < n, exact at the quarter turns (so that the
/// imaginary parts of bin 0 and the Nyquist bin are exactly zero).
void turn(int64_t r, int64_t n, double &c, double &s) {
  if ((4 * r) % n == 0) {
    static const double quarter[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
    int64_t q = 4 * r / n;
    c = quarter[q][0];
    s = quarter[q][1];
    return;
  }
  double a = 2 * M_PI * static_cast<double>(r) / static_cast<double>(n);
  c = std::cos(a);
  s = std::sin(a);
}

/// The DFT of length `length` of the first `used` samples of a signal whose samples have
/// `parts` values (1: real; 2: real and imaginary), to bins 0 .. bins-1, as a
/// [used * parts, bins * 2] matrix: row (n, p), column (k, q) is what part p of sample n adds
/// to part q of bin k, a part of e^(-/+ 2 pi i k n / length) (divided by length for the
/// inverse).
std::vector<double> dftMatrix(int64_t used, int64_t parts, int64_t length, int64_t bins,
                              bool inverse) {
  std::vector<double> w(static_cast<size_t>(used * parts * bins * 2), 0.0);
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  auto at = [&](int64_t n, int64_t p, int64_t k, int64_t q) -> double & {
    return w[static_cast<size_t>(((n * parts + p) * bins + k) * 2 + q)];
  };
  for (int64_t n = 0; n < used; ++n)
    for (int64_t k = 0; k < bins; ++k) {
      double c, s;
      turn((n * k) % length, length, c, s);
      s *= sign;
      // (xr + i xi)(c + i s) = (xr c - xi s) + i (xr s + xi c)
      at(n, 0, k, 0) = c * scale;
      at(n, 0, k, 1) = s * scale;
      if (parts == 2) {
        at(n, 1, k, 0) = -s * scale;
        at(n, 1, k, 1) = c * scale;
      }
    }
  return w;
}

/// The inverse of a one-sided spectrum (numpy's irfft): the real signal of length `length`
/// whose DFT has bins 0 .. used-1 (used <= length / 2 + 1) as given and the rest their
/// conjugate mirror images, as a [used * parts, length] matrix. Bin k counts twice but for
/// bin 0 and the Nyquist bin, whose imaginary parts drop out.
std::vector<double> irfftMatrix(int64_t used, int64_t parts, int64_t length) {
  std::vector<double> w(static_cast<size_t>(used * parts * length), 0.0);
  for (int64_t k = 0; k < used; ++k) {
    double weight = (k == 0 || 2 * k == length ? 1.0 : 2.0) / static_cast<double>(length);
    for (int64_t t = 0; t < length; ++t) {
      double c, s;
      turn((k * t) % length, length, c, s);
      w[static_cast<size_t>((k * parts) * length + t)] = weight * c;
      if (parts == 2)
        w[static_cast<size_t>((k * parts + 1) * length + t)] = -weight * s;
    }
  }
  return w;
}

/// `values` as a constant [rows, cols] of the compute dtype `ct` (f32 or f64).
Value *matrixConstant(LoweringContext &ctx, DType ct, int64_t rows, int64_t cols,
                      const std::vector<double> &values) {
  if (ct == DType::F64)
    return ctx.constant(Tensor::fromVector<double>(DType::F64, {rows, cols}, values));
  std::vector<float> f(values.begin(), values.end());
  return ctx.constant(Tensor::fromVector<float>(DType::F32, {rows, cols}, f));
}

/// The dtype the transforms compute in: f32 for f16 and bf16, else the signal's.
DType computeDType(DType t) {
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

/// A compile-time integer scalar input (one element of an integer dtype), named `what`.
Expected<int64_t> scalarInput(LoweringContext &ctx, size_t i, const char *what) {
  NNC_ASSIGN_OR_RETURN(Tensor t, ctx.constantInput(i, what));
  if (!isInteger(t.dtype()) || t.numElements() != 1)
    return ctx.error("'{}' must be one integer, got {}", what, t.type().str());
  return t.toInt64Vector()[0];
}

Error checkSize(LoweringContext &ctx, int64_t rows, int64_t cols) {
  if (rows > kMaxTwiddle / std::max<int64_t>(cols, 1))
    return ctx.error("its twiddle matrix would be [{}, {}], over the {} elements nnc lowers "
                     "a DFT with",
                     rows, cols, kMaxTwiddle);
  return Error::success();
}

/// x [..., used, ..., parts] (the signal axis `axis`, the parts last; of the compute dtype)
/// times `w` [used * parts, out * q] along the signal axis: [..., out, ..., q].
Expected<Value *> transformAxis(LoweringContext &ctx, Value *x, int64_t axis, Value *w, int64_t out,
                                int64_t q) {
  int64_t r = x->rank();
  int64_t used = x->shape()[static_cast<size_t>(axis)].value();
  int64_t parts = x->shape().back().value();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r - 1; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(r - 1);
  bool moved = axis != r - 2;
  if (moved) {
    NNC_ASSIGN_OR_RETURN(x, ctx.emit(K::Transpose, {x}, {{"perm", Attribute(perm)}}));
  }
  std::vector<int64_t> flat(static_cast<size_t>(r - 2), 0);
  flat.push_back(used * parts);
  NNC_ASSIGN_OR_RETURN(x, ctx.emit(K::Reshape, {x, ctx.i64Vector(flat)}, {{"allowzero", intA(0)}}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::MatMul, {x, w}));
  std::vector<int64_t> split(static_cast<size_t>(r - 2), 0);
  split.push_back(out);
  split.push_back(q);
  NNC_ASSIGN_OR_RETURN(y,
                       ctx.emit(K::Reshape, {y, ctx.i64Vector(split)}, {{"allowzero", intA(0)}}));
  if (moved) {
    std::vector<int64_t> inv(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inv[static_cast<size_t>(perm[d])] = static_cast<int64_t>(d);
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Transpose, {y}, {{"perm", Attribute(inv)}}));
  }
  return y;
}

/// The first `n` entries of x along `axis`.
Expected<Value *> prefix(LoweringContext &ctx, Value *x, int64_t axis, int64_t n) {
  return ctx.emit(K::Slice, {x, ctx.i64Vector({0}), ctx.i64Vector({n}), ctx.i64Vector({axis})});
}

/// Checks a signal input: a float tensor of rank >= `minRank` whose last dim is 1 (real) or 2
/// (complex).
Expected<int64_t> signalParts(LoweringContext &ctx, Value *x, int64_t minRank, const char *what) {
  if (!isFloat(x->dtype()) || x->rank() < minRank)
    return ctx.error("{} must be a float tensor of rank >= {}, got {}", what, minRank,
                     x->type().str());
  const Dim &last = x->shape().back();
  if (!last.isStatic() || (last.value() != 1 && last.value() != 2))
    return ctx.error("{} {} must end in a dim of 1 (real) or 2 (real, imaginary)", what,
                     x->type().str());
  return last.value();
}

Expected<bool> flagAttr(LoweringContext &ctx, const char *name, int64_t dflt) {
  NNC_ASSIGN_OR_RETURN(int64_t v, ctx.intAttr(name, dflt));
  if (v != 0 && v != 1)
    return ctx.error("attribute '{}' must be 0 or 1, got {}", name, v);
  return v != 0;
}

/// DFT-17 (axis an attribute, default 1) and DFT-20 (axis input 2, default -2). With inverse
/// and onesided the input holds bins 0 .. m-1 of a real signal's spectrum and the result is
/// that real signal ([..., dft_length, ..., 1], dft_length 2 (m - 1) by default), numpy's
/// irfft; otherwise the (inverse) DFT of dft_length points (the signal cut or zero-padded to
/// it), of which onesided keeps bins 0 .. dft_length / 2.
Error lowerDFT(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(bool inverse, flagAttr(ctx, "inverse", 0));
  NNC_ASSIGN_OR_RETURN(bool onesided, flagAttr(ctx, "onesided", 0));
  NNC_ASSIGN_OR_RETURN(int64_t parts, signalParts(ctx, x, 2, "input"));
  int64_t r = x->rank(), axis = 1;
  if (ctx.opset() >= 20) {
    if (ctx.hasAttr("axis"))
      return ctx.error("DFT-{} takes the axis as input 2, not as an attribute", ctx.opset());
    axis = -2;
    if (ctx.input(2)) {
      NNC_ASSIGN_OR_RETURN(axis, scalarInput(ctx, 2, "axis"));
    }
  } else {
    NNC_ASSIGN_OR_RETURN(axis, ctx.intAttr("axis", 1));
  }
  if (axis < -r || axis > r - 2 || axis == -1)
    return ctx.error("axis {} is out of range for an input of rank {} (the last dim holds the "
                     "parts): it must be in [{}, -2] or [0, {}]",
                     axis, r, -r, r - 2);
  if (axis < 0)
    axis += r;
  const Dim &ad = x->shape()[static_cast<size_t>(axis)];
  if (!ad.isStatic())
    return ctx.error("the signal axis {} of {} is symbolic: DFT needs its size", axis,
                     x->type().str());
  int64_t n = ad.value();
  bool irfft = inverse && onesided;
  int64_t length = irfft ? 2 * (n - 1) : n;
  if (ctx.input(1)) {
    NNC_ASSIGN_OR_RETURN(length, scalarInput(ctx, 1, "dft_length"));
  }
  if (length < 1 || length > kMaxTwiddle)
    return ctx.error("the DFT length is {} (signal axis of {}): it must be positive and at "
                     "most {}",
                     length, n, kMaxTwiddle);
  DType t = x->dtype(), ct = computeDType(t);
  if (ct != t) {
    NNC_ASSIGN_OR_RETURN(x, ctx.emit(K::Cast, {x}, {{"to", ct}}));
  }
  Value *y = nullptr;
  if (irfft) {
    int64_t used = std::min(n, length / 2 + 1);
    NNC_TRY(checkSize(ctx, used * parts, length));
    if (used < n) {
      NNC_ASSIGN_OR_RETURN(x, prefix(ctx, x, axis, used));
    }
    Value *w = matrixConstant(ctx, ct, used * parts, length, irfftMatrix(used, parts, length));
    NNC_ASSIGN_OR_RETURN(y, transformAxis(ctx, x, axis, w, length, 1));
  } else {
    int64_t used = std::min(n, length), bins = onesided ? length / 2 + 1 : length;
    NNC_TRY(checkSize(ctx, used * parts, bins * 2));
    if (used < n) {
      NNC_ASSIGN_OR_RETURN(x, prefix(ctx, x, axis, used));
    }
    Value *w = matrixConstant(ctx, ct, used * parts, bins * 2,
                              dftMatrix(used, parts, length, bins, inverse));
    NNC_ASSIGN_OR_RETURN(y, transformAxis(ctx, x, axis, w, bins, 2));
  }
  if (ct != t) {
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Cast, {y}, {{"to", t}}));
  }
  return ctx.setOutput(0, y);
}

/// STFT-17 as ONNX's reference computes it: frame_length L (default the window's length, else
/// the signal's) sets the DFT length and the frame count 1 + (S - L) / frame_step; each
/// frame is the window's length W of samples from f * frame_step, times the window (ones
/// when absent), transformed with L points (cut or zero-padded to it). The frames are a
/// gather with constant indices, the window scales the twiddle matrix's rows.
Error lowerSTFT(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "signal"));
  NNC_ASSIGN_OR_RETURN(int64_t parts, signalParts(ctx, x, 3, "signal"));
  if (x->rank() != 3 || !x->shape()[1].isStatic())
    return ctx.error("signal must be [batch, length, 1 or 2] with a static length, got {}",
                     x->type().str());
  if (!ctx.input(1))
    return ctx.error("missing required input 1 (frame_step)");
  NNC_ASSIGN_OR_RETURN(int64_t step, scalarInput(ctx, 1, "frame_step"));
  NNC_ASSIGN_OR_RETURN(bool onesided, flagAttr(ctx, "onesided", 1));
  int64_t s = x->shape()[1].value();
  Value *window = ctx.input(2);
  if (window &&
      (window->rank() != 1 || !window->shape()[0].isStatic() || window->dtype() != x->dtype()))
    return ctx.error("window must be a vector of static length and the signal's dtype {}, "
                     "got {}",
                     dtypeName(x->dtype()), window->type().str());
  int64_t windowLen = window ? window->shape()[0].value() : -1;
  int64_t length = window ? windowLen : s;
  if (ctx.input(3)) {
    NNC_ASSIGN_OR_RETURN(length, scalarInput(ctx, 3, "frame_length"));
  }
  if (!window)
    windowLen = length;
  if (step < 1 || length < 1 || windowLen < 1)
    return ctx.error("frame_step ({}), frame_length ({}) and the window's length ({}) must be "
                     "positive",
                     step, length, windowLen);
  if (length > s)
    return ctx.error("frame_length {} is longer than the signal ({} samples)", length, s);
  int64_t frames = 1 + (s - length) / step;
  int64_t used = std::min(windowLen, length), bins = onesided ? length / 2 + 1 : length;
  NNC_TRY(checkSize(ctx, used * parts, bins * 2));
  if (frames > kMaxTwiddle / used)
    return ctx.error("{} frames of {} samples are too many", frames, used);
  DType t = x->dtype(), ct = computeDType(t);
  if (ct != t) {
    NNC_ASSIGN_OR_RETURN(x, ctx.emit(K::Cast, {x}, {{"to", ct}}));
  }
  // frames[b, f, j] = signal[b, f * step + j]; every index is in range as f * step <= s - L.
  std::vector<int64_t> idx(static_cast<size_t>(frames * used));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < used; ++j)
      idx[static_cast<size_t>(f * used + j)] = f * step + j;
  Value *iv = ctx.constant(Tensor::fromVector<int64_t>(DType::I64, {frames, used}, idx));
  NNC_ASSIGN_OR_RETURN(Value * framed, ctx.emit(K::Gather, {x, iv}, {{"axis", intA(1)}}));
  Value *w = matrixConstant(ctx, ct, used * parts, bins * 2,
                            dftMatrix(used, parts, length, bins, /*inverse=*/false));
  if (window) {
    Value *win = window;
    if (windowLen > used) {
      NNC_ASSIGN_OR_RETURN(win, prefix(ctx, win, 0, used));
    }
    if (ct != t) {
      NNC_ASSIGN_OR_RETURN(win, ctx.emit(K::Cast, {win}, {{"to", ct}}));
    }
    NNC_ASSIGN_OR_RETURN(
        win, ctx.emit(K::Reshape, {win, ctx.i64Vector({used, 1})}, {{"allowzero", intA(0)}}));
    NNC_ASSIGN_OR_RETURN(Value * rows,
                         ctx.emit(K::Reshape, {w, ctx.i64Vector({used, parts * bins * 2})},
                                  {{"allowzero", intA(0)}}));
    NNC_ASSIGN_OR_RETURN(Value * scaled, ctx.emit(K::Mul, {rows, win}));
    NNC_ASSIGN_OR_RETURN(w, ctx.emit(K::Reshape, {scaled, ctx.i64Vector({used * parts, bins * 2})},
                                     {{"allowzero", intA(0)}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, transformAxis(ctx, framed, 2, w, bins, 2));
  if (ct != t) {
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Cast, {y}, {{"to", t}}));
  }
  return ctx.setOutput(0, y);
}

} // namespace

void registerSignalLowerings(LoweringTable &t) {
  t["DFT"] = {{"axis", "inverse", "onesided"}, lowerDFT};
  t["STFT"] = {{"onesided"}, lowerSTFT};
}

} // namespace nnc::onnxfe

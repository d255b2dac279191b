// Interpreter kernels of the blocked channel layout (to_nchwc, from_nchwc, pack_conv_weight)
// and of conv_nchwc, which is defined as conv over the unblocked (padded) tensors.
#include <cstring>

#include "interp/Kernels.h"

namespace nnc::interp {

namespace {

/// Copies elements of `src` to `dst` (same dtype; every element takes dtypeSize() bytes in
/// memory), with the size looked up once: weight packing copies millions of elements at
/// compile time.
class ElementCopy {
public:
  ElementCopy(const Tensor &src, Tensor &dst)
      : src_(static_cast<const char *>(src.rawData())), dst_(static_cast<char *>(dst.rawData())),
        size_(dtypeSize(src.dtype())) {}
  /// Element `from` of src to element `to` of dst.
  void operator()(int64_t from, int64_t to) const {
    switch (size_) {
    case 4:
      std::memcpy(dst_ + to * 4, src_ + from * 4, 4);
      break;
    case 2:
      std::memcpy(dst_ + to * 2, src_ + from * 2, 2);
      break;
    case 8:
      std::memcpy(dst_ + to * 8, src_ + from * 8, 8);
      break;
    case 1:
      dst_[to] = src_[from];
      break;
    default:
      std::memcpy(dst_ + to * size_, src_ + from * size_, size_);
      break;
    }
  }

private:
  const char *src_;
  char *dst_;
  size_t size_;
};

/// Elements before, at and after `axis` of `e`.
struct AxisSplit {
  int64_t outer = 1, channels = 1, inner = 1;
};

AxisSplit splitAt(const Extents &e, int64_t axis, int64_t lastExclusive) {
  AxisSplit s;
  for (int64_t d = 0; d < axis; ++d)
    s.outer *= e[d];
  s.channels = e[axis];
  for (int64_t d = axis + 1; d < lastExclusive; ++d)
    s.inner *= e[d];
  return s;
}

/// x [.., C, ..] -> [.., ceil(C/b), .., b], padding lanes 0.
Tensor toBlocked(const Tensor &x, int64_t axis, int64_t b) {
  AxisSplit s = splitAt(x.extents(), axis, x.rank());
  int64_t cb = (s.channels + b - 1) / b;
  Extents out = x.extents();
  out[axis] = cb;
  out.push_back(b);
  Tensor y = Tensor::zeros(x.dtype(), out);
  ElementCopy copy(x, y);
  for (int64_t p = 0; p < s.outer; ++p)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t q = 0; q < s.inner; ++q)
        copy((p * s.channels + c) * s.inner + q, ((p * cb + c / b) * s.inner + q) * b + c % b);
  return y;
}

/// x [.., Cb, .., b] -> [.., channels, ..].
Tensor fromBlocked(const Tensor &x, int64_t axis, int64_t channels) {
  int64_t b = x.extents().back();
  AxisSplit s = splitAt(x.extents(), axis, x.rank() - 1);
  Extents out(x.extents().begin(), x.extents().end() - 1);
  out[axis] = channels;
  Tensor y = Tensor::zeros(x.dtype(), out);
  ElementCopy copy(x, y);
  for (int64_t p = 0; p < s.outer; ++p)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t q = 0; q < s.inner; ++q)
        copy(((p * s.channels + c / b) * s.inner + q) * b + c % b,
             (p * channels + c) * s.inner + q);
  return y;
}

} // namespace

Results evalToNCHWc(const Node &node, const Operands &ops) {
  return std::vector<Tensor>{toBlocked(ops[0], node.getInt("axis", 1), node.getInt("block", 1))};
}

Results evalFromNCHWc(const Node &node, const Operands &ops) {
  return std::vector<Tensor>{
      fromBlocked(ops[0], node.getInt("axis", 1), node.getInt("channels", 1))};
}

Results evalPackConvWeight(const Node &node, const Operands &ops) {
  const Tensor &w = ops[0];
  int64_t bi = node.getInt("in_block", 1), bo = node.getInt("out_block", 1);
  int64_t m = w.dim(0), cg = w.dim(1), k = w.numElements() / std::max<int64_t>(m * cg, 1);
  int64_t mb = (m + bo - 1) / bo, kc = (cg + bi - 1) / bi;
  Extents out = w.extents();
  out[0] = mb;
  out[1] = kc;
  out.push_back(bi);
  out.push_back(bo);
  Tensor y = Tensor::zeros(w.dtype(), out);
  ElementCopy copy(w, y);
  for (int64_t o = 0; o < m; ++o)
    for (int64_t c = 0; c < cg; ++c) {
      // Element t of w[o, c] goes to y[o / bo, c / bi, t, c % bi, o % bo].
      int64_t from = (o * cg + c) * k;
      int64_t to = ((o / bo) * kc + c / bi) * k * bi * bo + (c % bi) * bo + o % bo;
      for (int64_t t = 0; t < k; ++t)
        copy(from + t, to + t * bi * bo);
    }
  return std::vector<Tensor>{y};
}

Results evalConvNCHWc(const Node &node, const Operands &ops) {
  // bf16_pairs: bf16 x and w (exact in f32), the conv in f32; 2: a plain input's weight
  // pairs kernel columns (column 2p + l in lane l of pair p).
  const int64_t pairMode = node.getInt("bf16_pairs", 0);
  const bool pairs = pairMode != 0;
  Tensor x = ops[0];
  if (pairs) {
    NNC_ASSIGN_OR_RETURN(x, castTensor(ops[0], DType::F32));
  }
  const Tensor &w = ops[1];
  int64_t b = w.dim(5), bi = w.dim(4), kc = w.dim(1), mb = w.dim(0);
  int64_t kernel = w.dim(2) * w.dim(3);
  Tensor wp;
  if (pairMode == 2) {
    // Unpack to [Mb*b, C, kh, 2 kw].
    int64_t kh = w.dim(2), kw = w.dim(3);
    wp = Tensor::zeros(w.dtype(), {mb * b, kc, kh, 2 * kw});
    ElementCopy copy(w, wp);
    for (int64_t o = 0; o < mb * b; ++o)
      for (int64_t c = 0; c < kc; ++c)
        for (int64_t t = 0; t < kernel; ++t)
          for (int64_t l = 0; l < 2; ++l)
            copy((((o / b) * kc + c) * kernel + t) * 2 * b + (o % b) * 2 + l,
                 ((o * kc + c) * kh + t / kw) * 2 * kw + t % kw * 2 + l);
  } else {
    // Unpack the weight to [Mb*b, Kc*bi, kh, kw].
    wp = Tensor::zeros(w.dtype(), {mb * b, kc * bi, w.dim(2), w.dim(3)});
    ElementCopy copy(w, wp);
    for (int64_t o = 0; o < mb * b; ++o)
      for (int64_t c = 0; c < kc * bi; ++c)
        for (int64_t t = 0; t < kernel; ++t) {
          int64_t lanes = pairs ? (c % bi) / 2 * 2 * b + (o % b) * 2 + c % 2
                                : (c % bi) * b + o % b;
          copy((((o / b) * kc + c / bi) * kernel + t) * bi * b + lanes,
               (o * kc * bi + c) * kernel + t);
        }
  }
  if (pairs) {
    NNC_ASSIGN_OR_RETURN(wp, castTensor(wp, DType::F32));
  }
  Operands plain{x.rank() == 4 ? x : fromBlocked(x, 1, x.dim(1) * b), wp};
  if (ops.size() > 2 && !ops[2].isNull())
    plain.push_back(ops[2].reshaped({mb * b}));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> y, evalConv(node, plain));
  return std::vector<Tensor>{toBlocked(y[0], 1, b)};
}

} // namespace nnc::interp

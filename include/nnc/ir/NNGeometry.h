// Shape arithmetic of the NN ops (conv/pool windows, einsum labels, resize sizes), shared by
// their shape rules and interpreter kernels so that the two always agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"

namespace nnc {

/// The validated window attributes of a conv or pool node with `spatialRank` spatial axes.
/// Empty `strides`/`dilations`/`pads` attributes mean all 1 / all 0.
struct WindowAttrs {
  std::vector<int64_t> strides, dilations, pads; ///< pads: [begins..., ends...]
  std::string autoPad;                           ///< NOTSET, SAME_UPPER, SAME_LOWER or VALID.
  bool ceilMode = false;
  // conv_transpose only.
  std::vector<int64_t> outputPadding;
  std::vector<int64_t> outputShape; ///< Spatial; empty when not given.
};

/// The geometry of one spatial axis: output position o reads (conv, pool) or writes
/// (conv_transpose) input position o*stride - padBegin + k*dilation for kernel tap k
/// (for conv_transpose: input position i writes output i*stride - padBegin + k*dilation).
struct WindowAxis {
  int64_t in = 0, kernel = 0, stride = 1, dilation = 1, padBegin = 0, padEnd = 0, out = 0;
};

/// Reads and checks strides, dilations, pads, auto_pad (and ceil_mode, output_padding,
/// output_shape where the op has them).
Expected<WindowAttrs> readWindowAttrs(const Node &node, size_t spatialRank);

/// Output size and pads of spatial axis `axis` of a conv or pool window (ceil_mode honoured,
/// with the rule that the last window must start inside the input or the begin padding).
/// Fails when the output would be empty.
Expected<WindowAxis> windowAxis(const Node &node, const WindowAttrs &a, size_t axis, int64_t in,
                                int64_t kernel);

/// Output size and begin pad of spatial axis `axis` of conv_transpose (output_shape,
/// output_padding and auto_pad honoured).
Expected<WindowAxis> transposeWindowAxis(const Node &node, const WindowAttrs &a, size_t axis,
                                         int64_t in, int64_t kernel);

/// True when conv_integer `node` holds its activations channels last (channels_last = 1): x
/// [N, spatial..., C] and the result [N, spatial..., M] (the layout-nhwc pass sets it).
bool channelsLast(const Node &node);

/// The permutation of a rank-`rank` tensor (rank >= 2) that moves axis 1, the channels, to the
/// end ([0, 2, ..., rank - 1, 1]; `toLast` true) or back from the end ([0, rank - 1, 1, ...,
/// rank - 2]).
std::vector<int64_t> channelsPerm(size_t rank, bool toLast);

/// `v` permuted: element i of the result is v[perm[i]].
template <class T>
std::vector<T> permuted(const std::vector<T> &v, const std::vector<int64_t> &perm) {
  std::vector<T> r;
  for (int64_t p : perm)
    r.push_back(v[static_cast<size_t>(p)]);
  return r;
}

/// An einsum equation with every axis named by a label id: letters keep their character code;
/// the broadcast (ellipsis) axes are 256 + their position in the right-aligned ellipsis.
struct EinsumLabels {
  std::vector<std::vector<int>> operands;
  std::vector<int> output;
};

/// Parses node's `equation` for operands of the given ranks (implicit output: ellipsis axes,
/// then the letters used once, in ASCII order).
Expected<EinsumLabels> parseEinsum(const Node &node, const std::vector<int64_t> &ranks);

/// Everything resize needs per axis of the input (axes not resized have scale 1).
struct ResizePlan {
  Extents out;
  std::vector<double> scales;
  std::vector<double> roiStart, roiEnd; ///< Per axis; defaults 0 and 1.
};

/// The resize node's output extents for input extents `in` and the concrete roi, scales and
/// sizes operands (null or empty when absent).
Expected<ResizePlan> planResize(const Node &node, const Extents &in, const Tensor *roi,
                                const Tensor *scales, const Tensor *sizes);

/// How an attention node's attn_mask of extents `me` and dtype `t` broadcasts over
/// [batch, qHeads, qLen, total]: its last dim's length (at most `total`; the rest counts as
/// masked out) and the element strides of the three leading dims (0 where broadcast).
struct AttentionMaskLayout {
  int64_t length = 0;
  int64_t strides[3] = {0, 0, 0};
};
Expected<AttentionMaskLayout> attentionMaskLayout(const Node &node, const Extents &me, DType t,
                                                  int64_t batch, int64_t qHeads, int64_t qLen,
                                                  int64_t total);

} // namespace nnc

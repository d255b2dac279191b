// What the conv and conv_transpose lowerers share (Conv.cpp, ConvIm2col.cpp,
// ConvTranspose.cpp): the geometry, the checked operands, tap ranges and the explicitly padded
// input. Private to codegen/lower.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "Epilogue.h"
#include "Gemm.h"
#include "NNLowering.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::lower::nnl {

/// The most products of a run of partial sums in a conv's reduction, which holds at least
/// one unit (an input block of a conv tile, ConvTileShape::sumEvery; an input channel's taps
/// in im2col's GEMM, GemmOperands::sumRun): f32 rounding grows with the length of a sum's
/// chain, and one chain over a deep conv's whole reduction (4608 products for 512 channels
/// of 3x3) rounded several times worse than PyTorch's convs. A run costs an addition per
/// accumulator at its end (a load and store too in a conv tile). Runs of one input channel
/// in a plain conv tile (the stem's 7x7 over RGB: 49 products, as ONNX Runtime's MLAS sums
/// it, instead of one chain of 147), of one block of a 3x3 conv (144 products instead of
/// 288) and of 32 products in a 1x1 conv (instead of 256) took FCN-ResNet50's output from
/// 1.51e-5 to 1.15e-5 of its range in rms against PyTorch's float64, the stem's runs most of
/// that (1.21e-5 alone): the first layer's rounding is what every later layer amplifies. The
/// run ends cost ResNet-50's convs at batch 1 about 0.5-1.5% of their time (the 1x1 convs'
/// runs; bench/results/domain-models.md, session 49).
constexpr int64_t kConvSumRun = 32;

/// The units of a run (see kConvSumRun) of `perUnit` products each.
inline int64_t convSumRunUnits(int64_t perUnit) {
  return std::max<int64_t>(kConvSumRun / std::max<int64_t>(perUnit, 1), 1);
}

/// A conv's spatial axes: per axis its window (stride, dilation, padding, output extent), the
/// input, output and kernel extents, and their products.
struct ConvGeometry {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial, kernel;
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

/// What conv's lowerings share: the checked operands and the geometry.
struct ConvSetup {
  ConvGeometry geo;
  int64_t N = 0, C = 0, M = 0, cg = 0, mg = 0, group = 1, outN = 0;
  DType t;
  bool hasBias = false;
};

/// The checked operands (float, one dtype; weight and bias matching the input and group; for
/// conv_integer u8 or i8 and no bias) and the geometry of conv (`transpose` false),
/// conv_integer or conv_transpose.
Expected<ConvSetup> convSetup(const Node &node, bool transpose);

/// The range of "from" positions p in [0, fromCount) whose partner p*stride - padBegin +
/// tap*dilation lies in [0, toCount), for a kernel tap given as an expression: returns
/// {first, count} (count >= 0).
std::pair<kir::Expr, kir::Expr> tapRange(const WindowAxis &a, const kir::Expr &tap,
                                         int64_t fromCount, int64_t toCount);

/// The extents of a conv's input with its padding made explicit: every tap of every output
/// lies inside.
Extents paddedExtents(const ConvGeometry &geo);

/// A channels-last padded row (paddedExtents' last axis, `channels` elements per position)
/// as three runs of elements: the left padding, the input row, the right padding.
struct PaddedRowRuns {
  int64_t left = 0, mid = 0, right = 0;
};
PaddedRowRuns paddedRowRuns(const ConvGeometry &geo, int64_t channels);

/// How a padded input's rows are stored when split into `phases` phases: the row's columns
/// c with c % phases == f, in order, at f * (row's extent / phases, rounded up). A window of
/// stride s then reads a run of consecutive columns of one phase (phases = s) where it read
/// every s-th column of the row.
Extents phasedExtents(const Extents &padded, int64_t phases);

/// A kernel copying the conv's input (operand 0, N x C images) into node scratch 0 with its
/// padding made explicit (zeros; paddedExtents) and its rows split into `phases` phases
/// (phasedExtents; 1: as they are): per axis, zeros in the slab outside the input along it
/// (the slabs meet at the corners), then the input's rows at their padded place (the copy
/// vectorizes when phases is 1). Each element is written about once: zeroing the whole
/// buffer first took a third of the kernel for a 3x1x1 conv padded only along depth.
kir::Kernel padInputKernel(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                           int64_t N, int64_t C, DType t, int64_t phases = 1);

/// Where a conv kernel that accumulates onto its result (the direct loops, col2im's scatter)
/// applies a fused epilogue: the loop over result elements [row * cols, (row + 1) * cols),
/// which the kernel runs once their sums are complete, finishing each in place (`finish`:
/// Epilogue::inPlace), its locals before it, its inner loop vectorized through `sched`.
kir::Stmt finishRow(KernelBuilder &kb, const Epilogue::InPlace &finish, const kir::Expr &row,
                    int64_t cols, kir::Schedule &sched);

/// The last loop of a conv kernel that accumulates in a wider scratch `accb` (f16, bf16): the
/// result `ob` of rows x cols elements is the accumulator cast to `t`, or with a fused
/// epilogue `ep` (its result dtype `t`) the group's value there.
kir::Stmt castResult(KernelBuilder &kb, int accb, int ob, DType t, int64_t rows, int64_t cols,
                     Epilogue *ep);

} // namespace nnc::lower::nnl

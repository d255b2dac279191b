// conv_nchwc's register tiles as ConvTile statements (ConvNchwcTile.cpp): the loop nest of
// Layout.cpp's lowerConvNCHWc hands each tile here when its operands are f32, and the LLVM
// backend emits every tile of one shape as one shared explicit-vector microkernel.
#pragma once

#include <cstdint>
#include <vector>

#include "Epilogue.h"
#include "LowerUtil.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::lower {

/// The kernel columns an edge tile's columns read inside the input: runs [begin, end) of kw in
/// which the same columns (`active`, contiguous) stay inside, in kw order. A tile of R columns
/// from output column `first` on an input row of W columns.
struct KwRun {
  int64_t begin = 0, end = 0;
  std::vector<bool> active;
};
std::vector<KwRun> kwRuns(int64_t first, int64_t R, const WindowAxis &aw, int64_t W, int64_t KW);

/// A conv_nchwc's geometry and buffers as its tiles see them (after pointwise rows merge).
struct NchwcTiles {
  int x = -1, w = -1, bias = -1, out = -1, part = -1; ///< part: the passes' partial sums
  bool plain = false, depthwise = false, hAlways = true;
  int64_t Cx = 0, H = 0, W = 0, OH = 0, OW = 0, Mb = 0, Kc = 0, KH = 0, KW = 0, bi = 0, b = 0;
  int64_t M = 1; ///< blocks of a full tile group (the partial sums' slots per item)
  WindowAxis ah, aw;
  /// The parallel item q (image, block group, row) and its image, row, the group's first
  /// output block and first input block.
  kir::Expr q, n, oh, block0, icb0;
  /// bf16 x and w, w's input lanes in pairs (conv_nchwc's bf16_pairs): bf16 ConvTiles.
  bool bf16 = false;
  /// bf16_pairs 2: a plain input whose pairs are kernel columns 2p and 2p + 1 (KW counts the
  /// pairs; the input is padded, so that every tile is interior).
  bool columnPairs = false;
  /// The last pass too stores its sums to the partial sums' scratch, and the epilogue
  /// (`finishFrom`) stores the final values: a group result of a narrower dtype (bf16).
  bool sumsToScratch = false;
  /// Receives the name of each tile's loop over a block's lanes in its epilogue, for the
  /// kernel's schedule to vectorize and declare independent (each lane reads and writes its
  /// own element).
  std::vector<std::string> *epilogueLaneLoops = nullptr;
  /// Buffers of the output's layout that the epilogue reads at each element (a residual): the
  /// tile prefetches its lines of them before its multiply-adds, so that they arrive while it
  /// computes.
  std::vector<int> epilogueReads;
};

/// One pass of a tile's reduction over input blocks [kcBase, kcBase + kcCount).
struct NchwcPass {
  kir::Expr kcBase;
  int64_t kcCount = 0;
  bool first = false, last = false;
};

/// The statements of one tile: output columns [ow0, ow0 + R) of the row x Mt blocks, as a
/// ConvTile (an edge tile, whose first column `first` is a constant, >= 0, with each kernel
/// column's window of the columns that read inside the input). On the last pass, `finish`
/// (when set) applies the group's epilogue in place to the tile's stored sums, or with
/// NchwcTiles::sumsToScratch `finishFrom` stores the final values from the sums in scratch;
/// its scalar inputs go to `hoisted`.
kir::Stmt nchwcVectorTile(KernelBuilder &kb, const NchwcTiles &g, const kir::Expr &ow0,
                          int64_t first, int64_t R, int64_t Mt, const NchwcPass &pass,
                          const Epilogue::InPlace *finish,
                          const Epilogue::FromScratch *finishFrom,
                          std::vector<kir::Stmt> &hoisted);

} // namespace nnc::lower

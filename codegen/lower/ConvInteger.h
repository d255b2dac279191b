// What conv_integer's lowerings share (ConvInteger.cpp, ConvIntegerTiles.cpp): the checked
// operands, geometry and zero points. Private to codegen/lower.
#pragma once

#include <string>

#include "ConvLowering.h"

namespace nnc::lower::nnl {

/// A conv_integer with static extents: conv's setup plus the operands' signedness and which
/// zero points are given.
struct IntConv {
  ConvSetup s;
  /// x and the result are channels last ([N, spatial..., C]; channels_last = 1).
  bool last = false;
  bool xSigned = false;   ///< x is i8 (the tiles read u8: x + 128).
  bool wUnsigned = false; ///< w is u8 (the tiles read i8: w - 128).
  bool zx = false, zw = false;
  bool zwPerChannel = false; ///< w_zero_point holds one value per output channel.
  /// > 0: w arrived packed by pack-gemm-weights (packed_m) in panels of this many channels.
  int64_t packedNr = 0;
  /// Operand 4 holds the packed weight's i32 column sums (pack-gemm-weights).
  bool colSums = false;

  /// The flat index into operand 1 of weight element (m, c, tap) (tap: the kernel's
  /// row-major offset).
  kir::Expr wIndex(kir::Expr m, kir::Expr c, kir::Expr tap) const;
  /// The flat index into x of channel `c` of image `n` at flat spatial position `pos`.
  kir::Expr xIndex(kir::Expr n, kir::Expr c, kir::Expr pos) const;
  /// The flat index into the result of channel `m` of image `n` at output position `pos`.
  kir::Expr yIndex(kir::Expr n, kir::Expr m, kir::Expr pos) const;
};

/// The checked conv_integer `node` (u8/i8 operands, conv's geometry and groups, zero points
/// of one element, or one per output channel for w's).
Expected<IntConv> analyzeConvInteger(const Node &node);

/// Zero point `z` (2: x's, 3: w's at output channel `m`) as i32; 0 when absent.
kir::Expr convZeroPoint(KernelBuilder &kb, const IntConv &f, size_t z, kir::Expr m);

} // namespace nnc::lower::nnl

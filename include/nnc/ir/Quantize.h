// The element types of linear quantization (quantize / dequantize) and their integer ranges,
// shared by the shape rules, the interpreter and code generation.
#pragma once

#include <cstdint>

#include "nnc/ir/DType.h"

namespace nnc {

/// The string attribute that any op may carry (like `fusion_group`) to say why a matmul or conv
/// between dequantize and quantize ops was left in floating point (passes/LowerQDQ.cpp); code
/// generation's template listing and the profile repeat it.
inline constexpr const char *kQdqFallbackAttr = "qdq_fallback";

/// The dtypes a `quantize` may produce and a `dequantize` read as its quantized operand: the
/// 2- to 16-bit integers and the f8 (not f8e8m0) and f4e2m1 formats, as in ONNX
/// QuantizeLinear-25; dequantize also reads i32.
bool isQuantizedType(DType t);

/// The saturation range [lo, hi] of an integer quantized dtype (u8: [0, 255], i2: [-2, 1]);
/// false for the float formats.
bool quantizedIntRange(DType t, int64_t &lo, int64_t &hi);

} // namespace nnc

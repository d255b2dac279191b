// NumPy .npy tensor files. Part of nnc_runtime_core: a runner reads and writes them without
// the ONNX frontend or protobuf.
#pragma once

#include <string>

#include "nnc/ir/Tensor.h"

namespace nnc {

/// Reads a NumPy .npy file (little-endian, C order).
Expected<Tensor> readNpyFile(const std::string &path);
/// Writes a NumPy .npy file.
Error writeNpyFile(const std::string &path, const Tensor &t);

} // namespace nnc

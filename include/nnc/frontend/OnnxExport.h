// Writing trained weights back into an ONNX model.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nnc/ir/Tensor.h"

namespace nnc {

/// Names of the model's initializers, in file order.
Expected<std::vector<std::string>> onnxInitializerNames(const std::string &path);

/// Copies the model at `in` to `out` with the initializers named in `values` replaced by
/// those tensors (stored inline), everything else as it was. Fails, naming it, when a name is
/// not an initializer or a tensor's dtype or shape differs from the initializer's.
Error writeOnnxWithInitializers(const std::string &in, const std::string &out,
                                const std::map<std::string, Tensor> &values);

} // namespace nnc

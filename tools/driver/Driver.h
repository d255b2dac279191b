// What the nnc CLI and the conformance runner share: loading models, reading and writing
// test data, running a graph on a target, and comparing results.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

namespace nnc::driver {

enum class Target { Interp };

/// "interp" -> Target::Interp; the error lists the targets there are.
Expected<Target> parseTarget(const std::string &name);
const char *targetName(Target t);

/// Loads a model: .onnx through the importer, .nir through the text parser. `knownInputs`
/// (by input name) supply compile-time values the model passes as graph inputs.
Expected<std::unique_ptr<Graph>> loadModel(const std::string &path,
                                           const std::map<std::string, Tensor> &knownInputs = {});

/// Names of the model's inputs in order (ONNX: non-initializer graph inputs).
Expected<std::vector<std::string>> modelInputNames(const std::string &path);

/// Reads a tensor from a .pb (TensorProto) or .npy file, by extension.
Expected<Tensor> readTensorFile(const std::string &path);
/// Writes a tensor as .pb or .npy, by extension.
Error writeTensorFile(const std::string &path, const Tensor &t, const std::string &name);

/// Runs the optimization pipeline that precedes execution (shape inference, folding, ...),
/// with the verifier after every pass unless `verifyEach` is false.
Error optimize(Graph &g, bool verifyEach = true);

/// Runs `g` on `inputs` (graph-input order) on the target.
Expected<std::vector<Tensor>> execute(const Graph &g, const std::vector<Tensor> &inputs,
                                      Target target);

/// numpy.testing.assert_allclose semantics for floats (|a-e| <= atol + rtol*|e|, NaN equals
/// NaN, infinities must match), exact equality for integers, bool and storage types; dtype
/// and extents must match. Returns an empty string when equal, else what differs.
std::string compareTensors(const Tensor &expected, const Tensor &actual, double rtol = 1e-3,
                           double atol = 1e-7);

} // namespace nnc::driver

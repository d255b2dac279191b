// ONNX Runtime as a peer for `nnc bench --compare ort`: libonnxruntime.so loaded with dlopen at
// run time through its C API (no build-time dependency on ONNX Runtime).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Tensor.h"
#include "nnc/support/Error.h"

namespace nnc::tools {

/// One ONNX Runtime session on one model. The library is found at NNC_ORT_LIBRARY, else as
/// libonnxruntime.so.1 / libonnxruntime.so on the loader's path, else in the onnxruntime-node
/// package under bench/ort/node_modules (searched from the current directory and from the
/// nnc executable's directory upwards).
class OrtPeer {
public:
  /// Loads the library and makes a session with all graph optimizations, `threads` intra-op
  /// threads, one inter-op thread, sequential execution, and idle pool threads not spinning
  /// when `spin` is false.
  static Expected<std::unique_ptr<OrtPeer>> open(const std::string &modelPath, int threads,
                                                 bool spin);
  ~OrtPeer();
  OrtPeer(const OrtPeer &) = delete;
  OrtPeer &operator=(const OrtPeer &) = delete;

  /// Runs on `inputs` (the session's input order); the outputs in the session's output order.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs);
  /// Where the library was loaded from and its version string.
  const std::string &libraryPath() const { return path_; }
  const std::string &version() const { return version_; }
  const std::vector<std::string> &inputNames() const { return inputNames_; }

private:
  OrtPeer() = default;
  struct Api;
  void *lib_ = nullptr;
  const void *const *api_ = nullptr; ///< The OrtApi table (function pointers by index).
  void *env_ = nullptr, *options_ = nullptr, *session_ = nullptr, *memInfo_ = nullptr;
  std::string path_, version_;
  std::vector<std::string> inputNames_, outputNames_;
  std::vector<const char *> inputPtrs_, outputPtrs_;
};

} // namespace nnc::tools

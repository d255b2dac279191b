// ONNX Runtime peer through its C API, loaded with dlopen (see OrtPeer.h).
//
// The C API is one exported function, OrtGetApiBase, returning {GetApi, GetVersionString};
// GetApi(version) returns the OrtApi table: function pointers in a fixed order that only ever
// grows (the ABI promise of onnxruntime_c_api.h), so an entry is reached by its index. The
// indices and signatures below are those of the entries this file calls.
#include "OrtPeer.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "nnc/ir/DType.h"

namespace fs = std::filesystem;

namespace nnc::tools {

namespace {

using Status = void; // OrtStatus (null means success)

// OrtApi entry indices.
enum : int {
  kGetErrorMessage = 2,
  kCreateEnv = 3,
  kCreateSession = 7,
  kRun = 9,
  kCreateSessionOptions = 10,
  kSetSessionExecutionMode = 13,
  kSetSessionGraphOptimizationLevel = 23,
  kSetIntraOpNumThreads = 24,
  kSetInterOpNumThreads = 25,
  kSessionGetInputCount = 30,
  kSessionGetOutputCount = 31,
  kSessionGetInputName = 36,
  kSessionGetOutputName = 37,
  kCreateTensorWithDataAsOrtValue = 49,
  kGetTensorMutableData = 51,
  kGetTensorElementType = 60,
  kGetDimensionsCount = 61,
  kGetDimensions = 62,
  kGetTensorTypeAndShape = 65,
  kCreateCpuMemoryInfo = 69,
  kAllocatorFree = 76,
  kGetAllocatorWithDefaultOptions = 78,
  kReleaseEnv = 92,
  kReleaseStatus = 93,
  kReleaseMemoryInfo = 94,
  kReleaseSession = 95,
  kReleaseValue = 96,
  kReleaseTensorTypeAndShapeInfo = 99,
  kReleaseSessionOptions = 100,
  kAddSessionConfigEntry = 130,
};
constexpr uint32_t kApiVersion = 14; // every entry above exists from API version 14 on
constexpr int kLoggingWarning = 2;   // ORT_LOGGING_LEVEL_WARNING
constexpr int kEnableAll = 99;       // ORT_ENABLE_ALL
constexpr int kSequential = 0;       // ORT_SEQUENTIAL
constexpr int kArenaAllocator = 1;   // OrtArenaAllocator
constexpr int kMemTypeDefault = 0;   // OrtMemTypeDefault

struct ApiBase {
  const void *(*getApi)(uint32_t version);
  const char *(*getVersionString)();
};

/// The candidates for the library, in search order.
std::vector<std::string> candidates() {
  if (const char *env = std::getenv("NNC_ORT_LIBRARY"); env && *env)
    return {env};
  std::vector<std::string> out = {"libonnxruntime.so.1", "libonnxruntime.so"};
#if defined(__aarch64__)
  const char *arch = "arm64";
#else
  const char *arch = "x64";
#endif
  fs::path rel = fs::path("bench/ort/node_modules/onnxruntime-node/bin/napi-v6/linux") / arch /
                 "libonnxruntime.so.1";
  std::vector<fs::path> roots;
  std::error_code ec;
  roots.push_back(fs::current_path(ec));
  roots.push_back(fs::read_symlink("/proc/self/exe", ec).parent_path());
  for (fs::path root : roots)
    for (; !root.empty(); root = root.parent_path()) {
      out.push_back((root / rel).string());
      if (root == root.parent_path())
        break;
    }
  return out;
}

} // namespace

struct OrtPeer::Api {
  template <typename F> static F fn(const void *const *api, int index) {
    return reinterpret_cast<F>(const_cast<void *>(api[index]));
  }
  /// Turns an OrtStatus into an Error (and releases it).
  static Error check(const void *const *api, Status *s, const char *what) {
    if (!s)
      return Error::success();
    std::string msg = fn<const char *(*)(const Status *)>(api, kGetErrorMessage)(s);
    fn<void (*)(Status *)>(api, kReleaseStatus)(s);
    return makeError("onnxruntime: {}: {}", what, msg);
  }
};

Expected<std::unique_ptr<OrtPeer>> OrtPeer::open(const std::string &modelPath, int threads,
                                                 bool spin) {
  std::unique_ptr<OrtPeer> p(new OrtPeer());
  std::vector<std::string> tried;
  for (const std::string &c : candidates()) {
    if (c.find('/') != std::string::npos && !fs::exists(c)) {
      tried.push_back(c);
      continue;
    }
    if ((p->lib_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      p->path_ = c;
      break;
    }
    tried.push_back(fmt::format("{} ({})", c, dlerror()));
  }
  if (!p->lib_) {
    std::string list;
    for (const std::string &t : tried)
      list += "\n  " + t;
    return makeError("ONNX Runtime is not installed: no libonnxruntime.so found (set "
                     "NNC_ORT_LIBRARY to its path, or `npm install --ignore-scripts "
                     "onnxruntime-node` in bench/ort); tried:{}",
                     list);
  }
  auto getBase = reinterpret_cast<const ApiBase *(*)()>(dlsym(p->lib_, "OrtGetApiBase"));
  if (!getBase)
    return makeError("{}: no OrtGetApiBase symbol: not an ONNX Runtime library", p->path_);
  const ApiBase *base = getBase();
  p->version_ = base->getVersionString();
  p->api_ = static_cast<const void *const *>(base->getApi(kApiVersion));
  if (!p->api_)
    return makeError("{}: ONNX Runtime {} does not provide C API version {}", p->path_,
                     p->version_, kApiVersion);
  const void *const *api = p->api_;
  auto call = [&](Status *s, const char *what) { return Api::check(api, s, what); };
  using A = Api;

  if (Error e = call(A::fn<Status *(*)(int, const char *, void **)>(api, kCreateEnv)(
                         kLoggingWarning, "nnc-bench", &p->env_),
                     "CreateEnv"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void **)>(api, kCreateSessionOptions)(&p->options_),
                     "CreateSessionOptions"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void *, int)>(api, kSetSessionGraphOptimizationLevel)(
                         p->options_, kEnableAll),
                     "SetSessionGraphOptimizationLevel"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void *, int)>(api, kSetSessionExecutionMode)(
                         p->options_, kSequential),
                     "SetSessionExecutionMode"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void *, int)>(api, kSetIntraOpNumThreads)(p->options_,
                                                                                 threads),
                     "SetIntraOpNumThreads"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void *, int)>(api, kSetInterOpNumThreads)(p->options_, 1),
                     "SetInterOpNumThreads"))
    return e;
  if (Error e = call(A::fn<Status *(*)(void *, const char *, const char *)>(
                         api, kAddSessionConfigEntry)(
                         p->options_, "session.intra_op.allow_spinning", spin ? "1" : "0"),
                     "AddSessionConfigEntry"))
    return e;
  if (Error e = call(A::fn<Status *(*)(const void *, const char *, const void *, void **)>(
                         api, kCreateSession)(p->env_, modelPath.c_str(), p->options_,
                                              &p->session_),
                     modelPath.c_str()))
    return e;
  if (Error e = call(A::fn<Status *(*)(int, int, void **)>(api, kCreateCpuMemoryInfo)(
                         kArenaAllocator, kMemTypeDefault, &p->memInfo_),
                     "CreateCpuMemoryInfo"))
    return e;

  void *alloc = nullptr;
  if (Error e = call(A::fn<Status *(*)(void **)>(api, kGetAllocatorWithDefaultOptions)(&alloc),
                     "GetAllocatorWithDefaultOptions"))
    return e;
  for (int output = 0; output < 2; ++output) {
    size_t n = 0;
    if (Error e = call(A::fn<Status *(*)(const void *, size_t *)>(
                           api, output ? kSessionGetOutputCount : kSessionGetInputCount)(
                           p->session_, &n),
                       "SessionGetInputCount"))
      return e;
    for (size_t i = 0; i < n; ++i) {
      char *name = nullptr;
      if (Error e = call(A::fn<Status *(*)(const void *, size_t, void *, char **)>(
                             api, output ? kSessionGetOutputName : kSessionGetInputName)(
                             p->session_, i, alloc, &name),
                         "SessionGetInputName"))
        return e;
      (output ? p->outputNames_ : p->inputNames_).push_back(name);
      if (Error e = call(A::fn<Status *(*)(void *, void *)>(api, kAllocatorFree)(alloc, name),
                         "AllocatorFree"))
        return e;
    }
  }
  for (const std::string &s : p->inputNames_)
    p->inputPtrs_.push_back(s.c_str());
  for (const std::string &s : p->outputNames_)
    p->outputPtrs_.push_back(s.c_str());
  return p;
}

OrtPeer::~OrtPeer() {
  if (api_) {
    if (memInfo_)
      Api::fn<void (*)(void *)>(api_, kReleaseMemoryInfo)(memInfo_);
    if (session_)
      Api::fn<void (*)(void *)>(api_, kReleaseSession)(session_);
    if (options_)
      Api::fn<void (*)(void *)>(api_, kReleaseSessionOptions)(options_);
    if (env_)
      Api::fn<void (*)(void *)>(api_, kReleaseEnv)(env_);
  }
  // The library stays loaded: ONNX Runtime keeps process-wide state (thread-local pools,
  // registered handlers) that unloading would leave dangling.
}

Expected<std::vector<Tensor>> OrtPeer::run(const std::vector<Tensor> &inputs) {
  const void *const *api = api_;
  using A = Api;
  if (inputs.size() != inputNames_.size())
    return makeError("onnxruntime: the session has {} inputs, {} given", inputNames_.size(),
                     inputs.size());
  auto release = A::fn<void (*)(void *)>(api, kReleaseValue);
  std::vector<void *> in(inputs.size(), nullptr), out(outputNames_.size(), nullptr);
  auto cleanup = [&] {
    for (void *v : in)
      if (v)
        release(v);
    for (void *v : out)
      if (v)
        release(v);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &t = inputs[i];
    std::vector<int64_t> shape(t.extents().begin(), t.extents().end());
    if (Error e = A::check(
            api,
            A::fn<Status *(*)(const void *, void *, size_t, const int64_t *, size_t, int,
                              void **)>(api, kCreateTensorWithDataAsOrtValue)(
                memInfo_, const_cast<void *>(t.rawData()), t.byteSize(), shape.data(),
                shape.size(), dtypeToOnnx(t.dtype()), &in[i]),
            inputNames_[i].c_str())) {
      cleanup();
      return e;
    }
  }
  if (Error e = A::check(
          api,
          A::fn<Status *(*)(void *, const void *, const char *const *, const void *const *,
                            size_t, const char *const *, size_t, void **)>(api, kRun)(
              session_, nullptr, inputPtrs_.data(), in.data(), in.size(), outputPtrs_.data(),
              outputPtrs_.size(), out.data()),
          "Run")) {
    cleanup();
    return e;
  }
  std::vector<Tensor> results;
  for (size_t i = 0; i < out.size(); ++i) {
    void *info = nullptr;
    Error e = A::check(api,
                       A::fn<Status *(*)(const void *, void **)>(api, kGetTensorTypeAndShape)(
                           out[i], &info),
                       "GetTensorTypeAndShape");
    int type = 0;
    size_t rank = 0;
    Extents extents;
    if (!e)
      e = A::check(api, A::fn<Status *(*)(const void *, int *)>(api, kGetTensorElementType)(
                            info, &type),
                   "GetTensorElementType");
    if (!e)
      e = A::check(api, A::fn<Status *(*)(const void *, size_t *)>(api, kGetDimensionsCount)(
                            info, &rank),
                   "GetDimensionsCount");
    if (!e) {
      std::vector<int64_t> dims(rank);
      e = A::check(api, A::fn<Status *(*)(const void *, int64_t *, size_t)>(api, kGetDimensions)(
                            info, dims.data(), rank),
                   "GetDimensions");
      extents.assign(dims.begin(), dims.end());
    }
    if (info)
      A::fn<void (*)(void *)>(api, kReleaseTensorTypeAndShapeInfo)(info);
    void *data = nullptr;
    if (!e)
      e = A::check(api, A::fn<Status *(*)(void *, void **)>(api, kGetTensorMutableData)(out[i],
                                                                                        &data),
                   "GetTensorMutableData");
    std::optional<DType> dt = dtypeFromOnnx(type);
    if (!e && !dt)
      e = makeError("onnxruntime: output '{}' has element type {}, which nnc does not hold",
                    outputNames_[i], type);
    if (e) {
      cleanup();
      return e;
    }
    results.push_back(Tensor::fromBytes(*dt, extents, data));
  }
  cleanup();
  return results;
}

} // namespace nnc::tools

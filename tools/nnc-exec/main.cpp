// nnc-exec: runs an artifact (`nnc compile --emit=lib`) on ONNX test data with libnnc_runtime
// alone: no LLVM, no protobuf. ARTIFACT --inputs-dir D --output-dir O [--threads T]
// [--iterations K [--max-seconds S] [--warmup W]] [--info] [--profile]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "nnc/runtime/nnc_runtime.h"
#include "onnx_tensor.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: nnc-exec ARTIFACT --inputs-dir DIR [--output-dir DIR] "
                       "[--threads T] [--iterations K [--max-seconds S] [--warmup W]] [--info] "
                       "[--profile]\n");
  return 2;
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "nnc-exec: error: %s\n", msg.c_str());
  return 1;
}

std::string shapeText(const int64_t *d, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i)
    s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

/// Memory the kernels can write in place: 64-byte aligned.
struct Buffer {
  explicit Buffer(size_t bytes)
      : p(std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64)) {}
  ~Buffer() { std::free(p); }
  Buffer(const Buffer &) = delete;
  Buffer(Buffer &&o) noexcept : p(o.p) { o.p = nullptr; }
  void *p;
};

/// Each kernel's time per run, the longest first, and the sum.
void printProfile(const nnc_model *m) {
  int64_t runs = nnc_profiled_runs(m);
  if (runs <= 0)
    return;
  std::vector<std::pair<double, int>> byTime;
  double total = 0;
  for (int k = 0; k < nnc_num_kernels(m); ++k) {
    double ms = nnc_kernel_ms(m, k) / double(runs);
    byTime.push_back({ms, k});
    total += ms;
  }
  std::sort(byTime.begin(), byTime.end(), [](auto &a, auto &b) { return a.first > b.first; });
  std::printf("nnc-exec: %d kernels, %.3f ms per run in kernels (%lld runs)\n", nnc_num_kernels(m),
              total, static_cast<long long>(runs));
  for (const auto &[ms, k] : byTime)
    std::printf("  %10.4f ms %5.1f%%  %s\n", ms, total > 0 ? 100 * ms / total : 0.0,
                nnc_kernel_name(m, k));
}

} // namespace

int main(int argc, char **argv) {
  std::string artifact, inputsDir, outputDir;
  int threads = 0, iterations = 0, warmup = 0;
  double maxSeconds = 0; // with --iterations: stop once the runs took this long (0: no bound)
  bool info = false, profile = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    const char *v = nullptr;
    if (a == "--inputs-dir" && (v = value()))
      inputsDir = v;
    else if (a == "--output-dir" && (v = value()))
      outputDir = v;
    else if (a == "--threads" && (v = value()))
      threads = std::atoi(v);
    else if (a == "--iterations" && (v = value()))
      iterations = std::atoi(v);
    else if (a == "--warmup" && (v = value()))
      warmup = std::atoi(v);
    else if (a == "--max-seconds" && (v = value()))
      maxSeconds = std::atof(v);
    else if (a == "--info")
      info = true;
    else if (a == "--profile")
      profile = true;
    else if (a == "-h" || a == "--help")
      return usage(), 0;
    else if (!a.empty() && a[0] != '-' && artifact.empty())
      artifact = a;
    else
      return usage();
  }
  if (artifact.empty() || (!info && inputsDir.empty()))
    return usage();
  // dlopen takes a bare name as a library to search for: a path is meant.
  if (artifact.find('/') == std::string::npos)
    artifact = "./" + artifact;
  nnc_model *m = nnc_load_with(artifact.c_str(), profile ? NNC_LOAD_PROFILE : 0);
  if (!m)
    return fail(nnc_last_error());
  int numIn = nnc_num_inputs(m), numOut = nnc_num_outputs(m);
  if (info) {
    std::printf("%s\n", nnc_describe(m));
    for (int i = 0; i < numIn; ++i)
      std::printf("input %d: %s dtype %d %s\n", i, nnc_input_name(m, i), nnc_input_dtype(m, i),
                  shapeText(nnc_input_shape(m, i), nnc_input_rank(m, i)).c_str());
    for (int i = 0; i < numOut; ++i)
      std::printf("output %d: %s dtype %d %s\n", i, nnc_output_name(m, i), nnc_output_dtype(m, i),
                  shapeText(nnc_output_shape(m, i), nnc_output_rank(m, i)).c_str());
    if (inputsDir.empty())
      return nnc_free(m), 0;
  }
  char err[512];
  std::vector<nnc_pb_tensor> inputs(numIn);
  auto cleanup = [&] {
    for (nnc_pb_tensor &t : inputs)
      nnc_pb_free(&t);
    nnc_free(m);
  };
  for (int i = 0; i < numIn; ++i) {
    std::string path = inputsDir + "/input_" + std::to_string(i) + ".pb";
    if (nnc_pb_read(path.c_str(), &inputs[i], err, sizeof err) != 0)
      return cleanup(), fail(err);
    if (inputs[i].data_type != nnc_input_dtype(m, i))
      return cleanup(),
             fail(path + ": data_type " + std::to_string(inputs[i].data_type) + ", but input '" +
                  nnc_input_name(m, i) + "' takes " + std::to_string(nnc_input_dtype(m, i)));
    if (nnc_bind_input(m, i, inputs[i].data, inputs[i].rank, inputs[i].dims) != 0)
      return cleanup(), fail(path + ": " + nnc_last_error());
  }
  std::vector<Buffer> outputs;
  for (int i = 0; i < numOut; ++i) {
    outputs.emplace_back(static_cast<size_t>(nnc_output_bytes(m, i)));
    if (!outputs.back().p ||
        nnc_bind_output(m, i, outputs.back().p, static_cast<size_t>(nnc_output_bytes(m, i))) != 0)
      return cleanup(), fail(nnc_last_error());
  }
  // Untimed runs first (a device builds and uploads lazily; caches warm).
  for (int k = 0; k < warmup; ++k)
    if (nnc_run(m, threads) != 0)
      return cleanup(), fail(nnc_last_error());
  std::vector<double> ms;
  double spentMs = 0;
  for (int k = 0; k < std::max(1, iterations); ++k) {
    auto t = std::chrono::steady_clock::now();
    if (nnc_run(m, threads) != 0)
      return cleanup(), fail(nnc_last_error());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    spentMs += ms.back();
    if (maxSeconds > 0 && ms.size() >= 2 && spentMs > 1000 * maxSeconds)
      break;
  }
  if (iterations > 0) {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::printf("nnc-exec: %zu runs, median %.3f ms, min %.3f ms, first %.3f ms\n", n, median,
                sorted.front(), ms.front());
  }
  if (profile)
    printProfile(m);
  if (!outputDir.empty()) {
    mkdir(outputDir.c_str(), 0777);
    for (int i = 0; i < numOut; ++i) {
      std::string path = outputDir + "/output_" + std::to_string(i) + ".pb";
      if (nnc_pb_write(path.c_str(), nnc_output_name(m, i), nnc_output_dtype(m, i),
                       nnc_output_rank(m, i), nnc_output_shape(m, i), outputs[i].p,
                       static_cast<size_t>(nnc_output_bytes(m, i)), err, sizeof err) != 0)
        return cleanup(), fail(err);
    }
  }
  cleanup();
  return 0;
}

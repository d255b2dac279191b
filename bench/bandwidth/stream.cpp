// nnc_stream: the machine's memory bandwidth, STREAM-style (copy, scale, add, triad on f32
// arrays), with ordinary stores and with non-temporal (streaming) stores, at a given thread
// count. Bytes are counted as STREAM does (each array read or written once; the
// write-allocate read of an ordinary store is not counted), so a kernel that reads one array
// and writes one (copy, scale) is directly comparable with an elementwise op chain that reads
// one input and writes one output.
//
//   nnc_stream [--elements N] [--threads T] [--reps R] [--json]
//
// Each kernel runs R times; the figures are the median and the best rate. One JSON line per
// kernel with --json. A benchmark for bench/bandwidth.py, not a test.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Range {
  int64_t begin, end;
};

/// The part of [0, n) thread t of T works on, split on 64-byte lines.
Range share(int64_t n, int t, int threads) {
  int64_t lines = (n + 15) / 16;
  int64_t per = (lines + threads - 1) / threads;
  int64_t b = std::min(n, int64_t(t) * per * 16), e = std::min(n, (int64_t(t) + 1) * per * 16);
  return {b, e};
}

enum class Kernel { Copy, Scale, Add, Triad };
const char *kernelName(Kernel k) {
  switch (k) {
  case Kernel::Copy: return "copy";
  case Kernel::Scale: return "scale";
  case Kernel::Add: return "add";
  case Kernel::Triad: return "triad";
  }
  return "?";
}
int arraysTouched(Kernel k) { return k == Kernel::Copy || k == Kernel::Scale ? 2 : 3; }

/// One thread's part of a kernel: dst = f(x, y). Vector loop with ordinary or non-temporal
/// stores (16 floats = one cache line per store), scalar head and tail.
template <bool NT>
void runPart(Kernel k, float *dst, const float *x, const float *y, float q, Range r) {
  int64_t i = r.begin;
  auto scalar = [&](int64_t j) {
    switch (k) {
    case Kernel::Copy: dst[j] = x[j]; break;
    case Kernel::Scale: dst[j] = q * x[j]; break;
    case Kernel::Add: dst[j] = x[j] + y[j]; break;
    case Kernel::Triad: dst[j] = x[j] + q * y[j]; break;
    }
  };
  for (; i < r.end && (reinterpret_cast<uintptr_t>(dst + i) & 63); ++i)
    scalar(i);
#if defined(__AVX512F__)
  __m512 vq = _mm512_set1_ps(q);
  for (; i + 16 <= r.end; i += 16) {
    __m512 v;
    switch (k) {
    case Kernel::Copy: v = _mm512_loadu_ps(x + i); break;
    case Kernel::Scale: v = _mm512_mul_ps(vq, _mm512_loadu_ps(x + i)); break;
    case Kernel::Add: v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)); break;
    default: v = _mm512_fmadd_ps(vq, _mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)); break;
    }
    if (NT)
      _mm512_stream_ps(dst + i, v);
    else
      _mm512_store_ps(dst + i, v);
  }
#elif defined(__AVX__)
  __m256 vq = _mm256_set1_ps(q);
  for (; i + 8 <= r.end; i += 8) {
    __m256 v;
    switch (k) {
    case Kernel::Copy: v = _mm256_loadu_ps(x + i); break;
    case Kernel::Scale: v = _mm256_mul_ps(vq, _mm256_loadu_ps(x + i)); break;
    case Kernel::Add: v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)); break;
    default:
      v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_mul_ps(vq, _mm256_loadu_ps(y + i)));
      break;
    }
    if (NT)
      _mm256_stream_ps(dst + i, v);
    else
      _mm256_store_ps(dst + i, v);
  }
#endif
  for (; i < r.end; ++i)
    scalar(i);
  if (NT)
    _mm_sfence();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int usage(const char *msg) {
  if (msg)
    std::fprintf(stderr, "nnc_stream: %s\n", msg);
  std::fprintf(stderr, "usage: nnc_stream [--elements N] [--threads T] [--reps R] [--json]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int64_t n = int64_t(1) << 24;
  int threads = 1, reps = 10;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--json") {
      json = true;
    } else if (a == "--elements" || a == "--threads" || a == "--reps") {
      const char *v = value();
      if (!v)
        return usage("option needs a value");
      char *end = nullptr;
      long long x = std::strtoll(v, &end, 10);
      if (*end || x < 1)
        return usage("expected a positive integer");
      if (a == "--elements")
        n = x;
      else if (a == "--threads")
        threads = static_cast<int>(x);
      else
        reps = static_cast<int>(x);
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  float *a = static_cast<float *>(std::aligned_alloc(64, bytes));
  float *b = static_cast<float *>(std::aligned_alloc(64, bytes));
  float *c = static_cast<float *>(std::aligned_alloc(64, bytes));
  if (!a || !b || !c)
    return usage("out of memory");
  // First touch by the threads that use the pages.
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        Range r = share(n, t, threads);
        for (int64_t i = r.begin; i < r.end; ++i) {
          a[i] = 1.0f;
          b[i] = 2.0f;
          c[i] = 0.0f;
        }
      });
    for (std::thread &t : ts)
      t.join();
  }
  const float q = 3.0f;
  for (bool nt : {false, true}) {
    for (Kernel k : {Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad}) {
      float *dst = k == Kernel::Copy ? c : k == Kernel::Scale ? b : k == Kernel::Add ? c : a;
      const float *x = k == Kernel::Copy ? a : k == Kernel::Scale ? c : k == Kernel::Add ? a : b;
      const float *y = k == Kernel::Add ? b : c;
      std::vector<double> secs;
      for (int rep = 0; rep < reps + 1; ++rep) { // the first one is a warmup
        auto t0 = Clock::now();
        std::vector<std::thread> ts;
        for (int t = 1; t < threads; ++t)
          ts.emplace_back([&, t] {
            Range r = share(n, t, threads);
            nt ? runPart<true>(k, dst, x, y, q, r) : runPart<false>(k, dst, x, y, q, r);
          });
        Range r = share(n, 0, threads);
        nt ? runPart<true>(k, dst, x, y, q, r) : runPart<false>(k, dst, x, y, q, r);
        for (std::thread &t : ts)
          t.join();
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (rep > 0)
          secs.push_back(s);
      }
      double moved = double(arraysTouched(k)) * double(n) * sizeof(float);
      double med = median(secs), best = *std::min_element(secs.begin(), secs.end());
      if (json)
        std::printf("{\"kernel\": \"%s\", \"stores\": \"%s\", \"threads\": %d, \"elements\": "
                    "%lld, \"bytes\": %.0f, \"median_ms\": %.4f, \"best_ms\": %.4f, "
                    "\"median_gbs\": %.3f, \"best_gbs\": %.3f}\n",
                    kernelName(k), nt ? "nontemporal" : "ordinary", threads,
                    static_cast<long long>(n), moved, med * 1e3, best * 1e3, moved / med / 1e9,
                    moved / best / 1e9);
      else
        std::printf("%-6s %-11s %d thread(s): median %8.3f GB/s, best %8.3f GB/s\n",
                    kernelName(k), nt ? "nontemporal" : "ordinary", threads, moved / med / 1e9,
                    moved / best / 1e9);
    }
  }
  // Keep the arrays' contents observable.
  volatile float sink = a[n / 2] + b[n / 3] + c[n / 5];
  (void)sink;
  std::free(a);
  std::free(b);
  std::free(c);
  return 0;
}

// `nnc bench --profile` on the CPU (CpuProfile.h).
#include "CpuProfile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "CommandUtil.h"
#include "nnc/driver/Driver.h"
#include "nnc/frontend/GraphBuilder.h"
#include "nnc/runtime/TuningCache.h"

namespace fs = std::filesystem;

namespace nnc::tools {

namespace {

/// The best wall time of `iterations` runs of `exe` on `inputs`, after `warmup` runs.
Expected<double> bestMs(Executable &exe, const std::vector<Tensor> &inputs, int warmup,
                        int iterations) {
  double best = -1;
  for (int i = 0; i < warmup + iterations; ++i) {
    auto t = Clock::now();
    NNC_TRY(exe.run(inputs).takeError());
    double ms = msSince(t);
    if (i >= warmup && (best < 0 || ms < best))
      best = ms;
  }
  return best;
}

Expected<std::unique_ptr<Executable>> compileBuilt(GraphBuilder &b, int threads,
                                                   const CpuTarget &cpu) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, b.build());
  NNC_TRY(driver::optimize(*g, cpu));
  CpuOptions opts(cpu);
  opts.threads = threads;
  return Executable::compile(*g, opts);
}

Expected<MachinePeak> measurePeak(int threads, const CpuTarget &cpu) {
  MachinePeak peak;
  // GEMM: [512, 512] x a constant [512, 512], so the weight is packed once at compile time.
  const int64_t n = 512;
  const double work = 2.0 * double(n * n * n);
  Tensor w = Tensor::zeros(DType::F32, {n, n}), a = Tensor::zeros(DType::F32, {n, n});
  Tensor w8 = Tensor::zeros(DType::I8, {n, n}), a8 = Tensor::zeros(DType::U8, {n, n});
  uint32_t state = 12345;
  for (int64_t i = 0; i < n * n; ++i) {
    state = state * 1664525u + 1013904223u;
    w.data<float>()[i] = float(int(state >> 9) % 2001 - 1000) * 1e-3f;
    a.data<float>()[i] = float(int(state >> 13) % 2001 - 1000) * 1e-3f;
    w8.data<int8_t>()[i] = static_cast<int8_t>(int(state >> 9) % 255 - 127);
    a8.data<uint8_t>()[i] = static_cast<uint8_t>(state >> 24);
  }
  CpuTarget f32 = cpu;
  f32.precision = CpuTarget::Precision::F32;
  {
    GraphBuilder b("peak_gemm");
    Var x = b.input("x", DType::F32, {n, n});
    b.output(matmul(x, b.constant(w)));
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, compileBuilt(b, threads, f32));
    NNC_ASSIGN_OR_RETURN(double ms, bestMs(*exe, {a}, 3, 20));
    peak.gflops = work / (ms * 1e6);
  }
  // The same product with bf16 operands, where the target has the bf16 dot product.
  if (CpuTarget bf16 = cpu; !bf16.setPrecision("bf16")) {
    GraphBuilder b("peak_gemm_bf16");
    Var x = b.input("x", DType::F32, {n, n});
    b.output(matmul(x, b.constant(w)));
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, compileBuilt(b, threads, bf16));
    NNC_ASSIGN_OR_RETURN(double ms, bestMs(*exe, {a}, 3, 20));
    peak.gflopsBf16 = work / (ms * 1e6);
  }
  {
    GraphBuilder b("peak_gemm_int8");
    Var x = b.input("x", DType::U8, {n, n});
    b.output(b.op(OpKind::MatMulInteger, {x, b.constant(w8)}));
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, compileBuilt(b, threads, f32));
    NNC_ASSIGN_OR_RETURN(double ms, bestMs(*exe, {a8}, 3, 20));
    peak.gopsInt8 = work / (ms * 1e6);
  }
  // Memory: y = x * 1.5 + 0.25 over 16M floats, one fused kernel. The input is written
  // first: a fresh zeroed mapping's untouched pages all map the kernel's one zero page, whose
  // reads hit the caches (this measured twice the memory's bandwidth).
  {
    const int64_t count = int64_t(1) << 24;
    GraphBuilder b("peak_bandwidth");
    Var x = b.input("x", DType::F32, {count});
    b.output(x * 1.5 + 0.25);
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, compileBuilt(b, threads, cpu));
    Tensor in = Tensor::zeros(DType::F32, {count});
    std::fill(in.data<float>(), in.data<float>() + count, 1.0f);
    NNC_ASSIGN_OR_RETURN(double ms, bestMs(*exe, {in}, 2, 10));
    peak.gbps = 2.0 * double(count) * sizeof(float) / (ms * 1e6);
  }
  return peak;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", int(c));
    else
      out += c;
  }
  return out + "\"";
}

std::string jsonStrings(const std::vector<std::string> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + jsonString(v[i]);
  return out + "]";
}

/// GFLOP/s where the work is known, else GB/s of the parameters, and the fraction of the
/// matching peak.
struct Rate {
  double value = 0, fraction = 0;
  bool flops = false;
};

Rate rateOf(const KernelProfile &k, const MachinePeak &p) {
  Rate r;
  if (k.ms <= 0)
    return r;
  r.flops = k.flops > 0;
  r.value = r.flops ? k.flops / (k.ms * 1e6) : double(k.bytes) / (k.ms * 1e6);
  double peak = r.flops ? p.gemmPeak(k.flopsElems) : p.gbps;
  r.fraction = peak > 0 ? r.value / peak : 0;
  return r;
}

/// The unit of a kernel's rate: integer work is counted in operations (2 per multiply-add).
const char *rateUnit(const KernelProfile &k, const Rate &r) {
  if (!r.flops)
    return "GB/s   ";
  return k.flopsElems == kir::GemmElems::U8S8S32 ? "GOP/s  " : "GFLOP/s";
}

/// The JSON key of a kernel's rate.
const char *rateKey(const KernelProfile &k, const Rate &r) {
  if (!r.flops)
    return "gbps";
  return k.flopsElems == kir::GemmElems::U8S8S32 ? "gops" : "gflops";
}

std::string rateText(const KernelProfile &k, const Rate &r) {
  return fmt::format("{:8.1f} {}", r.value, rateUnit(k, r));
}

/// A GEMM kernel's roofline: the time its parameters' bytes (its weight, activations and
/// result, each moved at least once) take at the measured memory bandwidth, and its flops at
/// the measured GEMM peak; the larger bounds the kernel. Where memory bounds a GEMM (few rows:
/// decode-time matmuls) its bytes are its weight's but for a few percent.
struct Roofline {
  bool known = false;
  double memoryMs = 0, flopsMs = 0;
  bool memoryBound = false;
  double boundMs() const { return memoryBound ? memoryMs : flopsMs; }
};

Roofline rooflineOf(const KernelProfile &k, const MachinePeak &p) {
  Roofline r;
  double gemm = p.gemmPeak(k.flopsElems);
  if (k.flops <= 0 || gemm <= 0 || p.gbps <= 0)
    return r;
  r.known = true;
  r.memoryMs = double(k.bytes) / (p.gbps * 1e6);
  r.flopsMs = k.flops / (gemm * 1e6);
  r.memoryBound = r.memoryMs > r.flopsMs;
  return r;
}

std::string rooflineText(const KernelProfile &k, const Roofline &r) {
  if (!r.known)
    return std::string(37, ' ');
  return fmt::format("{:8.3f} {:8.3f} {}  {:5.2f}x", r.memoryMs, r.flopsMs,
                     r.memoryBound ? "memory " : "compute", k.ms / std::max(r.boundMs(), 1e-9));
}

} // namespace

namespace {

/// The measurement's version in machine-peak.txt: 2 reads a written input for the bandwidth
/// (version 1's zeroed mapping overstated it).
constexpr int kPeakVersion = 2;

/// Where the peaks of this machine are kept, and the key of this device and thread count.
struct PeakKey {
  std::string file, fingerprint;
  int threads = 1;
};

PeakKey peakKey(int threads, const CpuTarget &cpu) {
  PeakKey k;
  k.threads = effectiveThreads(threads);
  // One entry per machine, whatever precision this run compiles for: it holds every peak.
  CpuTarget machine = cpu;
  machine.precision = CpuTarget::Precision::F32;
  k.fingerprint = cpuDeviceFingerprint(k.threads, machine);
  std::string objects = CodegenOptions::defaultObjectCacheDir();
  k.file = objects.empty() ? "" : (fs::path(objects).parent_path() / "machine-peak.txt").string();
  return k;
}

std::optional<MachinePeak> readPeak(const PeakKey &k) {
  if (k.file.empty())
    return std::nullopt;
  // One line per fingerprint: "GFLOPS GBPS GOPS_INT8 GFLOPS_BF16 VERSION<tab>FINGERPRINT" (a
  // line of an older nnc, with fewer figures or another version of the measurement, is
  // measured again).
  std::ifstream in(k.file);
  std::string line;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos || line.substr(tab + 1) != k.fingerprint)
      continue;
    std::istringstream fields(line.substr(0, tab));
    MachinePeak p;
    int version = 0;
    if (fields >> p.gflops >> p.gbps >> p.gopsInt8 >> p.gflopsBf16 >> version &&
        version == kPeakVersion && p.gflops > 0 && p.gbps > 0 && p.gopsInt8 > 0 &&
        p.gflopsBf16 >= 0) {
      p.cacheFile = k.file;
      p.fromCache = true;
      return p;
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<MachinePeak> cachedMachinePeak(int threads, const CpuTarget &cpu) {
  return readPeak(peakKey(threads, cpu));
}

Expected<MachinePeak> machinePeak(int threads, const CpuTarget &cpu) {
  PeakKey k = peakKey(threads, cpu);
  if (std::optional<MachinePeak> p = readPeak(k))
    return *p;
  NNC_ASSIGN_OR_RETURN(MachinePeak p, measurePeak(k.threads, cpu));
  if (!k.file.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(k.file).parent_path(), ec);
    std::ofstream out(k.file, std::ios::app);
    out << fmt::format("{:.3f} {:.3f} {:.3f} {:.3f} {}\t{}\n", p.gflops, p.gbps, p.gopsInt8,
                       p.gflopsBf16, kPeakVersion, k.fingerprint);
    if (out)
      p.cacheFile = k.file;
  }
  return p;
}

std::string bf16SpeedNote(const MachinePeak &peak) {
  if (peak.gflopsBf16 <= 0 || peak.gflopsBf16 >= peak.gflops)
    return "";
  return fmt::format("note: on this CPU nnc's bf16 GEMM peaks at {:.1f} GFLOP/s, below its f32 "
                     "peak of {:.1f} (its bf16 dot products are slower than its f32 FMAs): "
                     "--precision bf16 costs accuracy without a speed-up here (peaks measured by "
                     "nnc's own kernels{})",
                     peak.gflopsBf16, peak.gflops,
                     peak.cacheFile.empty() ? "" : ", kept in " + peak.cacheFile);
}

void warnIfBf16IsSlower(const Target &target, int threads) {
  if (target.kind != Target::Cpu || target.cpu.precision != CpuTarget::Precision::BF16)
    return;
  if (std::optional<MachinePeak> p = cachedMachinePeak(threads, target.cpu))
    if (std::string note = bf16SpeedNote(*p); !note.empty())
      std::cerr << "nnc: " << note << "\n";
}

ProfileReport makeProfileReport(const Executable &exe, double medianMs, const MachinePeak &peak) {
  ProfileReport r;
  r.kernels = exe.kernelProfile();
  r.runs = exe.profiledRuns();
  r.medianMs = medianMs;
  r.peak = peak;
  for (const KernelProfile &k : r.kernels)
    r.kernelSumMs += k.ms;
  std::stable_sort(r.kernels.begin(), r.kernels.end(),
                   [](const KernelProfile &a, const KernelProfile &b) { return a.ms > b.ms; });
  return r;
}

std::string profileTable(const ProfileReport &r, size_t limit) {
  std::string out = fmt::format(
      "profile on cpu, {} runs: {} kernels take {:.3f} ms per run, {:.1f}% of the median "
      "{:.3f} ms\n",
      r.runs, r.kernels.size(), r.kernelSumMs,
      r.medianMs > 0 ? 100 * r.kernelSumMs / r.medianMs : 0.0, r.medianMs);
  out += fmt::format("peak of this machine (nnc's own kernels{}): GEMM {:.1f} GFLOP/s f32, {:.1f} "
                     "GOP/s u8 x s8, {}; memory {:.1f} GB/s\n",
                     r.peak.cacheFile.empty() ? "" : ", kept in " + r.peak.cacheFile, r.peak.gflops,
                     r.peak.gopsInt8,
                     r.peak.gflopsBf16 > 0 ? fmt::format("{:.1f} GFLOP/s bf16", r.peak.gflopsBf16)
                                           : std::string("no bf16 dot product"),
                     r.peak.gbps);
  out += "GEMMs' roofline: memory = their parameters' bytes (weights, activations, result) at "
         "the memory peak, flops = their work at the GEMM peak of their operands (f32, u8 x s8 "
         "or bf16); the larger is the bound, x = time / bound\n";
  out += "        ms  share             rate  of peak    memory    flops  bound        x  "
         "kernel  [nodes]\n";
  size_t n = limit == 0 ? r.kernels.size() : std::min(limit, r.kernels.size());
  for (size_t i = 0; i < n; ++i) {
    const KernelProfile &k = r.kernels[i];
    Rate rate = rateOf(k, r.peak);
    out += fmt::format("  {:8.3f} {:5.1f}%  {}  {:6.1f}%  {}  {}  [{}]\n", k.ms,
                       r.kernelSumMs > 0 ? 100 * k.ms / r.kernelSumMs : 0.0, rateText(k, rate),
                       100 * rate.fraction, rooflineText(k, rooflineOf(k, r.peak)), k.name,
                       fmt::join(k.sources, ", "));
  }
  if (n < r.kernels.size())
    out += fmt::format("  ... {} more kernels (--json lists every one)\n", r.kernels.size() - n);
  return out;
}

std::string profileJson(const ProfileReport &r) {
  std::string ks;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelProfile &k = r.kernels[i];
    Rate rate = rateOf(k, r.peak);
    Roofline roof = rooflineOf(k, r.peak);
    std::string roofJson =
        roof.known ? fmt::format(", \"roofline\": {{\"memory_ms\": {:.6f}, \"flops_ms\": "
                                 "{:.6f}, \"bound\": \"{}\", \"over_bound\": {:.4f}}}",
                                 roof.memoryMs, roof.flopsMs,
                                 roof.memoryBound ? "memory" : "compute",
                                 k.ms / std::max(roof.boundMs(), 1e-9))
                   : std::string();
    ks += fmt::format("{}{{\"name\": {}, \"sources\": {}, \"ms\": {:.6f}, \"share\": {:.5f}, "
                      "\"flops\": {:.0f}, \"operands\": \"{}\", \"bytes\": {}, \"{}\": {:.3f}, "
                      "\"peak_fraction\": {:.4f}{}}}",
                      i ? ", " : "", jsonString(k.name), jsonStrings(k.sources), k.ms,
                      r.kernelSumMs > 0 ? k.ms / r.kernelSumMs : 0.0, k.flops,
                      kir::gemmElemsName(k.flopsElems), k.bytes, rateKey(k, rate), rate.value,
                      rate.fraction, roofJson);
  }
  return fmt::format("{{\"runs\": {}, \"kernel_sum_ms\": {:.6f}, \"median_ms\": {:.6f}, "
                     "\"peak_gflops\": {:.3f}, \"peak_gops_int8\": {:.3f}, \"peak_gflops_bf16\": "
                     "{:.3f}, \"peak_gbps\": {:.3f}, \"kernels\": [{}]}}",
                     r.runs, r.kernelSumMs, r.medianMs, r.peak.gflops, r.peak.gopsInt8,
                     r.peak.gflopsBf16, r.peak.gbps, ks);
}

std::string profileTrace(const ProfileReport &r, const Executable &exe) {
  std::string events;
  double ts = 0; // microseconds
  for (const KernelProfile &k : exe.kernelProfile()) {
    Rate rate = rateOf(k, r.peak);
    events += fmt::format("{}{{\"name\": {}, \"cat\": \"kernel\", \"ph\": \"X\", \"ts\": {:.3f}, "
                          "\"dur\": {:.3f}, \"pid\": 1, \"tid\": 1, \"args\": {{\"nodes\": {}, "
                          "\"{}\": {:.3f}, \"peak_fraction\": {:.4f}}}}}",
                          events.empty() ? "" : ",\n  ", jsonString(k.name), ts, k.ms * 1e3,
                          jsonStrings(k.sources), rateKey(k, rate), rate.value,
                          rate.fraction);
    ts += k.ms * 1e3;
  }
  return fmt::format("{{\"displayTimeUnit\": \"ms\", \"otherData\": {{\"what\": \"nnc: each "
                     "kernel's mean over {} profiled runs, in launch order\"}},\n"
                     "\"traceEvents\": [\n  {}\n]}}\n",
                     r.runs, events);
}

} // namespace nnc::tools

// `nnc bench --profile` on the CPU: each kernel's share of the run with the graph nodes it
// computes and the rate it reached against this machine's peak (measured by nnc once per
// device fingerprint and cached), as a table, as JSON, and as a Chrome trace.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nnc/ir/Target.h"
#include "nnc/runtime/Executable.h"

namespace nnc::tools {

/// What this machine reaches at `threads` threads, measured with nnc's own kernels: the
/// GFLOP/s of a 512 x 512 x 512 f32 matmul by a constant weight, the same product's GOP/s
/// as matmul_integer (u8 x a constant s8, i32 sums: VNNI or widened multiply-adds, as the
/// target has them) and its GFLOP/s with bf16 operands (0 where the target has no bf16 dot
/// product), and the GB/s of a fused elementwise kernel over 16M floats (64 MiB read, 64 MiB
/// written). `cacheFile` is where the figures were kept.
struct MachinePeak {
  double gflops = 0, gbps = 0, gopsInt8 = 0, gflopsBf16 = 0;
  std::string cacheFile;
  bool fromCache = false;
  /// The GEMM peak for work on these operands (0: not measured for this target).
  double gemmPeak(kir::GemmElems e) const {
    return e == kir::GemmElems::U8S8S32 ? gopsInt8 : e == kir::GemmElems::BF16 ? gflopsBf16 : gflops;
  }
};

/// The peak of this device fingerprint and thread count, whatever `cpu`'s precision (each
/// kernel is rated against the peak of its own operands): read from the cache, else measured
/// (a few seconds) and stored.
Expected<MachinePeak> machinePeak(int threads, const CpuTarget &cpu);
/// The peak kept for this device fingerprint and thread count, if one was measured before
/// (never measures).
std::optional<MachinePeak> cachedMachinePeak(int threads, const CpuTarget &cpu);
/// For --precision bf16: a note where nnc's bf16 GEMM peak on this machine is below its f32
/// one (the bf16 dot products slower than the f32 FMAs, as on Intel's AVX512-BF16 without
/// AMX), saying that bf16 gives no speed-up there; empty otherwise.
std::string bf16SpeedNote(const MachinePeak &peak);
/// Prints bf16SpeedNote on stderr for a CPU target whose code is bf16 (--precision bf16) when
/// the machine's peaks at `threads` threads are kept (it measures nothing).
void warnIfBf16IsSlower(const Target &target, int threads);

/// The profiled kernels, worst first, with shares of `medianMs` and rates.
struct ProfileReport {
  std::vector<KernelProfile> kernels; ///< Worst first.
  int64_t runs = 0;
  double kernelSumMs = 0, medianMs = 0;
  MachinePeak peak;
};

ProfileReport makeProfileReport(const Executable &exe, double medianMs, const MachinePeak &peak);
/// A table for the terminal (the `limit` worst kernels; 0: all).
std::string profileTable(const ProfileReport &r, size_t limit = 30);
/// A JSON object: runs, sums, peaks and every kernel.
std::string profileJson(const ProfileReport &r);
/// A Chrome trace (chrome://tracing, Perfetto): the kernels of one mean run, end to end in
/// launch order, each with its sources and rate.
std::string profileTrace(const ProfileReport &r, const Executable &exe);

} // namespace nnc::tools

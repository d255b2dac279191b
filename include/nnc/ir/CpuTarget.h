// The CPU that code is generated for: its ISA level, vector width and register budget, the
// extensions later work may use, and the cache sizes the cost models read.
//
// Made once where the target is made (nnc::Target, ir/Target.h: from --cpu, else
// CpuTarget::fromEnvironment(): $NNC_CPU or the host's features) and handed down:
// PassContext::cpu to the passes, LowerOptions::cpu to lowering and the tuning spaces,
// CodegenOptions::cpu to the LLVM emitter and JIT. No header defaults to the host: nothing
// below the entry points asks it. Every choice comes from features, never from a CPU model
// name: LLVM's tuning for a model name (e.g. "prefer 256-bit vectors" on AVX-512 Intel parts)
// is overridden by the vector width stated here on every emitted function.
#pragma once

#include <cstdint>
#include <string>

#include "nnc/support/Error.h"

namespace nnc {

struct CpuTarget {
  /// x86-64 micro-architecture levels (the psABI's): SSE2; AVX2 + FMA + BMI2 (x86-64-v3);
  /// AVX-512 F/BW/DQ/VL/CD (x86-64-v4).
  enum class Level { X86_64, V3, V4 };

  Level level = Level::X86_64;
  /// True for the host itself: the generated code may use every feature the host has beyond
  /// the level (LLVM's host feature list), not only the level's.
  bool native = false;
  int vectorBits = 128;     ///< The widest vector registers used.
  int vectorRegisters = 16; ///< Architectural vector registers at that width.
  /// Extensions beyond the level: int8 dot products (AVX512-VNNI; AVX-VNNI, their VEX form
  /// on 256-bit vectors), bf16 dot products and tile matrix units (noted for later work).
  bool avx512vnni = false, avxvnni = false, avx512bf16 = false, amx = false;
  /// The precision of matmul operands in the generated code (--precision): f32, or bf16
  /// (bf16): a constant weight is packed as bf16 at compile time, the other operand rounded to
  /// bf16 (nearest even) as it is packed, and the products summed in f32 by the bf16 dot
  /// product (AVX512-BF16's vdpbf16ps); everything else stays f32. A code-generation choice,
  /// not a property of the machine: str() names it, so tuned configs and cached objects of
  /// the two precisions stay apart.
  enum class Precision { F32, BF16 };
  Precision precision = Precision::F32;
  /// Sets `precision` from its option value, "fp32" or "bf16"; an error names the option and
  /// what this target lacks for bf16 (AVX512-BF16 on 512-bit vectors).
  Error setPrecision(const std::string &name);
  /// "fp32" or "bf16".
  const char *precisionName() const { return precision == Precision::BF16 ? "bf16" : "fp32"; }
  /// Under bf16, blocked convs of 16-lane blocks run bf16 tiles (pack-gemm-weights makes
  /// them; twice the f32 multiply-adds per instruction).
  bool bf16Convs() const {
    return precision == Precision::BF16 && avx512bf16 && vectorBits >= 512;
  }
  /// The widest int8 dot-product instruction (vpdpbusd) the integer GEMM tiles may use, in
  /// bits: 512 (AVX512-VNNI on 512-bit vectors), 256 (AVX-VNNI, or AVX512-VNNI on 256-bit
  /// vectors), or 0 (none: widened 16-bit multiply-adds instead).
  int int8DotBits() const {
    if (avx512vnni && vectorBits >= 512)
      return 512;
    return (avx512vnni || avxvnni) && vectorBits >= 256 ? 256 : 0;
  }
  /// The columns of an integer GEMM tile's B panel: two vectors of i32 lanes with a dot
  /// product; one without (its widened multiply-adds take two accumulators per vector).
  int64_t int8PanelWidth() const {
    int dot = int8DotBits();
    return dot ? 2 * dot / 32 : vectorBits / 32;
  }
  /// Per-core data cache sizes (L1d, L2) and the last-level cache as thresholds use it, each
  /// kept within sane bounds whatever sysfs says (a VM may report a socket's or an invented
  /// cache).
  int64_t l1dBytes = 32 << 10, l2Bytes = 1 << 20, l3Bytes = 8 << 20;
  /// Results of at least this many bytes are written with non-temporal stores (0: never).
  int64_t streamingStoreBytes = 8 << 20;

  /// The LLVM target features beyond the level's own (LLVM's CPU is levelName()): the noted
  /// extensions a native target has ("+avx512vnni,+avx512bf16"), else "".
  std::string llvmFeatures() const;
  /// f32 lanes of one vector register.
  int64_t f32Lanes() const { return vectorBits / 32; }
  /// "x86-64", "x86-64-v3", "x86-64-v4".
  std::string levelName() const;
  /// One line for `nnc devices`, cache keys and notes: "x86-64-v4 native (512-bit vectors,
  /// 32 registers; avx512-vnni) L1d 48K L2 1M L3 32M" (" precision bf16" appended under
  /// --precision bf16).
  std::string str() const;

  /// A target at `level` with the host's cache sizes (for any host: cross-compiling; tests
  /// that pin lowering decisions set their own caches, tests/unit/PinnedTarget.h).
  static CpuTarget forLevel(Level level);
  /// The host: its highest level and extensions, detected once (cpuid and the OS's saved
  /// register state), with its caches.
  static const CpuTarget &host();
  /// "native", "x86-64-v3" or "x86-64-v4" ("x86-64" for the SSE2 baseline). An error names
  /// the choices, or, when the code is to run here (`runsHere`), the features this host lacks
  /// for the level asked; code that is only written out (nnc compile, inspect) may be for any
  /// level.
  static Expected<CpuTarget> parse(const std::string &name, bool runsHere = true);
  /// parse($NNC_CPU) when set, else host().
  static Expected<CpuTarget> fromEnvironment(bool runsHere = true);
  /// The host's hardware threads (at least 1), probed once: what "all cores" means for thread
  /// pools, parallel compiles and tuning fingerprints.
  static int hostCores();
  /// The host's model name as the OS reports it (/proc/cpuinfo's "model name"), for people
  /// and tuning fingerprints: nothing is decided from it.
  static std::string hostModelName();

  bool operator==(const CpuTarget &o) const;
};

} // namespace nnc

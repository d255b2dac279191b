// Ahead-of-time artifacts: a compiled model written as a shared library (lib<name>.so) with a
// C header (<name>.h), run by libnnc_runtime (include/nnc/runtime/nnc_runtime.h) without the
// compiler.
#pragma once

#include <memory>
#include <string>

#include "nnc/codegen/Tuning.h"
#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/GpuTarget.h"
#include "nnc/ir/Graph.h"
#include "nnc/support/Error.h"

namespace nnc {

struct ArtifactOptions {
  /// No default target: the caller hands down the CPU its target is for.
  explicit ArtifactOptions(CpuTarget target) : cpu(std::move(target)) {}
  std::string dir;  ///< Where lib<name>.so and <name>.h go (created if missing).
  std::string name; ///< [A-Za-z0-9_]+.
  CpuTarget cpu;    ///< What the CPU code (or an OpenCL artifact's host side) is for.
  /// Set: the artifact carries OpenCL C for this device instead of CPU code.
  const GpuTarget *gpu = nullptr;
  /// Tuned configs of tunable CPU kernels (null: heuristic defaults).
  const tuning::ConfigSource *tuning = nullptr;
  /// A line on what the artifact was built from (kept in it, shown by nnc-exec --info).
  std::string source;
  /// OpenCL: also carry the program's binary for this device (platform.device, -1: the
  /// default one) when there is one here; a runtime on the same device and driver loads it
  /// instead of building the source. Without such a device the artifact holds the source
  /// alone (the notes say so).
  bool openclBinary = true;
  int openclPlatform = -1, openclDevice = -1;
};

/// What writeArtifact wrote.
struct ArtifactInfo {
  std::string library, header;
  std::string notes; ///< The target, tuned configs used, linker.
};

/// Writes the artifact of `g`, whose shapes must all be static (the only shapes it runs).
///  1. buildLaunchPlan(): the kernels, their slots and the buffer plan, as the JIT gets them.
///  2. The kernels as an object file (the JIT's code generator, emitObjectFile), or for
///     OpenCL the program text and its launches.
///  3. The run plan and weights serialized (runtime/artifact/ArtifactFormat.h) into an
///     assembler file that .incbin's them into a read-only section: the runtime reads them
///     in place from the mapped library, no parsing library needed.
///  4. `cc -shared` links both into lib<name>.so; generated code's calls into the runtime
///     (nnc_parallel_for, scalar conversion helpers) stay undefined there and bind to
///     libnnc_runtime when the library is loaded.
///  5. <name>.h: the inputs' and outputs' names, dtypes and shapes as macros.
Expected<ArtifactInfo> writeArtifact(const Graph &g, const ArtifactOptions &opts);

} // namespace nnc

// CPU execution of a graph: generated kernels, a launch list and one planned arena.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/Tensor.h"
#include "nnc/runtime/BufferPlan.h"

namespace nnc {

class Executable;

/// One kernel over the profiled runs of an executable (Executable::setProfiling).
struct KernelProfile {
  std::string name;
  std::vector<std::string> sources; ///< The graph nodes it computes (ONNX node names).
  double ms = 0;                    ///< Mean wall time per profiled run.
  double flops = 0;                 ///< Arithmetic work per run where known (GEMMs), else 0.
  /// The operands of that work (f32, bf16, u8 x s8): which of the machine's peaks rates it.
  kir::GemmElems flopsElems = kir::GemmElems::F32;
  int64_t bytes = 0; ///< Bytes of its parameters: what it reads or writes at least once.
};

struct CpuOptions {
  /// No default target: the caller hands down the CPU its target is for (codegen.cpu).
  explicit CpuOptions(CpuTarget target) : codegen(std::move(target)) {}
  int threads = 0; ///< 0: all cores.
  CodegenOptions codegen;
  /// What CpuModel compiles each specialized graph with; empty: Executable::compile with
  /// these options. The OpenCL runtime passes its own, so symbolic shapes work there too.
  std::function<Expected<std::unique_ptr<Executable>>(const Graph &)> compileWith;
  /// Tuned configs of tunable kernels (matmul, conv): usually the tuning cache; null or a
  /// missing entry means the heuristic default.
  std::shared_ptr<const tuning::ConfigSource> tuning;
  /// CpuModel says on stderr when its cache of specialized programs drops one.
  bool verbose = false;
};

/// How many of an executable's distinct tunable kernels got a tuned config.
struct TuningUse {
  int tunable = 0, tuned = 0;
  std::vector<std::string> missing; ///< Signatures of the untuned ones.
};

/// A compiled graph with static shapes. run() may be called repeatedly and from several
/// threads at once (each call uses its own arena).
class Executable {
public:
  virtual ~Executable() = default;
  /// Compiles `g`, whose shapes must all be static (see CpuModel for symbolic ones).
  static Expected<std::unique_ptr<Executable>> compile(const Graph &g, const CpuOptions &opts);

  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) = 0;
  virtual const BufferPlan &plan() const = 0;
  /// Every kernel in launch order.
  virtual const std::vector<kir::Kernel> &kernels() const = 0;
  virtual double compileMs() const = 0;
  /// True when the machine code came from the object cache.
  virtual bool fromCache() const = 0;
  virtual const TuningUse &tuningUse() const = 0;
  /// Starts timing each kernel of the runs that follow (on: what was timed is zeroed) or stops
  /// (off: what was timed is kept). False where this executable cannot time its kernels that
  /// way (OpenCL times them with profiling events: OpenCLOptions::profile).
  virtual bool setProfiling(bool on) { return false; }
  /// Per kernel in launch order, over the runs since profiling started.
  virtual std::vector<KernelProfile> kernelProfile() const { return {}; }
  virtual int64_t profiledRuns() const { return 0; }
};

/// Turns a graph with symbolic dims into one with the given concrete input extents (and the
/// given input values folded in). Shapes that depend on data computed inside the graph stay
/// unknown (CpuModel runs such a graph in stages); `wanted` receives the small inputs whose
/// values the first unknown shape may depend on. nnc::specializeShapes
/// (include/nnc/passes/Specialize.h) with the interpreter as evaluator and
/// allowDataDependent set is the one to pass; runtime/ does not depend on passes/.
using Specializer = std::function<Expected<std::unique_ptr<Graph>>(
    const Graph &g, const std::vector<Extents> &inputShapes, const std::map<int, Tensor> &values,
    std::set<int> *wanted)>;

/// A graph whose inputs may have symbolic dims: specialized and compiled per concrete input
/// shape signature on first use, with a bounded cache of executables (the 16 most recently
/// used; CpuOptions::verbose says when one is dropped). Where later shapes
/// depend on data the graph computes, it runs in stages, each compiled for the shapes the
/// previous one produced.
class CpuModel {
public:
  virtual ~CpuModel() = default;
  static Expected<std::unique_ptr<CpuModel>> create(std::unique_ptr<Graph> g,
                                                    const CpuOptions &opts,
                                                    Specializer specialize);
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) = 0;
  /// The executable for these input shapes (compiling it if needed).
  virtual Expected<Executable *> executableFor(const std::vector<Extents> &inputShapes) = 0;
};

} // namespace nnc

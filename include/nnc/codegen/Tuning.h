// Tuning spaces: the knobs of each tunable kernel kind, their candidate values and
// constraints, and the problems (kernel instances) that lowering exposes to the tuner.
// A tunable kernel kind (e.g. "gemm_cpu": the register-blocked GEMM behind matmul and conv)
// declares a Space: knob names with candidate values, a validity check and a version. A Config
// assigns each knob a value. Lowering takes an optional Config per Problem and otherwise uses a
// heuristic default; every valid Config computes the same numbers (up to float reassociation).
// Device kinds add their own spaces the same way: OpenCL's "gemm_opencl" (GpuGemm.cpp: work-
// group shape, register tile, vector width, k tile, local memory or not) and "reduce_opencl"
// (Reductions.cpp: the work-group size of a reduction tree), both in codegen/lower.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/GpuTarget.h"

namespace nnc::lower {
class Epilogue;
} // namespace nnc::lower

namespace nnc::tuning {

/// Knob name -> value.
using Config = std::map<std::string, int64_t>;

/// "mr=4,nr=32" (sorted by name) and back; parseConfig fails (nullopt) on malformed text.
std::string configStr(const Config &c);
std::optional<Config> parseConfig(const std::string &s);

/// One kernel instance that can be tuned: what the cache keys and the tuner measures.
struct Problem {
  std::string kind; ///< The space's kind, e.g. "gemm_cpu".
  std::string
      signature; ///< Kind, dtypes, shapes and layout, e.g. "gemm_cpu f32 b1 m64 k576 n3136 ...".
  std::vector<int64_t> dims; ///< Kind-specific sizes the space's rules read (gemm: batch, m, k, n).
  double flops = 0;          ///< Work of one run (for the tuner's budget split).
  /// The CPU the kernel is for (its vector width and registers bound the tiles). A problem is
  /// made by a template and completed by chooseConfig, which sets this from LowerOptions::cpu
  /// before any rule reads it; until then it is the baseline level's description.
  CpuTarget cpu;
  /// The OpenCL device, for a space of an OpenCL kernel (its limits bound work-groups and
  /// local memory); chooseConfig sets it from LowerOptions::gpu.
  std::optional<GpuTarget> gpu;
  /// The threads the kernel's parallel loops run on (chooseConfig sets it from
  /// LowerOptions::threads), which a default may split the work for: the tuning cache keeps
  /// its configs per thread count likewise.
  int threads = 1;
  /// The kernel runs once per step of a loop (a recurrent net's step): a constant operand
  /// that fits the caches stays there from one call to the next, so a call can be a few
  /// microseconds of work. chooseConfig sets it from LowerOptions::loopBody.
  bool loopBody = false;
};

struct Knob {
  std::string name;
  std::vector<int64_t> values; ///< Candidates, in the order the tuner mutates through them.
  std::string help;
};

/// The tunable parameters of one kernel kind on one device kind.
struct Space {
  std::string kind;
  int version = 1; ///< Bumped whenever a knob's meaning changes: cached records of another
                   ///< version are never applied.
  std::vector<Knob> knobs;
  /// True when `c` names every knob with one of its values and fits the problem and device.
  std::function<bool(const Config &c, const Problem &p)> valid;
  /// The heuristic default for a problem (always valid).
  std::function<Config(const Problem &p)> defaults;
};

/// True when `c` gives every knob of `s`, and only those, one of the knob's values (the part
/// of a Space::valid that does not depend on the problem).
bool namesEveryKnob(const Space &s, const Config &c);

/// The space of a kind, or null.
const Space *findSpace(const std::string &kind);
/// Every space: those of the CPU's kernel templates, in registry order, each once (for the
/// tuner, `nnc cache` and docs).
std::vector<const Space *> allSpaces();

/// Chooses configs while lowering: the tuning cache during compiles, a candidate while tuning.
class ConfigSource {
public:
  virtual ~ConfigSource() = default;
  /// The config to use for `p`, or nullopt for the default.
  virtual std::optional<Config> lookup(const Problem &p) const = 0;
};

/// The code generator kernels are lowered for; each has its own kernel-template registry
/// (codegen/lower/Templates.cpp). Not a second description of the machine (that is
/// nnc::Target, handed down as LowerOptions::cpu and ::gpu): it only names a registry, and
/// follows from the options (codeTargetOf), and listings (kernelTemplates) name one without
/// a device.
enum class CodeTarget { Cpu, OpenCL };

/// The kernel template lowering chose for one node or fusion group (docs/fast-paths.md), with
/// the configs chosen for the tunable problems it met.
struct TemplateChoice {
  std::string name;   ///< The template's name; empty for the op's generic lowerer.
  std::string prefix; ///< The name prefix of the kernels it made.
  std::string op;     ///< The node's op (a group: its anchor's or root's).
  std::vector<std::pair<Problem, Config>> configs;
};

/// What lowering does about tuning: where configs come from, and where the tunable problems
/// it met are reported (with whether a looked-up config was applied); and what the kernels
/// are for, which the caller states (there is no default target).
struct LowerOptions {
  explicit LowerOptions(CpuTarget target) : cpu(std::move(target)) {}

  const ConfigSource *configs = nullptr;
  std::function<void(const Problem &p, bool tuned)> onTunable;
  /// Called with each config chooseConfig settles on.
  std::function<void(const Problem &p, const Config &c)> onConfig;
  /// Called once per template choice (after the template's kernels are made).
  std::function<void(const TemplateChoice &c)> onTemplate;
  /// The CPU the kernels are generated for (an OpenCL target's too: its registry also holds
  /// CPU templates, and some graph-level choices read the CPU's caches).
  CpuTarget cpu;
  /// Set when the kernels are for this OpenCL device (its limits bound work-groups and
  /// local memory); unset for the CPU.
  std::optional<GpuTarget> gpu;
  /// The threads the CPU kernels will run on; 0: the host's cores (CpuTarget::hostCores()).
  int threads = 0;
  /// The kernels are a loop body's, run once per step (Problem::loopBody).
  bool loopBody = false;
  /// The fusion group's epilogue (codegen/lower/Epilogue.h) when the node being lowered is a
  /// group's anchor and its template takes one (KernelTemplate::takesEpilogue): the template
  /// applies it where it stores a final element of the result, or leaves it to the planner.
  lower::Epilogue *epilogue = nullptr;
};

/// The template registry lowering for `opts` takes from: OpenCL's when the kernels are for a
/// GPU target, else the CPU's.
inline CodeTarget codeTargetOf(const LowerOptions &opts) {
  return opts.gpu ? CodeTarget::OpenCL : CodeTarget::Cpu;
}

/// The target of `opts`, which a lowering that reads the CPU must be given.
inline const CpuTarget &cpuOf(const LowerOptions *opts) {
  NNC_ASSERT(opts, "lowering for the CPU without LowerOptions (no target)");
  return opts->cpu;
}

/// The config lowering uses for `p` (for the target of `opts`) under `opts`: a valid
/// looked-up one, else the default. Reports `p` through opts.onTunable.
Config chooseConfig(Problem p, const LowerOptions *opts);

} // namespace nnc::tuning

// Passes, the pass registry and pipelines (a comma-separated list of pass names, as data).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Tensor.h"

namespace nnc {

/// Weight panels made by pack-gemm-weights, kept across the pipelines that run on graphs
/// sharing their constants: the per-shape programs of a symbolic-shape model each run the
/// static-shape passes again (driver::shapeSpecializer), and without this each would hold a
/// packed copy of every weight (BERT-base: 340 MB per input shape). An entry keeps its source
/// tensor, so that the source's buffer (the key) is not freed and reused while it lives.
class PackedWeightCache {
public:
  /// The panels of `source` in the packing named `how` (the packing and its width), made by
  /// `make` the first time they are asked for.
  Tensor get(const Tensor &source, const std::string &how, const std::function<Tensor()> &make);

private:
  std::mutex mutex_;
  std::map<std::pair<const void *, std::string>, std::pair<Tensor, Tensor>> entries_;
};

/// What passes may use besides the graph. The evaluator comes from the runtime (the
/// reference interpreter); passes/ does not depend on runtime/.
struct PassContext {
  /// The CPU that code is generated for (vector width, caches): the target's, set by whoever
  /// runs a pipeline toward code generation. Unset for target-independent pipelines (shape
  /// specialization), where a pass that reads it fails (cpuFor).
  std::optional<CpuTarget> cpu;
  using Evaluator =
      std::function<Expected<std::vector<Tensor>>(const Node &, const std::vector<Tensor> &)>;
  /// Evaluates a node on constant operands; constant folding does nothing without it.
  Evaluator evaluate;
  /// Run the verifier after every pass (on in tests and nnc-opt).
  bool verifyEach = true;
  /// Print the IR after these passes / after all passes, to `printStream`, with `printOptions`
  /// (`nnc inspect` elides large constants there as in its final print).
  std::set<std::string> printAfter;
  bool printAfterAll = false;
  std::ostream *printStream = nullptr;
  PrintOptions printOptions;
  /// Collect and print per-pass statistics (`--stats`) to `statsStream`.
  bool stats = false;
  std::ostream *statsStream = nullptr;
  /// The options of the running pass, from its pipeline entry `name{key=value,...}`.
  std::map<std::string, std::string> passOptions;
  /// Where pack-gemm-weights keeps the panels it makes across pipelines (null: each run packs
  /// its own).
  std::shared_ptr<PackedWeightCache> packedWeights;

  /// The CPU `pass` generates for; an error naming the pass when the pipeline was given none.
  Expected<CpuTarget> cpuFor(std::string_view pass) const;
  /// An error naming `pass` when passOptions holds a key not in `known`.
  Error checkOptionNames(std::string_view pass, const std::vector<std::string> &known) const;
  /// Integer option `name` of `pass` (`dflt` when absent); an error unless it is an integer
  /// >= `least`.
  Expected<int64_t> intOption(std::string_view pass, const std::string &name, int64_t dflt,
                              int64_t least) const;
};

/// One transformation of a graph.
class Pass {
public:
  virtual ~Pass() = default;
  /// The pass's CLI name ("constant-fold").
  virtual std::string_view name() const = 0;
  /// Runs on `g`; returns whether it changed anything.
  virtual Expected<bool> run(Graph &g, PassContext &ctx) = 0;
  /// Whether the pipeline also runs this pass on loop bodies (Node::body()); a whole-graph
  /// transform such as autodiff says no.
  virtual bool runsOnBodies() const { return true; }
  /// Counters for --stats ("nodes-folded" -> 3).
  const std::map<std::string, int64_t> &statistics() const { return stats_; }

protected:
  void addStat(const std::string &name, int64_t n = 1) { stats_[name] += n; }

private:
  std::map<std::string, int64_t> stats_;
};

struct PassInfo {
  std::string name;    ///< CLI name, kebab-case.
  std::string summary; ///< One line.
  std::function<std::unique_ptr<Pass>()> create;
};

/// Every pass, in one list (passes/PassRegistry.cpp).
const std::vector<PassInfo> &passRegistry();
const PassInfo *findPass(std::string_view name);

/// The graph pipeline of one code target, as data: its text (passes/PassRegistry.cpp).
struct TargetPipeline {
  std::string target;   ///< "cpu", "opencl".
  std::string pipeline; ///< "shape-inference,constant-fold,...".
};
/// Every target's pipeline.
const std::vector<TargetPipeline> &targetPipelines();

/// An ordered list of passes; an entry may carry options: `layout-nchwc{block=8}`.
class PassPipeline {
public:
  /// Parses "a,b,c"; error naming an unknown pass (and listing the known ones).
  static Expected<PassPipeline> parse(std::string_view text);
  /// The pipeline of a code target ("cpu", "opencl"); an error names the targets there are.
  static Expected<PassPipeline> forTarget(std::string_view target);
  /// The CPU's pipeline.
  static PassPipeline defaultPipeline();
  /// "a,b,c".
  std::string str() const;
  /// The passes up to and including the first named `pass` ("import": none of them); the
  /// error names the pipeline.
  Expected<PassPipeline> upTo(std::string_view pass) const;
  const std::vector<std::string> &passes() const { return names_; }
  /// Runs every pass in order (verifying and printing as ctx says).
  Error run(Graph &g, PassContext &ctx) const;

private:
  std::vector<std::string> names_;
};

} // namespace nnc

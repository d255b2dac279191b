// The device-independent part of an executable, shared by the CPU and OpenCL runtimes: every
// node lowered to kernels (the launch list), each kernel parameter bound to a slot (a run's
// input or output, a weight, or an offset in the one planned arena), and the buffer plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/Tensor.h"
#include "nnc/runtime/Executable.h"

namespace nnc {

enum class SlotKind : uint8_t { Input, Output, Weight, Arena };

/// Where a kernel parameter points: inputs[index], outputs[index], weights[index], or (Arena)
/// the arena at byte offset `index`.
struct Slot {
  SlotKind kind;
  int64_t index;
};

/// How output p of a run is produced.
struct OutputSpec {
  /// Dynamic: a result whose last dim depends on data (NonZero). Its kernel writes it packed
  /// into an arena buffer sized for the largest extent and writes the extent beside it; the
  /// run copies it out once the extent is known.
  enum Kind : uint8_t { Fresh, FromInput, FromWeight, CopyOfOutput, Dynamic } kind;
  int index = 0; ///< Input, weight or earlier output position.
  DType dtype = DType::F32;
  Extents extents; ///< Dynamic: the last extent is unknown (-1).
  int64_t dataOffset = -1, extentOffset = -1; ///< Dynamic: in the arena.
  int64_t dataBytes = 0;                      ///< Dynamic: the data buffer's capacity.
};

struct LaunchPlan {
  std::vector<std::string> inputNames;
  std::vector<TensorType> inputTypes;
  std::vector<OutputSpec> outputs;
  std::vector<Tensor> weights;
  /// Every kernel in launch order.
  std::vector<kir::Kernel> kernels;
  /// The slots of kernel i's parameters are args[firstArg[i] ...] (one per buffer).
  std::vector<Slot> args;
  std::vector<size_t> firstArg;
  BufferPlan plan;
  /// The arena's size: the plan's peak rounded up to kArenaAlignment (at least that).
  int64_t arenaBytes = 0;
  /// How many distinct tunable kernels took a tuned config.
  TuningUse tuningUse;
};

/// Builds the launch plan of `g`, whose shapes must all be static; `target` names the target
/// in errors.
///  1. Every value gets a slot: graph inputs and outputs are bound per run, constants become
///     weights, every other node result and every kernel scratch buffer lives in the arena.
///  2. Each non-constant node is lowered (lowerNode) to kernels, in graph order: the launch
///     list. There is no fallback: a node code generation does not support is an error.
///  3. Liveness of arena buffers over the launch order (first and last kernel that touches
///     them); an elementwise kernel may write its result over an operand that dies there.
///  4. planBuffers() gives the offsets; arena slots hold them from then on.
/// Tunable kernels take their configs from `tuning` (null: heuristic defaults).
Expected<LaunchPlan> buildLaunchPlan(const Graph &g, const char *target,
                                     const tuning::ConfigSource *tuning = nullptr);

/// Checks a run's inputs against the plan's input types.
Error checkRunInputs(const LaunchPlan &p, const std::vector<Tensor> &inputs);
/// Allocates the outputs a run's kernels write (OutputSpec::Fresh); others stay null. With a
/// pool they are uninitialized memory from it (the kernels write every element), else zeroed.
Expected<std::vector<Tensor>> allocateFreshOutputs(const LaunchPlan &p,
                                                   const std::shared_ptr<TensorPool> &pool = {});
/// The (uninitialized) tensor of a Dynamic output whose data-dependent extent the run found
/// to be `extent`; its bytes are then read from the arena at o.dataOffset.
Expected<Tensor> dynamicOutputTensor(const OutputSpec &o, int64_t extent);
/// Fills the outputs that are copies of inputs, weights or earlier outputs.
void finishOutputs(const LaunchPlan &p, const std::vector<Tensor> &inputs,
                   std::vector<Tensor> &outputs);

/// True when NNC_DEBUG names `what` (comma-separated) or is "all".
bool debugEnabled(const char *what);

} // namespace nnc

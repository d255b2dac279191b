// Loop nodes (`scan`): how a node's operands, body and results correspond.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "nnc/ir/Graph.h"

namespace nnc {

/// The parts of a `scan` node (see its entry in Ops.def).
struct ScanParts {
  int64_t carried = 0;     ///< States: operands, body inputs and outputs, results [0, carried).
  int64_t scanInputs = 0;  ///< Sequences: operands and body inputs [carried, carried + this).
  int64_t invariants = 0;  ///< The remaining operands and body inputs.
  int64_t scanOutputs = 0; ///< Body outputs and results [carried, carried + this).
  bool reverse = false;
  /// A while loop: it runs while state 0 (a bool scalar) is true, a number of steps known only
  /// as it runs. `steps` is then meaningless, but where it has sequences or `max_steps`: the
  /// bound on its steps (the rows of its per-step outputs).
  bool whileLoop = false;
  Dim steps; ///< T: dim 0 of the sequences.
};

/// Copies `n` (kind, attributes, name, result types and names, body) into `g`, before `before`
/// or at the end, reading each operand through `map` (an absent operand stays absent), and maps
/// n's results to the copy's: how loop bodies are inlined, differentiated and hoisted from.
Node *copyNode(Graph &g, const Node &n, std::unordered_map<const Value *, Value *> &map,
               Node *before = nullptr);

/// The types the body of `n` gives its outputs when its inputs take the types of n's operands
/// from `firstOperand` on (the body's shape rules rerun on a copy): a body whose node was
/// specialized to other shapes than it was built with.
Expected<std::vector<TensorType>> bodyOutputTypes(const Node &n, size_t firstOperand);

/// Checks an `if` node's operands and body (cond a bool scalar, one body input per captured
/// operand, an even number of body outputs) and returns the number of results.
Expected<size_t> ifResults(const Node &n);

/// Copies the nodes of the body's half that `thenBranch` selects (only those that half needs)
/// before the `if` node `n` of `g`, reading n's operands; returns the half's results there.
std::vector<Value *> copyIfBranch(Graph &g, Node *n, bool thenBranch);
/// Replaces the `if` node `n` by its `thenBranch` half (copyIfBranch), erasing n.
void inlineIfBranch(Graph &g, Node *n, bool thenBranch);

/// Reads a scan node's attributes and checks them against its operands and body.
Expected<ScanParts> scanParts(const Node &scan);

/// Refreshes the body's input types from the node's operands (a state as is, a sequence
/// without its axis 0, an invariant as is) and copies invariants that are constants into the
/// body (so that body passes fold and pack them as weights). The operands stay.
Error syncScanBody(Node &scan);

} // namespace nnc

namespace nnc {

class GradEmitter;

/// Makes `scan` also return, as per-step outputs, the forward values that its gradient
/// (scanGradient) reads: the input states of each step, which the backward loop cannot
/// recompute, and the results of the body's matmuls that vary per step, which it could but
/// at the cost of a GEMM per step (the elementwise rest is recomputed: cheaper than storing
/// it). Values the body already returns per step are not added again; the body is brought in
/// step with the operands first (syncScanBody). Autodiff calls this on every loop it
/// differentiates.
Error saveScanSteps(Node &scan);

/// The gradient rule of scan (Gradients.def): a scan running the other way whose body is the
/// vector-Jacobian product of the forward body. Its states are the cotangents of the float
/// states (starting from the final states' gradients) and the gradients of the float
/// invariants, summed over the steps (starting from zeros); its sequences are the per-step
/// outputs' cotangents, the saved forward values (saveScanSteps) and the forward sequences;
/// its invariants are the forward invariants. Per step it recomputes the forward body from
/// the saved values and returns the sequences' cotangents. Fails (through `e`) when the body
/// reads a state that the forward loop does not return per step.
std::vector<Value *> scanGradient(GradEmitter &e, const Node &scan, const std::vector<Value *> &dy);

/// Replaces every scan node of `g` (not of bodies; nested scans come out with their body)
/// by its body inlined once per step: the sequences split into steps, the per-step outputs
/// concatenated. T must be static. The artifact writer, which has no loops yet, needs this
/// form.
/// `keepWhileLoops`: a while loop (steps known only as it runs) is left as it is instead of
/// being an error.
Error unrollScans(Graph &g, bool keepWhileLoops = false);
/// unrollScans of one scan node `n` of `g` (a loop of zero steps becomes its initial states
/// and empty per-step outputs, whose shapes must then be static).
Error unrollScan(Graph &g, Node *n);

} // namespace nnc

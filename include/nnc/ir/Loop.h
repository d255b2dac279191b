// Loop nodes (`scan`): how a node's operands, body and results correspond.
#pragma once

#include <cstdint>

#include "nnc/ir/Graph.h"

namespace nnc {

/// The parts of a `scan` node (see its entry in Ops.def).
struct ScanParts {
  int64_t carried = 0;     ///< States: operands, body inputs and outputs, results [0, carried).
  int64_t scanInputs = 0;  ///< Sequences: operands and body inputs [carried, carried + this).
  int64_t invariants = 0;  ///< The remaining operands and body inputs.
  int64_t scanOutputs = 0; ///< Body outputs and results [carried, carried + this).
  bool reverse = false;
  Dim steps; ///< T: dim 0 of the sequences.
};

/// Reads a scan node's attributes and checks them against its operands and body.
Expected<ScanParts> scanParts(const Node &scan);

/// Refreshes the body's input types from the node's operands (a state as is, a sequence
/// without its axis 0, an invariant as is) and copies invariants that are constants into the
/// body (so that body passes fold and pack them as weights). The operands stay.
Error syncScanBody(Node &scan);

} // namespace nnc

namespace nnc {

/// Replaces every scan node of `g` (not of bodies; nested scans come out with their body)
/// by its body inlined once per step: the sequences split into steps, the per-step outputs
/// concatenated. T must be static. Autodiff differentiates this form (backpropagation
/// through time over the unrolled steps).
Error unrollScans(Graph &g);

} // namespace nnc

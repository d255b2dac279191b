// Helpers shared by the ONNX importer's files: TensorProto decoding and the lowering context.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "onnx.pb.h"
#include "onnx/Lowering.h"

namespace nnc::onnxfe {

/// Decodes a TensorProto. `baseDir` is the folder external data is resolved against (empty:
/// external data is refused); `what` names the tensor in errors ("initializer 'w'").
Expected<Tensor> tensorFromProto(const onnx::TensorProto &p, const std::string &baseDir,
                                 const std::string &what);
/// Encodes a tensor as a TensorProto with raw_data (sub-byte types packed).
Expected<onnx::TensorProto> tensorToProto(const Tensor &t, const std::string &name);

/// Sets element i of an arithmetic tensor from a double (converted like a C cast; f16/bf16
/// rounded to nearest even).
void setElementFromDouble(Tensor &t, int64_t i, double v);

/// Reads a whole file; the error names the file.
Expected<std::string> readWholeFile(const std::string &path);

/// "node 'name' (Op)" or "node '#3' (Op)".
std::string nodePlace(const onnx::NodeProto &n, size_t index);

/// State the importer keeps per model and the context hands to lowerings.
struct ImportState {
  Graph *graph = nullptr;
  std::string baseDir;
  /// ONNX value name -> IR value.
  std::map<std::string, Value *> values;
  /// ONNX value name -> sequence or optional (names in neither map are undefined).
  std::map<std::string, StaticValue> composites;
  /// ONNX names of graph inputs whose values the caller supplied (ImportOptions::knownInputs).
  const std::map<std::string, Tensor> *knownInputs = nullptr;
  /// ImportOptions::evaluate (may be empty).
  const std::function<Expected<std::vector<Tensor>>(const Node &, const std::vector<Tensor> &)>
      *evaluate = nullptr;
  /// ImportOptions::forTraining.
  bool forTraining = false;
  /// Opset version per domain ("" for the default domain).
  std::map<std::string, int64_t> opsets;

  // ---- Subgraphs (If's branches, Loop's and Scan's bodies) ----
  /// The state of the graph this one is nested in (null for the main graph).
  ImportState *parent = nullptr;
  /// This scope lowers a subgraph into the parent's graph in place (inlineGraph): values of
  /// enclosing scopes are used directly, not captured.
  bool inlined = false;
  /// Main graph: the nodes of subgraphs lowered in place so far (each step of an unrolled
  /// loop, each element of a SequenceMap counts anew), bounded by inlineGraph.
  int64_t inlinedNodes = 0;
  /// Values of enclosing graphs this graph reads, in first-use order: each is a graph input
  /// appended after the subgraph's own (its value comes from the node, as a loop invariant).
  std::vector<Value *> captured;
  /// Lowers the nodes of a subgraph into `state` (set by the importer, which holds the
  /// model's opsets and functions).
  std::function<Error(ImportState &state, const onnx::GraphProto &graph)> lowerGraph;

  /// The value of ONNX name `name`: this graph's, else an enclosing graph's, captured (a
  /// constant is copied into this graph instead); null when no scope defines it.
  Value *lookup(const std::string &name);
  /// Like lookup, for a sequence or optional (its tensors captured alike).
  const StaticValue *lookupComposite(const std::string &name);
  /// True when some scope defines `name` (a tensor, sequence or optional).
  bool defines(const std::string &name) { return lookupComposite(name) || lookup(name); }

private:
  /// `outer`, a value of an enclosing graph, made available in this one (`name` its ONNX
  /// name, or a tensor of a sequence's): a copied constant, else a captured input.
  Value *capture(Value *outer, const std::string &name);
};

/// The value of `v` (a value of `st`'s graph) when it follows, at import time, from
/// constants and the caller's known integer and bool inputs, also across the captures of
/// enclosing graphs; nullopt when it depends on a run-time value or is too large to evaluate
/// here. Leaves the graph as it is (KnownValue.cpp).
std::optional<Tensor> knownValue(const ImportState &st, const Value *v);

/// A subgraph attribute of a node imported as a graph of its own: its inputs are the
/// subgraph's inputs (with the types the lowering gives) followed by the captured outer
/// values, which the lowering passes to its node as operands in that order.
struct ImportedSubgraph {
  std::shared_ptr<Graph> graph;
  std::vector<Value *> captured; ///< Outer values, in the order of graph's extra inputs.
};

/// Imports `gp` (attribute `attr` of the node at `place`) nested in `outer`, its inputs typed
/// `inputTypes` (one per declared input).
Expected<ImportedSubgraph> importSubgraph(ImportState &outer, const onnx::GraphProto &gp,
                                          const std::vector<TensorType> &inputTypes,
                                          const std::string &place);

/// Lowers `gp` (attribute of the node at `place`) into `outer`'s graph in place, its inputs
/// bound to `inputs` (one per declared input); returns the values of its outputs.
Expected<std::vector<ImportValue>> inlineGraph(ImportState &outer, const onnx::GraphProto &gp,
                                               const std::vector<ImportValue> &inputs,
                                               const std::string &place);

/// Lowers one ONNX node (index `index` in the graph) through `lowering`.
Error lowerNode(ImportState &state, const onnx::NodeProto &node, size_t index, int64_t opset,
                const OpLowering &lowering);

} // namespace nnc::onnxfe

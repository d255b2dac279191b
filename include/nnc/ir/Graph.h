// The graph-level IR: values, nodes and graphs.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nnc/ir/Attribute.h"
#include "nnc/ir/Op.h"
#include "nnc/ir/Shape.h"
#include "nnc/support/Error.h"

namespace nnc {

class Graph;
class Node;

/// An SSA value: a graph input or a node result. Names are unique within a graph.
class Value {
public:
  const std::string &name() const { return name_; }
  const TensorType &type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }
  int64_t rank() const { return type_.rank(); }
  /// The node that defines this value; null for graph inputs.
  Node *producer() const { return producer_; }
  /// Index among the producer's results.
  int resultIndex() const { return resultIndex_; }
  bool isGraphInput() const { return producer_ == nullptr; }

private:
  friend class Graph;
  std::string name_;
  TensorType type_;
  Node *producer_ = nullptr;
  int resultIndex_ = 0;
};

/// One operation. Operands may be null where the op allows an absent optional operand.
class Node {
public:
  OpKind kind() const { return kind_; }
  const OpInfo &info() const { return opInfo(kind_); }
  std::string_view opName() const { return info().name; }
  /// The node's name (from ONNX or the builder; may be empty).
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  Graph *graph() const { return graph_; }

  size_t numOperands() const { return operands_.size(); }
  Value *operand(size_t i) const { return i < operands_.size() ? operands_[i] : nullptr; }
  const std::vector<Value *> &operands() const { return operands_; }
  void setOperand(size_t i, Value *v) { operands_[i] = v; }
  void setOperands(std::vector<Value *> ops) { operands_ = std::move(ops); }

  size_t numResults() const { return results_.size(); }
  Value *result(size_t i = 0) const { return results_[i]; }
  const std::vector<Value *> &results() const { return results_; }

  const AttrMap &attrs() const { return attrs_; }
  bool hasAttr(const std::string &n) const { return attrs_.count(n) != 0; }
  const Attribute *attr(const std::string &n) const;
  void setAttr(const std::string &n, Attribute a) { attrs_[n] = std::move(a); }
  void removeAttr(const std::string &n) { attrs_.erase(n); }

  // Typed getters. The one-argument forms require the attribute to be present with that
  // kind (the verifier guarantees it for required attributes); the others give a default.
  int64_t getInt(const std::string &n) const;
  int64_t getInt(const std::string &n, int64_t dflt) const;
  double getFloat(const std::string &n) const;
  double getFloat(const std::string &n, double dflt) const;
  const std::string &getString(const std::string &n) const;
  std::string getString(const std::string &n, const std::string &dflt) const;
  const std::vector<int64_t> &getInts(const std::string &n) const;
  std::vector<int64_t> getInts(const std::string &n, const std::vector<int64_t> &dflt) const;
  const std::vector<double> &getFloats(const std::string &n) const;
  const Tensor &getTensor(const std::string &n) const;
  DType getDType(const std::string &n) const;
  DType getDType(const std::string &n, DType dflt) const;

  /// The tensor of operand i when it is produced by a `constant` node; null otherwise.
  const Tensor *constantOperand(size_t i) const;

  /// The graph a loop node (`scan`) runs per iteration; null for every other node. Passes
  /// that rewrite a graph leave bodies alone; the pass manager runs them on bodies too.
  Graph *body() const { return body_.get(); }
  void setBody(std::shared_ptr<Graph> b) { body_ = std::move(b); }
  /// "node 'conv1' (conv)" or "conv producing %x": the place named in error messages.
  std::string describe() const;
  /// An Error whose message starts with describe().
  template <typename... Args> Error error(fmt::format_string<Args...> f, Args &&...args) const {
    return Error(describe() + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

private:
  friend class Graph;
  OpKind kind_;
  std::string name_;
  Graph *graph_ = nullptr;
  std::vector<Value *> operands_;
  std::vector<Value *> results_;
  std::vector<std::unique_ptr<Value>> resultStorage_;
  AttrMap attrs_;
  std::shared_ptr<Graph> body_;
};

/// A function-like graph: inputs, nodes in execution (topological) order, outputs.
class Graph {
public:
  explicit Graph(std::string name = "main");
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// Adds a graph input. `name` is made unique if taken.
  Value *addInput(const std::string &name, TensorType type);
  const std::vector<Value *> &inputs() const { return inputs_; }
  /// Removes a graph input that has no uses.
  void removeInput(Value *v);

  const std::vector<Value *> &outputs() const { return outputs_; }
  void setOutputs(std::vector<Value *> outs) { outputs_ = std::move(outs); }
  void setOutput(size_t i, Value *v) { outputs_[i] = v; }

  /// Creates a node with results of the given types, appended at the end or inserted before
  /// `before`. Result names come from `resultNames` (made unique) or are fresh.
  Node *createNode(OpKind kind, std::vector<Value *> operands,
                   std::vector<TensorType> resultTypes, AttrMap attrs = {},
                   std::string name = "", std::vector<std::string> resultNames = {},
                   Node *before = nullptr);
  /// Appends a result of type `type` to `n` (a loop node that gains a per-step output); the
  /// name is made unique.
  Value *addResult(Node &n, const std::string &name, TensorType type);
  /// Creates a node whose result types come from its shape rule; on a shape-rule error no
  /// node is left behind. `numResults` < 0 means the op's minimum.
  Expected<Node *> createInferred(OpKind kind, std::vector<Value *> operands, AttrMap attrs = {},
                                  std::string name = "", int numResults = -1,
                                  std::vector<std::string> resultNames = {},
                                  Node *before = nullptr);

  /// The nodes in order (a snapshot: safe to mutate the graph while walking it).
  std::vector<Node *> nodes() const;
  size_t numNodes() const { return nodes_.size(); }
  /// Removes a node whose results have no uses.
  void eraseNode(Node *n);
  /// Moves `n` to just before `pos` (or to the end when pos is null).
  void moveBefore(Node *n, Node *pos);
  /// Points every use of `from` (operands and graph outputs) at `to`.
  void replaceAllUsesWith(Value *from, Value *to);
  /// Nodes that use `v` as an operand (each once, in graph order).
  std::vector<Node *> users(const Value *v) const;
  /// True if `v` is an operand of some node or a graph output.
  bool hasUses(const Value *v) const;
  bool isOutput(const Value *v) const;

  /// Restores a topological order; fails, naming a node, if the graph has a cycle or an
  /// operand that is not defined in the graph.
  Error topologicalSort();

  /// A dim symbol not used so far in this graph ("_0", "_1", ...): the size of a
  /// data-dependent or unknowable dimension.
  Dim freshDim();
  /// Makes a symbol name known so freshDim() does not return it.
  void noteSymbol(const std::string &name);
  /// `hint` if no value has that name yet, else `hint_1`, `hint_2`, ...
  std::string uniqueValueName(const std::string &hint);
  /// Renames a value (made unique).
  void renameValue(Value *v, const std::string &name);
  /// The value with this name, or null.
  Value *findValue(const std::string &name) const;

  /// A deep copy.
  std::unique_ptr<Graph> clone() const;

private:
  std::unique_ptr<Value> newValue(const std::string &name, TensorType type);

  std::string name_;
  std::vector<Value *> inputs_;
  std::vector<std::unique_ptr<Value>> inputStorage_;
  std::vector<Value *> outputs_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::map<std::string, Value *> valuesByName_;
  std::set<std::string> symbols_;
  int64_t nextValueId_ = 0;
  int64_t nextSymbol_ = 0;
};

} // namespace nnc

// The value a node's operand has while importing when it follows from constants and the
// caller's known integer and bool inputs (ImportOptions::knownInputs), through the enclosing
// graphs of a subgraph too. The importer folds only nodes whose operands are Constant nodes, so that a
// known input stays an input and its consumers run as kernels; a lowering that must decide
// something at import time (which branch of an If to import) asks for the value here instead,
// which evaluates the small side-effect-free slice it depends on without changing the graph.
#include "nnc/ir/TensorLimit.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

/// Deepest chain of nodes followed back, and the largest tensor evaluated on the way.
constexpr int kMaxDepth = 64;
constexpr int64_t kMaxElements = int64_t(1) << 16;
constexpr int64_t kMaxBytes = int64_t(64) << 20;

class KnownValues {
public:
  std::optional<Tensor> of(const ImportState &st, const Value *v, int depth) {
    if (depth > kMaxDepth)
      return std::nullopt;
    auto key = std::make_pair(&st, v);
    if (auto it = memo_.find(key); it != memo_.end())
      return it->second;
    std::optional<Tensor> r = compute(st, v, depth);
    memo_[key] = r;
    return r;
  }

private:
  std::optional<Tensor> compute(const ImportState &st, const Value *v, int depth) {
    if (v->isGraphInput()) {
      // A subgraph lowered in place shares its enclosing graph and its inputs.
      if (st.inlined && st.parent)
        return of(*st.parent, v, depth + 1);
      if (!st.parent) {
        if (!st.knownInputs)
          return std::nullopt;
        // Only integer and bool inputs: sizes, axes, counts and flags, from which a model
        // computes its decisions. A float input is data, and a program specialized to it
        // would stop exercising the run-time form of what reads it.
        auto it = st.knownInputs->find(v->name());
        if (it == st.knownInputs->end() || isFloat(it->second.dtype()))
          return std::nullopt;
        return it->second;
      }
      // A captured value: the last captured.size() inputs of a subgraph, in order.
      const std::vector<Value *> &ins = st.graph->inputs();
      size_t first = ins.size() - st.captured.size();
      for (size_t k = first; k < ins.size(); ++k)
        if (ins[k] == v)
          return of(*st.parent, st.captured[k - first], depth + 1);
      return std::nullopt; // one of the subgraph's own inputs: a value per step or branch
    }
    const Node *n = v->producer();
    if (n->kind() == OpKind::Constant) {
      const Attribute *a = n->attr("value");
      const Tensor *t = a ? std::get_if<Tensor>(a) : nullptr;
      return t ? std::optional<Tensor>(*t) : std::nullopt;
    }
    if (n->body() || !st.evaluate || !*st.evaluate)
      return std::nullopt;
    for (const Value *r : n->results()) {
      std::optional<Extents> e = staticExtents(r->shape());
      std::optional<int64_t> cnt = e ? checkedNumElements(*e) : std::nullopt;
      if (!cnt || *cnt > kMaxElements)
        return std::nullopt;
    }
    std::vector<Tensor> ops;
    for (size_t i = 0; i < n->numOperands(); ++i) {
      if (!n->operand(i)) {
        ops.emplace_back();
        continue;
      }
      std::optional<Tensor> t = of(st, n->operand(i), depth + 1);
      if (!t)
        return std::nullopt;
      ops.push_back(std::move(*t));
    }
    Expected<std::vector<Tensor>> res = makeError("not evaluated");
    {
      TensorByteLimit limit(kMaxBytes);
      res = (*st.evaluate)(*n, ops);
    }
    if (!res) // the run reports it (an index out of range, say)
      return std::nullopt;
    for (size_t i = 0; i < n->numResults() && i < res->size(); ++i)
      if (n->result(i) == v)
        return (*res)[i];
    return std::nullopt;
  }

  std::map<std::pair<const ImportState *, const Value *>, std::optional<Tensor>> memo_;
};

} // namespace

std::optional<Tensor> knownValue(const ImportState &st, const Value *v) {
  KnownValues k;
  return k.of(st, v, 0);
}

} // namespace nnc::onnxfe

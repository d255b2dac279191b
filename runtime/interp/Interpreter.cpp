// The reference interpreter: dispatch of nodes to kernels, type checks and graph evaluation.
#include "nnc/runtime/Interpreter.h"

#include <unordered_map>

#include "interp/Kernels.h"

namespace nnc {

namespace {
Expected<std::vector<Tensor>> dispatch(const Node &node, const std::vector<Tensor> &operands) {
  switch (node.kind()) {
#define NNC_ELEMENTWISE(Id, ...)                                                                   \
  case OpKind::Id:                                                                                 \
    return interp::evalElementwise(node, operands);
#define NNC_OP(Id, ...)                                                                            \
  case OpKind::Id:                                                                                 \
    return interp::eval##Id(node, operands);
#include "nnc/ir/Ops.def"
  }
  return node.error("unknown op kind {}", static_cast<int>(node.kind()));
}
} // namespace

Expected<std::vector<Tensor>> evaluateNode(const Node &node, const std::vector<Tensor> &operands) {
  const OpInfo &info = node.info();
  size_t n = operands.size();
  if (info.elementwise) {
    if (n != static_cast<size_t>(info.arity))
      return node.error("expects {} operands, got {}", info.arity, n);
  } else {
    if (n < static_cast<size_t>(info.minOperands) ||
        (info.maxOperands >= 0 && n > static_cast<size_t>(info.maxOperands)))
      return node.error("expects {} operands, got {}",
                        info.maxOperands < 0 ? fmt::format("at least {}", info.minOperands)
                        : info.minOperands == info.maxOperands
                            ? fmt::format("{}", info.minOperands)
                            : fmt::format("{} to {}", info.minOperands, info.maxOperands),
                        n);
  }
  Expected<std::vector<Tensor>> r = dispatch(node, operands);
  // Kernels' helpers (Tensor::create) give errors that do not name the node; add it.
  if (!r && r.error().message().find(node.describe()) == std::string::npos)
    return r.error().withContext(node.describe());
  return r;
}

Expected<std::vector<Tensor>> interpret(const Graph &g, const std::vector<Tensor> &inputs) {
  const std::vector<Value *> &graphInputs = g.inputs();
  NNC_USER_CHECK(inputs.size() == graphInputs.size(), "graph '{}' takes {} inputs, got {}",
                 g.name(), graphInputs.size(), inputs.size());

  std::unordered_map<const Value *, Tensor> values;
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value *v = graphInputs[i];
    NNC_TRY(checkAgainstType(inputs[i], v->type(), symbols, fmt::format("input '{}'", v->name())));
    values[v] = inputs[i];
  }

  // Index of the last node reading each value, so intermediates are freed early.
  std::vector<Node *> nodes = g.nodes();
  std::unordered_map<const Value *, size_t> lastUse;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value *v : nodes[i]->operands())
      if (v)
        lastUse[v] = i;
  auto isOutput = [&](const Value *v) {
    for (const Value *o : g.outputs())
      if (o == v)
        return true;
    return false;
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node &node = *nodes[i];
    std::vector<Tensor> operands;
    operands.reserve(node.numOperands());
    for (size_t k = 0; k < node.numOperands(); ++k) {
      const Value *v = node.operand(k);
      if (!v) {
        operands.emplace_back();
        continue;
      }
      auto it = values.find(v);
      if (it == values.end())
        return node.error("operand {} (%{}) is not computed before its use", k, v->name());
      operands.push_back(it->second);
    }
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> results, evaluateNode(node, operands));
    operands.clear();
    if (results.size() < node.numResults())
      return node.error("the kernel gave {} results but the node has {}: the kernel and the "
                        "node disagree",
                        results.size(), node.numResults());
    for (size_t r = 0; r < node.numResults(); ++r) {
      const Tensor &t = results[r];
      const TensorType &type = node.result(r)->type();
      bool ok = !t.isNull() && t.dtype() == type.dtype && t.rank() == type.rank();
      for (int64_t d = 0; ok && d < t.rank(); ++d)
        ok = !type.shape[d].isStatic() || type.shape[d].value() == t.dim(d);
      if (!ok)
        return node.error("result {} (%{}) is {} but its declared type is {}: the shape rule "
                          "and the kernel disagree",
                          r, node.result(r)->name(),
                          t.isNull() ? std::string("missing")
                                     : fmt::format("{}{}", dtypeName(t.dtype()),
                                                   extentsStr(t.extents())),
                          type.str());
      values[node.result(r)] = t;
    }
    // Free what no later node reads (graph outputs stay).
    for (const Value *v : node.operands()) {
      if (!v)
        continue;
      auto lu = lastUse.find(v);
      if (lu != lastUse.end() && lu->second == i && !isOutput(v))
        values.erase(v);
    }
    for (const Value *v : node.results())
      if (!lastUse.count(v) && !isOutput(v))
        values.erase(v);
  }

  std::vector<Tensor> outputs;
  for (const Value *v : g.outputs()) {
    auto it = values.find(v);
    if (it == values.end())
      return makeError("graph '{}': output %{} is never computed", g.name(),
                       v ? v->name() : std::string("<null>"));
    outputs.push_back(it->second);
  }
  return outputs;
}

} // namespace nnc

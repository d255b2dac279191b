// The checks and allocations around a run of a launch list (see RunPlan.h).
#include "RunPlan.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "nnc/ir/TensorCheck.h"

namespace nnc {

Error checkRunInputs(const RunPlan &p, const std::vector<Tensor> &inputs,
                     const std::vector<bool> &skip) {
  NNC_USER_CHECK(inputs.size() == p.inputTypes.size(), "the model takes {} inputs, got {}",
                 p.inputTypes.size(), inputs.size());
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < skip.size() && skip[i])
      continue;
    // The common case, checked without building the error's context: dtype and every
    // (static) extent as declared.
    const Tensor &t = inputs[i];
    const TensorType &type = p.inputTypes[i];
    bool same = !t.isNull() && t.dtype() == type.dtype && t.rank() == type.rank();
    for (int64_t d = 0; same && d < t.rank(); ++d)
      same = type.shape[d].isStatic() && type.shape[d].value() == t.dim(d);
    if (same)
      continue;
    NNC_TRY(checkAgainstType(t, type, symbols, fmt::format("input '{}'", p.inputNames[i])));
  }
  return Error::success();
}

Expected<std::vector<Tensor>> allocateFreshOutputs(const RunPlan &p,
                                                   const std::shared_ptr<TensorPool> &pool) {
  std::vector<Tensor> outputs(p.outputs.size());
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (p.outputs[i].kind != OutputSpec::Fresh)
      continue;
    NNC_ASSIGN_OR_RETURN(outputs[i],
                         pool ? Tensor::createUninitialized(p.outputs[i].dtype,
                                                            p.outputs[i].extents, pool)
                              : Tensor::create(p.outputs[i].dtype, p.outputs[i].extents));
  }
  return outputs;
}

Expected<Tensor> dynamicOutputTensor(const OutputSpec &o, int64_t extent) {
  Extents e = o.extents;
  for (int64_t &d : e)
    if (d < 0)
      d = extent;
  NNC_ASSERT(extent >= 0 &&
                 checkedNumElements(e).value_or(INT64_MAX) * int64_t(dtypeSize(o.dtype)) <=
                     o.dataBytes,
             "output {}: extent {} beyond the buffer's capacity", o.index, extent);
  return Tensor::create(o.dtype, e);
}

Error checkStatus(const std::vector<RunCheck> &checks, const void *status) {
  for (const RunCheck &c : checks) {
    int64_t word[2];
    std::memcpy(word, static_cast<const char *>(status) + c.offset, sizeof word);
    if (word[0] != 0)
      return Error(c.before + std::to_string(word[1]) + c.after);
  }
  return Error::success();
}

void finishOutputs(const RunPlan &p, const std::vector<Tensor> &inputs,
                   std::vector<Tensor> &outputs) {
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const OutputSpec &o = p.outputs[i];
    switch (o.kind) {
    case OutputSpec::Fresh:
    case OutputSpec::Dynamic: break;
    case OutputSpec::FromInput: outputs[i] = inputs[o.index].clone(); break;
    case OutputSpec::FromWeight: outputs[i] = p.weights[o.index].clone(); break;
    case OutputSpec::CopyOfOutput: outputs[i] = outputs[o.index].clone(); break;
    }
  }
}

} // namespace nnc

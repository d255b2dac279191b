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

namespace {

Slot plus(Slot s, int64_t bytes) {
  s.offset += bytes;
  return s;
}

/// Runs launches [from, to) and the loops loops[li...] that start before `to`; returns the
/// index of the first loop past them.
Expected<size_t> runRange(const RunPlan &p, const LaunchHooks &h, size_t from, size_t to,
                          size_t li) {
  size_t next = from;
  while (li < p.loops.size() && p.loops[li].firstKernel < to) {
    const LoopPlan &l = p.loops[li];
    const size_t end = l.firstKernel + l.numKernels;
    NNC_ASSERT(l.firstKernel >= next && end <= to, "loop {} over launches [{}, {}) overlaps {}",
               li, l.firstKernel, end, to);
    NNC_TRY(h.launch(next, l.firstKernel));
    // The loops nested in this one's body: those after it that start inside its range.
    size_t after = li + 1;
    while (after < p.loops.size() && p.loops[after].firstKernel < end)
      ++after;
    int64_t t = 0;
    for (; l.isWhile() || t < l.count; ++t) {
      const size_t at = l.isWhile() ? LoopPlan::phase(t) : static_cast<size_t>(t);
      if (l.isWhile()) {
        NNC_ASSIGN_OR_RETURN(bool on, h.goesOn(l, t, at));
        if (!on)
          break;
        if (l.maxSteps >= 0 && t >= l.maxSteps)
          break;
      }
      for (const LoopPlan::Binding &b : l.bindings)
        NNC_TRY(h.bind(b.arg, plus(b.slots[at], t * b.stride)));
      NNC_ASSIGN_OR_RETURN(size_t inner, runRange(p, h, l.firstKernel, end, li + 1));
      NNC_ASSERT(inner == after, "loop {}: its nested loops end at {}, not {}", li, inner, after);
      for (const LoopPlan::Copy &c : l.copies)
        NNC_TRY(
            h.copy(plus(c.src[at], t * c.srcStride), plus(c.dst[at], t * c.dstStride), c.bytes));
    }
    const size_t last = LoopPlan::phase(t);
    for (const LoopPlan::Copy &c : l.finish)
      if (!sameSlot(c.src[last], c.dst[last]))
        NNC_TRY(h.copy(c.src[last], c.dst[last], c.bytes));
    next = end;
    li = after;
  }
  NNC_TRY(h.launch(next, to));
  return li;
}

} // namespace

Error runLaunches(const RunPlan &p, const LaunchHooks &h) {
  NNC_ASSIGN_OR_RETURN(size_t li, runRange(p, h, 0, p.numKernels(), 0));
  NNC_ASSERT(li == p.loops.size(), "{} of {} loops ran", li, p.loops.size());
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

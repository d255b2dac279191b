// ONNX lowerings of the sequence and optional operators over static sequences (StaticValue):
// a sequence is a list of tensor values whose length is known at import time, an optional is
// present or absent at import time, so each operator only rearranges the list (or emits the
// tensor ops of ConcatFromSequence and SplitToSequence) and no sequence reaches the IR.
// A position or a length that is only known at run time cannot be resolved: the error names
// the node. SequenceMap lowers its body once per element, in place.
// A sequence that a loop appended to has a run-time length (StaticValue::rows): SequenceAt,
// SequenceLength and ConcatFromSequence read it as one tensor, its elements stacked before
// its rows, and SequenceInsert at its end adds a row; the other operators refuse it.
#include "onnx/Lowering.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {
namespace {

using C = LoweringContext;

/// Most tensors a sequence made by SplitToSequence may hold (each is a value of the graph).
constexpr int64_t kMaxSequenceLength = int64_t(1) << 16;

/// Input i, which must be a sequence (`what` names it in errors), of a length known at
/// compile time unless `runTimeLength`.
Expected<const StaticValue *> sequenceInput(C &c, size_t i, const char *what,
                                            bool runTimeLength = false) {
  const StaticValue *s = c.compositeInput(i);
  if (!s && !c.input(i))
    return c.error("missing required input {} ({})", i, what);
  if (!s || s->optional)
    return c.error("input {} ({}) must be a sequence, not {}", i, what,
                   s ? "an optional" : "a tensor");
  if (s->rows && !runTimeLength)
    return c.error("input {} ({}) is a sequence whose length is known only at run time (a loop "
                   "appends to it); this operator needs it known at compile time",
                   i, what);
  return s;
}

/// Sequence s of a run-time length as one tensor [length, ...]: its elements stacked before
/// its rows (the elements must have the rows' shape).
Expected<Value *> stacked(C &c, const StaticValue &s) {
  std::vector<Value *> parts;
  for (Value *e : s.elements) {
    NNC_ASSIGN_OR_RETURN(Value * u,
                         c.emit(OpKind::Unsqueeze, {e}, {{"axes", std::vector<int64_t>{0}}}));
    parts.push_back(u);
  }
  parts.push_back(s.rows);
  if (parts.size() == 1)
    return s.rows;
  return c.emit(OpKind::Concat, parts, {{"axis", int64_t{0}}});
}

/// x with axis 0 moved to position `to`, the others in order.
Expected<Value *> axisZeroTo(C &c, Value *x, int64_t to) {
  if (to == 0)
    return x;
  std::vector<int64_t> perm;
  for (int64_t i = 1; i < x->rank(); ++i)
    perm.push_back(i);
  perm.insert(perm.begin() + to, 0);
  return c.emit(OpKind::Transpose, {x}, {{"perm", perm}});
}

/// Input i, which must be a tensor.
Expected<Value *> tensorInput(C &c, size_t i, const char *what) {
  if (const StaticValue *s = c.compositeInput(i))
    return c.error("input {} ({}) must be a tensor, not a {}", i, what, s->kindName());
  return c.requiredInput(i, what);
}

/// The compile-time integer scalar of input i (a position or a split size).
Expected<int64_t> constScalar(C &c, size_t i, const char *what) {
  NNC_ASSIGN_OR_RETURN(Tensor t, c.constantInput(i, what));
  if (t.dtype() != DType::I32 && t.dtype() != DType::I64)
    return c.error("{} must be int32 or int64, not {}", what, dtypeName(t.dtype()));
  if (t.numElements() != 1)
    return c.error("{} must be a scalar, not of shape {}", what, extentsStr(t.extents()));
  return t.elementAsInt(0);
}

/// Input i as a position in a sequence of `n`, in [-n, n-1] (or [-n, n] when `end` may be
/// named, to insert at the back), made non-negative; `dflt` when the input is absent.
Expected<int64_t> position(C &c, size_t i, int64_t n, bool end, int64_t dflt) {
  if (!c.input(i) && !c.compositeInput(i))
    return dflt;
  if (c.compositeInput(i))
    return c.error("the position (input {}) must be a tensor", i);
  NNC_ASSIGN_OR_RETURN(int64_t p, constScalar(c, i, "the position"));
  int64_t hi = end ? n : n - 1;
  if (p < -n || p > hi)
    return c.error("position {} is out of range for a sequence of {} tensors (it must be in "
                   "[{}, {}])",
                   p, n, -n, hi);
  return p < 0 ? p + n : p;
}

Error checkElementType(C &c, const StaticValue &s, Value *t) {
  if (t->dtype() != s.dtype && (!s.elements.empty() || s.rows))
    return c.error("the tensor is {} but the sequence holds {} tensors", t->type().str(),
                   dtypeName(s.dtype));
  return Error::success();
}

Error lowerSequenceEmpty(C &c) {
  NNC_ASSIGN_OR_RETURN(int64_t code, c.intAttr("dtype", 1));
  std::optional<DType> t = dtypeFromOnnx(static_cast<int>(code));
  if (!t)
    return c.error("attribute 'dtype' = {} is not a supported element type", code);
  return c.setCompositeOutput(0, StaticValue::sequence(*t, {}));
}

Error lowerSequenceConstruct(C &c) {
  if (c.numInputs() == 0)
    return c.error("needs at least one input tensor");
  std::vector<Value *> elems;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    NNC_ASSIGN_OR_RETURN(Value * t, tensorInput(c, i, "a sequence element"));
    if (!elems.empty() && t->dtype() != elems[0]->dtype())
      return c.error("input {} is {} but input 0 is {} (a sequence holds one element type)", i,
                     t->type().str(), elems[0]->type().str());
    elems.push_back(t);
  }
  DType t = elems[0]->dtype();
  return c.setCompositeOutput(0, StaticValue::sequence(t, std::move(elems)));
}

Error lowerSequenceInsert(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *s, sequenceInput(c, 0, "input_sequence", true));
  NNC_ASSIGN_OR_RETURN(Value * t, tensorInput(c, 1, "tensor"));
  NNC_TRY(checkElementType(c, *s, t));
  StaticValue out = *s;
  out.dtype = t->dtype();
  if (s->rows && !c.input(2) && !c.compositeInput(2)) { // at the end: one more row
    NNC_ASSIGN_OR_RETURN(Value * u,
                         c.emit(OpKind::Unsqueeze, {t}, {{"axes", std::vector<int64_t>{0}}}));
    NNC_ASSIGN_OR_RETURN(out.rows, c.emit(OpKind::Concat, {s->rows, u}, {{"axis", int64_t{0}}}));
    return c.setCompositeOutput(0, std::move(out));
  }
  // Into a sequence of a run-time length: among its elements, before its rows.
  const int64_t n = static_cast<int64_t>(s->elements.size());
  if (s->rows && c.input(2)) {
    NNC_ASSIGN_OR_RETURN(int64_t given, constScalar(c, 2, "the position"));
    if (given < 0)
      return c.error("position {} counts from the end of a sequence whose length is known "
                     "only at run time (a loop appends to it): unsupported",
                     given);
  }
  NNC_ASSIGN_OR_RETURN(int64_t p, position(c, 2, n, /*end=*/true, n));
  out.elements.insert(out.elements.begin() + p, t);
  return c.setCompositeOutput(0, std::move(out));
}

Error lowerSequenceErase(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *s, sequenceInput(c, 0, "input_sequence"));
  const int64_t n = static_cast<int64_t>(s->elements.size());
  if (n == 0)
    return c.error("cannot erase from an empty sequence");
  NNC_ASSIGN_OR_RETURN(int64_t p, position(c, 1, n, /*end=*/false, n - 1));
  StaticValue out = *s;
  out.elements.erase(out.elements.begin() + p);
  return c.setCompositeOutput(0, std::move(out));
}

Error lowerSequenceAt(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *s, sequenceInput(c, 0, "input_sequence", true));
  if (!c.input(1))
    return c.error("missing required input 1 (position)");
  if (s->rows) { // a run-time length: the gather checks the position when it runs
    NNC_ASSIGN_OR_RETURN(Value * p, tensorInput(c, 1, "position"));
    if (!oneElement(p) || (p->dtype() != DType::I32 && p->dtype() != DType::I64))
      return c.error("the position must be an int32 or int64 scalar, not {}", p->type().str());
    if (p->rank() > 0) {
      NNC_ASSIGN_OR_RETURN(p, c.emit(OpKind::Reshape, {p, c.i64Vector({})}));
    }
    NNC_ASSIGN_OR_RETURN(Value * all, stacked(c, *s));
    NNC_ASSIGN_OR_RETURN(Value * y, c.emit(OpKind::Gather, {all, p}, {{"axis", int64_t{0}}}));
    return c.setOutput(0, y);
  }
  const int64_t n = static_cast<int64_t>(s->elements.size());
  NNC_ASSIGN_OR_RETURN(int64_t p, position(c, 1, n, /*end=*/false, 0));
  return c.setOutput(0, s->elements[p]);
}

Error lowerSequenceLength(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *s, sequenceInput(c, 0, "input_sequence", true));
  Value *n = c.constant(
      Tensor::scalar<int64_t>(DType::I64, static_cast<int64_t>(s->elements.size())));
  if (!s->rows)
    return c.setOutput(0, n);
  NNC_ASSIGN_OR_RETURN(Value * r, c.emit(OpKind::ShapeOf, {s->rows},
                                         {{"start", int64_t{0}}, {"end", int64_t{1}}}));
  NNC_ASSIGN_OR_RETURN(r, c.emit(OpKind::Reshape, {r, c.i64Vector({})}));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(OpKind::Add, {r, n}));
  return c.setOutput(0, y);
}

Error lowerConcatFromSequence(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *s, sequenceInput(c, 0, "input_sequence", true));
  if (!c.hasAttr("axis"))
    return c.error("missing required attribute 'axis'");
  NNC_ASSIGN_OR_RETURN(int64_t axis, c.intAttr("axis", 0));
  NNC_ASSIGN_OR_RETURN(int64_t newAxis, c.intAttr("new_axis", 0));
  if (newAxis != 0 && newAxis != 1)
    return c.error("attribute 'new_axis' = {} must be 0 or 1", newAxis);
  if (s->rows) {
    // The elements stacked along a new axis 0, moved to `axis`; without new_axis, that axis
    // then merged into the one after it (static dims after it).
    const int64_t rank = s->rows->rank() - 1;
    NNC_ASSIGN_OR_RETURN(int64_t a, c.normalizeAxis(axis, rank + newAxis));
    NNC_ASSIGN_OR_RETURN(Value * all, stacked(c, *s));
    NNC_ASSIGN_OR_RETURN(Value * y, axisZeroTo(c, all, a));
    if (!newAxis) {
      std::vector<int64_t> shape(static_cast<size_t>(a), 0); // dims before `a` copied
      shape.push_back(-1);
      for (int64_t d = a + 2; d < y->rank(); ++d) {
        if (!y->shape()[d].isStatic())
          return c.error("concatenating a sequence whose length is known only at run time "
                         "along axis {} needs the elements' dims after it static, not {}",
                         a, s->rows->type().str());
        shape.push_back(y->shape()[d].value());
      }
      NNC_ASSIGN_OR_RETURN(y, c.emit(OpKind::Reshape, {y, c.i64Vector(shape)}));
    }
    return c.setOutput(0, y);
  }
  if (s->elements.empty())
    return c.error("the sequence is empty: there is nothing to concatenate");
  const int64_t rank = s->elements[0]->rank();
  NNC_ASSIGN_OR_RETURN(int64_t a, c.normalizeAxis(axis, rank + newAxis));
  std::vector<Value *> parts;
  for (Value *e : s->elements) {
    if (e->rank() != rank)
      return c.error("the sequence's tensors differ in rank ({} and {})", rank, e->rank());
    if (newAxis) {
      NNC_ASSIGN_OR_RETURN(e, c.emit(OpKind::Unsqueeze, {e}, {{"axes", std::vector<int64_t>{a}}}));
    }
    parts.push_back(e);
  }
  if (parts.size() == 1)
    return c.setOutput(0, parts[0]);
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(OpKind::Concat, parts, {{"axis", a}}));
  return c.setOutput(0, y);
}

Error lowerSplitToSequence(C &c) {
  NNC_ASSIGN_OR_RETURN(Value * x, tensorInput(c, 0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, c.intAttr("axis", 0));
  NNC_ASSIGN_OR_RETURN(int64_t keepdims, c.intAttr("keepdims", 1));
  if (x->rank() == 0)
    return c.error("the input is a scalar; it needs an axis to split");
  NNC_ASSIGN_OR_RETURN(int64_t a, c.normalizeAxis(axis, x->rank()));
  const Dim &d = x->shape()[a];
  if (!d.isStatic())
    return c.error("the input's axis {} has extent {}, known only at run time: the number of "
                   "tensors in the sequence must be known at import time",
                   a, d.str());
  const int64_t len = d.value();
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!c.input(1)) {
    // No split: pieces of one, the split axis kept or dropped as keepdims says.
    if (len > kMaxSequenceLength)
      return c.error("the split makes {} tensors, more than the {} a sequence may hold", len,
                     kMaxSequenceLength);
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = keepdims == 0;
  } else {
    NNC_ASSIGN_OR_RETURN(Tensor split, c.constantInput(1, "split"));
    if (split.dtype() != DType::I32 && split.dtype() != DType::I64)
      return c.error("'split' must be int32 or int64, not {}", dtypeName(split.dtype()));
    if (split.rank() == 0) {
      int64_t k = split.elementAsInt(0);
      if (k <= 0)
        return c.error("'split' = {} must be positive", k);
      if ((len + k - 1) / k > kMaxSequenceLength)
        return c.error("the split makes {} tensors, more than the {} a sequence may hold",
                       (len + k - 1) / k, kMaxSequenceLength);
      for (int64_t at = 0; at < len; at += k)
        sizes.push_back(std::min(k, len - at));
    } else if (split.rank() == 1) {
      sizes = split.toInt64Vector();
      int64_t sum = 0;
      for (int64_t v : sizes) {
        if (v < 0)
          return c.error("'split' holds a negative size {}", v);
        sum += v;
      }
      if (sum != len)
        return c.error("'split' sizes sum to {} but the input's axis {} has extent {}", sum, a,
                       len);
    } else {
      return c.error("'split' must be a scalar or a 1-D tensor, not of rank {}", split.rank());
    }
  }
  if (static_cast<int64_t>(sizes.size()) > kMaxSequenceLength)
    return c.error("the split makes {} tensors, more than the {} a sequence may hold", sizes.size(),
                   kMaxSequenceLength);
  std::vector<Value *> elems;
  if (sizes.size() == 1) {
    elems.push_back(x);
  } else if (!sizes.empty()) {
    NNC_ASSIGN_OR_RETURN(elems, c.emitMulti(OpKind::Split, {x}, {{"axis", a}, {"sizes", sizes}},
                                            static_cast<int>(sizes.size())));
  }
  if (squeeze)
    for (Value *&e : elems) {
      NNC_ASSIGN_OR_RETURN(e, c.emit(OpKind::Squeeze, {e}, {{"axes", std::vector<int64_t>{a}}}));
    }
  return c.setCompositeOutput(0, StaticValue::sequence(x->dtype(), std::move(elems)));
}

Error lowerSequenceMap(C &c) {
  NNC_ASSIGN_OR_RETURN(const StaticValue *first, sequenceInput(c, 0, "input_sequence"));
  const size_t n = first->elements.size();
  for (size_t i = 1; i < c.numInputs(); ++i)
    if (const StaticValue *s = c.compositeInput(i)) {
      if (s->optional)
        return c.error("additional input {} is an optional; SequenceMap takes sequences and "
                       "tensors",
                       i);
      NNC_TRY(sequenceInput(c, i, "additional input").takeError());
      if (s->elements.size() != n)
        return c.error("input {} is a sequence of {} tensors but input 0 has {}", i,
                       s->elements.size(), n);
    } else if (!c.input(i)) {
      return c.error("additional input {} is missing", i);
    }
  NNC_ASSIGN_OR_RETURN(const onnx::GraphProto *body, c.graphAttr("body"));
  const size_t outs = static_cast<size_t>(body->output_size());
  std::vector<StaticValue> results(outs);
  for (size_t o = 0; o < outs; ++o) {
    // The element type from the body's declaration: an empty sequence still has one.
    const onnx::TypeProto &t = body->output(static_cast<int>(o)).type();
    if (t.has_tensor_type() && t.tensor_type().elem_type() != 0)
      if (std::optional<DType> dt = dtypeFromOnnx(t.tensor_type().elem_type()))
        results[o].dtype = *dt;
  }
  for (size_t k = 0; k < n; ++k) {
    std::vector<ImportValue> args;
    for (size_t i = 0; i < c.numInputs(); ++i) {
      const StaticValue *s = c.compositeInput(i);
      args.push_back(s ? ImportValue(s->elements[k]) : ImportValue(c.input(i)));
    }
    NNC_ASSIGN_OR_RETURN(std::vector<ImportValue> ys, c.inlineSubgraph("body", args));
    for (size_t o = 0; o < outs; ++o) {
      Value *const *y = std::get_if<Value *>(&ys[o]);
      if (!y)
        return c.error("the body's output {} is a {}; SequenceMap's body must return tensors",
                       o, std::get<StaticValue>(ys[o]).kindName());
      results[o].dtype = (*y)->dtype();
      results[o].elements.push_back(*y);
    }
  }
  for (size_t o = 0; o < outs; ++o)
    NNC_TRY(c.setCompositeOutput(o, std::move(results[o])));
  return Error::success();
}

/// Identity of a tensor, a sequence or an optional.
Error lowerIdentity(C &c) {
  if (c.numInputs() != 1)
    return c.error("expects 1 inputs, got {}", c.numInputs());
  if (const StaticValue *s = c.compositeInput(0))
    return c.setCompositeOutput(0, *s);
  NNC_ASSIGN_OR_RETURN(Value * x, c.requiredInput(0, "input"));
  return c.setOutput(0, x);
}

/// The TypeProto attribute `type` of an Optional node: whether the absent optional would hold
/// a sequence, and its element type.
Expected<std::pair<bool, DType>> optionalType(C &c) {
  for (const onnx::AttributeProto &a : c.proto().attribute()) {
    if (a.name() != "type")
      continue;
    if (!a.has_tp())
      return c.error("attribute 'type' must be a type");
    const onnx::TypeProto *t = &a.tp();
    bool seq = t->has_sequence_type();
    if (seq)
      t = &t->sequence_type().elem_type();
    if (!t->has_tensor_type())
      return c.error("attribute 'type' must be a tensor or a sequence of tensors type");
    std::optional<DType> dt = dtypeFromOnnx(t->tensor_type().elem_type());
    if (!dt)
      return c.error("attribute 'type' has unsupported element type {}",
                     t->tensor_type().elem_type());
    return std::make_pair(seq, *dt);
  }
  return c.error("an Optional without an input needs the attribute 'type'");
}

Error lowerOptional(C &c) {
  StaticValue out;
  out.optional = true;
  if (const StaticValue *s = c.compositeInput(0)) {
    if (s->optional)
      return c.error("the input is an optional; an optional of an optional is unsupported");
    out.ofSequence = true;
    out.dtype = s->dtype;
    out.elements = s->elements;
    out.rows = s->rows;
  } else if (Value *x = c.input(0)) {
    out.ofSequence = false;
    out.dtype = x->dtype();
    out.elements = {x};
  } else {
    NNC_ASSIGN_OR_RETURN(auto type, optionalType(c));
    out.present = false;
    out.ofSequence = type.first;
    out.dtype = type.second;
  }
  return c.setCompositeOutput(0, std::move(out));
}

Error lowerOptionalHasElement(C &c) {
  bool has = c.input(0) != nullptr;
  if (const StaticValue *s = c.compositeInput(0))
    has = !s->optional || s->present;
  return c.setOutput(0, c.constant(Tensor::scalar<bool>(DType::Bool, has)));
}

Error lowerOptionalGetElement(C &c) {
  const StaticValue *s = c.compositeInput(0);
  if (!s) {
    NNC_ASSIGN_OR_RETURN(Value * x, c.requiredInput(0, "input"));
    return c.setOutput(0, x);
  }
  if (!s->optional)
    return c.setCompositeOutput(0, *s);
  if (!s->present)
    return c.error("the optional is empty: it has no element to get");
  if (!s->ofSequence)
    return c.setOutput(0, s->elements.at(0));
  StaticValue seq = StaticValue::sequence(s->dtype, s->elements);
  seq.rows = s->rows;
  return c.setCompositeOutput(0, std::move(seq));
}

} // namespace

void registerSequenceLowerings(LoweringTable &t) {
  auto add = [&](const char *name, std::vector<std::string> attrs, LowerFn f) {
    t[name] = OpLowering{std::move(attrs), std::move(f), /*composite=*/true};
  };
  add("SequenceEmpty", {"dtype"}, lowerSequenceEmpty);
  add("SequenceConstruct", {}, lowerSequenceConstruct);
  add("SequenceInsert", {}, lowerSequenceInsert);
  add("SequenceErase", {}, lowerSequenceErase);
  add("SequenceAt", {}, lowerSequenceAt);
  add("SequenceLength", {}, lowerSequenceLength);
  add("ConcatFromSequence", {"axis", "new_axis"}, lowerConcatFromSequence);
  add("SplitToSequence", {"axis", "keepdims"}, lowerSplitToSequence);
  add("SequenceMap", {"body"}, lowerSequenceMap);
  add("Optional", {"type"}, lowerOptional);
  add("OptionalHasElement", {}, lowerOptionalHasElement);
  add("OptionalGetElement", {}, lowerOptionalGetElement);
  add("Identity", {}, lowerIdentity);
}

} // namespace nnc::onnxfe

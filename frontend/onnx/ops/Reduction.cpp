// ONNX lowerings of the reductions (ReduceX, ArgMax/ArgMin), CumSum, CumProd and TopK.
#include <cstdint>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {
namespace {

Attribute intA(int64_t v) {
  return Attribute(v);
}

Expected<Value *> unary(LoweringContext &ctx, OpKind k, Value *a) {
  return ctx.emit(k, {a});
}
Expected<Value *> binary(LoweringContext &ctx, OpKind k, Value *a, Value *b) {
  return ctx.emit(k, {a, b});
}
Expected<Value *> castTo(LoweringContext &ctx, Value *v, DType t) {
  if (v->dtype() == t)
    return v;
  return ctx.emit(OpKind::Cast, {v}, {{"to", Attribute(t)}});
}

/// What every ReduceX shares: the data, its normalized axes (empty: all) and keepdims.
struct ReduceArgs {
  Value *x = nullptr;
  std::vector<int64_t> axes;
  int64_t keepdims = 1;
  /// noop_with_empty_axes=1 and no axes: nothing is reduced, but a composite ReduceX still
  /// applies its elementwise parts (the spec: "ReduceSumSquare acts as a vanilla Square").
  bool identity = false;
};

/// The IR reduction `kind` over r's axes, or `x` itself when nothing is reduced.
Expected<Value *> reduce(LoweringContext &ctx, OpKind kind, const ReduceArgs &r, Value *x,
                         int64_t keepdims) {
  if (r.identity)
    return x;
  return ctx.emit(kind, {x}, {{"axes", Attribute(r.axes)}, {"keepdims", Attribute(keepdims)}});
}

Expected<ReduceArgs> reduceArgs(LoweringContext &ctx) {
  ReduceArgs r;
  NNC_ASSIGN_OR_RETURN(r.x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(r.keepdims, ctx.intAttr("keepdims", 1));
  NNC_ASSIGN_OR_RETURN(int64_t noop, ctx.intAttr("noop_with_empty_axes", 0));
  // Axes are an attribute up to ReduceSum-11 / other ReduceX-13, an optional input after.
  if (ctx.hasAttr("axes")) {
    NNC_ASSIGN_OR_RETURN(r.axes, ctx.intsAttr("axes", {}));
  } else if (ctx.input(1)) {
    NNC_ASSIGN_OR_RETURN(Tensor t, ctx.constantInput(1, "axes"));
    if (!isInteger(t.dtype()))
      return ctx.error("input 'axes' must be an integer tensor, got {}", dtypeName(t.dtype()));
    r.axes = t.toInt64Vector();
  }
  if (r.axes.empty() && noop) {
    r.identity = true;
    return r;
  }
  int64_t rank = r.x->rank();
  std::vector<bool> seen(rank, false);
  for (int64_t &a : r.axes) {
    if (a < -rank || a >= rank)
      return ctx.error("axis {} is out of range for rank {}", a, rank);
    if (a < 0)
      a += rank;
    if (seen[a])
      return ctx.error("axis {} is repeated in 'axes'", a);
    seen[a] = true;
  }
  return r;
}

/// A ReduceX that is one IR reduction.
LowerFn direct(OpKind kind) {
  return [kind](LoweringContext &ctx) -> Error {
    NNC_ASSIGN_OR_RETURN(ReduceArgs r, reduceArgs(ctx));
    NNC_ASSIGN_OR_RETURN(Value * y, reduce(ctx, kind, r, r.x, r.keepdims));
    return ctx.setOutput(0, y);
  };
}

/// Types without the float functions (integers) are computed in f64 and cast back, like the
/// ONNX reference (numpy) does.
DType computeType(DType t) {
  return isFloat(t) ? t : DType::F64;
}

/// ReduceL1 = sum|x|, ReduceSumSquare = sum x^2, ReduceL2 = sqrt(sum x^2),
/// ReduceLogSum = log(sum x).
enum class Composite { L1, L2, SumSquare, LogSum };

LowerFn composite(Composite c) {
  return [c](LoweringContext &ctx) -> Error {
    NNC_ASSIGN_OR_RETURN(ReduceArgs r, reduceArgs(ctx));
    Value *x = r.x;
    if (c == Composite::L1) {
      NNC_ASSIGN_OR_RETURN(x, unary(ctx, OpKind::Abs, x));
    } else if (c != Composite::LogSum) {
      NNC_ASSIGN_OR_RETURN(x, binary(ctx, OpKind::Mul, x, x));
    }
    NNC_ASSIGN_OR_RETURN(Value * y, reduce(ctx, OpKind::ReduceSum, r, x, r.keepdims));
    if (c == Composite::L2 || c == Composite::LogSum) {
      DType t = y->dtype();
      NNC_ASSIGN_OR_RETURN(y, castTo(ctx, y, computeType(t)));
      NNC_ASSIGN_OR_RETURN(y, unary(ctx, c == Composite::L2 ? OpKind::Sqrt : OpKind::Log, y));
      NNC_ASSIGN_OR_RETURN(y, castTo(ctx, y, t));
    }
    return ctx.setOutput(0, y);
  };
}

/// log(sum(exp(x))) computed stably as m + log(sum(exp(x - m))) with m = max(x), where an
/// infinite m is replaced by 0 (so all -inf gives -inf, not NaN).
Error lowerReduceLogSumExp(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(ReduceArgs r, reduceArgs(ctx));
  DType t = r.x->dtype();
  DType ct = computeType(t);
  NNC_ASSIGN_OR_RETURN(Value * x, castTo(ctx, r.x, ct));
  NNC_ASSIGN_OR_RETURN(Value * m, reduce(ctx, OpKind::ReduceMax, r, x, 1));
  NNC_ASSIGN_OR_RETURN(Value * inf, unary(ctx, OpKind::IsInf, m));
  NNC_ASSIGN_OR_RETURN(m, ctx.emit(OpKind::Select, {inf, ctx.scalar(ct, 0.0), m}));
  NNC_ASSIGN_OR_RETURN(Value * d, binary(ctx, OpKind::Sub, x, m));
  NNC_ASSIGN_OR_RETURN(Value * e, unary(ctx, OpKind::Exp, d));
  NNC_ASSIGN_OR_RETURN(Value * s, reduce(ctx, OpKind::ReduceSum, r, e, r.keepdims));
  NNC_ASSIGN_OR_RETURN(Value * l, unary(ctx, OpKind::Log, s));
  if (!r.keepdims && !r.identity) {
    std::vector<int64_t> axes = r.axes;
    if (axes.empty())
      for (int64_t i = 0; i < x->rank(); ++i)
        axes.push_back(i);
    NNC_ASSIGN_OR_RETURN(m, ctx.emit(OpKind::Squeeze, {m}, {{"axes", Attribute(axes)}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, binary(ctx, OpKind::Add, l, m));
  NNC_ASSIGN_OR_RETURN(y, castTo(ctx, y, t));
  return ctx.setOutput(0, y);
}

LowerFn argReduce(OpKind kind) {
  return [kind](LoweringContext &ctx) -> Error {
    NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
    NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 0));
    NNC_ASSIGN_OR_RETURN(int64_t keepdims, ctx.intAttr("keepdims", 1));
    NNC_ASSIGN_OR_RETURN(int64_t last, ctx.intAttr("select_last_index", 0));
    NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(kind, {x},
                                             {{"axis", intA(axis)},
                                              {"keepdims", intA(keepdims)},
                                              {"select_last_index", intA(last)}}));
    return ctx.setOutput(0, y);
  };
}

/// CumSum and CumProd (`kind`): the axis input must be a constant.
Error lowerCumulative(LoweringContext &ctx, OpKind kind) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  if (!ctx.input(1))
    return ctx.error("missing required input 1 ('axis')");
  NNC_ASSIGN_OR_RETURN(Tensor axisT, ctx.constantInput(1, "axis"));
  if (!isInteger(axisT.dtype()) || axisT.numElements() != 1)
    return ctx.error("input 'axis' must be one integer");
  int64_t axis = axisT.elementAsInt(0);
  if (axis < -x->rank() || axis >= x->rank())
    return ctx.error("axis {} is out of range for rank {}", axis, x->rank());
  NNC_ASSIGN_OR_RETURN(int64_t exclusive, ctx.intAttr("exclusive", 0));
  NNC_ASSIGN_OR_RETURN(int64_t reverse, ctx.intAttr("reverse", 0));
  NNC_ASSIGN_OR_RETURN(
      Value * y,
      ctx.emit(kind, {x},
               {{"axis", intA(axis)}, {"exclusive", intA(exclusive)}, {"reverse", intA(reverse)}}));
  return ctx.setOutput(0, y);
}

Error lowerTopK(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  Value *k = nullptr;
  if (ctx.input(1)) { // TopK-10 on: k is a 1-element input.
    k = ctx.input(1);
    if (!isInteger(k->dtype()))
      return ctx.error("input 'K' must be an integer tensor, got {}", dtypeName(k->dtype()));
    NNC_ASSIGN_OR_RETURN(k, castTo(ctx, k, DType::I64));
  } else if (ctx.hasAttr("k")) { // TopK-1.
    NNC_ASSIGN_OR_RETURN(int64_t kv, ctx.intAttr("k", 0));
    k = ctx.i64Vector({kv});
  } else {
    return ctx.error("missing 'K' (input 1)");
  }
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", -1));
  NNC_ASSIGN_OR_RETURN(int64_t largest, ctx.intAttr("largest", 1));
  NNC_ASSIGN_OR_RETURN(int64_t sorted, ctx.intAttr("sorted", 1));
  NNC_ASSIGN_OR_RETURN(
      std::vector<Value *> outs,
      ctx.emitMulti(OpKind::TopK, {x, k},
                    {{"axis", intA(axis)}, {"largest", intA(largest)}, {"sorted", intA(sorted)}},
                    2));
  NNC_TRY(ctx.setOutput(0, outs[0]));
  return ctx.setOutput(1, outs[1]);
}

} // namespace

void registerReductionLowerings(LoweringTable &t) {
  const std::vector<std::string> reduceAttrNames{"axes", "keepdims", "noop_with_empty_axes"};
  t["ReduceSum"] = {reduceAttrNames, direct(OpKind::ReduceSum)};
  t["ReduceMean"] = {reduceAttrNames, direct(OpKind::ReduceMean)};
  t["ReduceMax"] = {reduceAttrNames, direct(OpKind::ReduceMax)};
  t["ReduceMin"] = {reduceAttrNames, direct(OpKind::ReduceMin)};
  t["ReduceProd"] = {reduceAttrNames, direct(OpKind::ReduceProd)};
  t["ReduceL1"] = {reduceAttrNames, composite(Composite::L1)};
  t["ReduceL2"] = {reduceAttrNames, composite(Composite::L2)};
  t["ReduceSumSquare"] = {reduceAttrNames, composite(Composite::SumSquare)};
  t["ReduceLogSum"] = {reduceAttrNames, composite(Composite::LogSum)};
  t["ReduceLogSumExp"] = {reduceAttrNames, lowerReduceLogSumExp};
  t["ArgMax"] = {{"axis", "keepdims", "select_last_index"}, argReduce(OpKind::ArgMax)};
  t["ArgMin"] = {{"axis", "keepdims", "select_last_index"}, argReduce(OpKind::ArgMin)};
  t["CumSum"] = {{"exclusive", "reverse"},
                 [](LoweringContext &ctx) { return lowerCumulative(ctx, OpKind::CumSum); }};
  t["CumProd"] = {{"exclusive", "reverse"},
                  [](LoweringContext &ctx) { return lowerCumulative(ctx, OpKind::CumProd); }};
  t["TopK"] = {{"axis", "k", "largest", "sorted"}, lowerTopK};
}

} // namespace nnc::onnxfe

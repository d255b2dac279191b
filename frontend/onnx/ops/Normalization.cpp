// ONNX lowerings of the normalization operators (batch, layer, RMS, group, instance, Lp,
// mean-variance); registered from NN.cpp.
#include <optional>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

void registerNormalizationLowerings(LoweringTable &t);

namespace {

using Ints = std::vector<int64_t>;

Expected<Value *> castTo(LoweringContext &ctx, Value *v, DType t) {
  if (v->dtype() == t)
    return v;
  return ctx.emit(OpKind::Cast, {v}, {{"to", t}});
}

/// The stash_type attribute (an ONNX type code, default float).
Expected<DType> stashType(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("stash_type", 1));
  std::optional<DType> t = dtypeFromOnnx(static_cast<int>(code));
  if (!t || !isFloat(*t))
    return ctx.error("attribute 'stash_type' has unsupported type code {}", code);
  return *t;
}

int wantedResults(LoweringContext &ctx, int maxResults) {
  int n = 1;
  for (int i = 1; i < maxResults; ++i)
    if (ctx.hasOutput(i))
      n = i + 1;
  return n;
}

// ---- LayerNormalization, RMSNormalization -----------------------------------------------------

Error lowerLayerNorm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "Scale"));
  Value *bias = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", -1));
  NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(axis, x->rank()));
  NNC_ASSIGN_OR_RETURN(double eps, ctx.floatAttr("epsilon", 1e-5));
  NNC_ASSIGN_OR_RETURN(DType stash, stashType(ctx));
  std::vector<Value *> ops = {x, scale};
  if (bias)
    ops.push_back(bias);
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> ys,
                       ctx.emitMulti(OpKind::LayerNorm, ops,
                                     {{"axis", axis}, {"epsilon", eps}, {"stash_type", stash}},
                                     wantedResults(ctx, 3)));
  for (size_t i = 0; i < ys.size(); ++i)
    NNC_TRY(ctx.setOutput(i, ys[i]));
  return Error::success();
}

Error lowerRMSNorm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "scale"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", -1));
  NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(axis, x->rank()));
  NNC_ASSIGN_OR_RETURN(double eps, ctx.floatAttr("epsilon", 1e-5));
  NNC_ASSIGN_OR_RETURN(DType stash, stashType(ctx));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::RMSNorm, {x, scale},
                                           {{"axis", axis},
                                            {"epsilon", eps},
                                            {"stash_type", stash}}));
  return ctx.setOutput(0, y);
}

// ---- GroupNormalization, InstanceNormalization ------------------------------------------------

/// GroupNormalization-18 takes scale and bias per group; repeats each value C/G times to give
/// the per-channel form of opset 21 (and of the IR op).
Expected<Value *> perGroupToPerChannel(LoweringContext &ctx, Value *x, Value *v, int64_t groups) {
  const Dim &c = x->shape()[1];
  if (c.isStatic()) {
    int64_t channels = c.value();
    if (channels % groups != 0)
      return ctx.error("{} channels are not divisible by num_groups = {}", channels, groups);
    std::vector<int64_t> idx(channels);
    for (int64_t i = 0; i < channels; ++i)
      idx[i] = i / (channels / groups);
    Value *indices = ctx.i64Vector(idx);
    return ctx.emit(OpKind::Gather, {v, indices}, {{"axis", int64_t{0}}});
  }
  Value *g = ctx.i64Vector({groups});
  NNC_ASSIGN_OR_RETURN(Value * cdim, ctx.emit(OpKind::ShapeOf, {x},
                                              {{"start", int64_t{1}}, {"end", int64_t{2}}}));
  NNC_ASSIGN_OR_RETURN(Value * perGroup, ctx.emit(OpKind::Div, {cdim, g}));
  NNC_ASSIGN_OR_RETURN(Value * target,
                       ctx.emit(OpKind::Concat, {g, perGroup}, {{"axis", int64_t{0}}}));
  NNC_ASSIGN_OR_RETURN(Value * col, ctx.emit(OpKind::Unsqueeze, {v}, {{"axes", Ints{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * grid, ctx.emit(OpKind::Expand, {col, target}));
  return ctx.emit(OpKind::Reshape, {grid, ctx.i64Vector({-1})});
}

Error lowerGroupNorm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "scale"));
  NNC_ASSIGN_OR_RETURN(Value * bias, ctx.requiredInput(2, "bias"));
  NNC_USER_CHECK(ctx.hasAttr("num_groups"), "{}: missing required attribute 'num_groups'",
                 ctx.place());
  NNC_ASSIGN_OR_RETURN(int64_t groups, ctx.intAttr("num_groups", 1));
  NNC_USER_CHECK(groups >= 1, "{}: num_groups must be >= 1, got {}", ctx.place(), groups);
  NNC_USER_CHECK(x->rank() >= 2, "{}: input must have rank >= 2, got {}", ctx.place(),
                 x->type().str());
  NNC_ASSIGN_OR_RETURN(double eps, ctx.floatAttr("epsilon", 1e-5));
  DType stash = DType::F32;
  if (ctx.opset() >= 21) {
    NNC_ASSIGN_OR_RETURN(stash, stashType(ctx));
  } else {
    NNC_ASSIGN_OR_RETURN(scale, perGroupToPerChannel(ctx, x, scale, groups));
    NNC_ASSIGN_OR_RETURN(bias, perGroupToPerChannel(ctx, x, bias, groups));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::GroupNorm, {x, scale, bias},
                                           {{"num_groups", groups},
                                            {"epsilon", eps},
                                            {"stash_type", stash}}));
  return ctx.setOutput(0, y);
}

Error lowerInstanceNorm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "scale"));
  NNC_ASSIGN_OR_RETURN(Value * bias, ctx.requiredInput(2, "B"));
  NNC_ASSIGN_OR_RETURN(double eps, ctx.floatAttr("epsilon", 1e-5));
  NNC_ASSIGN_OR_RETURN(Value * y,
                       ctx.emit(OpKind::InstanceNorm, {x, scale, bias}, {{"epsilon", eps}}));
  return ctx.setOutput(0, y);
}

// ---- BatchNormalization -----------------------------------------------------------------------

/// Inference with per-activation statistics (spatial = 0 before opset 9): parameters of shape
/// C x D1 x ... broadcast against N x C x D1 x ...
Expected<Value *> perActivationBatchNorm(LoweringContext &ctx, Value *x, Value *scale,
                                         Value *bias, Value *mean, Value *var, double eps) {
  NNC_ASSIGN_OR_RETURN(Value * ve, ctx.emit(OpKind::Add, {var, ctx.scalar(var->dtype(), eps)}));
  NNC_ASSIGN_OR_RETURN(Value * sd, ctx.emit(OpKind::Sqrt, {ve}));
  NNC_ASSIGN_OR_RETURN(Value * d, ctx.emit(OpKind::Sub, {x, mean}));
  NNC_ASSIGN_OR_RETURN(Value * n, ctx.emit(OpKind::Div, {d, sd}));
  NNC_ASSIGN_OR_RETURN(Value * s, ctx.emit(OpKind::Mul, {n, scale}));
  return ctx.emit(OpKind::Add, {s, bias});
}

Error lowerBatchNorm(LoweringContext &ctx) {
  static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
  Value *in[5];
  for (size_t i = 0; i < 5; ++i) {
    NNC_ASSIGN_OR_RETURN(in[i], ctx.requiredInput(i, names[i]));
  }
  Value *x = in[0];
  NNC_USER_CHECK(x->rank() >= 2, "{}: input must have rank >= 2, got {}", ctx.place(),
                 x->type().str());
  NNC_ASSIGN_OR_RETURN(double eps, ctx.floatAttr("epsilon", 1e-5));
  NNC_ASSIGN_OR_RETURN(double momentum, ctx.floatAttr("momentum", 0.9));
  int64_t opset = ctx.opset();
  bool training = false;
  if (opset >= 14) {
    NNC_ASSIGN_OR_RETURN(int64_t t, ctx.intAttr("training_mode", 0));
    training = t != 0;
  } else {
    // Before 14 the training form is the one with the statistics outputs.
    NNC_ASSIGN_OR_RETURN(int64_t isTest, ctx.intAttr("is_test", 0));
    bool statsWanted = false;
    for (size_t i = 1; i < ctx.numOutputs(); ++i)
      statsWanted = statsWanted || ctx.hasOutput(i);
    training = statsWanted && !(opset < 7 && isTest != 0);
  }
  // Parameters in X's dtype (opset 15 lets them differ).
  Value *p[4];
  for (size_t i = 0; i < 4; ++i) {
    NNC_ASSIGN_OR_RETURN(p[i], castTo(ctx, in[i + 1], x->dtype()));
  }

  if (ctx.forTraining()) {
    // nnc::Trainer switches this to batch statistics and updates input_mean and input_var.
    // Outputs running_mean and running_var are those updates, which only the Trainer makes:
    // the forward pass sees the statistics before the step (the step's outputs carry them).
    NNC_USER_CHECK(!ctx.hasOutput(3) && !ctx.hasOutput(4),
                   "{}: outputs saved_mean and saved_var are unsupported in training", ctx.place());
    NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::BatchNorm, {x, p[0], p[1], p[2], p[3]},
                                             {{"epsilon", eps}, {"momentum", momentum}}));
    NNC_TRY(ctx.setOutput(0, y));
    NNC_TRY(ctx.setOutput(1, p[2]));
    return ctx.setOutput(2, p[3]);
  }
  if (!training) {
    NNC_ASSIGN_OR_RETURN(int64_t spatial, ctx.intAttr("spatial", 1));
    Value *y;
    if (opset < 9 && spatial == 0 && p[0]->rank() == x->rank() - 1 && p[0]->rank() > 1) {
      NNC_ASSIGN_OR_RETURN(y, perActivationBatchNorm(ctx, x, p[0], p[1], p[2], p[3], eps));
    } else {
      NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::BatchNorm, {x, p[0], p[1], p[2], p[3]},
                                       {{"epsilon", eps}}));
    }
    return ctx.setOutput(0, y);
  }

  // Training: batch statistics over every axis but 1 (population variance), Y normalized
  // with them, running statistics blended with `momentum`.
  Ints axes = {0};
  for (int64_t i = 2; i < x->rank(); ++i)
    axes.push_back(i);
  NNC_ASSIGN_OR_RETURN(Value * meanK, ctx.emit(OpKind::ReduceMean, {x},
                                               {{"axes", axes}, {"keepdims", int64_t{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * d, ctx.emit(OpKind::Sub, {x, meanK}));
  NNC_ASSIGN_OR_RETURN(Value * d2, ctx.emit(OpKind::Mul, {d, d}));
  NNC_ASSIGN_OR_RETURN(Value * curMean, ctx.emit(OpKind::ReduceMean, {x},
                                                 {{"axes", axes}, {"keepdims", int64_t{0}}}));
  NNC_ASSIGN_OR_RETURN(Value * curVar, ctx.emit(OpKind::ReduceMean, {d2},
                                                {{"axes", axes}, {"keepdims", int64_t{0}}}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::BatchNorm, {x, p[0], p[1], curMean, curVar},
                                           {{"epsilon", eps}}));
  NNC_TRY(ctx.setOutput(0, y));

  auto blend = [&](Value *running, Value *current) -> Expected<Value *> {
    DType t = running->dtype();
    NNC_ASSIGN_OR_RETURN(Value * cur, castTo(ctx, current, t));
    NNC_ASSIGN_OR_RETURN(Value * a, ctx.emit(OpKind::Mul, {running, ctx.scalar(t, momentum)}));
    NNC_ASSIGN_OR_RETURN(Value * b, ctx.emit(OpKind::Mul, {cur, ctx.scalar(t, 1.0 - momentum)}));
    return ctx.emit(OpKind::Add, {a, b});
  };
  if (ctx.hasOutput(1)) {
    NNC_ASSIGN_OR_RETURN(Value * runMean, blend(in[3], curMean));
    NNC_TRY(ctx.setOutput(1, runMean));
  }
  if (ctx.hasOutput(2)) {
    NNC_ASSIGN_OR_RETURN(Value * runVar, blend(in[4], curVar));
    NNC_TRY(ctx.setOutput(2, runVar));
  }
  // Before opset 14: saved_mean and saved_var, the batch statistics.
  if (ctx.hasOutput(3)) {
    NNC_ASSIGN_OR_RETURN(Value * savedMean, castTo(ctx, curMean, in[3]->dtype()));
    NNC_TRY(ctx.setOutput(3, savedMean));
  }
  if (ctx.hasOutput(4)) {
    NNC_ASSIGN_OR_RETURN(Value * savedVar, castTo(ctx, curVar, in[4]->dtype()));
    NNC_TRY(ctx.setOutput(4, savedVar));
  }
  return Error::success();
}

// ---- LpNormalization, MeanVarianceNormalization -----------------------------------------------

Error lowerLpNorm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_USER_CHECK(x->rank() >= 1, "{}: input must have rank >= 1", ctx.place());
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", -1));
  NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(axis, x->rank()));
  NNC_ASSIGN_OR_RETURN(int64_t p, ctx.intAttr("p", 2));
  NNC_USER_CHECK(p == 1 || p == 2, "{}: attribute 'p' must be 1 or 2, got {}", ctx.place(), p);
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::LpNorm, {x}, {{"axis", axis}, {"p", p}}));
  return ctx.setOutput(0, y);
}

/// The spec's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
Error lowerMVN(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Ints axes, ctx.intsAttr("axes", Ints{0, 2, 3}));
  for (int64_t &a : axes) {
    NNC_ASSIGN_OR_RETURN(a, ctx.normalizeAxis(a, x->rank(), "axes"));
  }
  NNC_USER_CHECK(!axes.empty(), "{}: attribute 'axes' must not be empty", ctx.place());
  const AttrMap reduce = {{"axes", axes}, {"keepdims", int64_t{1}}};
  NNC_ASSIGN_OR_RETURN(Value * mean, ctx.emit(OpKind::ReduceMean, {x}, reduce));
  NNC_ASSIGN_OR_RETURN(Value * meanSq, ctx.emit(OpKind::Mul, {mean, mean}));
  NNC_ASSIGN_OR_RETURN(Value * xSq, ctx.emit(OpKind::Mul, {x, x}));
  NNC_ASSIGN_OR_RETURN(Value * sqMean, ctx.emit(OpKind::ReduceMean, {xSq}, reduce));
  NNC_ASSIGN_OR_RETURN(Value * var, ctx.emit(OpKind::Sub, {sqMean, meanSq}));
  NNC_ASSIGN_OR_RETURN(Value * sd, ctx.emit(OpKind::Sqrt, {var}));
  NNC_ASSIGN_OR_RETURN(Value * centered, ctx.emit(OpKind::Sub, {x, mean}));
  NNC_ASSIGN_OR_RETURN(Value * denom, ctx.emit(OpKind::Add, {sd, ctx.scalar(x->dtype(), 1e-9)}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Div, {centered, denom}));
  return ctx.setOutput(0, y);
}

} // namespace

void registerNormalizationLowerings(LoweringTable &t) {
  t["LayerNormalization"] = {{"axis", "epsilon", "stash_type"}, lowerLayerNorm};
  t["RMSNormalization"] = {{"axis", "epsilon", "stash_type"}, lowerRMSNorm};
  t["GroupNormalization"] = {{"epsilon", "num_groups", "stash_type"}, lowerGroupNorm};
  t["InstanceNormalization"] = {{"consumed_inputs", "epsilon"}, lowerInstanceNorm};
  t["BatchNormalization"] = {{"consumed_inputs", "epsilon", "is_test", "momentum", "spatial",
                              "training_mode"},
                             lowerBatchNorm};
  t["LpNormalization"] = {{"axis", "p"}, lowerLpNorm};
  t["MeanVarianceNormalization"] = {{"axes"}, lowerMVN};
}

} // namespace nnc::onnxfe

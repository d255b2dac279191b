// ONNX lowering of FlexAttention (domain ai.onnx.preview, version 1) as the composition its
// function body states: K and V repeated to the query heads (GQA), Q and K pre-scaled by
// sqrt(scale), their matmul cast to softmax_precision, the score_mod subgraph inlined,
// softmax over the last axis, the prob_mod subgraph inlined, and the matmul with V (in
// softmax_precision, cast back). Matmul, softmax and the modifiers' ops then meet the
// attention fusion and its kernels like any other graph.
#include <cmath>
#include <optional>
#include <unordered_map>

#include "nnc/ir/Loop.h"
#include "onnx/Lowering.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

/// x [B, Hkv, S, D] with each head repeated `group` times in a row: [B, Hkv * group, S, D].
Expected<Value *> repeatHeads(LoweringContext &ctx, Value *x, int64_t group) {
  if (group == 1)
    return x;
  NNC_ASSIGN_OR_RETURN(Value * u, ctx.emit(K::Unsqueeze, {x}, {{"axes", std::vector<int64_t>{2}}}));
  NNC_ASSIGN_OR_RETURN(Value * e, ctx.emit(K::Expand, {u, ctx.i64Vector({1, 1, group, 1, 1})}));
  NNC_ASSIGN_OR_RETURN(Value * shape, ctx.emit(K::ShapeOf, {x}));
  NNC_ASSIGN_OR_RETURN(Value * lead,
                       ctx.emit(K::Slice, {shape, ctx.i64Vector({0}), ctx.i64Vector({1})}));
  NNC_ASSIGN_OR_RETURN(Value * tail,
                       ctx.emit(K::Slice, {shape, ctx.i64Vector({2}), ctx.i64Vector({4})}));
  int64_t heads = x->shape()[1].value() * group;
  NNC_ASSIGN_OR_RETURN(Value * to, ctx.emit(K::Concat, {lead, ctx.i64Vector({heads}), tail},
                                            {{"axis", Attribute(int64_t(0))}}));
  return ctx.emit(K::Reshape, {e, to}, {{"allowzero", Attribute(int64_t(0))}});
}

/// The modifier subgraph `attr` (one input, one output of x's type) applied to x.
Expected<Value *> applyModifier(LoweringContext &ctx, const char *attr, Value *x) {
  if (!ctx.hasAttr(attr))
    return x;
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph sub, ctx.subgraph(attr, {x->type()}));
  const Graph &g = *sub.graph;
  if (g.inputs().size() != 1 + sub.captured.size() || g.outputs().size() != 1)
    return ctx.error("{} must take one input and return one output", attr);
  std::unordered_map<const Value *, Value *> map;
  map[g.inputs()[0]] = x;
  for (size_t i = 0; i < sub.captured.size(); ++i)
    map[g.inputs()[1 + i]] = sub.captured[i];
  for (const Node *n : g.nodes())
    copyNode(ctx.graph(), *n, map);
  Value *y = map.at(g.outputs()[0]);
  if (y->type() != x->type())
    return ctx.error("{} returns {} for an input of {}: it must keep the type", attr,
                     y->type().str(), x->type().str());
  return y;
}

Error lowerFlexAttention(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * q, ctx.requiredInput(0, "Q"));
  NNC_ASSIGN_OR_RETURN(Value * k, ctx.requiredInput(1, "K"));
  NNC_ASSIGN_OR_RETURN(Value * v, ctx.requiredInput(2, "V"));
  for (Value *x : {q, k, v})
    if (x->rank() != 4 || !isFloat(x->dtype()) || x->dtype() != q->dtype())
      return ctx.error("Q, K and V must be rank-4 tensors of one float dtype, got {}, {} and {}",
                       q->type().str(), k->type().str(), v->type().str());
  const Dim &hq = q->shape()[1], &hkv = k->shape()[1], &d = q->shape()[3];
  if (!hq.isStatic() || !hkv.isStatic() || !d.isStatic())
    return ctx.error("the head counts and Q's head size must be static, got Q {} and K {}",
                     q->type().str(), k->type().str());
  if (hkv.value() <= 0 || hq.value() % hkv.value() != 0)
    return ctx.error("Q's {} heads are not a multiple of K's {}", hq.value(), hkv.value());
  auto differ = [](const Dim &a, const Dim &b) {
    return a.isStatic() && b.isStatic() && a.value() != b.value();
  };
  if (differ(k->shape()[1], v->shape()[1]) || differ(k->shape()[2], v->shape()[2]) ||
      differ(q->shape()[3], k->shape()[3]))
    return ctx.error("K {} and V {} must share heads and length, and Q {} and K the head size",
                     k->type().str(), v->type().str(), q->type().str());
  DType t = q->dtype();
  DType sp = t == DType::F64 ? DType::F64 : DType::F32;
  if (ctx.hasAttr("softmax_precision")) {
    NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("softmax_precision", 1));
    std::optional<DType> p = dtypeFromOnnx(static_cast<int>(code));
    if (!p || (*p != DType::F32 && *p != DType::F16 && *p != DType::BF16 && *p != DType::F64))
      return ctx.error("softmax_precision {} is not a float type", code);
    sp = *p;
  }
  NNC_ASSIGN_OR_RETURN(double scaleAttr, ctx.floatAttr("scale", 0.0));
  float scale = ctx.hasAttr("scale") ? static_cast<float>(scaleAttr)
                                     : 1.0f / std::sqrt(static_cast<float>(d.value()));
  if (!std::isfinite(scale) || scale < 0)
    return ctx.error("scale must be finite and not negative, got {}", scale);
  int64_t group = hq.value() / hkv.value();
  NNC_ASSIGN_OR_RETURN(Value * kr, repeatHeads(ctx, k, group));
  NNC_ASSIGN_OR_RETURN(Value * vr, repeatHeads(ctx, v, group));
  Value *s = ctx.scalar(t, static_cast<double>(std::sqrt(scale)));
  NNC_ASSIGN_OR_RETURN(Value * qs, ctx.emit(K::Mul, {q, s}));
  NNC_ASSIGN_OR_RETURN(Value * ks, ctx.emit(K::Mul, {kr, s}));
  NNC_ASSIGN_OR_RETURN(Value * kt,
                       ctx.emit(K::Transpose, {ks}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}));
  NNC_ASSIGN_OR_RETURN(Value * score, ctx.emit(K::MatMul, {qs, kt}));
  if (sp != t) {
    NNC_ASSIGN_OR_RETURN(score, ctx.emit(K::Cast, {score}, {{"to", sp}}));
  }
  NNC_ASSIGN_OR_RETURN(score, applyModifier(ctx, "score_mod", score));
  NNC_ASSIGN_OR_RETURN(Value * prob, ctx.emit(K::Softmax, {score}, {{"axis", int64_t(3)}}));
  NNC_ASSIGN_OR_RETURN(prob, applyModifier(ctx, "prob_mod", prob));
  if (sp == t) {
    NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::MatMul, {prob, vr}));
    return ctx.setOutput(0, y);
  }
  NNC_ASSIGN_OR_RETURN(Value * vs, ctx.emit(K::Cast, {vr}, {{"to", sp}}));
  NNC_ASSIGN_OR_RETURN(Value * ys, ctx.emit(K::MatMul, {prob, vs}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::Cast, {ys}, {{"to", t}}));
  return ctx.setOutput(0, y);
}

} // namespace

void registerFlexAttentionLowerings(LoweringTable &t) {
  t["ai.onnx.preview:FlexAttention"] = {{"prob_mod", "scale", "score_mod", "softmax_precision"},
                                        lowerFlexAttention};
}

} // namespace nnc::onnxfe

// ONNX lowerings of the loss operators (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) as
// composites of existing nnc ops: log_softmax, gather_elements, gather, select, reductions.
#include <cmath>
#include <limits>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using Ints = std::vector<int64_t>;

/// The per-element loss of NegativeLogLikelihoodLoss on log-probabilities `lp` [N, C, d...]
/// with labels [N, d...], then its reduction. The algorithm:
///   1. valid = 0 <= label < C; keep = label != ignore_index (all true without ignore_index).
///   2. safe = valid ? label : 0, so that no kernel ever indexes out of bounds.
///   3. picked = lp[n, safe, d...] (gather_elements on axis 1); w = weight[safe] (or 1).
///   4. loss = keep ? -picked * w : 0, and NaN where the label is neither in [0, C) nor
///      ignore_index: the spec leaves that case undefined; NaN flags it in every reduction.
///   5. none: loss; sum: sum(loss); mean: sum(loss) / sum(keep ? w : 0) when there are
///      weights or an ignore_index (the spec's weighted mean), else mean(loss).
Error lowerNllOnLogProb(LoweringContext &ctx, Value *lp, Value *labels, Value *weight) {
  NNC_ASSIGN_OR_RETURN(std::string reduction, ctx.stringAttr("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.error("attribute 'reduction' = '{}' is not none, sum or mean", reduction);
  bool hasIgnore = ctx.hasAttr("ignore_index");
  NNC_ASSIGN_OR_RETURN(int64_t ignoreIndex, ctx.intAttr("ignore_index", 0));

  const int64_t rank = lp->rank();
  NNC_USER_CHECK(rank >= 2, "{}: input must be [N, C, d1..dk] (rank >= 2), not rank {}",
                 ctx.place(), rank);
  NNC_USER_CHECK(labels->rank() == rank - 1,
                 "{}: target must be [N, d1..dk] (rank {}), not rank {}", ctx.place(), rank - 1,
                 labels->rank());
  NNC_USER_CHECK(isInteger(labels->dtype()), "{}: target must be an integer tensor, not {}",
                 ctx.place(), dtypeName(labels->dtype()));
  for (int64_t d = 0; d < rank - 1; ++d) {
    const Dim &a = lp->shape()[d == 0 ? 0 : d + 1];
    const Dim &b = labels->shape()[d];
    NNC_USER_CHECK(!a.isStatic() || !b.isStatic() || a.value() == b.value(),
                   "{}: target dim {} is {}, the input's dim {} is {}", ctx.place(), d, b.str(),
                   d == 0 ? 0 : d + 1, a.str());
  }
  const Dim &classes = lp->shape()[1];
  if (weight) {
    NNC_USER_CHECK(weight->rank() == 1 && weight->dtype() == lp->dtype(),
                   "{}: weight must be a 1-D {} tensor of C entries", ctx.place(),
                   dtypeName(lp->dtype()));
    const Dim &wc = weight->shape()[0];
    NNC_USER_CHECK(!wc.isStatic() || !classes.isStatic() || wc.value() == classes.value(),
                   "{}: weight has {} entries for {} classes", ctx.place(), wc.str(),
                   classes.str());
  }
  const DType ft = lp->dtype();

  // 1.-2. Labels in i64; the class count C as an i64 scalar (folded when static).
  Value *label = labels;
  if (label->dtype() != DType::I64) {
    NNC_ASSIGN_OR_RETURN(label, ctx.emit(OpKind::Cast, {label}, {{"to", DType::I64}}));
  }
  Value *numClasses = nullptr;
  if (classes.isStatic()) {
    numClasses = ctx.scalar(DType::I64, static_cast<double>(classes.value()));
  } else {
    NNC_ASSIGN_OR_RETURN(
        numClasses, ctx.emit(OpKind::ShapeOf, {lp}, {{"start", int64_t{1}}, {"end", int64_t{2}}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * geZero,
                       ctx.emit(OpKind::GreaterEqual, {label, ctx.scalar(DType::I64, 0)}));
  NNC_ASSIGN_OR_RETURN(Value * ltC, ctx.emit(OpKind::Less, {label, numClasses}));
  NNC_ASSIGN_OR_RETURN(Value * valid, ctx.emit(OpKind::And, {geZero, ltC}));
  NNC_ASSIGN_OR_RETURN(Value * safe,
                       ctx.emit(OpKind::Select, {valid, label, ctx.scalar(DType::I64, 0)}));
  Value *keep = nullptr;
  if (hasIgnore) {
    NNC_ASSIGN_OR_RETURN(
        keep, ctx.emit(OpKind::Equal, {label, ctx.scalar(DType::I64, double(ignoreIndex))}));
    NNC_ASSIGN_OR_RETURN(keep, ctx.emit(OpKind::Not, {keep}));
  }

  // 3. The picked log-probability and the class weight.
  NNC_ASSIGN_OR_RETURN(Value * safe1, ctx.emit(OpKind::Unsqueeze, {safe}, {{"axes", Ints{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * picked1,
                       ctx.emit(OpKind::GatherElements, {lp, safe1}, {{"axis", int64_t{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * picked, ctx.emit(OpKind::Squeeze, {picked1}, {{"axes", Ints{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * loss, ctx.emit(OpKind::Neg, {picked}));
  Value *w = nullptr; // Per-element weight, null for all ones.
  if (weight) {
    NNC_ASSIGN_OR_RETURN(w, ctx.emit(OpKind::Gather, {weight, safe}, {{"axis", int64_t{0}}}));
    NNC_ASSIGN_OR_RETURN(loss, ctx.emit(OpKind::Mul, {loss, w}));
  }

  // 4. Ignored elements give 0 (also where -picked is inf), bad labels NaN.
  Value *zero = ctx.scalar(ft, 0.0);
  if (keep) {
    NNC_ASSIGN_OR_RETURN(loss, ctx.emit(OpKind::Select, {keep, loss, zero}));
  }
  NNC_ASSIGN_OR_RETURN(Value * invalid, ctx.emit(OpKind::Not, {valid}));
  Value *bad = invalid;
  if (keep) {
    NNC_ASSIGN_OR_RETURN(bad, ctx.emit(OpKind::And, {invalid, keep}));
  }
  NNC_ASSIGN_OR_RETURN(
      loss, ctx.emit(OpKind::Select,
                     {bad, ctx.scalar(ft, std::numeric_limits<double>::quiet_NaN()), loss}));

  // 5. Reduction.
  if (reduction == "none")
    return ctx.setOutput(0, loss);
  AttrMap all = {{"axes", Ints{}}, {"keepdims", int64_t{0}}};
  if (reduction == "sum") {
    NNC_ASSIGN_OR_RETURN(Value * s, ctx.emit(OpKind::ReduceSum, {loss}, all));
    return ctx.setOutput(0, s);
  }
  if (!w && !keep) {
    NNC_ASSIGN_OR_RETURN(Value * m, ctx.emit(OpKind::ReduceMean, {loss}, all));
    return ctx.setOutput(0, m);
  }
  Value *denomElems = w;
  if (keep) {
    Value *one = w ? w : ctx.scalar(ft, 1.0);
    NNC_ASSIGN_OR_RETURN(denomElems, ctx.emit(OpKind::Select, {keep, one, zero}));
  }
  NNC_ASSIGN_OR_RETURN(Value * num, ctx.emit(OpKind::ReduceSum, {loss}, all));
  NNC_ASSIGN_OR_RETURN(Value * den, ctx.emit(OpKind::ReduceSum, {denomElems}, all));
  NNC_ASSIGN_OR_RETURN(Value * m, ctx.emit(OpKind::Div, {num, den}));
  return ctx.setOutput(0, m);
}

Error lowerNegativeLogLikelihoodLoss(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * input, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * target, ctx.requiredInput(1, "target"));
  NNC_USER_CHECK(isFloat(input->dtype()), "{}: input must be a float tensor, not {}", ctx.place(),
                 dtypeName(input->dtype()));
  return lowerNllOnLogProb(ctx, input, target, ctx.input(2));
}

/// SoftmaxCrossEntropyLoss = NegativeLogLikelihoodLoss(log_softmax(scores, axis 1)); the
/// optional second output is that log_softmax.
Error lowerSoftmaxCrossEntropyLoss(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * scores, ctx.requiredInput(0, "scores"));
  NNC_ASSIGN_OR_RETURN(Value * labels, ctx.requiredInput(1, "labels"));
  NNC_USER_CHECK(isFloat(scores->dtype()), "{}: scores must be a float tensor, not {}", ctx.place(),
                 dtypeName(scores->dtype()));
  NNC_USER_CHECK(scores->rank() >= 2, "{}: scores must be [N, C, d1..dk] (rank >= 2), not rank {}",
                 ctx.place(), scores->rank());
  NNC_ASSIGN_OR_RETURN(Value * lp, ctx.emit(OpKind::LogSoftmax, {scores}, {{"axis", int64_t{1}}}));
  NNC_TRY(ctx.setOutput(1, lp));
  return lowerNllOnLogProb(ctx, lp, labels, ctx.input(2));
}

} // namespace

void registerLossLowerings(LoweringTable &t) {
  t["NegativeLogLikelihoodLoss"] = {{"ignore_index", "reduction"}, lowerNegativeLogLikelihoodLoss};
  t["SoftmaxCrossEntropyLoss"] = {{"ignore_index", "reduction"}, lowerSoftmaxCrossEntropyLoss};
}

} // namespace nnc::onnxfe

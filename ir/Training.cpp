// Losses and optimizer updates built from existing ops (see include/nnc/ir/Training.h).
#include "nnc/ir/Training.h"

#include <cmath>

namespace nnc {

namespace {

using Ints = std::vector<int64_t>;

Value *meanAll(GradEmitter &e, Value *v) {
  return e.op(OpKind::ReduceMean, {v}, {{"axes", Ints{}}, {"keepdims", int64_t(0)}});
}

/// `t` (i64 scalar) as the dtype of `like`.
Value *stepAs(GradEmitter &e, Value *t, Value *like) {
  if (!t || !like)
    return nullptr;
  return e.op(OpKind::Cast, {t}, {{"to", like->dtype()}});
}

/// norm * x + g, or g when norm is 0.
Value *regularized(GradEmitter &e, Value *x, Value *g, double norm) {
  return norm == 0 ? g : e.add(e.mulScalar(x, norm), g);
}

/// A scalar of `like`'s dtype.
Value *sc(GradEmitter &e, double v, Value *like) {
  return like ? e.scalar(v, like->dtype()) : nullptr;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull; // 2^64 / the golden ratio
constexpr uint64_t kMix1 = 0xbf58476d1ce4e5b9ull, kMix2 = 0x94d049bb133111ebull;

Value *u64(GradEmitter &e, uint64_t v) {
  Tensor t = Tensor::zeros(DType::U64, {});
  *t.data<uint64_t>() = v;
  return e.constant(t);
}

/// splitMix64 as graph ops on u64 values.
Value *splitMix(GradEmitter &e, Value *z) {
  auto xorShift = [&](Value *v, uint64_t s) {
    return e.op(OpKind::BitXor, {v, e.op(OpKind::ShiftRight, {v, u64(e, s)})});
  };
  z = e.mul(xorShift(z, 30), u64(e, kMix1));
  z = e.mul(xorShift(z, 27), u64(e, kMix2));
  return xorShift(z, 31);
}

} // namespace

uint64_t splitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * kMix1;
  z = (z ^ (z >> 27)) * kMix2;
  return z ^ (z >> 31);
}

Value *counterUniform(GradEmitter &e, Value *counter, uint64_t stream, Value *like) {
  if (!counter || !like)
    return nullptr;
  return counterUniform(e, counter, stream, e.shapeOf(like), like->dtype());
}

Value *counterUniform(GradEmitter &e, Value *counter, uint64_t stream, Value *shape,
                      DType dtype) {
  if (!counter || !shape)
    return nullptr;
  // As many bits as the dtype's significand holds: the integer and the scaled result are
  // exact, and the result stays below 1.
  int bits = 0;
  switch (dtype) {
  case DType::F64: bits = 53; break;
  case DType::F32: bits = 24; break;
  case DType::F16: bits = 11; break;
  case DType::BF16: bits = 8; break;
  default:
    return e.fail(makeError("counterUniform draws f64, f32, f16 or bf16 numbers, not {}",
                            dtypeName(dtype)));
  }
  Value *c = e.op(OpKind::Cast, {counter}, {{"to", DType::U64}});
  Value *state = splitMix(e, e.add(c, u64(e, stream * kGolden)));
  // Element indices 1..n in the shape (a shape known only at run time too).
  Value *one = e.scalar(1, DType::I64);
  Value *n = e.op(OpKind::ReduceProd, {shape}, {{"axes", Ints{}}, {"keepdims", int64_t(0)}});
  Value *i = e.op(OpKind::Range, {one, e.add(n, one), one});
  i = e.op(OpKind::Reshape, {e.op(OpKind::Cast, {i}, {{"to", DType::U64}}), shape});
  Value *z = splitMix(e, e.add(state, e.mul(i, u64(e, kGolden))));
  Value *top = e.op(OpKind::Cast, {e.op(OpKind::ShiftRight, {z, u64(e, 64 - bits)})},
                    {{"to", dtype}});
  return e.mulScalar(top, std::ldexp(1.0, -bits));
}

std::array<Value *, 2> dropoutTraining(GradEmitter &e, Value *x, Value *ratio, Value *counter,
                                       uint64_t stream) {
  if (!x || !ratio)
    return {};
  if (!isFloat(x->dtype()) || !isFloat(ratio->dtype()) || ratio->rank() != 0) {
    e.fail(makeError("dropout in training needs a float input and a float scalar ratio, got {} "
                     "and {}",
                     x->type().str(), ratio->type().str()));
    return {};
  }
  Value *r =
      ratio->dtype() == x->dtype() ? ratio : e.op(OpKind::Cast, {ratio}, {{"to", x->dtype()}});
  Value *keep = e.op(OpKind::GreaterEqual, {counterUniform(e, counter, stream, x), r});
  Value *scale = e.op(OpKind::Reciprocal, {e.sub(sc(e, 1, x), r)});
  Value *kept = e.mul(x, e.op(OpKind::Cast, {keep}, {{"to", x->dtype()}}));
  return {e.mul(kept, scale), keep};
}

Value *softmaxCrossEntropyLoss(GradEmitter &e, Value *logits, Value *labels) {
  if (!logits || !labels)
    return nullptr;
  // Logits [N, C, d1..] and labels [N, d1..]: the label shape is the logits' without the
  // class axis.
  bool shapesMatch =
      logits->rank() >= 2 && labels->rank() == logits->rank() - 1 && isInteger(labels->dtype());
  for (int64_t i = 0; shapesMatch && i < labels->rank(); ++i)
    shapesMatch = labels->shape()[static_cast<size_t>(i)] ==
                  logits->shape()[static_cast<size_t>(i == 0 ? 0 : i + 1)];
  if (!shapesMatch)
    return e.fail(makeError("softmax cross-entropy needs logits [N, C, d1..] and integer labels "
                            "[N, d1..], got {} and {}",
                            logits->type().str(), labels->type().str()));
  const Dim &classes = logits->shape()[1];
  if (!classes.isStatic())
    return e.fail(makeError("softmax cross-entropy needs a static class count, got {}",
                            logits->type().str()));
  // one_hot(labels) * log_softmax(logits), summed over classes: all elementwise and
  // reductions, so the loss and its gradient fuse.
  Value *logp = e.op(OpKind::LogSoftmax, {logits}, {{"axis", int64_t(1)}});
  Tensor offOn = Tensor::zeros(logits->dtype(), {2});
  if (logits->dtype() == DType::F64)
    offOn.data<double>()[1] = 1;
  else if (logits->dtype() == DType::F32)
    offOn.data<float>()[1] = 1;
  else
    return e.fail(makeError("softmax cross-entropy: logits must be f32 or f64"));
  Value *depth = e.constant(Tensor::scalar<int64_t>(DType::I64, classes.value()));
  Value *oneHot = e.op(OpKind::OneHot, {labels, depth, e.constant(offOn)}, {{"axis", int64_t(1)}});
  Value *picked =
      e.op(OpKind::ReduceSum, {e.mul(oneHot, logp)}, {{"axes", Ints{1}}, {"keepdims", int64_t(0)}});
  return e.neg(meanAll(e, picked));
}

Value *meanSquaredErrorLoss(GradEmitter &e, Value *pred, Value *target) {
  if (!pred || !target)
    return nullptr;
  if (pred->type() != target->type())
    return e.fail(makeError("mean squared error: target {} does not match the prediction {}",
                            target->type().str(), pred->type().str()));
  Value *d = e.sub(pred, target);
  return meanAll(e, e.mul(d, d));
}

Value *sgdUpdate(GradEmitter &e, Value *r, Value *x, Value *g) {
  return e.sub(x, e.mul(r, g));
}

std::array<Value *, 2> momentumUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g,
                                      Value *v, const MomentumOptions &o) {
  Value *gr = regularized(e, x, g, o.normCoefficient);
  Value *first = e.op(OpKind::Greater, {t, e.scalar(0, DType::I64)});
  Value *beta = e.op(OpKind::Select, {first, sc(e, o.beta, x), sc(e, 1, x)});
  Value *vNew = e.add(e.mulScalar(v, o.alpha), e.mul(beta, gr));
  Value *step = o.nesterov ? e.add(gr, e.mulScalar(vNew, o.alpha)) : vNew;
  return {e.sub(x, e.mul(r, step)), vNew};
}

std::array<Value *, 2> adagradUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g,
                                     Value *h, const AdagradOptions &o) {
  Value *rate = r;
  if (o.decayFactor != 0)
    rate = e.div(r, e.add(sc(e, 1, x), e.mulScalar(stepAs(e, t, x), o.decayFactor)));
  Value *gr = regularized(e, x, g, o.normCoefficient);
  Value *hNew = e.add(h, e.mul(gr, gr));
  Value *denom = e.add(e.op(OpKind::Sqrt, {hNew}), sc(e, o.epsilon, x));
  return {e.sub(x, e.mul(rate, e.div(gr, denom))), hNew};
}

std::array<Value *, 3> adamUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g, Value *v,
                                  Value *h, const AdamOptions &o) {
  Value *gr = regularized(e, x, g, o.normCoefficient);
  Value *vNew = e.add(e.mulScalar(v, o.alpha), e.mulScalar(gr, 1 - o.alpha));
  Value *hNew = e.add(e.mulScalar(h, o.beta), e.mulScalar(e.mul(gr, gr), 1 - o.beta));
  // The bias correction is scalar math on the step count, computed once per step.
  Value *tf = stepAs(e, t, x);
  Value *one = sc(e, 1, x);
  Value *c1 = e.sub(one, e.op(OpKind::Pow, {sc(e, o.alpha, x), tf}));
  Value *sqrtC2 = e.op(OpKind::Sqrt, {e.sub(one, e.op(OpKind::Pow, {sc(e, o.beta, x), tf}))});
  Value *corrected = e.div(e.mul(r, sqrtC2), c1);
  Value *first = e.op(OpKind::Greater, {t, e.scalar(0, DType::I64)});
  Value *rate = e.op(OpKind::Select, {first, corrected, r});
  Value *eps = sc(e, o.epsilon, x);
  if (o.epsilonAfterCorrection)
    eps = e.op(OpKind::Select, {first, e.mul(eps, sqrtC2), eps});
  Value *denom = e.add(e.op(OpKind::Sqrt, {hNew}), eps);
  Value *xNew = e.sub(x, e.mul(rate, e.div(vNew, denom)));
  if (o.normCoefficientPost != 0)
    xNew = e.mulScalar(xNew, 1 - o.normCoefficientPost);
  return {xNew, vNew, hNew};
}

std::array<Value *, 3> batchNormTraining(GradEmitter &e, Value *x, Value *scale, Value *bias,
                                         Value *mean, Value *var, double epsilon, double momentum) {
  if (!x || !mean || !var)
    return {};
  std::optional<Extents> xe = staticExtents(x->shape());
  Ints axes = {0};
  int64_t n = xe && !xe->empty() ? (*xe)[0] : 0;
  for (int64_t a = 2; xe && a < x->rank(); ++a) {
    axes.push_back(a);
    n *= (*xe)[static_cast<size_t>(a)];
  }
  if (!xe || x->rank() < 2 || n < 2) {
    e.fail(makeError("batch norm in training needs a static input [N, C, ...] with more than "
                     "one value per channel, got {}",
                     x->type().str()));
    return {};
  }
  // One reduction per statistic: the kept-dims forms center x, their [C] views feed the op.
  AttrMap reduce = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *meanK = e.op(OpKind::ReduceMean, {x}, reduce);
  Value *d = e.sub(x, meanK);
  Value *varK = e.op(OpKind::ReduceMean, {e.mul(d, d)}, reduce);
  Value *batchMean = e.reshapeLike(meanK, mean), *batchVar = e.reshapeLike(varK, var);
  Value *y = e.op(OpKind::BatchNorm, {x, scale, bias, batchMean, batchVar}, {{"epsilon", epsilon}});
  auto blend = [&](Value *running, Value *batch, double factor) {
    if (batch && running->dtype() != batch->dtype())
      batch = e.op(OpKind::Cast, {batch}, {{"to", running->dtype()}});
    return e.add(e.mulScalar(running, momentum), e.mulScalar(batch, (1 - momentum) * factor));
  };
  double unbiased = static_cast<double>(n) / static_cast<double>(n - 1);
  return {y, blend(mean, batchMean, 1), blend(var, batchVar, unbiased)};
}

std::vector<Value *> clipByGlobalNorm(GradEmitter &e, const std::vector<Value *> &grads,
                                      double maxNorm) {
  if (grads.empty())
    return {};
  Value *sumSq = nullptr;
  for (Value *g : grads) {
    Value *s = e.op(OpKind::ReduceSum, {e.mul(g, g)}, {{"axes", Ints{}}, {"keepdims", int64_t(0)}});
    sumSq = sumSq ? e.add(sumSq, s) : s;
  }
  Value *norm = e.op(OpKind::Sqrt, {sumSq});
  // min(1, maxNorm / (norm + tiny)): tiny keeps a zero gradient finite.
  Value *scale = e.op(
      OpKind::Min, {sc(e, 1, norm), e.div(sc(e, maxNorm, norm), e.add(norm, sc(e, 1e-12, norm)))});
  std::vector<Value *> out;
  for (Value *g : grads)
    out.push_back(e.mul(g, scale));
  return out;
}

} // namespace nnc

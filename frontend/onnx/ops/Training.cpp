// Lowerings of the ai.onnx.preview.training optimizers (Adam, Adagrad, Momentum) through the
// update functions of include/nnc/ir/Training.h, the ones nnc::Trainer uses.
#include "nnc/ir/Training.h"
#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using C = LoweringContext;

/// Checks the inputs (R, T, then `groups` groups of n tensors each) and returns n.
Expected<size_t> tensorsPerGroup(C &c, size_t groups) {
  size_t n = c.numInputs() >= 2 ? (c.numInputs() - 2) / groups : 0;
  NNC_USER_CHECK(n >= 1 && c.numInputs() == 2 + groups * n,
                 "{}: expected R, T and {} groups of equally many tensors, got {} inputs",
                 c.place(), groups, c.numInputs());
  NNC_USER_CHECK(c.numOutputs() <= (groups - 1) * n,
                 "{}: {} outputs for {} optimized tensors", c.place(), c.numOutputs(), n);
  for (size_t i = 0; i < c.numInputs(); ++i)
    NNC_USER_CHECK(c.input(i), "{}: input {} is missing", c.place(), i);
  Value *r = c.input(0), *t = c.input(1);
  NNC_USER_CHECK(isFloat(r->dtype()) && r->rank() == 0, "{}: R must be a float scalar, got {}",
                 c.place(), r->type().str());
  NNC_USER_CHECK(t->dtype() == DType::I64 && t->rank() == 0, "{}: T must be an i64 scalar, got {}",
                 c.place(), t->type().str());
  for (size_t i = 2; i < c.numInputs(); ++i)
    NNC_USER_CHECK(c.input(i)->dtype() == r->dtype(), "{}: input {} is {}, R is {}", c.place(), i,
                   c.input(i)->type().str(), r->type().str());
  return n;
}

/// Sets output `group * n + i` to `v` where the model has it.
Error setGroupOutput(C &c, size_t group, size_t n, size_t i, Value *v) {
  size_t o = group * n + i;
  if (o < c.numOutputs() && c.hasOutput(o))
    return c.setOutput(o, v);
  return Error::success();
}

Error finish(C &c, GradEmitter &e) {
  if (!e.ok())
    return e.error().withContext(c.place());
  return Error::success();
}

Error lowerAdam(C &c) {
  NNC_ASSIGN_OR_RETURN(size_t n, tensorsPerGroup(c, 4));
  AdamOptions o;
  NNC_ASSIGN_OR_RETURN(o.alpha, c.floatAttr("alpha", 0.9));
  NNC_ASSIGN_OR_RETURN(o.beta, c.floatAttr("beta", 0.999));
  NNC_ASSIGN_OR_RETURN(o.epsilon, c.floatAttr("epsilon", 1e-6));
  NNC_ASSIGN_OR_RETURN(o.normCoefficient, c.floatAttr("norm_coefficient", 0.0));
  NNC_ASSIGN_OR_RETURN(o.normCoefficientPost, c.floatAttr("norm_coefficient_post", 0.0));
  GradEmitter e(c.graph());
  for (size_t i = 0; i < n; ++i) {
    std::array<Value *, 3> r = adamUpdate(e, c.input(0), c.input(1), c.input(2 + i),
                                          c.input(2 + n + i), c.input(2 + 2 * n + i),
                                          c.input(2 + 3 * n + i), o);
    NNC_TRY(finish(c, e));
    for (size_t k = 0; k < 3; ++k)
      NNC_TRY(setGroupOutput(c, k, n, i, r[k]));
  }
  return Error::success();
}

Error lowerAdagrad(C &c) {
  NNC_ASSIGN_OR_RETURN(size_t n, tensorsPerGroup(c, 3));
  AdagradOptions o;
  NNC_ASSIGN_OR_RETURN(o.decayFactor, c.floatAttr("decay_factor", 0.0));
  NNC_ASSIGN_OR_RETURN(o.epsilon, c.floatAttr("epsilon", 1e-6));
  NNC_ASSIGN_OR_RETURN(o.normCoefficient, c.floatAttr("norm_coefficient", 0.0));
  GradEmitter e(c.graph());
  for (size_t i = 0; i < n; ++i) {
    std::array<Value *, 2> r = adagradUpdate(e, c.input(0), c.input(1), c.input(2 + i),
                                             c.input(2 + n + i), c.input(2 + 2 * n + i), o);
    NNC_TRY(finish(c, e));
    for (size_t k = 0; k < 2; ++k)
      NNC_TRY(setGroupOutput(c, k, n, i, r[k]));
  }
  return Error::success();
}

Error lowerMomentum(C &c) {
  NNC_ASSIGN_OR_RETURN(size_t n, tensorsPerGroup(c, 3));
  MomentumOptions o;
  // alpha, beta, mode and norm_coefficient are required by the ONNX schema.
  for (const char *a : {"alpha", "beta", "mode", "norm_coefficient"})
    NNC_USER_CHECK(c.hasAttr(a), "{}: missing required attribute '{}'", c.place(), a);
  NNC_ASSIGN_OR_RETURN(o.alpha, c.floatAttr("alpha", 0.0));
  NNC_ASSIGN_OR_RETURN(o.beta, c.floatAttr("beta", 0.0));
  NNC_ASSIGN_OR_RETURN(o.normCoefficient, c.floatAttr("norm_coefficient", 0.0));
  NNC_ASSIGN_OR_RETURN(std::string mode, c.stringAttr("mode", ""));
  NNC_USER_CHECK(mode == "standard" || mode == "nesterov",
                 "{}: attribute 'mode' must be standard or nesterov, got '{}'", c.place(), mode);
  o.nesterov = mode == "nesterov";
  GradEmitter e(c.graph());
  for (size_t i = 0; i < n; ++i) {
    std::array<Value *, 2> r = momentumUpdate(e, c.input(0), c.input(1), c.input(2 + i),
                                              c.input(2 + n + i), c.input(2 + 2 * n + i), o);
    NNC_TRY(finish(c, e));
    for (size_t k = 0; k < 2; ++k)
      NNC_TRY(setGroupOutput(c, k, n, i, r[k]));
  }
  return Error::success();
}

} // namespace

void registerTrainingLowerings(LoweringTable &t) {
  const std::string d = "ai.onnx.preview.training:";
  t[d + "Adam"] = {{"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"},
                   lowerAdam};
  t[d + "Adagrad"] = {{"decay_factor", "epsilon", "norm_coefficient"}, lowerAdagrad};
  t[d + "Momentum"] = {{"alpha", "beta", "mode", "norm_coefficient"}, lowerMomentum};
}

} // namespace nnc::onnxfe

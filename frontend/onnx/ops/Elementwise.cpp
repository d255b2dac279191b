// Lowerings of ONNX elementwise ops and activations into nnc's primitive elementwise ops.
#include <cmath>
#include <limits>

#include "nnc/ir/Training.h"
#include "onnx.pb.h"
#include "onnx/Lowering.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;
using C = LoweringContext;

/// Input i, which must be present.
Expected<Value *> req(C &c, size_t i) {
  if (Value *v = c.input(i))
    return v;
  return c.error("input {} is missing", i);
}

Error checkInputs(C &c, size_t lo, size_t hi) {
  if (c.numInputs() < lo || c.numInputs() > hi)
    return lo == hi ? c.error("expects {} inputs, got {}", lo, c.numInputs())
                    : c.error("expects {} to {} inputs, got {}", lo, hi, c.numInputs());
  return Error::success();
}

Expected<Value *> un(C &c, K k, Value *a) { return c.emit(k, {a}); }
Expected<Value *> bin(C &c, K k, Value *a, Value *b) { return c.emit(k, {a, b}); }
/// A scalar constant of `like`'s dtype.
Value *sc(C &c, Value *like, double v) { return c.scalar(like->dtype(), v); }

Error needFloat(C &c, Value *x) {
  if (!isFloat(x->dtype()))
    return c.error("input must have a float type, got {}", dtypeName(x->dtype()));
  return Error::success();
}

Error lowerUnary(C &c, K k) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * y, un(c, k, x));
  return c.setOutput(0, y);
}

/// Opset < 7 binary ops broadcast only with broadcast=1, aligning b with a's dims from
/// `axis` on (default: trailing dims, as numpy does). Pads b with trailing 1s so numpy
/// broadcasting gives the same alignment.
Expected<Value *> legacyBroadcast(C &c, Value *a, Value *b) {
  if (c.opset() >= 7 || !c.hasAttr("axis"))
    return b;
  NNC_ASSIGN_OR_RETURN(int64_t bc, c.intAttr("broadcast", 0));
  if (!bc)
    return b;
  NNC_ASSIGN_OR_RETURN(int64_t axis, c.intAttr("axis", 0));
  if (axis < 0)
    axis += a->rank();
  int64_t trailing = a->rank() - axis - b->rank();
  if (axis < 0 || trailing < 0)
    return c.error("attribute 'axis' {} does not fit a second input {} into the first {}", axis,
                   b->type().str(), a->type().str());
  if (trailing == 0)
    return b;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < trailing; ++i)
    axes.push_back(b->rank() + i);
  return c.emit(K::Unsqueeze, {b}, {{"axes", Attribute(axes)}});
}

Error lowerBinary(C &c, K k) {
  NNC_TRY(checkInputs(c, 2, 2));
  NNC_ASSIGN_OR_RETURN(Value * a, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * b0, req(c, 1));
  NNC_ASSIGN_OR_RETURN(Value * b, legacyBroadcast(c, a, b0));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, k, a, b));
  return c.setOutput(0, y);
}

/// Max, Min, Sum, Mean: a left fold over one or more broadcasting inputs.
Error lowerVariadic(C &c, K k, bool mean) {
  if (c.numInputs() < 1)
    return c.error("needs at least one input");
  NNC_ASSIGN_OR_RETURN(Value * acc, req(c, 0));
  for (size_t i = 1; i < c.numInputs(); ++i) {
    NNC_ASSIGN_OR_RETURN(Value * v, req(c, i));
    NNC_ASSIGN_OR_RETURN(acc, bin(c, k, acc, v));
  }
  if (mean && c.numInputs() > 1) {
    NNC_ASSIGN_OR_RETURN(acc, bin(c, K::Div, acc, sc(c, acc, double(c.numInputs()))));
  }
  if (c.numInputs() == 1 && !mean) {
    // A single input is passed through; still check its dtype like the op would.
    if (!isNumeric(acc->dtype()))
      return c.error("input must be numeric, got {}", dtypeName(acc->dtype()));
  }
  return c.setOutput(0, acc);
}

Error lowerPow(C &c) {
  NNC_TRY(checkInputs(c, 2, 2));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * e0, req(c, 1));
  NNC_ASSIGN_OR_RETURN(Value * e, legacyBroadcast(c, x, e0));
  DType t = x->dtype();
  if (e->dtype() == t) {
    NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Pow, x, e));
    return c.setOutput(0, y);
  }
  if (isFloat(t) || (isInteger(t) && isInteger(e->dtype()))) {
    // The result has the base's dtype; an exponent of another type is converted to it
    // (exactly, for integer exponents of a float base).
    NNC_ASSIGN_OR_RETURN(Value * ec, c.emit(K::Cast, {e}, {{"to", Attribute(t)}}));
    NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Pow, x, ec));
    return c.setOutput(0, y);
  }
  if (isInteger(t) && isFloat(e->dtype())) {
    // numpy: pow in f64, then truncated back to the integer base type.
    NNC_ASSIGN_OR_RETURN(Value * xf, c.emit(K::Cast, {x}, {{"to", Attribute(DType::F64)}}));
    NNC_ASSIGN_OR_RETURN(Value * ef, c.emit(K::Cast, {e}, {{"to", Attribute(DType::F64)}}));
    NNC_ASSIGN_OR_RETURN(Value * p, bin(c, K::Pow, xf, ef));
    NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Cast, {p}, {{"to", Attribute(t)}}));
    return c.setOutput(0, y);
  }
  return c.error("unsupported base/exponent types {} and {}", dtypeName(t),
                 dtypeName(e->dtype()));
}

Error lowerMod(C &c) {
  NNC_ASSIGN_OR_RETURN(int64_t fmod, c.intAttr("fmod", 0));
  if (fmod != 0 && fmod != 1)
    return c.error("attribute 'fmod' must be 0 or 1, got {}", fmod);
  return lowerBinary(c, fmod ? K::FMod : K::Mod);
}

Error lowerBitShift(C &c) {
  NNC_ASSIGN_OR_RETURN(std::string dir, c.stringAttr("direction", ""));
  if (dir == "LEFT")
    return lowerBinary(c, K::ShiftLeft);
  if (dir == "RIGHT")
    return lowerBinary(c, K::ShiftRight);
  return c.error("attribute 'direction' must be LEFT or RIGHT, got '{}'", dir);
}

Error lowerIsInf(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(int64_t pos, c.intAttr("detect_positive", 1));
  NNC_ASSIGN_OR_RETURN(int64_t neg, c.intAttr("detect_negative", 1));
  NNC_ASSIGN_OR_RETURN(Value * inf, un(c, K::IsInf, x));
  if (pos && neg)
    return c.setOutput(0, inf);
  Value *sel;
  if (pos) {
    NNC_ASSIGN_OR_RETURN(sel, bin(c, K::Greater, x, sc(c, x, 0)));
  } else if (neg) {
    NNC_ASSIGN_OR_RETURN(sel, bin(c, K::Less, x, sc(c, x, 0)));
  } else {
    sel = c.scalar(DType::Bool, 0);
  }
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::And, inf, sel));
  return c.setOutput(0, y);
}

Error lowerWhere(C &c) {
  NNC_TRY(checkInputs(c, 3, 3));
  NNC_ASSIGN_OR_RETURN(Value * cond, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * a, req(c, 1));
  NNC_ASSIGN_OR_RETURN(Value * b, req(c, 2));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {cond, a, b}));
  return c.setOutput(0, y);
}

Error lowerClip(C &c) {
  NNC_TRY(checkInputs(c, 1, 3));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  Value *lo = nullptr, *hi = nullptr;
  if (c.opset() < 11) {
    if (c.numInputs() != 1)
      return c.error("takes one input before opset 11 (min and max are attributes)");
    if (c.hasAttr("min")) {
      NNC_ASSIGN_OR_RETURN(double v, c.floatAttr("min", 0));
      lo = sc(c, x, v);
    }
    if (c.hasAttr("max")) {
      NNC_ASSIGN_OR_RETURN(double v, c.floatAttr("max", 0));
      hi = sc(c, x, v);
    }
  } else {
    lo = c.input(1);
    hi = c.input(2);
    for (Value *b : {lo, hi})
      if (b && b->rank() != 0 && !(b->rank() == 1 && b->shape()[0] == Dim(1)))
        return c.error("min and max must be scalars, got {}", b->type().str());
  }
  Value *y = x;
  if (lo) {
    NNC_ASSIGN_OR_RETURN(y, bin(c, K::Max, y, lo));
  }
  if (hi) {
    NNC_ASSIGN_OR_RETURN(y, bin(c, K::Min, y, hi));
  }
  if (!lo && !hi && !isNumeric(x->dtype()))
    return c.error("input must be numeric, got {}", dtypeName(x->dtype()));
  // A [1]-shaped bound must not add a dim to a rank-0 input.
  if (y->rank() != x->rank())
    return c.error("min/max of shape [1] cannot broadcast with a rank-0 input");
  return c.setOutput(0, y);
}

/// select(x < 0, neg, x), where neg is computed from x.
template <typename F> Error lowerNegBranch(C &c, bool floatOnly, F negBranch) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  if (floatOnly)
    NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * isNeg, bin(c, K::Less, x, sc(c, x, 0)));
  NNC_ASSIGN_OR_RETURN(Value * n, negBranch(x));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {isNeg, n, x}));
  return c.setOutput(0, y);
}

Error lowerRelu(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Max, x, sc(c, x, 0)));
  return c.setOutput(0, y);
}

Error lowerLeakyRelu(C &c) {
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 0.01));
  return lowerNegBranch(c, true, [&](Value *x) { return bin(c, K::Mul, x, sc(c, x, alpha)); });
}

Error lowerPRelu(C &c) {
  NNC_TRY(checkInputs(c, 2, 2));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * slope, req(c, 1));
  NNC_ASSIGN_OR_RETURN(Value * isNeg, bin(c, K::Less, x, sc(c, x, 0)));
  NNC_ASSIGN_OR_RETURN(Value * n, bin(c, K::Mul, x, slope));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {isNeg, n, x}));
  // The slope broadcasts to x (unidirectionally): the result keeps x's shape.
  if (y->rank() != x->rank())
    return c.error("slope {} does not broadcast to the input {}", slope->type().str(),
                   x->type().str());
  for (int64_t i = 0; i < x->rank(); ++i)
    if (x->shape()[i].isStatic() && y->shape()[i] != x->shape()[i])
      return c.error("slope {} does not broadcast to the input {}", slope->type().str(),
                     x->type().str());
  return c.setOutput(0, y);
}

Error lowerElu(C &c) {
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 1.0));
  return lowerNegBranch(c, true, [&](Value *x) -> Expected<Value *> {
    NNC_ASSIGN_OR_RETURN(Value * e, un(c, K::Exp, x));
    NNC_ASSIGN_OR_RETURN(Value * em1, bin(c, K::Sub, e, sc(c, x, 1)));
    return bin(c, K::Mul, em1, sc(c, x, alpha));
  });
}

Error lowerSelu(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 1.67326319217681884765625));
  NNC_ASSIGN_OR_RETURN(double gamma, c.floatAttr("gamma", 1.05070102214813232421875));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  // y = gamma * (alpha * e^x - alpha) for x <= 0, gamma * x for x > 0.
  NNC_ASSIGN_OR_RETURN(Value * le, bin(c, K::LessEqual, x, sc(c, x, 0)));
  NNC_ASSIGN_OR_RETURN(Value * e, un(c, K::Exp, x));
  NNC_ASSIGN_OR_RETURN(Value * ae, bin(c, K::Mul, e, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * am, bin(c, K::Sub, ae, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * neg, bin(c, K::Mul, am, sc(c, x, gamma)));
  NNC_ASSIGN_OR_RETURN(Value * pos, bin(c, K::Mul, x, sc(c, x, gamma)));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {le, neg, pos}));
  return c.setOutput(0, y);
}

Error lowerCelu(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 1.0));
  if (alpha == 0)
    return c.error("attribute 'alpha' must not be 0");
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  NNC_ASSIGN_OR_RETURN(Value * p, bin(c, K::Max, x, sc(c, x, 0)));
  NNC_ASSIGN_OR_RETURN(Value * d, bin(c, K::Div, x, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * e, un(c, K::Exp, d));
  NNC_ASSIGN_OR_RETURN(Value * em1, bin(c, K::Sub, e, sc(c, x, 1)));
  NNC_ASSIGN_OR_RETURN(Value * m, bin(c, K::Mul, em1, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * n, bin(c, K::Min, m, sc(c, x, 0)));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Add, p, n));
  return c.setOutput(0, y);
}

/// max(0, min(1, alpha * x + beta)).
Expected<Value *> hardSigmoid(C &c, Value *x, double alpha, double beta) {
  NNC_ASSIGN_OR_RETURN(Value * m, bin(c, K::Mul, x, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * a, bin(c, K::Add, m, sc(c, x, beta)));
  NNC_ASSIGN_OR_RETURN(Value * lo, bin(c, K::Min, a, sc(c, x, 1)));
  return bin(c, K::Max, lo, sc(c, x, 0));
}

Error lowerHardSigmoid(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 0.2));
  NNC_ASSIGN_OR_RETURN(double beta, c.floatAttr("beta", 0.5));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * y, hardSigmoid(c, x, alpha, beta));
  return c.setOutput(0, y);
}

Error lowerHardSwish(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * h, hardSigmoid(c, x, 1.0 / 6.0, 0.5));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Mul, x, h));
  return c.setOutput(0, y);
}

/// log(exp(x) + 1).
Expected<Value *> softplus(C &c, Value *x) {
  NNC_ASSIGN_OR_RETURN(Value * e, un(c, K::Exp, x));
  NNC_ASSIGN_OR_RETURN(Value * a, bin(c, K::Add, e, sc(c, x, 1)));
  return un(c, K::Log, a);
}

Error lowerSoftplus(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * y, softplus(c, x));
  return c.setOutput(0, y);
}

Error lowerSoftsign(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * a, un(c, K::Abs, x));
  NNC_ASSIGN_OR_RETURN(Value * d, bin(c, K::Add, a, sc(c, x, 1)));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Div, x, d));
  return c.setOutput(0, y);
}

Error lowerThresholdedRelu(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 1.0));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * gt, bin(c, K::Greater, x, sc(c, x, alpha)));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {gt, x, sc(c, x, 0)}));
  return c.setOutput(0, y);
}

Error lowerShrink(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double bias, c.floatAttr("bias", 0.0));
  NNC_ASSIGN_OR_RETURN(double lambd, c.floatAttr("lambd", 0.5));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  if (!isNumeric(x->dtype()))
    return c.error("input must be numeric, got {}", dtypeName(x->dtype()));
  // x < -lambd: x + bias; x > lambd: x - bias; else 0. Integer types compare in f64 so that
  // a fractional lambd keeps its meaning.
  Value *xc = x;
  if (!isFloat(x->dtype())) {
    NNC_ASSIGN_OR_RETURN(xc, c.emit(K::Cast, {x}, {{"to", Attribute(DType::F64)}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * lt, bin(c, K::Less, xc, sc(c, xc, -lambd)));
  NNC_ASSIGN_OR_RETURN(Value * gt, bin(c, K::Greater, xc, sc(c, xc, lambd)));
  NNC_ASSIGN_OR_RETURN(Value * plus, bin(c, K::Add, xc, sc(c, xc, bias)));
  NNC_ASSIGN_OR_RETURN(Value * minus, bin(c, K::Sub, xc, sc(c, xc, bias)));
  NNC_ASSIGN_OR_RETURN(Value * inner, c.emit(K::Select, {gt, minus, sc(c, xc, 0)}));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Select, {lt, plus, inner}));
  if (xc != x) {
    NNC_ASSIGN_OR_RETURN(y, c.emit(K::Cast, {y}, {{"to", Attribute(x->dtype())}}));
  }
  return c.setOutput(0, y);
}

Error lowerMish(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  NNC_ASSIGN_OR_RETURN(Value * sp, softplus(c, x));
  NNC_ASSIGN_OR_RETURN(Value * t, un(c, K::Tanh, sp));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Mul, x, t));
  return c.setOutput(0, y);
}

Error lowerSwish(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha", 1.0));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  Value *ax = x;
  if (alpha != 1.0) {
    NNC_ASSIGN_OR_RETURN(ax, bin(c, K::Mul, x, sc(c, x, alpha)));
  }
  NNC_ASSIGN_OR_RETURN(Value * s, un(c, K::Sigmoid, ax));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Mul, x, s));
  return c.setOutput(0, y);
}

Error lowerGelu(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(std::string approx, c.stringAttr("approximate", "none"));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_TRY(needFloat(c, x));
  Value *inner;
  if (approx == "none") {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    NNC_ASSIGN_OR_RETURN(Value * d, bin(c, K::Mul, x, sc(c, x, M_SQRT1_2)));
    NNC_ASSIGN_OR_RETURN(inner, un(c, K::Erf, d));
  } else if (approx == "tanh") {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    NNC_ASSIGN_OR_RETURN(Value * x2, bin(c, K::Mul, x, x));
    NNC_ASSIGN_OR_RETURN(Value * x3, bin(c, K::Mul, x2, x));
    NNC_ASSIGN_OR_RETURN(Value * k, bin(c, K::Mul, x3, sc(c, x, 0.044715)));
    NNC_ASSIGN_OR_RETURN(Value * s, bin(c, K::Add, x, k));
    NNC_ASSIGN_OR_RETURN(Value * m, bin(c, K::Mul, s, sc(c, x, std::sqrt(2.0 / M_PI))));
    NNC_ASSIGN_OR_RETURN(inner, un(c, K::Tanh, m));
  } else {
    return c.error("attribute 'approximate' must be none or tanh, got '{}'", approx);
  }
  NNC_ASSIGN_OR_RETURN(Value * p1, bin(c, K::Add, inner, sc(c, x, 1)));
  NNC_ASSIGN_OR_RETURN(Value * hx, bin(c, K::Mul, x, sc(c, x, 0.5)));
  NNC_ASSIGN_OR_RETURN(Value * y, bin(c, K::Mul, hx, p1));
  return c.setOutput(0, y);
}

Expected<AttrMap> castAttrs(C &c, DType to) {
  AttrMap a{{"to", Attribute(to)}};
  if (c.hasAttr("saturate")) {
    NNC_ASSIGN_OR_RETURN(int64_t s, c.intAttr("saturate", 1));
    if (s != 0 && s != 1)
      return c.error("attribute 'saturate' must be 0 or 1, got {}", s);
    a["saturate"] = Attribute(s);
  }
  if (c.hasAttr("round_mode")) {
    NNC_ASSIGN_OR_RETURN(std::string rm, c.stringAttr("round_mode", "up"));
    if (rm != "up" && rm != "down" && rm != "nearest")
      return c.error("attribute 'round_mode' must be up, down or nearest, got '{}'", rm);
    a["round_mode"] = Attribute(rm);
  }
  return a;
}

Error lowerCast(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  if (!c.hasAttr("to"))
    return c.error("missing attribute 'to'");
  int64_t code = 0;
  if (Expected<int64_t> i = c.intAttr("to", 0)) {
    code = *i;
  } else {
    // Cast-1 names the type: "FLOAT", "INT64", ...
    NNC_ASSIGN_OR_RETURN(std::string name, c.stringAttr("to", ""));
    onnx::TensorProto::DataType dt;
    if (!onnx::TensorProto::DataType_Parse(name, &dt))
      return c.error("unknown target type '{}' (attribute 'to')", name);
    code = dt;
  }
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(code));
  if (!to)
    return c.error("unsupported target type {} (attribute 'to')", code);
  NNC_ASSIGN_OR_RETURN(AttrMap attrs, castAttrs(c, *to));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Cast, {x}, attrs));
  return c.setOutput(0, y);
}

/// BitCast-26: the input's bits as dtype `to`, of the same bit width (the shape rule's check).
Error lowerBitCast(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  if (!c.hasAttr("to"))
    return c.error("missing attribute 'to'");
  NNC_ASSIGN_OR_RETURN(int64_t code, c.intAttr("to", 0));
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(code));
  if (!to)
    return c.error("unsupported target type {} (attribute 'to')", code);
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::BitCast, {x}, {{"to", *to}}));
  return c.setOutput(0, y);
}

Error lowerCastLike(C &c) {
  NNC_TRY(checkInputs(c, 2, 2));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  NNC_ASSIGN_OR_RETURN(Value * like, req(c, 1));
  NNC_ASSIGN_OR_RETURN(AttrMap attrs, castAttrs(c, like->dtype()));
  NNC_ASSIGN_OR_RETURN(Value * y, c.emit(K::Cast, {x}, attrs));
  return c.setOutput(0, y);
}

/// NumPy's legacy RandomState (MT19937): the generator ONNX's Dropout test data comes from.
class NumpyRandom {
public:
  explicit NumpyRandom(uint32_t seed) {
    mt_[0] = seed;
    for (int i = 1; i < 624; ++i)
      mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    pos_ = 624;
  }
  /// random_sample(): a double in [0, 1) with 53 random bits.
  double uniform() {
    uint32_t a = next() >> 5, b = next() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

private:
  uint32_t next() {
    if (pos_ >= 624) {
      for (int i = 0; i < 624; ++i) {
        uint32_t y = (mt_[i] & 0x80000000u) | (mt_[(i + 1) % 624] & 0x7fffffffu);
        mt_[i] = mt_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0u);
      }
      pos_ = 0;
    }
    uint32_t y = mt_[pos_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }
  uint32_t mt_[624];
  int pos_;
};

Error importTimeDropout(C &c, Value *x, Value *ratio, Value *&y, Value *&mask);

Error lowerDropout(C &c) {
  NNC_TRY(checkInputs(c, 1, c.opset() >= 12 ? 3 : 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  // Before opset 10 the mask has the input's dtype; from 10 on it is bool.
  DType maskType = c.opset() >= 10 ? DType::Bool : x->dtype();
  if (isStorageOnly(maskType))
    return c.error("input has storage-only element type {}; Cast it first", dtypeName(maskType));
  Value *y = x;
  Value *mask = nullptr;
  auto allTrue = [&]() -> Expected<Value *> {
    NNC_ASSIGN_OR_RETURN(Value * s, c.emit(K::ShapeOf, {x}));
    Tensor v = Tensor::zeros(maskType, {1});
    setElementFromDouble(v, 0, 1);
    return c.emit(K::ConstantOfShape, {s}, {{"value", Attribute(v)}});
  };

  Value *training = c.opset() >= 12 ? c.input(2) : nullptr;
  Value *ratio = c.opset() >= 12 ? c.input(1) : nullptr;
  bool maybeTraining = training != nullptr;
  if (training) {
    if (const Tensor *t = c.tryConstantInput(2)) {
      if (t->numElements() != 1 || t->dtype() != DType::Bool)
        return c.error("training_mode must be a bool scalar");
      maybeTraining = t->data<bool>()[0];
      training = nullptr;
    }
  }
  if (maybeTraining && ratio) {
    if (const Tensor *r = c.tryConstantInput(1)) {
      if (r->numElements() != 1)
        return c.error("ratio must be a scalar");
      if (r->elementAsDouble(0) == 0)
        maybeTraining = false;
    }
  }
  if (!maybeTraining) {
    if (c.hasOutput(1)) {
      NNC_ASSIGN_OR_RETURN(mask, allTrue());
    }
    NNC_TRY(c.setOutput(0, y));
    return mask ? c.setOutput(1, mask) : Error::success();
  }

  if (c.forTraining()) {
    // nnc::Trainer's form: a fresh mask every step from the counter-based generator.
    Graph &g = c.graph();
    Value *counter = g.findValue(kStepCounterInput);
    if (!counter || !counter->isGraphInput())
      counter = g.addInput(kStepCounterInput, TensorType(DType::I64, {}));
    uint64_t stream = g.users(counter).size(); // each dropout adds one use
    // A known ratio as a constant of its own: an initializer would be trained as a parameter.
    const Tensor *known = ratio ? c.tryConstantInput(1) : nullptr;
    Value *r =
        ratio && !known ? ratio : c.scalar(x->dtype(), known ? known->elementAsDouble(0) : 0.5);
    GradEmitter e(g);
    std::array<Value *, 2> drop = dropoutTraining(e, x, r, counter, stream);
    if (!e.ok())
      return c.error("{}", e.error().message());
    y = drop[0];
    mask = drop[1];
  } else {
    NNC_TRY(importTimeDropout(c, x, ratio, y, mask));
  }
  if (training) {
    // Known only at run time: inference behaviour when it is false.
    NNC_ASSIGN_OR_RETURN(Value * yt, c.emit(K::Select, {training, y, x}));
    NNC_ASSIGN_OR_RETURN(Value * notT, un(c, K::Not, training));
    NNC_ASSIGN_OR_RETURN(mask, bin(c, K::Or, mask, notT));
    y = yt;
  }
  NNC_TRY(c.setOutput(0, y));
  return c.setOutput(1, mask);
}

/// Dropout's mask as ONNX's test data has it: drawn once here, at import.
Error importTimeDropout(C &c, Value *x, Value *ratio, Value *&y, Value *&mask) {
  // Training mode: reproduce the ONNX reference exactly, which draws the keep-mask from
  // numpy's RandomState(seed).uniform(0, 1, shape) >= ratio and scales by 1 / (1 - ratio).
  if (!c.hasAttr("seed"))
    return c.error("training-mode Dropout without a 'seed' attribute is nondeterministic and "
                   "unsupported");
  NNC_ASSIGN_OR_RETURN(int64_t seed, c.intAttr("seed", 0));
  if (seed < 0 || seed > 0xffffffffll)
    return c.error("attribute 'seed' {} is out of range [0, 2^32)", seed);
  std::optional<Extents> ext = staticExtents(x->shape());
  if (!ext)
    return c.error("training-mode Dropout needs a static input shape, got {}",
                   x->type().str());
  NNC_ASSIGN_OR_RETURN(Tensor u, Tensor::create(DType::F64, *ext));
  NumpyRandom rng(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i < u.numElements(); ++i)
    u.data<double>()[i] = rng.uniform();
  Value *r = ratio ? ratio : c.scalar(x->dtype(), 0.5);
  if (!isFloat(r->dtype()))
    return c.error("ratio must be a float, got {}", dtypeName(r->dtype()));
  NNC_ASSIGN_OR_RETURN(Value * r64, c.emit(K::Cast, {r}, {{"to", Attribute(DType::F64)}}));
  NNC_ASSIGN_OR_RETURN(Value * keep, bin(c, K::GreaterEqual, c.constant(u), r64));
  NNC_ASSIGN_OR_RETURN(Value * oneMinus, bin(c, K::Sub, sc(c, r, 1), r));
  NNC_ASSIGN_OR_RETURN(Value * scale, un(c, K::Reciprocal, oneMinus));
  if (scale->dtype() != x->dtype()) {
    NNC_ASSIGN_OR_RETURN(scale, c.emit(K::Cast, {scale}, {{"to", Attribute(x->dtype())}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * keepT, c.emit(K::Cast, {keep}, {{"to", Attribute(x->dtype())}}));
  NNC_ASSIGN_OR_RETURN(Value * kx, bin(c, K::Mul, keepT, x));
  NNC_ASSIGN_OR_RETURN(y, bin(c, K::Mul, kx, scale));
  mask = keep;
  return Error::success();
}

Error lowerSize(C &c) {
  NNC_TRY(checkInputs(c, 1, 1));
  NNC_ASSIGN_OR_RETURN(Value * x, req(c, 0));
  if (std::optional<Extents> e = staticExtents(x->shape())) {
    std::optional<int64_t> n = checkedNumElements(*e);
    if (!n)
      return c.error("element count of {} overflows", x->type().str());
    return c.setOutput(0, c.constant(Tensor::scalar<int64_t>(DType::I64, *n)));
  }
  NNC_ASSIGN_OR_RETURN(Value * s, c.emit(K::ShapeOf, {x}));
  NNC_ASSIGN_OR_RETURN(Value * y,
                       c.emit(K::ReduceProd, {s},
                              {{"axes", Attribute(std::vector<int64_t>{})},
                               {"keepdims", Attribute(int64_t(0))}}));
  return c.setOutput(0, y);
}

} // namespace

void registerElementwiseLowerings(LoweringTable &t) {
  auto unary = [&](const char *name, K k) {
    t[name] = OpLowering{{"consumed_inputs"}, [k](C &c) { return lowerUnary(c, k); }};
  };
  auto binary = [&](const char *name, K k) {
    t[name] = OpLowering{{"broadcast", "axis", "consumed_inputs"},
                         [k](C &c) { return lowerBinary(c, k); }};
  };
  auto variadic = [&](const char *name, K k, bool mean) {
    t[name] = OpLowering{{"consumed_inputs"},
                         [k, mean](C &c) { return lowerVariadic(c, k, mean); }};
  };

  unary("Abs", K::Abs);
  unary("Neg", K::Neg);
  unary("Sign", K::Sign);
  unary("Exp", K::Exp);
  unary("Log", K::Log);
  unary("Sqrt", K::Sqrt);
  unary("Reciprocal", K::Reciprocal);
  unary("Sin", K::Sin);
  unary("Cos", K::Cos);
  unary("Tan", K::Tan);
  unary("Asin", K::Asin);
  unary("Acos", K::Acos);
  unary("Atan", K::Atan);
  unary("Sinh", K::Sinh);
  unary("Cosh", K::Cosh);
  unary("Tanh", K::Tanh);
  unary("Asinh", K::Asinh);
  unary("Acosh", K::Acosh);
  unary("Atanh", K::Atanh);
  unary("Erf", K::Erf);
  unary("Floor", K::Floor);
  unary("Ceil", K::Ceil);
  unary("Round", K::Round);
  unary("Sigmoid", K::Sigmoid);
  unary("IsNaN", K::IsNaN);
  unary("Not", K::Not);
  unary("BitwiseNot", K::BitNot);
  t["IsInf"] = OpLowering{{"detect_positive", "detect_negative"}, lowerIsInf};

  binary("Add", K::Add);
  binary("Sub", K::Sub);
  binary("Mul", K::Mul);
  binary("Div", K::Div);
  binary("BitwiseAnd", K::BitAnd);
  binary("BitwiseOr", K::BitOr);
  binary("BitwiseXor", K::BitXor);
  binary("And", K::And);
  binary("Or", K::Or);
  binary("Xor", K::Xor);
  binary("Equal", K::Equal);
  binary("Less", K::Less);
  binary("LessOrEqual", K::LessEqual);
  binary("Greater", K::Greater);
  binary("GreaterOrEqual", K::GreaterEqual);
  t["Pow"] = OpLowering{{"broadcast", "axis"}, lowerPow};
  t["Mod"] = OpLowering{{"fmod"}, lowerMod};
  t["BitShift"] = OpLowering{{"direction"}, lowerBitShift};
  t["Where"] = OpLowering{{}, lowerWhere};

  variadic("Max", K::Max, false);
  variadic("Min", K::Min, false);
  variadic("Sum", K::Add, false);
  variadic("Mean", K::Add, true);

  t["Clip"] = OpLowering{{"min", "max", "consumed_inputs"}, lowerClip};
  t["Relu"] = OpLowering{{"consumed_inputs"}, lowerRelu};
  t["LeakyRelu"] = OpLowering{{"alpha", "consumed_inputs"}, lowerLeakyRelu};
  t["PRelu"] = OpLowering{{"consumed_inputs"}, lowerPRelu};
  t["Elu"] = OpLowering{{"alpha", "consumed_inputs"}, lowerElu};
  t["Selu"] = OpLowering{{"alpha", "gamma", "consumed_inputs"}, lowerSelu};
  t["Celu"] = OpLowering{{"alpha"}, lowerCelu};
  t["HardSigmoid"] = OpLowering{{"alpha", "beta", "consumed_inputs"}, lowerHardSigmoid};
  t["HardSwish"] = OpLowering{{}, lowerHardSwish};
  t["Softplus"] = OpLowering{{}, lowerSoftplus};
  t["Softsign"] = OpLowering{{}, lowerSoftsign};
  t["ThresholdedRelu"] = OpLowering{{"alpha"}, lowerThresholdedRelu};
  t["Shrink"] = OpLowering{{"bias", "lambd"}, lowerShrink};
  t["Mish"] = OpLowering{{}, lowerMish};
  t["Swish"] = OpLowering{{"alpha"}, lowerSwish};
  t["Gelu"] = OpLowering{{"approximate"}, lowerGelu};
  t["Cast"] = OpLowering{{"to", "saturate", "round_mode"}, lowerCast};
  t["CastLike"] = OpLowering{{"saturate", "round_mode"}, lowerCastLike};
  t["BitCast"] = OpLowering{{"to"}, lowerBitCast};
  t["Dropout"] = OpLowering{{"ratio", "seed", "is_test", "consumed_inputs"}, lowerDropout};
  t["Size"] = OpLowering{{}, lowerSize};
}

} // namespace nnc::onnxfe

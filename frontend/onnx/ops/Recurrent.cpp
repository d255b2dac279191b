// ONNX lowerings of the recurrent operators (RNN, GRU, LSTM): one matmul projects the inputs
// of all time steps and gates up front, then a scan node runs one step per iteration: one
// matmul of the hidden state by all gates' recurrent weights (GRU without
// linear_before_reset: a second one for its hidden gate, after the reset gate) and the gate
// math as elementwise ops, which the fusion passes group (the gate slices are views). The
// step is compiled once whatever the sequence length, and so is its gradient (ir/Loop.h).
#include <algorithm>
#include <cctype>
#include <optional>

#include "onnx/Lowering.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

using Ints = std::vector<int64_t>;

enum class CellKind { Rnn, Gru, Lstm };

/// One activation function of the spec's list, with its alpha and beta.
struct Activation {
  std::string name; // Lower case.
  double alpha = 0;
  double beta = 0;
};

std::string lowerCase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// Emits the unrolled recurrence of one RNN/GRU/LSTM node.
class RecurrentLowering {
public:
  RecurrentLowering(LoweringContext &ctx, CellKind kind) : ctx_(ctx), kind_(kind) {}

  Error run();

private:
  // ---- Small emitters ----
  Expected<Value *> op(OpKind k, std::vector<Value *> ops, AttrMap a = {}) {
    if (!body_)
      return ctx_.emit(k, std::move(ops), std::move(a));
    Expected<Node *> n = body_->createInferred(k, std::move(ops), std::move(a));
    if (!n)
      return n.error().withContext(ctx_.place());
    return (*n)->result();
  }
  Value *constant(const Tensor &t) {
    if (!body_)
      return ctx_.constant(t);
    return body_->createNode(OpKind::Constant, {}, {t.type()}, {{"value", t}})->result();
  }
  Value *scalar(double v) { return scalarOf(dtype_, v); }
  Value *scalarOf(DType t, double v) {
    if (!body_)
      return ctx_.scalar(t, v);
    Tensor s = Tensor::zeros(t, {});
    setElementFromDouble(s, 0, v);
    return constant(s);
  }
  Value *i64s(const std::vector<int64_t> &v) {
    return constant(Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v));
  }
  /// x[start:end] along `axis`.
  Expected<Value *> slice(Value *x, int64_t axis, int64_t start, int64_t end) {
    return op(OpKind::Slice, {x, i64s({start}), i64s({end}), i64s({axis})});
  }
  /// Direction d of a [D, ...] tensor, without the D axis.
  Expected<Value *> direction(Value *x, int64_t d) {
    NNC_ASSIGN_OR_RETURN(Value * s, slice(x, 0, d, d + 1));
    return op(OpKind::Squeeze, {s}, {{"axes", Ints{0}}});
  }
  Expected<Value *> applyActivation(const Activation &a, Value *x);
  Expected<Value *> clip(Value *x) {
    if (!clip_)
      return x;
    NNC_ASSIGN_OR_RETURN(Value * lo, op(OpKind::Max, {x, scalar(-*clip_)}));
    return op(OpKind::Min, {lo, scalar(*clip_)});
  }

  Error parseAttributes();
  /// The recurrence of direction d (reverse: time runs from T-1 down to 0) as a scan node
  /// whose body is one step. Sets y ([T, N, H], in time order), hLast and cLast.
  Error runDirection(int64_t d, bool reverse, Value *&y, Value *&hLast, Value *&cLast);

  LoweringContext &ctx_;
  CellKind kind_;
  /// The step graph being built (op() and the constants go there), or null.
  Graph *body_ = nullptr;
  DType dtype_ = DType::F32;
  int64_t numGates_ = 1;
  int64_t hidden_ = 0;
  /// The sequence length: X's time dim, static or symbolic (a model exported with a dynamic
  /// length: each run's specialization makes it static before the scan is compiled).
  Dim stepsDim_;
  /// Its value when static, else -1.
  int64_t steps_ = -1;
  int64_t layout_ = 0;
  int64_t numDirections_ = 1;
  std::string directionName_;
  std::vector<Activation> activations_; // numActivations per direction, directions in order.
  std::optional<double> clip_;
  bool inputForget_ = false;
  bool linearBeforeReset_ = false;

  Value *x_ = nullptr;         // [T, N, I] (layout 0 form).
  Value *w_ = nullptr;         // [D, G*H, I]
  Value *r_ = nullptr;         // [D, G*H, H]
  Value *b_ = nullptr;         // [D, 2*G*H] or null
  Value *lens_ = nullptr;      // [N, 1] i64 or null (no masking needed)
  Value *h0_ = nullptr;        // [D, N, H] or null (zeros)
  Value *c0_ = nullptr;        // [D, N, H] or null (zeros)
  Value *p_ = nullptr;         // [D, 3*H] or null
  Value *zeroState_ = nullptr; // [N, H] zeros
};

Expected<Value *> RecurrentLowering::applyActivation(const Activation &a, Value *x) {
  const std::string &n = a.name;
  if (n == "sigmoid")
    return op(OpKind::Sigmoid, {x});
  if (n == "tanh")
    return op(OpKind::Tanh, {x});
  if (n == "relu")
    return op(OpKind::Max, {x, scalar(0)});
  if (n == "affine") {
    NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {x, scalar(a.alpha)}));
    return op(OpKind::Add, {m, scalar(a.beta)});
  }
  if (n == "leakyrelu") {
    NNC_ASSIGN_OR_RETURN(Value * neg, op(OpKind::Less, {x, scalar(0)}));
    NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {x, scalar(a.alpha)}));
    return op(OpKind::Select, {neg, m, x});
  }
  if (n == "thresholdedrelu") {
    NNC_ASSIGN_OR_RETURN(Value * gt, op(OpKind::Greater, {x, scalar(a.alpha)}));
    return op(OpKind::Select, {gt, x, scalar(0)});
  }
  if (n == "scaledtanh") {
    NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {x, scalar(a.beta)}));
    NNC_ASSIGN_OR_RETURN(Value * t, op(OpKind::Tanh, {m}));
    return op(OpKind::Mul, {t, scalar(a.alpha)});
  }
  if (n == "hardsigmoid") {
    NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {x, scalar(a.alpha)}));
    NNC_ASSIGN_OR_RETURN(Value * s, op(OpKind::Add, {m, scalar(a.beta)}));
    NNC_ASSIGN_OR_RETURN(Value * lo, op(OpKind::Max, {s, scalar(0)}));
    return op(OpKind::Min, {lo, scalar(1)});
  }
  if (n == "elu") {
    NNC_ASSIGN_OR_RETURN(Value * pos, op(OpKind::Greater, {x, scalar(0)}));
    NNC_ASSIGN_OR_RETURN(Value * e, op(OpKind::Exp, {x}));
    NNC_ASSIGN_OR_RETURN(Value * em1, op(OpKind::Sub, {e, scalar(1)}));
    NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {em1, scalar(a.alpha)}));
    return op(OpKind::Select, {pos, x, m});
  }
  if (n == "softsign") {
    NNC_ASSIGN_OR_RETURN(Value * ab, op(OpKind::Abs, {x}));
    NNC_ASSIGN_OR_RETURN(Value * d, op(OpKind::Add, {ab, scalar(1)}));
    return op(OpKind::Div, {x, d});
  }
  if (n == "softplus") { // max(x, 0) + log(1 + e^-|x|), without overflow.
    NNC_ASSIGN_OR_RETURN(Value * ab, op(OpKind::Abs, {x}));
    NNC_ASSIGN_OR_RETURN(Value * na, op(OpKind::Neg, {ab}));
    NNC_ASSIGN_OR_RETURN(Value * e, op(OpKind::Exp, {na}));
    NNC_ASSIGN_OR_RETURN(Value * e1, op(OpKind::Add, {e, scalar(1)}));
    NNC_ASSIGN_OR_RETURN(Value * l, op(OpKind::Log, {e1}));
    NNC_ASSIGN_OR_RETURN(Value * p, op(OpKind::Max, {x, scalar(0)}));
    return op(OpKind::Add, {p, l});
  }
  return ctx_.error("unsupported activation '{}'", a.name);
}

Error RecurrentLowering::parseAttributes() {
  numGates_ = kind_ == CellKind::Rnn ? 1 : kind_ == CellKind::Gru ? 3 : 4;
  NNC_ASSIGN_OR_RETURN(directionName_, ctx_.stringAttr("direction", "forward"));
  if (directionName_ != "forward" && directionName_ != "reverse" &&
      directionName_ != "bidirectional")
    return ctx_.error("attribute 'direction' = '{}' is not forward, reverse or bidirectional",
                      directionName_);
  numDirections_ = directionName_ == "bidirectional" ? 2 : 1;
  NNC_ASSIGN_OR_RETURN(layout_, ctx_.intAttr("layout", 0));
  if (layout_ != 0 && layout_ != 1)
    return ctx_.error("attribute 'layout' = {} is not 0 or 1", layout_);
  if (ctx_.hasAttr("clip")) {
    NNC_ASSIGN_OR_RETURN(double c, ctx_.floatAttr("clip", 0));
    if (!(c > 0))
      return ctx_.error("attribute 'clip' = {} must be positive", c);
    clip_ = c;
  }
  if (kind_ == CellKind::Lstm) {
    NNC_ASSIGN_OR_RETURN(int64_t f, ctx_.intAttr("input_forget", 0));
    inputForget_ = f != 0;
  }
  if (kind_ == CellKind::Gru) {
    NNC_ASSIGN_OR_RETURN(int64_t l, ctx_.intAttr("linear_before_reset", 0));
    linearBeforeReset_ = l != 0;
  }

  // Activations: f (RNN); f, g (GRU); f, g, h (LSTM); per direction. alpha and beta are
  // consumed in list order by the functions that take them (as ONNX Runtime does).
  size_t per = kind_ == CellKind::Rnn ? 1 : kind_ == CellKind::Gru ? 2 : 3;
  std::vector<std::string> dflt = kind_ == CellKind::Rnn ? std::vector<std::string>{"Tanh"}
                                  : kind_ == CellKind::Gru
                                      ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<std::string> names;
  if (ctx_.hasAttr("activations")) {
    NNC_ASSIGN_OR_RETURN(names, ctx_.stringsAttr("activations", {}));
  } else {
    for (int64_t d = 0; d < numDirections_; ++d)
      names.insert(names.end(), dflt.begin(), dflt.end());
  }
  NNC_ASSIGN_OR_RETURN(std::vector<double> alphas, ctx_.floatsAttr("activation_alpha", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<double> betas, ctx_.floatsAttr("activation_beta", {}));
  size_t ai = 0, bi = 0;
  for (const std::string &raw : names) {
    Activation a{lowerCase(raw)};
    const std::string &n = a.name;
    bool needsAlpha = n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" ||
                      n == "scaledtanh" || n == "hardsigmoid" || n == "elu";
    bool needsBeta = n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
    a.alpha = n == "leakyrelu" ? 0.01 : n == "hardsigmoid" ? 0.2 : 1.0;
    a.beta = n == "hardsigmoid" ? 0.5 : n == "scaledtanh" ? 1.0 : 0.0;
    if (needsAlpha && ai < alphas.size())
      a.alpha = alphas[ai++];
    if (needsBeta && bi < betas.size())
      a.beta = betas[bi++];
    static const char *const known[] = {
        "sigmoid",    "tanh",        "relu", "affine",   "leakyrelu", "thresholdedrelu",
        "scaledtanh", "hardsigmoid", "elu",  "softsign", "softplus"};
    if (std::find_if(std::begin(known), std::end(known), [&](const char *k) { return n == k; }) ==
        std::end(known))
      return ctx_.error("attribute 'activations': unsupported activation '{}'", raw);
    activations_.push_back(a);
  }
  if (activations_.size() == per && numDirections_ == 2) {
    std::vector<Activation> twice = activations_;
    activations_.insert(activations_.end(), twice.begin(), twice.end());
  }
  if (activations_.size() != per * static_cast<size_t>(numDirections_))
    return ctx_.error("attribute 'activations' has {} entries; {} direction(s) need {}",
                      activations_.size(), numDirections_, per * numDirections_);
  return Error::success();
}

Error RecurrentLowering::runDirection(int64_t d, bool reverse, Value *&y, Value *&hLast,
                                      Value *&cLast) {
  const int64_t G = numGates_, H = hidden_;
  const size_t per = kind_ == CellKind::Rnn ? 1 : kind_ == CellKind::Gru ? 2 : 3;
  const Activation &f = activations_[d * per];
  const Activation *g = per > 1 ? &activations_[d * per + 1] : nullptr;
  const Activation *h = per > 2 ? &activations_[d * per + 2] : nullptr;
  const bool lstm = kind_ == CellKind::Lstm;

  // ---- Before the loop (outer graph) ----
  NNC_ASSIGN_OR_RETURN(Value * w, direction(w_, d)); // [G*H, I]
  NNC_ASSIGN_OR_RETURN(Value * r, direction(r_, d)); // [G*H, H]
  Value *b = nullptr;
  if (b_) {
    NNC_ASSIGN_OR_RETURN(b, direction(b_, d)); // [2*G*H]
  }
  NNC_ASSIGN_OR_RETURN(Value * xFlat,
                       op(OpKind::Reshape, {x_, i64s({-1, x_->shape()[2].value()})}));

  // The input projection of all steps and gates as one matmul [T*N, I] x [I, G*H] plus the
  // biases (GRU's recurrent hidden bias kept apart under linear_before_reset).
  NNC_ASSIGN_OR_RETURN(Value * wT, op(OpKind::Transpose, {w}, {{"perm", Ints{1, 0}}}));
  NNC_ASSIGN_OR_RETURN(Value * proj, op(OpKind::MatMul, {xFlat, wT})); // [T*N, G*H]
  Value *rbHidden = nullptr;
  if (b) {
    std::vector<Value *> biases;
    for (int64_t gi = 0; gi < G; ++gi) {
      NNC_ASSIGN_OR_RETURN(Value * wb, slice(b, 0, gi * H, (gi + 1) * H));
      NNC_ASSIGN_OR_RETURN(Value * rb, slice(b, 0, (G + gi) * H, (G + gi + 1) * H));
      if (kind_ == CellKind::Gru && gi == 2 && linearBeforeReset_) {
        rbHidden = rb;
        biases.push_back(wb);
      } else {
        NNC_ASSIGN_OR_RETURN(Value * sum, op(OpKind::Add, {wb, rb}));
        biases.push_back(sum);
      }
    }
    NNC_ASSIGN_OR_RETURN(Value * bias, op(OpKind::Concat, biases, {{"axis", int64_t{0}}}));
    NNC_ASSIGN_OR_RETURN(proj, op(OpKind::Add, {proj, bias}));
  }
  Value *proj3Shape = nullptr;
  if (steps_ >= 0) {
    proj3Shape = i64s({steps_, -1, G * H});
  } else { // [T, N] of X, then G*H
    NNC_ASSIGN_OR_RETURN(Value * tn,
                         op(OpKind::ShapeOf, {x_}, {{"start", int64_t{0}}, {"end", int64_t{2}}}));
    NNC_ASSIGN_OR_RETURN(proj3Shape,
                         op(OpKind::Concat, {tn, i64s({G * H})}, {{"axis", int64_t{0}}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * proj3, op(OpKind::Reshape, {proj, proj3Shape}));
  // The recurrent weights of the gates whose pre-activation is x + H R^T, as one [H, K*H]
  // matrix (one matmul per step); GRU's hidden gate, which multiplies by r first without
  // linear_before_reset, has its own.
  const int64_t fusedGates = kind_ == CellKind::Gru && !linearBeforeReset_ ? 2 : G;
  NNC_ASSIGN_OR_RETURN(Value * rk, slice(r, 0, 0, fusedGates * H));
  NNC_ASSIGN_OR_RETURN(Value * rTFused, op(OpKind::Transpose, {rk}, {{"perm", Ints{1, 0}}}));
  Value *rTHidden = nullptr;
  if (kind_ == CellKind::Gru && !linearBeforeReset_) {
    NNC_ASSIGN_OR_RETURN(Value * rh, slice(r, 0, 2 * H, 3 * H));
    NNC_ASSIGN_OR_RETURN(rTHidden, op(OpKind::Transpose, {rh}, {{"perm", Ints{1, 0}}}));
  }
  // Peepholes i, o, f.
  Value *pI = nullptr, *pO = nullptr, *pF = nullptr;
  if (p_) {
    NNC_ASSIGN_OR_RETURN(Value * p, direction(p_, d));
    NNC_ASSIGN_OR_RETURN(pI, slice(p, 0, 0, H));
    NNC_ASSIGN_OR_RETURN(pO, slice(p, 0, H, 2 * H));
    NNC_ASSIGN_OR_RETURN(pF, slice(p, 0, 2 * H, 3 * H));
  }
  Value *h0 = zeroState_, *c0 = zeroState_;
  if (h0_) {
    NNC_ASSIGN_OR_RETURN(h0, direction(h0_, d));
  }
  if (c0_) {
    NNC_ASSIGN_OR_RETURN(c0, direction(c0_, d));
  }
  // sequence_lens: live[t, n] = t < lens[n], a second sequence of the loop.
  Value *live = nullptr;
  if (lens_) {
    Value *range = nullptr;
    if (steps_ >= 0) {
      std::vector<int64_t> ts(steps_);
      for (int64_t t = 0; t < steps_; ++t)
        ts[t] = t;
      range = constant(Tensor::fromVector<int64_t>(DType::I64, {steps_, 1, 1}, ts));
    } else { // 0 .. T-1 of a run-time T, as [T, 1, 1]
      NNC_ASSIGN_OR_RETURN(Value * t1, op(OpKind::ShapeOf, {x_},
                                          {{"start", int64_t{0}}, {"end", int64_t{1}}}));
      NNC_ASSIGN_OR_RETURN(Value * t, op(OpKind::Reshape, {t1, i64s({})}));
      Value *zero = constant(Tensor::scalar<int64_t>(DType::I64, 0));
      Value *one = constant(Tensor::scalar<int64_t>(DType::I64, 1));
      NNC_ASSIGN_OR_RETURN(Value * ts, op(OpKind::Range, {zero, t, one}));
      NNC_ASSIGN_OR_RETURN(range, op(OpKind::Reshape, {ts, i64s({-1, 1, 1})}));
    }
    NNC_ASSIGN_OR_RETURN(live, op(OpKind::Less, {range, lens_})); // [T, N, 1]
  }

  // ---- One step (the loop's body) ----
  // Inputs: states h (and c), step t of the projection (and of live), then the invariants.
  std::vector<Value *> operands = {h0};
  if (lstm)
    operands.push_back(c0);
  operands.push_back(proj3);
  if (live)
    operands.push_back(live);
  std::vector<Value *> invariants = {rTFused};
  for (Value *v : {rTHidden, rbHidden, pI, pO, pF})
    if (v)
      invariants.push_back(v);
  operands.insert(operands.end(), invariants.begin(), invariants.end());
  auto step = std::make_shared<Graph>(lowerCase(kind_ == CellKind::Rnn   ? "rnn_step"
                                                : kind_ == CellKind::Gru ? "gru_step"
                                                                         : "lstm_step"));
  std::vector<Value *> in;
  for (size_t i = 0; i < operands.size(); ++i) {
    TensorType t = operands[i]->type();
    bool sequence = operands[i] == proj3 || operands[i] == live;
    if (sequence)
      t.shape.erase(t.shape.begin());
    static const char *const stateNames[] = {"h", "c"};
    std::string name = i < (lstm ? 2u : 1u)   ? stateNames[i]
                       : operands[i] == proj3 ? "x"
                       : operands[i] == live  ? "live"
                                              : fmt::format("w{}", i);
    in.push_back(step->addInput(name, t));
  }
  auto bodyValue = [&](Value *outer) -> Value * {
    if (!outer)
      return nullptr;
    for (size_t i = 0; i < operands.size(); ++i)
      if (operands[i] == outer)
        return in[i];
    return nullptr;
  };
  body_ = step.get();
  Value *hState = in[0], *cState = lstm ? in[1] : nullptr;
  Value *xStep = bodyValue(proj3), *liveStep = bodyValue(live);
  Value *rTFusedB = bodyValue(rTFused), *rTHiddenB = bodyValue(rTHidden);
  Value *rbHiddenB = bodyValue(rbHidden);
  Value *pIB = bodyValue(pI), *pOB = bodyValue(pO), *pFB = bodyValue(pF);

  Error err = [&]() -> Error {
    Value *hrStep = nullptr; // H R^T, once per step
    auto hrGate = [&](int64_t gi) -> Expected<Value *> {
      if (!hrStep) {
        NNC_ASSIGN_OR_RETURN(hrStep, op(OpKind::MatMul, {hState, rTFusedB}));
      }
      return slice(hrStep, 1, gi * H, (gi + 1) * H);
    };
    auto gatePre = [&](int64_t gi) -> Expected<Value *> {
      NNC_ASSIGN_OR_RETURN(Value * xg, slice(xStep, 1, gi * H, (gi + 1) * H));
      NNC_ASSIGN_OR_RETURN(Value * hg, hrGate(gi));
      return op(OpKind::Add, {xg, hg});
    };
    auto activate = [&](const Activation &a, Value *v) -> Expected<Value *> {
      NNC_ASSIGN_OR_RETURN(Value * c, clip(v));
      return applyActivation(a, c);
    };
    Value *hNew = nullptr, *cNew = nullptr;
    if (kind_ == CellKind::Rnn) {
      NNC_ASSIGN_OR_RETURN(Value * pre, gatePre(0));
      NNC_ASSIGN_OR_RETURN(hNew, activate(f, pre));
    } else if (kind_ == CellKind::Gru) { // Gates z, r, h.
      NNC_ASSIGN_OR_RETURN(Value * zPre, gatePre(0));
      NNC_ASSIGN_OR_RETURN(Value * z, activate(f, zPre));
      NNC_ASSIGN_OR_RETURN(Value * rPre, gatePre(1));
      NNC_ASSIGN_OR_RETURN(Value * rg, activate(f, rPre));
      NNC_ASSIGN_OR_RETURN(Value * hPre, slice(xStep, 1, 2 * H, 3 * H));
      if (linearBeforeReset_) { // r * (H Rh^T + Rbh)
        NNC_ASSIGN_OR_RETURN(Value * lin, hrGate(2));
        if (rbHiddenB) {
          NNC_ASSIGN_OR_RETURN(lin, op(OpKind::Add, {lin, rbHiddenB}));
        }
        NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::Mul, {rg, lin}));
        NNC_ASSIGN_OR_RETURN(hPre, op(OpKind::Add, {hPre, m}));
      } else { // (r * H) Rh^T
        NNC_ASSIGN_OR_RETURN(Value * rh, op(OpKind::Mul, {rg, hState}));
        NNC_ASSIGN_OR_RETURN(Value * m, op(OpKind::MatMul, {rh, rTHiddenB}));
        NNC_ASSIGN_OR_RETURN(hPre, op(OpKind::Add, {hPre, m}));
      }
      NNC_ASSIGN_OR_RETURN(Value * hc, activate(*g, hPre));
      // H' = (1 - z) * hc + z * H = hc + z * (H - hc)
      NNC_ASSIGN_OR_RETURN(Value * diff, op(OpKind::Sub, {hState, hc}));
      NNC_ASSIGN_OR_RETURN(Value * zd, op(OpKind::Mul, {z, diff}));
      NNC_ASSIGN_OR_RETURN(hNew, op(OpKind::Add, {hc, zd}));
    } else { // LSTM, gates i, o, f, c.
      NNC_ASSIGN_OR_RETURN(Value * iPre, gatePre(0));
      if (pIB) {
        NNC_ASSIGN_OR_RETURN(Value * pc, op(OpKind::Mul, {pIB, cState}));
        NNC_ASSIGN_OR_RETURN(iPre, op(OpKind::Add, {iPre, pc}));
      }
      NNC_ASSIGN_OR_RETURN(Value * ig, activate(f, iPre));
      Value *fg = nullptr;
      if (inputForget_) {
        NNC_ASSIGN_OR_RETURN(fg, op(OpKind::Sub, {scalar(1), ig}));
      } else {
        NNC_ASSIGN_OR_RETURN(Value * fPre, gatePre(2));
        if (pFB) {
          NNC_ASSIGN_OR_RETURN(Value * pc, op(OpKind::Mul, {pFB, cState}));
          NNC_ASSIGN_OR_RETURN(fPre, op(OpKind::Add, {fPre, pc}));
        }
        NNC_ASSIGN_OR_RETURN(fg, activate(f, fPre));
      }
      NNC_ASSIGN_OR_RETURN(Value * cPre, gatePre(3));
      NNC_ASSIGN_OR_RETURN(Value * cc, activate(*g, cPre));
      NNC_ASSIGN_OR_RETURN(Value * icc, op(OpKind::Mul, {ig, cc}));
      NNC_ASSIGN_OR_RETURN(Value * fc, op(OpKind::Mul, {fg, cState}));
      NNC_ASSIGN_OR_RETURN(cNew, op(OpKind::Add, {icc, fc}));
      NNC_ASSIGN_OR_RETURN(Value * oPre, gatePre(1));
      if (pOB) {
        NNC_ASSIGN_OR_RETURN(Value * pc, op(OpKind::Mul, {pOB, cNew}));
        NNC_ASSIGN_OR_RETURN(oPre, op(OpKind::Add, {oPre, pc}));
      }
      NNC_ASSIGN_OR_RETURN(Value * og, activate(f, oPre));
      NNC_ASSIGN_OR_RETURN(Value * hc, applyActivation(*h, cNew));
      NNC_ASSIGN_OR_RETURN(hNew, op(OpKind::Mul, {og, hc}));
    }
    // sequence_lens: steps at or past a batch entry's length keep the state and give Y = 0.
    Value *yStep = hNew;
    if (liveStep) {
      NNC_ASSIGN_OR_RETURN(yStep, op(OpKind::Select, {liveStep, hNew, scalar(0)}));
      NNC_ASSIGN_OR_RETURN(hNew, op(OpKind::Select, {liveStep, hNew, hState}));
      if (cNew) {
        NNC_ASSIGN_OR_RETURN(cNew, op(OpKind::Select, {liveStep, cNew, cState}));
      }
    }
    std::vector<Value *> outs = {hNew};
    if (lstm)
      outs.push_back(cNew);
    outs.push_back(yStep);
    step->setOutputs(outs);
    return Error::success();
  }();
  body_ = nullptr;
  NNC_TRY(std::move(err));

  // ---- The loop ----
  Graph &outer = ctx_.graph();
  const int carried = lstm ? 2 : 1;
  std::vector<TensorType> types = {h0->type()};
  if (lstm)
    types.push_back(c0->type());
  TensorType yType = h0->type();
  yType.shape.insert(yType.shape.begin(), stepsDim_);
  types.push_back(yType);
  Node *scan = outer.createNode(OpKind::Scan, operands, types,
                                {{"num_carried", int64_t{carried}},
                                 {"num_scan_inputs", int64_t{live ? 2 : 1}},
                                 {"reverse", int64_t{reverse ? 1 : 0}}});
  scan->setBody(step);
  Expected<std::vector<TensorType>> inferred = scan->info().infer(*scan);
  if (!inferred)
    return inferred.error().withContext(ctx_.place());
  for (size_t i = 0; i < scan->numResults(); ++i)
    scan->result(i)->setType((*inferred)[i]);
  hLast = scan->result(0);
  cLast = lstm ? scan->result(1) : zeroState_;
  y = scan->result(carried);
  return Error::success();
}

Error RecurrentLowering::run() {
  NNC_TRY(parseAttributes());
  NNC_ASSIGN_OR_RETURN(Value * x, ctx_.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(w_, ctx_.requiredInput(1, "W"));
  NNC_ASSIGN_OR_RETURN(r_, ctx_.requiredInput(2, "R"));
  b_ = ctx_.input(3);
  Value *seqLens = ctx_.input(4);
  h0_ = ctx_.input(5);
  if (kind_ == CellKind::Lstm) {
    c0_ = ctx_.input(6);
    p_ = ctx_.input(7);
  }
  dtype_ = x->dtype();
  NNC_USER_CHECK(isFloat(dtype_), "{}: X must be a float tensor, not {}", ctx_.place(),
                 dtypeName(dtype_));
  NNC_USER_CHECK(x->rank() == 3, "{}: X must have rank 3, not {}", ctx_.place(), x->rank());
  auto checkTensor = [&](Value *v, const char *name, std::vector<int64_t> dims) -> Error {
    if (!v)
      return Error::success();
    NNC_USER_CHECK(v->dtype() == dtype_, "{}: {} must be {} like X, not {}", ctx_.place(), name,
                   dtypeName(dtype_), dtypeName(v->dtype()));
    NNC_USER_CHECK(v->rank() == static_cast<int64_t>(dims.size()),
                   "{}: {} must have rank {}, not {}", ctx_.place(), name, dims.size(), v->rank());
    for (size_t i = 0; i < dims.size(); ++i) {
      const Dim &dim = v->shape()[i];
      // A symbolic dim (a state built from the batch size at run time) is checked by the
      // ops that use it.
      if (dims[i] >= 0 && dim.isStatic())
        NNC_USER_CHECK(dim.value() == dims[i], "{}: {} dim {} is {}, expected {}", ctx_.place(),
                       name, i, dim.str(), dims[i]);
    }
    return Error::success();
  };
  NNC_USER_CHECK(r_->rank() == 3 && r_->shape()[2].isStatic(),
                 "{}: R must be [num_directions, {}*hidden_size, hidden_size] with static dims",
                 ctx_.place(), numGates_);
  hidden_ = r_->shape()[2].value();
  if (ctx_.hasAttr("hidden_size")) {
    NNC_ASSIGN_OR_RETURN(int64_t hs, ctx_.intAttr("hidden_size", 0));
    NNC_USER_CHECK(hs == hidden_, "{}: attribute 'hidden_size' = {} but R's last dim is {}",
                   ctx_.place(), hs, hidden_);
  }
  NNC_USER_CHECK(x->shape()[2].isStatic(), "{}: X's input_size dim must be static", ctx_.place());
  const int64_t inputSize = x->shape()[2].value();
  const int64_t D = numDirections_, G = numGates_, H = hidden_;
  NNC_TRY(checkTensor(w_, "W", {D, G * H, inputSize}));
  NNC_TRY(checkTensor(r_, "R", {D, G * H, H}));
  NNC_TRY(checkTensor(b_, "B", {D, 2 * G * H}));
  NNC_TRY(checkTensor(p_, "P", {D, 3 * H}));

  // To layout 0: X [T, N, I], states [D, N, H].
  if (layout_ == 1) {
    NNC_ASSIGN_OR_RETURN(x, op(OpKind::Transpose, {x}, {{"perm", Ints{1, 0, 2}}}));
    for (Value **s : {&h0_, &c0_}) {
      if (*s) {
        NNC_ASSIGN_OR_RETURN(*s, op(OpKind::Transpose, {*s}, {{"perm", Ints{1, 0, 2}}}));
      }
    }
  }
  x_ = x;
  stepsDim_ = x->shape()[0];
  if (stepsDim_.isStatic()) {
    steps_ = stepsDim_.value();
    NNC_USER_CHECK(steps_ >= 1, "{}: the sequence length is 0", ctx_.place());
  }
  const Dim &batch = x->shape()[1];
  NNC_TRY(checkTensor(h0_, "initial_h", {D, -1, H}));
  NNC_TRY(checkTensor(c0_, "initial_c", {D, -1, H}));
  for (Value *s : {h0_, c0_}) {
    if (s && s->shape()[1].isStatic() && batch.isStatic())
      NNC_USER_CHECK(s->shape()[1].value() == batch.value(),
                     "{}: initial state batch {} differs from X's {}", ctx_.place(),
                     s->shape()[1].value(), batch.value());
  }

  // sequence_lens as [N, 1] i64; dropped when a constant says every sequence is full.
  if (seqLens) {
    NNC_USER_CHECK(seqLens->rank() == 1 && isInteger(seqLens->dtype()),
                   "{}: sequence_lens must be a 1-D integer tensor", ctx_.place());
    bool full = false;
    if (const Tensor *c = ctx_.tryConstantInput(4)) {
      full = true;
      for (int64_t i = 0; i < c->numElements(); ++i) {
        int64_t l = static_cast<int64_t>(c->elementAsDouble(i));
        NNC_USER_CHECK(l >= 0 && (steps_ < 0 || l <= steps_),
                       "{}: sequence_lens[{}] = {} is outside [0, {}]", ctx_.place(), i, l,
                       stepsDim_.str());
        full = full && l == steps_;
      }
    }
    if (!full) {
      Value *l = seqLens;
      if (l->dtype() != DType::I64) {
        NNC_ASSIGN_OR_RETURN(l, op(OpKind::Cast, {l}, {{"to", DType::I64}}));
      }
      NNC_ASSIGN_OR_RETURN(lens_, op(OpKind::Unsqueeze, {l}, {{"axes", Ints{1}}}));
    }
  }
  // Zeros [N, H] for absent initial states (N may be symbolic).
  NNC_ASSIGN_OR_RETURN(Value * nDim,
                       op(OpKind::ShapeOf, {x}, {{"start", int64_t{1}}, {"end", int64_t{2}}}));
  NNC_ASSIGN_OR_RETURN(Value * stateShape,
                       op(OpKind::Concat, {nDim, ctx_.i64Vector({H})}, {{"axis", int64_t{0}}}));
  NNC_ASSIGN_OR_RETURN(zeroState_, op(OpKind::Expand, {scalar(0), stateShape}));

  std::vector<Value *> yDirs, hDirs, cDirs;
  for (int64_t d = 0; d < D; ++d) {
    bool reverse = directionName_ == "reverse" || d == 1;
    Value *y = nullptr, *hLast = nullptr, *cLast = nullptr;
    NNC_TRY(runDirection(d, reverse, y, hLast, cLast));
    if (ctx_.hasOutput(0)) {
      NNC_ASSIGN_OR_RETURN(Value * yd, op(OpKind::Unsqueeze, {y}, {{"axes", Ints{1}}}));
      yDirs.push_back(yd); // [T, 1, N, H]
    }
    NNC_ASSIGN_OR_RETURN(Value * h3, op(OpKind::Unsqueeze, {hLast}, {{"axes", Ints{0}}}));
    hDirs.push_back(h3);
    NNC_ASSIGN_OR_RETURN(Value * c3, op(OpKind::Unsqueeze, {cLast}, {{"axes", Ints{0}}}));
    cDirs.push_back(c3);
  }
  auto joinStates = [&](std::vector<Value *> &parts) -> Expected<Value *> {
    Value *s = parts[0];
    if (parts.size() > 1) {
      NNC_ASSIGN_OR_RETURN(s, op(OpKind::Concat, parts, {{"axis", int64_t{0}}}));
    }
    if (layout_ == 1)
      return op(OpKind::Transpose, {s}, {{"perm", Ints{1, 0, 2}}});
    return s;
  };
  if (ctx_.hasOutput(0)) {
    Value *y = yDirs[0];
    if (yDirs.size() > 1) {
      NNC_ASSIGN_OR_RETURN(y, op(OpKind::Concat, yDirs, {{"axis", int64_t{1}}}));
    }
    if (layout_ == 1) {
      NNC_ASSIGN_OR_RETURN(y, op(OpKind::Transpose, {y}, {{"perm", Ints{2, 0, 1, 3}}}));
    }
    NNC_TRY(ctx_.setOutput(0, y));
  }
  if (ctx_.hasOutput(1)) {
    NNC_ASSIGN_OR_RETURN(Value * yh, joinStates(hDirs));
    NNC_TRY(ctx_.setOutput(1, yh));
  }
  if (kind_ == CellKind::Lstm && ctx_.hasOutput(2)) {
    NNC_ASSIGN_OR_RETURN(Value * yc, joinStates(cDirs));
    NNC_TRY(ctx_.setOutput(2, yc));
  }
  return Error::success();
}

} // namespace

void registerRecurrentLowerings(LoweringTable &t) {
  const std::vector<std::string> common = {
      "activation_alpha", "activation_beta", "activations", "clip",
      "direction",        "hidden_size",     "layout"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  t["RNN"] = {common,
              [](LoweringContext &ctx) { return RecurrentLowering(ctx, CellKind::Rnn).run(); }};
  t["GRU"] = {with({"linear_before_reset"}),
              [](LoweringContext &ctx) { return RecurrentLowering(ctx, CellKind::Gru).run(); }};
  t["LSTM"] = {with({"input_forget"}),
               [](LoweringContext &ctx) { return RecurrentLowering(ctx, CellKind::Lstm).run(); }};
}

} // namespace nnc::onnxfe

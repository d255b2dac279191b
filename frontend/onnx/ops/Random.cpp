// ONNX lowerings of the random generators: RandomUniform, RandomNormal, their -Like forms,
// Bernoulli and Multinomial, all drawn from the counter-based generator of ir/Training.h
// (counterUniform: element i is a pure function of (counter, stream, i) built of exact
// integer ops), so interp, cpu and opencl draw the same numbers and the kernels fuse and
// parallelize like any elementwise op.
//
// Which numbers: ONNX leaves the generator to the runtime ("may not produce the same values
// in different implementations even if a seed is specified"). Here
// - with a `seed` attribute, the counter is the seed (its float32 bits): the same numbers on
//   every run, every target and every compile, and for every op of the graph with that seed;
// - without one, when the model is imported for training (nnc train), the counter is the
//   step count nnc::Trainer feeds (as for training-mode Dropout): new numbers every step;
// - without one otherwise, the counter is 0 and the stream is a hash of the node's first
//   output name: fixed numbers, different for each node (TVM's importer likewise fixes its
//   key at import). A compiled model is then deterministic, which its object cache and its
//   users' tests rely on.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/ranges.h>

#include "nnc/ir/Gradients.h"
#include "nnc/ir/Training.h"
#include "nnc/support/Hash.h"
#include "onnx.pb.h"
#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

/// Streams of the two uniforms RandomNormal's Box-Muller transform takes.
constexpr uint64_t kNormalRadius = 0, kNormalAngle = 1;
constexpr double kPi = 3.14159265358979323846;

/// The (counter, stream) a random node draws with; see the file comment.
struct Generator {
  Value *counter = nullptr;
  uint64_t stream = 0;
};

Expected<Generator> generatorOf(LoweringContext &ctx) {
  Graph &g = ctx.graph();
  if (ctx.hasAttr("seed")) {
    NNC_ASSIGN_OR_RETURN(double seed, ctx.floatAttr("seed", 0.0));
    if (!std::isfinite(seed))
      return ctx.error("attribute 'seed' must be finite, got {}", seed);
    float f = static_cast<float>(seed);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    return Generator{ctx.scalar(DType::I64, static_cast<double>(bits)), 0};
  }
  if (ctx.forTraining()) {
    Value *counter = g.findValue(kStepCounterInput);
    if (!counter || !counter->isGraphInput())
      counter = g.addInput(kStepCounterInput, TensorType(DType::I64, {}));
    // Each random op adds a use of the counter; the node's name keeps its stream apart
    // from Dropout's (which count uses).
    return Generator{counter, fnv1a(ctx.place())};
  }
  std::string name = ctx.proto().output_size() > 0 ? ctx.proto().output(0) : ctx.place();
  return Generator{ctx.scalar(DType::I64, 0), fnv1a(name)};
}

/// The float dtype named by attribute `attr`, or `dflt` when absent; an error for a type
/// that is not a float (the generators draw floats).
Expected<DType> floatDtypeAttr(LoweringContext &ctx, const char *attr, DType dflt) {
  DType t = dflt;
  if (ctx.hasAttr(attr)) {
    NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr(attr, 0));
    std::optional<DType> d = dtypeFromOnnx(static_cast<int>(code));
    if (!d)
      return ctx.error("unsupported dtype {} in attribute '{}'", code, attr);
    t = *d;
  }
  if (t != DType::F64 && t != DType::F32 && t != DType::F16 && t != DType::BF16)
    return ctx.error("the generated dtype must be float16, bfloat16, float or double, got {}",
                     dtypeName(t));
  return t;
}

/// Numbers are drawn and transformed in f64 for an f64 result, in f32 otherwise (then
/// rounded to f16/bf16 by one cast).
DType computeType(DType out) { return out == DType::F64 ? DType::F64 : DType::F32; }

/// The output shape: attribute `shape` (RandomUniform/RandomNormal) or input 0's shape (the
/// -Like forms); for the latter the default dtype is the input's.
struct ShapeAndType {
  Value *shape = nullptr;
  DType dtype = DType::F32;
};

Expected<ShapeAndType> shapeAndType(LoweringContext &ctx, bool like) {
  ShapeAndType r;
  if (like) {
    NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
    NNC_ASSIGN_OR_RETURN(r.shape, ctx.emit(K::ShapeOf, {x}));
    // The default dtype is the input's, which may be any type; a non-float one needs the
    // attribute.
    DType dflt = x->dtype();
    if (!ctx.hasAttr("dtype") && !isFloat(dflt))
      return ctx.error("input is {}: give attribute 'dtype' (a float type) to draw from it",
                       dtypeName(dflt));
    NNC_ASSIGN_OR_RETURN(r.dtype, floatDtypeAttr(ctx, "dtype", dflt));
    return r;
  }
  if (ctx.numInputs() != 0)
    return ctx.error("takes no inputs, got {}", ctx.numInputs());
  if (!ctx.hasAttr("shape"))
    return ctx.error("missing attribute 'shape'");
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.intsAttr("shape", {}));
  for (int64_t d : shape)
    if (d < 0)
      return ctx.error("attribute 'shape' has a negative extent {}", d);
  NNC_ASSIGN_OR_RETURN(r.dtype, floatDtypeAttr(ctx, "dtype", DType::F32));
  // The draw is made of u64 temporaries of the result's shape.
  std::optional<int64_t> count = checkedNumElements(shape);
  if (!count || *count > maxTensorBytes() / 8)
    return ctx.error("the result [{}] is too large to draw (NNC_MAX_TENSOR_BYTES)",
                     fmt::join(shape, ", "));
  r.shape = ctx.i64Vector(shape);
  return r;
}

/// Ends an emitter's work: its error prefixed with the node, or the value cast to `out`.
Expected<Value *> finish(LoweringContext &ctx, GradEmitter &e, Value *v, DType out) {
  if (v && v->dtype() != out)
    v = e.op(K::Cast, {v}, {{"to", out}});
  if (!e.ok())
    return ctx.error("{}", e.error().message());
  return v;
}

/// RandomUniform-1 / RandomUniformLike-1: low + (high - low) u, u uniform in [0, 1).
Error lowerRandomUniform(LoweringContext &ctx, bool like) {
  NNC_ASSIGN_OR_RETURN(ShapeAndType st, shapeAndType(ctx, like));
  NNC_ASSIGN_OR_RETURN(double low, ctx.floatAttr("low", 0.0));
  NNC_ASSIGN_OR_RETURN(double high, ctx.floatAttr("high", 1.0));
  if (!(low <= high))
    return ctx.error("attribute 'low' {} must not exceed 'high' {}", low, high);
  NNC_ASSIGN_OR_RETURN(Generator gen, generatorOf(ctx));
  GradEmitter e(ctx.graph());
  DType ct = computeType(st.dtype);
  Value *u = counterUniform(e, gen.counter, gen.stream, st.shape, ct);
  Value *y = u ? e.add(e.mulScalar(u, high - low), e.scalar(low, ct)) : nullptr;
  NNC_ASSIGN_OR_RETURN(Value * out, finish(ctx, e, y, st.dtype));
  return ctx.setOutput(0, out);
}

/// RandomNormal-1 / RandomNormalLike-1: mean + scale z, z standard normal by Box-Muller:
/// z = sqrt(-2 ln(1 - u1)) cos(2 pi u2), u1 and u2 uniform in [0, 1) from two streams
/// (1 - u1 is in (0, 1], so the logarithm is finite).
Error lowerRandomNormal(LoweringContext &ctx, bool like) {
  NNC_ASSIGN_OR_RETURN(ShapeAndType st, shapeAndType(ctx, like));
  NNC_ASSIGN_OR_RETURN(double mean, ctx.floatAttr("mean", 0.0));
  NNC_ASSIGN_OR_RETURN(double scale, ctx.floatAttr("scale", 1.0));
  NNC_ASSIGN_OR_RETURN(Generator gen, generatorOf(ctx));
  GradEmitter e(ctx.graph());
  DType ct = computeType(st.dtype);
  Value *u1 = counterUniform(e, gen.counter, gen.stream * 2 + kNormalRadius, st.shape, ct);
  Value *u2 = counterUniform(e, gen.counter, gen.stream * 2 + kNormalAngle, st.shape, ct);
  Value *y = nullptr;
  if (u1 && u2) {
    Value *r = e.op(K::Sqrt, {e.mulScalar(e.op(K::Log, {e.sub(e.scalar(1, ct), u1)}), -2.0)});
    Value *z = e.mul(r, e.op(K::Cos, {e.mulScalar(u2, 2 * kPi)}));
    y = e.add(e.mulScalar(z, scale), e.scalar(mean, ct));
  }
  NNC_ASSIGN_OR_RETURN(Value * out, finish(ctx, e, y, st.dtype));
  return ctx.setOutput(0, out);
}

/// Bernoulli-15: 1 where u < p (u uniform in [0, 1)), else 0, in attribute dtype (default
/// the input's). p outside [0, 1] acts as its nearest end.
Error lowerBernoulli(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * p, ctx.requiredInput(0, "input"));
  if (!isFloat(p->dtype()))
    return ctx.error("input must be a float tensor of probabilities, got {}", p->type().str());
  DType out = p->dtype();
  if (ctx.hasAttr("dtype")) {
    NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("dtype", 0));
    std::optional<DType> d = dtypeFromOnnx(static_cast<int>(code));
    if (!d || isStorageOnly(*d))
      return ctx.error("unsupported dtype {} in attribute 'dtype'", code);
    out = *d;
  }
  NNC_ASSIGN_OR_RETURN(Generator gen, generatorOf(ctx));
  GradEmitter e(ctx.graph());
  DType ct = computeType(p->dtype());
  Value *pc = p->dtype() == ct ? p : e.op(K::Cast, {p}, {{"to", ct}});
  Value *u = counterUniform(e, gen.counter, gen.stream, e.shapeOf(p), ct);
  Value *y = u ? e.op(K::Less, {u, pc}) : nullptr;
  NNC_ASSIGN_OR_RETURN(Value * r, finish(ctx, e, y, out));
  return ctx.setOutput(0, r);
}

/// Multinomial-7: input [batch, classes] of unnormalized log-probabilities; output [batch,
/// sample_size] of class indices (int32 or int64), each drawn by inverse-CDF sampling:
/// index = #{c < classes - 1 : cdf[c] <= u total}, cdf the running sum of softmax(input)
/// along the classes and total its last entry, u uniform in [0, 1). A class of probability
/// 0 is never drawn (its cdf entry equals the one before it).
Error lowerMultinomial(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  if (!isFloat(x->dtype()) || x->rank() != 2)
    return ctx.error("input must be a float [batch, classes] tensor, got {}", x->type().str());
  NNC_ASSIGN_OR_RETURN(int64_t samples, ctx.intAttr("sample_size", 1));
  if (samples < 1)
    return ctx.error("attribute 'sample_size' must be at least 1, got {}", samples);
  NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("dtype", 6));
  std::optional<DType> out = dtypeFromOnnx(static_cast<int>(code));
  if (!out || (*out != DType::I32 && *out != DType::I64))
    return ctx.error("attribute 'dtype' must be int32 (6) or int64 (7), got {}", code);
  // The draw compares every sample with every class: [batch, samples, classes] temporaries.
  std::optional<int64_t> staticCount =
      checkedNumElements(Extents{samples, x->shape()[0].isStatic() ? x->shape()[0].value() : 1,
                                 x->shape()[1].isStatic() ? x->shape()[1].value() : 1});
  if (!staticCount || *staticCount > maxTensorBytes() / 8)
    return ctx.error("{} samples of each of {} rows over {} classes are too many to draw "
                     "(NNC_MAX_TENSOR_BYTES)",
                     samples, x->shape()[0].str(), x->shape()[1].str());
  const Dim &classes = x->shape()[1];
  if (classes.isStatic() && classes.value() == 0)
    return ctx.error("input has no classes to draw from");
  NNC_ASSIGN_OR_RETURN(Generator gen, generatorOf(ctx));
  GradEmitter e(ctx.graph());
  DType ct = computeType(x->dtype());
  Value *xc = x->dtype() == ct ? x : e.op(K::Cast, {x}, {{"to", ct}});
  Value *p = e.op(K::Softmax, {xc}, {{"axis", int64_t(1)}});
  Value *cdf = e.op(K::CumSum, {p}, {{"axis", int64_t(1)}, {"exclusive", int64_t(0)}, {"reverse", int64_t(0)}});
  // [batch, 1]: the last running sum (1 up to rounding).
  Value *xshape = e.shapeOf(x);
  Value *total = e.op(K::Slice, {cdf, e.i64s({-1}), e.i64s({INT64_MAX}), e.i64s({1})});
  // u [batch, samples, 1] against the first classes - 1 entries of cdf as [batch, 1, C-1].
  Value *batch = e.op(K::Slice, {xshape, e.i64s({0}), e.i64s({1}), e.i64s({0})});
  Value *ushape = e.op(K::Concat, {batch, e.i64s({samples})}, {{"axis", int64_t(0)}});
  Value *u = counterUniform(e, gen.counter, gen.stream, ushape, ct);
  Value *y = nullptr;
  if (u) {
    Value *target = e.mul(u, total);
    Value *t3 = e.op(K::Reshape, {target, e.i64s({0, samples, 1})}, {{"allowzero", int64_t(0)}});
    Value *head = e.op(K::Slice, {cdf, e.i64s({0}), e.i64s({-1}), e.i64s({1})});
    Value *c3 = e.op(K::Reshape, {head, e.i64s({0, 1, -1})}, {{"allowzero", int64_t(0)}});
    Value *le = e.op(K::Cast, {e.op(K::LessEqual, {c3, t3})}, {{"to", DType::I64}});
    y = e.op(K::ReduceSum, {le}, {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t(0)}});
  }
  NNC_ASSIGN_OR_RETURN(Value * r, finish(ctx, e, y, *out));
  return ctx.setOutput(0, r);
}

} // namespace

void registerRandomLowerings(LoweringTable &t) {
  t["RandomUniform"] = {{"dtype", "high", "low", "seed", "shape"},
                        [](LoweringContext &ctx) { return lowerRandomUniform(ctx, false); }};
  t["RandomUniformLike"] = {{"dtype", "high", "low", "seed"}, [](LoweringContext &ctx) {
                              return lowerRandomUniform(ctx, true);
                            }};
  t["RandomNormal"] = {{"dtype", "mean", "scale", "seed", "shape"},
                       [](LoweringContext &ctx) { return lowerRandomNormal(ctx, false); }};
  t["RandomNormalLike"] = {{"dtype", "mean", "scale", "seed"},
                           [](LoweringContext &ctx) { return lowerRandomNormal(ctx, true); }};
  t["Bernoulli"] = {{"dtype", "seed"}, lowerBernoulli};
  t["Multinomial"] = {{"dtype", "sample_size", "seed"}, lowerMultinomial};
}

} // namespace nnc::onnxfe

// The same numbers on every target: pow, mod and fmod, sign, reciprocal, round, is_nan, is_inf
// and casts between the numeric dtypes, on edge values (zeros of both signs, subnormals,
// infinities, NaN, halfway ties, values beyond every integer range), run by the interpreter
// (the reference), the CPU JIT and OpenCL (where a device exists: PoCL in CI). Exact ops must
// agree bit for bit (any NaN matches any NaN); so does f32 pow, expanded from FastMath.h for
// every target.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "TestTarget.h"
#include "nnc/ir/Parser.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

namespace nnc {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<float> &floatEdges() {
  static const std::vector<float> v = {
      0.0f,          -0.0f,         1.0f,           -1.0f,
      0.5f,          -0.5f,         1.5f,           2.5f,
      -2.5f,         3.7f,          -3.7f,          0.1f,
      1e-40f,        -1e-40f,       1e-45f,         1.17549435e-38f,
      127.5f,        128.0f,        -128.5f,        -129.0f,
      255.5f,        256.0f,        65504.0f,       65520.0f,
      70000.f,       1e20f,         -1e20f,         3e38f,
      -3e38f,        kInf,          -kInf,          kNaN,
      -kNaN,         2.14748365e9f, -2.14748365e9f, 4.2949673e9f,
      9.2233720e18f, 1.8446744e19f, 33.0f,          -7.25f,
      1024.0f,       16777217.0f};
  return v;
}

Tensor f32Tensor(const std::vector<float> &v) {
  Tensor t = Tensor::zeros(DType::F32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.rawData(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor i64Tensor(const std::vector<int64_t> &v) {
  Tensor t = Tensor::zeros(DType::I64, {static_cast<int64_t>(v.size())});
  std::memcpy(t.rawData(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

/// Element i of `t` as a double (floats) or its bits (integers), for messages.
std::string show(const Tensor &t, int64_t i) {
  if (isFloat(t.dtype()))
    return fmt::format("{}", t.elementAsDouble(i));
  return fmt::format("{}", t.elementAsInt(i));
}

/// Whether element i of `a` and `b` agree: the same bits, both NaN, or (ulps > 0, floats)
/// within `ulps` units in the last place of a's dtype.
bool agree(const Tensor &a, const Tensor &b, int64_t i, int ulps) {
  size_t n = dtypeSize(a.dtype());
  const auto *pa = static_cast<const uint8_t *>(a.rawData()) + i * n;
  const auto *pb = static_cast<const uint8_t *>(b.rawData()) + i * n;
  if (std::memcmp(pa, pb, n) == 0)
    return true;
  if (!isFloat(a.dtype()))
    return false;
  double x = a.elementAsDouble(i), y = b.elementAsDouble(i);
  if (std::isnan(x) || std::isnan(y))
    return std::isnan(x) && std::isnan(y);
  if (ulps == 0 || std::isinf(x) || std::isinf(y) || a.dtype() != DType::F32)
    return false;
  float fx = static_cast<float>(x), fy = static_cast<float>(y);
  int32_t ix = 0, iy = 0;
  std::memcpy(&ix, &fx, sizeof ix);
  std::memcpy(&iy, &fy, sizeof iy);
  if ((ix < 0) != (iy < 0))
    return fx == fy; // +0 and -0
  return std::abs(int64_t(ix) - int64_t(iy)) <= ulps;
}

using CompiledTargets = std::vector<std::pair<std::string, std::unique_ptr<Executable>>>;

/// `g` compiled for the CPU and, when there is a device, for OpenCL (no caches), into
/// `targets` by name.
void compileForEveryTarget(const Graph &g, CompiledTargets &targets) {
  CpuOptions cpu(testenv::testCpu());
  cpu.codegen.cacheDir = "";
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(g, cpu);
  ASSERT_TRUE(exe) << exe.error().message();
  targets.emplace_back("cpu", std::move(*exe));
  if (listOpenCLDevices()) {
    OpenCLOptions cl(testenv::testCpu(), testenv::testGpu());
    cl.cacheDir = "";
    cl.optimize = false;
    Expected<std::unique_ptr<OpenCLExecutable>> clExe = OpenCLExecutable::compile(g, cl);
    ASSERT_TRUE(clExe) << clExe.error().message();
    targets.emplace_back("opencl", std::move(*clExe));
  }
}

/// Runs `text` on the interpreter, the CPU and OpenCL (when there is a device) and compares
/// every output element with the interpreter's.
void expectSameOnEveryTarget(const std::string &text, const std::vector<Tensor> &inputs,
                             int ulps = 0) {
  SCOPED_TRACE(text);
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  ASSERT_TRUE(g) << g.error().message();
  Expected<std::vector<Tensor>> want = interpret(**g, inputs);
  ASSERT_TRUE(want) << want.error().message();
  CompiledTargets targets;
  compileForEveryTarget(**g, targets);
  if (::testing::Test::HasFatalFailure())
    return;
  for (auto &[name, e] : targets) {
    Expected<std::vector<Tensor>> got = e->run(inputs);
    ASSERT_TRUE(got) << name << ": " << got.error().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      const Tensor &w = (*want)[o], &r = (*got)[o];
      ASSERT_EQ(w.dtype(), r.dtype());
      int bad = 0;
      for (int64_t i = 0; i < w.numElements() && bad < 4; ++i)
        if (!agree(w, r, i, ulps)) {
          ADD_FAILURE() << name << " output " << o << " (" << dtypeName(w.dtype()) << ") element "
                        << i << ": " << show(r, i) << " but the interpreter " << show(w, i);
          ++bad;
        }
    }
  }
}

/// A graph of one node: `%y = op(%a, %b, ...) {attrs} : out[n]` over inputs of dtypes `ins`.
std::string oneNodeGraph(const std::string &op, const std::vector<DType> &ins, DType out, size_t n,
                         const std::string &attrs = "") {
  std::string params, args;
  for (size_t i = 0; i < ins.size(); ++i) {
    params += fmt::format("{}%x{}: {}[{}]", i ? ", " : "", i, dtypeName(ins[i]), n);
    args += fmt::format("{}%x{}", i ? ", " : "", i);
  }
  return fmt::format("graph @g({0}) -> ({1}[{2}]) {{\n  %y = {3}({4}){5} : {1}[{2}]\n  return "
                     "%y\n}}",
                     params, dtypeName(out), n, op, args, attrs.empty() ? "" : " {" + attrs + "}");
}

std::string castGraph(DType from, DType to, size_t n) {
  return oneNodeGraph("cast", {from}, to, n, fmt::format("to = {}", dtypeName(to)));
}

/// Every (a, b) of as x bs, as two operand lists.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> allPairs(const std::vector<T> &as,
                                                   const std::vector<T> &bs) {
  std::pair<std::vector<T>, std::vector<T>> p;
  for (const T &x : as)
    for (const T &y : bs) {
      p.first.push_back(x);
      p.second.push_back(y);
    }
  return p;
}

const DType kNumeric[] = {DType::F64, DType::F16, DType::BF16, DType::I8,  DType::I16, DType::I32,
                          DType::I64, DType::U8,  DType::U16,  DType::U32, DType::U64, DType::Bool};

TEST(CrossTarget, CastsFromF32) {
  const std::vector<float> &v = floatEdges();
  for (DType to : kNumeric) {
    // Float to integer conversions of values beyond the range (and NaN) are undefined in
    // ONNX; the targets still agree with the interpreter's rule.
    expectSameOnEveryTarget(castGraph(DType::F32, to, v.size()), {f32Tensor(v)});
  }
}

TEST(CrossTarget, CastsFromI64) {
  const std::vector<int64_t> v = {0,
                                  1,
                                  -1,
                                  127,
                                  128,
                                  -129,
                                  255,
                                  256,
                                  32767,
                                  -32769,
                                  65536,
                                  2147483647,
                                  2147483648LL,
                                  -2147483649LL,
                                  4294967296LL,
                                  (int64_t(1) << 53) + 1,
                                  (int64_t(1) << 24) + 1,
                                  std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()};
  for (DType to : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I16,
                   DType::I32, DType::U8, DType::U16, DType::U32, DType::U64, DType::Bool})
    expectSameOnEveryTarget(castGraph(DType::I64, to, v.size()), {i64Tensor(v)});
}

TEST(CrossTarget, CastsBetweenNarrowFloats) {
  // f32 -> f16 / bf16 (round to nearest even, overflow to inf), then on to every dtype.
  const std::vector<float> &v = floatEdges();
  for (DType mid : {DType::F16, DType::BF16})
    for (DType to : kNumeric) {
      if (to == mid)
        continue;
      expectSameOnEveryTarget(fmt::format(R"(
graph @c(%x: f32[{0}]) -> ({2}[{0}]) {{
  %h = cast(%x) {{to = {1}}} : {1}[{0}]
  %y = cast(%h) {{to = {2}}} : {2}[{0}]
  return %y
}})",
                                          v.size(), dtypeName(mid), dtypeName(to)),
                              {f32Tensor(v)});
    }
}

TEST(CrossTarget, ExactUnaryOps) {
  const std::vector<float> &v = floatEdges();
  for (const char *op : {"sign", "reciprocal", "round", "neg", "abs", "floor", "ceil"})
    expectSameOnEveryTarget(oneNodeGraph(op, {DType::F32}, DType::F32, v.size()), {f32Tensor(v)});
  for (const char *op : {"is_nan", "is_inf"})
    expectSameOnEveryTarget(oneNodeGraph(op, {DType::F32}, DType::Bool, v.size()), {f32Tensor(v)});
}

TEST(CrossTarget, ModAndFmod) {
  // Every pair of signs, exact multiples, zero divisors (floats: NaN), infinities.
  auto [a, b] =
      allPairs<float>({7.5f, -7.5f, 6.0f, -6.0f, 0.0f, -0.0f, 1e-40f, 3e38f, kInf, kNaN, 5.25f},
                      {2.0f, -2.0f, 3.0f, -3.0f, 0.0f, kInf, -kInf, 1e-40f, 0.75f});
  auto [ia, ib] = allPairs<int64_t>({7, -7, 6, -6, 0, 1, -1, std::numeric_limits<int64_t>::max()},
                                    {2, -2, 3, -3, 1, -1, 7});
  for (const char *op : {"mod", "fmod"}) {
    expectSameOnEveryTarget(oneNodeGraph(op, {DType::F32, DType::F32}, DType::F32, a.size()),
                            {f32Tensor(a), f32Tensor(b)});
    expectSameOnEveryTarget(oneNodeGraph(op, {DType::I64, DType::I64}, DType::I64, ia.size()),
                            {i64Tensor(ia), i64Tensor(ib)});
  }
}

TEST(CrossTarget, Pow) {
  auto [a, b] = allPairs<float>(
      {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, 3.7f, -3.0f, 1e-40f, 1e20f, kInf, -kInf, kNaN},
      {0.0f, -0.0f, 1.0f, 2.0f, 3.0f, 0.5f, -0.5f, -1.0f, -2.0f, 1.5f, 10.0f, kInf, -kInf, kNaN});
  expectSameOnEveryTarget(oneNodeGraph("pow", {DType::F32, DType::F32}, DType::F32, a.size()),
                          {f32Tensor(a), f32Tensor(b)});
  auto [ia, ib] = allPairs<int64_t>({-3, -2, -1, 0, 1, 2, 3, 10}, {0, 1, 2, 3, 5, 15});
  expectSameOnEveryTarget(oneNodeGraph("pow", {DType::I64, DType::I64}, DType::I64, ia.size()),
                          {i64Tensor(ia), i64Tensor(ib)});
}

/// `%y = op(cast(x0), cast(x1)...)` on dtype `t`: inputs of f32 or i64 cast to `t` first (the
/// casts are checked above), so one set of edge values serves every dtype.
std::string castThenOp(const std::string &op, DType from, DType t, DType out, int arity, size_t n) {
  std::string text = "graph @g(";
  for (int i = 0; i < arity; ++i)
    text += fmt::format("{}%x{}: {}[{}]", i ? ", " : "", i, dtypeName(from), n);
  text += fmt::format(") -> ({}[{}]) {{\n", dtypeName(out), n);
  std::string args;
  for (int i = 0; i < arity; ++i) {
    text += fmt::format("  %c{0} = cast(%x{0}) {{to = {1}}} : {1}[{2}]\n", i, dtypeName(t), n);
    args += fmt::format("{}%c{}", i ? ", " : "", i);
  }
  return text + fmt::format("  %y = {}({}) : {}[{}]\n  return %y\n}}", op, args, dtypeName(out), n);
}

TEST(CrossTarget, CompositesOnOtherFloatTypes) {
  // f16 and bf16 compute in f32 and round once; f64 has its own expansions (bit tricks at 2^52,
  // the math library's exp for sigmoid).
  const std::vector<float> &v = floatEdges();
  for (DType t : {DType::F64, DType::F16, DType::BF16}) {
    for (const char *op : {"sign", "reciprocal", "round", "sigmoid", "exp", "tanh", "erf"}) {
      if (t == DType::F64 && std::string(op) != "sign" && std::string(op) != "reciprocal" &&
          std::string(op) != "round")
        continue; // libm on the CPU, OpenCL's built-ins: not the same last bit
      expectSameOnEveryTarget(castThenOp(op, DType::F32, t, t, 1, v.size()), {f32Tensor(v)});
    }
    for (const char *op : {"is_nan", "is_inf"})
      expectSameOnEveryTarget(castThenOp(op, DType::F32, t, DType::Bool, 1, v.size()),
                              {f32Tensor(v)});
    auto [a, b] = allPairs<float>({7.5f, -7.5f, 6.0f, -0.0f, 1e-40f, 3e38f, kInf, kNaN, 5.25f},
                                  {2.0f, -2.0f, 3.0f, 0.0f, -0.0f, kInf, -kInf, 0.75f});
    for (const char *op : {"mod", "fmod"})
      expectSameOnEveryTarget(castThenOp(op, DType::F32, t, t, 2, a.size()),
                              {f32Tensor(a), f32Tensor(b)});
  }
}

TEST(CrossTarget, IntegerCompositesOnEveryWidth) {
  // Zero and -1 divisors (INT_MIN % -1), the extremes, negative exponents, exponents past the
  // bit width; i64 values wrap to the narrower types.
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto [ma, mb] = allPairs<int64_t>({7, -7, 6, -6, 0, 1, -1, 128, -128, 255, kMin, kMax},
                                    {2, -2, 3, -3, 0, 1, -1, 7, 200, kMin, kMax});
  auto [pa, pb] = allPairs<int64_t>({-3, -2, -1, 0, 1, 2, 3, 10, 255},
                                    {-3, -2, -1, 0, 1, 2, 3, 5, 15, 63, 64, 200});
  std::vector<int64_t> sv = {0, 1, -1, 127, -128, 255, kMin, kMax};
  for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32,
                  DType::U64}) {
    for (const char *op : {"mod", "fmod"})
      expectSameOnEveryTarget(castThenOp(op, DType::I64, t, t, 2, ma.size()),
                              {i64Tensor(ma), i64Tensor(mb)});
    expectSameOnEveryTarget(castThenOp("pow", DType::I64, t, t, 2, pa.size()),
                            {i64Tensor(pa), i64Tensor(pb)});
    expectSameOnEveryTarget(castThenOp("sign", DType::I64, t, t, 1, sv.size()), {i64Tensor(sv)});
  }
}

// ---- quantize / dequantize (ONNX QuantizeLinear / DequantizeLinear) ----------------------------

/// A rank-0 tensor of `t` whose byte(s) hold `bits` (storage-only formats: the format's bits).
Tensor scalarBits(DType t, uint64_t bits) {
  Tensor z = Tensor::zeros(t, {});
  std::memcpy(z.rawData(), &bits, dtypeSize(t));
  return z;
}

Tensor f32Scalar(float v) {
  Tensor t = Tensor::zeros(DType::F32, {});
  std::memcpy(t.rawData(), &v, sizeof v);
  return t;
}

TEST(CrossTarget, QuantizeEveryFormat) {
  // Ties at .5 round to even, both ends saturate, NaN goes to the low end; f8 with and
  // without saturation; a negative scale flips the order.
  const std::vector<float> &v = floatEdges();
  struct Case {
    DType q;
    uint64_t zp;
  };
  const Case cases[] = {{DType::U8, 3},        {DType::I8, 0xfe},      {DType::U16, 300},
                        {DType::I16, 0xff00},  {DType::U4, 2},         {DType::I4, 0xf},
                        {DType::U2, 1},        {DType::I2, 1},         {DType::F8E4M3FN, 0},
                        {DType::F8E4M3FNUZ, 0}, {DType::F8E5M2, 0},    {DType::F8E5M2FNUZ, 0},
                        {DType::F4E2M1, 0x2}};
  for (const Case &c : cases)
    for (float scale : {1.0f, 0.37f, -2.5f})
      for (int sat = 0; sat < 2; ++sat) {
        std::string q(dtypeName(c.q));
        expectSameOnEveryTarget(fmt::format(R"(
graph @q(%x: f32[{0}], %s: f32[], %z: {1}[]) -> ({1}[{0}]) {{
  %y = quantize(%x, %s, %z) {{saturate = {2}}} : {1}[{0}]
  return %y
}})",
                                            v.size(), q, sat),
                                {f32Tensor(v), f32Scalar(scale), scalarBits(c.q, c.zp)});
      }
}

TEST(CrossTarget, QuantizeNarrowFloats) {
  // f16 and bf16 x divide in their own precision before rounding (as numpy does); f64 too.
  const std::vector<float> &v = floatEdges();
  for (DType t : {DType::F16, DType::BF16, DType::F64})
    for (DType q : {DType::U8, DType::I8, DType::F8E4M3FN})
      expectSameOnEveryTarget(fmt::format(R"(
graph @q(%x: f32[{0}], %s: f32[], %z: {2}[]) -> ({2}[{0}]) {{
  %h = cast(%x) {{to = {1}}} : {1}[{0}]
  %hs = cast(%s) {{to = {1}}} : {1}[]
  %y = quantize(%h, %hs, %z) : {2}[{0}]
  return %y
}})",
                                          v.size(), dtypeName(t), dtypeName(q)),
                              {f32Tensor(v), f32Scalar(0.3f), scalarBits(q, 0)});
}

TEST(CrossTarget, DequantizeEveryFormat) {
  // Every byte of the 8-bit formats (and every value of the narrower ones) to f32, f16, bf16.
  for (DType x : {DType::U8, DType::I8, DType::U4, DType::I4, DType::U2, DType::I2,
                  DType::F8E4M3FN, DType::F8E5M2, DType::F8E4M3FNUZ, DType::F4E2M1})
    for (DType to : {DType::F32, DType::F16, DType::BF16}) {
      int width = x == DType::U4 || x == DType::I4 || x == DType::F4E2M1 ? 16
                  : x == DType::U2 || x == DType::I2                     ? 4
                                                                         : 256;
      Tensor xs = Tensor::zeros(x, {width});
      for (int i = 0; i < width; ++i)
        xs.data<uint8_t>()[i] = static_cast<uint8_t>(i);
      bool integer = x == DType::U8 || x == DType::I8 || x == DType::U4 || x == DType::I4 ||
                     x == DType::U2 || x == DType::I2;
      expectSameOnEveryTarget(fmt::format(R"(
graph @dq(%x: {0}[{2}], %s: f32[], %z: {0}[]) -> ({1}[{2}]) {{
  %y = dequantize(%x, %s, %z) {{to = {1}}} : {1}[{2}]
  return %y
}})",
                                          dtypeName(x), dtypeName(to), width),
                              {xs, f32Scalar(0.0371f), scalarBits(x, integer ? 1 : 0)});
    }
  // i32 and i16 with an f16 scale.
  std::vector<int64_t> iv = {0, 1, -1, 32767, -32768, 2147483647, -2147483648LL, 16777217};
  expectSameOnEveryTarget(fmt::format(R"(
graph @dq(%x: i64[{0}], %s: f32[]) -> (f32[{0}], f16[{0}]) {{
  %xi = cast(%x) {{to = i32}} : i32[{0}]
  %zi = cast(%s) {{to = i32}} : i32[]
  %y = dequantize(%xi, %s, %zi) {{to = f32}} : f32[{0}]
  %xh = cast(%x) {{to = i16}} : i16[{0}]
  %zh = cast(%s) {{to = i16}} : i16[]
  %sh = cast(%s) {{to = f16}} : f16[]
  %y2 = dequantize(%xh, %sh, %zh) {{to = f16}} : f16[{0}]
  return %y, %y2
}})",
                                      iv.size()),
                          {i64Tensor(iv), f32Scalar(3.0f)});
}

TEST(CrossTarget, FusedDequantizeQuantizePerChannel) {
  // The Q/DQ pattern around an elementwise op, per-channel scales broadcast along dim 1: the
  // ops fuse into one kernel on each target and still agree with the interpreter.
  std::vector<float> v;
  for (int i = 0; i < 2 * 3 * 5; ++i)
    v.push_back(static_cast<float>(i * 37 % 256));
  expectSameOnEveryTarget(R"(
graph @qdq(%x: f32[2,3,5], %s: f32[3,1]) -> (i8[2,3,5]) {
  %xu = cast(%x) {to = u8} : u8[2,3,5]
  %z = cast(%s) {to = u8} : u8[3,1]
  %d = dequantize(%xu, %s, %z) {to = f32} : f32[2,3,5]
  %r = max(%d, %s) : f32[2,3,5]
  %zi = cast(%s) {to = i8} : i8[3,1]
  %q = quantize(%r, %s, %zi) : i8[2,3,5]
  return %q
})",
                          {Tensor::fromVector<float>(DType::F32, {2, 3, 5}, v),
                           [] {
                             Tensor t = Tensor::zeros(DType::F32, {3, 1});
                             t.data<float>()[0] = 0.5f;
                             t.data<float>()[1] = 2.0f;
                             t.data<float>()[2] = 7.0f;
                             return t;
                           }()});
}

TEST(CrossTarget, QuantizeByAConstantScaleRoundsLikeTheDivision) {
  // A constant scale in [2^-100, 2^100] quantizes without a division (a reciprocal and one
  // correction step); the integers must be those of x / s: values at and a few ulps around
  // every half-way point (k + 0.5) s of the 8- and 16-bit ranges' edges and middles, each
  // saturating end, zeros, infinities and NaN. Scales: typical, a mantissa of all ones, near
  // the bounds, one beyond them (the division kept) and two negative ones.
  for (float sv : {0.0235294f, 1.0f, 0x1.fffffep-1f, 0x1.000002p+0f, 3.0517578e-05f, 0.1f, 7.0f,
                   0x1p-100f, 0x1.8p+99f, 0x1.7ffffep-37f, 1e-35f, -0.0235294f, -0x1.fffffep+7f}) {
    SCOPED_TRACE(sv);
    std::vector<float> xs = {0.0f,    -0.0f,    INFINITY, -INFINITY, NAN,
                             FLT_MAX, -FLT_MAX, FLT_MIN,  -FLT_MIN,  1e-40f};
    auto around = [&](double k) {
      float x = static_cast<float>((k + 0.5) * sv);
      if (!std::isfinite(x))
        return;
      for (int d = -3; d <= 3; ++d) {
        float v = x;
        for (int i = 0; i < std::abs(d); ++i)
          v = std::nextafter(v, d < 0 ? -INFINITY : INFINITY);
        xs.push_back(v);
      }
    };
    for (int k = -300; k <= 300; ++k)
      around(k);
    for (int k : {-32775, -32770, -32769, -32768, -32767, 32760, 32766, 32767, 32768, 32770})
      around(k);
    int64_t n = static_cast<int64_t>(xs.size());
    std::string text = fmt::format(R"(
graph @q(%x: f32[{0}]) -> (u8[{0}], i8[{0}], i16[{0}], u16[{0}]) {{
  %s = constant {{value = dense<f32[]>[{1:.9g}]}} : f32[]
  %zu = constant {{value = dense<u8[]>[3]}} : u8[]
  %zi = constant {{value = dense<i8[]>[-5]}} : i8[]
  %zs = constant {{value = dense<i16[]>[7]}} : i16[]
  %zw = constant {{value = dense<u16[]>[0]}} : u16[]
  %a = quantize(%x, %s, %zu) : u8[{0}]
  %b = quantize(%x, %s, %zi) : i8[{0}]
  %c = quantize(%x, %s, %zs) : i16[{0}]
  %d = quantize(%x, %s, %zw) : u16[{0}]
  return %a, %b, %c, %d
}})",
                                   n, sv);
    expectSameOnEveryTarget(text, {Tensor::fromVector<float>(DType::F32, {n}, xs)});
  }
}

/// Zeros, infinities, NaN, the largest and a denormal value, and each half-way point (k + 0.5) s
/// of k in [-300, 300] with its two neighbouring floats: where a quantize's rounding and
/// clamping can go wrong.
std::vector<float> halfwayPoints(float s) {
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 1e-40f};
  for (int k = -300; k <= 300; ++k) {
    float x = static_cast<float>((k + 0.5) * s);
    for (float v : {std::nextafter(x, -INFINITY), x, std::nextafter(x, INFINITY)})
      xs.push_back(v);
  }
  return xs;
}

TEST(CrossTarget, DequantizeOfAQuantizeInOneKernel) {
  // quantize then dequantize with the same zero point in one kernel: the compiled kernels
  // clamp the rounded quotient to the bounds shifted by the zero point instead of adding it
  // and subtracting it again, and a zero point of 0 is not added at all. Bit for bit with the
  // interpreter, the sign of each zero included ((q - z) is +0 where round(x / s) is -0), at
  // the half-way points of both clamps' edges, zeros, infinities and NaN; a negative scale
  // (the product's zero then is -0) and a sum requantized after the pair. Each pair is one
  // fused group, as fuse-elementwise makes them.
  for (float sv : {0.0235294f, 0.1f, 3.0f, -0.0235294f}) {
    SCOPED_TRACE(sv);
    std::vector<float> xs = halfwayPoints(sv);
    int64_t n = static_cast<int64_t>(xs.size());
    std::string text = fmt::format(R"(
graph @qdq(%x: f32[{0}]) -> (f32[{0}], f32[{0}], f32[{0}], f32[{0}], u8[{0}]) {{
  %s = constant {{value = dense<f32[]>[{1:.9g}]}} : f32[]
  %zu = constant {{value = dense<u8[]>[3]}} : u8[]
  %zi = constant {{value = dense<i8[]>[-5]}} : i8[]
  %z0 = constant {{value = dense<u8[]>[0]}} : u8[]
  %zs = constant {{value = dense<i16[]>[7]}} : i16[]
  %s2 = constant {{value = dense<f32[]>[0.05]}} : f32[]
  %z2 = constant {{value = dense<u8[]>[128]}} : u8[]
  %a = quantize(%x, %s, %zu) {{fusion_group = 1}} : u8[{0}]
  %da = dequantize(%a, %s, %zu) {{fusion_group = 1, to = f32}} : f32[{0}]
  %b = quantize(%x, %s, %zi) {{fusion_group = 2}} : i8[{0}]
  %db = dequantize(%b, %s, %zi) {{fusion_group = 2, to = f32}} : f32[{0}]
  %c = quantize(%x, %s, %z0) {{fusion_group = 3}} : u8[{0}]
  %dc = dequantize(%c, %s, %z0) {{fusion_group = 3, to = f32}} : f32[{0}]
  %d = quantize(%x, %s, %zs) {{fusion_group = 4}} : i16[{0}]
  %dd = dequantize(%d, %s, %zs) {{fusion_group = 4, to = f32}} : f32[{0}]
  %e = quantize(%x, %s, %zu) {{fusion_group = 5}} : u8[{0}]
  %de = dequantize(%e, %s, %zu) {{fusion_group = 5, to = f32}} : f32[{0}]
  %sum = add(%de, %x) {{fusion_group = 5}} : f32[{0}]
  %r = quantize(%sum, %s2, %z2) {{fusion_group = 5}} : u8[{0}]
  return %da, %db, %dc, %dd, %r
}})",
                                   n, sv);
    expectSameOnEveryTarget(text, {Tensor::fromVector<float>(DType::F32, {n}, xs)});
  }
}

TEST(CrossTarget, MaxAndMinOfAQuantizeInOneKernel) {
  // max and min of a quantize's integers by a constant, fused with it (a Clip after the
  // quantize): the compiled kernels move the quantize's clamp bounds instead of clamping the
  // integers again. Bounds inside the range, below it (max: nothing to do), above it (max: all
  // values at the bound), both orders of max and min, u8 and i8; half-way points, zeros,
  // infinities and NaN (which goes to the low bound), bit for bit with the interpreter.
  for (float sv : {0.0235294f, 3.0f, -0.0235294f}) {
    SCOPED_TRACE(sv);
    std::vector<float> xs = halfwayPoints(sv);
    int64_t n = static_cast<int64_t>(xs.size());
    std::string text = fmt::format(R"(
graph @qclip(%x: f32[{0}]) -> (u8[{0}], u8[{0}], u8[{0}], i8[{0}], i8[{0}]) {{
  %s = constant {{value = dense<f32[]>[{1:.9g}]}} : f32[]
  %zu = constant {{value = dense<u8[]>[3]}} : u8[]
  %zi = constant {{value = dense<i8[]>[-5]}} : i8[]
  %k132 = constant {{value = dense<u8[]>[132]}} : u8[]
  %k200 = constant {{value = dense<u8[]>[200]}} : u8[]
  %k0 = constant {{value = dense<u8[]>[0]}} : u8[]
  %k255 = constant {{value = dense<u8[]>[255]}} : u8[]
  %km7 = constant {{value = dense<i8[]>[-7]}} : i8[]
  %k100 = constant {{value = dense<i8[]>[100]}} : i8[]
  %km128 = constant {{value = dense<i8[]>[-128]}} : i8[]
  %a = quantize(%x, %s, %zu) {{fusion_group = 1}} : u8[{0}]
  %a1 = max(%k132, %a) {{fusion_group = 1}} : u8[{0}]
  %a2 = min(%a1, %k200) {{fusion_group = 1}} : u8[{0}]
  %b = quantize(%x, %s, %zu) {{fusion_group = 2}} : u8[{0}]
  %b1 = min(%b, %k200) {{fusion_group = 2}} : u8[{0}]
  %b2 = max(%b1, %k0) {{fusion_group = 2}} : u8[{0}]
  %c = quantize(%x, %s, %zu) {{fusion_group = 3}} : u8[{0}]
  %c1 = max(%c, %k255) {{fusion_group = 3}} : u8[{0}]
  %d = quantize(%x, %s, %zi) {{fusion_group = 4}} : i8[{0}]
  %d1 = max(%d, %km7) {{fusion_group = 4}} : i8[{0}]
  %d2 = min(%d1, %k100) {{fusion_group = 4}} : i8[{0}]
  %e = quantize(%x, %s, %zi) {{fusion_group = 5}} : i8[{0}]
  %e1 = min(%e, %km128) {{fusion_group = 5}} : i8[{0}]
  return %a2, %b2, %c1, %d2, %e1
}})",
                                   n, sv);
    expectSameOnEveryTarget(text, {Tensor::fromVector<float>(DType::F32, {n}, xs)});
  }
}

TEST(CrossTarget, ClampBetweenDequantizeAndQuantize) {
  // A ReLU6 and a ReLU between a dequantize and a quantize (lower-qdq clamps the integers
  // instead): every u8 and i8 value, requantized with the same parameters and with others.
  std::vector<float> all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<float>(i));
  expectSameOnEveryTarget(R"(
graph @clamp(%xf: f32[256]) -> (u8[256], u8[256], i8[256], i8[256]) {
  %x = cast(%xf) {to = u8} : u8[256]
  %h = constant {value = dense<f32[]>[128]} : f32[]
  %xs = sub(%xf, %h) : f32[256]
  %y = cast(%xs) {to = i8} : i8[256]
  %s = constant {value = dense<f32[]>[0.0470588]} : f32[]
  %z = constant {value = dense<u8[]>[100]} : u8[]
  %s2 = constant {value = dense<f32[]>[0.031]} : f32[]
  %z2 = constant {value = dense<u8[]>[7]} : u8[]
  %zi = constant {value = dense<i8[]>[-20]} : i8[]
  %lo = constant {value = dense<f32[]>[0]} : f32[]
  %hi = constant {value = dense<f32[]>[6]} : f32[]
  %d = dequantize(%x, %s, %z) {to = f32} : f32[256]
  %m = max(%d, %lo) : f32[256]
  %c = min(%m, %hi) : f32[256]
  %q = quantize(%c, %s, %z) : u8[256]
  %q2 = quantize(%c, %s2, %z2) : u8[256]
  %dy = dequantize(%y, %s, %zi) {to = f32} : f32[256]
  %r = max(%lo, %dy) : f32[256]
  %qy = quantize(%r, %s, %zi) : i8[256]
  %r6 = min(%dy, %hi) : f32[256]
  %qy6 = quantize(%r6, %s2, %zi) : i8[256]
  return %q, %q2, %qy, %qy6
})",
                          {Tensor::fromVector<float>(DType::F32, {256}, all)});
}

/// Runs `text` on the CPU and OpenCL (when there is a device) and expects every element of
/// its one output to be `want`.
void expectOnCompiledTargets(const std::string &text, const std::vector<Tensor> &inputs,
                             float want) {
  SCOPED_TRACE(text);
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  ASSERT_TRUE(g) << g.error().message();
  CompiledTargets targets;
  compileForEveryTarget(**g, targets);
  if (::testing::Test::HasFatalFailure())
    return;
  for (auto &[name, e] : targets) {
    Expected<std::vector<Tensor>> got = e->run(inputs);
    ASSERT_TRUE(got) << name << ": " << got.error().message();
    const Tensor &y = (*got)[0];
    int bad = 0;
    for (int64_t i = 0; i < y.numElements() && bad < 4; ++i)
      if (y.data<float>()[i] != want) {
        ADD_FAILURE() << name << " element " << i << ": " << y.data<float>()[i] << ", not "
                      << want;
        ++bad;
      }
  }
}

TEST(CrossTarget, MatMulSumRunsOnEveryCompiledTarget) {
  // matmul's sum_run (the winograd pass sets it): f32 sums over k in runs, each from zero,
  // then added to the element's sum. With A all ones and B's first row 2^24, the rest ones,
  // one chain rounds every later 1 away (2^24) and the interpreter's exact sum rounds to
  // 2^24 + 8, while runs of 4 sum the last run's ones exactly: 2^24 + 4, on the CPU (a skinny
  // GEMV, and microkernel tiles with a row edge) and on OpenCL (vector tiles and the scalar
  // edge nest alike). A sum_run below 1 is an error.
  for (int64_t m : {3, 37}) {
    SCOPED_TRACE(m);
    const int64_t k = 8, n = 40;
    std::vector<std::string> b;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        b.push_back(p == 0 ? "16777216" : "1");
    std::string text = fmt::format(R"(
graph @runs(%a: f32[{0},{1}]) -> (f32[{0},{2}]) {{
  %b = constant {{value = dense<f32[{1},{2}]>[{3}]}} : f32[{1},{2}]
  %y = matmul(%a, %b) {{sum_run = 4}} : f32[{0},{2}]
  return %y
}})",
                                   m, k, n, fmt::join(b, ", "));
    expectOnCompiledTargets(
        text, {Tensor::fromVector<float>(DType::F32, {m, k}, std::vector<float>(m * k, 1.0f))},
        16777220.0f);
  }
  // A run of no product is an error naming the node, not a crash.
  Expected<std::unique_ptr<Graph>> bad = parseGraph(R"(
graph @runs(%a: f32[2,8], %b: f32[8,4]) -> (f32[2,4]) {
  %y = matmul(%a, %b) {sum_run = 0} : f32[2,4]
  return %y
})");
  ASSERT_TRUE(bad) << bad.error().message();
  CpuOptions cpu(testenv::testCpu());
  cpu.codegen.cacheDir = "";
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**bad, cpu);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.error().message().find("sum_run 0 is not a positive number of products"),
            std::string::npos)
      << exe.error().message();
}

TEST(CrossTarget, Im2colConvSumsInRunsOfWholeChannels) {
  // A grouped 3x3 conv (im2col + GEMM on the CPU and OpenCL) sums its 8 channels' 72 taps in
  // runs of whole channels, at most 32 products: 3 channels (27). Channel 0 is 2^24 under a
  // weight of 1 at its first tap (its other taps 0), every other product 1: one chain rounds
  // each later 1 away (2^24), the exact sum is 2^24 + 63 (2^24 + 64 in f32), and runs of 27
  // give 2^24 + 46: the first run stays 2^24, then 27 (2^24 + 27 ties to 2^24 + 28) and 18.
  const int64_t cg = 8, groups = 2, m = 4;
  std::vector<std::string> w;
  for (int64_t o = 0; o < m; ++o)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t t = 0; t < 9; ++t)
        w.push_back(c > 0 || t == 0 ? "1" : "0");
  std::string text = fmt::format(R"(
graph @g(%x: f32[1,{0},6,6]) -> (f32[1,{1},4,4]) {{
  %w = constant {{value = dense<f32[{1},{2},3,3]>[{3}]}} : f32[{1},{2},3,3]
  %y = conv(%x, %w) {{dilations = [1, 1], group = {4}, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,{1},4,4]
  return %y
}})",
                                 cg * groups, m, cg, fmt::join(w, ", "), groups);
  std::vector<float> x(cg * groups * 36, 1.0f);
  for (int64_t g = 0; g < groups; ++g)
    std::fill_n(x.begin() + g * cg * 36, 36, 16777216.0f);
  expectOnCompiledTargets(text, {Tensor::fromVector<float>(DType::F32, {1, cg * groups, 6, 6}, x)},
                          16777262.0f);
}

} // namespace
} // namespace nnc

// The ONNX-level edge cases of casts, integer division, float min/max and shifts, pinned on
// every backend against their one definition (include/nnc/ir/ScalarOps.h): the interpreter,
// the kernel evaluator (which runs ir/KernelExpand.cpp's primitives), the LLVM JIT and OpenCL
// (PoCL in CI) must give the definition's bits on edge values (NaN, infinities, values beyond
// the target's range, division by 0, INT_MIN / -1, shifts by the bit width and more). Also
// checks that the expansion leaves its guards out where an operand is a known constant or has
// a known range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "LowerTestUtil.h"
#include "TestTarget.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/ScalarOps.h"
#include "nnc/runtime/OpenCL.h"
#include "nnc/support/FloatFormats.h"

namespace nnc {
namespace {

using namespace lowertest;
using scalar::Number;

/// Element i of `t` (an arithmetic dtype) as a Number.
Number readNumber(const Tensor &t, int64_t i) {
  const void *p = t.rawData();
  Number n;
  n.type = t.dtype();
  switch (t.dtype()) {
  case DType::F32: n.f = static_cast<const float *>(p)[i]; break;
  case DType::F64: n.f = static_cast<const double *>(p)[i]; break;
  case DType::F16: n.f = halfToFloat(static_cast<const uint16_t *>(p)[i]); break;
  case DType::BF16: n.f = bf16ToFloat(static_cast<const uint16_t *>(p)[i]); break;
  case DType::Bool: n.i = static_cast<const bool *>(p)[i]; break;
  default: {
    uint64_t bits = 0;
    std::memcpy(&bits, static_cast<const char *>(p) + i * dtypeSize(t.dtype()),
                dtypeSize(t.dtype()));
    n = scalar::intNumber(t.dtype(), bits);
    if (isSignedInteger(t.dtype())) { // sign-extend the low bytes
      int shift = 64 - 8 * static_cast<int>(dtypeSize(t.dtype()));
      n.i = static_cast<int64_t>(bits << shift) >> shift;
    }
  }
  }
  return n;
}

/// Stores `n` (of the tensor's dtype) as element i.
void writeNumber(Tensor &t, int64_t i, const Number &n) {
  void *p = t.rawData();
  switch (t.dtype()) {
  case DType::F32: static_cast<float *>(p)[i] = static_cast<float>(n.f); return;
  case DType::F64: static_cast<double *>(p)[i] = n.f; return;
  case DType::F16: static_cast<uint16_t *>(p)[i] = floatToHalf(static_cast<float>(n.f)); return;
  case DType::BF16: static_cast<uint16_t *>(p)[i] = floatToBf16(static_cast<float>(n.f)); return;
  case DType::Bool: static_cast<bool *>(p)[i] = n.i != 0; return;
  default:
    std::memcpy(static_cast<char *>(p) + i * dtypeSize(t.dtype()), &n.i, dtypeSize(t.dtype()));
  }
}

/// A tensor of dtype t holding `values` cast to t (ScalarOps.h's castNumber).
Tensor tensorOf(DType t, const std::vector<Number> &values) {
  Tensor x = Tensor::zeros(t, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    writeNumber(x, static_cast<int64_t>(i), scalar::castNumber(values[i], t));
  return x;
}

Number f64(double v) {
  Number n;
  n.type = DType::F64;
  n.f = v;
  return n;
}
Number i64(int64_t v) { return scalar::intNumber(DType::I64, static_cast<uint64_t>(v)); }
Number u64(uint64_t v) { return scalar::intNumber(DType::U64, v); }

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// Floats at the edges of every integer range and of the conversions.
std::vector<Number> floatEdges() {
  std::vector<Number> v;
  for (double d : {kNaN, -kNaN, kInf, -kInf, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 1.9,
                   -1.9, 127.0, 127.9, 128.0, -128.0, -128.9, -129.0, 255.0, 255.9, 256.0,
                   32767.5, 32768.0, -32769.0, 65535.0, 65536.0, 2147483520.0, 2147483648.0,
                   -2147483648.0, -2147483904.0, 3e9, -3e9, 4294967040.0, 4294967296.0,
                   9.2233715e18, 9223372036854775808.0, -9223372036854775808.0,
                   -9.3e18, 1.8446743e19, 18446744073709551616.0, 2e19, 1e30, -1e30,
                   1e-40, -1e-40})
    v.push_back(f64(d));
  return v;
}

/// Integers at the edges of every integer type.
std::vector<Number> intEdges() {
  std::vector<Number> v;
  for (int64_t x : {int64_t(0), int64_t(1), int64_t(-1), int64_t(2), int64_t(-2), int64_t(7),
                    int64_t(-7), int64_t(100), int64_t(-100), int64_t(127), int64_t(-128),
                    int64_t(255), int64_t(256), int64_t(32767), int64_t(-32768), int64_t(65535),
                    int64_t(INT32_MAX), int64_t(INT32_MIN), int64_t(UINT32_MAX),
                    int64_t(1) << 53, (int64_t(1) << 53) + 1, INT64_MAX, INT64_MIN,
                    INT64_MIN + 1})
    v.push_back(i64(x));
  v.push_back(u64(UINT64_MAX));
  v.push_back(u64(uint64_t(1) << 63));
  return v;
}

/// Compares `got` with `want` bit for bit, NaN equal to any NaN (what names the backend).
void expectBits(const Tensor &got, const Tensor &want, const std::vector<Tensor> &inputs,
                const std::string &what) {
  ASSERT_EQ(dtypeName(got.dtype()), dtypeName(want.dtype())) << what;
  ASSERT_EQ(got.numElements(), want.numElements()) << what;
  size_t es = dtypeSize(want.dtype());
  int bad = 0;
  for (int64_t i = 0; i < want.numElements() && bad < 8; ++i) {
    const char *g = static_cast<const char *>(got.rawData()) + i * es;
    const char *w = static_cast<const char *>(want.rawData()) + i * es;
    bool same = std::memcmp(g, w, es) == 0;
    if (want.dtype() == DType::Bool) // any non-zero byte is true
      same = (*g != 0) == (*w != 0);
    // A NaN is a NaN: OpenCL C's NAN and its f16 conversions carry their own sign and payload.
    if (isFloat(want.dtype()) && std::isnan(readNumber(got, i).f) &&
        std::isnan(readNumber(want, i).f))
      same = true;
    if (same)
      continue;
    std::string in;
    for (const Tensor &t : inputs) {
      Number n = readNumber(t, i);
      in += (in.empty() ? "" : ", ") +
            (isFloat(t.dtype()) ? fmt::format("{}", n.f) : fmt::format("{}", n.i));
    }
    Number gn = readNumber(got, i), wn = readNumber(want, i);
    ADD_FAILURE() << what << ": element " << i << " of (" << in << ") is "
                  << (isFloat(want.dtype()) ? fmt::format("{}", gn.f) : fmt::format("{}", gn.i))
                  << ", the definition gives "
                  << (isFloat(want.dtype()) ? fmt::format("{}", wn.f) : fmt::format("{}", wn.i));
    ++bad;
  }
}

bool openCLAvailable() {
  static bool ok = static_cast<bool>(listOpenCLDevices());
  return ok;
}

/// Runs node `n` (of graph g, whose inputs are `inputs`) on every backend and compares each
/// result with `want`, bit for bit.
void checkEveryBackend(Graph &g, Node &n, const std::vector<Tensor> &inputs, const Tensor &want,
                       const std::string &what) {
  std::vector<Tensor> ops = bindOperands(n, inputs);
  Expected<std::vector<Tensor>> interp = evaluateNode(n, ops);
  ASSERT_TRUE(interp) << what << " (interpreter): " << interp.error().message();
  expectBits((*interp)[0], want, inputs, what + " (interpreter)");
  Expected<std::vector<Tensor>> eval = runLowered(n, ops, /*scheduled=*/true);
  ASSERT_TRUE(eval) << what << " (evaluator): " << eval.error().message();
  expectBits((*eval)[0], want, inputs, what + " (kernel evaluator)");
  Expected<std::vector<Tensor>> jit = runJit(n, ops);
  ASSERT_TRUE(jit) << what << " (jit): " << jit.error().message();
  expectBits((*jit)[0], want, inputs, what + " (LLVM JIT)");
  if (!openCLAvailable())
    return;
  g.setOutputs({n.result()});
  OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
  opts.cacheDir = "";
  Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(g, opts);
  ASSERT_TRUE(exe) << what << " (OpenCL): " << exe.error().message();
  Expected<std::vector<Tensor>> cl = (*exe)->run(inputs);
  ASSERT_TRUE(cl) << what << " (OpenCL): " << cl.error().message();
  expectBits((*cl)[0], want, inputs, what + " (OpenCL)");
}

// ---- Casts -------------------------------------------------------------------------------

void checkCast(DType from, DType to, const std::vector<Number> &values, bool saturate = true) {
  std::string what = fmt::format("cast {} -> {}{}", dtypeName(from), dtypeName(to),
                                 saturate ? "" : " (saturate=0)");
  Tensor x = tensorOf(from, values);
  Tensor want = Tensor::zeros(to, {x.numElements()});
  for (int64_t i = 0; i < x.numElements(); ++i) {
    if (!isStorageOnly(to)) {
      writeNumber(want, i, scalar::castNumber(readNumber(x, i), to));
      continue;
    }
    double d = scalar::castNumber(readNumber(x, i), DType::F64).f;
    want.data<uint8_t>()[i] =
        to == DType::F8E4M3FN ? fp::toF8E4M3FN(d, saturate) : fp::toF8E5M2(d, saturate);
  }
  Graph g;
  Value *in = g.addInput("x", TensorType(from, {x.numElements()}));
  AttrMap attrs{{"to", to}};
  if (!saturate)
    attrs["saturate"] = int64_t(0);
  Expected<Node *> n = g.createInferred(OpKind::Cast, {in}, attrs);
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  checkEveryBackend(g, **n, {x}, want, what);
}

const DType kInts[] = {DType::I8,  DType::U8,  DType::I16, DType::U16,
                       DType::I32, DType::U32, DType::I64, DType::U64};

TEST(EdgeCases, FloatToIntegerCasts) {
  for (DType from : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (DType to : kInts)
      checkCast(from, to, floatEdges());
}

TEST(EdgeCases, CastsToBool) {
  for (DType from : {DType::F32, DType::F64, DType::F16, DType::I8, DType::U64, DType::I32})
    checkCast(from, DType::Bool, isFloat(from) ? floatEdges() : intEdges());
}

TEST(EdgeCases, IntegerCasts) {
  for (DType from : kInts)
    for (DType to : kInts)
      if (from != to)
        checkCast(from, to, intEdges());
  for (DType to : {DType::I8, DType::U32, DType::F32})
    checkCast(DType::Bool, to, {i64(0), i64(1)});
}

TEST(EdgeCases, CastsToFloats) {
  // Integers round once (2^53 + 1 and UINT64_MAX do not fit f32 or f64 exactly); f64 rounds
  // to f16 and bf16 once (1 + 2^-11 + 2^-40 rounds up in f16, to 1 through f32).
  std::vector<Number> floats = floatEdges();
  for (double d : {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40, 65519.0, 65520.0, 3.4e38})
    floats.push_back(f64(d));
  for (DType from : {DType::I32, DType::U32, DType::I64, DType::U64, DType::I8})
    for (DType to : {DType::F32, DType::F64, DType::F16, DType::BF16})
      checkCast(from, to, intEdges());
  for (DType from : {DType::F64, DType::F32})
    for (DType to : {DType::F32, DType::F64, DType::F16, DType::BF16})
      if (from != to)
        checkCast(from, to, floats);
}

TEST(EdgeCases, SaturatingFloat8Casts) {
  std::vector<Number> v = floatEdges();
  for (double d : {448.0, 464.0, 480.0, 57344.0, 61440.0, 0x1p-9, 0x1p-10, 0x1p-17})
    v.push_back(f64(d)), v.push_back(f64(-d));
  for (DType to : {DType::F8E4M3FN, DType::F8E5M2})
    for (bool sat : {true, false}) {
      checkCast(DType::F32, to, v, sat);
      checkCast(DType::F16, to, v, sat);
    }
}

// ---- Division, min/max, shifts ------------------------------------------------------------

/// Every pair of `values` (cast to t): a as the first operand, b as the second.
std::pair<Tensor, Tensor> pairs(DType t, const std::vector<Number> &values) {
  std::vector<Number> a, b;
  for (const Number &x : values)
    for (const Number &y : values)
      a.push_back(x), b.push_back(y);
  return {tensorOf(t, a), tensorOf(t, b)};
}

/// `fn` (a ScalarOps.h functor) applied to the pairs in the compute type of `t`.
template <typename Fn> Tensor reference(DType t, const Tensor &a, const Tensor &b) {
  Tensor out = Tensor::zeros(t, a.extents());
  auto apply = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < a.numElements(); ++i) {
      Number x = readNumber(a, i), y = readNumber(b, i), r;
      r.type = t;
      if constexpr (std::is_floating_point_v<T>)
        r.f = Fn::apply(static_cast<T>(x.f), static_cast<T>(y.f), static_cast<T>(y.f));
      else
        r = scalar::intNumber(t, static_cast<uint64_t>(Fn::apply(
                                     static_cast<T>(x.i), static_cast<T>(y.i), static_cast<T>(y.i))));
      writeNumber(out, i, r);
    }
  };
  switch (t) {
  case DType::F32:
  case DType::F16: // computed in f32, rounded back (exact for min and max)
    apply(float());
    break;
  case DType::F64: apply(double()); break;
  case DType::I8: apply(int8_t()); break;
  case DType::U8: apply(uint8_t()); break;
  case DType::I16: apply(int16_t()); break;
  case DType::U16: apply(uint16_t()); break;
  case DType::I32: apply(int32_t()); break;
  case DType::U32: apply(uint32_t()); break;
  case DType::I64: apply(int64_t()); break;
  case DType::U64: apply(uint64_t()); break;
  default: ADD_FAILURE() << "reference on " << dtypeName(t);
  }
  return out;
}

template <typename Fn>
void checkBinary(OpKind op, DType t, const std::vector<Number> &values) {
  std::string what = fmt::format("{} on {}", opInfo(op).name, dtypeName(t));
  auto [a, b] = pairs(t, values);
  Tensor want = reference<Fn>(t, a, b);
  Graph g;
  Value *x = g.addInput("a", TensorType(t, {a.numElements()}));
  Value *y = g.addInput("b", TensorType(t, {b.numElements()}));
  Expected<Node *> n = g.createInferred(op, {x, y}, {});
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  checkEveryBackend(g, **n, {a, b}, want, what);
}

TEST(EdgeCases, IntegerDivisionByZeroAndMinusOne) {
  for (DType t : kInts)
    checkBinary<scalar::FnDiv>(OpKind::Div, t, intEdges());
}

TEST(EdgeCases, NaNPropagatingMinMax) {
  std::vector<Number> v;
  for (double d : {kNaN, -kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.5, 1e-40})
    v.push_back(f64(d));
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    checkBinary<scalar::FnMin>(OpKind::Min, t, v);
    checkBinary<scalar::FnMax>(OpKind::Max, t, v);
  }
  for (DType t : {DType::I32, DType::U64, DType::I8}) {
    checkBinary<scalar::FnMin>(OpKind::Min, t, intEdges());
    checkBinary<scalar::FnMax>(OpKind::Max, t, intEdges());
  }
}

TEST(EdgeCases, ShiftsByTheBitWidthAndMore) {
  std::vector<Number> v;
  for (uint64_t x : std::initializer_list<uint64_t>{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63,
                                                    64, 65, 128, 255, 256, 0x80000000u,
                                                    UINT64_MAX})
    v.push_back(u64(x));
  for (DType t : {DType::U8, DType::U16, DType::U32, DType::U64}) {
    checkBinary<scalar::FnShiftLeft>(OpKind::ShiftLeft, t, v);
    checkBinary<scalar::FnShiftRight>(OpKind::ShiftRight, t, v);
  }
}

// ---- Guards are left out where they cannot fire --------------------------------------------

/// The expanded text of `y[i] = value` over i in 0..16, with buffers x (of `xt`) and y (printed
/// as b0 and b1).
std::string expanded(DType xt, DType yt, const std::function<kir::Expr(kir::Expr)> &value) {
  using namespace kir;
  Kernel k;
  k.name = "k";
  k.buffers = {BufferDecl{"x", xt, 16, BufferRole::Operand, 0, false},
               BufferDecl{"y", yt, 16, BufferRole::Result, 0, true}};
  Expr i = var("i");
  k.body = forLoop("i", intImm(16), store(1, i, value(load(0, xt, i))));
  return printStmt(expandComposites(k.body));
}

TEST(EdgeCases, GuardsFoldForKnownOperands) {
  using namespace kir;
  // Division by a constant other than 0 and -1 divides directly; by 0 it is 0.
  std::string d = expanded(DType::I32, DType::I32,
                           [](Expr x) { return op(OpKind::Div, {x, intImm(7, DType::I32)}); });
  EXPECT_NE(d.find("quot(b0[i], 7i32)"), std::string::npos) << d;
  EXPECT_EQ(d.find("select"), std::string::npos) << d;
  d = expanded(DType::I32, DType::I32,
               [](Expr x) { return op(OpKind::Div, {x, intImm(0, DType::I32)}); });
  EXPECT_NE(d.find("b1[i] = 0i32"), std::string::npos) << d;
  // A divisor whose range excludes 0 and -1 (a u8 plus one) needs no guard either.
  d = expanded(DType::U8, DType::I32, [](Expr x) {
    Expr den = op(OpKind::Add, {cast(x, DType::I32), intImm(1, DType::I32)});
    return op(OpKind::Div, {intImm(1000, DType::I32), den});
  });
  EXPECT_EQ(d.find("select"), std::string::npos) << d;
  // A variable divisor is guarded.
  d = expanded(DType::I32, DType::I32,
               [](Expr x) { return op(OpKind::Div, {intImm(1000, DType::I32), x}); });
  EXPECT_NE(d.find("select"), std::string::npos) << d;

  // A float of known range converts straight to the target: an f32 made from a u8, halved
  // and floored, fits i32; the loop index converted and scaled does too.
  std::string c = expanded(DType::U8, DType::I32, [](Expr x) {
    Expr f = op(OpKind::Floor, {op(OpKind::Mul, {cast(x, DType::F32), floatImm(0.5)})});
    return cast(f, DType::I32);
  });
  EXPECT_NE(c.find("convert<i32>(floor("), std::string::npos) << c;
  EXPECT_EQ(c.find("select"), std::string::npos) << c;
  c = expanded(DType::F32, DType::I64, [](Expr) {
    return cast(op(OpKind::Mul, {cast(var("i"), DType::F32), floatImm(2.5)}), DType::I64);
  });
  EXPECT_EQ(c.find("select"), std::string::npos) << c;
  // An unknown float is guarded (NaN and both ends of the 64-bit range).
  c = expanded(DType::F32, DType::I32, [](Expr x) { return cast(x, DType::I32); });
  EXPECT_NE(c.find("select"), std::string::npos) << c;
  // A float constant with no NaN check; a clamp of a known value has no NaN test.
  std::string m = expanded(DType::F32, DType::F32,
                           [](Expr x) { return op(OpKind::Max, {x, floatImm(0)}); });
  EXPECT_EQ(m.find("0.0f32 == 0.0f32"), std::string::npos) << m;
  EXPECT_NE(m.find("nanf32"), std::string::npos) << m;
  m = expanded(DType::U8, DType::F32, [](Expr x) {
    return op(OpKind::Min, {cast(x, DType::F32), floatImm(6)});
  });
  EXPECT_EQ(m.find("=="), std::string::npos) << m;
  // Shifts by a constant below the bit width shift directly.
  std::string s = expanded(DType::U32, DType::U32,
                           [](Expr x) { return op(OpKind::ShiftLeft, {x, intImm(3, DType::U32)}); });
  EXPECT_NE(s.find("shl(b0[i], 3u32)"), std::string::npos) << s;
  EXPECT_EQ(s.find("select"), std::string::npos) << s;
}

} // namespace
} // namespace nnc

// Tests of the LLVM code generator: hand-built kernels, JIT-compiled and run, against the
// interpreter's scalar formulas (nnc/ir/ScalarOps.h, with runtime/Scalar.h's dtype dispatch)
// and hand-computed results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <tuple>

#include "Scalar.h"
#include "TestTarget.h"
#include "ThreadPool.h"
#include "codegen/llvm/Emitter.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/Kernel.h"

using namespace nnc;
using namespace nnc::kir;

namespace {

CodegenOptions noCache() {
  CodegenOptions o(testenv::testCpu());
  o.cacheDir = "";
  o.parallelFor = &nnc_parallel_for;
  return o;
}

BufferDecl buf(const std::string &name, DType t, int64_t n, BufferRole role, int index,
               bool written) {
  return BufferDecl{name, t, n, role, index, written};
}

std::unique_ptr<CompiledModule> compileOrDie(const std::vector<Kernel> &ks,
                                             const CodegenOptions &o = noCache()) {
  auto m = compileKernels(ks, o);
  EXPECT_TRUE(m) << m.takeError().message();
  if (!m)
    return nullptr;
  return std::move(*m);
}

// ---- Every elementwise op on every dtype it accepts, against Ops.def's formulas ---------------

using namespace nnc::scalar;

/// Interesting operand values of compute type T.
template <typename T> std::vector<T> sampleValues() {
  if constexpr (std::is_same_v<T, bool>) {
    return {false, true};
  } else if constexpr (std::is_floating_point_v<T>) {
    T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    return {T(0), T(-0.0), T(1), T(-1), T(0.5), T(-2.5), T(2.5), T(3), T(-7), T(0.75),
            T(1e-3), T(100), T(-100), T(0.3), T(-0.9), inf, -inf, nan};
  } else {
    using L = std::numeric_limits<T>;
    std::vector<int64_t> v{0, 1, 2, 3, 7, 8, 9, 63, 64, 100, -1, -2, -7, -8, -9};
    std::vector<T> out;
    for (int64_t x : v)
      out.push_back(static_cast<T>(x));
    out.push_back(L::min());
    out.push_back(L::max());
    return out;
  }
}

template <typename Fn> bool isTranscendental() {
  switch (Fn::kKind) {
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Tan:
  case OpKind::Asin:
  case OpKind::Acos:
  case OpKind::Atan:
  case OpKind::Sinh:
  case OpKind::Cosh:
  case OpKind::Tanh:
  case OpKind::Asinh:
  case OpKind::Acosh:
  case OpKind::Atanh:
  case OpKind::Erf:
  case OpKind::Pow:
  case OpKind::Sigmoid: return true;
  default: return false;
  }
}

/// One op on one dtype: a kernel over all operand combinations, plus the expected results.
struct OpCase {
  Kernel kernel;
  std::vector<std::vector<uint8_t>> in; // a, b, c
  std::vector<uint8_t> expected, out;
  DType resultType;
  bool transcendental;
  int64_t n;
};

template <typename Fn, DType D> OpCase makeCase() {
  using S = Storage<D>;
  using T = Compute<D>;
  constexpr bool isSelect = std::is_same_v<Fn, FnSelect>;
  constexpr DType R = Fn::kBoolResult ? DType::Bool : D;
  // Values that survive a round trip through the storage type.
  std::vector<T> vals;
  for (T v : sampleValues<T>()) {
    S st[1];
    store<D>(st, 0, v);
    vals.push_back(load<D>(st, 0));
  }
  // Operand values in compute type, then their storage bytes.
  std::vector<T> xs, ys;
  std::vector<bool> cond;
  if (Fn::kArity == 1) {
    xs = vals;
  } else {
    for (T x : vals)
      for (T y : vals) {
        xs.push_back(x);
        ys.push_back(y);
        cond.push_back(xs.size() % 3 == 0);
      }
  }
  if (ys.empty())
    ys = xs;
  int64_t n = static_cast<int64_t>(xs.size());
  OpCase oc;
  oc.n = n;
  oc.resultType = R;
  oc.transcendental = isTranscendental<Fn>();
  auto bytes = [&](const std::vector<T> &v) {
    std::vector<uint8_t> out(n * sizeof(S));
    for (int64_t i = 0; i < n; ++i)
      store<D>(reinterpret_cast<S *>(out.data()), i, v[i]);
    return out;
  };
  oc.expected.assign(n * sizeof(Storage<R>), 0);
  auto *exp = reinterpret_cast<Storage<R> *>(oc.expected.data());
  for (int64_t i = 0; i < n; ++i) {
    T x = xs[i], y = ys[i];
    if constexpr (isSelect) {
      store<R>(exp, i, Fn::apply(bool(cond[i]), x, y));
    } else if constexpr (Fn::kArity == 1) {
      if constexpr (std::is_same_v<Fn, FnNeg> && kIsInt<T>)
        store<R>(exp, i, sub<T>(T(0), x));
      else
        store<R>(exp, i, Fn::apply(x, x, x));
    } else {
      store<R>(exp, i, Fn::apply(x, y, y));
    }
  }
  oc.out.assign(oc.expected.size(), 0xcd);
  if (isSelect) {
    std::vector<uint8_t> cb(n);
    for (int64_t i = 0; i < n; ++i)
      cb[i] = cond[i];
    oc.in = {cb, bytes(xs), bytes(ys)};
  } else {
    oc.in = {bytes(xs), bytes(ys), bytes(ys)};
  }

  Kernel &k = oc.kernel;
  k.name = fmt::format("k_{}_{}", opInfo(Fn::kKind).name, dtypeName(D));
  k.buffers = {buf("a", isSelect ? DType::Bool : D, n, BufferRole::Operand, 0, false),
               buf("b", D, n, BufferRole::Operand, 1, false),
               buf("c", D, n, BufferRole::Operand, 2, false),
               buf("out", R, n, BufferRole::Result, 0, true)};
  Expr i = var("i");
  std::vector<Expr> args{load(0, isSelect ? DType::Bool : D, i)};
  if (Fn::kArity >= 2)
    args.push_back(load(1, D, i));
  if (Fn::kArity >= 3)
    args.push_back(load(2, D, i));
  k.body = forLoop("i", intImm(n), store(3, i, op(Fn::kKind, args)), LoopKind::Vectorized);
  return oc;
}

template <DType D> void appendCases(std::vector<OpCase> &cases) {
#define NNC_ELEMENTWISE(Id, ...)                                                                   \
  if constexpr (accepts(Fn##Id::kTypes, D))                                                        \
    cases.push_back(makeCase<Fn##Id, D>());
#include "nnc/ir/Ops.def"
}

double asDouble(DType t, const uint8_t *p) {
  switch (t) {
  case DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
  case DType::F64: { double d; std::memcpy(&d, p, 8); return d; }
  case DType::F16: { uint16_t h; std::memcpy(&h, p, 2); return halfToFloat(h); }
  case DType::BF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16ToFloat(h); }
  default: return 0;
  }
}

template <DType D> void checkAllOps() {
  std::vector<OpCase> cases;
  appendCases<D>(cases);
  std::vector<Kernel> ks;
  for (const OpCase &c : cases)
    ks.push_back(c.kernel);
  auto m = compileOrDie(ks);
  ASSERT_TRUE(m);
  int failures = 0;
  for (OpCase &c : cases) {
    KernelFn fn = m->lookup(c.kernel.name);
    ASSERT_NE(fn, nullptr) << c.kernel.name;
    void *bufs[4] = {c.in[0].data(), c.in[1].data(), c.in[2].data(), c.out.data()};
    fn(bufs);
    size_t es = dtypeSize(c.resultType);
    for (int64_t i = 0; i < c.n && failures < 20; ++i) {
      const uint8_t *got = c.out.data() + i * es, *want = c.expected.data() + i * es;
      if (std::memcmp(got, want, es) == 0)
        continue;
      if (isFloat(c.resultType)) {
        double g = asDouble(c.resultType, got), w = asDouble(c.resultType, want);
        if (std::isnan(g) && std::isnan(w))
          continue;
        if (c.transcendental && std::fabs(g - w) <= 1e-6 * std::fabs(w))
          continue;
        ADD_FAILURE() << c.kernel.name << " element " << i << ": got " << g << ", want " << w;
      } else {
        uint64_t g = 0, w = 0;
        std::memcpy(&g, got, es);
        std::memcpy(&w, want, es);
        ADD_FAILURE() << c.kernel.name << " element " << i << ": got " << g << ", want " << w;
      }
      ++failures;
    }
  }
}

} // namespace

TEST(LLVMCodegen, AllElementwiseOpsF32) { checkAllOps<DType::F32>(); }
TEST(LLVMCodegen, AllElementwiseOpsF64) { checkAllOps<DType::F64>(); }
TEST(LLVMCodegen, AllElementwiseOpsF16) { checkAllOps<DType::F16>(); }
TEST(LLVMCodegen, AllElementwiseOpsBF16) { checkAllOps<DType::BF16>(); }
TEST(LLVMCodegen, AllElementwiseOpsI8) { checkAllOps<DType::I8>(); }
TEST(LLVMCodegen, AllElementwiseOpsU8) { checkAllOps<DType::U8>(); }
TEST(LLVMCodegen, AllElementwiseOpsI16) { checkAllOps<DType::I16>(); }
TEST(LLVMCodegen, AllElementwiseOpsU16) { checkAllOps<DType::U16>(); }
TEST(LLVMCodegen, AllElementwiseOpsI32) { checkAllOps<DType::I32>(); }
TEST(LLVMCodegen, AllElementwiseOpsU32) { checkAllOps<DType::U32>(); }
TEST(LLVMCodegen, AllElementwiseOpsI64) { checkAllOps<DType::I64>(); }
TEST(LLVMCodegen, AllElementwiseOpsU64) { checkAllOps<DType::U64>(); }
TEST(LLVMCodegen, AllElementwiseOpsBool) { checkAllOps<DType::Bool>(); }

// ---- Hand-written kernels ----------------------------------------------------------------------

TEST(LLVMCodegen, BroadcastAddF32) {
  // out[i, j] = a[i, j] + b[j] over 5x7, the inner loop vectorized.
  Kernel k;
  k.name = "bcast_add";
  k.buffers = {buf("a", DType::F32, 35, BufferRole::Operand, 0, false),
               buf("b", DType::F32, 7, BufferRole::Operand, 1, false),
               buf("out", DType::F32, 35, BufferRole::Result, 0, true)};
  Expr i = var("i"), j = var("j");
  Expr flat = add(mul(i, intImm(7)), j);
  k.body = forLoop("i", intImm(5),
                   forLoop("j", intImm(7),
                           store(2, flat, op(OpKind::Add, {load(0, DType::F32, flat),
                                                           load(1, DType::F32, j)})),
                           LoopKind::Vectorized));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<float> a(35), b(7), out(35, -1);
  for (int x = 0; x < 35; ++x)
    a[x] = 0.5f * x;
  for (int x = 0; x < 7; ++x)
    b[x] = 100.0f * x;
  void *bufs[] = {a.data(), b.data(), out.data()};
  m->lookup("bcast_add")(bufs);
  for (int x = 0; x < 35; ++x)
    EXPECT_EQ(out[x], a[x] + b[x % 7]) << x;
  EXPECT_EQ(m->lookup("no_such_kernel"), nullptr);
}

TEST(LLVMCodegen, IntegerEdgeCases) {
  // i32 add wrap, division by zero, INT_MIN / -1 and Python-style mod, u8 shifts.
  Kernel k;
  k.name = "ints";
  int n = 5;
  k.buffers = {buf("a", DType::I32, n, BufferRole::Operand, 0, false),
               buf("b", DType::I32, n, BufferRole::Operand, 1, false),
               buf("sum", DType::I32, n, BufferRole::Result, 0, true),
               buf("quot", DType::I32, n, BufferRole::Result, 1, true),
               buf("rem", DType::I32, n, BufferRole::Result, 2, true)};
  Expr i = var("i");
  Expr a = load(0, DType::I32, i), b = load(1, DType::I32, i);
  k.body = forLoop("i", intImm(n),
                   block({store(2, i, op(OpKind::Add, {a, b})), store(3, i, op(OpKind::Div, {a, b})),
                          store(4, i, op(OpKind::Mod, {a, b}))}));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> av{mx, 7, mn, -7, 7}, bv{1, 0, -1, 2, -2}, s(n), q(n), r(n);
  void *bufs[] = {av.data(), bv.data(), s.data(), q.data(), r.data()};
  m->lookup("ints")(bufs);
  EXPECT_EQ(s[0], mn);            // wraps
  EXPECT_EQ(q[1], 0);             // 7 / 0
  EXPECT_EQ(r[1], 0);             // 7 % 0
  EXPECT_EQ(q[2], mn);            // INT_MIN / -1 wraps
  EXPECT_EQ(r[2], 0);
  EXPECT_EQ(q[3], -3);            // truncates
  EXPECT_EQ(r[3], 1);             // -7 mod 2 = 1 (sign of the divisor)
  EXPECT_EQ(r[4], -1);            // 7 mod -2 = -1
}

TEST(LLVMCodegen, CastEdgeCases) {
  // f32 -> i32 / u8 / u64 / bool / f16 / bf16 like interp/Cast.cpp.
  std::vector<float> x{1.9f, -1.9f, NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 1e20f, 300.5f, 0.0f};
  int n = static_cast<int>(x.size());
  Kernel k;
  k.name = "casts";
  k.buffers = {buf("x", DType::F32, n, BufferRole::Operand, 0, false),
               buf("i32", DType::I32, n, BufferRole::Result, 0, true),
               buf("u8", DType::U8, n, BufferRole::Result, 1, true),
               buf("u64", DType::U64, n, BufferRole::Result, 2, true),
               buf("b", DType::Bool, n, BufferRole::Result, 3, true),
               buf("h", DType::F16, n, BufferRole::Result, 4, true),
               buf("bf", DType::BF16, n, BufferRole::Result, 5, true)};
  Expr i = var("i"), v = load(0, DType::F32, i);
  k.body = forLoop("i", intImm(n),
                   block({store(1, i, cast(v, DType::I32)), store(2, i, cast(v, DType::U8)),
                          store(3, i, cast(v, DType::U64)), store(4, i, cast(v, DType::Bool)),
                          store(5, i, cast(v, DType::F16)), store(6, i, cast(v, DType::BF16))}));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<int32_t> i32(n);
  std::vector<uint8_t> u8(n), bl(n);
  std::vector<uint64_t> u64(n);
  std::vector<uint16_t> h(n), bf(n);
  void *bufs[] = {x.data(), i32.data(), u8.data(), u64.data(), bl.data(), h.data(), bf.data()};
  m->lookup("casts")(bufs);
  // The interpreter's rule: truncate, NaN -> 0, saturate to the 64-bit range, then wrap.
  auto intBits = [](float f, bool toUnsigned) -> uint64_t {
    if (std::isnan(f))
      return 0;
    double t = std::trunc(double(f));
    if (toUnsigned && t >= 9223372036854775808.0)
      return t >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(t);
    if (t >= 9223372036854775808.0)
      return static_cast<uint64_t>(INT64_MAX);
    if (t < -9223372036854775808.0)
      return static_cast<uint64_t>(INT64_MIN);
    return static_cast<uint64_t>(static_cast<int64_t>(t));
  };
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(i32[j], static_cast<int32_t>(intBits(x[j], false))) << x[j];
    EXPECT_EQ(u8[j], static_cast<uint8_t>(intBits(x[j], true))) << x[j];
    EXPECT_EQ(u64[j], intBits(x[j], true)) << x[j];
    EXPECT_EQ(bl[j], x[j] != 0 ? 1 : 0) << x[j];
    EXPECT_EQ(h[j], floatToHalf(x[j])) << x[j];
    if (!std::isnan(x[j]))
      EXPECT_EQ(bf[j], floatToBf16(x[j])) << x[j];
    else
      EXPECT_TRUE(std::isnan(bf16ToFloat(bf[j])));
  }
}

TEST(LLVMCodegen, F16RoundTrip) {
  // f32 -> f16 -> f32 over a spread of magnitudes, subnormals, ties and overflow.
  std::mt19937 rng(7);
  std::vector<float> x{0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 6e-8f, 3e-5f,
                       1.0009765625f, 1.00048828125f, 1.00146484375f, INFINITY, -INFINITY, NAN};
  std::uniform_real_distribution<float> u(-20.0f, 20.0f);
  for (int j = 0; j < 500; ++j)
    x.push_back(std::ldexp(1.0f + u(rng) / 40.0f, static_cast<int>(u(rng))) *
                (j % 2 ? 1.0f : -1.0f));
  int n = static_cast<int>(x.size());
  Kernel k;
  k.name = "f16_round_trip";
  k.buffers = {buf("x", DType::F32, n, BufferRole::Operand, 0, false),
               buf("h", DType::F16, n, BufferRole::Result, 0, true),
               buf("y", DType::F32, n, BufferRole::Result, 1, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(n),
                   block({store(1, i, cast(load(0, DType::F32, i), DType::F16)),
                          store(2, i, cast(load(1, DType::F16, i), DType::F32))}),
                   LoopKind::Vectorized);
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<uint16_t> h(n);
  std::vector<float> y(n);
  void *bufs[] = {x.data(), h.data(), y.data()};
  m->lookup("f16_round_trip")(bufs);
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(h[j], floatToHalf(x[j])) << x[j];
    float want = halfToFloat(floatToHalf(x[j]));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(y[j]));
    else
      EXPECT_EQ(y[j], want) << x[j];
  }
}

/// Whether the LLVM IR text `ir` holds a vector fadd of element type `lanes` (" x float>").
static bool hasVectorFAdd(const std::string &ir, const char *lanes) {
  std::istringstream lines(ir);
  for (std::string line; std::getline(lines, line);)
    if (line.find("fadd") != std::string::npos && line.find(lanes) != std::string::npos)
      return true;
  return false;
}

TEST(LLVMCodegen, ReductionWithAccumulator) {
  // out[r] = sum_c x[r, c], the accumulator a Decl updated by Assign. A plain Assign keeps
  // the additions in order (scalar adds); accumulate() lets LLVM keep partial sums in vector
  // lanes (checked on the 1024-column rows). Small integers keep every order exact.
  for (auto [rows, cols, reassoc] : {std::tuple<int, int, bool>{6, 37, false},
                                     {6, 37, true}, {3, 1024, false}, {3, 1024, true}}) {
    Kernel k;
    k.name = "row_sum";
    k.buffers = {buf("x", DType::F32, rows * cols, BufferRole::Operand, 0, false),
                 buf("out", DType::F32, rows, BufferRole::Result, 0, true)};
    Expr r = var("r"), c = var("c");
    Expr sum = op(OpKind::Add, {var("acc", DType::F32),
                                load(0, DType::F32, add(mul(r, intImm(cols)), c))});
    k.body = forLoop("r", intImm(rows),
                     block({decl("acc", DType::F32, floatImm(0)),
                            forLoop("c", intImm(cols),
                                    reassoc ? accumulate("acc", sum) : assign("acc", sum)),
                            store(1, r, var("acc", DType::F32))}));
    EXPECT_EQ(printStmt(k.body).find("=reassoc") != std::string::npos, reassoc);
    auto ir = emitLLVMIR({k}, /*optimized=*/true, testenv::testCpu());
    ASSERT_TRUE(ir) << ir.takeError().message();
    if (cols >= 1024)
      EXPECT_EQ(hasVectorFAdd(*ir, " x float>"), reassoc) << *ir;
    auto m = compileOrDie({k});
    ASSERT_TRUE(m);
    std::vector<float> x(rows * cols), out(rows);
    for (int j = 0; j < rows * cols; ++j)
      x[j] = static_cast<float>(j % 11) - 3.0f;
    void *bufs[] = {x.data(), out.data()};
    m->lookup("row_sum")(bufs);
    for (int rr = 0; rr < rows; ++rr) {
      float s = 0;
      for (int cc = 0; cc < cols; ++cc)
        s += x[rr * cols + cc];
      EXPECT_EQ(out[rr], s);
    }
  }
}

TEST(LLVMCodegen, ScalarLoopsKeepTheLoopVectorizerOff) {
  // A pooled row of 16 lanes (a channel block): one f64 accumulator per lane, updated in a
  // Scalar loop over the rows. The loop carries the vectorizer's off switch, so no lane is
  // gathered at the row's stride; the lanes' updates are packed into vectors (SLP) instead.
  const int rows = 50, lanes = 16;
  Kernel k;
  k.name = "pool_row";
  k.buffers = {buf("x", DType::F32, rows * lanes, BufferRole::Operand, 0, false),
               buf("out", DType::F32, lanes, BufferRole::Result, 0, true)};
  std::vector<Stmt> decls, adds, stores;
  for (int j = 0; j < lanes; ++j) {
    std::string a = "acc" + std::to_string(j);
    decls.push_back(decl(a, DType::F64, floatImm(0, DType::F64)));
    Expr at = add(mul(var("r"), intImm(lanes)), intImm(j));
    adds.push_back(accumulate(
        a, op(OpKind::Add, {var(a, DType::F64), cast(load(0, DType::F32, at), DType::F64)})));
    stores.push_back(store(1, intImm(j), cast(var(a, DType::F64), DType::F32)));
  }
  std::vector<Stmt> body = decls;
  body.push_back(forLoop("r", intImm(rows), block(adds), LoopKind::Scalar));
  body.insert(body.end(), stores.begin(), stores.end());
  k.body = block(body);
  EXPECT_NE(printStmt(k.body).find("for r in 0..50 scalar {"), std::string::npos)
      << printStmt(k.body);
  auto ir = emitLLVMIR({k}, /*optimized=*/false, testenv::testCpu());
  ASSERT_TRUE(ir) << ir.takeError().message();
  EXPECT_NE(ir->find("!\"llvm.loop.vectorize.enable\", i1 false}"), std::string::npos) << *ir;
  auto opt = emitLLVMIR({k}, /*optimized=*/true, testenv::testCpu());
  ASSERT_TRUE(opt) << opt.takeError().message();
  EXPECT_EQ(opt->find("gather"), std::string::npos) << *opt;
  EXPECT_TRUE(hasVectorFAdd(*opt, " x double>")) << *opt;
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<float> x(rows * lanes), out(lanes);
  for (int e = 0; e < rows * lanes; ++e)
    x[e] = static_cast<float>(e % 13) - 6.0f;
  void *bufs[] = {x.data(), out.data()};
  m->lookup("pool_row")(bufs);
  for (int j = 0; j < lanes; ++j) {
    float want = 0;
    for (int r = 0; r < rows; ++r)
      want += x[r * lanes + j];
    EXPECT_EQ(out[j], want) << "lane " << j;
  }
}

TEST(LLVMCodegen, IfThenElse) {
  Kernel k;
  k.name = "branches";
  k.buffers = {buf("out", DType::I64, 10, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(10),
                   ifThen(lt(i, intImm(3)), store(0, i, intImm(1)),
                          ifThen(ge(i, intImm(8)), store(0, i, mul(i, intImm(10))))));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<int64_t> out(10, -5);
  void *bufs[] = {out.data()};
  m->lookup("branches")(bufs);
  std::vector<int64_t> want{1, 1, 1, -5, -5, -5, -5, -5, 80, 90};
  EXPECT_EQ(out, want);
}

TEST(LLVMCodegen, ParallelLoop) {
  // The parallel loop's body reads a local and a loop variable of the enclosing scope.
  int n = 1000, reps = 3;
  Kernel k;
  k.name = "par";
  k.buffers = {buf("x", DType::F32, n, BufferRole::Operand, 0, false),
               buf("out", DType::F32, n * reps, BufferRole::Result, 0, true)};
  Expr i = var("i"), r = var("r");
  k.body = forLoop(
      "r", intImm(reps),
      block({decl("scale", DType::F32, cast(add(r, intImm(1)), DType::F32)),
             forLoop("i", intImm(n),
                     store(1, add(mul(r, intImm(n)), i),
                           op(OpKind::Mul, {load(0, DType::F32, i), var("scale", DType::F32)})),
                     LoopKind::Parallel)}));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<float> x(n), out(n * reps, 0);
  for (int j = 0; j < n; ++j)
    x[j] = 0.25f * j;
  void *bufs[] = {x.data(), out.data()};
  ThreadPool pool(4);
  ThreadPool::Scope scope(&pool);
  m->lookup("par")(bufs);
  for (int rr = 0; rr < reps; ++rr)
    for (int j = 0; j < n; ++j)
      ASSERT_EQ(out[rr * n + j], x[j] * float(rr + 1)) << rr << " " << j;
}

TEST(LLVMCodegen, StorageOnlyDTypes) {
  // Storage-only elements move as raw bytes (reversed copy)...
  Kernel mv;
  mv.name = "f8_move";
  mv.buffers = {buf("x", DType::F8E4M3FN, 5, BufferRole::Operand, 0, false),
                buf("y", DType::F8E4M3FN, 5, BufferRole::Result, 0, true)};
  Expr j = var("j");
  mv.body = forLoop("j", intImm(5), store(1, j, load(0, DType::F8E4M3FN, sub(intImm(4), j))));
  auto mm = compileOrDie({mv});
  ASSERT_TRUE(mm);
  std::vector<uint8_t> x{1, 2, 0x7f, 0x80, 0xff}, y(5);
  void *bufs[] = {x.data(), y.data()};
  mm->lookup("f8_move")(bufs);
  EXPECT_EQ(y, (std::vector<uint8_t>{0xff, 0x80, 0x7f, 2, 1}));
  // ...and casts convert through the format (StorageCastTest.cpp checks them in depth).
  Kernel k;
  k.name = "f8";
  k.buffers = {buf("x", DType::F8E4M3FN, 4, BufferRole::Operand, 0, false),
               buf("y", DType::F32, 4, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(4), store(1, i, cast(load(0, DType::F8E4M3FN, i), DType::F32)));
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<uint8_t> f8{0x38, 0xc0, 0x01, 0x7e};
  std::vector<float> f(4);
  void *cbufs[] = {f8.data(), f.data()};
  m->lookup("f8")(cbufs);
  EXPECT_EQ(f, (std::vector<float>{1.0f, -2.0f, 0.001953125f, 448.0f}));
}

namespace {
Kernel scaleKernel(const std::string &name, double factor) {
  Kernel k;
  k.name = name;
  k.buffers = {buf("x", DType::F32, 16, BufferRole::Operand, 0, false),
               buf("y", DType::F32, 16, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(16),
                   store(1, i, op(OpKind::Mul, {load(0, DType::F32, i), floatImm(factor)})));
  return k;
}
} // namespace

TEST(LLVMCodegen, ObjectCache) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 fmt::format("nnc-objcache-test-{}", std::random_device()());
  fs::remove_all(dir);
  CodegenOptions o(testenv::testCpu());
  o.cacheDir = dir.string();
  std::vector<Kernel> ks{scaleKernel("scale3", 3.0)};
  auto m1 = compileOrDie(ks, o);
  ASSERT_TRUE(m1);
  EXPECT_FALSE(m1->fromCache());
  // One object and its index entry (kernel text + build -> object key); no temporary files.
  int objects = 0, indexes = 0;
  for (auto &e : fs::directory_iterator(dir)) {
    objects += e.path().extension() == ".o";
    indexes += e.path().extension() == ".idx";
    EXPECT_TRUE(e.path().extension() == ".o" || e.path().extension() == ".idx") << e.path();
  }
  EXPECT_EQ(objects, 1);
  EXPECT_EQ(indexes, 1);
  auto m2 = compileOrDie(ks, o);
  ASSERT_TRUE(m2);
  EXPECT_TRUE(m2->fromCache());
  // Without its index entry the object is still found (by its IR), and the entry comes back.
  for (auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".idx")
      fs::remove(e.path());
  auto m2b = compileOrDie(ks, o);
  ASSERT_TRUE(m2b);
  EXPECT_TRUE(m2b->fromCache());
  indexes = 0;
  for (auto &e : fs::directory_iterator(dir))
    indexes += e.path().extension() == ".idx";
  EXPECT_EQ(indexes, 1);
  std::vector<float> x(16, 2.0f), y(16, 0);
  void *bufs[] = {x.data(), y.data()};
  m2->lookup("scale3")(bufs);
  EXPECT_EQ(y[5], 6.0f);
  // The same kernel for a target that streams its stores is other code: not an index hit.
  CodegenOptions streaming = o;
  streaming.cpu.streamingStoreBytes = 1;
  auto ms = compileOrDie(ks, streaming);
  ASSERT_TRUE(ms);
  EXPECT_FALSE(ms->fromCache());
  // Another kernel is another entry.
  auto m3 = compileOrDie({scaleKernel("scale3", 4.0)}, o);
  ASSERT_TRUE(m3);
  EXPECT_FALSE(m3->fromCache());
  // A corrupt entry is recompiled, not an error.
  for (auto &e : fs::directory_iterator(dir))
    fs::resize_file(e.path(), 10);
  auto m4 = compileOrDie(ks, o);
  ASSERT_TRUE(m4);
  EXPECT_FALSE(m4->fromCache());
  // The key covers the CPU.
  EXPECT_NE(llvmcg::objectCacheKey("ir", "skylake-avx512 +avx512f", 3),
            llvmcg::objectCacheKey("ir", "znver3 -avx512f", 3));
  EXPECT_EQ(llvmcg::objectCacheKey("ir", "x", 3), llvmcg::objectCacheKey("ir", "x", 3));
  fs::remove_all(dir);
  // An unwritable cache folder only disables caching.
  CodegenOptions bad(testenv::testCpu());
  bad.cacheDir = "/proc/nnc-no-such-dir/objects";
  auto m5 = compileOrDie(ks, bad);
  ASSERT_TRUE(m5);
  EXPECT_FALSE(m5->fromCache());
}

TEST(LLVMCodegen, DuplicateKernelsCompiledOnce) {
  namespace fs = std::filesystem;
  fs::path dir =
      fs::temp_directory_path() / fmt::format("nnc-objcache-dedup-{}", std::random_device()());
  fs::remove_all(dir);
  CodegenOptions o = noCache();
  o.cacheDir = dir.string();
  // scale_b is scale_a under other kernel and buffer names and slots; scale_c differs.
  Kernel b = scaleKernel("scale_b", 3.0);
  b.buffers[0].name = "in";
  b.buffers[0].index = 4;
  b.buffers[1].name = "out";
  b.buffers[1].index = 2;
  std::vector<Kernel> ks{scaleKernel("scale_a", 3.0), b, scaleKernel("scale_c", 5.0)};
  auto m = compileOrDie(ks, o);
  ASSERT_TRUE(m);
  int objects = 0;
  for (auto &e : fs::directory_iterator(dir)) {
    EXPECT_TRUE(e.path().extension() == ".o" || e.path().extension() == ".idx") << e.path();
    objects += e.path().extension() == ".o";
  }
  EXPECT_EQ(objects, 2); // scale_a (also serving scale_b) and scale_c
  EXPECT_EQ(m->lookup("scale_a"), m->lookup("scale_b"));
  EXPECT_EQ(m->lookup("no_such_kernel"), nullptr);
  const std::pair<const char *, float> expect[] = {
      {"scale_a", 6.0f}, {"scale_b", 6.0f}, {"scale_c", 10.0f}};
  for (auto [name, want] : expect) {
    KernelFn f = m->lookup(name);
    ASSERT_NE(f, nullptr) << name;
    std::vector<float> x(16, 2.0f), y(16, 0);
    void *bufs[] = {x.data(), y.data()};
    f(bufs);
    EXPECT_EQ(y[7], want) << name;
  }
  // From the cache, every name still resolves.
  auto again = compileOrDie(ks, o);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->fromCache());
  for (auto [name, want] : expect)
    EXPECT_NE(again->lookup(name), nullptr) << name;
  fs::remove_all(dir);
}

TEST(LLVMCodegen, ParallelCompileMatchesSerial) {
  // Kernels of several kinds (elementwise, parallel loop, scheduled) compiled on one thread
  // and on several give the same results.
  std::vector<Kernel> ks;
  for (int i = 0; i < 6; ++i)
    ks.push_back(scaleKernel(fmt::format("scale{}", i), 1.5 + i));
  Kernel par;
  par.name = "par_add";
  par.buffers = {buf("x", DType::F32, 64, BufferRole::Operand, 0, false),
                 buf("y", DType::F32, 64, BufferRole::Result, 0, true)};
  par.body =
      forLoop("i", intImm(64),
              store(1, var("i"), op(OpKind::Add, {load(0, DType::F32, var("i")), floatImm(0.25)})),
              LoopKind::Parallel);
  ks.push_back(par);
  Kernel sched = scaleKernel("scale_sched", 7.0);
  sched.schedule.steps = {{ScheduleStep::Split, "i", 8, {}}};
  ks.push_back(sched);
  CodegenOptions serial = noCache();
  serial.compileThreads = 1;
  CodegenOptions parallel = noCache();
  parallel.compileThreads = 4;
  auto ms = compileOrDie(ks, serial);
  auto mp = compileOrDie(ks, parallel);
  ASSERT_TRUE(ms && mp);
  for (const Kernel &k : ks) {
    int64_t n = k.buffers[0].numElements;
    std::vector<float> x(n), ys(n, 0), yp(n, 0);
    for (int64_t i = 0; i < n; ++i)
      x[i] = 0.5f * float(i) - 3.0f;
    void *bs[] = {x.data(), ys.data()};
    void *bp[] = {x.data(), yp.data()};
    ASSERT_NE(ms->lookup(k.name), nullptr) << k.name;
    ASSERT_NE(mp->lookup(k.name), nullptr) << k.name;
    ms->lookup(k.name)(bs);
    mp->lookup(k.name)(bp);
    EXPECT_EQ(ys, yp) << k.name;
    EXPECT_NE(ys[1], 0.0f) << k.name;
  }
}

TEST(LLVMCodegen, EmitTextAndObjects) {
  std::vector<Kernel> ks{scaleKernel("my_scale_kernel", 2.0)};
  auto ir = emitLLVMIR(ks, /*optimized=*/false, testenv::testCpu());
  ASSERT_TRUE(ir) << ir.takeError().message();
  EXPECT_NE(ir->find("define void @my_scale_kernel(ptr"), std::string::npos) << *ir;
  auto opt = emitLLVMIR(ks, /*optimized=*/true, testenv::testCpu());
  ASSERT_TRUE(opt);
  auto as = emitAssembly(ks, testenv::testCpu());
  ASSERT_TRUE(as) << as.takeError().message();
  EXPECT_NE(as->find("my_scale_kernel:"), std::string::npos);
  std::string path = (std::filesystem::temp_directory_path() / "nnc-emit-test.o").string();
  Error e = emitObjectFile(ks, path, testenv::testCpu());
  ASSERT_FALSE(e) << e.message();
  EXPECT_GT(std::filesystem::file_size(path), 100u);
  std::filesystem::remove(path);
  // The vector width is nnc's, stated on the function, not LLVM's tuning for a CPU name.
  const CpuTarget &host = CpuTarget::host();
  EXPECT_EQ(llvmCpuAndFeatures(host).first, host.levelName());
  EXPECT_NE(ir->find(fmt::format("\"prefer-vector-width\"=\"{}\"", host.vectorBits)),
            std::string::npos);
  EXPECT_NE(ir->find("\"tune-cpu\"=\"generic\""), std::string::npos);
}

TEST(LLVMCodegen, IndependentVectorLoopsAreDeclaredParallel) {
  // y[i * 8 + j] = x[i * 8 + j] * s[j] over an NCHWc-like nest whose 8-lane inner loop is
  // vectorized. As gpu_grid loops (independent iterations) its buffer accesses form a parallel
  // access group, and the vectorizer checks no pointer overlap at run time; the same nest
  // without gpu_grid keeps the run-time check, as does a grid loop whose store does not move
  // with the vectorized variable.
  const int rows = 100;
  Expr i = var("i"), j = var("j");
  Expr at = add(mul(i, intImm(8)), j);
  auto nest = [&](const std::string &name, Expr storeAt, bool grid) {
    Kernel k;
    k.name = name;
    k.buffers = {buf("x", DType::F32, rows * 8, BufferRole::Operand, 0, false),
                 buf("s", DType::F32, 8, BufferRole::Operand, 1, false),
                 buf("y", DType::F32, rows * 8, BufferRole::Result, 0, true)};
    k.body =
        forLoop("i", intImm(rows),
                forLoop("j", intImm(8),
                        store(2, storeAt,
                              op(OpKind::Mul, {load(0, DType::F32, at), load(1, DType::F32, j)}))));
    if (grid)
      k.schedule.steps.push_back({ScheduleStep::GpuGrid, "", 0, {"i", "j"}});
    k.schedule.steps.push_back({ScheduleStep::Vectorize, "j", 0, {}});
    return k;
  };
  std::vector<Kernel> ks{nest("grid", at, true), nest("plain", at, false),
                         nest("grid_same_row", mul(i, intImm(8)), true)};
  for (const Kernel &k : ks) {
    auto ir = emitLLVMIR({k}, /*optimized=*/false, testenv::testCpu());
    ASSERT_TRUE(ir) << ir.takeError().message();
    bool parallel = ir->find("llvm.loop.parallel_accesses") != std::string::npos;
    EXPECT_EQ(parallel, k.name == "grid") << k.name << "\n" << *ir;
  }
  // The vectorizer's overlap checks: pointer differences (diff.check) or bounds (memcheck).
  auto checksOverlap = [](const std::string &text) {
    return text.find("diff.check") != std::string::npos ||
           text.find("vector.memcheck") != std::string::npos;
  };
  auto opt = emitLLVMIR({ks[0]}, /*optimized=*/true, testenv::testCpu());
  ASSERT_TRUE(opt);
  EXPECT_FALSE(checksOverlap(*opt)) << *opt;
  EXPECT_NE(opt->find(" x float>"), std::string::npos) << *opt; // still vectorized
  auto plain = emitLLVMIR({ks[1]}, /*optimized=*/true, testenv::testCpu());
  ASSERT_TRUE(plain);
  EXPECT_TRUE(checksOverlap(*plain)) << *plain;
  // In place (y over x, read only at the index written), as the buffer plan may put it.
  auto m = compileOrDie({ks[0]});
  ASSERT_TRUE(m);
  std::vector<float> x(rows * 8), s(8);
  for (int e = 0; e < rows * 8; ++e)
    x[e] = float(e % 97) - 40.0f;
  for (int l = 0; l < 8; ++l)
    s[l] = 0.5f + float(l);
  std::vector<float> want(rows * 8);
  for (int e = 0; e < rows * 8; ++e)
    want[e] = x[e] * s[e % 8];
  void *bufs[] = {x.data(), s.data(), x.data()};
  m->lookup("grid")(bufs);
  EXPECT_EQ(x, want);
}

TEST(LLVMCodegen, ScheduledElementwise) {
  // split + vectorize + parallel with a tail (100 is not a multiple of 16), and unroll.
  int n = 100;
  Kernel k = scaleKernel("sched", 1.5);
  k.buffers[0].numElements = k.buffers[1].numElements = n;
  Expr i = var("i");
  k.body = forLoop("i", intImm(n),
                   store(1, i, op(OpKind::Mul, {load(0, DType::F32, i), floatImm(1.5)})));
  k.schedule.steps = {{ScheduleStep::Split, "i", 16, {}},
                      {ScheduleStep::Vectorize, "i.i", 0, {}},
                      {ScheduleStep::Parallel, "i.o", 0, {}}};
  Kernel u = k;
  u.name = "sched_unrolled";
  u.schedule.steps = {{ScheduleStep::Split, "i", 4, {}}, {ScheduleStep::Unroll, "i.i", 0, {}}};
  auto m = compileOrDie({k, u});
  ASSERT_TRUE(m);
  ThreadPool pool(3);
  ThreadPool::Scope scope(&pool);
  for (const char *name : {"sched", "sched_unrolled"}) {
    std::vector<float> x(n + 1), y(n + 1, -1.0f);
    for (int j = 0; j < n; ++j)
      x[j] = float(j);
    void *bufs[] = {x.data(), y.data()};
    m->lookup(name)(bufs);
    for (int j = 0; j < n; ++j)
      ASSERT_EQ(y[j], 1.5f * j) << name << " " << j;
    EXPECT_EQ(y[n], -1.0f) << name; // the tail guard stops at n
  }
  // Schedule errors name the step.
  Kernel bad = k;
  bad.name = "bad";
  bad.schedule.steps = {{ScheduleStep::Vectorize, "nope", 0, {}}};
  auto e = compileKernels({bad}, noCache());
  ASSERT_FALSE(e);
  EXPECT_NE(e.takeError().message().find("bad"), std::string::npos) << e.takeError().message();
}

TEST(LLVMCodegen, GemmTileMatchesEvaluator) {
  // Tiles with a partial last vector (masked), a k loop of odd length, A read transposed
  // (lda 1, ak mr) and row-major, accumulating onto C and overwriting it; C's padding
  // columns (ldc > nr) must stay untouched. A prefetch hint (even one past B's end: it never
  // faults), of every row or of one row per 2^shift k steps, changes nothing.
  for (auto [mr, nr, kc, transposedA, accumulate, prefetch, shift] :
       {std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int>{5, 21, 13, false, true, 0,
                                                                        0},
        {3, 32, 7, true, false, 1 << 20, 0},
        {6, 16, 19, false, false, 3 * 18, 2},
        {1, 5, 1, false, true, 0, 0},
        {4, 16, 0, false, true, 16, 3}}) {
    int64_t ldc = nr + 3, ldb = nr + 2;
    Kernel k;
    k.name = "tile";
    int64_t aN = std::max<int64_t>(mr * kc, 1), bN = std::max<int64_t>(kc * ldb, 1);
    k.buffers = {buf("a", DType::F32, aN, BufferRole::Operand, 0, false),
                 buf("b", DType::F32, bN, BufferRole::Operand, 1, false),
                 buf("c", DType::F32, mr * ldc, BufferRole::Result, 0, true)};
    GemmTileShape s;
    s.a = 0;
    s.b = 1;
    s.mr = mr;
    s.nr = nr;
    s.lda = transposedA ? 1 : kc;
    s.ak = transposedA ? mr : 1;
    s.ldb = ldb;
    s.ldc = ldc;
    s.accumulate = accumulate;
    s.prefetchB = prefetch;
    s.prefetchShift = shift;
    k.body = gemmTile(s, 2, intImm(0), intImm(0), intImm(0), intImm(kc));
    ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
    EXPECT_NE(printKernel(k).find("gemm_tile"), std::string::npos) << printKernel(k);
    std::vector<float> a(aN), b(bN), want(mr * ldc), got;
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = static_cast<float>(int(i * 7 % 13) - 6) * 0.25f;
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<float>(int(i * 5 % 11) - 5) * 0.5f;
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = static_cast<float>(i % 9) - 4.0f;
    got = want;
    std::vector<float> before = want;
    ASSERT_FALSE(evaluateKernel(k, {a.data(), b.data(), want.data()}));
    auto m = compileOrDie({k});
    ASSERT_TRUE(m);
    void *bufs[] = {a.data(), b.data(), got.data()};
    m->lookup("tile")(bufs);
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t j = 0; j < ldc; ++j) {
        size_t i = static_cast<size_t>(r * ldc + j);
        if (j >= nr)
          EXPECT_EQ(want[i], before[i]) << "evaluator wrote padding";
        // Products of quarter and half integers sum exactly: fused or not, same numbers.
        EXPECT_EQ(got[i], want[i]) << mr << "x" << nr << " row " << r << " column " << j;
      }
  }
}

TEST(LLVMCodegen, ConvTileMatchesEvaluator) {
  // Conv tiles over a reduction of four dims: from a bias broadcast over the columns (icol
  // 0), from zero, accumulating onto C itself (init = C), depthwise (X read as vectors), with
  // constant inner extents (made the microkernel's own) and with extents computed from a loop
  // variable (the microkernel's arguments, one of them 0 on the first iteration: the tile then
  // only copies its initial values), an edge tile's column windows. Quarter and half integers
  // sum exactly: the JIT's fused
  // multiply-adds give the evaluator's numbers.
  Kernel k;
  k.name = "conv";
  k.buffers = {buf("x", DType::F32, 512, BufferRole::Operand, 0, false),
               buf("w", DType::F32, 1024, BufferRole::Operand, 1, false),
               buf("bias", DType::F32, 32, BufferRole::Operand, 2, false),
               buf("c", DType::F32, 256, BufferRole::Result, 0, true)};
  ConvTileShape t;
  t.x = 0;
  t.w = 1;
  t.cols = 3;
  t.blocks = 2;
  t.lanes = 16;
  t.xcol = 16;
  t.wblk = 400;
  t.ccol = 16;
  t.cblk = 64;
  t.xs = {128, 32, 16, 1};
  t.ws = {200, 96, 16, 1};
  ConvTileShape fromBias = t;
  fromBias.init = 2;
  fromBias.icol = 0;
  fromBias.iblk = 16;
  ConvTileShape onC = t;
  onC.init = 3;
  onC.icol = 16;
  onC.iblk = 64;
  ConvTileShape dw = t;
  dw.blocks = 1;
  dw.cols = 5;
  dw.lanes = 8;
  dw.depthwise = true;
  dw.xs = {0, 40, 8, 0};
  dw.ws = {0, 24, 8, 0};
  // An edge tile: kernel column 0 leaves out column 0 (whose X would lie before the buffer,
  // at offset -16), kernel column 2 leaves out column 2.
  ConvTileShape edge = t;
  edge.kwCols = {{1, 3}, {0, 3}, {0, 2}};
  auto n = [](int64_t v) { return intImm(v); };
  Expr i = var("i");
  k.body = block({
      convTile(fromBias, 3, {n(0), n(0), n(0), n(0), n(2), n(2), n(3), n(16)}),
      convTile(t, 3, {n(3), n(7), n(128), n(0), n(1), n(3), n(2), n(5)}),
      forLoop("i", n(3),
              convTile(onC, 3, {add(i, n(1)), n(2), n(0), n(0), n(2), n(2), i, add(i, n(2))})),
      convTile(dw, 3, {n(11), n(13), n(128), n(0), n(1), n(3), n(3), n(1)}),
      convTile(edge, 3, {n(-16), n(5), n(0), n(0), n(1), n(2), n(3), n(16)}),
  });
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> x(512), w(1024), bias(32), want(256), got;
  for (size_t j = 0; j < x.size(); ++j)
    x[j] = static_cast<float>(int(j * 7 % 13) - 6) * 0.25f;
  for (size_t j = 0; j < w.size(); ++j)
    w[j] = static_cast<float>(int(j * 5 % 11) - 5) * 0.5f;
  for (size_t j = 0; j < bias.size(); ++j)
    bias[j] = static_cast<float>(int(j % 7) - 3);
  for (size_t j = 0; j < want.size(); ++j)
    want[j] = static_cast<float>(j % 9) - 4.0f;
  got = want;
  ASSERT_FALSE(evaluateKernel(k, {x.data(), w.data(), bias.data(), want.data()}));
  for (const char *cpu : {"x86-64-v3", "x86-64-v4"}) {
    CodegenOptions o = noCache();
    o.cpu = *CpuTarget::parse(cpu);
    auto m = compileOrDie({k}, o);
    ASSERT_TRUE(m);
    std::vector<float> c = got;
    void *bufs[] = {x.data(), w.data(), bias.data(), c.data()};
    m->lookup("conv")(bufs);
    for (size_t j = 0; j < c.size(); ++j)
      EXPECT_EQ(c[j], want[j]) << cpu << " element " << j;
  }
}

TEST(LLVMCodegen, ConvTileRunsOfPartialSums) {
  // sumEvery: each run of input blocks sums from zero before joining the running sum. From
  // 2^24, every 1 added on its own rounds away (2^24 + 1 ties to the even 2^24), while a run's
  // ones sum exactly and join in one exact addition: one chain gives 2^24, runs of 2 and 3
  // blocks (the last run shorter) 2^24 + 32, in the evaluator and the JIT alike; an empty
  // reduction copies the initial values.
  Kernel k;
  k.name = "runs";
  k.buffers = {buf("x", DType::F32, 64, BufferRole::Operand, 0, false),
               buf("w", DType::F32, 64, BufferRole::Operand, 1, false),
               buf("init", DType::F32, 16, BufferRole::Operand, 2, false),
               buf("c", DType::F32, 64, BufferRole::Result, 0, true)};
  ConvTileShape t;
  t.x = 0;
  t.w = 1;
  t.init = 2;
  t.cols = 1;
  t.blocks = 1;
  t.lanes = 16;
  t.xcol = 0;
  t.wblk = 0;
  t.ccol = 16;
  t.cblk = 16;
  t.icol = 0;
  t.iblk = 0;
  t.xs = {4, 0, 0, 1};
  t.ws = {0, 0, 0, 0};
  auto n = [](int64_t v) { return intImm(v); };
  std::vector<Stmt> tiles;
  for (int64_t every : {0, 2, 3}) {
    ConvTileShape r = t;
    r.sumEvery = every;
    int64_t at = 16 * int64_t(tiles.size());
    tiles.push_back(convTile(r, 3, {n(0), n(0), n(at), n(0), n(8), n(1), n(1), n(4)}));
  }
  // No input block at all: C takes the initial values.
  ConvTileShape none = t;
  none.sumEvery = 2;
  tiles.push_back(convTile(none, 3, {n(0), n(0), n(48), n(0), n(0), n(1), n(1), n(4)}));
  k.body = block(tiles);
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> x(64, 1.0f), w(64, 1.0f), init(16, 16777216.0f), want(64, 0.0f);
  ASSERT_FALSE(evaluateKernel(k, {x.data(), w.data(), init.data(), want.data()}));
  for (int64_t j = 0; j < 64; ++j)
    ASSERT_EQ(want[j], j < 16 || j >= 48 ? 16777216.0f : 16777248.0f) << "evaluator, " << j;
  for (const char *cpu : {"x86-64-v3", "x86-64-v4"}) {
    CodegenOptions o = noCache();
    o.cpu = *CpuTarget::parse(cpu);
    auto m = compileOrDie({k}, o);
    ASSERT_TRUE(m);
    std::vector<float> c(64, 0.0f);
    void *bufs[] = {x.data(), w.data(), init.data(), c.data()};
    m->lookup("runs")(bufs);
    for (size_t j = 0; j < c.size(); ++j)
      EXPECT_EQ(c[j], want[j]) << cpu << " element " << j;
  }
}

TEST(LLVMCodegen, GemmTileRunsOfPartialSums) {
  // sumEvery on a GEMM tile: each run of k steps sums from zero before joining C's running
  // sum. From 2^24 every 1 added on its own rounds away, while a run's ones sum exactly: one
  // chain of 8 leaves 2^24, runs of 2 give 2^24 + 8; runs of 3 (the last one shorter), from
  // zero, give 8; with no k step, C stays as it was (accumulate) or becomes zero. Tiles of
  // 2 x 20 columns: the last vector partial (masked) on AVX-512 and AVX2 alike.
  const int64_t mr = 2, nr = 20, kc = 8, tileC = mr * nr;
  struct Case {
    int64_t every, k;
    bool accumulate;
    float want;
  };
  const std::vector<Case> cases = {{0, kc, true, 16777216.0f},
                                   {2, kc, true, 16777224.0f},
                                   {3, kc, false, 8.0f},
                                   {2, 0, true, 16777216.0f},
                                   {2, 0, false, 0.0f}};
  Kernel k;
  k.name = "gruns";
  int64_t cN = tileC * int64_t(cases.size());
  k.buffers = {buf("a", DType::F32, mr * kc, BufferRole::Operand, 0, false),
               buf("b", DType::F32, kc * nr, BufferRole::Operand, 1, false),
               buf("c", DType::F32, cN, BufferRole::Result, 0, true)};
  std::vector<Stmt> tiles;
  for (size_t i = 0; i < cases.size(); ++i) {
    GemmTileShape s;
    s.a = 0;
    s.b = 1;
    s.mr = mr;
    s.nr = nr;
    s.lda = kc;
    s.ak = 1;
    s.ldb = nr;
    s.ldc = nr;
    s.accumulate = cases[i].accumulate;
    s.sumEvery = cases[i].every;
    tiles.push_back(gemmTile(s, 2, intImm(0), intImm(0), intImm(tileC * int64_t(i)),
                             intImm(cases[i].k)));
  }
  k.body = block(tiles);
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> a(mr * kc, 1.0f), b(kc * nr, 1.0f), start(cN, 16777216.0f);
  std::vector<float> want = start;
  ASSERT_FALSE(evaluateKernel(k, {a.data(), b.data(), want.data()}));
  for (int64_t j = 0; j < cN; ++j)
    ASSERT_EQ(want[j], cases[j / tileC].want) << "evaluator, case " << j / tileC;
  for (const char *cpu : {"x86-64-v3", "x86-64-v4"}) {
    CodegenOptions o = noCache();
    o.cpu = *CpuTarget::parse(cpu);
    auto m = compileOrDie({k}, o);
    ASSERT_TRUE(m);
    std::vector<float> c = start;
    void *bufs[] = {a.data(), b.data(), c.data()};
    m->lookup("gruns")(bufs);
    for (size_t j = 0; j < c.size(); ++j)
      EXPECT_EQ(c[j], want[j]) << cpu << " element " << j;
  }
}

TEST(LLVMCodegen, GemmTileOutOfBoundsIsRejected) {
  Kernel k;
  k.name = "tile_oob";
  k.buffers = {buf("a", DType::F32, 8, BufferRole::Operand, 0, false),
               buf("b", DType::F32, 64, BufferRole::Operand, 1, false),
               buf("c", DType::F32, 32, BufferRole::Result, 0, true)};
  GemmTileShape s;
  s.a = 0;
  s.b = 1;
  s.mr = 2;
  s.nr = 16;
  s.lda = 4;
  s.ak = 1;
  s.ldb = 16;
  s.ldc = 16;
  k.body = gemmTile(s, 2, intImm(0), intImm(0), intImm(0), intImm(4));
  EXPECT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  k.body = gemmTile(s, 2, intImm(0), intImm(0), intImm(1), intImm(4)); // C one past its end
  EXPECT_TRUE(verifyKernel(k));
  s.prefetchB = 16;
  s.prefetchShift = -1;
  k.body = gemmTile(s, 2, intImm(0), intImm(0), intImm(0), intImm(4));
  EXPECT_TRUE(verifyKernel(k)); // a shift of the prefetched rows below zero
  s.prefetchShift = 0;
  k.buffers[0].dtype = DType::F64;
  k.body = gemmTile(s, 2, intImm(0), intImm(0), intImm(0), intImm(4));
  EXPECT_TRUE(verifyKernel(k)); // f32 only
}

TEST(LLVMCodegen, PermutationTilesAreTransposedInRegisters) {
  // out[c][r] = in[r * ld + 3 + c], as permuteSchedule tiles it (8 x 8 tiles of c and r, the
  // load contiguous along c.i, the store along r.i): whole tiles become vector loads, an
  // in-register transpose (shufflevector) and vector stores; tails (a guard on both tile
  // loops, or the tightened min(8, ...) extent of one) run as written. Every element must
  // equal the copy's, for element sizes of 1, 4 and 8 bytes.
  auto nest = [](const std::string &name, DType t, int64_t rows, int64_t cols, int64_t ld,
                 bool pure) {
    Kernel k;
    k.name = name;
    k.buffers = {buf("in", t, rows * ld, BufferRole::Operand, 0, false),
                 buf("out", t, rows * cols, BufferRole::Result, 0, true)};
    Expr r = var("r"), c = var("c");
    Expr v = load(0, t, add(add(mul(r, intImm(ld)), intImm(3)), c));
    if (!pure)
      v = op(OpKind::Add, {v, v});
    k.body = forLoop("c", intImm(cols),
                     forLoop("r", intImm(rows), store(1, add(mul(c, intImm(rows)), r), v)));
    k.schedule.steps = {{ScheduleStep::GpuGrid, "", 0, {"c", "r"}},
                        {ScheduleStep::Split, "c", 8, {}},
                        {ScheduleStep::Split, "r", 8, {}},
                        {ScheduleStep::Reorder, "", 0, {"c.o", "r.o", "c.i", "r.i"}}};
    return k;
  };
  struct Case {
    const char *name;
    DType t;
    int64_t rows, cols, ld;
    bool pure;
  };
  const Case cases[] = {{"f32_both_tails", DType::F32, 37, 20, 29, true},
                        {"f32_row_tail", DType::F32, 37, 16, 24, true},
                        {"f32_whole", DType::F32, 40, 16, 19, true},
                        {"i64_both_tails", DType::I64, 21, 13, 17, true},
                        {"u8_row_tail", DType::U8, 19, 24, 30, true},
                        {"f32_not_a_copy", DType::F32, 40, 16, 19, false}};
  for (const Case &cs : cases) {
    const int64_t ld = cs.ld;
    Kernel k = nest(cs.name, cs.t, cs.rows, cs.cols, ld, cs.pure);
    auto ir = emitLLVMIR({k}, /*optimized=*/false, testenv::testCpu());
    ASSERT_TRUE(ir) << ir.takeError().message();
    EXPECT_EQ(ir->find("shufflevector") != std::string::npos, cs.pure) << cs.name << "\n" << *ir;
    auto m = compileOrDie({k});
    ASSERT_TRUE(m) << cs.name;
    size_t es = dtypeSize(cs.t);
    std::vector<uint8_t> in(cs.rows * ld * es), out(cs.rows * cs.cols * es, 0xAB),
        want(cs.rows * cs.cols * es);
    for (size_t e = 0; e < in.size(); ++e)
      in[e] = static_cast<uint8_t>((e * 37 + 11) % 251);
    for (int64_t c = 0; c < cs.cols; ++c)
      for (int64_t r = 0; r < cs.rows; ++r)
        std::memcpy(&want[(c * cs.rows + r) * es], &in[(r * ld + 3 + c) * es], es);
    void *bufs[] = {in.data(), out.data()};
    m->lookup(cs.name)(bufs);
    if (cs.pure)
      EXPECT_EQ(out, want) << cs.name;
  }
}

namespace {

/// Occurrences of `what` in `text`.
size_t countOf(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST(LLVMCodegen, IndexArithmeticIsEmittedOncePerDominatingPoint) {
  // out[q*16 + j] = x[(q / 3)*16 + j] for 16 lanes j: the quotient is one sdiv in the loop
  // body, not one per lane. Computed first inside an if, it is emitted again after it: the
  // if's block does not dominate the code after it.
  const int rows = 16, lanes = 16;
  Kernel k;
  k.name = "vn";
  k.buffers = {buf("x", DType::F32, rows * lanes, BufferRole::Operand, 0, false),
               buf("out", DType::F32, rows * lanes + rows, BufferRole::Result, 0, true)};
  Expr q = var("q");
  auto quot = [&] { return kir::div(q, intImm(3)); };
  std::vector<Stmt> body;
  // A row's extra element: x[q / 3] when q < 8, else 0, then x[q / 3] added (below).
  Expr extra = intImm(rows * lanes);
  body.push_back(ifThen(lt(q, intImm(8)), store(1, add(extra, q), load(0, DType::F32, quot())),
                        store(1, add(extra, q), floatImm(0, DType::F32))));
  for (int j = 0; j < lanes; ++j)
    body.push_back(store(1, add(mul(q, intImm(lanes)), intImm(j)),
                         load(0, DType::F32, add(mul(quot(), intImm(lanes)), intImm(j)))));
  body.push_back(store(1, add(extra, q),
                       op(OpKind::Add, {load(1, DType::F32, add(extra, q)),
                                        load(0, DType::F32, quot())})));
  k.body = forLoop("q", intImm(rows), block(body));
  auto ir = emitLLVMIR({k}, /*optimized=*/false, testenv::testCpu());
  ASSERT_TRUE(ir) << ir.takeError().message();
  // The if's quotient, and the lanes' one, which the last statement reuses.
  EXPECT_EQ(countOf(*ir, " sdiv "), 2u) << *ir;
  auto m = compileOrDie({k});
  ASSERT_TRUE(m);
  std::vector<float> x(rows * lanes), out(rows * lanes + rows, -1.0f);
  for (int e = 0; e < rows * lanes; ++e)
    x[e] = static_cast<float>(e % 29) - 7.0f;
  void *bufs[] = {x.data(), out.data()};
  m->lookup("vn")(bufs);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < lanes; ++j)
      EXPECT_EQ(out[r * lanes + j], x[(r / 3) * lanes + j]) << r << " " << j;
    float want = (r < 8 ? x[r / 3] : 0.0f) + x[r / 3];
    EXPECT_EQ(out[rows * lanes + r], want) << r;
  }
}

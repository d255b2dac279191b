// Accuracy of the f32 exp, sigmoid, tanh and erf (ir/FastMath.h) over the whole float range:
// every 97th bit pattern and the special values (pow: a grid and random pairs), through the CPU JIT
// and through the scalar formulas of the interpreter and kernel evaluator, against double-precision
// references, with the ulp bounds FastMath.h states. The JIT and the interpreter must agree bit for
// bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "TestTarget.h"
#include "ThreadPool.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/ScalarOps.h"
#include "nnc/runtime/OpenCL.h"

using namespace nnc;
using namespace nnc::kir;

namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t toBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// |got - ref| in units of the spacing of f32 values at ref (2^-149 among the denormals);
/// 0 when got is ref rounded to f32, infinite for a wrong NaN, infinity or sign of zero.
double ulpError(float got, double ref) {
  if (std::isnan(ref) || std::isnan(got))
    return std::isnan(ref) && std::isnan(got) ? 0 : INFINITY;
  float rounded = static_cast<float>(ref);
  if (toBits(got) == toBits(rounded))
    return 0;
  if (std::isinf(got) || std::isinf(rounded) || got == rounded) // got == rounded: -0 vs +0
    return INFINITY;
  int e;
  std::frexp(ref, &e); // |ref| = m * 2^e with m in [0.5, 1)
  int exponent = std::max(e - 1, -126);
  return std::fabs(static_cast<double>(got) - ref) / std::ldexp(1.0, exponent - 23);
}

/// Every `stride`-th f32 bit pattern, then the values at the edges of the range.
std::vector<float> sweepInputs(uint64_t stride = 97) {
  std::vector<float> xs;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += stride)
    xs.push_back(fromBits(static_cast<uint32_t>(u)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f,   1e-45f,        1e-40f,    1.1754942e-38f, 1.17549435e-38f,
                  1e-30f, 1e-8f,         0.5f,      0.625f,         1.0f,
                  3.92f,  4.0f,          9.0f,      10.0f,          15.0f,
                  87.3f,  88.0f,         88.72283f, 88.7228394f,    88.72284f,
                  89.0f,  100.0f,        103.9f,    103.97208f,     104.0f,
                  1e10f,  3.4028235e38f, inf}) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  return xs;
}

double sigmoidRef(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

struct Function {
  OpKind op;
  double (*ref)(double);
  float (*interp)(float);
  double maxUlp; ///< The bound FastMath.h states.
};

const Function kFunctions[] = {
    {OpKind::Exp, [](double x) { return std::exp(x); },
     [](float x) { return scalar::FnExp::apply(x, x, x); }, 1},
    {OpKind::Sigmoid, sigmoidRef, [](float x) { return scalar::FnSigmoid::apply(x, x, x); }, 3},
    {OpKind::Tanh, [](double x) { return std::tanh(x); },
     [](float x) { return scalar::FnTanh::apply(x, x, x); }, 2},
    {OpKind::Erf, [](double x) { return std::erf(x); },
     [](float x) { return scalar::FnErf::apply(x, x, x); }, 2},
};

/// out[i] = op(in[i]) over n f32 values, the loop vectorized.
Kernel unaryKernel(OpKind op, int64_t n) {
  Kernel k;
  k.name = fmt::format("fastmath_{}", opInfo(op).name);
  k.buffers = {BufferDecl{"in", DType::F32, n, BufferRole::Operand, 0, false},
               BufferDecl{"out", DType::F32, n, BufferRole::Result, 0, true}};
  Expr i = var("i");
  k.body = forLoop("i", intImm(n), store(1, i, kir::op(op, {load(0, DType::F32, i)})),
                   LoopKind::Vectorized);
  return k;
}

TEST(FastMath, WholeRangeJitAndInterpreterWithinStatedUlps) {
  std::vector<float> xs = sweepInputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<Kernel> ks;
  for (const Function &f : kFunctions)
    ks.push_back(unaryKernel(f.op, n));
  CodegenOptions o(testenv::testCpu());
  o.cacheDir = "";
  o.parallelFor = &nnc_parallel_for;
  o.cpu.streamingStoreBytes = 0; // plain std::vector buffers, not aligned for streaming stores
  auto m = compileKernels(ks, o);
  ASSERT_TRUE(m) << m.takeError().message();
  std::vector<float> out(n);
  for (size_t fi = 0; fi < ks.size(); ++fi) {
    const Function &f = kFunctions[fi];
    std::string name(opInfo(f.op).name);
    KernelFn fn = (*m)->lookup(ks[fi].name);
    ASSERT_NE(fn, nullptr);
    void *bufs[2] = {xs.data(), out.data()};
    fn(bufs);
    double worstJit = 0, worstInterp = 0;
    float worstAt = 0;
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      double ref = f.ref(static_cast<double>(xs[i]));
      float interp = f.interp(xs[i]);
      double ej = ulpError(out[i], ref), ei = ulpError(interp, ref);
      if (ej > worstJit)
        worstJit = ej, worstAt = xs[i];
      worstInterp = std::max(worstInterp, ei);
      bool same = toBits(out[i]) == toBits(interp) || (std::isnan(out[i]) && std::isnan(interp));
      if (!same && mismatches++ < 5)
        ADD_FAILURE() << name << "(" << xs[i] << "): JIT " << out[i] << ", interpreter " << interp;
    }
    EXPECT_LE(worstJit, f.maxUlp) << name << " worst at " << worstAt;
    EXPECT_LE(worstInterp, f.maxUlp) << name;
    std::printf("%s: max error %.3f ulp (JIT), %.3f ulp (interpreter) over %lld values\n",
                name.c_str(), worstJit, worstInterp, static_cast<long long>(n));
  }
}

TEST(FastMath, VectorizedWithoutCalls) {
  // At x86-64-v3 (AVX2) the loops take 8 f32 lanes, and no libm or libmvec function is called.
  CpuTarget v3 = CpuTarget::forLevel(CpuTarget::Level::V3);
  std::vector<Kernel> ks;
  for (const Function &f : kFunctions) {
    Kernel k = unaryKernel(f.op, 1024);
    k.body->loopKind = LoopKind::Serial;
    k.schedule.steps = {ScheduleStep{ScheduleStep::Split, "i", v3.f32Lanes(), {}},
                        ScheduleStep{ScheduleStep::Vectorize, "i.i", 0, {}}};
    ks.push_back(k);
  }
  auto ir = emitLLVMIR(ks, /*optimized=*/true, v3);
  ASSERT_TRUE(ir) << ir.takeError().message();
  EXPECT_NE(ir->find("<8 x float>"), std::string::npos);
  for (const char *fn : {"expf", "tanhf", "erff", "_ZGV", "llvm.exp."})
    EXPECT_EQ(ir->find(fn), std::string::npos) << fn;
}

/// `inputs` (f32 vectors) run through `text`'s graph on the OpenCL device (PoCL in CI).
Expected<std::vector<Tensor>> runOnOpenCL(const std::string &text,
                                          const std::vector<std::vector<float>> &inputs) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseGraph(text));
  OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
  opts.cacheDir = "";
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<OpenCLExecutable> exe, OpenCLExecutable::compile(*g, opts));
  std::vector<Tensor> in;
  for (const std::vector<float> &v : inputs) {
    in.push_back(Tensor::zeros(DType::F32, {static_cast<int64_t>(v.size())}));
    std::memcpy(in.back().data<float>(), v.data(), v.size() * sizeof(float));
  }
  return exe->run(in);
}

TEST(FastMath, OpenCLWithinStatedUlpsAndAsTheInterpreter) {
  // The same sweep (every 997th pattern, to keep PoCL's run short) through OpenCL C, whose
  // helpers come from the same FastMath.h templates.
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices)
    GTEST_SKIP() << "no OpenCL device on this machine: " << devices.error().message();
  std::vector<float> xs = sweepInputs(997);
  const int64_t n = static_cast<int64_t>(xs.size());
  Expected<std::vector<Tensor>> got = runOnOpenCL(
      fmt::format("graph @fastmath(%x: f32[{0}]) -> (f32[{0}], f32[{0}], f32[{0}], f32[{0}]) {{\n"
                  "  %e = exp(%x) : f32[{0}]\n  %s = sigmoid(%x) : f32[{0}]\n"
                  "  %t = tanh(%x) : f32[{0}]\n  %r = erf(%x) : f32[{0}]\n"
                  "  return %e, %s, %t, %r\n}}\n",
                  n),
      {xs});
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_EQ(got->size(), 4u);
  for (size_t fi = 0; fi < 4; ++fi) {
    const Function &f = kFunctions[fi];
    std::string name(opInfo(f.op).name);
    const float *out = (*got)[fi].data<float>();
    double worst = 0;
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, ulpError(out[i], f.ref(static_cast<double>(xs[i]))));
      float interp = f.interp(xs[i]);
      bool same = toBits(out[i]) == toBits(interp) || (std::isnan(out[i]) && std::isnan(interp));
      if (!same && mismatches++ < 5)
        ADD_FAILURE() << name << "(" << xs[i] << "): OpenCL " << out[i] << ", interpreter "
                      << interp;
    }
    EXPECT_LE(worst, f.maxUlp) << name;
    std::printf("%s: max error %.3f ulp (OpenCL) over %lld values\n", name.c_str(), worst,
                static_cast<long long>(n));
  }
}

/// (x, y) pairs for pow: every special value against every other and against a few ordinary
/// ones, then random pairs: x over all finite floats with y in [-4, 4], x in [0.5, 2] with
/// |y| up to 300 (results near the f32 range, where log|x|'s error is multiplied most), and
/// negative x with integer y.
std::pair<std::vector<float>, std::vector<float>> powInputs(int randomPairs) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> special = {0.0f,  -0.0f,  1.0f,     -1.0f,   2.0f,   -2.0f,   0.5f,
                                -0.5f, 3.0f,   -3.0f,    0.25f,   1e-45f, -1e-45f, 1e-40f,
                                3e38f, -3e38f, inf,      -inf,    nan,    1.5f,    -1.5f,
                                1e10f, 1e-10f, 1.00001f, 0.99999f};
  std::pair<std::vector<float>, std::vector<float>> p;
  for (float x : special)
    for (float y : special) {
      p.first.push_back(x);
      p.second.push_back(y);
    }
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> small(-4.0f, 4.0f), big(-300.0f, 300.0f), near1(0.5f, 2.0f);
  std::uniform_int_distribution<uint32_t> pattern(0, 0x7f7fffffu), expo(-40, 40);
  for (int i = 0; i < randomPairs; ++i) {
    switch (i % 3) {
    case 0:
      p.first.push_back(fromBits(pattern(rng))), p.second.push_back(small(rng));
      break;
    case 1:
      p.first.push_back(near1(rng)), p.second.push_back(big(rng));
      break;
    default:
      p.first.push_back(-near1(rng) * 4),
          p.second.push_back(static_cast<float>(static_cast<int>(expo(rng))));
      break;
    }
  }
  return p;
}

/// Checks pow's results against std::pow in double and against the interpreter's formula.
void checkPow(const std::vector<float> &xs, const std::vector<float> &ys, const float *out,
              const char *what, double maxUlp) {
  double worst = 0;
  float worstX = 0, worstY = 0;
  int mismatches = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double ref = std::pow(static_cast<double>(xs[i]), static_cast<double>(ys[i]));
    double err = ulpError(out[i], ref);
    if (err > worst)
      worst = err, worstX = xs[i], worstY = ys[i];
    float interp = scalar::FnPow::apply(xs[i], ys[i], ys[i]);
    bool same = toBits(out[i]) == toBits(interp) || (std::isnan(out[i]) && std::isnan(interp));
    if (!same && mismatches++ < 5)
      ADD_FAILURE() << "pow(" << xs[i] << ", " << ys[i] << "): " << what << " " << out[i]
                    << ", interpreter " << interp;
  }
  EXPECT_LE(worst, maxUlp) << "pow worst at (" << worstX << ", " << worstY << ")";
  std::printf("pow: max error %.3f ulp (%s) over %zu pairs, worst at (%g, %g)\n", worst, what,
              xs.size(), worstX, worstY);
}

constexpr double kPowMaxUlp = 2; ///< The bound FastMath.h states.

TEST(FastMath, PowPairsJitAndInterpreterWithinStatedUlps) {
  auto [xs, ys] = powInputs(600000);
  const int64_t n = static_cast<int64_t>(xs.size());
  Kernel k;
  k.name = "fastmath_pow";
  k.buffers = {BufferDecl{"x", DType::F32, n, BufferRole::Operand, 0, false},
               BufferDecl{"y", DType::F32, n, BufferRole::Operand, 1, false},
               BufferDecl{"out", DType::F32, n, BufferRole::Result, 0, true}};
  Expr i = var("i");
  k.body =
      forLoop("i", intImm(n),
              store(2, i, kir::op(OpKind::Pow, {load(0, DType::F32, i), load(1, DType::F32, i)})),
              LoopKind::Vectorized);
  CodegenOptions o(testenv::testCpu());
  o.cacheDir = "";
  o.parallelFor = &nnc_parallel_for;
  o.cpu.streamingStoreBytes = 0;
  auto m = compileKernels({k}, o);
  ASSERT_TRUE(m) << m.takeError().message();
  std::vector<float> out(n);
  KernelFn fn = (*m)->lookup(k.name);
  ASSERT_NE(fn, nullptr);
  void *bufs[3] = {xs.data(), ys.data(), out.data()};
  fn(bufs);
  checkPow(xs, ys, out.data(), "JIT", kPowMaxUlp);
}

TEST(FastMath, PowPairsOpenCLAsTheInterpreter) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices)
    GTEST_SKIP() << "no OpenCL device on this machine: " << devices.error().message();
  auto [xs, ys] = powInputs(30000);
  const int64_t n = static_cast<int64_t>(xs.size());
  Expected<std::vector<Tensor>> got =
      runOnOpenCL(fmt::format("graph @pow(%x: f32[{0}], %y: f32[{0}]) -> (f32[{0}]) {{\n"
                              "  %p = pow(%x, %y) : f32[{0}]\n  return %p\n}}\n",
                              n),
                  {xs, ys});
  ASSERT_TRUE(got) << got.error().message();
  checkPow(xs, ys, (*got)[0].data<float>(), "OpenCL", kPowMaxUlp);
}

} // namespace

// Unit tests of the kernel-level IR: builders, printer, signatures, evaluator, schedules and
// the kernel verifier.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "nnc/ir/Kernel.h"
#include "nnc/ir/ScalarOps.h"
#include "nnc/support/Float16.h"

using namespace nnc;
using namespace nnc::kir;

namespace {

BufferDecl buf(const std::string &name, DType t, int64_t n, BufferRole role, int index,
               bool written) {
  return BufferDecl{name, t, n, role, index, written};
}

/// relu over 1024 f32 elements.
Kernel reluKernel(const std::string &name = "relu_0") {
  Kernel k;
  k.name = name;
  k.buffers = {buf("in0", DType::F32, 1024, BufferRole::Operand, 0, false),
               buf("out0", DType::F32, 1024, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(1024),
                   store(1, i, op(OpKind::Max, {load(0, DType::F32, i), floatImm(0)})));
  return k;
}

/// out[i, j] = a[i, j] * 2 + b[j] over [rows, cols] (b broadcast along rows).
Kernel addBroadcastKernel(int64_t rows, int64_t cols) {
  Kernel k;
  k.name = "add_bcast";
  k.buffers = {buf("a", DType::F32, rows * cols, BufferRole::Operand, 0, false),
               buf("b", DType::F32, cols, BufferRole::Operand, 1, false),
               buf("out", DType::F32, rows * cols, BufferRole::Result, 0, true)};
  Expr i = var("i"), j = var("j");
  Expr flat = add(mul(i, intImm(cols)), j);
  Expr value = op(OpKind::Add, {op(OpKind::Mul, {load(0, DType::F32, flat), floatImm(2)}),
                                load(1, DType::F32, j)});
  k.body = forLoop("i", intImm(rows), forLoop("j", intImm(cols), store(2, flat, value)));
  return k;
}

/// out[i] = sum_j a[i, j] with a Decl accumulator.
Kernel rowSumKernel(int64_t rows, int64_t cols) {
  Kernel k;
  k.name = "row_sum";
  k.buffers = {buf("a", DType::F32, rows * cols, BufferRole::Operand, 0, false),
               buf("out", DType::F32, rows, BufferRole::Result, 0, true)};
  Expr i = var("i"), j = var("j");
  Expr acc = var("acc", DType::F32);
  Stmt inner = forLoop(
      "j", intImm(cols),
      assign("acc", op(OpKind::Add, {acc, load(0, DType::F32, add(mul(i, intImm(cols)), j))})));
  k.body = forLoop("i", intImm(rows),
                   block({decl("acc", DType::F32, floatImm(0)), inner, store(1, i, acc)}));
  return k;
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3, 3);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

std::string verifyError(const Kernel &k) {
  Error e = verifyKernel(k);
  return e ? e.message() : std::string();
}

ScheduleStep split(const std::string &loop, int64_t f) {
  ScheduleStep s{ScheduleStep::Split, loop, f, {}};
  return s;
}
ScheduleStep markStep(ScheduleStep::Kind kind, const std::string &loop) {
  return ScheduleStep{kind, loop, 0, {}};
}
ScheduleStep reorder(std::vector<std::string> loops) {
  return ScheduleStep{ScheduleStep::Reorder, "", 0, std::move(loops)};
}

} // namespace

// ---- Builders ---------------------------------------------------------------------------------

TEST(KernelIr, BuildersFoldIntegerImmediates) {
  Expr i = var("i");
  EXPECT_EQ(add(i, intImm(0)), i);
  EXPECT_EQ(add(intImm(0), i), i);
  EXPECT_EQ(sub(i, intImm(0)), i);
  EXPECT_EQ(mul(i, intImm(1)), i);
  EXPECT_EQ(mul(intImm(1), i), i);
  EXPECT_EQ(div(i, intImm(1)), i);
  EXPECT_TRUE(isIntImm(mul(i, intImm(0)), 0));
  EXPECT_TRUE(isIntImm(mod(i, intImm(1)), 0));
  EXPECT_TRUE(isIntImm(add(intImm(3), intImm(4)), 7));
  EXPECT_TRUE(isIntImm(mul(intImm(3), intImm(4)), 12));
  EXPECT_TRUE(isIntImm(div(intImm(7), intImm(2)), 3));
  EXPECT_TRUE(isIntImm(div(intImm(-7), intImm(2)), -3));
  EXPECT_TRUE(isIntImm(mod(intImm(-7), intImm(3)), 2)); // the divisor's sign
  EXPECT_TRUE(isIntImm(min(intImm(-7), intImm(3)), -7));
  EXPECT_TRUE(isIntImm(max(intImm(-7), intImm(3)), 3));
  EXPECT_TRUE(isIntImm(add(intImm(127, DType::I8), intImm(1, DType::I8)), -128)); // wraps
  EXPECT_EQ(add(intImm(2), intImm(3))->type, DType::I64);
  // Nested index math folds down to a single term.
  EXPECT_EQ(printExpr(add(mul(add(i, intImm(0)), intImm(1)), mul(var("j"), intImm(0)))), "i");
  // Non-foldable expressions keep their structure.
  EXPECT_EQ(printExpr(add(mul(i, intImm(16)), var("j"))), "(i * 16) + j");
  // Float ops are never folded: x + 0.0 is not x for x = -0.0.
  Expr x = var("x", DType::F32);
  EXPECT_EQ(op(OpKind::Add, {x, floatImm(0)})->kind, ExprKind::Op);
}

TEST(KernelIr, BuilderTypes) {
  Expr x = var("x", DType::F32);
  EXPECT_EQ(lt(var("i"), intImm(4))->type, DType::Bool);
  EXPECT_EQ(op(OpKind::IsNaN, {x})->type, DType::Bool);
  EXPECT_EQ(op(OpKind::Exp, {x})->type, DType::F32);
  EXPECT_EQ(select(lt(var("i"), intImm(4)), x, floatImm(1))->type, DType::F32);
  EXPECT_EQ(cast(x, DType::F16)->type, DType::F16);
  EXPECT_EQ(cast(x, DType::F32), x);
  Expr c = constant(2.9, DType::I32);
  EXPECT_EQ(c->kind, ExprKind::IntImm);
  EXPECT_EQ(c->intValue, 2);
  EXPECT_EQ(constant(3, DType::Bool)->intValue, 1);
  Expr f = constant(0.5, DType::F16);
  EXPECT_EQ(f->kind, ExprKind::FloatImm);
  EXPECT_EQ(f->floatValue, 0.5);
  EXPECT_TRUE(isIntImm(constant(-INFINITY, DType::I32), INT32_MIN)); // saturates
  EXPECT_TRUE(isIntImm(constant(1e30, DType::I64), INT64_MAX));
  EXPECT_TRUE(isIntImm(constant(1e30, DType::U8), 255));
  EXPECT_TRUE(isIntImm(constant(-1, DType::U16), 0));
  EXPECT_EQ(constant(0.1, DType::F16)->floatValue, halfToFloat(floatToHalf(0.1f)));
  EXPECT_EQ(constant(0.1, DType::F32)->floatValue, static_cast<double>(0.1f));
  EXPECT_TRUE(isIntImm(cast(intImm(300), DType::U8), 44));
  EXPECT_TRUE(isIntImm(lt(intImm(2), intImm(3)), 1));
  EXPECT_EQ(select(intImm(1, DType::Bool), x, floatImm(1)), x);
}

TEST(KernelIrDeath, BuilderMisuseAsserts) {
  EXPECT_DEATH(op(OpKind::Add, {var("x", DType::F32), var("i")}), "dtypes differ");
  EXPECT_DEATH(op(OpKind::Exp, {var("i")}), "float type");
  EXPECT_DEATH(op(OpKind::Add, {var("i")}), "takes 2 operands");
  EXPECT_DEATH(op(OpKind::Select, {var("i"), var("i"), var("i")}), "must be bool");
  EXPECT_DEATH(op(OpKind::Conv, {var("i")}), "not an elementwise op");
}

// ---- Printer and signatures -------------------------------------------------------------------

TEST(KernelIr, PrintsKernel) {
  Kernel k = reluKernel();
  k.schedule.steps = {split("i", 8), markStep(ScheduleStep::Vectorize, "i.i")};
  EXPECT_EQ(printKernel(k), "kernel relu_0(in0: f32[1024] operand 0, out0: f32[1024] result 0 "
                            "written) {\n"
                            "  for i in 0..1024 {\n"
                            "    out0[i] = max(in0[i], 0.0f32)\n"
                            "  }\n"
                            "}\n"
                            "schedule: split(i, 8); vectorize(i.i)\n");
  Expected<Stmt> s = applySchedule(k);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(printStmt(*s), "for i.o in 0..128 {\n"
                           "  for i.i in 0..8 vectorized {\n"
                           "    b1[(i.o * 8) + i.i] = max(b0[(i.o * 8) + i.i], 0.0f32)\n"
                           "  }\n"
                           "}\n");
}

TEST(KernelIr, PrintsLocalsIfAndCasts) {
  Kernel k = rowSumKernel(2, 3);
  EXPECT_EQ(printStmt(k.body), "for i in 0..2 {\n"
                               "  var acc: f32 = 0.0f32\n"
                               "  for j in 0..3 {\n"
                               "    acc = acc + b0[(i * 3) + j]\n"
                               "  }\n"
                               "  b1[i] = acc\n"
                               "}\n");
  Stmt s = ifThen(lt(var("i"), intImm(2)), store(0, var("i"), cast(var("i"), DType::F16)),
                  store(0, var("i"), floatImm(-1.5, DType::F16)));
  EXPECT_EQ(printStmt(s, 1), "  if i < 2 {\n"
                             "    b0[i] = cast<f16>(i)\n"
                             "  } else {\n"
                             "    b0[i] = -1.5f16\n"
                             "  }\n");
  EXPECT_EQ(printExpr(intImm(5, DType::I32)), "5i32");
  EXPECT_EQ(printExpr(intImm(1, DType::Bool)), "true");
  EXPECT_EQ(printExpr(floatImm(INFINITY)), "inff32");
  EXPECT_EQ(printExpr(floatImm(0.1)), "0.1f32");
  EXPECT_EQ(printExpr(floatImm(0.1, DType::F64)), "0.1f64");
}

TEST(KernelIr, SignatureIgnoresNames) {
  Kernel a = reluKernel("relu_0"), b = reluKernel("relu_7");
  b.buffers[0].name = "x";
  b.buffers[1].name = "y";
  EXPECT_EQ(a.signature(), b.signature());
  EXPECT_EQ(a.signature().find("relu"), std::string::npos);
  b.schedule.steps = {markStep(ScheduleStep::Vectorize, "i")};
  EXPECT_NE(a.signature(), b.signature());
  EXPECT_NE(b.signature().find("vectorize(i)"), std::string::npos);
  Kernel c = reluKernel();
  c.buffers[0].numElements = c.buffers[1].numElements = 512;
  EXPECT_NE(a.signature(), c.signature());
}

// ---- Evaluator --------------------------------------------------------------------------------

TEST(KernelIr, EvaluatesBroadcastAdd) {
  Kernel k = addBroadcastKernel(3, 4);
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> a = randomFloats(12, 1), b = randomFloats(4, 2), out(12, -99);
  Error e = evaluateKernel(k, {a.data(), b.data(), out.data()});
  ASSERT_FALSE(e) << e.message();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(out[i * 4 + j], a[i * 4 + j] * 2 + b[j]);
}

TEST(KernelIr, EvaluatesReductionWithAccumulator) {
  Kernel k = rowSumKernel(5, 7);
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> a = randomFloats(35, 3), out(5, -99);
  ASSERT_FALSE(evaluateKernel(k, {a.data(), out.data()}));
  for (int i = 0; i < 5; ++i) {
    float s = 0;
    for (int j = 0; j < 7; ++j)
      s += a[i * 7 + j];
    EXPECT_EQ(out[i], s);
  }
}

TEST(KernelIr, EvaluatesIfAndIntegerSemantics) {
  // out[i] = i < 3 ? cast<i32>(x[i]) : x_as_i32 + 2147483647 (wraps)
  Kernel k;
  k.name = "ifk";
  k.buffers = {buf("x", DType::F32, 6, BufferRole::Operand, 0, false),
               buf("y", DType::I32, 6, BufferRole::Result, 0, true)};
  Expr i = var("i");
  Expr xi = cast(load(0, DType::F32, i), DType::I32);
  k.body = forLoop("i", intImm(6),
                   ifThen(lt(i, intImm(3)), store(1, i, xi),
                          store(1, i, op(OpKind::Add, {xi, intImm(2147483647, DType::I32)}))));
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> x = {-2.7f, NAN, 3.9f, 1.0f, -1.0f, 0.5f};
  std::vector<int32_t> y(6, 0);
  ASSERT_FALSE(evaluateKernel(k, {x.data(), y.data()}));
  EXPECT_EQ(y[0], -2);
  EXPECT_EQ(y[1], 0); // NaN to integer is 0, like the interpreter's Cast
  EXPECT_EQ(y[2], 3);
  EXPECT_EQ(y[3], INT32_MIN); // 1 + INT32_MAX wraps
  EXPECT_EQ(y[4], 2147483646);
  EXPECT_EQ(y[5], 2147483647);
}

TEST(KernelIr, EvaluatesHalfAndNaNSemantics) {
  // out[i] = max(a[i], b[i]) * 3 in f16; NaN propagates through max.
  Kernel k;
  k.name = "half";
  k.buffers = {buf("a", DType::F16, 3, BufferRole::Operand, 0, false),
               buf("b", DType::F16, 3, BufferRole::Operand, 1, false),
               buf("o", DType::F16, 3, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop(
      "i", intImm(3),
      store(2, i,
            op(OpKind::Mul, {op(OpKind::Max, {load(0, DType::F16, i), load(1, DType::F16, i)}),
                             floatImm(3, DType::F16)})));
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<uint16_t> a = {floatToHalf(1.5f), floatToHalf(NAN), floatToHalf(-2.0f)};
  std::vector<uint16_t> b = {floatToHalf(0.25f), floatToHalf(1.0f), floatToHalf(-1.0f)};
  std::vector<uint16_t> o(3, 0);
  ASSERT_FALSE(evaluateKernel(k, {a.data(), b.data(), o.data()}));
  EXPECT_EQ(halfToFloat(o[0]), 4.5f);
  EXPECT_TRUE(std::isnan(halfToFloat(o[1])));
  EXPECT_EQ(halfToFloat(o[2]), -3.0f);
}

TEST(KernelIr, CopiesStorageOnlyTypes) {
  // Data movement of f8 elements: loads and stores without arithmetic (reversal).
  Kernel k;
  k.name = "rev";
  k.buffers = {buf("x", DType::F8E4M3FN, 4, BufferRole::Operand, 0, false),
               buf("y", DType::F8E4M3FN, 4, BufferRole::Result, 0, true)};
  Expr i = var("i");
  k.body = forLoop("i", intImm(4), store(1, sub(intImm(3), i), load(0, DType::F8E4M3FN, i)));
  std::vector<uint8_t> x = {0x01, 0x7e, 0x80, 0xff}, y(4, 0);
  Error e = evaluateKernel(k, {x.data(), y.data()});
  ASSERT_FALSE(e) << e.message();
  EXPECT_EQ(y, (std::vector<uint8_t>{0xff, 0x80, 0x7e, 0x01}));
  k.body = forLoop("i", intImm(4),
                   store(1, i, cast(cast(load(0, DType::F8E4M3FN, i), DType::F32),
                                    DType::F8E4M3FN)));
  // Casts convert through the format (StorageCastTest.cpp checks them in depth): the round
  // trip through f32 keeps every f8e4m3fn pattern here (0xff is its negative NaN).
  EXPECT_EQ(verifyError(k), "");
  std::fill(y.begin(), y.end(), 0);
  e = evaluateKernel(k, {x.data(), y.data()});
  ASSERT_FALSE(e) << e.message();
  EXPECT_EQ(y, x);
}

TEST(KernelIr, OutOfBoundsIsAnError) {
  Kernel k = reluKernel();
  k.buffers[0].numElements = 1000; // the loop reads up to 1023
  std::vector<float> in(1000, 1), out(1024, 0);
  Error e = evaluateKernel(k, {in.data(), out.data()});
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("relu_0"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("in0"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("1000"), std::string::npos) << e.message();
  Kernel s = reluKernel();
  s.buffers[1].numElements = 10;
  Error e2 = evaluateKernel(s, {out.data(), in.data()});
  ASSERT_TRUE(e2);
  EXPECT_NE(e2.message().find("out0"), std::string::npos) << e2.message();
  EXPECT_TRUE(evaluateKernel(s, {out.data()})); // wrong buffer count

  // A data-dependent index (a gather) out of bounds.
  Kernel g;
  g.name = "gather_3";
  g.buffers = {buf("data", DType::F32, 4, BufferRole::Operand, 0, false),
               buf("idx", DType::I64, 2, BufferRole::Operand, 1, false),
               buf("res", DType::F32, 2, BufferRole::Result, 0, true)};
  Expr i = var("i");
  g.body = forLoop("i", intImm(2), store(2, i, load(0, DType::F32, load(1, DType::I64, i))));
  std::vector<float> data = {1, 2, 3, 4}, res(2);
  std::vector<int64_t> idx = {3, 0};
  ASSERT_FALSE(evaluateKernel(g, {data.data(), idx.data(), res.data()}));
  EXPECT_EQ(res[0], 4);
  EXPECT_EQ(res[1], 1);
  idx[1] = -1;
  Error e3 = evaluateKernel(g, {data.data(), idx.data(), res.data()});
  ASSERT_TRUE(e3);
  EXPECT_NE(e3.message().find("gather_3"), std::string::npos) << e3.message();
  EXPECT_NE(e3.message().find("index -1"), std::string::npos) << e3.message();
  EXPECT_NE(e3.message().find("'data'"), std::string::npos) << e3.message();

  // Invalid kernels are refused with the verifier's message.
  g.buffers[2].written = false;
  Error e4 = evaluateKernel(g, {data.data(), idx.data(), res.data()});
  ASSERT_TRUE(e4);
  EXPECT_NE(e4.message().find("not marked written"), std::string::npos) << e4.message();
}

// ---- Schedules --------------------------------------------------------------------------------

namespace {

/// Runs `k` with `steps` and compares against the unscheduled kernel on random data.
void expectSameResults(Kernel k, const std::vector<ScheduleStep> &steps, bool exact = true) {
  SCOPED_TRACE(Schedule{steps}.str());
  std::vector<std::vector<float>> ref, got;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    ref.push_back(randomFloats(k.buffers[b].numElements, 100 + b));
    got.push_back(ref.back());
  }
  std::vector<void *> refPtrs, gotPtrs;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    refPtrs.push_back(ref[b].data());
    gotPtrs.push_back(got[b].data());
  }
  Error e = evaluateKernel(k, refPtrs);
  ASSERT_FALSE(e) << e.message();
  k.schedule.steps = steps;
  Error v = verifyKernel(k);
  ASSERT_FALSE(v) << v.message();
  e = evaluateKernel(k, gotPtrs);
  ASSERT_FALSE(e) << e.message();
  for (size_t b = 0; b < k.buffers.size(); ++b)
    for (size_t x = 0; x < ref[b].size(); ++x) {
      if (exact)
        ASSERT_EQ(ref[b][x], got[b][x]) << "buffer " << b << " element " << x;
      else
        ASSERT_NEAR(ref[b][x], got[b][x], 1e-4) << "buffer " << b << " element " << x;
    }
}

} // namespace

TEST(KernelIr, SchedulesNeverChangeResults) {
  Kernel k = addBroadcastKernel(7, 10);
  using S = ScheduleStep;
  expectSameResults(k, {split("j", 5)});                 // divides
  expectSameResults(k, {split("j", 4)});                 // remainder: guarded
  expectSameResults(k, {split("j", 16)});                // factor beyond the extent
  expectSameResults(k, {reorder({"j", "i"})});           // column-major walk
  expectSameResults(k, {markStep(S::Vectorize, "j")});
  expectSameResults(k, {markStep(S::Parallel, "i")});
  expectSameResults(k, {markStep(S::Unroll, "j")});
  expectSameResults(k, {split("i", 3), split("j", 4), reorder({"i.o", "j.o", "i.i"}),
                        markStep(S::Parallel, "i.o"), markStep(S::Vectorize, "j.i")});
  expectSameResults(k, {split("i", 2), split("j", 5), reorder({"i.o", "j.o", "i.i"}),
                        markStep(S::Parallel, "i.o"), markStep(S::Vectorize, "j.i")});
  expectSameResults(k, {split("j", 4), split("j.i", 2), markStep(S::Unroll, "j.i.i")});
  // Reorders across split tails: the guards move inside the innermost reordered loop.
  expectSameResults(k, {split("i", 3), split("j", 4), reorder({"i.o", "j.o", "i.i", "j.i"}),
                        markStep(S::Parallel, "i.o"), markStep(S::Vectorize, "j.i")});
  expectSameResults(k, {split("i", 4), reorder({"j", "i.i", "i.o"})});

  Kernel r = rowSumKernel(6, 9);
  expectSameResults(r, {split("i", 4), markStep(S::Parallel, "i.o")});
  expectSameResults(r, {split("j", 4)});
  expectSameResults(r, {split("j", 3), markStep(S::Vectorize, "j.i")});
}

TEST(KernelIr, SplitRewritesAndGuards) {
  Kernel k = addBroadcastKernel(2, 10);
  k.schedule.steps = {split("j", 4)};
  Expected<Stmt> s = applySchedule(k);
  ASSERT_TRUE(s) << s.error().message();
  std::string text = printStmt(*s);
  // printStmt has no kernel: buffers print by position.
  EXPECT_NE(text.find("b2[(i * 10) + ((j.o * 4) + j.i)]"), std::string::npos) << text;
  EXPECT_NE(text.find("for j.o in 0..3 {"), std::string::npos) << text;
  // The tail's guard becomes the inner loop's extent: 4, except 2 in the last round.
  EXPECT_NE(text.find("for j.i in 0..min(4, 10 - (j.o * 4)) {"), std::string::npos) << text;
  EXPECT_EQ(text.find("if"), std::string::npos) << text;
  // The kernel itself is untouched.
  EXPECT_EQ(printStmt(k.body).find("j.o"), std::string::npos);
  k.schedule.steps = {split("j", 5)};
  s = applySchedule(k);
  ASSERT_TRUE(s);
  EXPECT_EQ(printStmt(*s).find("if"), std::string::npos) << printStmt(*s);
}

TEST(KernelIr, ScheduleErrors) {
  Kernel k = addBroadcastKernel(4, 4);
  auto errorOf = [&](std::vector<ScheduleStep> steps) {
    k.schedule.steps = std::move(steps);
    Expected<Stmt> s = applySchedule(k);
    return s ? std::string() : s.error().message();
  };
  using S = ScheduleStep;
  std::string e = errorOf({split("x", 4)});
  EXPECT_NE(e.find("no loop named 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("add_bcast"), std::string::npos) << e;
  EXPECT_NE(errorOf({split("i", 0)}).find("positive"), std::string::npos);
  EXPECT_NE(errorOf({markStep(S::Vectorize, "q")}).find("no loop"), std::string::npos);
  e = errorOf({markStep(S::Parallel, "i"), markStep(S::Parallel, "j")});
  EXPECT_NE(e.find("parallel"), std::string::npos) << e;
  e = errorOf({markStep(S::Parallel, "j"), markStep(S::Parallel, "i")});
  EXPECT_NE(e.find("parallel"), std::string::npos) << e;
  // The guard of a split sits inside the inner loop, so i > j.o > j.i stays a perfect nest.
  EXPECT_EQ(errorOf({split("j", 3), reorder({"j.o", "i"})}), "");
  e = errorOf({split("j", 3), reorder({"j.i", "i"})});
  EXPECT_EQ(e, "");
  Kernel r = rowSumKernel(3, 3);
  r.schedule.steps = {reorder({"j", "i"})};
  Expected<Stmt> s = applySchedule(r);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("perfectly nested"), std::string::npos)
      << s.error().message();
}

// ---- Verifier ---------------------------------------------------------------------------------

namespace {

ExprNode rawOp(OpKind kind, DType t, std::vector<Expr> args) {
  ExprNode n;
  n.kind = ExprKind::Op;
  n.type = t;
  n.op = kind;
  n.args = std::move(args);
  return n;
}

} // namespace

TEST(KernelIr, VerifierAcceptsGoodKernels) {
  EXPECT_EQ(verifyError(reluKernel()), "");
  EXPECT_EQ(verifyError(addBroadcastKernel(3, 5)), "");
  EXPECT_EQ(verifyError(rowSumKernel(3, 5)), "");
}

TEST(KernelIr, VerifierCatchesEachErrorClass) {
  Expr i = var("i");
  auto expectError = [](const Kernel &k, const std::string &what) {
    std::string e = verifyError(k);
    EXPECT_NE(e.find(what), std::string::npos) << "expected '" << what << "', got '" << e << "'";
    EXPECT_NE(e.find("kernel " + k.name), std::string::npos) << e;
  };
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), store(1, i, load(5, DType::F32, i)));
    expectError(k, "does not exist");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), store(1, i, cast(load(0, DType::I32, i), DType::F32)));
    expectError(k, "load of i32 from 'in0' which holds f32");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), store(1, i, cast(i, DType::F64)));
    expectError(k, "store of f64 to 'out0'");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), store(0, i, floatImm(1)));
    expectError(k, "not marked written");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), store(1, var("j"), floatImm(1)));
    expectError(k, "'j' is not in scope");
  }
  {
    Kernel k = reluKernel(); // a local used after its block ends
    k.body = block({forLoop("i", intImm(4), block({decl("t", DType::F32, floatImm(1))})),
                    store(1, intImm(0), var("t", DType::F32))});
    expectError(k, "'t' is not in scope");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), assign("acc", floatImm(1)));
    expectError(k, "undeclared local 'acc'");
  }
  {
    Kernel k = reluKernel();
    k.body = block({decl("acc", DType::F32, floatImm(0)),
                    forLoop("i", intImm(1024), assign("acc", floatImm(1, DType::F64)))});
    expectError(k, "assignment of f64 to local 'acc' of f32");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(1024), assign("i", intImm(1)));
    expectError(k, "loop variable 'i'");
  }
  {
    Kernel k = reluKernel(); // hand-built op with mixed operand types
    Expr bad = std::make_shared<const ExprNode>(
        rawOp(OpKind::Add, DType::F32, {load(0, DType::F32, i), cast(i, DType::F64)}));
    k.body = forLoop("i", intImm(1024), store(1, i, bad));
    expectError(k, "dtypes differ");
  }
  {
    Kernel k = reluKernel(); // op result typed wrongly
    Expr bad = std::make_shared<const ExprNode>(
        rawOp(OpKind::Less, DType::F32, {load(0, DType::F32, i), floatImm(0)}));
    k.body = forLoop("i", intImm(1024), store(1, i, bad));
    expectError(k, "gives bool but is typed f32");
  }
  {
    Kernel k = reluKernel(); // extent not i64
    Stmt loop = forLoop("i", intImm(1024), store(1, i, floatImm(0)));
    loop->extent = intImm(1024, DType::I32);
    k.body = loop;
    expectError(k, "extent must be i64");
  }
  {
    Kernel k = reluKernel();
    k.body = store(1, intImm(1024), floatImm(0));
    expectError(k, "index 1024 is out of bounds of 'out0'");
    k.body = store(1, intImm(-1), floatImm(0));
    expectError(k, "out of bounds");
  }
  {
    Kernel k = reluKernel();
    k.body = block({forLoop("i", intImm(4), store(1, i, floatImm(0))),
                    forLoop("i", intImm(4), store(1, i, floatImm(1)))});
    expectError(k, "more than one loop");
  }
  {
    Kernel k = reluKernel();
    k.body = forLoop("i", intImm(4),
                     forLoop("j", intImm(4), store(1, var("j"), floatImm(0)), LoopKind::Parallel),
                     LoopKind::Parallel);
    expectError(k, "nested in another parallel loop");
  }
  {
    Kernel k = reluKernel(); // a bad schedule is reported too
    k.schedule.steps = {split("zz", 2)};
    expectError(k, "no loop named 'zz'");
  }
}

// ---- Scalar semantics of ops ----------------------------------------------------------------

namespace {

/// Evaluates `f(x)` for one scalar input of `in` and returns the first element of the output.
template <typename In, typename Out>
Out evalScalar(DType in, DType out, In x, const std::function<Expr(Expr)> &f) {
  Kernel k;
  k.name = "scalar";
  k.buffers = {buf("x", in, 1, BufferRole::Operand, 0, false),
               buf("y", out, 1, BufferRole::Result, 0, true)};
  k.body = store(1, intImm(0), f(load(0, in, intImm(0))));
  Error v = verifyKernel(k);
  EXPECT_FALSE(v) << v.message();
  Out y{};
  Error e = evaluateKernel(k, {&x, &y});
  EXPECT_FALSE(e) << e.message();
  return y;
}

} // namespace

TEST(KernelIr, EvaluatesOpsLikeTheInterpreter) {
  auto f32 = [](OpKind kind, float x, float b = 0) {
    return evalScalar<float, float>(DType::F32, DType::F32, x, [&](Expr e) {
      return opInfo(kind).arity == 1 ? op(kind, {e}) : op(kind, {e, floatImm(b)});
    });
  };
  EXPECT_EQ(f32(OpKind::Exp, 1.0f), std::exp(1.0f));
  EXPECT_EQ(f32(OpKind::Sigmoid, -100.0f), std::exp(-100.0f) / (1.0f + std::exp(-100.0f))); // stable
  EXPECT_EQ(f32(OpKind::Round, 2.5f), 2.0f);
  EXPECT_EQ(f32(OpKind::Sign, -0.5f), -1.0f);
  EXPECT_EQ(f32(OpKind::Mod, -7.5f, 2.0f), 0.5f);
  EXPECT_EQ(f32(OpKind::FMod, -7.5f, 2.0f), -1.5f);
  EXPECT_EQ(f32(OpKind::Pow, 3.0f, 2.0f), 9.0f);
  EXPECT_TRUE(std::isnan(f32(OpKind::Min, NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(f32(OpKind::Max, 1.0f, NAN)));
  EXPECT_EQ(f32(OpKind::Div, 1.0f, 3.0f), 1.0f / 3.0f); // rounded to f32
  EXPECT_EQ((evalScalar<float, bool>(DType::F32, DType::Bool, NAN,
                                     [](Expr e) { return op(OpKind::IsNaN, {e}); })),
            true);
  EXPECT_EQ((evalScalar<uint8_t, uint8_t>(
                DType::U8, DType::U8, 1,
                [](Expr e) { return op(OpKind::ShiftLeft, {e, intImm(9, DType::U8)}); })),
            0);
  EXPECT_EQ((evalScalar<int8_t, int8_t>(DType::I8, DType::I8, -128,
                                        [](Expr e) { return op(OpKind::Neg, {e}); })),
            -128);
  EXPECT_EQ((evalScalar<int8_t, int8_t>(DType::I8, DType::I8, 5,
                                        [](Expr e) { return op(OpKind::BitNot, {e}); })),
            -6);
  EXPECT_EQ((evalScalar<int32_t, int32_t>(
                DType::I32, DType::I32, -7,
                [](Expr e) { return op(OpKind::Div, {e, intImm(0, DType::I32)}); })),
            0);
  EXPECT_EQ((evalScalar<int32_t, int32_t>(
                DType::I32, DType::I32, -7,
                [](Expr e) { return op(OpKind::Mod, {e, intImm(3, DType::I32)}); })),
            2);
  EXPECT_EQ((evalScalar<float, uint8_t>(DType::F32, DType::U8, 300.7f,
                                        [](Expr e) { return cast(e, DType::U8); })),
            44); // truncates to 300, wraps
  EXPECT_EQ((evalScalar<int64_t, uint16_t>(DType::I64, DType::BF16, 257,
                                           [](Expr e) { return cast(e, DType::BF16); })),
            floatToBf16(257.0f));
  EXPECT_EQ((evalScalar<bool, float>(
                DType::Bool, DType::F32, true,
                [](Expr e) { return select(e, floatImm(2), floatImm(3)); })),
            2.0f);
}

namespace nnc::kir {
namespace {

/// Calls `fn` on every expression node under `s` (shared nodes once per path).
void walkExprs(const Stmt &s, const std::function<void(const Expr &)> &fn) {
  if (!s)
    return;
  std::function<void(const Expr &)> rec = [&](const Expr &e) {
    if (!e)
      return;
    fn(e);
    for (const Expr &a : e->args)
      rec(a);
  };
  for (const Expr &e : {s->extent, s->index, s->value})
    rec(e);
  for (const Expr &e : s->args)
    rec(e);
  for (const Stmt &c : s->body)
    walkExprs(c, fn);
}

/// A kernel storing op(a[i], b[i]...) over n elements of `t` into a buffer of `out`.
Kernel opKernel(OpKind kind, DType t, DType out, int64_t n) {
  Kernel k;
  k.name = "op";
  k.buffers = {buf("a", t, n, BufferRole::Operand, 0, false),
               buf("b", t, n, BufferRole::Operand, 1, false),
               buf("y", out, n, BufferRole::Result, 0, true)};
  std::vector<Expr> args = {load(0, t, var("i"))};
  if (opInfo(kind).arity == 2)
    args.push_back(load(1, t, var("i")));
  k.body = forLoop("i", intImm(n), store(2, var("i"), op(kind, args)), LoopKind::Vectorized);
  return k;
}

} // namespace

TEST(KernelExpand, LeavesOnlyPrimitivesAndVerifies) {
  const OpKind composites[] = {OpKind::Sigmoid,    OpKind::Erf,   OpKind::Exp,   OpKind::Tanh,
                               OpKind::Pow,        OpKind::Mod,   OpKind::FMod,  OpKind::Sign,
                               OpKind::Reciprocal, OpKind::IsNaN, OpKind::IsInf, OpKind::Round,
                               OpKind::Div,        OpKind::Min,   OpKind::Max,   OpKind::ShiftLeft,
                               OpKind::ShiftRight};
  const DType types[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                         DType::I32, DType::I64, DType::U8,  DType::U64};
  int expanded = 0;
  for (OpKind kind : composites)
    for (DType t : types) {
      const OpInfo &info = opInfo(kind);
      if (!typeClassAccepts(info.operandTypes, t))
        continue;
      DType out = info.resultClass == ResultClass::BoolResult ? DType::Bool : t;
      Kernel k = opKernel(kind, t, out, 16);
      ASSERT_FALSE(verifyKernel(k));
      Kernel e = k;
      e.body = expandComposites(k.body);
      SCOPED_TRACE(printStmt(e.body));
      walkExprs(e.body, [&](const Expr &x) {
        EXPECT_FALSE(isComposite(*x)) << printExpr(x);
      });
      Error v = verifyKernel(e);
      EXPECT_FALSE(v) << v.message();
      ++expanded;
    }
  EXPECT_GT(expanded, 60);
}

TEST(KernelExpand, BindsSharedValuesSoNestingStaysLinear) {
  // erf(sigmoid(...(x))) nested 10 deep: each expansion uses its operand several times, so
  // without locals the printed tree would double per level.
  auto nested = [](int depth) {
    Kernel k = opKernel(OpKind::Erf, DType::F32, DType::F32, 4);
    Expr x = load(0, DType::F32, var("i"));
    for (int d = 0; d < depth; ++d)
      x = op(d % 2 ? OpKind::Erf : OpKind::Sigmoid, {x});
    k.body = forLoop("i", intImm(4), store(2, var("i"), x));
    return printStmt(expandComposites(k.body)).size();
  };
  size_t one = nested(2), ten = nested(20);
  EXPECT_LT(ten, 12 * one) << one << " characters for 2 levels, " << ten << " for 20";
}

TEST(KernelExpand, FoldsACompareThatOperandRangesDecide) {
  // A quantize's guard |q| < 2^20 on a sum of dequantized u8 values is always true there and
  // goes; on an f32 operand (any value, NaN too) it stays.
  auto guarded = [](DType t) {
    Kernel k = opKernel(OpKind::Add, t, DType::F32, 16);
    Expr a = cast(load(0, t, var("i")), DType::F32), b = cast(load(1, t, var("i")), DType::F32);
    Expr sum = op(OpKind::Add, {op(OpKind::Mul, {a, constant(0.05, DType::F32)}),
                                op(OpKind::Mul, {b, constant(0.1, DType::F32)})});
    Expr q = op(OpKind::Mul, {sum, constant(20.0, DType::F32)});
    Expr small = lt(op(OpKind::Abs, {q}), constant(0x1p20, DType::F32));
    Expr far = lt(constant(0x1p20, DType::F32), op(OpKind::Abs, {q}));
    Expr v = op(OpKind::Add, {select(small, q, constant(7.0, DType::F32)),
                              select(far, constant(9.0, DType::F32), q)});
    k.body = forLoop("i", intImm(16), store(2, var("i"), v));
    Stmt e = expandComposites(k.body);
    int selects = 0;
    walkExprs(
        e, [&](const Expr &x) { selects += x->kind == ExprKind::Op && x->op == OpKind::Select; });
    return selects;
  };
  EXPECT_EQ(guarded(DType::U8), 0);
  EXPECT_EQ(guarded(DType::F32), 2);
}

TEST(KernelExpand, EvaluatorAgreesWithTheScalarFormulas) {
  // The evaluator runs the expanded form; the interpreter's formulas (ScalarOps.h) are the
  // reference, for operands in buffers (not constants: the guards stay).
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> as = {7, -7, 0, 1, -1, 3, kMin, std::numeric_limits<int64_t>::max()};
  std::vector<int64_t> bs = {2, -2, 0, 1, -1, 3, 64, -3, kMin};
  for (OpKind kind : {OpKind::Mod, OpKind::FMod, OpKind::Pow}) {
    std::vector<int64_t> a, b, want;
    for (int64_t x : as)
      for (int64_t y : bs) {
        a.push_back(x);
        b.push_back(y);
        want.push_back(kind == OpKind::Mod    ? scalar::mod(x, y)
                       : kind == OpKind::FMod ? scalar::fmod(x, y)
                                              : scalar::pow(x, y));
      }
    Kernel k = opKernel(kind, DType::I64, DType::I64, static_cast<int64_t>(a.size()));
    std::vector<int64_t> got(a.size());
    Error e = evaluateKernel(k, {a.data(), b.data(), got.data()});
    ASSERT_FALSE(e) << e.message();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << opInfo(kind).name << "(" << a[i] << ", " << b[i] << ")";
  }
  std::vector<float> fv = {0.0f,  -0.0f,      0.5f,  -0.5f,     1.5f, 2.5f,
                           -2.5f, 8388607.5f, 1e30f, -INFINITY, NAN,  1e-40f};
  for (OpKind kind : {OpKind::Round, OpKind::Sign, OpKind::Sigmoid, OpKind::Erf}) {
    Kernel k = opKernel(kind, DType::F32, DType::F32, static_cast<int64_t>(fv.size()));
    std::vector<float> got(fv.size());
    Error e = evaluateKernel(k, {fv.data(), fv.data(), got.data()});
    ASSERT_FALSE(e) << e.message();
    for (size_t i = 0; i < fv.size(); ++i) {
      float x = fv[i];
      float want = kind == OpKind::Round     ? std::nearbyint(x)
                   : kind == OpKind::Sign    ? scalar::sign(x)
                   : kind == OpKind::Sigmoid ? scalar::sigmoid(x)
                                             : scalar::erf(x);
      uint32_t gb, wb;
      std::memcpy(&gb, &got[i], 4);
      std::memcpy(&wb, &want, 4);
      EXPECT_TRUE(gb == wb || (std::isnan(got[i]) && std::isnan(want)))
          << opInfo(kind).name << "(" << x << ") = " << got[i] << ", want " << want;
    }
  }
}

} // namespace nnc::kir

// ---- Work-group constructs --------------------------------------------------------------------

namespace {

/// out[row] = sum of a[row, :] by a work-group of `group` work-items per row: strided partial
/// sums, then a tree in local memory with a barrier per level.
Kernel workGroupRowSum(int64_t rows, int64_t cols, int64_t group) {
  Kernel k;
  k.name = "wg_row_sum";
  k.buffers = {buf("a", DType::F32, rows * cols, BufferRole::Operand, 0, false),
               buf("out", DType::F32, rows, BufferRole::Result, 0, true)};
  k.locals = {{"partial", DType::F32, group}};
  int s = kLocalBufferBase;
  Expr row = var("row"), t = var("t"), acc = var("acc", DType::F32);
  Expr j = add(mul(var("i"), intImm(group)), t);
  std::vector<Stmt> body = {
      decl("acc", DType::F32, floatImm(0)),
      forLoop("i", intImm((cols + group - 1) / group),
              ifThen(lt(j, intImm(cols)),
                     assign("acc", op(OpKind::Add, {acc, load(0, DType::F32,
                                                              add(mul(row, intImm(cols)), j))})))),
      store(s, t, acc), barrier()};
  for (int64_t h = group / 2; h >= 1; h /= 2) {
    body.push_back(ifThen(
        lt(t, intImm(h)),
        store(s, t,
              op(OpKind::Add, {load(s, DType::F32, t), load(s, DType::F32, add(t, intImm(h)))}))));
    body.push_back(barrier());
  }
  body.push_back(ifThen(lt(t, intImm(1)), store(1, row, load(s, DType::F32, intImm(0)))));
  k.body =
      forLoop("row", intImm(rows), forLoop("t", intImm(group), block(body), LoopKind::GpuThread),
              LoopKind::GpuBlock);
  return k;
}

} // namespace

TEST(KernelIr, EvaluatesWorkGroupTreeWithBarriers) {
  // Each level reads what other work-items stored before the barrier: run item by item
  // without phases, the tree would read partial sums not yet written.
  const int64_t rows = 5, cols = 37, group = 8;
  Kernel k = workGroupRowSum(rows, cols, group);
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> a(rows * cols), out(rows, -1);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  ASSERT_FALSE(evaluateKernel(k, {a.data(), out.data()}));
  for (int64_t r = 0; r < rows; ++r) {
    float want = 0;
    for (int64_t c = 0; c < cols; ++c)
      want += a[r * cols + c];
    EXPECT_EQ(out[r], want) << "row " << r;
  }
  std::string text = printKernel(k);
  EXPECT_NE(text.find("local partial: f32[8]"), std::string::npos) << text;
  EXPECT_NE(text.find("barrier"), std::string::npos) << text;
}

TEST(KernelIr, EvaluatesVectorLoadsAndStores) {
  Kernel k;
  k.name = "vec_copy";
  k.buffers = {buf("a", DType::F32, 16, BufferRole::Operand, 0, false),
               buf("out", DType::F32, 16, BufferRole::Result, 0, true)};
  Expr i = mul(var("i"), intImm(4));
  std::vector<std::string> lanes = {"x0", "x1", "x2", "x3"};
  std::vector<Expr> values;
  for (const std::string &l : lanes)
    values.push_back(op(OpKind::Mul, {var(l, DType::F32), floatImm(2)}));
  k.body =
      forLoop("i", intImm(4), block({vecLoad(lanes, DType::F32, 0, i), vecStore(1, i, values)}));
  ASSERT_FALSE(verifyKernel(k)) << verifyKernel(k).message();
  std::vector<float> a = randomFloats(16, 3), out(16);
  ASSERT_FALSE(evaluateKernel(k, {a.data(), out.data()}));
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(out[j], a[j] * 2);
  // The last vector would reach element 16.
  k.body = vecLoad(lanes, DType::F32, 0, intImm(13));
  EXPECT_NE(verifyError(k).find("out of bounds"), std::string::npos) << verifyError(k);
  k.body = vecLoad({"x0", "x1", "x2"}, DType::F32, 0, intImm(0));
  EXPECT_NE(verifyError(k).find("3 lanes"), std::string::npos) << verifyError(k);
}

TEST(KernelIr, VerifierChecksWorkGroupRules) {
  Kernel good = workGroupRowSum(2, 9, 4);
  ASSERT_EQ(verifyError(good), "");
  // A barrier under an if that depends on the work-item.
  Kernel k = good;
  k.body = forLoop(
      "row", intImm(2),
      forLoop("t", intImm(4), ifThen(lt(var("t"), intImm(2)), barrier()), LoopKind::GpuThread),
      LoopKind::GpuBlock);
  EXPECT_NE(verifyError(k).find("barrier under control flow"), std::string::npos) << verifyError(k);
  // A barrier, and a local buffer, outside the work-items.
  k.body = forLoop("row", intImm(2), barrier(), LoopKind::GpuBlock);
  EXPECT_NE(verifyError(k).find("barrier outside"), std::string::npos) << verifyError(k);
  k.body = forLoop("row", intImm(2), store(kLocalBufferBase, intImm(0), floatImm(1)),
                   LoopKind::GpuBlock);
  EXPECT_NE(verifyError(k).find("outside the gpu_thread loops"), std::string::npos)
      << verifyError(k);
  // A local buffer that does not exist.
  k.body = forLoop("t", intImm(4), store(kLocalBufferBase + 1, var("t"), floatImm(1)),
                   LoopKind::GpuThread);
  EXPECT_NE(verifyError(k).find("does not exist"), std::string::npos) << verifyError(k);
}

// Lowering of every elementwise op and cast, checked against the interpreter with the kernel
// evaluator on random inputs (odd sizes, broadcasting, several dtypes).
#include "LowerTestUtil.h"

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32,
                         DType::I64, DType::U8,  DType::I8,   DType::U32, DType::Bool};

/// Operand shape sets per arity: same shapes, broadcasting both ways, scalars, odd sizes.
std::vector<std::vector<Extents>> shapeSets(int arity) {
  if (arity == 1)
    return {{{7}}, {{3, 5}}, {{}}, {{2, 1, 3, 5}}, {{0, 3}}};
  if (arity == 2)
    return {{{3, 5}, {3, 5}},       {{2, 3, 4}, {3, 1}},       {{1}, {5, 1, 3}},
            {{}, {4, 3}},           {{4, 1, 3, 2}, {1, 5, 1, 2}}, {{17}, {17}},
            {{2, 1, 3}, {1, 1, 1}}, {{0, 3}, {1, 3}}};
  return {{{3, 5}, {3, 5}, {3, 5}}, {{2, 3, 1}, {3, 4}, {1}}, {{}, {2, 3}, {3}}};
}

/// Random operand values suited to the op (positive values where the op needs them).
Tensor operandFor(OpKind op, DType t, const Extents &e, std::mt19937 &rng) {
  if (op == OpKind::ShiftLeft || op == OpKind::ShiftRight)
    return randomTensor(t, e, rng, 0, 12);
  if (op == OpKind::Pow && !isFloat(t))
    return randomTensor(t, e, rng, -3, 5);
  if (op == OpKind::Pow)
    return randomTensor(t, e, rng, 0.1, 3);
  if (isFloat(t))
    return randomTensor(t, e, rng, -3, 3);
  return randomTensor(t, e, rng, -20, 40);
}

void checkElementwise(OpKind op, DType t, const std::vector<Extents> &shapes, std::mt19937 &rng) {
  Graph g;
  std::vector<Value *> operands;
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < shapes.size(); ++k) {
    DType dt = op == OpKind::Select && k == 0 ? DType::Bool : t;
    operands.push_back(
        g.addInput("x" + std::to_string(k), TensorType(dt, shapeFromExtents(shapes[k]))));
    inputs.push_back(operandFor(op, dt, shapes[k], rng));
  }
  Expected<Node *> n = g.createInferred(op, operands, {}, "n");
  ASSERT_TRUE(n) << n.error().message();
  std::string what = std::string(opInfo(op).name) + " " + std::string(dtypeName(t));
  for (const Extents &e : shapes)
    what += " " + extentsStr(e);
  checkNode(**n, inputs, what);
}

} // namespace

TEST(LowerElementwise, EveryOpEveryDType) {
  std::mt19937 rng(42);
  int checked = 0;
  for (const OpInfo &info : allOps()) {
    if (!info.elementwise)
      continue;
    for (DType t : kDTypes) {
      TypeClass tc = info.operandTypes;
      if (!typeClassAccepts(tc, t))
        continue;
      for (const std::vector<Extents> &shapes : shapeSets(info.arity)) {
        checkElementwise(info.kind, t, shapes, rng);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(LowerElementwise, BroadcastCollapsesDims) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3, 4, 5}));
  Value *y = g.addInput("y", TensorType(DType::F32, {1, 3, 1, 1}));
  Expected<Node *> n = g.createInferred(OpKind::Add, {x, y});
  ASSERT_TRUE(n);
  Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "add", testenv::testLowerOptions());
  ASSERT_TRUE(ks) << ks.error().message();
  ASSERT_EQ(ks->size(), 1u);
  std::string text = kir::printKernel((*ks)[0]);
  // [2,3,4,5] + [1,3,1,1] runs as a [2,3,20] nest.
  EXPECT_NE(text.find("20"), std::string::npos) << text;
  EXPECT_EQ((*ks)[0].buffers.size(), 3u);
  EXPECT_EQ((*ks)[0].buffers[2].role, kir::BufferRole::Result);
  // Too small to share out on the CPU (no parallel loop): the nest is declared independent
  // (an OpenCL device's grid) and its inner loop vectorized.
  ASSERT_EQ((*ks)[0].schedule.steps.size(), 2u);
  EXPECT_EQ((*ks)[0].schedule.steps[0].kind, kir::ScheduleStep::GpuGrid);
  EXPECT_EQ((*ks)[0].schedule.steps[0].loops.size(), 3u);
  EXPECT_EQ((*ks)[0].schedule.steps[1].kind, kir::ScheduleStep::Vectorize);
  EXPECT_EQ((*ks)[0].schedule.steps[1].loop, (*ks)[0].schedule.steps[0].loops.back());
}

TEST(LowerElementwise, LargeFlatIsScheduled) {
  std::mt19937 rng(7);
  Graph g;
  Extents e{300, 257};
  Value *x = g.addInput("x", TensorType(DType::F32, shapeFromExtents(e)));
  Value *y = g.addInput("y", TensorType(DType::F32, shapeFromExtents(e)));
  Expected<Node *> n = g.createInferred(OpKind::Mul, {x, y});
  ASSERT_TRUE(n);
  Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "mul", testenv::testLowerOptions());
  ASSERT_TRUE(ks);
  // 77,100 elements (not a multiple of the strip: the last strip is shorter).
  EXPECT_EQ((*ks)[0].schedule.str(), "gpu_grid(i0); split(i0, 1024); vectorize(i0.i); parallel(i0.o)");
  checkNode(**n, {randomTensor(DType::F32, e, rng), randomTensor(DType::F32, e, rng)}, "mul");
}

TEST(LowerElementwise, LargeBroadcastIsScheduled) {
  std::mt19937 rng(8);
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {64, 33, 37}));
  Value *y = g.addInput("y", TensorType(DType::F32, {33, 1}));
  Expected<Node *> n = g.createInferred(OpKind::Sub, {x, y});
  ASSERT_TRUE(n);
  checkNode(**n,
            {randomTensor(DType::F32, {64, 33, 37}, rng), randomTensor(DType::F32, {33, 1}, rng)},
            "sub");
}

TEST(LowerElementwise, Cast) {
  std::mt19937 rng(3);
  const DType types[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                         DType::U8,  DType::I16, DType::I32, DType::I64,  DType::U64,
                         DType::Bool};
  for (DType from : types)
    for (DType to : types) {
      Graph g;
      Value *x = g.addInput("x", TensorType(from, {3, 7}));
      Expected<Node *> n = g.createInferred(OpKind::Cast, {x}, {{"to", to}});
      ASSERT_TRUE(n) << n.error().message();
      checkNode(**n, {randomTensor(from, {3, 7}, rng, -100, 100)},
                std::string("cast ") + std::string(dtypeName(from)) + " -> " +
                    std::string(dtypeName(to)));
    }
}

TEST(LowerElementwise, CastSpecialFloats) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {6}));
  Expected<Node *> n = g.createInferred(OpKind::Cast, {x}, {{"to", DType::F16}});
  ASSERT_TRUE(n);
  float inf = std::numeric_limits<float>::infinity();
  checkNode(**n,
            {Tensor::fromVector<float>(DType::F32, {6},
                                       {std::nanf(""), inf, -inf, 1e6f, -0.0f, 65504.f})},
            "cast f32 -> f16 specials");
}

// Casts to and from the storage-only dtypes: StorageCastTest.cpp.

// det and bitcast: the interpreter against known answers, their lowerings against the
// interpreter with the kernel evaluator (unscheduled and scheduled), and their shape rules'
// errors.
#include "LowerTestUtil.h"

#include <fmt/format.h>

#include "nnc/codegen/Lowering.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

/// One node of `kind` on a graph input holding `x`; its interpreter result, after checking
/// that its kernels compute the same (exactly: both do the same operations in one order).
Tensor checkLowered(OpKind kind, const Tensor &x, AttrMap attrs, const std::string &what) {
  Graph g;
  Value *in = g.addInput("x", x.type());
  Expected<Node *> n = g.createInferred(kind, {in}, std::move(attrs), "n");
  EXPECT_TRUE(n) << what << ": " << (n ? "" : n.error().message());
  if (!n)
    return Tensor();
  g.setOutputs((*n)->results());
  Expected<std::vector<Tensor>> want = evaluateNode(**n, {x});
  EXPECT_TRUE(want) << what << ": interpreter: " << (want ? "" : want.error().message());
  if (!want)
    return Tensor();
  for (bool scheduled : {false, true}) {
    Expected<std::vector<Tensor>> got = runLowered(**n, {x}, scheduled);
    EXPECT_TRUE(got) << what << ": " << (got ? "" : got.error().message());
    if (!got)
      continue;
    const Tensor &a = (*got)[0], &b = (*want)[0];
    EXPECT_EQ(a.dtype(), b.dtype()) << what;
    EXPECT_EQ(a.byteSize(), b.byteSize()) << what;
    if (a.byteSize() == b.byteSize()) {
      EXPECT_EQ(std::memcmp(a.rawData(), b.rawData(), a.byteSize()), 0)
          << what << (scheduled ? " (scheduled)" : "");
    }
  }
  return (*want)[0];
}

Tensor f64(const Extents &e, const std::vector<double> &v) {
  return Tensor::fromVector<double>(DType::F64, e, v);
}

} // namespace

TEST(Det, KnownDeterminants) {
  // A 2x2, a 3x3 that needs a row swap (zero first pivot), a singular one (its second pivot
  // is 0), a permutation (det -1) and the identity.
  Tensor x = f64({5, 3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4, //
                             0, 1, 2, 3, 4, 5, 6, 7, 9, //
                             1, 2, 3, 2, 4, 6, 1, 0, 1, //
                             0, 1, 0, 1, 0, 0, 0, 0, 1, //
                             1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor d = checkLowered(OpKind::Det, x, {}, "det 5x3x3");
  ASSERT_EQ(d.numElements(), 5);
  const double want[] = {24, -3, 0, -1, 1};
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(d.data<double>()[i], want[i], 1e-12) << "matrix " << i;
  Tensor two = checkLowered(OpKind::Det, f64({2, 2}, {0, 1, 2, 3}), {}, "det 2x2");
  ASSERT_EQ(two.rank(), 0);
  EXPECT_EQ(two.data<double>()[0], -2);
  // A 0x0 matrix has determinant 1; an empty batch gives an empty result.
  EXPECT_EQ(checkLowered(OpKind::Det, f64({3, 0, 0}, {}), {}, "det 0x0").data<double>()[0], 1);
  EXPECT_EQ(checkLowered(OpKind::Det, f64({0, 2, 2}, {}), {}, "det empty").numElements(), 0);
}

TEST(Det, LoweringMatchesTheInterpreter) {
  std::mt19937 rng(22);
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const Extents &e : std::vector<Extents>{{1, 1}, {4, 4}, {3, 2, 5, 5}, {7, 6, 6}})
      checkLowered(OpKind::Det, randomTensor(t, e, rng), {},
                   fmt::format("det {} {}", dtypeName(t), extentsStr(e)));
}

TEST(Det, ShapeRuleNamesTheNode) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3, 4}));
  Expected<Node *> n = g.createInferred(OpKind::Det, {x}, {}, "d");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("'d'"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("square"), std::string::npos) << n.error().message();
  Value *i = g.addInput("i", TensorType(DType::I32, {2, 2}));
  EXPECT_FALSE(g.createInferred(OpKind::Det, {i}, {}, "di"));
}

TEST(BitCast, ReinterpretsTheBits) {
  Tensor x = Tensor::fromVector<float>(DType::F32, {3}, {1.0f, -2.5f, 3.75f});
  Tensor y = checkLowered(OpKind::BitCast, x, {{"to", DType::I32}}, "f32 -> i32");
  ASSERT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.data<int32_t>()[0], 1065353216);
  EXPECT_EQ(y.data<int32_t>()[1], -1071644672);
  Tensor b = Tensor::fromVector<uint8_t>(DType::U8, {4}, {0, 1, 2, 255});
  Tensor bools = checkLowered(OpKind::BitCast, b, {{"to", DType::Bool}}, "u8 -> bool");
  const uint8_t *p = static_cast<const uint8_t *>(bools.rawData());
  EXPECT_EQ(std::vector<int>(p, p + 4), (std::vector<int>{0, 1, 1, 1}));
}

TEST(BitCast, LoweringMatchesTheInterpreter) {
  std::mt19937 rng(26);
  const std::pair<DType, DType> pairs[] = {
      {DType::F32, DType::I32},     {DType::I32, DType::F32},   {DType::U32, DType::F32},
      {DType::F64, DType::I64},     {DType::U64, DType::F64},   {DType::F16, DType::I16},
      {DType::BF16, DType::U16},    {DType::I16, DType::F16},   {DType::F16, DType::BF16},
      {DType::I8, DType::U8},       {DType::Bool, DType::U8},   {DType::U8, DType::Bool},
      {DType::F8E4M3FN, DType::I8}, {DType::U8, DType::F8E5M2}, {DType::I4, DType::U4},
      {DType::U4, DType::F4E2M1},   {DType::I2, DType::U2},     {DType::F32, DType::F32}};
  for (const auto &[from, to] : pairs)
    for (const Extents &e : std::vector<Extents>{{}, {7}, {2, 3, 5}})
      checkLowered(
          OpKind::BitCast, randomTensor(from, e, rng, -1e3, 1e3), {{"to", to}},
          fmt::format("bitcast {} -> {} {}", dtypeName(from), dtypeName(to), extentsStr(e)));
}

TEST(BitCast, TheBitWidthsMustAgree) {
  Graph g;
  int k = 0;
  for (auto [from, to] : {std::pair{DType::F32, DType::I64}, std::pair{DType::I4, DType::I8},
                          std::pair{DType::Bool, DType::I2}}) {
    Value *x = g.addInput("x" + std::to_string(k++), TensorType(from, {2}));
    Expected<Node *> n = g.createInferred(OpKind::BitCast, {x}, {{"to", to}}, "bc");
    ASSERT_FALSE(n) << dtypeName(from) << " -> " << dtypeName(to);
    EXPECT_NE(n.error().message().find("bit widths differ"), std::string::npos)
        << n.error().message();
  }
}

// matmul_integer (its CPU template of integer GEMM tiles, and the generic nest) against the
// interpreter, over operand signedness, zero points, odd sizes, batches and a k whose i32 sums
// wrap; the tiles storing a fused requantizing group's result; its shape rule's errors.
#include <fmt/format.h>

#include "IntGroupTestUtil.h"
#include "nnc/ir/GemmPacking.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

/// matmul_integer of `a` and `b` with zero points `za`, `zb` (null: absent) as constants.
/// `packedNr` > 0: b is a constant weight, packed as pack-gemm-weights does (packed_n).
void checkMatMulInteger(const Tensor &a, const Tensor &b, const Tensor &za, const Tensor &zb,
                        const std::string &what, int64_t packedNr = 0) {
  Graph g;
  std::vector<Value *> ops = {g.addInput("a", a.type()),
                              packedNr > 0 ? constantValue(g, packGemmPanelsK4(b, packedNr))
                                           : g.addInput("b", b.type())};
  AttrMap attrs;
  if (packedNr > 0)
    attrs["packed_n"] = Attribute(b.extents().back());
  if (!za.isNull() || !zb.isNull())
    ops.push_back(za.isNull() ? nullptr : constantValue(g, za));
  if (!zb.isNull())
    ops.push_back(constantValue(g, zb));
  Expected<Node *> n = g.createInferred(OpKind::MatMulInteger, ops, attrs, "n");
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  g.setOutputs((*n)->results());
  if (packedNr > 0)
    checkNode(**n, {a}, what);
  else
    checkNode(**n, {a, b}, what);
}

/// A u8 or i8 tensor over the dtype's whole range.
Tensor bytes(DType t, const Extents &e, std::mt19937 &rng) {
  Tensor x = Tensor::zeros(t, e);
  for (int64_t i = 0; i < x.numElements(); ++i)
    static_cast<uint8_t *>(x.rawData())[i] = static_cast<uint8_t>(rng());
  return x;
}

Tensor scalarOf(DType t, int v) {
  Tensor z = Tensor::zeros(t, {});
  if (t == DType::U8)
    z.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  else
    z.data<int8_t>()[0] = static_cast<int8_t>(v);
  return z;
}

} // namespace

TEST(IntGemm, MatchesInterpreter) {
  std::mt19937 rng(47);
  struct Case {
    Extents a, b;
  } cases[] = {{{7, 5}, {5, 13}},       {{1, 1}, {1, 1}},        {{5, 9}, {9, 3}},
               {{2, 3, 5, 6}, {6, 4}},  {{2, 1, 4, 5}, {3, 5, 7}}, {{9}, {9, 6}},
               {{6, 11}, {11}},         {{17, 33}, {33, 70}},      {{3, 0}, {0, 4}}};
  for (DType ta : {DType::U8, DType::I8})
    for (DType tb : {DType::I8, DType::U8})
      for (const Case &c : cases) {
        Tensor a = bytes(ta, c.a, rng), b = bytes(tb, c.b, rng);
        int64_t m = c.a.size() >= 2 ? c.a[c.a.size() - 2] : 1, n = c.b.size() >= 2 ? c.b.back() : 1;
        std::string base = fmt::format("{}{} x {}{}", dtypeName(ta), extentsStr(c.a),
                                       dtypeName(tb), extentsStr(c.b));
        checkMatMulInteger(a, b, Tensor(), Tensor(), base);
        checkMatMulInteger(a, b, scalarOf(ta, ta == DType::U8 ? 131 : -7),
                           scalarOf(tb, tb == DType::U8 ? 200 : 5), base + " scalar zero points");
        checkMatMulInteger(a, b, Tensor(), bytes(tb, {n}, rng),
                           base + " per-column b zero point");
        checkMatMulInteger(a, b, bytes(ta, {m}, rng), Tensor(),
                           base + " per-row a zero point");
      }
}

TEST(IntGemm, PackedWeightMatchesInterpreter) {
  // A constant i8 weight in the integer tile's panels (pack-gemm-weights' form), of widths
  // that do and do not divide N, with a batch of weights, and zero points.
  std::mt19937 rng(48);
  struct Case {
    Extents a, b;
    int64_t nr;
  } cases[] = {{{7, 5}, {5, 13}, 8}, {{17, 33}, {33, 70}, 32}, {{2, 3, 9}, {2, 9, 16}, 16},
               {{3, 4, 6}, {6, 5}, 16}};
  for (DType ta : {DType::U8, DType::I8})
    for (const Case &c : cases) {
      Tensor a = bytes(ta, c.a, rng), b = bytes(DType::I8, c.b, rng);
      std::string base =
          fmt::format("{}{} x packed i8{} nr {}", dtypeName(ta), extentsStr(c.a),
                      extentsStr(c.b), c.nr);
      checkMatMulInteger(a, b, Tensor(), Tensor(), base, c.nr);
      checkMatMulInteger(a, b, scalarOf(ta, 9), bytes(DType::I8, {c.b.back()}, rng),
                         base + " zero points", c.nr);
    }
}

TEST(IntGemm, LongSumsWrapLikeTheInterpreter) {
  // 255 * -128 over k = 70001 is below INT32_MIN: the i32 sum wraps, on every path alike.
  int64_t k = 70001;
  Tensor a = Tensor::zeros(DType::U8, {3, k}), b = Tensor::zeros(DType::I8, {k, 2});
  for (int64_t i = 0; i < a.numElements(); ++i)
    a.data<uint8_t>()[i] = 255;
  for (int64_t i = 0; i < b.numElements(); ++i)
    b.data<int8_t>()[i] = static_cast<int8_t>(i % 2 ? -128 : 127);
  checkMatMulInteger(a, b, Tensor(), Tensor(), "k 70001");
  checkMatMulInteger(a, b, scalarOf(DType::U8, 3), scalarOf(DType::I8, -1), "k 70001 zero points");
}

TEST(IntGemm, BadZeroPointIsAnError) {
  Graph g;
  Value *a = g.addInput("a", TensorType(DType::U8, {Dim(4), Dim(5)}));
  Value *b = g.addInput("b", TensorType(DType::I8, {Dim(5), Dim(3)}));
  Value *za = constantValue(g, Tensor::zeros(DType::U8, {3}));
  Expected<Node *> n = g.createInferred(OpKind::MatMulInteger, {a, b, za}, {}, "n");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("one value per row of A"), std::string::npos)
      << n.error().message();
  Value *zi = constantValue(g, Tensor::zeros(DType::I8, {}));
  n = g.createInferred(OpKind::MatMulInteger, {a, b, zi}, {}, "n");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("dtype i8, expected u8"), std::string::npos)
      << n.error().message();
}


TEST(IntGemm, RequantizedMatMulIsOneKernel) {
  // matmul_integer by a constant weight (an i8 one packed at compile time, a u8 one at run
  // time), then cast to f32, a per-column scale, a bias and quantize to u8, or the f32 values
  // themselves: one fusion group whose tiles finish each tile of the result itself (odd m, k
  // and n: edge tiles; a batch of 2), the same bytes as the interpreter's.
  std::mt19937 rng(51);
  const int64_t m = 13, k = 38, n = 70;
  for (DType ta : {DType::U8, DType::I8})
    for (DType tb : {DType::I8, DType::U8})
      for (bool quantized : {true, false}) {
        Graph g;
        Tensor a = bytes(ta, {2, m, k}, rng);
        auto scalarF32 = [&](float v) {
          Tensor t = Tensor::zeros(DType::F32, {});
          t.data<float>()[0] = v;
          return constantValue(g, t);
        };
        auto make = [&](OpKind kind, std::vector<Value *> ops, AttrMap attrs = {}) {
          Expected<Node *> node = g.createInferred(kind, ops, attrs);
          EXPECT_TRUE(node) << node.error().message();
          return (*node)->result();
        };
        Value *y = make(OpKind::MatMulInteger,
                        {g.addInput("a", a.type()), constantValue(g, bytes(tb, {k, n}, rng)),
                         constantValue(g, scalarOf(ta, ta == DType::U8 ? 131 : -5)),
                         constantValue(g, bytes(tb, {n}, rng))});
        y = make(OpKind::Cast, {y}, {{"to", DType::F32}});
        y = make(OpKind::Mul, {y, constantValue(g, randomTensor(DType::F32, {n}, rng, 1e-4, 1e-3))});
        y = make(OpKind::Add, {y, constantValue(g, randomTensor(DType::F32, {n}, rng, -2, 2))});
        if (quantized)
          y = make(OpKind::Quantize,
                   {y, scalarF32(0.04f), constantValue(g, scalarOf(DType::U8, 120))});
        g.setOutputs({y});
        checkIntegerGroup(g, {a},
                          fmt::format("{} x {} matmul{}", dtypeName(ta), dtypeName(tb),
                                      quantized ? " requantized" : " dequantized"));
      }
}

// Data-dependent shapes on the CPU target: NonZero's generated kernel (its count is the
// result's extent) and CpuModel's staged execution of graphs whose later shapes depend on
// data they compute, each checked against the interpreter.
#include <gtest/gtest.h>

#include <random>

#include "LowerTestUtil.h"
#include "TestTarget.h"
#include "nnc/driver/Driver.h"
#include "nnc/ir/GraphSplit.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

CpuOptions options() {
  CpuOptions o(testenv::testCpu());
  o.threads = 1;
  o.codegen.cacheDir = "";
  return o;
}

std::unique_ptr<Graph> parse(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

void expectSame(const std::vector<Tensor> &want, const std::vector<Tensor> &got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].dtype(), got[i].dtype()) << "output " << i;
    ASSERT_EQ(want[i].extents(), got[i].extents()) << "output " << i;
    ASSERT_EQ(0, std::memcmp(want[i].rawData(), got[i].rawData(), want[i].byteSize()))
        << "output " << i;
  }
}

} // namespace

TEST(NonZero, KernelMatchesInterpreter) {
  std::mt19937 rng(7);
  for (DType t : {DType::F32, DType::I32, DType::Bool, DType::F16, DType::F8E4M3FN, DType::U4}) {
    for (const Extents &e : std::vector<Extents>{{}, {7}, {3, 5}, {2, 3, 4}, {0, 3}}) {
      std::string shape = extentsStr(e);
      std::string text = fmt::format("graph @nz(%x: {0}{1}) -> (i64[{2},K]) {{\n"
                                     "  %y = nonzero(%x) : i64[{2},K]\n  return %y\n}}\n",
                                     dtypeName(t), shape, e.size());
      auto g = parse(text);
      ASSERT_TRUE(g);
      Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, options());
      ASSERT_TRUE(exe) << exe.error().message();
      for (int trial = 0; trial < 3; ++trial) {
        // Mostly zeros (and negative zeros for floats), so counts vary between runs.
        Tensor x = lowertest::randomTensor(t, e, rng, -1, 1.4);
        if (t == DType::F32 && x.numElements() > 1)
          x.data<float>()[0] = -0.0f;
        if (t == DType::F8E4M3FN && x.numElements() > 2)
          static_cast<uint8_t *>(x.rawData())[1] = 0x80; // -0
        Expected<std::vector<Tensor>> want = interpret(*g, {x});
        ASSERT_TRUE(want) << want.error().message();
        Expected<std::vector<Tensor>> got = (*exe)->run({x});
        ASSERT_TRUE(got) << got.error().message();
        SCOPED_TRACE(std::string(dtypeName(t)) + shape);
        expectSame(*want, *got);
      }
    }
  }
}

TEST(NonZero, ConsumedInTheSameExecutableIsAnError) {
  auto g = parse(R"(graph @nz(%x: f32[6]) -> (i64[1,K]) {
  %y = nonzero(%x) : i64[1,K]
  %z = neg(%y) : i64[1,K]
  return %z
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, options());
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.error().message().find("%y"), std::string::npos)
      << exe.error().message();
}

// Compress-like: the positive elements of x, through nonzero and gather. The gather and
// everything after it are compiled for each count seen.
TEST(CpuModel, StagesAfterNonZero) {
  auto g = parse(R"(graph @positive(%x: f32[N]) -> (f32[K], i64[1,K]) {
  %zero = constant {value = dense<f32[]>[0]} : f32[]
  %m = greater(%x, %zero) : bool[N]
  %nz = nonzero(%m) : i64[1,K]
  %idx = squeeze(%nz) {axes = [0]} : i64[K]
  %p = gather(%x, %idx) {axis = 0} : f32[K]
  %y = exp(%p) : f32[K]
  return %y, %nz
}
)");
  ASSERT_TRUE(g);
  auto reference = g->clone();
  Expected<std::unique_ptr<CpuModel>> m = CpuModel::create(std::move(g), options(), driver::shapeSpecializer());
  ASSERT_TRUE(m) << m.error().message();
  std::mt19937 rng(3);
  for (int64_t n : {10, 10, 33, 1, 10}) {
    Tensor x = lowertest::randomTensor(DType::F32, {n}, rng);
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectSame(*want, *got);
  }
  Expected<Executable *> e = (*m)->executableFor({{10}});
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("runs in stages"), std::string::npos) << e.error().message();
}

// range's limit is computed in the graph (a sum of the input): the first stage computes it,
// the rest is specialized on its value.
TEST(CpuModel, StagesBeforeAShapeThatDependsOnComputedValues) {
  auto g = parse(R"(graph @ramp(%c: i64[3]) -> (f32[K]) {
  %s = reduce_sum(%c) {axes = [], keepdims = 0} : i64[]
  %z = constant {value = dense<i64[]>[0]} : i64[]
  %one = constant {value = dense<i64[]>[1]} : i64[]
  %r = range(%z, %s, %one) : i64[K]
  %f = cast(%r) {to = f32} : f32[K]
  %y = sqrt(%f) : f32[K]
  return %y
}
)");
  ASSERT_TRUE(g);
  auto reference = g->clone();
  Expected<std::unique_ptr<CpuModel>> m = CpuModel::create(std::move(g), options(), driver::shapeSpecializer());
  ASSERT_TRUE(m) << m.error().message();
  for (std::vector<int64_t> c : {std::vector<int64_t>{1, 2, 3}, {4, 0, 1}, {1, 2, 3}}) {
    Tensor x = Tensor::fromVector<int64_t>(DType::I64, {3}, c);
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectSame(*want, *got);
  }
}

TEST(GraphSplit, CutValuesCrossAndConstantsAreCopied) {
  auto g = parse(R"(graph @g(%x: f32[4]) -> (f32[4], f32[4]) {
  %w = constant {value = dense<f32[4]>[1, 2, 3, 4]} : f32[4]
  %a = mul(%x, %w) : f32[4]
  %b = exp(%a) : f32[4]
  %c = add(%b, %w) : f32[4]
  %d = add(%c, %a) : f32[4]
  return %d, %b
}
)");
  ASSERT_TRUE(g);
  GraphSplit s = splitGraph(*g, 3); // w, a, b | c, d
  ASSERT_EQ(s.first->outputs().size(), 2u);
  EXPECT_EQ(s.first->outputs()[0]->name(), "a");
  EXPECT_EQ(s.first->outputs()[1]->name(), "b");
  ASSERT_EQ(s.rest->inputs().size(), 3u);
  EXPECT_EQ(s.rest->inputs()[1]->name(), "a");
  EXPECT_EQ(s.rest->inputs()[2]->name(), "b");
  std::vector<std::string> ops;
  for (const Node *n : s.rest->nodes())
    ops.push_back(std::string(n->opName()));
  EXPECT_EQ(ops, (std::vector<std::string>{"constant", "add", "add"}));
  Tensor x = Tensor::fromVector<float>(DType::F32, {4}, {0.5f, -1, 2, 0});
  Expected<std::vector<Tensor>> want = interpret(*g, {x});
  Expected<std::vector<Tensor>> mid = interpret(*s.first, {x});
  ASSERT_TRUE(want && mid);
  Expected<std::vector<Tensor>> got = interpret(*s.rest, {x, (*mid)[0], (*mid)[1]});
  ASSERT_TRUE(got) << got.error().message();
  expectSame(*want, *got);
}

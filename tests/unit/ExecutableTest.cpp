// The CPU executable end to end (generated kernels against the interpreter), its launch list
// and buffer plan, concurrent runs, specializeShapes and CpuModel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>

#include "TestTarget.h"
#include "codegen/llvm/Emitter.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/driver/Driver.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

PassContext::Evaluator interp() {
  return [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
}

CpuOptions testOptions(int threads = 0) {
  CpuOptions o(testenv::testCpu());
  o.threads = threads;
  o.codegen.cacheDir = ""; // every test compiles
  return o;
}

std::unique_ptr<Graph> parse(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

Tensor randomF32(const Extents &e, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::zeros(DType::F32, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

/// rtol 1e-3 / atol 1e-6 for floats, exact otherwise.
void expectClose(const Tensor &want, const Tensor &got, const std::string &what) {
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  ASSERT_EQ(want.extents(), got.extents()) << what;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double w = want.elementAsDouble(i), g = got.elementAsDouble(i);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " element " << i;
      continue;
    }
    ASSERT_LE(std::fabs(w - g), 1e-6 + 1e-3 * std::fabs(w))
        << what << " element " << i << ": " << g << " but expected " << w;
  }
}

void expectMatchesInterpreter(const Graph &g, Executable &exe, const std::vector<Tensor> &in) {
  Expected<std::vector<Tensor>> want = interpret(g, in);
  ASSERT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> got = exe.run(in);
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i)
    expectClose((*want)[i], (*got)[i], "output " + std::to_string(i));
}

const char *kMlp = R"(
graph @mlp(%x: f32[3,6], %b: f32[4]) -> (f32[3,4], f32[3,4]) {
  %w = constant {value = dense<f32[6,4]>[0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5, 0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5]} : f32[6,4]
  %mm = matmul(%x, %w) : f32[3,4]
  %a = add(%mm, %b) : f32[3,4]
  %t = tanh(%a) : f32[3,4]
  %e = exp(%t) : f32[3,4]
  %y = softmax(%e) {axis = 1} : f32[3,4]
  %z = mul(%t, %y) : f32[3,4]
  return %y, %z
}
)";

// A symbolic batch flattened the way exporters do it (shape -> concat -> reshape).
const char *kDynamic = R"(
graph @dyn(%x: f32[N,2,3]) -> (f32[N,4]) {
  %s0 = shape(%x) {end = 1} : i64[1]
  %m1 = constant {value = dense<i64[1]>[-1]} : i64[1]
  %ns = concat(%s0, %m1) {axis = 0} : i64[2]
  %flat = reshape(%x, %ns) : f32[N,6]
  %w = constant {value = dense<f32[6,4]>[0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5, 0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5]} : f32[6,4]
  %mm = matmul(%flat, %w) : f32[N,4]
  %t = tanh(%mm) : f32[N,4]
  %y = softmax(%t) {axis = 1} : f32[N,4]
  return %y
}
)";

/// The CPU pipeline on `g` (symbolic shapes and all), as a model file gets it.
Error cpuPipeline(Graph &g, const CpuTarget &cpu) {
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = interp();
  NNC_ASSIGN_OR_RETURN(PassPipeline pipeline, PassPipeline::forTarget("cpu"));
  return pipeline.run(g, ctx);
}

} // namespace

TEST(Executable, MatchesInterpreter) {
  auto g = parse(kMlp);
  ASSERT_TRUE(g);
  for (int threads : {1, 2}) {
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions(threads));
    ASSERT_TRUE(exe) << exe.error().message();
    for (unsigned seed = 0; seed < 3; ++seed)
      expectMatchesInterpreter(*g, **exe, {randomF32({3, 6}, seed), randomF32({4}, seed + 10)});
  }
}

TEST(Executable, BatchedConstantWeightsArePackedMatrixByMatrix) {
  // A constant [2, 4, 40] weight (the winograd pass makes such batches): pack-gemm-weights
  // packs each matrix into [2, 40/32 -> 2, 4, 32] panels (40 columns: an edge panel); the
  // GEMM reads panel batch b for output batch b, with operand 0 batched or broadcast.
  auto g = parse(R"(
graph @bmm(%x: f32[5,4], %x2: f32[2,5,4]) -> (f32[2,5,40], f32[2,5,40]) {
  %w = constant {value = dense<f32[2,4,40]>[-1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25, 0.5, -0.5, 1.25, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, -0.25, -1.25]} : f32[2,4,40]
  %y = matmul(%x, %w) : f32[2,5,40]
  %y2 = matmul(%x2, %w) : f32[2,5,40]
  return %y, %y2
}
)");
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> packed = g->clone();
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = interp();
  Expected<PassPipeline> pp = PassPipeline::parse("pack-gemm-weights,dce");
  ASSERT_TRUE(pp) << pp.error().message();
  Error e = pp->run(*packed, ctx);
  ASSERT_FALSE(e) << e.message();
  int packedMatmuls = 0;
  for (const Node *n : packed->nodes())
    packedMatmuls +=
        n->kind() == OpKind::MatMul && n->getInt("packed_n", 0) == 40 && n->operand(1)->rank() == 4;
  EXPECT_EQ(packedMatmuls, 2);
  std::vector<Tensor> in{randomF32({5, 4}, 1), randomF32({2, 5, 4}, 2)};
  Expected<std::vector<Tensor>> viaInterp = interpret(*packed, in);
  ASSERT_TRUE(viaInterp) << viaInterp.error().message();
  Expected<std::vector<Tensor>> want = interpret(*g, in);
  ASSERT_TRUE(want) << want.error().message();
  for (size_t i = 0; i < want->size(); ++i)
    expectClose((*want)[i], (*viaInterp)[i], "interpreter output " + std::to_string(i));
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*packed, testOptions(1));
  ASSERT_TRUE(exe) << exe.error().message();
  expectMatchesInterpreter(*g, **exe, in);
}

TEST(Executable, SharedWeightBatchesFoldIntoRows) {
  // Sequence-first projections: [L, 1, E] and [2, 3, 4, E] by one (packed) [E, N] weight, with
  // a bias + relu epilogue; and a weight shared only over the inner batch dim. The batch dims
  // over which the weight stays put fold into the GEMM's rows (tests/lit/tools/matmul-fold.nir
  // pins the kernels); here the JIT's results must equal the interpreter's.
  auto values = [](int64_t n, double scale) {
    std::string s;
    for (int64_t i = 0; i < n; ++i)
      s += fmt::format("{}{}", i ? ", " : "", scale * double((i * 7) % 11 - 5));
    return s;
  };
  auto g = parse(fmt::format(R"(
graph @fold(%x: f32[37,1,24], %x4: f32[2,3,4,24], %w3: f32[2,1,24,40]) -> (f32[37,1,40], f32[2,3,4,40], f32[2,3,4,40]) {{
  %w = constant {{value = dense<f32[24,40]>[{}]}} : f32[24,40]
  %b = constant {{value = dense<f32[40]>[{}]}} : f32[40]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %y = matmul(%x, %w) : f32[37,1,40]
  %yb = add(%y, %b) : f32[37,1,40]
  %yr = max(%yb, %zero) : f32[37,1,40]
  %y4 = matmul(%x4, %w) : f32[2,3,4,40]
  %z = matmul(%x4, %w3) : f32[2,3,4,40]
  return %yr, %y4, %z
}}
)",
                             values(24 * 40, 0.125), values(40, 0.25)));
  ASSERT_TRUE(g);
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = interp();
  std::unique_ptr<Graph> opt = g->clone();
  Error e = PassPipeline::defaultPipeline().run(*opt, ctx);
  ASSERT_FALSE(e) << e.message();
  std::vector<Tensor> in{randomF32({37, 1, 24}, 3), randomF32({2, 3, 4, 24}, 4),
                         randomF32({2, 1, 24, 40}, 5)};
  for (int threads : {1, 2}) {
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*opt, testOptions(threads));
    ASSERT_TRUE(exe) << exe.error().message();
    expectMatchesInterpreter(*g, **exe, in);
  }
}

TEST(Executable, LaunchListHoldsOnlyGeneratedKernels) {
  auto g = parse(kMlp);
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  // Every non-constant node has at least one kernel named after it, and nothing else runs.
  std::vector<Node *> nodes = g->nodes();
  const std::vector<kir::Kernel> &ks = (*exe)->kernels();
  size_t k = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]->kind() == OpKind::Constant)
      continue;
    std::string prefix = "n" + std::to_string(i) + "_";
    ASSERT_LT(k, ks.size()) << nodes[i]->describe() << " has no kernel";
    EXPECT_EQ(ks[k].name.rfind(prefix, 0), 0u) << ks[k].name << " for " << nodes[i]->describe();
    while (k < ks.size() && ks[k].name.rfind(prefix, 0) == 0)
      ++k;
  }
  EXPECT_EQ(k, ks.size());
  EXPECT_GT((*exe)->compileMs(), 0);
}

TEST(Executable, OutputsThatAreInputsConstantsOrRepeated) {
  auto g = parse(R"(
graph @passthrough(%x: f32[2,3]) -> (f32[2,3], f32[2], f32[2,3], f32[2,3]) {
  %c = constant {value = dense<f32[2]>[1.5, -2]} : f32[2]
  %n = neg(%x) : f32[2,3]
  return %x, %c, %n, %n
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  Tensor x = randomF32({2, 3}, 7);
  expectMatchesInterpreter(*g, **exe, {x});
  Expected<std::vector<Tensor>> out = (*exe)->run({x});
  ASSERT_TRUE(out);
  // The caller owns fresh tensors: none aliases the input or another output.
  EXPECT_NE((*out)[0].rawData(), x.rawData());
  EXPECT_NE((*out)[2].rawData(), (*out)[3].rawData());
}

TEST(Executable, InPlaceElementwiseChain) {
  auto g = parse(R"(
graph @chain(%x: f32[64,33]) -> (f32[64,33]) {
  %a = tanh(%x) : f32[64,33]
  %b = exp(%a) : f32[64,33]
  %c = neg(%b) : f32[64,33]
  %d = add(%c, %a) : f32[64,33]
  %e = sigmoid(%d) : f32[64,33]
  return %e
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  const BufferPlan &p = (*exe)->plan();
  ASSERT_EQ(p.entries.size(), 4u); // a, b, c, d; e is the output
  // b cannot take a's storage (a is read again by d); c takes b's; d takes c's or a's.
  EXPECT_EQ(p.entries[1].reuses, "");
  EXPECT_EQ(p.entries[2].reuses, "b");
  EXPECT_NE(p.entries[3].reuses, "");
  EXPECT_EQ(p.peakBytes, 2 * 64 * 33 * 4); // 8448 bytes is a multiple of 64
  EXPECT_LE(p.lowerBoundBytes, p.peakBytes);
  EXPECT_EQ(p.unplannedBytes, 4 * 64 * 33 * 4);
  expectMatchesInterpreter(*g, **exe, {randomF32({64, 33}, 3)});
}

TEST(Executable, LargeResultsUseStreamingStores) {
  // A result larger than the last-level cache is written around it (non-temporal stores on
  // x86): the values must not change, on one and on two threads, with a tail that is not a
  // whole vector. The threshold is the target's, set here (64 KiB) so that the test does not
  // depend on the host's caches; a threshold above the result's size streams nothing.
  const int64_t threshold = 64 << 10;
  int64_t n = threshold / 4 + 37;
  auto g = parse(fmt::format(R"(
graph @chain(%x: f32[{0}]) -> (f32[{0}]) {{
  %s = constant {{value = dense<f32[]>[1.5]}} : f32[]
  %h = constant {{value = dense<f32[]>[0.25]}} : f32[]
  %a = mul(%x, %s) : f32[{0}]
  %b = add(%a, %h) : f32[{0}]
  %y = max(%b, %h) : f32[{0}]
  return %y
}})",
                             n));
  ASSERT_TRUE(g);
  Tensor x = Tensor::zeros(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    x.data<float>()[i] = float(i % 1000) * 0.01f - 5.0f;
  for (int threads : {1, 2}) {
    CpuOptions opts = testOptions(threads);
    opts.codegen.cpu.streamingStoreBytes = threshold;
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, opts);
    ASSERT_TRUE(exe) << exe.error().message();
#if defined(__x86_64__)
    Expected<std::string> as = emitAssembly((*exe)->kernels(), opts.codegen.cpu);
    ASSERT_TRUE(as) << as.error().message();
    EXPECT_NE(as->find("movntps"), std::string::npos);
    EXPECT_NE(as->find("sfence"), std::string::npos);
    CpuTarget above = opts.codegen.cpu;
    above.streamingStoreBytes = 4 * n + 1;
    Expected<std::string> plain = emitAssembly((*exe)->kernels(), above);
    ASSERT_TRUE(plain) << plain.error().message();
    EXPECT_EQ(plain->find("movntps"), std::string::npos);
#endif
    Expected<std::vector<Tensor>> y = (*exe)->run({x});
    ASSERT_TRUE(y) << y.error().message();
    const float *got = (*y)[0].data<float>();
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; ++i) {
      float want = std::max(x.data<float>()[i] * 1.5f + 0.25f, 0.25f);
      if (std::fabs(got[i] - want) > 1e-6f * (1 + std::fabs(want))) {
        ADD_FAILURE() << "threads " << threads << " element " << i << ": " << got[i]
                      << " but expected " << want;
        ++bad;
      }
    }
  }
}

TEST(Executable, ReshapesReadTheirOperandsStorage) {
  // r views an input, v views t (which z reads again later), w views e; o is a graph output,
  // so it is the only reshape that launches a copy.
  auto g = parse(R"(
graph @views(%x: f32[4,6]) -> (f32[2,12], f32[24]) {
  %s = constant {value = dense<i64[2]>[2, 12]} : i64[2]
  %s1 = constant {value = dense<i64[1]>[24]} : i64[1]
  %r = reshape(%x, %s) : f32[2,12]
  %t = tanh(%r) : f32[2,12]
  %v = reshape(%t, %s1) : f32[24]
  %e = exp(%v) : f32[24]
  %w = reshape(%e, %s) : f32[2,12]
  %z = add(%w, %t) : f32[2,12]
  %o = reshape(%z, %s1) : f32[24]
  return %z, %o
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  std::vector<std::string> names;
  for (const kir::Kernel &k : (*exe)->kernels())
    names.push_back(k.name.substr(0, k.name.find('_', 1)));
  EXPECT_EQ(names, (std::vector<std::string>{"n3", "n5", "n7", "n8"}));
  // t (read through v by e and directly by z) and e are both live when z runs.
  const BufferPlan &p = (*exe)->plan();
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].reuses, "");
  EXPECT_EQ(p.entries[1].reuses, "");
  for (unsigned seed = 0; seed < 3; ++seed)
    expectMatchesInterpreter(*g, **exe, {randomF32({4, 6}, seed)});
}

TEST(Executable, ConcurrentRuns) {
  auto g = parse(kMlp);
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions(2));
  ASSERT_TRUE(exe) << exe.error().message();
  std::vector<std::vector<Tensor>> inputs, want;
  for (unsigned s = 0; s < 4; ++s) {
    inputs.push_back({randomF32({3, 6}, s), randomF32({4}, 100 + s)});
    want.push_back(*interpret(*g, inputs.back()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 100; ++rep) {
        size_t s = static_cast<size_t>((t + rep) % 4);
        Expected<std::vector<Tensor>> out = (*exe)->run(inputs[s]);
        if (!out || !(*out)[0].bitwiseEqual((*(*exe)->run(inputs[s]))[0]))
          ++bad;
        else
          for (size_t i = 0; i < out->size(); ++i)
            for (int64_t e = 0; e < want[s][i].numElements(); ++e)
              if (std::fabs(want[s][i].data<float>()[e] - (*out)[i].data<float>()[e]) >
                  1e-5 + 1e-3 * std::fabs(want[s][i].data<float>()[e]))
                ++bad;
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Executable, RejectsBadInputsAndSymbolicShapes) {
  auto g = parse(kMlp);
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  Expected<std::vector<Tensor>> r = (*exe)->run({randomF32({4, 6}, 0), randomF32({4}, 0)});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("input 'x'"), std::string::npos) << r.error().message();
  EXPECT_FALSE((*exe)->run({randomF32({3, 6}, 0)}));

  auto dyn = parse(kDynamic);
  ASSERT_TRUE(dyn);
  Expected<std::unique_ptr<Executable>> bad = Executable::compile(*dyn, testOptions());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("symbolic"), std::string::npos) << bad.error().message();
}

TEST(SpecializeShapes, SymbolicBatch) {
  auto g = parse(kDynamic);
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Graph>> s = specializeShapes(*g, {{5, 2, 3}}, interp());
  ASSERT_TRUE(s) << s.error().message();
  for (const Node *n : (*s)->nodes())
    for (const Value *r : n->results())
      EXPECT_TRUE(isStatic(r->shape())) << r->name() << " " << r->type().str();
  EXPECT_EQ((*s)->outputs()[0]->type().str(), "f32[5,4]");
  // The original is untouched.
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[N,2,3]");

  Expected<std::unique_ptr<Graph>> rank = specializeShapes(*g, {{5, 6}}, interp());
  ASSERT_FALSE(rank);
  EXPECT_NE(rank.error().message().find("input 'x'"), std::string::npos);
  Expected<std::unique_ptr<Graph>> dim = specializeShapes(*g, {{5, 3, 3}}, interp());
  ASSERT_FALSE(dim);
  auto two = parse(R"(
graph @two(%a: f32[N,2], %b: f32[N,2]) -> (f32[N,2]) {
  %c = add(%a, %b) : f32[N,2]
  return %c
}
)");
  ASSERT_TRUE(two);
  Expected<std::unique_ptr<Graph>> clash = specializeShapes(*two, {{3, 2}, {4, 2}}, interp());
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message().find("N is 3"), std::string::npos) << clash.error().message();
}

TEST(CpuModel, RunsEveryBatchSizeAndCachesExecutables) {
  auto g = parse(kDynamic);
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> reference = g->clone();
  Expected<std::unique_ptr<CpuModel>> m =
      CpuModel::create(std::move(g), testOptions(), driver::shapeSpecializer());
  ASSERT_TRUE(m) << m.error().message();
  for (int64_t n : {1, 3, 7, 3}) {
    Tensor x = randomF32({n, 2, 3}, static_cast<unsigned>(n));
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectClose((*want)[0], (*got)[0], "batch " + std::to_string(n));
  }
  Expected<Executable *> a = (*m)->executableFor({{3, 2, 3}});
  Expected<Executable *> b = (*m)->executableFor({{3, 2, 3}});
  Expected<Executable *> c = (*m)->executableFor({{7, 2, 3}});
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_FALSE((*m)->run({randomF32({3, 6}, 0)}));
}

TEST(CpuModel, SymbolicConvsGetTheStaticShapePassesOnceSpecialized) {
  // A conv whose height and width are symbolic when the pipeline runs: no pass of the
  // symbolic graph can block its channels or take Winograd. Specialized to a run's shape,
  // shapeSpecializer(target) runs those passes on it, so its kernels are the ones a static
  // model gets (not im2col + GEMM), and the results still match the interpreter's.
  std::string w, b;
  for (int i = 0; i < 16 * 16 * 9; ++i)
    w += fmt::format("{}{}", i ? ", " : "", 0.01 * double((i * 7) % 13 - 6));
  for (int i = 0; i < 16; ++i)
    b += fmt::format("{}{}", i ? ", " : "", 0.1 * double(i % 5 - 2));
  auto g = parse(fmt::format(R"(
graph @conv(%x: f32[1,16,H,W]) -> (f32[1,16,H,W]) {{
  %w = constant {{value = dense<f32[16,16,3,3]>[{}]}} : f32[16,16,3,3]
  %b = constant {{value = dense<f32[16]>[{}]}} : f32[16]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %c = conv(%x, %w, %b) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,16,H,W]
  %y = max(%c, %zero) : f32[1,16,H,W]
  return %y
}}
)",
                             w, b));
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> reference = g->clone();
  CpuOptions opts = testOptions(1);
  Target target(Target::Cpu, opts.codegen.cpu);
  Error e = cpuPipeline(*g, target.cpu);
  ASSERT_FALSE(e) << e.message();
  Expected<std::unique_ptr<CpuModel>> m =
      CpuModel::create(std::move(g), opts, driver::shapeSpecializer(target));
  ASSERT_TRUE(m) << m.error().message();
  for (int64_t h : {12, 9}) {
    Tensor x = randomF32({1, 16, h, 10}, static_cast<unsigned>(h));
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectClose((*want)[0], (*got)[0], "height " + std::to_string(h));
    Expected<Executable *> exe = (*m)->executableFor({{1, 16, h, 10}});
    ASSERT_TRUE(exe) << exe.error().message();
    bool blocked = false, gemm = false;
    for (const KernelProfile &k : (*exe)->kernelProfile()) {
      blocked = blocked || k.name.find("nchwc") != std::string::npos ||
                k.name.find("winograd") != std::string::npos;
      gemm = gemm || k.name.find("im2col") != std::string::npos;
    }
    EXPECT_TRUE(blocked && !gemm) << "height " << h << ": the conv's kernels are not the "
                                  << "static-shape ones";
  }
}

TEST(CpuModel, SymbolicMatMulsGetPackedWeightsSharedAcrossShapes) {
  // A linear layer whose rows are symbolic when the pipeline runs: pack-gemm-weights takes
  // only static rows, so the symbolic graph keeps its [K, N] weight, which every run would
  // copy into panels. Each specialized graph gets the packed weight, one copy for all shapes.
  std::string w, b;
  for (int i = 0; i < 40 * 24; ++i)
    w += fmt::format("{}{}", i ? ", " : "", 0.01 * double((i * 7) % 13 - 6));
  for (int i = 0; i < 24; ++i)
    b += fmt::format("{}{}", i ? ", " : "", 0.1 * double(i % 5 - 2));
  auto g = parse(fmt::format(R"(
graph @linear(%x: f32[B,40]) -> (f32[B,24]) {{
  %w = constant {{value = dense<f32[40,24]>[{}]}} : f32[40,24]
  %b = constant {{value = dense<f32[24]>[{}]}} : f32[24]
  %m = matmul(%x, %w) : f32[B,24]
  %y = add(%m, %b) : f32[B,24]
  return %y
}}
)",
                             w, b));
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> reference = g->clone();
  CpuOptions opts = testOptions(1);
  Target target(Target::Cpu, opts.codegen.cpu);
  Error e = cpuPipeline(*g, target.cpu);
  ASSERT_FALSE(e) << e.message();
  // The panels of each specialized graph's matmul: their buffer, or null when unpacked.
  auto panels = [](const Graph &s) -> const void * {
    for (const Node *n : s.nodes())
      if (n->kind() == OpKind::MatMul && n->hasAttr("packed_n"))
        return n->operand(1)->producer()->getTensor("value").rawData();
    return nullptr;
  };
  EXPECT_EQ(panels(*g), nullptr) << "the symbolic graph has no static rows to pack for";
  Specializer specialize = driver::shapeSpecializer(target);
  const void *first = nullptr;
  for (int64_t rows : {8, 5, 3}) {
    Expected<std::unique_ptr<Graph>> s = specialize(*g, {{rows, 40}}, {}, nullptr);
    ASSERT_TRUE(s) << s.error().message();
    const void *p = panels(**s);
    EXPECT_NE(p, nullptr) << rows << " rows: the weight is not packed";
    first = first ? first : p;
    EXPECT_EQ(p, first) << rows << " rows: a packed copy of its own";
  }
  // And the runs match the interpreter's.
  Expected<std::unique_ptr<CpuModel>> m = CpuModel::create(std::move(g), opts, specialize);
  ASSERT_TRUE(m) << m.error().message();
  for (int64_t rows : {8, 5}) {
    Tensor x = randomF32({rows, 40}, static_cast<unsigned>(rows));
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectClose((*want)[0], (*got)[0], std::to_string(rows) + " rows");
  }
}

TEST(CpuModel, CacheStaysBounded) {
  auto g = parse(R"(
graph @neg(%x: f32[N]) -> (f32[N]) {
  %y = neg(%x) : f32[N]
  return %y
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<CpuModel>> m =
      CpuModel::create(std::move(g), testOptions(1), driver::shapeSpecializer());
  ASSERT_TRUE(m);
  for (int64_t n = 1; n <= 20; ++n) {
    Expected<std::vector<Tensor>> r = (*m)->run({randomF32({n}, 1)});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ((*r)[0].dim(0), n);
  }
  // Shape 1 was evicted (16 kept) and is compiled again on demand.
  Expected<std::vector<Tensor>> again = (*m)->run({randomF32({1}, 1)});
  ASSERT_TRUE(again);
}

TEST(CpuModel, SpecializesOnValuesThatDetermineShapes) {
  // range's length is the value of input %n: compiled per value of %n.
  auto g = parse(R"(
graph @ramp(%n: i64[], %x: f32[]) -> (f32[K]) {
  %z = constant {value = dense<i64[]>[0]} : i64[]
  %one = constant {value = dense<i64[]>[1]} : i64[]
  %r = range(%z, %n, %one) : i64[K]
  %f = cast(%r) {to = f32} : f32[K]
  %y = mul(%f, %x) : f32[K]
  return %y
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<CpuModel>> m =
      CpuModel::create(std::move(g), testOptions(1), driver::shapeSpecializer());
  ASSERT_TRUE(m) << m.error().message();
  for (int64_t n : {5, 3, 5}) {
    Expected<std::vector<Tensor>> r =
        (*m)->run({Tensor::scalar<int64_t>(DType::I64, n), Tensor::scalar<float>(DType::F32, 2)});
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ((*r)[0].extents(), Extents{n});
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ((*r)[0].data<float>()[i], 2.0f * float(i));
  }
  Expected<Executable *> e = (*m)->executableFor({{}, {}});
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("value of input 'n'"), std::string::npos)
      << e.error().message();
}

// Storage-only values (f8 here) are moved by kernels as bytes; the executable binds them.
TEST(Executable, MovesStorageOnlyValues) {
  auto g = parse(R"(graph @f8(%x: f8e4m3fn[2,3]) -> (f8e4m3fn[3,2]) {
  %y = transpose(%x) {perm = [1, 0]} : f8e4m3fn[3,2]
  return %y
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions(1));
  ASSERT_TRUE(exe) << exe.error().message();
  Tensor x = Tensor::zeros(DType::F8E4M3FN, {2, 3});
  for (int i = 0; i < 6; ++i)
    static_cast<uint8_t *>(x.rawData())[i] = static_cast<uint8_t>(0x30 + i);
  Expected<std::vector<Tensor>> got = (*exe)->run({x});
  ASSERT_TRUE(got) << got.error().message();
  Expected<std::vector<Tensor>> want = interpret(*g, {x});
  ASSERT_TRUE(want) << want.error().message();
  EXPECT_TRUE((*got)[0].bitwiseEqual((*want)[0]));
}

TEST(TensorPool, TakesOnlyExactSizesAndStaysBounded) {
  auto pool = std::make_shared<TensorPool>(2);
  EXPECT_EQ(pool->take(256), nullptr);
  void *a = std::aligned_alloc(64, 256), *b = std::aligned_alloc(64, 512),
       *c = std::aligned_alloc(64, 256);
  pool->give(a, 256);
  pool->give(b, 512);
  pool->give(c, 256); // beyond 2 buffers: the oldest (a) is freed
  EXPECT_EQ(pool->kept(), 2u);
  EXPECT_EQ(pool->take(128), nullptr);
  EXPECT_EQ(pool->take(256), c);
  EXPECT_EQ(pool->take(256), nullptr);
  EXPECT_EQ(pool->take(512), b);
  std::free(b);
  std::free(c);
  // A tensor gives its memory back when its last copy dies, not before.
  Expected<Tensor> t = Tensor::createUninitialized(DType::F32, {10, 10}, pool);
  ASSERT_TRUE(t) << t.error().message();
  void *data = t->rawData();
  {
    Tensor copy = *t;
    *t = Tensor();
    EXPECT_EQ(pool->kept(), 0u);
  }
  EXPECT_EQ(pool->kept(), 1u);
  Expected<Tensor> again = Tensor::createUninitialized(DType::I32, {4, 25}, pool);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->rawData(), data); // 400 bytes again: the same (448-byte) allocation
}

TEST(Executable, OutputMemoryIsReusedOnlyAfterTheCallerDropsIt) {
  auto g = parse(R"(
graph @two(%x: f32[1000]) -> (f32[1000], f32[1000]) {
  %n = neg(%x) : f32[1000]
  %e = exp(%n) : f32[1000]
  return %n, %e
}
)");
  ASSERT_TRUE(g);
  for (int threads : {1, 2}) {
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions(threads));
    ASSERT_TRUE(exe) << exe.error().message();
    Tensor x1 = randomF32({1000}, 1), x2 = randomF32({1000}, 2);
    Expected<std::vector<Tensor>> want1 = interpret(*g, {x1}), want2 = interpret(*g, {x2});
    ASSERT_TRUE(want1 && want2);
    std::set<const void *> seen;
    {
      Expected<std::vector<Tensor>> r1 = (*exe)->run({x1});
      ASSERT_TRUE(r1) << r1.error().message();
      Expected<std::vector<Tensor>> r2 = (*exe)->run({x2}); // r1 is still held
      ASSERT_TRUE(r2) << r2.error().message();
      for (size_t i = 0; i < 2; ++i) {
        expectClose((*want1)[i], (*r1)[i], "held output " + std::to_string(i));
        expectClose((*want2)[i], (*r2)[i], "second run's output " + std::to_string(i));
        seen.insert((*r1)[i].rawData());
        seen.insert((*r2)[i].rawData());
      }
      EXPECT_EQ(seen.size(), 4u); // no two live outputs share memory
    }
    // Both runs' outputs are gone: the next runs take their memory, and are right.
    for (unsigned seed = 3; seed < 6; ++seed) {
      Tensor x = randomF32({1000}, seed);
      Expected<std::vector<Tensor>> want = interpret(*g, {x});
      Expected<std::vector<Tensor>> got = (*exe)->run({x});
      ASSERT_TRUE(want && got);
      for (size_t i = 0; i < 2; ++i) {
        expectClose((*want)[i], (*got)[i], "reused output " + std::to_string(i));
        EXPECT_TRUE(seen.count((*got)[i].rawData())) << "output " << i << " was not reused";
      }
    }
  }
}

TEST(CpuModel, RepeatedAndAlternatingShapes) {
  auto g = parse(kDynamic);
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> reference = g->clone();
  Expected<std::unique_ptr<CpuModel>> m =
      CpuModel::create(std::move(g), testOptions(), driver::shapeSpecializer());
  ASSERT_TRUE(m) << m.error().message();
  unsigned seed = 0;
  for (int64_t n : {2, 2, 2, 5, 5, 2, 5, 2, 2}) {
    Tensor x = randomF32({n, 2, 3}, ++seed);
    Expected<std::vector<Tensor>> want = interpret(*reference, {x});
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::vector<Tensor>> got = (*m)->run({x});
    ASSERT_TRUE(got) << got.error().message();
    expectClose((*want)[0], (*got)[0], "batch " + std::to_string(n));
  }
  EXPECT_FALSE((*m)->run({randomF32({2, 6}, 0)})); // a shape the graph does not accept
}

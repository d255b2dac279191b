// Matmuls of few rows by a constant weight (decode-time GEMMs): 1 to 64 rows, odd K and N (an
// edge panel), batch dims folded into the rows and a batched weight, bare and with a fused
// bias + GELU + residual epilogue, compiled by the standard pipeline (the weight packed into
// panels) against the interpreter; the path each takes (the skinny stream's problem, gemv_cpu,
// up to 4 rows; the GEMM's, gemm_cpu, beyond); and every point of the gemv_cpu space gives the
// same numbers; a loop body's skinny stream keeps a weight that fits L2 on one thread.
// TemplatesTest pins the template names.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/ranges.h>

#include "TestTarget.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/driver/Driver.h"
#include "nnc/ir/Parser.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

/// A constant of extents `e`, values in [-1, 1) from `seed`.
std::string dense(const Extents &e, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  int64_t n = 1;
  for (int64_t d : e)
    n *= d;
  std::vector<std::string> vals;
  for (int64_t i = 0; i < n; ++i)
    vals.push_back(fmt::format("{:.4f}", u(rng)));
  std::string dims = fmt::format("{}", fmt::join(e, ","));
  return fmt::format("constant {{value = dense<f32[{0}]>[{1}]}} : f32[{0}]", dims,
                     fmt::join(vals, ", "));
}

std::string shape(const Extents &e) {
  return fmt::format("f32[{}]", fmt::join(e, ","));
}

/// y = x @ W (W a constant [wBatch..., K, N]) for x of `xBatch..., m, k`; with `epilogue`,
/// y = gelu(x @ W + b) + r (erf form, as PyTorch exports it).
std::string matmulGraph(const Extents &xBatch, const Extents &wBatch, int64_t m, int64_t k,
                        int64_t n, bool epilogue) {
  Extents xe = xBatch, we = wBatch, ye = xBatch.size() >= wBatch.size() ? xBatch : wBatch;
  xe.insert(xe.end(), {m, k});
  we.insert(we.end(), {k, n});
  ye.insert(ye.end(), {m, n});
  std::string y = shape(ye);
  if (!epilogue)
    return fmt::format(R"(
graph @g(%x: {0}) -> ({1}) {{
  %w = {2}
  %y = matmul(%x, %w) : {1}
  return %y
}})",
                       shape(xe), y, dense(we, 5));
  return fmt::format(R"(
graph @g(%x: {0}, %r: {1}) -> ({1}) {{
  %w = {2}
  %b = {3}
  %sqrt2 = constant {{value = dense<f32[]>[1.4142135]}} : f32[]
  %one = constant {{value = dense<f32[]>[1]}} : f32[]
  %half = constant {{value = dense<f32[]>[0.5]}} : f32[]
  %m = matmul(%x, %w) : {1}
  %h = add(%m, %b) : {1}
  %d = div(%h, %sqrt2) : {1}
  %e = erf(%d) : {1}
  %p = add(%e, %one) : {1}
  %q = mul(%h, %p) : {1}
  %g = mul(%q, %half) : {1}
  %y = add(%g, %r) : {1}
  return %y
}})",
                     shape(xe), y, dense(we, 5), dense({n}, 6));
}

std::vector<Tensor> randomInputs(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<Tensor> in;
  for (const Value *v : g.inputs()) {
    Tensor t = Tensor::zeros(DType::F32, *staticExtents(v->shape()));
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = u(rng);
    in.push_back(std::move(t));
  }
  return in;
}

/// One config for every problem of its space.
class Everywhere : public tuning::ConfigSource {
public:
  explicit Everywhere(tuning::Config c) : c_(std::move(c)) {}
  std::optional<tuning::Config> lookup(const tuning::Problem &p) const override {
    return p.kind == "gemv_cpu" ? std::optional<tuning::Config>(c_) : std::nullopt;
  }

private:
  tuning::Config c_;
};

/// Compiles `text` with the CPU pipeline and checks its outputs against the interpreter's
/// (on the unoptimized graph); returns the space kinds of its tunable problems that `configs`
/// did not set, and "tuned" for each that it did.
std::vector<std::string> checkAgainstInterpreter(const std::string &text, int threads,
                                                 std::shared_ptr<tuning::ConfigSource> configs =
                                                     nullptr) {
  std::vector<std::string> chosen;
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  if (!g)
    return chosen;
  std::unique_ptr<Graph> opt = (*g)->clone();
  Error e = driver::optimize(*opt, testenv::testCpu());
  EXPECT_FALSE(e) << e.message();
  CpuOptions o(testenv::testCpu());
  o.threads = threads;
  o.codegen.cacheDir = "";
  o.tuning = configs;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*opt, o);
  EXPECT_TRUE(exe) << exe.error().message();
  if (!exe)
    return chosen;
  for (const std::string &sig : (*exe)->tuningUse().missing)
    chosen.push_back(sig.substr(0, sig.find(' ')));
  for (int i = 0; i < (*exe)->tuningUse().tuned; ++i)
    chosen.push_back("tuned");
  std::vector<Tensor> in = randomInputs(**g, 7);
  Expected<std::vector<Tensor>> want = interpret(**g, in);
  EXPECT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> got = (*exe)->run(in);
  EXPECT_TRUE(got) << got.error().message();
  if (!want || !got)
    return chosen;
  EXPECT_EQ(want->size(), got->size());
  for (size_t r = 0; r < want->size() && r < got->size(); ++r) {
    EXPECT_EQ((*want)[r].extents(), (*got)[r].extents());
    for (int64_t i = 0; i < (*want)[r].numElements(); ++i) {
      double w = (*want)[r].elementAsDouble(i), v = (*got)[r].elementAsDouble(i);
      if (std::fabs(v - w) > 1e-4 + 1e-4 * std::fabs(w)) {
        ADD_FAILURE() << "element " << i << ": " << v << ", expected " << w;
        return chosen;
      }
    }
  }
  return chosen;
}

bool has(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

} // namespace

TEST(SkinnyGemm, RowsOneToSixtyFourMatchTheInterpreter) {
  for (int64_t m : {1, 2, 3, 4, 5, 7, 16, 33, 64})
    for (bool epilogue : {false, true}) {
      SCOPED_TRACE(fmt::format("m {} epilogue {}", m, epilogue));
      // K odd, N with an edge panel (not a multiple of any panel width).
      std::vector<std::string> t =
          checkAgainstInterpreter(matmulGraph({}, {}, m, 37, 75, epilogue), m % 2 ? 1 : 2);
      EXPECT_EQ(t, std::vector<std::string>{m <= 4 ? "gemv_cpu" : "gemm_cpu"})
          << fmt::format("{}", fmt::join(t, "; "));
    }
}

TEST(SkinnyGemm, BatchesFoldIntoRowsOrBatchTheWeight) {
  // [2, 1, K] by one weight: two rows (a batch of two sequences, one token each).
  EXPECT_TRUE(has(checkAgainstInterpreter(matmulGraph({2}, {}, 1, 53, 131, true), 2),
                  "gemv_cpu"));
  // [3, 1, 1, K]: three rows, one more batch dim.
  EXPECT_TRUE(has(checkAgainstInterpreter(matmulGraph({3, 1}, {}, 1, 19, 40, false), 1),
                  "gemv_cpu"));
  // [5, 1, K]: five rows, past the skinny template.
  EXPECT_TRUE(has(checkAgainstInterpreter(matmulGraph({5}, {}, 1, 19, 40, false), 1),
                  "gemm_cpu"));
  // A batched weight [4, K, N] (each entry its own matrix), 2 rows each; and one whose A is
  // broadcast over the weight's batch.
  EXPECT_TRUE(has(checkAgainstInterpreter(matmulGraph({4}, {4}, 2, 29, 70, true), 2),
                  "gemv_cpu"));
  EXPECT_TRUE(has(checkAgainstInterpreter(matmulGraph({}, {3}, 1, 29, 17, false), 2),
                  "gemv_cpu"));
}

TEST(SkinnyGemm, EveryGemvConfigComputesTheSameNumbers) {
  const tuning::Space *space = tuning::findSpace("gemv_cpu");
  ASSERT_TRUE(space);
  std::vector<int64_t> pars = space->knobs[0].values, pfds = space->knobs[1].values;
  ASSERT_EQ(space->knobs[0].name, "par");
  ASSERT_EQ(space->knobs[1].name, "pfd");
  int checked = 0;
  for (int64_t par : pars)
    for (int64_t pfd : pfds) {
      tuning::Config c{{"par", par}, {"pfd", pfd}};
      SCOPED_TRACE(tuning::configStr(c));
      tuning::Problem p;
      p.kind = "gemv_cpu";
      p.dims = {1, 3, 130, 200};
      EXPECT_TRUE(space->valid(c, p));
      std::vector<std::string> t = checkAgainstInterpreter(
          matmulGraph({}, {}, 3, 130, 200, true), 2, std::make_shared<Everywhere>(c));
      EXPECT_EQ(t, std::vector<std::string>{"tuned"}) << fmt::format("{}", fmt::join(t, "; "));
      ++checked;
    }
  EXPECT_EQ(checked, int(pars.size() * pfds.size()));
}

TEST(SkinnyGemm, ALoopBodyKeepsACacheSizedWeightOnOneThread) {
  // The defaults: 768 KB of weight splits over the threads, except in a loop body on a core
  // whose L2 holds it (a recurrent step rereads it from there every step); 2 MiB splits.
  const tuning::Space *space = tuning::findSpace("gemv_cpu");
  ASSERT_TRUE(space);
  tuning::Problem p;
  p.kind = "gemv_cpu";
  p.cpu = testenv::testCpu();
  p.cpu.l2Bytes = 1 << 20;
  p.threads = 2;
  p.dims = {1, 1, 256, 768};
  EXPECT_EQ(space->defaults(p).at("par"), 1);
  p.loopBody = true;
  EXPECT_EQ(space->defaults(p).at("par"), 0);
  p.dims = {1, 1, 512, 1024};
  EXPECT_EQ(space->defaults(p).at("par"), 1);

  // The launch plan lowers a scan's body as a loop body: the same 256 KiB matmul is split
  // outside the loop and not inside it, and both match the interpreter.
  std::string w = dense({256, 256}, 9);
  std::string text = fmt::format(R"(
graph @g(%h0: f32[1,256], %xs: f32[3,1,256], %x1: f32[1,256]) -> (f32[1,256], f32[3,1,256], f32[1,256]) {{
  %w = {0}
  %h, %ys = scan(%h0, %xs, %w) {{num_carried = 1, num_scan_inputs = 1, reverse = 0}} body graph @step(%a: f32[1,256], %x: f32[1,256], %k: f32[256,256]) -> (f32[1,256], f32[1,256]) {{
    %m = matmul(%a, %k) : f32[1,256]
    %s = add(%m, %x) : f32[1,256]
    return %s, %s
  }} : f32[1,256], f32[3,1,256]
  %y = matmul(%x1, %w) : f32[1,256]
  return %h, %ys, %y
}})",
                                 w);
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  ASSERT_TRUE(g) << g.error().message();
  std::unique_ptr<Graph> opt = (*g)->clone();
  Error e = driver::optimize(*opt, testenv::testCpu());
  ASSERT_FALSE(e) << e.message();
  CpuOptions o(testenv::testCpu());
  o.threads = 2;
  o.codegen.cacheDir = "";
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*opt, o);
  ASSERT_TRUE(exe) << exe.error().message();
  int inLoop = 0, outside = 0;
  for (const kir::Kernel &k : (*exe)->kernels()) {
    if (k.name.find("matmul") == std::string::npos)
      continue;
    bool parallel = false;
    for (const kir::ScheduleStep &st : k.schedule.steps)
      parallel = parallel || st.kind == kir::ScheduleStep::Parallel;
    bool body = k.name.find("scan") != std::string::npos;
    EXPECT_EQ(parallel, !body) << k.name;
    ++(body ? inLoop : outside);
  }
  EXPECT_EQ(inLoop, 1);
  EXPECT_EQ(outside, 1);
  std::vector<Tensor> in = randomInputs(**g, 3);
  Expected<std::vector<Tensor>> want = interpret(**g, in);
  ASSERT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> got = (*exe)->run(in);
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_EQ(want->size(), got->size());
  for (size_t r = 0; r < want->size(); ++r)
    for (int64_t i = 0; i < (*want)[r].numElements(); ++i) {
      double a = (*want)[r].elementAsDouble(i), b = (*got)[r].elementAsDouble(i);
      ASSERT_NEAR(b, a, 1e-4 + 1e-4 * std::fabs(a)) << "output " << r << " element " << i;
    }
}

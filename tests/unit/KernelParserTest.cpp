// The kernel IR's text form: printKernel then parseKernels gives back the same kernel (checked
// on the kernels that lowering makes for many ops, for the CPU and an OpenCL device, before
// and after their schedules and expansions, and on the shared models' kernels when present),
// a parsed kernel runs, and malformed text gives one error naming line and column.
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "nnc/codegen/Lowering.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/KernelParser.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

/// print(parse(print(k))) == print(k), and the parsed kernel verifies as k does and has its
/// signature.
void expectRoundTrip(const kir::Kernel &k, const std::string &what) {
  std::string text = kir::printKernel(k);
  Expected<std::vector<kir::Kernel>> parsed = kir::parseKernels(text, what);
  ASSERT_TRUE(parsed) << what << ": " << parsed.error().message() << "\n" << text;
  ASSERT_EQ(parsed->size(), 1u) << what;
  const kir::Kernel &p = (*parsed)[0];
  EXPECT_EQ(kir::printKernel(p), text) << what;
  EXPECT_EQ(p.signature(), k.signature()) << what;
  Error want = kir::verifyKernel(k), got = kir::verifyKernel(p);
  EXPECT_EQ(got.message(), want.message()) << what << "\n" << text;
}

/// Each kernel as lowered, and as the backends see it (schedule applied, composites
/// expanded: the primitives, vector loads and stores, GPU loops and barriers).
int roundTripAll(const std::vector<kir::Kernel> &kernels, const std::string &what) {
  int n = 0;
  for (const kir::Kernel &k : kernels) {
    expectRoundTrip(k, what + "/" + k.name);
    Expected<kir::Stmt> body = kir::codegenBody(k);
    EXPECT_TRUE(body) << what << "/" << k.name << ": " << body.error().message();
    if (!body)
      continue;
    kir::Kernel lowered = k;
    lowered.body = *body;
    lowered.schedule = {};
    expectRoundTrip(lowered, what + "/" + k.name + " (codegen body)");
    n += 2;
  }
  return n;
}

// Ops of many kinds: elementwise chains with composites (fused), reductions, softmax, GEMM,
// conv, pooling, data movement, casts to storage formats, integer ops.
const char *kOpsGraph = R"(
graph @ops(%x: f32[4,32], %w: f32[32,24], %img: f32[1,8,10,10], %k: f32[16,8,3,3],
           %i: i32[4,32], %idx: i64[5], %h: f16[4,32], %d: f64[4,32]) ->
    (f32[4,24], f32[4,32], f32[4,32], f32[4], f32[1,16,8,8], f32[1,8,5,5], f32[5,32], i32[4,32],
     f8e4m3fn[4,32], f16[4,32], f64[4,32], f32[32,4], bool[4,32], u8[4,32]) {
  %mm = matmul(%x, %w) : f32[4,24]
  %s = sigmoid(%x) : f32[4,32]
  %e = erf(%s) : f32[4,32]
  %t = tanh(%e) : f32[4,32]
  %p = pow(%t, %x) : f32[4,32]
  %sm = softmax(%p) {axis = 1} : f32[4,32]
  %r = reduce_sum(%x) {axes = [1], keepdims = 0} : f32[4]
  %c = conv(%img, %k) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,8,8]
  %mp = max_pool(%img) {ceil_mode = 0, dilations = [1, 1], kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]} : f32[1,8,5,5]
  %g = gather(%x, %idx) {axis = 0} : f32[5,32]
  %im = mod(%i, %i) : i32[4,32]
  %f8 = cast(%x) {to = f8e4m3fn} : f8e4m3fn[4,32]
  %hs = sigmoid(%h) : f16[4,32]
  %de = exp(%d) : f64[4,32]
  %tr = transpose(%x) {perm = [1, 0]} : f32[32,4]
  %nan = is_nan(%x) : bool[4,32]
  %u = cast(%x) {to = u8} : u8[4,32]
  return %mm, %sm, %p, %r, %c, %mp, %g, %im, %f8, %hs, %de, %tr, %nan, %u
}
)";

std::vector<const Node *> loweredNodes(const Graph &g) {
  std::vector<const Node *> nodes;
  for (const Node *n : g.nodes())
    if (n->kind() != OpKind::Constant)
      nodes.push_back(n);
  return nodes;
}

TEST(KernelParserTest, LoweredKernelsRoundTrip) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(kOpsGraph, "ops.nir");
  ASSERT_TRUE(g) << g.error().message();
  int checked = 0;
  for (CpuTarget::Level level : {CpuTarget::Level::V3, CpuTarget::Level::V4}) {
    tuning::LowerOptions opts(CpuTarget::forLevel(level));
    for (const Node *n : loweredNodes(**g)) {
      if (!canLowerNode(*n))
        continue;
      Expected<std::vector<kir::Kernel>> ks = lowerNode(*n, "k", opts);
      ASSERT_TRUE(ks) << n->opName() << ": " << ks.error().message();
      checked += roundTripAll(*ks, std::string(n->opName()));
    }
  }
  // The OpenCL templates: work-group loops, local buffers, barriers, GEMM register tiles.
  tuning::LowerOptions gpu(CpuTarget::forLevel(CpuTarget::Level::V4));
  gpu.gpu = GpuTarget::generic();
  for (const Node *n : loweredNodes(**g)) {
    if (!canLowerNode(*n))
      continue;
    Expected<std::vector<kir::Kernel>> ks = lowerNode(*n, "g", gpu);
    if (!ks)
      continue; // an op OpenCL does not take is the CPU loop above's
    checked += roundTripAll(*ks, std::string("opencl/") + std::string(n->opName()));
  }
  EXPECT_GE(checked, 60);
}

TEST(KernelParserTest, SharedModelKernelsRoundTrip) {
  fs::path models = fs::path(NNC_SHARED_DIR) / "models";
  if (!fs::exists(models / "mlp_b1"))
    GTEST_SKIP() << "shared models not found at " << models;
  for (const char *name : {"mlp_b1", "lenet_b1", "resnet18_b1", "bert_layer_b1"}) {
    SCOPED_TRACE(name);
    ImportOptions io;
    io.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
      return evaluateNode(n, ops);
    };
    Expected<std::unique_ptr<Graph>> g =
        importOnnxFile((models / name / "model.onnx").string(), io);
    ASSERT_TRUE(g) << g.error().message();
    const CpuTarget v3 = CpuTarget::forLevel(CpuTarget::Level::V3);
    PassContext ctx;
    ctx.evaluate = io.evaluate;
    ctx.cpu = v3;
    ASSERT_FALSE(PassPipeline::defaultPipeline().run(**g, ctx));
    std::vector<Extents> shapes;
    for (const Value *v : (*g)->inputs())
      shapes.push_back(*staticExtents(v->shape()));
    Expected<std::unique_ptr<Graph>> s = specializeShapes(**g, shapes, io.evaluate);
    ASSERT_TRUE(s) << s.error().message();
    Expected<std::vector<LoweringUnit>> units = loweringUnits(**s);
    ASSERT_TRUE(units) << units.error().message();
    // The kernels an executable is made of, for the CPU and for a generic OpenCL device.
    tuning::LowerOptions cpu(v3), gpu(v3);
    gpu.gpu = GpuTarget::generic();
    int checked = 0;
    for (const tuning::LowerOptions *opts : {&cpu, &gpu}) {
      for (size_t u = 0; u < units->size(); ++u) {
        Expected<std::vector<kir::Kernel>> ks =
            lowerUnit((*units)[u], "u" + std::to_string(u) + "_", *opts);
        ASSERT_TRUE(ks) << ks.error().message();
        checked += roundTripAll(*ks, std::string(name) + (opts == &gpu ? "/opencl" : ""));
      }
    }
    EXPECT_GT(checked, 0);
  }
}

// A kernel written as text runs: the parser builds what the evaluator computes with.
TEST(KernelParserTest, ParsedKernelEvaluates) {
  const char *text = R"(
// y[i] = x[i] * 2 + 1 for even i, else the running sum of x up to i.
kernel k(x: f32[8] operand 0, y: f32[8] result 0 written) {
  var acc: f32 = 0.0f32
  for i in 0..8 {
    acc =reassoc acc + x[i]
    if (i % 2) == 0 {
      y[i] = (x[i] * 2.0f32) + 1.0f32
    } else {
      y[i] = acc
    }
  }
}
schedule: split(i, 4); unroll(i.i)
)";
  Expected<std::vector<kir::Kernel>> ks = kir::parseKernels(text, "k.kir");
  ASSERT_TRUE(ks) << ks.error().message();
  ASSERT_EQ(ks->size(), 1u);
  const kir::Kernel &k = (*ks)[0];
  ASSERT_FALSE(kir::verifyKernel(k)) << kir::verifyKernel(k).message();
  EXPECT_EQ(k.schedule.str(), "split(i, 4); unroll(i.i)");
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y(8, 0);
  ASSERT_FALSE(kir::evaluateKernel(k, {x.data(), y.data()}));
  EXPECT_EQ(y, (std::vector<float>{3, 3, 7, 10, 11, 21, 15, 36}));
}

TEST(KernelParserTest, PrecedenceAndImmediates) {
  // Hand-written text may lean on precedence; the printer parenthesizes every nested infix.
  const char *text = R"(kernel p(o: i64[100] result 0 written, f: f64[1] result 1 written,
                      h: f16[1] result 2 written) {
  for i in 0..4 {
    o[i * 16 + i - -1] = i * 16 + i - -1
  }
  f[0] = nanf64
  h[0] = -inff16
})";
  Expected<std::vector<kir::Kernel>> ks = kir::parseKernels(text);
  ASSERT_TRUE(ks) << ks.error().message();
  std::string printed = kir::printKernel((*ks)[0]);
  EXPECT_NE(printed.find("o[((i * 16) + i) - -1] = ((i * 16) + i) - -1"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("f[0] = nanf64"), std::string::npos) << printed;
  EXPECT_NE(printed.find("h[0] = -inff16"), std::string::npos) << printed;
  EXPECT_FALSE(kir::verifyKernel((*ks)[0]));
}

TEST(KernelParserTest, QuotedNamesAndNaNPayloads) {
  kir::Kernel k;
  k.name = "quoted";
  k.buffers = {kir::BufferDecl{"in put", DType::F32, 4, kir::BufferRole::Operand, 0, false},
               kir::BufferDecl{"var", DType::F32, 4, kir::BufferRole::Result, 0, true}};
  double payload;
  uint64_t bits = 0x7ff8000000000123ull;
  std::memcpy(&payload, &bits, sizeof bits);
  kir::ExprNode nan;
  nan.kind = kir::ExprKind::FloatImm;
  nan.type = DType::F32;
  nan.floatValue = payload;
  k.body =
      kir::forLoop("if", kir::intImm(4),
                   kir::store(1, kir::var("if"),
                              kir::op(OpKind::Add, {kir::load(0, DType::F32, kir::var("if")),
                                                    std::make_shared<const kir::ExprNode>(nan)})));
  std::string text = kir::printKernel(k);
  EXPECT_NE(text.find("kernel quoted(\"in put\": f32[4] operand 0, \"var\": f32[4]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("for \"if\" in 0..4 {"), std::string::npos) << text;
  EXPECT_NE(text.find("nan:0x7ff8000000000123f32"), std::string::npos) << text;
  expectRoundTrip(k, "quoted");
}

TEST(KernelParserTest, MalformedInputNamesLineAndColumn) {
  const char *kHead = "kernel k(x: f32[4] operand 0, y: f32[4] result 0 written) {\n";
  const struct {
    std::string text;
    const char *error;
  } cases[] = {
      {"", "t.kir:1:1: expected 'kernel', got end of file"},
      {"kernel k(x: f33[4] operand 0) {\n}", "t.kir:1:13: unknown dtype 'f33'"},
      {"kernel k(x: f32[4] input 0) {\n}", "t.kir:1:20: expected a buffer role"},
      {"kernel k(x: f32[4] operand 0, x: f32[4] operand 1) {\n}",
       "t.kir:1:31: buffer 'x' is declared twice"},
      {std::string(kHead) + "  y[0] = z[0]\n}", "t.kir:2:10: unknown buffer 'z'"},
      {std::string(kHead) + "  y[0] = x[j]\n}",
       "t.kir:2:12: 'j' is not a loop variable or local in scope"},
      {std::string(kHead) + "  for i in 1..4 {\n  }\n}", "t.kir:2:12: loops start at 0, not 1"},
      {std::string(kHead) + "  for i in 0..4 sideways {\n  }\n}",
       "t.kir:2:17: unknown loop kind 'sideways'"},
      {std::string(kHead) + "  y[0] = x[0] + 1\n}",
       "t.kir:2:15: 'add' operand dtypes differ: f32 and i64"},
      {std::string(kHead) + "  y[0] = 1.5\n}",
       "t.kir:2:10: float immediate '1.5' needs its dtype, e.g. 0.5f32"},
      {std::string(kHead) + "  y[0] = 300i8\n}", "t.kir:2:10: 300i8 is out of range for i8"},
      {std::string(kHead) + "  y[0] = frobnicate(x[0])\n}", "t.kir:2:10: unknown op 'frobnicate'"},
      {std::string(kHead) + "  y[0] = libm.sin(x[0])\n}",
       "t.kir:2:10: unknown math function 'sin'"},
      {std::string(kHead) + "  var (a, b): f32x4 = x[0..+4]\n}",
       "t.kir:2:15: f32x4 has 4 lanes but 2 locals are declared"},
      {std::string(kHead) + "  y[0] = x[0] $\n}", "t.kir:2:15: unexpected character '$'"},
      {std::string(kHead) + "  y[0] = x[0] " + std::string(1, '\0') + "\n}",
       "t.kir:2:15: unexpected character byte 0x00"},
      {std::string(kHead) + "  y[0] = x[0]\n", "t.kir:3:1: expected a statement or '}'"},
      {std::string(kHead) + "}\nschedule: spin(i)", "t.kir:3:11: unknown schedule step 'spin'"},
      {"kernel \"a b\"() {\n}", "t.kir:1:8: kernel name 'a b' is not a C identifier"},
      {std::string(kHead) + "}\n" + kHead + "}",
       "t.kir:3:8: a kernel named 'k' is already defined"},
      {std::string(kHead) + "  y[0] = " + std::string(2000, '(') + "x[0]\n}", "nest too deeply"},
  };
  for (const auto &c : cases) {
    Expected<std::vector<kir::Kernel>> ks = kir::parseKernels(c.text, "t.kir");
    ASSERT_FALSE(ks) << c.text;
    EXPECT_NE(ks.error().message().find(c.error), std::string::npos)
        << "got: " << ks.error().message() << "\nwant: " << c.error;
  }
}

TEST(KernelParserTest, VerifierStillJudgesParsedKernels) {
  // Parsing resolves names and types; the rest (bounds, scopes of assignment, GPU nesting) is
  // the verifier's.
  const char *text = R"(kernel k(x: f32[4] operand 0, y: f32[4] result 0) {
  y[7] = x[0]
})";
  Expected<std::vector<kir::Kernel>> ks = kir::parseKernels(text);
  ASSERT_TRUE(ks) << ks.error().message();
  Error e = kir::verifyKernel((*ks)[0]);
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("store to 'y' which is not marked written"), std::string::npos)
      << e.message();
}

} // namespace

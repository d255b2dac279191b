// Valid but hostile models (issue 18): each must end in a clear Error naming the place, or in
// the right answer, quickly and without allocating what it asks for: a 2^40-element Expand, a
// Reshape to a negative product, shapes that only become huge once constant folding computes
// them, and a 10,000-node chain (no recursive pass, printer, parser or verifier may overflow
// the stack on it). The models are built here with the ONNX protobuf.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "TestTarget.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/TensorLimit.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Passes.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "onnx.pb.h"

using namespace nnc;

namespace {

/// CPU seconds this process has used (all its threads). The time bounds below are on CPU
/// time, not wall time: other jobs on a busy machine do not add to it (a hang that uses no CPU
/// is ctest's timeout's to catch).
double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double secondsSince(double t0) {
  return cpuSeconds() - t0;
}

/// A model under construction: opset 13, float graph inputs and outputs.
struct Model {
  onnx::ModelProto m;
  onnx::GraphProto *g;
  Model() {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    g = m.mutable_graph();
    g->set_name("hostile");
  }
  void io(bool input, const std::string &name, const std::vector<int64_t> &dims) {
    onnx::ValueInfoProto *vi = input ? g->add_input() : g->add_output();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  void ints(const std::string &name, const std::vector<int64_t> &v) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
  }
  void floats(const std::string &name, const std::vector<int64_t> &dims,
              const std::vector<float> &v) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float x : v)
      t->add_float_data(x);
  }
  void node(const std::string &op, const std::vector<std::string> &in,
            const std::vector<std::string> &out, const std::string &name) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string &s : in)
      n->add_input(s);
    for (const std::string &s : out)
      n->add_output(s);
  }
  std::string write(const std::string &tag) const {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("nnc-hostile-" + std::to_string(getpid()) + "-" + tag + ".onnx"))
                           .string();
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path;
  }
};

PassContext::Evaluator evaluator() {
  return [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
}

/// Imports (folding constants) and runs the default pipeline.
Expected<std::unique_ptr<Graph>> importAndOptimize(const Model &model, const std::string &tag) {
  std::string path = model.write(tag);
  ImportOptions opts;
  opts.evaluate = evaluator();
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path, opts);
  std::filesystem::remove(path);
  if (!g)
    return g;
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = evaluator();
  NNC_TRY(PassPipeline::defaultPipeline().run(**g, ctx));
  return g;
}

CpuOptions cpuOptions() {
  CpuOptions o(testenv::testCpu());
  o.threads = 1;
  o.codegen.cacheDir = "";
  return o;
}

/// The model must fail somewhere between import and a CPU run, with a message that contains
/// `want` and (when given) names `node`; interpreting and compiling for the CPU both count.
void expectCleanError(const Model &model, const std::string &tag, const std::vector<Tensor> &in,
                      const std::string &want, const std::string &node) {
  double t0 = cpuSeconds();
  Expected<std::unique_ptr<Graph>> g = importAndOptimize(model, tag);
  std::vector<std::string> errors;
  if (!g) {
    errors.push_back(g.error().message());
  } else {
    Expected<std::vector<Tensor>> r = interpret(**g, in);
    EXPECT_FALSE(r) << tag << ": the interpreter ran it";
    if (!r)
      errors.push_back(r.error().message());
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(**g, cpuOptions());
    if (!exe) {
      errors.push_back(exe.error().message());
    } else {
      Expected<std::vector<Tensor>> c = (*exe)->run(in);
      EXPECT_FALSE(c) << tag << ": the CPU executable ran it";
      if (!c)
        errors.push_back(c.error().message());
    }
  }
  for (const std::string &e : errors) {
    EXPECT_NE(e.find(want), std::string::npos) << tag << ": " << e;
    if (!node.empty()) {
      EXPECT_NE(e.find("'" + node + "'"), std::string::npos) << tag << ": " << e;
    }
    EXPECT_EQ(e.find("internal error"), std::string::npos) << tag << ": " << e;
  }
  EXPECT_LT(secondsSince(t0), 20.0) << tag;
}

Tensor f32(const Extents &e, float start = 1) {
  Tensor t = Tensor::zeros(DType::F32, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

// Expand of a 1-element tensor to [2^20, 2^20] (2^40 elements, 4 TiB).
TEST(HostileModel, ExpandTo2Pow40Elements) {
  Model m;
  m.io(true, "x", {1});
  m.io(false, "y", {int64_t(1) << 20, int64_t(1) << 20});
  m.ints("shape", {int64_t(1) << 20, int64_t(1) << 20});
  m.node("Expand", {"x", "shape"}, {"y"}, "expand_huge");
  expectCleanError(m, "expand", {f32({1})}, "too large", "expand_huge");
}

// Reshape to a shape with negative entries whose product is positive ([-2, -3] of 6
// elements), and to [3, -2].
TEST(HostileModel, ReshapeToNegativeProduct) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{-2, -3}, {3, -2}, {-1, -1}}) {
    Model m;
    m.io(true, "x", {2, 3});
    m.io(false, "y", {2, 3});
    m.ints("shape", shape);
    m.node("Reshape", {"x", "shape"}, {"y"}, "reshape_neg");
    expectCleanError(m, "reshape", {f32({2, 3})}, "reshape_neg", "");
  }
}

// Shapes that only become huge once folding computes them: ConstantOfShape of s * s with
// s = [2^20, 2^20] (2^80 elements: the count overflows int64), and of s * 2 (2^42).
TEST(HostileModel, ShapesThatBlowUpAfterFolding) {
  {
    Model m;
    m.io(true, "x", {1});
    m.io(false, "y", {int64_t(1) << 40, int64_t(1) << 40});
    m.ints("s", {int64_t(1) << 20, int64_t(1) << 20});
    m.node("Mul", {"s", "s"}, {"t"}, "square");
    m.node("ConstantOfShape", {"t"}, {"y"}, "fill");
    expectCleanError(m, "fold-overflow", {f32({1})}, "fill", "fill");
  }
  {
    Model m;
    m.io(true, "x", {1});
    m.io(false, "y", {int64_t(1) << 21, int64_t(1) << 21});
    m.ints("s", {int64_t(1) << 20, int64_t(1) << 20});
    m.ints("two", {2, 2});
    m.node("Mul", {"s", "two"}, {"t"}, "double");
    m.node("ConstantOfShape", {"t"}, {"c"}, "fill");
    m.node("Add", {"c", "x"}, {"y"}, "add");
    expectCleanError(m, "fold-huge", {f32({1})}, "byte limit", "fill");
  }
}

// A Range whose length (2^31) is only known once evaluated: folding it must not allocate and
// fill 8 GiB to find out it is too large to keep (it stays in the graph, and running it is
// the clear error). Bounded by the folding's tensor byte limit, it is quick.
TEST(HostileModel, DataDependentFoldIsBounded) {
  Model m;
  m.io(true, "x", {1});
  m.io(false, "y", {1});
  m.floats("a", {}, {0.0f});
  m.floats("b", {}, {2147483648.0f});
  m.floats("d", {}, {1.0f});
  m.node("Range", {"a", "b", "d"}, {"r"}, "range");
  m.node("ReduceSum", {"r"}, {"s"}, "sum");
  m.g->mutable_node(1)->add_attribute()->set_name("keepdims");
  m.g->mutable_node(1)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  m.g->mutable_node(1)->mutable_attribute(0)->set_i(0);
  m.node("Add", {"s", "x"}, {"y"}, "add");
  double t0 = cpuSeconds();
  Expected<std::unique_ptr<Graph>> g = importAndOptimize(m, "range");
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_LT(secondsSince(t0), 5.0);
  bool rangeKept = false;
  for (const Node *n : (*g)->nodes())
    rangeKept = rangeKept || n->kind() == OpKind::Range;
  EXPECT_TRUE(rangeKept) << printGraph(**g);
  {
    // Under a limit lower than the Range's 8 GiB, running it is a clean error.
    TensorByteLimit limit(int64_t(1) << 30);
    Expected<std::vector<Tensor>> r = interpret(**g, {f32({1})});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find("range"), std::string::npos) << r.error().message();
  }
}

// The folding limit is on what a fold adds to the model, not on its result's size: a weight
// of more than 2^24 elements is still transposed at compile time (a Gemm's transB, as
// AlexNet's and VGG's classifiers export it, was transposed on every run), while an Expand
// that would make as many elements out of one is refused.
TEST(HostileModel, FoldingMovesLargeWeightsButRefusesGrowth) {
  const int64_t rows = 4100, cols = 4097; // 16,797,700 elements, above 2^24
  Graph g("fold");
  Tensor w = Tensor::zeros(DType::F32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; i += 4099)
    w.data<float>()[i] = static_cast<float>(i % 7);
  auto f32Of = [](const Extents &e) { return TensorType(DType::F32, shapeFromExtents(e)); };
  Value *wv = g.createNode(OpKind::Constant, {}, {w.type()}, {{"value", w}})->result();
  Node *t = g.createNode(OpKind::Transpose, {wv}, {f32Of({cols, rows})},
                         {{"perm", std::vector<int64_t>{1, 0}}}, "transpose");
  Tensor one = Tensor::fromVector<float>(DType::F32, {1}, {2.0f});
  Tensor shape = Tensor::fromVector<int64_t>(DType::I64, {2}, {rows, cols});
  Value *ov = g.createNode(OpKind::Constant, {}, {one.type()}, {{"value", one}})->result();
  Value *sv = g.createNode(OpKind::Constant, {}, {shape.type()}, {{"value", shape}})->result();
  Node *e = g.createNode(OpKind::Expand, {ov, sv}, {f32Of({rows, cols})}, {}, "expand");
  Value *tr = t->result(), *er = e->result();
  g.setOutputs({tr, er});
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = evaluator();
  double t0 = cpuSeconds();
  Expected<bool> changed = createConstantFoldPass()->run(g, ctx);
  ASSERT_TRUE(changed) << changed.error().message();
  EXPECT_LT(secondsSince(t0), 20.0);
  ASSERT_NE(g.outputs()[0]->producer(), nullptr);
  ASSERT_EQ(g.outputs()[0]->producer()->kind(), OpKind::Constant);
  const Tensor &folded = g.outputs()[0]->producer()->getTensor("value");
  ASSERT_EQ(folded.extents(), (Extents{cols, rows}));
  for (int64_t i = 0; i < rows * cols; i += 4099) {
    int64_t r = i / cols, c = i % cols;
    ASSERT_EQ(folded.data<float>()[c * rows + r], w.data<float>()[i]) << "element " << i;
  }
  ASSERT_NE(g.outputs()[1]->producer(), nullptr);
  EXPECT_EQ(g.outputs()[1]->producer()->kind(), OpKind::Expand);
}

// 10,000 Adds in a chain: import, the default pipeline (which fuses them into one kernel),
// the verifier, print and parse, the interpreter and the CPU code all take it, and fast.
TEST(HostileModel, TenThousandDeepChain) {
  constexpr int kDepth = 10000;
  Model m;
  m.io(true, "x", {2, 3});
  m.io(false, "y", {2, 3});
  m.floats("one", {}, {1.0f});
  for (int i = 0; i < kDepth; ++i)
    m.node("Add", {i == 0 ? "x" : "t" + std::to_string(i - 1), "one"},
           {i == kDepth - 1 ? "y" : "t" + std::to_string(i)}, "add" + std::to_string(i));
  double t0 = cpuSeconds();
  Expected<std::unique_ptr<Graph>> g = importAndOptimize(m, "deep");
  ASSERT_TRUE(g) << g.error().message();
  double optimizeSeconds = secondsSince(t0);
  EXPECT_FALSE(verify(**g));
  std::string text = printGraph(**g);
  Expected<std::unique_ptr<Graph>> parsed = parseGraph(text, "deep.nir");
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(printGraph(**parsed), text);
  EXPECT_FALSE(verify(**parsed));

  // The unoptimized chain too: 10,000 nodes in the text form.
  std::string path = m.write("deep-raw");
  Expected<std::unique_ptr<Graph>> raw = importOnnxFile(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(raw) << raw.error().message();
  EXPECT_GE((*raw)->nodes().size(), size_t(kDepth));
  std::string rawText = printGraph(**raw);
  Expected<std::unique_ptr<Graph>> rawParsed = parseGraph(rawText, "deep-raw.nir");
  ASSERT_TRUE(rawParsed) << rawParsed.error().message();
  EXPECT_FALSE(verify(**rawParsed));

  Tensor x = f32({2, 3});
  Expected<std::vector<Tensor>> r = interpret(**raw, {x});
  ASSERT_TRUE(r) << r.error().message();
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ((*r)[0].data<float>()[i], x.data<float>()[i] + kDepth) << i;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**g, cpuOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  // Fusion groups stop at 256 members: one 10,000-deep expression overflowed the stack of
  // the walks over it (found by ASan).
  EXPECT_GE((*exe)->kernels().size(), size_t(kDepth / 256));
  Expected<std::vector<Tensor>> c = (*exe)->run({x});
  ASSERT_TRUE(c) << c.error().message();
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ((*c)[0].data<float>()[i], x.data<float>()[i] + kDepth) << i;
  // Linear passes take a fraction of a second on 10,000 nodes; a quadratic one takes many.
  EXPECT_LT(optimizeSeconds, 30.0);
}

} // namespace

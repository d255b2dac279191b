// Tests of the ONNX importer core: model reading, tensor files and every kind of bad input.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Printer.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Float16.h"
#include "onnx.pb.h"
#include "OnnxProtoUtil.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

/// A fresh temporary folder, removed at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "nnc-onnx-XXXXXX").string();
    char *p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string &name) const { return (fs::path(path_) / name).string(); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

onnx::ModelProto newModel(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void addInput(onnx::ModelProto &m, const std::string &name, int elemType,
              const std::vector<int64_t> &dims, const std::string &firstParam = "") {
  auto *vi = m.mutable_graph()->add_input();
  vi->set_name(name);
  auto *tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto *s = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto *d = s->add_dim();
    if (i == 0 && !firstParam.empty())
      d->set_dim_param(firstParam);
    else
      d->set_dim_value(dims[i]);
  }
}

onnx::NodeProto *addNode(onnx::ModelProto &m, const std::string &op, const std::string &name,
                         const std::vector<std::string> &ins,
                         const std::vector<std::string> &outs) {
  return testonnx::addNode(m.mutable_graph(), op, name, ins, outs);
}

void addOutput(onnx::ModelProto &m, const std::string &name) {
  m.mutable_graph()->add_output()->set_name(name);
}

onnx::TensorProto *addFloatInit(onnx::ModelProto &m, const std::string &name,
                                const std::vector<int64_t> &dims, const std::vector<float> &v) {
  auto *t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t->add_dims(d);
  for (float f : v)
    t->add_float_data(f);
  return t;
}

std::string save(const TempDir &dir, const onnx::ModelProto &m,
                 const std::string &name = "model.onnx") {
  std::string path = dir.file(name);
  writeBytes(path, m.SerializeAsString());
  return path;
}

/// Imports and expects failure; returns the message.
std::string importError(const std::string &path) {
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path);
  EXPECT_FALSE(g) << "import unexpectedly succeeded";
  return g ? std::string() : g.error().message();
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// x[N,3] -> Relu -> Add(bias) -> y
onnx::ModelProto tinyModel() {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {0, 3}, "N");
  addFloatInit(m, "bias", {3}, {1, 2, 3});
  addNode(m, "Relu", "relu1", {"x"}, {"r"});
  addNode(m, "Add", "add1", {"r", "bias"}, {"y"});
  addOutput(m, "y");
  return m;
}

} // namespace

TEST(OnnxImporter, ImportsTinyModel) {
  TempDir dir;
  std::string path = save(dir, tinyModel());
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path);
  ASSERT_TRUE(g) << g.error().message();
  Graph &graph = **g;
  ASSERT_EQ(graph.inputs().size(), 1u);
  EXPECT_EQ(graph.inputs()[0]->name(), "x");
  EXPECT_EQ(graph.inputs()[0]->type().str(), "f32[N,3]");
  ASSERT_EQ(graph.outputs().size(), 1u);
  EXPECT_EQ(graph.outputs()[0]->name(), "y");
  EXPECT_NE(graph.findValue("r"), nullptr);
  EXPECT_EQ(graph.outputs()[0]->producer()->name(), "add1");

  Tensor x = Tensor::fromVector<float>(DType::F32, {2, 3}, {-1, 2, -3, 4, -5, 6});
  Expected<std::vector<Tensor>> out = interpret(graph, {x});
  ASSERT_TRUE(out) << out.error().message();
  const float *y = (*out)[0].data<float>();
  std::vector<float> want = {1, 4, 3, 5, 2, 9};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y[i], want[i]) << i;
}

TEST(OnnxImporter, OutputsThatAreInputsOrInitializers) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2});
  addFloatInit(m, "w", {2}, {7, 8});
  // Old-style model: the initializer is also listed as a graph input.
  addInput(m, "w", onnx::TensorProto::FLOAT, {2});
  addOutput(m, "x");
  addOutput(m, "w");
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(save(dir, m));
  ASSERT_TRUE(g) << g.error().message();
  ASSERT_EQ((*g)->inputs().size(), 1u); // the initializer-backed input is a constant
  Tensor x = Tensor::fromVector<float>(DType::F32, {2}, {1, 2});
  Expected<std::vector<Tensor>> out = interpret(**g, {x});
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ((*out)[0].data<float>()[1], 2);
  EXPECT_EQ((*out)[1].data<float>()[0], 7);
}

TEST(OnnxImporter, ConstantNodeAndFolding) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2, 3});
  auto *c = addNode(m, "Constant", "c", {}, {"two"});
  auto *a = c->add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.0f);
  addNode(m, "Mul", "mul", {"x", "two"}, {"y"});
  addNode(m, "Size", "size", {"x"}, {"n"});
  addOutput(m, "y");
  addOutput(m, "n");
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(save(dir, m));
  ASSERT_TRUE(g) << g.error().message();
  Tensor x = Tensor::fromVector<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Expected<std::vector<Tensor>> out = interpret(**g, {x});
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ((*out)[0].data<float>()[5], 12);
  EXPECT_EQ((*out)[1].data<int64_t>()[0], 6);
}

TEST(OnnxImporter, CheckListsEveryIssue) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2});
  addNode(m, "FancyOp", "f1", {"x"}, {"a"});
  auto *r = addNode(m, "Relu", "r1", {"a"}, {"b"});
  auto *att = r->add_attribute();
  att->set_name("weird");
  att->set_type(onnx::AttributeProto::INT);
  att->set_i(1);
  addNode(m, "OtherOp", "", {"b"}, {"c"});
  addOutput(m, "c");
  Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(save(dir, m));
  ASSERT_TRUE(issues) << issues.error().message();
  ASSERT_EQ(issues->size(), 3u);
  EXPECT_EQ((*issues)[0].node, "f1");
  EXPECT_EQ((*issues)[0].opType, "FancyOp");
  EXPECT_TRUE(contains((*issues)[1].message, "weird"));
  EXPECT_EQ((*issues)[2].node, "#2");
}

TEST(OnnxImporter, CheckWalksSubgraphsAndNamesThePath) {
  // An If whose then_branch holds an operator nnc lacks, and whose else_branch holds a Loop
  // (unnamed) whose body holds another: each is reported with the path to it.
  TempDir dir;
  onnx::ModelProto m = newModel(13);
  addInput(m, "c", onnx::TensorProto::BOOL, {});
  addInput(m, "x", onnx::TensorProto::FLOAT, {4});
  onnx::NodeProto *cond = addNode(m, "If", "nms_if", {"c"}, {"y"});
  onnx::AttributeProto *thenA = cond->add_attribute();
  thenA->set_name("then_branch");
  thenA->set_type(onnx::AttributeProto::GRAPH);
  onnx::NodeProto *nms = thenA->mutable_g()->add_node();
  nms->set_op_type("FancyNms");
  nms->set_name("nms");
  nms->add_input("x");
  nms->add_output("t");
  thenA->mutable_g()->add_output()->set_name("t");
  onnx::AttributeProto *elseA = cond->add_attribute();
  elseA->set_name("else_branch");
  elseA->set_type(onnx::AttributeProto::GRAPH);
  onnx::NodeProto *ok = elseA->mutable_g()->add_node();
  ok->set_op_type("Relu");
  ok->set_name("fine");
  ok->add_input("x");
  ok->add_output("r");
  onnx::NodeProto *loop = elseA->mutable_g()->add_node();
  loop->set_op_type("Loop");
  loop->add_input("");
  loop->add_input("c");
  loop->add_output("e");
  onnx::AttributeProto *body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  onnx::NodeProto *inner = body->mutable_g()->add_node();
  inner->set_op_type("OtherOp");
  inner->set_name("deep");
  elseA->mutable_g()->add_output()->set_name("e");
  addOutput(m, "y");
  Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(save(dir, m));
  ASSERT_TRUE(issues) << issues.error().message();
  std::vector<std::string> places;
  for (const OnnxIssue &i : *issues)
    places.push_back(i.place() + " (" + i.opType + ")");
  // If and Loop are supported: only the nested issues remain.
  EXPECT_EQ(places, (std::vector<std::string>{
                        "If 'nms_if' / then_branch / node 'nms' (FancyNms)",
                        "If 'nms_if' / else_branch / Loop '#1' / body / node 'deep' (OtherOp)"}))
      << ::testing::PrintToString(places);
  for (const OnnxIssue &i : *issues)
    EXPECT_NE(i.node, "fine") << "a supported node is reported: " << i.message;
}

TEST(OnnxImporter, ModelParsedOnceChecksListsAndImports) {
  TempDir dir;
  onnx::ModelProto m = tinyModel();
  // A raw_data initializer that old-style models also list as a graph input.
  auto *w = m.mutable_graph()->add_initializer();
  w->set_name("scale");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  const float scale[] = {0.5f, -1.0f, 4.0f};
  w->set_raw_data(std::string(reinterpret_cast<const char *>(scale), sizeof(scale)));
  addInput(m, "scale", onnx::TensorProto::FLOAT, {3});
  addNode(m, "Mul", "mul1", {"y", "scale"}, {"z"});
  m.mutable_graph()->mutable_output(0)->set_name("z");
  std::string path = save(dir, m);

  Expected<std::unique_ptr<OnnxModel>> model = OnnxModel::load(path);
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_TRUE((*model)->check().empty());
  EXPECT_EQ((*model)->inputNames(), std::vector<std::string>{"x"});
  Expected<std::vector<std::string>> names = onnxGraphInputNames(path);
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, (*model)->inputNames());
  Expected<std::unique_ptr<Graph>> once = (*model)->import();
  ASSERT_TRUE(once) << once.error().message();
  Expected<std::unique_ptr<Graph>> fresh = importOnnxFile(path);
  ASSERT_TRUE(fresh) << fresh.error().message();
  EXPECT_EQ(printGraph(**once), printGraph(**fresh));
  Tensor x = Tensor::fromVector<float>(DType::F32, {1, 3}, {-1, 2, 3});
  Expected<std::vector<Tensor>> out = interpret(**once, {x});
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ((*out)[0].data<float>()[0], 0.5f);  // (relu(-1) + 1) * 0.5
  EXPECT_EQ((*out)[0].data<float>()[1], -4.0f); // (2 + 2) * -1
  EXPECT_EQ((*out)[0].data<float>()[2], 24.0f); // (3 + 3) * 4

  EXPECT_FALSE(OnnxModel::load(dir.file("missing.onnx")));
}

// ---- Tensor files ----------------------------------------------------------------------------

TEST(OnnxTensorFiles, TensorProtoRoundTrip) {
  TempDir dir;
  std::vector<Tensor> tensors = {
      Tensor::fromVector<float>(DType::F32, {2, 2}, {1.5f, -2, 0, 3}),
      Tensor::fromVector<double>(DType::F64, {3}, {1e300, -1, 0.25}),
      Tensor::fromVector<uint16_t>(DType::F16, {2}, {floatToHalf(1.5f), floatToHalf(-3)}),
      Tensor::fromVector<int64_t>(DType::I64, {2}, {INT64_MIN, 42}),
      Tensor::fromVector<bool>(DType::Bool, {3}, {true, false, true}),
      Tensor::fromVector<uint8_t>(DType::U8, {}, {200}),
      Tensor::fromVector<int32_t>(DType::I32, {0, 4}, {}),
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string path = dir.file("t" + std::to_string(i) + ".pb");
    ASSERT_FALSE(writeTensorProtoFile(path, tensors[i], "t"));
    std::string name;
    Expected<Tensor> back = readTensorProtoFile(path, &name);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(name, "t");
    EXPECT_TRUE(back->bitwiseEqual(tensors[i])) << dtypeName(tensors[i].dtype());
  }
}

TEST(OnnxTensorFiles, PackedSubByteTypes) {
  TempDir dir;
  // i4 elements hold their 4 bits in the low bits of each byte: -8 is 0x8, -1 is 0xf.
  Tensor i4 = Tensor::fromVector<uint8_t>(DType::I4, {5}, {0x8, 0xf, 0x7, 0x0, 0x1});
  std::string path = dir.file("i4.pb");
  ASSERT_FALSE(writeTensorProtoFile(path, i4, "q"));
  onnx::TensorProto p;
  {
    std::ifstream f(path, std::ios::binary);
    ASSERT_TRUE(p.ParseFromIstream(&f));
  }
  ASSERT_EQ(p.raw_data().size(), 3u); // two per byte, low nibble first
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[0]), 0xf8);
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[1]), 0x07);
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[2]), 0x01);
  Expected<Tensor> back = readTensorProtoFile(path);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_TRUE(back->bitwiseEqual(i4));

  // The typed field: int32_data carries the packed bytes for 4-bit types.
  onnx::TensorProto q;
  q.set_data_type(onnx::TensorProto::UINT8 + 19); // UINT4 (21)
  q.add_dims(3);
  q.add_int32_data(0x21);
  q.add_int32_data(0x03);
  std::string qpath = dir.file("u4.pb");
  writeBytes(qpath, q.SerializeAsString());
  Expected<Tensor> u4 = readTensorProtoFile(qpath);
  ASSERT_TRUE(u4) << u4.error().message();
  EXPECT_EQ(u4->dtype(), DType::U4);
  EXPECT_EQ(u4->data<uint8_t>()[0], 1);
  EXPECT_EQ(u4->data<uint8_t>()[1], 2);
  EXPECT_EQ(u4->data<uint8_t>()[2], 3);

  // 2-bit types: four per byte.
  Tensor u2 = Tensor::fromVector<uint8_t>(DType::U2, {5}, {1, 2, 3, 0, 3});
  ASSERT_FALSE(writeTensorProtoFile(dir.file("u2.pb"), u2, "u"));
  Expected<Tensor> u2back = readTensorProtoFile(dir.file("u2.pb"));
  ASSERT_TRUE(u2back);
  EXPECT_TRUE(u2back->bitwiseEqual(u2));
}

TEST(OnnxTensorFiles, TypedFieldsAndBadTensors) {
  TempDir dir;
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  p.add_int32_data(floatToHalf(2.0f));
  p.add_int32_data(floatToHalf(-0.5f));
  writeBytes(dir.file("h.pb"), p.SerializeAsString());
  Expected<Tensor> h = readTensorProtoFile(dir.file("h.pb"));
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(halfToFloat(h->data<uint16_t>()[1]), -0.5f);

  p.add_int32_data(0); // three values for two elements
  writeBytes(dir.file("bad.pb"), p.SerializeAsString());
  Expected<Tensor> bad = readTensorProtoFile(dir.file("bad.pb"));
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message(), "bad.pb"));

  onnx::TensorProto s;
  s.set_name("strs");
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_dims(1);
  s.add_string_data("hi");
  writeBytes(dir.file("s.pb"), s.SerializeAsString());
  Expected<Tensor> st = readTensorProtoFile(dir.file("s.pb"));
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.error().message(), "strs"));
  EXPECT_TRUE(contains(st.error().message(), "string"));

  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  huge.add_dims(int64_t(1) << 40);
  huge.add_dims(int64_t(1) << 40);
  writeBytes(dir.file("huge.pb"), huge.SerializeAsString());
  EXPECT_FALSE(readTensorProtoFile(dir.file("huge.pb")));

  EXPECT_FALSE(readTensorProtoFile(dir.file("missing.pb")));
  writeBytes(dir.file("empty.pb"), "");
  EXPECT_FALSE(readTensorProtoFile(dir.file("empty.pb")));
}

TEST(OnnxTensorFiles, NpyRoundTrip) {
  TempDir dir;
  std::vector<Tensor> tensors = {
      Tensor::fromVector<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
      Tensor::fromVector<int64_t>(DType::I64, {1}, {-7}),
      Tensor::fromVector<bool>(DType::Bool, {2}, {false, true}),
      Tensor::fromVector<uint16_t>(DType::F16, {}, {floatToHalf(0.5f)}),
      Tensor::fromVector<int8_t>(DType::I8, {0}, {}),
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string path = dir.file("a" + std::to_string(i) + ".npy");
    ASSERT_FALSE(writeNpyFile(path, tensors[i]));
    Expected<Tensor> back = readNpyFile(path);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_TRUE(back->bitwiseEqual(tensors[i])) << dtypeName(tensors[i].dtype());
  }
  // Header layout: data starts at a multiple of 64 bytes.
  EXPECT_EQ(fs::file_size(dir.file("a0.npy")) % 64, (6 * 4) % 64);

  std::string header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
  header += std::string(128 - 10 - header.size() - 1, ' ') + "\n";
  std::string f = std::string("\x93NUMPY\x01\x00", 8);
  f += static_cast<char>(header.size());
  f += '\0';
  f += header + std::string(16, '\0');
  writeBytes(dir.file("fortran.npy"), f);
  Expected<Tensor> fo = readNpyFile(dir.file("fortran.npy"));
  ASSERT_FALSE(fo);
  EXPECT_TRUE(contains(fo.error().message(), "Fortran"));

  writeBytes(dir.file("junk.npy"), "not numpy");
  EXPECT_FALSE(readNpyFile(dir.file("junk.npy")));
}

// ---- Bad models ------------------------------------------------------------------------------

TEST(OnnxImporterErrors, UnreadableFiles) {
  TempDir dir;
  std::string missing = dir.file("nope.onnx");
  EXPECT_TRUE(contains(importError(missing), "nope.onnx"));

  std::string empty = dir.file("empty.onnx");
  writeBytes(empty, "");
  std::string e = importError(empty);
  EXPECT_TRUE(contains(e, "empty.onnx") && contains(e, "empty")) << e;

  std::string full = tinyModel().SerializeAsString();
  std::string truncated = dir.file("trunc.onnx");
  writeBytes(truncated, full.substr(0, full.size() * 2 / 3));
  EXPECT_TRUE(contains(importError(truncated), "trunc.onnx"));

  std::string garbage = dir.file("garbage.onnx");
  std::string bytes;
  for (int i = 0; i < 1000; ++i)
    bytes += static_cast<char>((i * 7919 + 13) & 0xff);
  writeBytes(garbage, bytes);
  EXPECT_TRUE(contains(importError(garbage), "garbage.onnx"));
  EXPECT_FALSE(checkOnnxFile(garbage));

  std::string text = dir.file("text.onnx");
  writeBytes(text, "hello, I am not a model\n");
  EXPECT_TRUE(contains(importError(text), "text.onnx"));
}

TEST(OnnxImporterErrors, UnknownOperatorAndDomain) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2});
  addNode(m, "NoSuchOp", "mystery", {"x"}, {"y"});
  addOutput(m, "y");
  std::string e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "mystery") && contains(e, "NoSuchOp")) << e;

  m.mutable_graph()->mutable_node(0)->set_op_type("Relu");
  m.mutable_graph()->mutable_node(0)->set_domain("com.example");
  e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "mystery") && contains(e, "com.example")) << e;
}

TEST(OnnxImporterErrors, DanglingInputAndCycle) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2});
  addNode(m, "Add", "adder", {"x", "ghost"}, {"y"});
  addOutput(m, "y");
  std::string e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "adder") && contains(e, "ghost") && contains(e, "dangling")) << e;

  onnx::ModelProto c = newModel();
  addInput(c, "x", onnx::TensorProto::FLOAT, {2});
  addNode(c, "Add", "a1", {"x", "b"}, {"a"});
  addNode(c, "Relu", "a2", {"a"}, {"b"});
  addOutput(c, "b");
  e = importError(save(dir, c, "cycle.onnx"));
  EXPECT_TRUE(contains(e, "a1") && contains(e, "'b'")) << e;
}

TEST(OnnxImporterErrors, AttributeOutOfRange) {
  TempDir dir;
  onnx::ModelProto m = newModel(13);
  addInput(m, "x", onnx::TensorProto::FLOAT, {2, 3});
  auto *n = addNode(m, "Softmax", "sm", {"x"}, {"y"});
  auto *a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(5);
  addOutput(m, "y");
  std::string e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "sm")) << e;
}

TEST(OnnxImporterErrors, BadInputDeclarations) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {int64_t(1) << 20, int64_t(1) << 20, 1024});
  addNode(m, "Relu", "r", {"x"}, {"y"});
  addOutput(m, "y");
  std::string e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "'x'") && contains(e, "large")) << e;

  onnx::ModelProto neg = newModel();
  addInput(neg, "x", onnx::TensorProto::FLOAT, {-3});
  addOutput(neg, "x");
  e = importError(save(dir, neg, "neg.onnx"));
  EXPECT_TRUE(contains(e, "'x'") && contains(e, "negative")) << e;

  onnx::ModelProto untyped = newModel();
  untyped.mutable_graph()->add_input()->set_name("u");
  addOutput(untyped, "u");
  e = importError(save(dir, untyped, "untyped.onnx"));
  EXPECT_TRUE(contains(e, "'u'")) << e;
}

TEST(OnnxImporterErrors, ExternalData) {
  TempDir dir;
  fs::create_directories(dir.file("m"));
  // 2 floats of external data in m/w.bin at offset 4.
  std::string data(12, '\0');
  float vals[2] = {3.5f, -1};
  std::memcpy(data.data() + 4, vals, 8);
  writeBytes(dir.file("m/w.bin"), data);
  writeBytes(dir.file("outside.bin"), data);

  auto model = [&](const std::string &location, int64_t offset) {
    onnx::ModelProto m = newModel();
    auto *t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
    addOutput(m, "w");
    std::string path = dir.file("m/model.onnx");
    writeBytes(path, m.SerializeAsString());
    return path;
  };

  Expected<std::unique_ptr<Graph>> ok = importOnnxFile(model("w.bin", 4));
  ASSERT_TRUE(ok) << ok.error().message();
  Expected<std::vector<Tensor>> out = interpret(**ok, {});
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ((*out)[0].data<float>()[0], 3.5f);

  std::string e = importError(model("../outside.bin", 4));
  EXPECT_TRUE(contains(e, "'w'") && contains(e, "escapes")) << e;
  e = importError(model(dir.file("outside.bin"), 4));
  EXPECT_TRUE(contains(e, "'w'") && contains(e, "absolute")) << e;
  e = importError(model("nothere.bin", 0));
  EXPECT_TRUE(contains(e, "'w'") && contains(e, "does not exist")) << e;
  e = importError(model("w.bin", 8)); // 4 bytes left, 8 needed
  EXPECT_TRUE(contains(e, "'w'") && contains(e, "too short")) << e;

  // A symlink inside the folder that points outside it.
  fs::create_symlink(dir.file("outside.bin"), dir.file("m/link.bin"));
  e = importError(model("link.bin", 4));
  EXPECT_TRUE(contains(e, "'w'") && contains(e, "escapes")) << e;
}

TEST(OnnxImporterErrors, UnsupportedConstructs) {
  TempDir dir;
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {2});
  auto *n = addNode(m, "If", "branch", {"x"}, {"y"});
  auto *a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("t");
  addOutput(m, "y");
  std::string e = importError(save(dir, m));
  EXPECT_TRUE(contains(e, "branch")) << e;

  onnx::ModelProto c = newModel();
  auto *cn = addNode(c, "Constant", "strconst", {}, {"s"});
  auto *ca = cn->add_attribute();
  ca->set_name("value_string");
  ca->set_type(onnx::AttributeProto::STRING);
  ca->set_s("hi");
  addOutput(c, "s");
  e = importError(save(dir, c, "str.onnx"));
  EXPECT_TRUE(contains(e, "strconst")) << e;
}

TEST(OnnxImporter, LegacyBroadcastAndCastByName) {
  TempDir dir;
  onnx::ModelProto m = newModel(5);
  addInput(m, "x", onnx::TensorProto::FLOAT, {2, 3, 2});
  addFloatInit(m, "b", {3}, {10, 20, 30});
  auto *n = addNode(m, "Add", "add", {"x", "b"}, {"s"});
  auto *a = n->add_attribute();
  a->set_name("broadcast");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto *c = addNode(m, "Cast", "cast", {"s"}, {"y"});
  a = c->add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("INT32");
  addOutput(m, "y");
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(save(dir, m));
  ASSERT_TRUE(g) << g.error().message();
  Tensor x = Tensor::fromVector<float>(DType::F32, {2, 3, 2}, std::vector<float>(12, 1.5f));
  Expected<std::vector<Tensor>> out = interpret(**g, {x});
  ASSERT_TRUE(out) << out.error().message();
  ASSERT_EQ((*out)[0].dtype(), DType::I32);
  EXPECT_EQ((*out)[0].data<int32_t>()[0], 11);
  EXPECT_EQ((*out)[0].data<int32_t>()[3], 21);
  EXPECT_EQ((*out)[0].data<int32_t>()[11], 31);
}

TEST(OnnxImporter, KnownInputsGiveCompileTimeValues) {
  TempDir dir;
  onnx::ModelProto m = newModel(18);
  addInput(m, "x", onnx::TensorProto::FLOAT, {2, 3});
  addInput(m, "axes", onnx::TensorProto::INT64, {1});
  addNode(m, "ReduceSum", "rs", {"x", "axes"}, {"y"});
  addOutput(m, "y");
  std::string path = save(dir, m);
  // Without the value the axes are only known at run time.
  Expected<std::unique_ptr<Graph>> bad = importOnnxFile(path);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message(), "rs")) << bad.error().message();
  ImportOptions opts;
  opts.knownInputs["axes"] = Tensor::fromVector<int64_t>(DType::I64, {1}, {1});
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path, opts);
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ((*g)->inputs().size(), 2u);
  EXPECT_EQ((*g)->outputs()[0]->type().str(), "f32[2,1]"); // keepdims defaults to 1
}

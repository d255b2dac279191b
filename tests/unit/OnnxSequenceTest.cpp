// Tests of the static sequences and optionals of the ONNX importer: the sequence operators
// resolved to tensor ops at import time, sequence inputs and outputs at the boundary, and the
// errors when a position or a length is only known at run time.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/Interpreter.h"
#include "onnx.pb.h"
#include "OnnxProtoUtil.h"

using namespace nnc;

namespace {

class Model {
public:
  explicit Model(int64_t opset = 17) {
    model_.set_ir_version(8);
    onnx::OperatorSetIdProto *o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }
  /// A tensor input of static shape.
  void input(const std::string &name, DType t, const Extents &dims) {
    onnx::ValueInfoProto *vi = model_.mutable_graph()->add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtypeToOnnx(t));
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  /// A sequence-of-tensors input or output (shapes unknown, as exporters write them).
  onnx::ValueInfoProto *sequence(onnx::ValueInfoProto *vi, const std::string &name, DType t) {
    vi->set_name(name);
    vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        dtypeToOnnx(t));
    return vi;
  }
  void sequenceInput(const std::string &name, DType t) {
    sequence(model_.mutable_graph()->add_input(), name, t);
  }
  void sequenceOutput(const std::string &name, DType t) {
    sequence(model_.mutable_graph()->add_output(), name, t);
  }
  void output(const std::string &name) { model_.mutable_graph()->add_output()->set_name(name); }
  onnx::NodeProto *node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs, const std::string &name) {
    return testonnx::addNode(model_.mutable_graph(), op, name, ins, outs);
  }
  static void intAttr(onnx::NodeProto *n, const std::string &name, int64_t v) {
    testonnx::addIntAttr(n, name, v);
  }
  void constant(const std::string &name, int64_t v) {
    onnx::NodeProto *n = node("Constant", {}, {name}, name + "_const");
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_int64_data(v);
  }
  Expected<std::unique_ptr<Graph>> import(const ImportOptions &opts = {},
                                          OnnxBoundary *boundary = nullptr) {
    static int counter = 0;
    std::filesystem::path p = std::filesystem::path(testing::TempDir()) /
                              ("nnc_onnxseq_" + std::to_string(::getpid()) + "_" +
                               std::to_string(counter++) + ".onnx");
    {
      std::ofstream f(p, std::ios::binary);
      model_.SerializeToOstream(&f);
    }
    auto g = importOnnxFile(p.string(), opts, boundary);
    std::filesystem::remove(p);
    return g;
  }

private:
  onnx::ModelProto model_;
};

Tensor f32(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}

std::vector<float> floats(const Tensor &t) {
  std::vector<float> r;
  for (int64_t i = 0; i < t.numElements(); ++i)
    r.push_back(static_cast<float>(t.elementAsDouble(i)));
  return r;
}

/// A sequence of the given tensor types (ImportOptions::inputForms).
ValueForm sequenceForm(DType t, const std::vector<Extents> &shapes) {
  ValueForm f;
  f.kind = ValueForm::Kind::Sequence;
  f.dtype = t;
  for (const Extents &e : shapes) {
    Shape s;
    for (int64_t d : e)
      s.push_back(Dim(d));
    f.elements.push_back(TensorType(t, s));
  }
  return f;
}

// Construct, insert at a constant position, erase, concatenate: all resolved while
// importing, so the graph holds only tensor ops.
TEST(OnnxSequence, OperatorsResolveToTensorOps) {
  Model m;
  m.input("a", DType::F32, {2});
  m.input("b", DType::F32, {2});
  m.input("c", DType::F32, {2});
  m.node("SequenceConstruct", {"a", "b"}, {"s0"}, "construct");
  m.constant("one", 1);
  m.node("SequenceInsert", {"s0", "c", "one"}, {"s1"}, "insert"); // a c b
  m.constant("zero", 0);
  m.node("SequenceErase", {"s1", "zero"}, {"s2"}, "erase"); // c b
  Model::intAttr(m.node("ConcatFromSequence", {"s2"}, {"y"}, "concat"), "axis", 0);
  m.node("SequenceLength", {"s1"}, {"n"}, "length");
  m.output("y");
  m.output("n");
  auto g = m.import();
  ASSERT_TRUE(bool(g)) << g.error().message();
  auto outs = interpret(**g, {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {5, 6})});
  ASSERT_TRUE(bool(outs)) << outs.error().message();
  EXPECT_EQ(floats((*outs)[0]), (std::vector<float>{5, 6, 3, 4}));
  EXPECT_EQ((*outs)[1].elementAsInt(0), 3);
}

// A sequence input of a given length becomes that many graph inputs; a sequence output
// as many graph outputs, and the boundary says how they group.
TEST(OnnxSequence, SequenceInputsAndOutputs) {
  Model m;
  m.sequenceInput("xs", DType::F32);
  m.input("t", DType::F32, {3});
  m.node("SequenceInsert", {"xs", "t"}, {"ys"}, "append");
  m.sequenceOutput("ys", DType::F32);
  ImportOptions opts;
  opts.inputForms["xs"] = sequenceForm(DType::F32, {{1}, {2}});
  OnnxBoundary b;
  auto g = m.import(opts, &b);
  ASSERT_TRUE(bool(g)) << g.error().message();
  ASSERT_EQ((*g)->inputs().size(), 3u);
  EXPECT_EQ((*g)->inputs()[0]->name(), "xs.0");
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(b.outputs[0].kind, ValueForm::Kind::Sequence);
  EXPECT_EQ(b.outputs[0].elements.size(), 3u);
  EXPECT_EQ((*g)->outputs().size(), 3u);
}

// Without its length, a sequence input cannot be imported; the error names it.
TEST(OnnxSequence, SequenceInputNeedsItsLength) {
  Model m;
  m.sequenceInput("xs", DType::F32);
  m.node("SequenceLength", {"xs"}, {"n"}, "length");
  m.output("n");
  auto g = m.import();
  ASSERT_FALSE(bool(g));
  EXPECT_NE(g.error().message().find("graph input 'xs' is a sequence"), std::string::npos)
      << g.error().message();
}

// A position known only at run time cannot be resolved: one error naming the node, never a
// guess.
TEST(OnnxSequence, RunTimePositionIsAnErrorNamingTheNode) {
  Model m;
  m.input("a", DType::F32, {2});
  m.input("b", DType::F32, {2});
  m.input("pos", DType::I64, {});
  m.node("SequenceConstruct", {"a", "b"}, {"s"}, "construct");
  m.node("SequenceAt", {"s", "pos"}, {"y"}, "pick");
  m.output("y");
  auto g = m.import();
  ASSERT_FALSE(bool(g));
  const std::string &msg = g.error().message();
  EXPECT_NE(msg.find("node 'pick' (SequenceAt)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run time"), std::string::npos) << msg;

  // The same position given at import time resolves.
  ImportOptions opts;
  opts.knownInputs["pos"] = Tensor::scalar<int64_t>(DType::I64, -1);
  auto ok = m.import(opts);
  ASSERT_TRUE(bool(ok)) << ok.error().message();
  auto outs = interpret(**ok, {f32({2}, {1, 2}), f32({2}, {3, 4}),
                               Tensor::scalar<int64_t>(DType::I64, -1)});
  ASSERT_TRUE(bool(outs)) << outs.error().message();
  EXPECT_EQ(floats((*outs)[0]), (std::vector<float>{3, 4}));
}

// Positions out of range and sequences given to tensor operators are errors naming the node.
TEST(OnnxSequence, BadPositionsAndKinds) {
  {
    Model m;
    m.input("a", DType::F32, {2});
    m.node("SequenceConstruct", {"a"}, {"s"}, "construct");
    m.constant("five", 5);
    m.node("SequenceAt", {"s", "five"}, {"y"}, "pick");
    m.output("y");
    auto g = m.import();
    ASSERT_FALSE(bool(g));
    EXPECT_NE(g.error().message().find("node 'pick' (SequenceAt): position 5 is out of range"),
              std::string::npos)
        << g.error().message();
  }
  {
    Model m;
    m.input("a", DType::F32, {2});
    m.node("SequenceConstruct", {"a"}, {"s"}, "construct");
    m.node("Relu", {"s"}, {"y"}, "relu");
    m.output("y");
    auto g = m.import();
    ASSERT_FALSE(bool(g));
    EXPECT_NE(g.error().message().find("node 'relu' (Relu): input 0 's' is a sequence"),
              std::string::npos)
        << g.error().message();
  }
}

} // namespace

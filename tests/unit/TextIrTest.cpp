// Unit tests of the text IR: printer and parser round trips (every op, dtype and attribute
// kind, exact floats, quoted names) and errors on malformed text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/support/Float16.h"

using namespace nnc;

namespace {

std::vector<DType> allDTypes() {
  std::vector<DType> out;
  for (int i = 0; i <= static_cast<int>(DType::I2); ++i)
    out.push_back(static_cast<DType>(i));
  return out;
}

/// Parses `text`, failing the test on an error.
std::unique_ptr<Graph> parseOk(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text, "test.nir");
  EXPECT_TRUE(g) << g.error().message() << "\n" << text;
  return g ? std::move(*g) : nullptr;
}

/// Structural equality of two graphs (names, types, attributes bitwise, wiring).
void expectSameGraph(const Graph &a, const Graph &b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    EXPECT_EQ(a.inputs()[i]->name(), b.inputs()[i]->name());
    EXPECT_EQ(a.inputs()[i]->type(), b.inputs()[i]->type());
  }
  std::vector<Node *> na = a.nodes(), nb = b.nodes();
  ASSERT_EQ(na.size(), nb.size());
  for (size_t k = 0; k < na.size(); ++k) {
    const Node &x = *na[k], &y = *nb[k];
    EXPECT_EQ(x.kind(), y.kind());
    EXPECT_EQ(x.name(), y.name());
    ASSERT_EQ(x.numOperands(), y.numOperands());
    for (size_t i = 0; i < x.numOperands(); ++i) {
      ASSERT_EQ(x.operand(i) == nullptr, y.operand(i) == nullptr);
      if (x.operand(i))
        EXPECT_EQ(x.operand(i)->name(), y.operand(i)->name());
    }
    ASSERT_EQ(x.numResults(), y.numResults());
    for (size_t i = 0; i < x.numResults(); ++i) {
      EXPECT_EQ(x.result(i)->name(), y.result(i)->name());
      EXPECT_EQ(x.result(i)->type(), y.result(i)->type());
    }
    ASSERT_EQ(x.attrs().size(), y.attrs().size());
    for (const auto &[key, value] : x.attrs()) {
      ASSERT_TRUE(y.attr(key)) << key;
      EXPECT_TRUE(attrEqual(value, *y.attr(key))) << x.describe() << " attribute " << key;
    }
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i)
    EXPECT_EQ(a.outputs()[i]->name(), b.outputs()[i]->name());
}

/// print -> parse -> print gives the same text and the same graph.
void expectRoundTrip(const Graph &g, const PrintOptions &opts = {}) {
  std::string text = printGraph(g, opts);
  std::unique_ptr<Graph> back = parseOk(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(printGraph(*back, opts), text);
  expectSameGraph(g, *back);
}

Attribute sampleAttr(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return int64_t(1);
  case AttrKind::Float:
    return 0.5;
  case AttrKind::String:
    return std::string("NOTSET");
  case AttrKind::Ints:
    return std::vector<int64_t>{1, -2, 3};
  case AttrKind::Floats:
    return std::vector<double>{0.25, -1e-7};
  case AttrKind::Tensor:
    return Tensor::fromVector<float>(DType::F32, {1}, {2.5f});
  case AttrKind::DType:
    return DType::F16;
  }
  return int64_t(0);
}

Error parseError(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text, "bad.nir");
  if (g)
    return Error::success();
  return g.takeError();
}

} // namespace

TEST(TextIr, EveryOpRoundTrips) {
  for (const OpInfo &info : allOps()) {
    Graph g("op_" + std::string(info.name));
    TensorType t(DType::F32, {Dim::symbol("N"), 4});
    int nops = info.maxOperands < 0 ? info.minOperands + 2 : info.maxOperands;
    std::vector<Value *> operands;
    for (int i = 0; i < nops; ++i) {
      // Leave the first optional operand absent when there are later ones.
      if (i == info.minOperands && i + 1 < nops && info.maxOperands >= 0)
        operands.push_back(nullptr);
      else
        operands.push_back(g.addInput("in" + std::to_string(i), t));
    }
    AttrMap attrs;
    for (const AttrSpec &spec : info.attrs)
      attrs[spec.name] = sampleAttr(spec.kind);
    int nres = info.maxResults < 0 ? 3 : info.maxResults;
    std::vector<TensorType> types(nres, t);
    Node *n = g.createNode(info.kind, operands, types, attrs, "node_" + std::string(info.name));
    g.setOutputs(n->results());
    SCOPED_TRACE(std::string(info.name));
    expectRoundTrip(g);
  }
}

TEST(TextIr, EveryDTypeRoundTrips) {
  for (int64_t maxInline : {int64_t(16), int64_t(0)}) {
    Graph g;
    std::vector<Value *> outs;
    for (DType dt : allDTypes()) {
      Value *in = g.addInput(std::string("in_") + std::string(dtypeName(dt)),
                             TensorType(dt, {2, Dim::symbol("K")}));
      Tensor c = Tensor::zeros(dt, {2, 3});
      auto *bytes = static_cast<unsigned char *>(c.rawData());
      for (size_t i = 0; i < c.byteSize(); ++i)
        bytes[i] = static_cast<unsigned char>(i * 37 + 1);
      if (dt == DType::Bool)
        for (size_t i = 0; i < c.byteSize(); ++i)
          bytes[i] &= 1;
      if (dt == DType::U4 || dt == DType::I4 || dt == DType::F4E2M1)
        for (size_t i = 0; i < c.byteSize(); ++i)
          bytes[i] &= 15;
      Node *n = g.createNode(OpKind::Constant, {}, {c.type()}, {{"value", c}});
      outs.push_back(n->result());
      outs.push_back(in);
      // A rank-0 constant too.
      Tensor s = Tensor::zeros(dt, {});
      outs.push_back(g.createNode(OpKind::Constant, {}, {s.type()}, {{"value", s}})->result());
    }
    g.setOutputs(outs);
    PrintOptions opts;
    opts.maxInlineElements = maxInline;
    SCOPED_TRACE(maxInline);
    expectRoundTrip(g, opts);
  }
}

TEST(TextIr, FloatAttributesRoundTripExactly) {
  std::vector<double> specials = {0.0,
                                  -0.0,
                                  1.0,
                                  -2.5,
                                  0.1,
                                  1.0 / 3,
                                  1e300,
                                  -1e-300,
                                  std::numeric_limits<double>::denorm_min(),
                                  -std::numeric_limits<double>::denorm_min(),
                                  std::numeric_limits<double>::min(),
                                  std::numeric_limits<double>::max(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN(),
                                  -std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::signaling_NaN(),
                                  1e-5f,
                                  0.3f};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    specials.push_back(d);
  }
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  std::vector<Value *> outs;
  for (double v : specials) {
    AttrMap attrs{{"size", int64_t(1)}, {"alpha", v}, {"beta", -v}, {"bias", 1.0}};
    outs.push_back(g.createNode(OpKind::LRN, {x}, {x->type()}, attrs)->result());
  }
  g.setOutputs(outs);
  expectRoundTrip(g);
}

TEST(TextIr, FloatTensorsRoundTripBitExactly) {
  // Every f16 and bf16 bit pattern, inline; random f32/f64 bit patterns plus specials.
  std::vector<uint16_t> halves(65536);
  for (int i = 0; i < 65536; ++i)
    halves[i] = static_cast<uint16_t>(i);
  std::mt19937_64 rng(7);
  std::vector<float> floats = {0.0f,          -0.0f,    1e-45f,    -1e-45f, 1.17549435e-38f,
                               3.4028235e38f, INFINITY, -INFINITY, NAN,     -NAN,
                               0.1f};
  std::vector<double> doubles = {0.0, -0.0, 5e-324, INFINITY, -INFINITY, NAN, -NAN, 0.1};
  for (int i = 0; i < 5000; ++i) {
    floats.push_back(bitsToFloat(static_cast<uint32_t>(rng())));
    uint64_t b = rng();
    double d;
    std::memcpy(&d, &b, 8);
    doubles.push_back(d);
  }
  Graph g;
  std::vector<Value *> outs;
  auto addConst = [&](Tensor t) {
    outs.push_back(g.createNode(OpKind::Constant, {}, {t.type()}, {{"value", t}})->result());
  };
  addConst(Tensor::fromVector<uint16_t>(DType::F16, {65536}, halves));
  addConst(Tensor::fromVector<uint16_t>(DType::BF16, {65536}, halves));
  addConst(Tensor::fromVector<float>(DType::F32, {(int64_t)floats.size()}, floats));
  addConst(Tensor::fromVector<double>(DType::F64, {(int64_t)doubles.size()}, doubles));
  g.setOutputs(outs);
  PrintOptions inlineAll;
  inlineAll.maxInlineElements = 1 << 20;
  expectRoundTrip(g, inlineAll);
  expectRoundTrip(g); // as hex blobs
}

TEST(TextIr, SyntaxOfFloatsAndNaNs) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {}));
  double payload;
  uint64_t bits = 0x7ff0000000000001ull;
  std::memcpy(&payload, &bits, 8);
  g.createNode(OpKind::LRN, {x}, {x->type()},
               {{"size", int64_t(1)}, {"alpha", -0.0}, {"beta", payload}, {"bias", 1.0}});
  std::string text = printGraph(g);
  EXPECT_NE(text.find("alpha = -0.0"), std::string::npos) << text;
  EXPECT_NE(text.find("beta = nan:0x7ff0000000000001"), std::string::npos) << text;
  EXPECT_NE(text.find("bias = 1.0"), std::string::npos) << text;
}

TEST(TextIr, QuotedNamesAndSymbols) {
  Graph g("my graph/1");
  std::vector<std::string> names = {
      "conv1/weights:0", "a b", "q\"uote", "back\\slash", "new\nline", "tab\there", "caf\xc3\xa9",
      "\x01\x7f",        "0",   "-x",      "%y",          "@z",        "none",      "return"};
  std::vector<Value *> vals;
  for (const std::string &n : names)
    vals.push_back(g.addInput(
        n, TensorType(DType::F32, {Dim::symbol(n), Dim::symbol("inf"), Dim::symbol("nan"), 0, 7})));
  Node *n =
      g.createNode(OpKind::Neg, {vals[0]}, {vals[0]->type()}, {}, "node \"name\"\n", {"out/0:x"});
  g.renameValue(vals[1], "");
  g.setOutputs({n->result(), vals[1], vals[1]});
  expectRoundTrip(g);
  std::string text = printGraph(g);
  EXPECT_NE(text.find("%\"conv1/weights:0\""), std::string::npos) << text;
  EXPECT_NE(text.find("%none"), std::string::npos) << text;
}

TEST(TextIr, HandWrittenText) {
  const char *text = R"(// A comment.
graph @main(%x: f32[N,784], %w: f32[784,512]) -> (f32[N,512], f32[N,784]) {
  %c = constant {value = dense<f32[2]>[1.5, -2]} : f32[2]   // trailing comment
  %h = constant {value = dense<f16[3]>[0.5, inf, nan]} : f16[3]
  %i = constant {value = dense<i8[2]>[-128, 0x7f]} : i8[2]
  %b = constant {value = dense<bool[2]>[true, false]} : bool[2]
  %y = matmul(%x, %w) : f32[N,512] @"MatMul_0"
  %p, %q = split(%y) {axis = 1, sizes = [256, 256]} : f32[N,256], f32[N,256]
  %e = lrn(%x) {size = 3, alpha = 1, beta = 1e-4, bias = -inf} : f32[N,784]
  return %y, %x
})";
  std::unique_ptr<Graph> g = parseOk(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->numNodes(), 7u);
  Value *y = g->findValue("y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->producer()->name(), "MatMul_0");
  EXPECT_EQ(y->type().str(), "f32[N,512]");
  const Tensor &h = g->findValue("h")->producer()->getTensor("value");
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3800);
  EXPECT_EQ(h.data<uint16_t>()[1], 0x7c00);
  const Tensor &i8 = g->findValue("i")->producer()->getTensor("value");
  EXPECT_EQ(i8.data<int8_t>()[0], -128);
  EXPECT_EQ(i8.data<int8_t>()[1], 127);
  EXPECT_EQ(g->findValue("e")->producer()->getFloat("alpha"), 1.0);
  EXPECT_EQ(g->outputs()[1], g->inputs()[0]);
  expectRoundTrip(*g);
}

TEST(TextIr, ErrorsHaveFileLineAndColumn) {
  struct Case {
    const char *text;
    const char *message;
  };
  const Case cases[] = {
      {"", "bad.nir:1:1: expected 'graph', got end of file"},
      {"graph @g() {\n  %y = frobnicate(%x) : f32[]\n  return\n}", "bad.nir:2:8: unknown op"},
      {"graph @g() {\n  %y = neg(%x) : f32[]\n  return\n}",
       "bad.nir:2:12: use of undefined value %x"},
      {"graph @g(%x: f32[]) {\n  %y = neg(%z) : f32[]\n  %z = neg(%x) : f32[]\n  return\n}",
       "bad.nir:2:12: use of undefined value %z"},
      {"graph @g(%x: f32[]) {\n  %x = neg(%x) : f32[]\n  return\n}",
       "bad.nir:2:3: redefinition of value %x"},
      {"graph @g(%x: f32[]) {\n  %y = neg(%x) {axis = 1} : f32[]\n  return\n}",
       "bad.nir:2:17: unknown attribute 'axis' for op 'neg'"},
      {"graph @g(%x: f32[2]) {\n  %y = softmax(%x) {axis = \"a\"} : f32[2]\n  return\n}",
       "bad.nir:2:28: attribute 'axis' of 'softmax' must be int"},
      {"graph @g(%x: f32[2]) {\n  %y = softmax(%x) {axis = 1.5} : f32[2]\n  return\n}",
       "must be int"},
      {"graph @g(%x: f32[2]) {\n  %y = softmax(%x) : f32[2]\n  return\n}",
       "bad.nir:2:8: softmax producing %y: missing required attribute 'axis'"},
      {"graph @g(%x: f32[2]) {\n  %y = neg(%x, %x) : f32[2]\n  return\n}",
       "bad.nir:2:8: 'neg' takes 1 operands, got 2"},
      {"graph @g(%x: f32[2]) {\n  %y, %z = neg(%x) : f32[2], f32[2]\n  return\n}",
       "'neg' has 1 to 1 results, got 2"},
      {"graph @g(%x: f32[2]) {\n  %y = neg(%x) : f32[2], f32[2]\n  return\n}",
       "1 results but 2 result types"},
      {"graph @g(%x: f33[2]) {\n  return\n}", "bad.nir:1:14: unknown dtype 'f33'"},
      {"graph @g(%x: f32[-2]) {\n  return\n}", "bad.nir:1:18: negative dimension"},
      {"graph @g(%x: f32[2]) {\n  return %x\n} extra", "bad.nir:3:3: expected end of file"},
      {"graph @g(%\"x: f32[2]) {\n  return\n}", "bad.nir:1:10: unterminated string"},
      {"graph @g(%x: f32[2]) -> (f32[3]) {\n  return %x\n}",
       "bad.nir:2:3: output 0 is declared f32[3] but the returned value is f32[2]"},
      {"graph @g() {\n  %c = constant {value = dense<f32[3]>[1, 2]} : f32[3]\n  return\n}",
       "bad.nir:2:39: f32[3] has 3 elements, got 2"},
      {"graph @g() {\n  %c = constant {value = dense<f32[1]>[1e99]} : f32[1]\n  return\n}",
       "bad.nir:2:40: 1e99 is out of range for f32"},
      {"graph @g() {\n  %c = constant {value = dense<i8[1]>[200]} : i8[1]\n  return\n}",
       "200 is out of range for i8"},
      {"graph @g() {\n  %c = constant {value = dense<f32[2]>hex\"00\"} : f32[2]\n  return\n}",
       "hex data has 2 digits; f32[2] needs 16"},
      {"graph @g() {\n  %c = constant {value = dense<f32[N]>[1]} : f32[1]\n  return\n}",
       "a tensor's shape must be static"},
      {"graph @g() {\n  %c = constant {value = dense<f32[1099511627776,1099511627776]>[]} : "
       "f32[1]\n  return\n}",
       "bad.nir:2:32:"},
      {"graph @g(%x: f32[2]) {\n  %y = softmax(%x) {axis = 99999999999999999999} : f32[2]\n"
       "  return\n}",
       "out-of-range integer"},
      {"graph @g(%x: f32[2]) {\n  $\n}", "bad.nir:2:3: unexpected character '$'"},
      {"graph @g(%x: f32[2]) {\n  %y = neg(%x) : f32[2] @\n  return\n}",
       "bad.nir:2:25: expected a name"},
      {"graph @g(%x: f32[2]) {\n  %y = cast(%x) {to = f99} : f32[2]\n  return\n}",
       "unknown dtype 'f99'"},
      {"graph @g(%x: f32[2]) {\n  %y = cast(%x) {to = i8, to = i8} : f32[2]\n  return\n}",
       "duplicate attribute 'to'"},
      {"graph @g(%x: f32[2]) {\n  %y = neg(%x) : f32[2]\n  return %y \"s\\q\"\n}",
       "unknown escape"},
  };
  for (const Case &c : cases) {
    Error e = parseError(c.text);
    ASSERT_TRUE(static_cast<bool>(e)) << c.text;
    EXPECT_NE(e.message().find(c.message), std::string::npos)
        << "got: " << e.message() << "\nwant: " << c.message;
  }
}

TEST(TextIr, TruncationsAndGarbageNeverCrash) {
  Graph g("t");
  Value *x = g.addInput("x", TensorType(DType::F32, {Dim::symbol("N"), 3}));
  Tensor c = Tensor::fromVector<float>(DType::F32, {3}, {1.0f, NAN, -0.0f});
  Node *k = g.createNode(OpKind::Constant, {}, {c.type()}, {{"value", c}}, "k");
  Node *a = g.createNode(OpKind::Add, {x, k->result()}, {x->type()}, {}, "a/b");
  Node *s = g.createNode(OpKind::Split, {a->result()}, {x->type(), x->type()},
                         {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{1, 2}}});
  Node *sl =
      g.createNode(OpKind::Slice, {x, k->result(), k->result(), nullptr, nullptr}, {x->type()});
  g.setOutputs({s->result(0), s->result(1), sl->result(), x});
  std::string text = printGraph(g);
  ASSERT_TRUE(parseOk(text));
  // Every proper prefix (short of the final newline) is an error with a location.
  for (size_t len = 0; len + 1 < text.size(); ++len) {
    Error e = parseError(text.substr(0, len));
    ASSERT_TRUE(static_cast<bool>(e)) << "prefix " << len << " parsed:\n" << text.substr(0, len);
    EXPECT_EQ(e.message().rfind("bad.nir:", 0), 0u) << e.message();
  }
  // Random byte substitutions and insertions parse or fail cleanly.
  std::mt19937 rng(1);
  const std::string alphabet = "%@\"\\(){}[]<>,:=-0123456789.eaxnf \n/";
  for (int i = 0; i < 3000; ++i) {
    std::string t = text;
    int edits = 1 + rng() % 3;
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % t.size();
      char ch =
          (rng() % 4 == 0) ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
      if (rng() % 2)
        t[pos] = ch;
      else
        t.insert(t.begin() + pos, ch);
    }
    Expected<std::unique_ptr<Graph>> r = parseGraph(t, "bad.nir");
    if (!r)
      EXPECT_EQ(r.error().message().rfind("bad.nir:", 0), 0u) << r.error().message();
  }
}

TEST(TextIr, ParseGraphFileReportsMissingFile) {
  Expected<std::unique_ptr<Graph>> g = parseGraphFile("/nonexistent/x.nir");
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("/nonexistent/x.nir"), std::string::npos);
}

// Fuzz (text_ir, 20 crash files): a text that starts with a number ("2.", "3333...", "2[2,3])")
// made the lexer read the byte before the text, looking for an exponent's 'e'.
TEST(TextIr, NumberAtTheStartIsAnError) {
  for (const std::string &t : {std::string("2."), std::string("-1e+5 graph"),
                               std::string("0x1f"), std::string(40, '3')}) {
    std::string exact = t; // the lexer's bounds are the string's
    Expected<std::unique_ptr<Graph>> g = parseGraph(exact, "n.nir");
    ASSERT_FALSE(g) << t;
    EXPECT_NE(g.error().message().find("n.nir:1:"), std::string::npos) << g.error().message();
  }
}

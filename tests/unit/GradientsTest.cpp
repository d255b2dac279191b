// Finite-difference checks of every gradient rule (Gradients.def) and of the losses, in f64
// on the reference interpreter, with shapes that broadcast.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "nnc/frontend/GraphBuilder.h"
#include "nnc/ir/Gradients.h"
#include "nnc/ir/Training.h"
#include "nnc/runtime/Interpreter.h"
#include "tests/unit/OnnxTestModel.h"

using namespace nnc;

namespace {

using Ints = std::vector<int64_t>;
using Fn = std::function<Var(GraphBuilder &, const std::vector<Var> &)>;

Tensor randomF64(const Extents &e, std::mt19937 &rng, double lo, double hi) {
  Tensor t = Tensor::zeros(DType::F64, e);
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<double>()[i] = d(rng);
  return t;
}

/// Appends loss = sum(y * R) for a random R and the gradients of every graph input, then
/// compares each with central differences. f64 throughout: eps 1e-6 leaves truncation
/// (~eps^2) and rounding (~1e-16 / eps) errors far below the tolerance 1e-7 + 1e-6 |g|.
void checkGraph(Graph &graph, Value *y, const std::vector<Extents> &shapes, double lo, double hi,
                uint32_t seed) {
  std::mt19937 rng(seed);
  ASSERT_TRUE(y);
  std::optional<Extents> ye = staticExtents(y->shape());
  ASSERT_TRUE(ye);
  GradEmitter e(graph);
  Value *loss = e.op(OpKind::ReduceSum, {e.mul(y, e.constant(randomF64(*ye, rng, -1, 1)))},
                     {{"axes", Ints{}}, {"keepdims", int64_t(0)}});
  ASSERT_TRUE(e.ok()) << e.error().message();
  Expected<std::vector<Value *>> grads = gradients(graph, loss, graph.inputs());
  ASSERT_TRUE(grads) << grads.error().message();
  std::vector<Value *> outs = {loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  graph.setOutputs(outs);

  std::vector<Tensor> inputs;
  for (const Extents &s : shapes)
    inputs.push_back(randomF64(s, rng, lo, hi));
  Expected<std::vector<Tensor>> res = interpret(graph, inputs);
  ASSERT_TRUE(res) << res.error().message();
  const double eps = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &analytic = (*res)[i + 1];
    ASSERT_EQ(analytic.extents(), inputs[i].extents()) << "input " << i;
    for (int64_t k = 0; k < inputs[i].numElements(); ++k) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].clone();
      minus[i] = inputs[i].clone();
      plus[i].data<double>()[k] += eps;
      minus[i].data<double>()[k] -= eps;
      Expected<std::vector<Tensor>> fp = interpret(graph, plus), fm = interpret(graph, minus);
      ASSERT_TRUE(fp && fm);
      double fd = ((*fp)[0].data<double>()[0] - (*fm)[0].data<double>()[0]) / (2 * eps);
      double a = analytic.data<double>()[k];
      ASSERT_NEAR(a, fd, 1e-7 + 1e-6 * std::abs(fd)) << "input " << i << " element " << k;
    }
  }
}

/// checkGraph over y = f(inputs), built with GraphBuilder.
void checkGradients(const std::vector<Extents> &shapes, const Fn &f, double lo = -1, double hi = 1,
                    uint32_t seed = 1) {
  GraphBuilder b("grad");
  std::vector<Var> xs;
  for (size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(b.input("x" + std::to_string(i), DType::F64, shapeFromExtents(shapes[i])));
  b.output(f(b, xs));
  Expected<std::unique_ptr<Graph>> g = b.build();
  ASSERT_TRUE(g) << g.error().message();
  checkGraph(**g, (*g)->outputs()[0], shapes, lo, hi, seed);
}

/// checkGraph over y = f(inputs), built with GradEmitter (the losses and optimizers).
void checkEmitted(const std::vector<Extents> &shapes,
                  const std::function<Value *(GradEmitter &, const std::vector<Value *> &)> &f) {
  Graph g("grad");
  std::vector<Value *> xs;
  for (size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(
        g.addInput("x" + std::to_string(i), TensorType(DType::F64, shapeFromExtents(shapes[i]))));
  GradEmitter e(g);
  Value *y = f(e, xs);
  ASSERT_TRUE(e.ok()) << e.error().message();
  checkGraph(g, y, shapes, -1, 1, 1);
}

Var un(OpKind k, const Var &x) {
  return x.builder()->op(k, {x});
}
Var bin(OpKind k, const Var &a, const Var &b) {
  return a.builder()->op(k, {a, b});
}

TEST(Gradients, UnaryElementwise) {
  for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Tanh, OpKind::Sigmoid, OpKind::Erf,
                   OpKind::Sin, OpKind::Cos, OpKind::Abs}) {
    SCOPED_TRACE(std::string(opInfo(k).name));
    checkGradients({{3, 4}},
                   [k](GraphBuilder &, const std::vector<Var> &x) { return un(k, x[0]); });
  }
  for (OpKind k : {OpKind::Log, OpKind::Sqrt, OpKind::Reciprocal}) {
    SCOPED_TRACE(std::string(opInfo(k).name));
    checkGradients(
        {{3, 4}}, [k](GraphBuilder &, const std::vector<Var> &x) { return un(k, x[0]); }, 0.5, 2);
  }
}

TEST(Gradients, BinaryElementwiseBroadcasting) {
  const std::vector<std::vector<Extents>> shapes = {{{2, 3, 4}, {2, 3, 4}},
                                                    {{2, 3, 4}, {3, 1}},
                                                    {{4}, {2, 3, 4}},
                                                    {{2, 1, 4}, {1, 3, 1}},
                                                    {{2, 3}, {}}};
  for (OpKind k :
       {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min, OpKind::Pow})
    for (const auto &s : shapes) {
      SCOPED_TRACE(std::string(opInfo(k).name) + " " + extentsStr(s[0]) + " " + extentsStr(s[1]));
      bool positive = k == OpKind::Div || k == OpKind::Pow;
      checkGradients(
          s, [k](GraphBuilder &, const std::vector<Var> &x) { return bin(k, x[0], x[1]); },
          positive ? 0.5 : -1, positive ? 2 : 1);
    }
}

TEST(Gradients, ReluAndSelect) {
  checkGradients({{5, 6}}, [](GraphBuilder &, const std::vector<Var> &x) { return relu(x[0]); });
  checkGradients({{3, 4}, {4}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    Var cond = b.op(OpKind::Greater, {x[0], b.scalar(0, DType::F64)});
    return b.op(OpKind::Select, {cond, x[0], x[1]});
  });
}

TEST(Gradients, SoftmaxAndLogSoftmax) {
  for (int64_t axis : {0, 1, -1}) {
    checkGradients({{3, 5}}, [axis](GraphBuilder &, const std::vector<Var> &x) {
      return softmax(x[0], axis);
    });
    checkGradients({{2, 3, 4}}, [axis](GraphBuilder &b, const std::vector<Var> &x) {
      return b.op(OpKind::LogSoftmax, {x[0]}, {{"axis", axis}});
    });
  }
}

TEST(Gradients, Reductions) {
  for (bool keep : {false, true})
    for (const Ints &axes : {Ints{}, Ints{1}, Ints{0, 2}, Ints{-1}}) {
      checkGradients({{2, 3, 4}}, [&](GraphBuilder &, const std::vector<Var> &x) {
        return reduceSum(x[0], axes, keep);
      });
      checkGradients({{2, 3, 4}}, [&](GraphBuilder &, const std::vector<Var> &x) {
        return reduceMean(x[0], axes, keep);
      });
    }
}

TEST(Gradients, DataMovement) {
  checkGradients({{2, 3, 4}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return reshape(x[0], {4, -1});
  });
  checkGradients({{2, 3, 4}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Flatten, {x[0]}, {{"axis", int64_t(1)}});
  });
  checkGradients({{2, 3, 4}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return transpose(x[0], {2, 0, 1});
  });
  checkGradients({{2, 1, 4}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    Var s = b.op(OpKind::Squeeze, {x[0]}, {{"axes", Ints{1}}});
    return b.op(OpKind::Unsqueeze, {s}, {{"axes", Ints{0}}});
  });
  checkGradients({{3, 1}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Expand, {x[0], b.i64s({2, 3, 4})});
  });
  checkGradients({{2, 3}, {2, 2}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return concat({x[0], x[1], x[0]}, 1);
  });
  checkGradients({{5, 3}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    Tensor idx = Tensor::fromVector<int64_t>(DType::I64, {2, 2}, {4, 0, 4, 2});
    return b.op(OpKind::Gather, {x[0], b.constant(idx)}, {{"axis", int64_t(0)}});
  });
  checkGradients({{3, 4}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    Tensor idx = Tensor::fromVector<int64_t>(DType::I64, {3, 2}, {0, 3, 1, 1, 2, 0});
    return b.op(OpKind::GatherElements, {x[0], b.constant(idx)}, {{"axis", int64_t(1)}});
  });
}

TEST(Gradients, SliceSplitPad) {
  checkGradients({{4, 5}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice, {x[0], b.i64s({1, -4}), b.i64s({3, 100}), b.i64s({0, 1})});
  });
  // Steps other than 1: strided and reversed on two axes at once, reversed, reversed with a
  // stride, a step past the extent (one element), clamped ends, and an empty slice.
  checkGradients({{7, 9}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice,
                {x[0], b.i64s({1, -2}), b.i64s({100, 0}), b.i64s({0, 1}), b.i64s({2, -3})});
  });
  checkGradients({{2, 8, 5}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice,
                {x[0], b.i64s({-1, 0}), b.i64s({-100, 5}), b.i64s({1, 2}), b.i64s({-1, 4})});
  });
  checkGradients({{6, 3}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice, {x[0], b.i64s({4}), b.i64s({-100}), b.i64s({0}), b.i64s({-2})}) *
           2.0;
  });
  checkGradients({{2, 8, 5}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice, {x[0], b.i64s({0}), b.i64s({5}), b.i64s({2}), b.i64s({7})});
  });
  checkGradients({{2, 8, 5}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Slice, {x[0], b.i64s({5}), b.i64s({2}), b.i64s({1}), b.i64s({1})});
  });
  checkGradients({{2, 6}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    std::vector<Var> parts =
        b.opMulti(OpKind::Split, {x[0]}, {{"axis", int64_t(1)}, {"sizes", Ints{2, 3, 1}}}, 3);
    return parts[0] * parts[2] + exp(parts[0]); // the middle piece does not reach the loss
  });
  checkGradients({{2, 3}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::Pad, {x[0], b.i64s({1, 0, 0, 2})}, {{"mode", std::string("constant")}});
  });
}

// Dropout in training: the gradient is the step's mask times 1 / (1 - ratio).
TEST(Gradients, Dropout) {
  checkEmitted({{6, 7}}, [](GradEmitter &e, const std::vector<Value *> &x) {
    return dropoutTraining(e, x[0], e.scalar(0.4, DType::F64), e.scalar(3, DType::I64), 1)[0];
  });
}

TEST(Gradients, LayerNorm) {
  for (int64_t axis : {-1, 1})
    checkGradients({{2, 3, 4}, {4}, {3, 4}}, [axis](GraphBuilder &b, const std::vector<Var> &x) {
      // Statistics in f64 (GraphBuilder's layerNorm keeps them in f32, too coarse for the
      // finite differences).
      return b.op(OpKind::LayerNorm, {x[0], x[1], x[2]},
                  {{"axis", axis}, {"epsilon", 1e-5}, {"stash_type", DType::F64}});
    });
}

TEST(Gradients, BatchNorm) {
  // Inference form, every operand differentiated (var kept positive as v^2 + 0.5).
  for (const Extents &xs : {Extents{3, 4}, Extents{2, 3, 5}, Extents{2, 3, 3, 2}}) {
    SCOPED_TRACE(extentsStr(xs));
    int64_t c = xs[1];
    checkGradients({xs, {c}, {c}, {c}, {c}}, [](GraphBuilder &b, const std::vector<Var> &x) {
      Var var = x[4] * x[4] + b.scalar(0.5, DType::F64);
      return b.op(OpKind::BatchNorm, {x[0], x[1], x[2], x[3], var}, {{"epsilon", 1e-5}});
    });
  }
}

/// ONNX BatchNormalization in training mode (opset 15), imported in f64: y normalized with
/// the batch statistics (their gradients flow back into x), and the running statistics
/// blended with momentum as outputs 1 and 2.
TEST(Gradients, BatchNormTrainingNode) {
  using namespace testonnx;
  auto zeros = [](Extents e) { return Tensor::zeros(DType::F64, e); };
  std::vector<std::pair<std::string, Tensor>> inputs = {{"x", zeros({4, 3, 2, 2})},
                                                        {"scale", zeros({3})},
                                                        {"bias", zeros({3})},
                                                        {"mean", zeros({3})},
                                                        {"var", zeros({3})}};
  std::vector<std::string> outs = {"y", "running_mean", "running_var"};
  Expected<std::unique_ptr<Graph>> g =
      importModel(15,
                  {node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, outs,
                        {attrInt("training_mode", 1), attrFloat("momentum", 0.8)})},
                  inputs, {}, outs);
  ASSERT_TRUE(g) << g.error().message();
  Graph &graph = **g;
  GradEmitter e(graph);
  std::vector<Value *> flat;
  for (Value *o : graph.outputs())
    flat.push_back(e.op(OpKind::Reshape, {o, e.i64s({-1})}));
  Value *y = e.op(OpKind::Concat, flat, {{"axis", int64_t(0)}});
  ASSERT_TRUE(e.ok()) << e.error().message();
  std::vector<Extents> shapes;
  for (Value *in : graph.inputs())
    shapes.push_back(*staticExtents(in->shape()));
  checkGraph(graph, y, shapes, -1, 1, 5);
}

TEST(Gradients, MatMul) {
  const std::vector<std::vector<Extents>> shapes = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {4, 5}},    {{3, 4}, {4}},       {{4}, {4}}};
  for (const auto &s : shapes) {
    SCOPED_TRACE(extentsStr(s[0]) + " @ " + extentsStr(s[1]));
    checkGradients(s, [](GraphBuilder &, const std::vector<Var> &x) { return matmul(x[0], x[1]); });
  }
  // a @ transpose(W) (the Linear layout), with g smaller than a (W's gradient as g^T a) and
  // larger than a and W together (as (a^T g)^T); and a 3-D a (a transformer's [batch, seq,
  // K]), whose W gradient sums over the batch.
  for (const auto &s : std::vector<std::vector<Extents>>{
           {{3, 6}, {2, 6}}, {{8, 2}, {5, 2}}, {{2, 3, 6}, {2, 6}}, {{2, 4, 2}, {5, 2}}}) {
    SCOPED_TRACE(extentsStr(s[0]) + " @ " + extentsStr(s[1]) + "^T");
    checkGradients(s, [](GraphBuilder &, const std::vector<Var> &x) {
      return matmul(x[0], transpose(x[1], {1, 0}));
    });
  }
  // Sums of matmuls sharing an operand's gradient (a recurrent weight used at every step)
  // join into one matmul: plain, and transposed through the Linear layout.
  checkGradients({{3, 4}, {2, 4}, {4, 4}}, [](GraphBuilder &, const std::vector<Var> &x) {
    Var wt = transpose(x[2], {1, 0});
    Var h1 = tanh(matmul(x[0], wt));
    Var h2 = tanh(matmul(h1, wt));
    return concat({h2, matmul(x[1], x[2])}, 0);
  });
}

Var convOp(const Var &x, const Var &w, const Var *bias, Ints strides, Ints pads, Ints dil,
           int64_t group) {
  std::vector<Var> ops = {x, w};
  if (bias)
    ops.push_back(*bias);
  return x.builder()->op(
      OpKind::Conv, ops,
      {{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", group}});
}

TEST(Gradients, Conv) {
  // x, w, bias; stride, pads, dilation, group.
  checkGradients({{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return convOp(x[0], x[1], &x[2], {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  });
  checkGradients({{1, 2, 6, 7}, {3, 2, 3, 2}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return convOp(x[0], x[1], nullptr, {2, 2}, {1, 0, 0, 1}, {1, 1}, 1);
  });
  checkGradients({{2, 4, 6, 6}, {6, 2, 2, 2}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return convOp(x[0], x[1], nullptr, {1, 2}, {0, 0, 0, 0}, {2, 1}, 2);
  });
  checkGradients({{1, 3, 7}, {3, 1, 3}, {3}}, [](GraphBuilder &, const std::vector<Var> &x) {
    return convOp(x[0], x[1], &x[2], {2}, {1, 1}, {1}, 3); // 1-D depthwise
  });
}

TEST(Gradients, Pooling) {
  checkGradients({{2, 3, 6, 6}},
                 [](GraphBuilder &, const std::vector<Var> &x) { return maxPool2d(x[0], 2, 2); });
  checkGradients({{1, 2, 5, 5}}, [](GraphBuilder &b, const std::vector<Var> &x) {
    return b.op(OpKind::MaxPool, {x[0]},
                {{"kernel_shape", Ints{3, 3}},
                 {"strides", Ints{2, 2}},
                 {"pads", Ints{1, 1, 1, 1}},
                 {"dilations", Ints{1, 1}},
                 {"ceil_mode", int64_t(0)}});
  });
  for (int64_t cip : {0, 1})
    checkGradients({{2, 3, 6, 5}}, [cip](GraphBuilder &b, const std::vector<Var> &x) {
      return b.op(OpKind::AvgPool, {x[0]},
                  {{"kernel_shape", Ints{2, 3}},
                   {"strides", Ints{2, 1}},
                   {"pads", cip ? Ints{1, 1, 1, 1} : Ints{0, 0, 0, 0}},
                   {"dilations", Ints{1, 1}},
                   {"ceil_mode", int64_t(0)},
                   {"count_include_pad", cip}});
    });
}

TEST(Gradients, Losses) {
  checkEmitted({{4, 5}}, [](GradEmitter &e, const std::vector<Value *> &x) {
    Value *labels = e.constant(Tensor::fromVector<int64_t>(DType::I64, {4}, {3, 0, 4, 4}));
    return softmaxCrossEntropyLoss(e, x[0], labels);
  });
  // Logits [N, C, T] and labels [N, T] (a sequence model's), mean over N and T.
  checkEmitted({{2, 5, 3}}, [](GradEmitter &e, const std::vector<Value *> &x) {
    Value *labels = e.constant(Tensor::fromVector<int64_t>(DType::I64, {2, 3}, {3, 0, 4, 1, 1, 2}));
    return softmaxCrossEntropyLoss(e, x[0], labels);
  });
  checkEmitted({{3, 4}, {3, 4}}, [](GradEmitter &e, const std::vector<Value *> &x) {
    return meanSquaredErrorLoss(e, x[0], x[1]);
  });
  checkEmitted({{3, 4}, {4}}, [](GradEmitter &e, const std::vector<Value *> &x) {
    std::vector<Value *> c = clipByGlobalNorm(e, {x[0], x[1]}, 0.5);
    return e.add(c[0], c[1]);
  });
}

TEST(Gradients, MlpEndToEnd) {
  // Gemm-like MLP with relu and the cross-entropy loss: gradients of both layers.
  checkGradients({{4, 6}, {6, 5}, {5}, {5, 3}}, [](GraphBuilder &, const std::vector<Var> &x) {
    Var h = relu(matmul(x[0], x[1]) + x[2]);
    return tanh(matmul(h, x[3]));
  });
}

/// A pre-norm GPT block as PyTorch exports it (bench/transformer_train.py): LayerNorm, one qkv
/// projection split three ways, heads by reshape and transpose, scaled scores with a causal
/// mask (additive -1e9, or Where over a bool mask), softmax, the heads merged back, the output
/// projection and residual, then LayerNorm and an exact (erf) GELU MLP with its residual. x is
/// [N=2, T=4, C=8] with 2 heads of 4.
Var gptBlock(GraphBuilder &b, const std::vector<Var> &x, bool whereMask) {
  const int64_t n = 2, t = 4, c = 8, h = 2, d = 4;
  auto ln = [&](const Var &v, const Var &w, const Var &bias) {
    return b.op(OpKind::LayerNorm, {v, w, bias},
                {{"axis", int64_t(-1)}, {"epsilon", 1e-5}, {"stash_type", DType::F64}});
  };
  Var qkv = matmul(ln(x[0], x[1], x[2]), x[3]) + x[4];
  std::vector<Var> parts =
      b.opMulti(OpKind::Split, {qkv}, {{"axis", int64_t(2)}, {"sizes", Ints{c, c, c}}}, 3);
  auto heads = [&](const Var &v, Ints perm) { return transpose(reshape(v, {n, t, h, d}), perm); };
  Var q = heads(parts[0], {0, 2, 1, 3}), kt = heads(parts[1], {0, 2, 3, 1});
  Var v = heads(parts[2], {0, 2, 1, 3});
  Var scores = matmul(q, kt) * b.scalar(0.5, DType::F64);
  Tensor future = Tensor::zeros(DType::Bool, {t, t});
  Tensor additive = Tensor::zeros(DType::F64, {t, t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) {
      future.data<bool>()[i * t + j] = true;
      additive.data<double>()[i * t + j] = -1e9;
    }
  scores = whereMask
               ? b.op(OpKind::Select, {b.constant(future), b.scalar(-1e9, DType::F64), scores})
               : scores + b.constant(additive);
  Var att = reshape(transpose(matmul(softmax(scores, -1), v), {0, 2, 1, 3}), {n, t, c});
  Var r = x[0] + matmul(att, x[5]);
  Var u = matmul(ln(r, x[1], x[2]), x[6]);
  Var gelu =
      u * b.scalar(0.5, DType::F64) *
      (un(OpKind::Erf, u * b.scalar(0.7071067811865476, DType::F64)) + b.scalar(1, DType::F64));
  return r + matmul(gelu, x[7]);
}

TEST(Gradients, TransformerBlock) {
  // x, LayerNorm scale and bias, Wqkv, bqkv, Wo, W1, W2.
  for (bool whereMask : {false, true}) {
    SCOPED_TRACE(whereMask ? "Where mask" : "additive mask");
    checkGradients({{2, 4, 8}, {8}, {8}, {8, 24}, {24}, {8, 8}, {8, 16}, {16, 8}},
                   [whereMask](GraphBuilder &b, const std::vector<Var> &x) {
                     return gptBlock(b, x, whereMask);
                   });
  }
  // Token embeddings (with repeated tokens) plus position embeddings into the block.
  checkGradients(
      {{6, 8}, {4, 8}, {8}, {8}, {8, 24}, {24}, {8, 8}, {8, 16}, {16, 8}},
      [](GraphBuilder &b, const std::vector<Var> &x) {
        Tensor tokens = Tensor::fromVector<int64_t>(DType::I64, {2, 4}, {5, 0, 5, 2, 1, 1, 3, 0});
        Var emb = b.op(OpKind::Gather, {x[0], b.constant(tokens)}, {{"axis", int64_t(0)}}) + x[1];
        std::vector<Var> rest = {emb};
        rest.insert(rest.end(), x.begin() + 2, x.end());
        return gptBlock(b, rest, false);
      });
}

/// One ONNX RNN/GRU/LSTM node imported in f64 (its unrolled graph of nnc ops), with every
/// float input a graph input and sequence_lens {3, 1} a constant, checked by finite
/// differences of a random weighting of all its outputs: backpropagation through time,
/// through the masking and both directions.
void checkRecurrent(const std::string &op, int64_t gates, std::vector<testonnx::Pb> attrs,
                    int64_t layout) {
  using namespace testonnx;
  const int64_t T = 3, N = 2, I = 3, H = 2, D = 2;
  auto zeros = [](Extents e) { return Tensor::zeros(DType::F64, e); };
  Extents xs = layout == 0 ? Extents{T, N, I} : Extents{N, T, I};
  Extents ss = layout == 0 ? Extents{D, N, H} : Extents{N, D, H};
  std::vector<std::pair<std::string, Tensor>> inputs = {{"x", zeros(xs)},
                                                        {"w", zeros({D, gates * H, I})},
                                                        {"r", zeros({D, gates * H, H})},
                                                        {"b", zeros({D, 2 * gates * H})},
                                                        {"h0", zeros(ss)}};
  std::vector<std::string> ins = {"x", "w", "r", "b", "lens", "h0"};
  std::vector<std::string> outs = {"y", "yh"};
  if (op == "LSTM") {
    inputs.push_back({"c0", zeros(ss)});
    inputs.push_back({"p", zeros({D, 3 * H})});
    ins.insert(ins.end(), {"c0", "p"});
    outs.push_back("yc");
  }
  attrs.push_back(attrString("direction", "bidirectional"));
  attrs.push_back(attrInt("hidden_size", H));
  attrs.push_back(attrInt("layout", layout));
  Tensor lens = Tensor::fromVector<int32_t>(DType::I32, {N}, {3, 1});
  Expected<std::unique_ptr<Graph>> g =
      importModel(14, {node(op, ins, outs, attrs)}, inputs, {{"lens", lens}}, outs);
  ASSERT_TRUE(g) << g.error().message();
  Graph &graph = **g;
  // All outputs, flattened and joined, as the one value whose weighted sum is the loss.
  GradEmitter e(graph);
  std::vector<Value *> flat;
  for (Value *o : graph.outputs())
    flat.push_back(e.op(OpKind::Reshape, {o, e.i64s({-1})}));
  Value *y = e.op(OpKind::Concat, flat, {{"axis", int64_t(0)}});
  ASSERT_TRUE(e.ok()) << e.error().message();
  std::vector<Extents> shapes;
  for (Value *in : graph.inputs())
    shapes.push_back(*staticExtents(in->shape()));
  checkGraph(graph, y, shapes, -1, 1, 3);
}

TEST(Gradients, LstmNode) {
  for (int64_t layout : {0, 1}) {
    SCOPED_TRACE("layout " + std::to_string(layout));
    checkRecurrent("LSTM", 4, {}, layout);
  }
  checkRecurrent("LSTM", 4, {testonnx::attrInt("input_forget", 1)}, 0);
}

TEST(Gradients, GruNode) {
  for (int64_t lbr : {0, 1}) {
    SCOPED_TRACE("linear_before_reset " + std::to_string(lbr));
    checkRecurrent("GRU", 3, {testonnx::attrInt("linear_before_reset", lbr)}, lbr);
  }
}

TEST(Gradients, RnnNode) {
  checkRecurrent("RNN", 1, {}, 0);
  checkRecurrent("RNN", 1, {testonnx::attrStrings("activations", {"Relu", "Sigmoid"})}, 1);
}

/// A scan built by hand, checked by finite differences: state h [2, 3], sequences x [4, 2, 3]
/// (float) and live [4, 2, 1] (bool, a sequence_lens mask), invariants W [3, 3] and b [3].
/// Per step: a = tanh(h W + x + b); h' = live ? a : h; per-step outputs y = live ? a * h : 0
/// and h itself. The loss reads the final state and both stacked outputs. The gradient must be
/// one backward scan (no unrolled steps).
void checkScan(bool reverse) {
  const int64_t T = 4, N = 2, H = 3;
  Graph g("scan");
  auto f64 = [](const Extents &e) { return TensorType(DType::F64, shapeFromExtents(e)); };
  Value *h0 = g.addInput("h0", f64({N, H}));
  Value *x = g.addInput("x", f64({T, N, H}));
  Value *w = g.addInput("w", f64({H, H}));
  Value *b = g.addInput("b", f64({H}));
  std::vector<uint8_t> liveBits = {1, 1, 1, 0, 1, 1, 0, 0}; // lengths 3 and 2 (of steps 0..)
  if (reverse)
    liveBits = {0, 0, 1, 0, 1, 1, 1, 1}; // a reverse pass starts late
  Tensor liveT = Tensor::fromVector<uint8_t>(DType::Bool, {T, N, 1}, liveBits);
  Value *live = g.createNode(OpKind::Constant, {}, {liveT.type()}, {{"value", liveT}})->result();

  auto body = std::make_shared<Graph>("step");
  Value *h = body->addInput("h", f64({N, H}));
  Value *xt = body->addInput("xt", f64({N, H}));
  Value *lt = body->addInput("lt", TensorType(DType::Bool, shapeFromExtents({N, 1})));
  Value *wb = body->addInput("wb", f64({H, H}));
  Value *bb = body->addInput("bb", f64({H}));
  GradEmitter be(*body);
  Value *a = be.op(OpKind::Tanh, {be.add(be.add(be.op(OpKind::MatMul, {h, wb}), xt), bb)});
  Value *zero = be.scalar(0, DType::F64);
  Value *hNext = be.op(OpKind::Select, {lt, a, h});
  Value *y = be.op(OpKind::Select, {lt, be.mul(a, h), zero});
  ASSERT_TRUE(be.ok()) << be.error().message();
  body->setOutputs({hNext, y, h});

  AttrMap attrs = {
      {"num_carried", int64_t(1)}, {"num_scan_inputs", int64_t(2)}, {"reverse", int64_t(reverse)}};
  Node *scan = g.createNode(OpKind::Scan, {h0, x, live, w, b},
                            {f64({N, H}), f64({T, N, H}), f64({T, N, H})}, attrs, "loop");
  scan->setBody(body);
  GradEmitter e(g);
  std::vector<Value *> flat;
  for (Value *r : scan->results())
    flat.push_back(e.op(OpKind::Reshape, {r, e.i64s({-1})}));
  Value *all = e.op(OpKind::Concat, flat, {{"axis", int64_t(0)}});
  ASSERT_TRUE(e.ok()) << e.error().message();
  checkGraph(g, all, {{N, H}, {T, N, H}, {H, H}, {H}}, -1, 1, 5);
  int scans = 0;
  for (const Node *n : g.nodes())
    scans += n->kind() == OpKind::Scan;
  EXPECT_EQ(scans, 2) << "the forward and the backward loop";
}

TEST(Gradients, ScanForward) {
  checkScan(/*reverse=*/false);
}

TEST(Gradients, ScanReverse) {
  checkScan(/*reverse=*/true);
}

TEST(Gradients, Errors) {
  GraphBuilder b("g");
  Var x = b.input("x", DType::F64, {2, 3});
  Var y = b.op(OpKind::CumSum, {x},
               {{"exclusive", int64_t(0)}, {"reverse", int64_t(0)}, {"axis", int64_t(1)}});
  b.output(reduceSum(y, {}, false));
  Expected<std::unique_ptr<Graph>> g = b.build();
  ASSERT_TRUE(g) << g.error().message();
  Expected<std::vector<Value *>> r = gradients(**g, (*g)->outputs()[0], (*g)->inputs());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("no gradient rule for op cumsum"), std::string::npos)
      << r.error().message();
  Expected<std::vector<Value *>> r2 = gradients(**g, (*g)->inputs()[0], (*g)->inputs());
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message().find("one element"), std::string::npos);
}

} // namespace

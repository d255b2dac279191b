// nnc::Trainer over a GraphBuilder model: the compiled CPU train step against the reference
// interpreter step by step, for every optimizer, and the errors of Trainer::create.
#include <gtest/gtest.h>

#include <random>

#include "TestTarget.h"
#include "nnc/frontend/GraphBuilder.h"
#include "nnc/runtime/OpenCL.h"
#include "nnc/train/Trainer.h"

using namespace nnc;

namespace {

Tensor randomTensor(const Extents &e, std::mt19937 &rng, float scale) {
  Tensor t = Tensor::zeros(DType::F32, e);
  std::uniform_real_distribution<float> d(-scale, scale);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = d(rng);
  return t;
}

/// An MLP 8-16-4 with a symbolic batch; its parameters' value names go to `params`.
std::unique_ptr<Graph> mlp(std::vector<std::string> &params) {
  std::mt19937 rng(3);
  GraphBuilder b("mlp");
  Var x = b.input("x", DType::F32, {Dim::symbol("N"), 8});
  Var w0 = b.constant(randomTensor({8, 16}, rng, 0.35f));
  Var b0 = b.constant(randomTensor({16}, rng, 0.35f));
  Var w1 = b.constant(randomTensor({16, 4}, rng, 0.25f));
  Var b1 = b.constant(randomTensor({4}, rng, 0.25f));
  b.output(matmul(relu(matmul(x, w0) + b0), w1) + b1);
  params = {w0.value()->name(), b0.value()->name(), w1.value()->name(), b1.value()->name()};
  Expected<std::unique_ptr<Graph>> g = b.build();
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

std::vector<double> train(OptimizerKind opt, LossKind loss, driver::Target target, int steps,
                          std::map<std::string, Tensor> *finalParams = nullptr) {
  std::vector<std::string> params;
  std::unique_ptr<Graph> g = mlp(params);
  TrainOptions o(target);
  o.optimizer = opt;
  o.loss = loss;
  o.lr = opt == OptimizerKind::Sgd                                   ? 0.3
         : opt == OptimizerKind::Adagrad                             ? 0.1
         : opt == OptimizerKind::Adam || opt == OptimizerKind::AdamW ? 0.01
                                                                     : 0.05;
  o.batch = 16;
  o.exec.threads = 1;
  o.clipNorm = opt == OptimizerKind::Nesterov ? 1.0 : 0;
  Expected<std::unique_ptr<Trainer>> tr = Trainer::create(*g, params, o);
  EXPECT_TRUE(tr) << tr.error().message();
  if (!tr)
    return {};
  std::mt19937 rng(7);
  Tensor x = randomTensor({16, 8}, rng, 1);
  Tensor y = loss == LossKind::SoftmaxCrossEntropy ? Tensor::zeros(DType::I64, {16})
                                                   : randomTensor({16, 4}, rng, 1);
  for (int64_t i = 0; loss == LossKind::SoftmaxCrossEntropy && i < 16; ++i)
    y.data<int64_t>()[i] = (i * 7) % 4;
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    Expected<double> l = (*tr)->step(x, y);
    EXPECT_TRUE(l) << l.error().message();
    if (!l)
      return losses;
    losses.push_back(*l);
  }
  if (finalParams) {
    Expected<std::map<std::string, Tensor>> ps = (*tr)->parameters();
    EXPECT_TRUE(ps) << ps.error().message();
    if (ps)
      *finalParams = std::move(*ps);
  }
  return losses;
}

TEST(Trainer, CpuStepMatchesInterpreterForEveryOptimizer) {
  for (OptimizerKind opt : {OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::Nesterov,
                            OptimizerKind::Adam, OptimizerKind::AdamW, OptimizerKind::Adagrad})
    for (LossKind loss : {LossKind::SoftmaxCrossEntropy, LossKind::MeanSquaredError}) {
      SCOPED_TRACE(static_cast<int>(opt) * 10 + static_cast<int>(loss));
      std::vector<double> interp =
          train(opt, loss, testenv::testTarget(driver::Target::Interp), 30);
      std::vector<double> cpu = train(opt, loss, testenv::testTarget(driver::Target::Cpu), 30);
      ASSERT_EQ(interp.size(), 30u);
      ASSERT_EQ(cpu.size(), 30u);
      for (size_t i = 0; i < cpu.size(); ++i)
        EXPECT_NEAR(cpu[i], interp[i], 1e-4 * std::abs(interp[i]) + 1e-6) << "step " << i;
      // Memorizing one batch: the loss falls.
      EXPECT_LT(cpu.back(), 0.9 * cpu.front()) << ::testing::PrintToString(cpu);
    }
}

/// A small CNN: strided and unit-stride convs (both input-gradient forms), max pooling.
TEST(Trainer, CnnCpuStepMatchesInterpreter) {
  std::mt19937 rng(5);
  GraphBuilder b("cnn");
  Var x = b.input("x", DType::F32, {Dim::symbol("N"), 2, 12, 12});
  std::vector<Var> ps = {
      b.constant(randomTensor({4, 2, 3, 3}, rng, 0.4f)), b.constant(randomTensor({4}, rng, 0.1f)),
      b.constant(randomTensor({4, 4, 3, 3}, rng, 0.3f)), b.constant(randomTensor({4}, rng, 0.1f)),
      b.constant(randomTensor({6, 4, 3, 3}, rng, 0.3f)), b.constant(randomTensor({6}, rng, 0.1f)),
      b.constant(randomTensor({24, 3}, rng, 0.3f)),      b.constant(randomTensor({3}, rng, 0.1f))};
  Var h = relu(conv2d(x, ps[0], ps[1], /*stride=*/2, /*pad=*/1));
  h = maxPool2d(relu(conv2d(h, ps[2], ps[3], 1, 1)), 2, 2);
  h = relu(conv2d(h, ps[4], ps[5], 2, 1));
  b.output(matmul(reshape(h, {-1, 24}), ps[6]) + ps[7]);
  std::vector<std::string> params;
  for (const Var &p : ps)
    params.push_back(p.value()->name());
  Expected<std::unique_ptr<Graph>> g = b.build();
  ASSERT_TRUE(g) << g.error().message();
  Tensor xs = randomTensor({8, 2, 12, 12}, rng, 1);
  Tensor ys = Tensor::zeros(DType::I64, {8});
  for (int64_t i = 0; i < 8; ++i)
    ys.data<int64_t>()[i] = i % 3;
  std::vector<std::vector<double>> losses;
  for (auto kind : {driver::Target::Interp, driver::Target::Cpu}) {
    TrainOptions o(testenv::testTarget(kind));
    o.batch = 8;
    o.lr = 0.01;
    o.exec.threads = 1;
    Expected<std::unique_ptr<Trainer>> tr = Trainer::create(**g, params, o);
    ASSERT_TRUE(tr) << tr.error().message();
    losses.emplace_back();
    for (int s = 0; s < 10; ++s) {
      Expected<double> l = (*tr)->step(xs, ys);
      ASSERT_TRUE(l) << l.error().message();
      losses.back().push_back(*l);
    }
  }
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_NEAR(losses[1][i], losses[0][i], 1e-4 * std::abs(losses[0][i])) << "step " << i;
  EXPECT_LT(losses[1].back(), 0.9 * losses[1].front()) << ::testing::PrintToString(losses[1]);
}

TEST(Trainer, OpenCLStepMatchesInterpreter) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices || devices->empty())
    GTEST_SKIP() << "no OpenCL device";
  driver::Target cl = testenv::testTarget(driver::Target::OpenCL);
  std::map<std::string, Tensor> pi, pg;
  std::vector<double> interp = train(OptimizerKind::Adam, LossKind::SoftmaxCrossEntropy,
                                     testenv::testTarget(driver::Target::Interp), 10, &pi);
  std::vector<double> gpu = train(OptimizerKind::Adam, LossKind::SoftmaxCrossEntropy, cl, 10, &pg);
  ASSERT_EQ(gpu.size(), interp.size());
  for (size_t i = 0; i < gpu.size(); ++i)
    EXPECT_NEAR(gpu[i], interp[i], 1e-4 * std::abs(interp[i]) + 1e-6) << "step " << i;
  // The parameters, read back from the device after the last step.
  ASSERT_EQ(pg.size(), pi.size());
  for (const auto &[name, t] : pi)
    EXPECT_EQ(driver::compareTensors(t, pg[name], 1e-3, 1e-5), "") << name;
}

// On OpenCL the parameters, Adam's moments, lr and the step count stay on the device: a step
// uploads the batch and the labels and downloads the loss, nothing else.
TEST(Trainer, OpenCLStepMovesOnlyBatchAndLoss) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices || devices->empty())
    GTEST_SKIP() << "no OpenCL device";
  std::vector<std::string> params;
  std::unique_ptr<Graph> g = mlp(params);
  TrainOptions o(testenv::testTarget(driver::Target::OpenCL));
  o.lr = 0.01;
  o.batch = 16;
  Expected<std::unique_ptr<Trainer>> tr = Trainer::create(*g, params, o);
  ASSERT_TRUE(tr) << tr.error().message();
  auto *cl = dynamic_cast<OpenCLExecutable *>((*tr)->executable());
  ASSERT_NE(cl, nullptr);
  // Loaded once, beside the graph's constants: 4 parameters, 8 Adam moments, lr and the step
  // count.
  int64_t paramBytes = (8 * 16 + 16 + 16 * 4 + 4) * 4;
  EXPECT_GE(cl->loadTransfers().uploads, 4 + 8 + 2);
  EXPECT_GE(cl->loadTransfers().uploadBytes, 3 * paramBytes + 4 + 8);
  std::mt19937 rng(7);
  Tensor x = randomTensor({16, 8}, rng, 1);
  Tensor y = Tensor::zeros(DType::I64, {16});
  cl->resetRunCounters();
  const int steps = 5;
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    Expected<double> l = (*tr)->step(x, y);
    ASSERT_TRUE(l) << l.error().message();
    losses.push_back(*l);
  }
  TransferStats t = cl->runTransfers();
  EXPECT_EQ(t.uploads, 2 * steps);
  EXPECT_EQ(t.uploadBytes, steps * (16 * 8 * 4 + 16 * 8));
  EXPECT_EQ(t.downloads, steps);
  EXPECT_EQ(t.downloadBytes, steps * 4);
  EXPECT_LT(losses.back(), losses.front());
  // Reading the parameters back downloads each once.
  Expected<std::map<std::string, Tensor>> ps = (*tr)->parameters();
  ASSERT_TRUE(ps) << ps.error().message();
  EXPECT_EQ(cl->runTransfers().downloads, steps + 4);
  EXPECT_EQ(cl->runTransfers().downloadBytes, steps * 4 + paramBytes);
}

/// The targets the tests below run on: interp, cpu, and opencl where a device is present.
std::vector<driver::Target::Kind> targetKinds() {
  std::vector<driver::Target::Kind> kinds = {driver::Target::Interp, driver::Target::Cpu};
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (devices && !devices->empty())
    kinds.push_back(driver::Target::OpenCL);
  return kinds;
}

/// Batch norm straight on the input: its batch statistics do not depend on the parameters, so
/// the running statistics after k steps on one batch b are closed-form: r_k = m^k r_0 +
/// (1 - m^k) b (the variance's b unbiased). Every target (interp, cpu, opencl where present)
/// must give them, and a shared constant must be refused.
TEST(Trainer, BatchNormUpdatesRunningStatistics) {
  const int64_t n = 6, c = 3, hw = 4;
  const double momentum = 0.8;
  std::mt19937 rng(11);
  Tensor mean0 = randomTensor({c}, rng, 0.5f), var0 = randomTensor({c}, rng, 0.5f);
  for (int64_t i = 0; i < c; ++i)
    var0.data<float>()[i] += 1.0f;
  auto model = [&](bool shared) {
    GraphBuilder b("bn");
    Var x = b.input("x", DType::F32, {Dim::symbol("N"), c, 2, 2});
    Var scale = b.constant(randomTensor({c}, rng, 1)), bias = b.constant(randomTensor({c}, rng, 1));
    Var mean = b.constant(mean0), var = shared ? scale : b.constant(var0);
    Var y = b.op(OpKind::BatchNorm, {x, scale, bias, mean, var},
                 {{"epsilon", 1e-5}, {"momentum", momentum}}, "bn");
    b.output(matmul(reshape(relu(y), {-1, c * hw}), b.constant(randomTensor({c * hw, 2}, rng, 1))));
    Expected<std::unique_ptr<Graph>> g = b.build();
    EXPECT_TRUE(g) << g.error().message();
    return std::make_pair(g ? std::move(*g) : nullptr,
                          std::make_pair(mean.value()->name(), var.value()->name()));
  };
  Tensor x = randomTensor({n, c, 2, 2}, rng, 2);
  Tensor y = Tensor::zeros(DType::I64, {n});
  // The batch's statistics per channel, in double.
  std::vector<double> bm(c, 0), bv(c, 0);
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j)
        bm[k] += x.data<float>()[(i * c + k) * hw + j] / double(n * hw);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        double d = x.data<float>()[(i * c + k) * hw + j] - bm[k];
        bv[k] += d * d / double(n * hw - 1);
      }
  }
  const int steps = 3;
  for (driver::Target::Kind kind : targetKinds()) {
    SCOPED_TRACE(static_cast<int>(kind));
    auto [g, names] = model(false);
    ASSERT_TRUE(g);
    TrainOptions o(testenv::testTarget(kind));
    o.optimizer = OptimizerKind::Sgd;
    o.lr = 0.1;
    o.batch = n;
    o.exec.threads = 1;
    Expected<std::unique_ptr<Trainer>> tr = Trainer::create(*g, {}, o);
    ASSERT_TRUE(tr) << tr.error().message();
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      Expected<double> l = (*tr)->step(x, y);
      ASSERT_TRUE(l) << l.error().message();
      losses.push_back(*l);
    }
    EXPECT_LT(losses.back(), losses.front());
    Expected<std::map<std::string, Tensor>> ps = (*tr)->parameters();
    ASSERT_TRUE(ps) << ps.error().message();
    // scale, bias, the matmul's weight, and the two running statistics.
    ASSERT_EQ(ps->size(), 5u);
    double mk = std::pow(momentum, steps);
    for (int64_t k = 0; k < c; ++k) {
      EXPECT_NEAR(ps->at(names.first).data<float>()[k],
                  mk * mean0.data<float>()[k] + (1 - mk) * bm[k], 1e-5)
          << "mean " << k;
      EXPECT_NEAR(ps->at(names.second).data<float>()[k],
                  mk * var0.data<float>()[k] + (1 - mk) * bv[k], 1e-5)
          << "var " << k;
    }
  }
  auto [shared, unused] = model(true);
  TrainOptions o(testenv::testTarget());
  o.batch = n;
  Expected<std::unique_ptr<Trainer>> refused = Trainer::create(*shared, {}, o);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("is used elsewhere too"), std::string::npos)
      << refused.error().message();
}

/// dropoutTraining's masks: the same for a counter on every target, new for a new counter,
/// keeping about 1 - ratio of the elements, and y = x keep / (1 - ratio).
TEST(Trainer, DropoutMasks) {
  const double ratio = 0.3;
  Graph g("dropout");
  Value *counter = g.addInput("counter", TensorType(DType::I64, {}));
  Value *x = g.addInput("x", TensorType(DType::F32, {64, 1000}));
  GradEmitter e(g);
  std::array<Value *, 2> r = dropoutTraining(e, x, e.scalar(ratio, DType::F32), counter, 0);
  ASSERT_TRUE(e.ok()) << e.error().message();
  g.setOutputs({r[0], r[1]});
  std::mt19937 rng(2);
  Tensor xs = randomTensor({64, 1000}, rng, 1);
  std::vector<std::vector<Tensor>> outs; // per target: y, keep at counter 1, then counter 2
  for (driver::Target::Kind kind : targetKinds()) {
    std::unique_ptr<Graph> c = g.clone();
    ASSERT_FALSE(driver::optimize(*c, testenv::testTarget(kind)));
    Expected<std::unique_ptr<driver::Runner>> run =
        driver::Runner::create(*c, testenv::testTarget(kind));
    ASSERT_TRUE(run) << run.error().message();
    outs.emplace_back();
    for (int64_t step : {1, 2}) {
      Expected<std::vector<Tensor>> o =
          (*run)->run({Tensor::scalar<int64_t>(DType::I64, step), xs});
      ASSERT_TRUE(o) << o.error().message();
      outs.back().insert(outs.back().end(), o->begin(), o->end());
    }
  }
  const std::vector<Tensor> &ref = outs[0];
  int64_t n = xs.numElements(), kept = 0, changed = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = ref[1].data<bool>()[i];
    kept += keep;
    changed += keep != ref[3].data<bool>()[i];
    EXPECT_FLOAT_EQ(ref[0].data<float>()[i],
                    keep ? xs.data<float>()[i] * static_cast<float>(1 / (1 - ratio)) : 0.0f);
  }
  // Binomial: standard deviation sqrt(0.21 / 64000) = 0.0018 of the keep rate.
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 1 - ratio, 0.01);
  // Independent masks differ where one keeps and the other drops: 2 * 0.7 * 0.3 = 42%.
  EXPECT_NEAR(static_cast<double>(changed) / static_cast<double>(n), 0.42, 0.02);
  for (size_t t = 1; t < outs.size(); ++t)
    for (size_t k = 0; k < ref.size(); ++k)
      EXPECT_EQ(driver::compareTensors(outs[t][k], ref[k], 0, 0), "")
          << "target " << t << " output " << k;
}

/// A model with dropout (a kStepCounterInput, as ImportOptions::forTraining gives it): with
/// lr 0 on one batch, the loss changes with each step's mask alone. The masks are new each
/// step, the same for the same seed on every target, other for another seed.
TEST(Trainer, DropoutMaskEachStepFromTheSeed) {
  auto losses = [](driver::Target::Kind kind, uint64_t seed) {
    std::mt19937 rng(4);
    Graph g("dropout_mlp");
    Value *x = g.addInput("x", TensorType(DType::F32, {Dim::symbol("N"), 32}));
    Value *counter = g.addInput(kStepCounterInput, TensorType(DType::I64, {}));
    GradEmitter e(g);
    Value *w = e.constant(randomTensor({32, 4}, rng, 0.5f));
    Value *h = dropoutTraining(e, x, e.scalar(0.5, DType::F32), counter, 0)[0];
    g.setOutputs({e.op(OpKind::MatMul, {h, w})});
    EXPECT_TRUE(e.ok()) << e.error().message();
    TrainOptions o(testenv::testTarget(kind));
    o.optimizer = OptimizerKind::Sgd;
    o.lr = 0;
    o.batch = 8;
    o.seed = seed;
    o.exec.threads = 1;
    Expected<std::unique_ptr<Trainer>> tr = Trainer::create(g, {}, o);
    EXPECT_TRUE(tr) << tr.error().message();
    std::vector<double> out;
    Tensor xs = randomTensor({8, 32}, rng, 1);
    Tensor ys = Tensor::zeros(DType::I64, {8});
    for (int s = 0; tr && s < 6; ++s) {
      Expected<double> l = (*tr)->step(xs, ys);
      EXPECT_TRUE(l) << l.error().message();
      out.push_back(l ? *l : 0);
    }
    return out;
  };
  std::vector<double> ref = losses(driver::Target::Interp, 5);
  ASSERT_EQ(ref.size(), 6u);
  for (size_t s = 1; s < ref.size(); ++s)
    EXPECT_NE(ref[s], ref[0]) << "step " << s << " drew step 0's mask";
  for (driver::Target::Kind kind : targetKinds()) {
    std::vector<double> same = losses(kind, 5);
    ASSERT_EQ(same.size(), ref.size());
    for (size_t s = 0; s < ref.size(); ++s)
      EXPECT_NEAR(same[s], ref[s], 1e-5 * std::abs(ref[s])) << "target " << kind << " step " << s;
  }
  std::vector<double> other = losses(driver::Target::Interp, 6);
  EXPECT_NE(other, ref);
}

TEST(Trainer, Errors) {
  std::vector<std::string> params;
  std::unique_ptr<Graph> g = mlp(params);
  TrainOptions o(testenv::testTarget());
  o.batch = 4;
  Expected<std::unique_ptr<Trainer>> none = Trainer::create(*g, {"not_a_parameter"}, o);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("no float initializers"), std::string::npos);
  // No names: every float constant of rank >= 1, the MLP's weights and biases.
  Expected<std::unique_ptr<Trainer>> all = Trainer::create(*g, {}, o);
  ASSERT_TRUE(all) << all.error().message();
  Expected<std::map<std::string, Tensor>> allParams = (*all)->parameters();
  ASSERT_TRUE(allParams) << allParams.error().message();
  EXPECT_EQ(allParams->size(), params.size());
  Expected<std::unique_ptr<Trainer>> tr = Trainer::create(*g, params, o);
  ASSERT_TRUE(tr) << tr.error().message();
  Tensor x = Tensor::zeros(DType::F32, {4, 8});
  Expected<double> bad = (*tr)->step(x, Tensor::zeros(DType::F32, {4}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("the labels are f32[4]"), std::string::npos)
      << bad.error().message();
  Expected<double> badX =
      (*tr)->step(Tensor::zeros(DType::F32, {5, 8}), Tensor::zeros(DType::I64, {4}));
  ASSERT_FALSE(badX);
  EXPECT_FALSE(parseLoss("hinge"));
  EXPECT_FALSE(parseOptimizer("lamb"));
}

} // namespace

// Trains a GraphBuilder MLP with the installed nnc::Trainer: the compiled train step (forward,
// backward, Adam) on the CPU target, on a problem it must fit (the class is the index of the
// largest of 4 features).
#include <cstdio>
#include <random>
#include <string>

#include <nnc/frontend/GraphBuilder.h>
#include <nnc/train/Trainer.h>

int main() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto weights = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v)
      x = normal(rng);
    return v;
  };
  nnc::GraphBuilder b("mlp");
  nnc::Var x = b.input("x", nnc::DType::F32, {nnc::Dim::symbol("N"), 4});
  nnc::Var h = nnc::relu(nnc::matmul(x, b.constant({4, 16}, weights(64))) +
                         b.constant({16}, std::vector<float>(16, 0.0f)));
  b.output(nnc::matmul(h, b.constant({16, 4}, weights(64))) +
           b.constant({4}, std::vector<float>(4, 0.0f)));
  auto g = b.build();
  if (!g) {
    std::fprintf(stderr, "build failed: %s\n", g.error().message().c_str());
    return 1;
  }
  // Softmax cross-entropy, Adam, lr 1e-3, on the CPU for this host (the target is always
  // stated: the library never assumes the host).
  nnc::TrainOptions opts(nnc::Target(nnc::Target::Cpu, nnc::CpuTarget::host()));
  opts.lr = 0.01;
  opts.batch = 32;
  opts.exec.threads = 1;
  // No parameter names: every float constant of the graph is trained.
  auto trainer = nnc::Trainer::create(**g, {}, opts);
  if (!trainer) {
    std::fprintf(stderr, "Trainer::create failed: %s\n", trainer.error().message().c_str());
    return 1;
  }
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  double first = 0, last = 0;
  const int steps = 300;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> xs(32 * 4);
    std::vector<int64_t> ys(32);
    for (int i = 0; i < 32; ++i) {
      for (int j = 0; j < 4; ++j)
        xs[static_cast<size_t>(i * 4 + j)] = uniform(rng);
      int best = 0;
      for (int j = 1; j < 4; ++j)
        best = xs[static_cast<size_t>(i * 4 + j)] > xs[static_cast<size_t>(i * 4 + best)] ? j : best;
      ys[static_cast<size_t>(i)] = best;
    }
    auto loss = (*trainer)->step(nnc::Tensor::fromVector<float>(nnc::DType::F32, {32, 4}, xs),
                                 nnc::Tensor::fromVector<int64_t>(nnc::DType::I64, {32}, ys));
    if (!loss) {
      std::fprintf(stderr, "step %d failed: %s\n", s, loss.error().message().c_str());
      return 1;
    }
    if (s < 20)
      first += *loss / 20;
    else if (s >= steps - 20)
      last += *loss / 20;
  }
  if (!(last < first / 2)) {
    std::fprintf(stderr, "the loss did not fall: first 20 steps %g, last 20 %g\n", first, last);
    return 1;
  }
  auto params = (*trainer)->parameters();
  if (!params || params->size() != 4) {
    std::fprintf(stderr, "expected the 4 weights and biases as parameters, got %s\n",
                 params ? std::to_string(params->size()).c_str() : params.error().message().c_str());
    return 1;
  }
  std::printf("train consumer OK: %zu parameters, loss %.4f -> %.4f over %d steps\n",
              params->size(), first, last, steps);
  return 0;
}

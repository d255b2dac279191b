// Builds the MNIST MLP (784-512-256-10) with the graph-builder API and runs it.
#include <cstdio>
#include <random>

#include "nnc/frontend/GraphBuilder.h"
#include "nnc/runtime/Interpreter.h"

// Random weights stand in for trained ones.
static nnc::Tensor randomTensor(const nnc::Extents &extents, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> v(static_cast<size_t>(*nnc::checkedNumElements(extents)));
  for (float &x : v)
    x = dist(rng);
  return nnc::Tensor::fromVector<float>(nnc::DType::F32, extents, v);
}

int main() {
  std::mt19937 rng(42);
  // ---- The model: 15 lines ----
  nnc::GraphBuilder b("mnist_mlp");
  nnc::Var h = b.input("image", nnc::DType::F32, {nnc::Dim::symbol("N"), 784});
  const int64_t sizes[] = {784, 512, 256, 10};
  for (int i = 0; i < 3; ++i) {
    nnc::Var w = b.constant(randomTensor({sizes[i], sizes[i + 1]}, rng));
    nnc::Var bias = b.constant(randomTensor({sizes[i + 1]}, rng));
    h = nnc::matmul(h, w) + bias;
    if (i < 2)
      h = nnc::relu(h);
  }
  b.output(nnc::softmax(h, -1));
  nnc::Expected<std::unique_ptr<nnc::Graph>> graph = b.build();
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.error().message().c_str());
    return 1;
  }

  // ---- Run it on a batch of 2 random images ----
  nnc::Tensor images = randomTensor({2, 784}, rng);
  nnc::Expected<std::vector<nnc::Tensor>> out = nnc::interpret(**graph, {images});
  if (!out) {
    std::fprintf(stderr, "error: %s\n", out.error().message().c_str());
    return 1;
  }
  const float *p = (*out)[0].data<float>();
  for (int n = 0; n < 2; ++n) {
    int best = 0;
    float sum = 0;
    for (int k = 0; k < 10; ++k) {
      sum += p[n * 10 + k];
      if (p[n * 10 + k] > p[n * 10 + best])
        best = k;
    }
    std::printf("image %d: class %d (p=%.4f), probabilities sum to %.6f\n", n, best,
                p[n * 10 + best], sum);
  }
  return 0;
}

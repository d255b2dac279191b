// Builds y = relu(x @ w + b) with the installed graph-builder API and checks the result.
#include <cmath>
#include <cstdio>

#include <nnc/frontend/GraphBuilder.h>
#include <nnc/runtime/Interpreter.h>

int main() {
  nnc::GraphBuilder b("consumer");
  nnc::Var x = b.input("x", nnc::DType::F32, {nnc::Dim::symbol("N"), 2});
  nnc::Var w = b.constant({2, 2}, {1, -1, 2, 0.5f});
  nnc::Var bias = b.constant({2}, {0.5f, -10});
  b.output(nnc::relu(nnc::matmul(x, w) + bias));
  auto g = b.build();
  if (!g) {
    std::fprintf(stderr, "build failed: %s\n", g.error().message().c_str());
    return 1;
  }
  nnc::Tensor in = nnc::Tensor::fromVector<float>(nnc::DType::F32, {1, 2}, {1, 2});
  auto out = nnc::interpret(**g, {in});
  if (!out) {
    std::fprintf(stderr, "run failed: %s\n", out.error().message().c_str());
    return 1;
  }
  const float *y = (*out)[0].data<float>();
  // [1,2] @ [[1,-1],[2,0.5]] = [5, 0]; + [0.5,-10] = [5.5, -10]; relu -> [5.5, 0].
  if (std::fabs(y[0] - 5.5f) > 1e-6f || y[1] != 0.0f) {
    std::fprintf(stderr, "wrong result: %g %g\n", y[0], y[1]);
    return 1;
  }
  // A shape error is caught while building, with the op named.
  nnc::GraphBuilder bad;
  nnc::Var p = bad.input("p", nnc::DType::F32, {3});
  nnc::Var q = bad.input("q", nnc::DType::F32, {4});
  bad.output(p + q);
  auto g2 = bad.build();
  if (g2 || g2.error().message().find("add") == std::string::npos) {
    std::fprintf(stderr, "expected a shape error naming add\n");
    return 1;
  }
  std::printf("consumer OK: y = [%g, %g]; shape error: %s\n", y[0], y[1],
              g2.error().message().c_str());
  return 0;
}

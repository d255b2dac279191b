// Runs a one-kernel launch list with only the installed runtime core (nnc::nnc_runtime_core)
// linked: the exported target must carry what it needs and nothing of the compiler.
#include <cstdio>

#include <nnc/runtime/core/BufferPlan.h>
#include <nnc/runtime/core/CpuLaunchList.h>

namespace {
/// y = 2 * x over 8 floats, with the generated kernels' ABI.
void twice(void **b) {
  const float *x = static_cast<const float *>(b[0]);
  float *y = static_cast<float *>(b[1]);
  for (int i = 0; i < 8; ++i)
    y[i] = 2 * x[i];
}
} // namespace

int main() {
  nnc::RunPlan p;
  p.inputNames = {"x"};
  p.inputTypes = {nnc::TensorType{nnc::DType::F32, nnc::Shape{nnc::Dim(8)}}};
  nnc::OutputSpec y;
  y.kind = nnc::OutputSpec::Fresh;
  y.extents = {8};
  p.outputs = {y};
  p.firstArg = {0};
  p.args = {{nnc::SlotKind::Input, 0}, {nnc::SlotKind::Output, 0}};
  p.plan = nnc::planBuffers({});
  p.arenaBytes = nnc::kArenaAlignment;
  nnc::ThreadPool pool(2);
  nnc::CpuLaunchList list(p, {&twice}, &pool);
  auto out =
      list.run({nnc::Tensor::fromVector<float>(nnc::DType::F32, {8}, {0, 1, 2, 3, 4, 5, 6, 7})});
  if (!out) {
    std::fprintf(stderr, "core run failed: %s\n", out.error().message().c_str());
    return 1;
  }
  const float *v = (*out)[0].data<float>();
  for (int i = 0; i < 8; ++i)
    if (v[i] != 2.0f * float(i)) {
      std::fprintf(stderr, "core run: y[%d] = %g\n", i, double(v[i]));
      return 1;
    }
  std::printf("core consumer OK\n");
  return 0;
}

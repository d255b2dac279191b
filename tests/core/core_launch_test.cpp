// Runs launch lists with nothing but the runtime core linked (nnc_runtime_core: no LLVM, no
// libclang, no protobuf; tests/core/check_layering.sh checks this binary's ldd). The kernels
// are plain C++ functions with the generated kernels' ABI (KernelFn: void(void **)), and an
// OpenCL program is given as source, as a deployed artifact would give them; tensors go
// through .npy files.
//
// The plan: y = (x * w) + 1 on the CPU, through an arena buffer t placed by planBuffers(), the
// multiply's loop parallel through nnc_parallel_for; the same plan on an OpenCL device when
// there is one. Exit 0 when every check holds.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "BufferPlan.h"
#include "CpuLaunchList.h"
#include "OpenCLLaunchList.h"
#include "ThreadPool.h"
#include "nnc/runtime/NpyFile.h"

namespace {

int failures = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                \
      std::fprintf(stderr, __VA_ARGS__);                                                           \
      std::fputc('\n', stderr);                                                                    \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

constexpr int64_t kN = 4099; // not a multiple of any chunk size

std::atomic<int> poolSeen{0}; // the multiply found the launch list's pool current

struct MulCtx {
  const float *x, *w;
  float *t;
};

void mulBody(void *ctx, int64_t begin, int64_t end) {
  auto *c = static_cast<MulCtx *>(ctx);
  for (int64_t i = begin; i < end; ++i)
    c->t[i] = c->x[i] * c->w[i];
}

/// t = x * w, its loop run by the pool (the way generated code calls nnc_parallel_for).
void mulKernel(void **b) {
  if (nnc::ThreadPool::current())
    ++poolSeen;
  MulCtx c{static_cast<const float *>(b[0]), static_cast<const float *>(b[1]),
           static_cast<float *>(b[2])};
  nnc_parallel_for(&mulBody, &c, kN);
}

/// y = t + 1.
void addOneKernel(void **b) {
  const float *t = static_cast<const float *>(b[0]);
  float *y = static_cast<float *>(b[1]);
  for (int64_t i = 0; i < kN; ++i)
    y[i] = t[i] + 1.0f;
}

nnc::RunPlan makePlan() {
  using namespace nnc;
  RunPlan p;
  p.inputNames = {"x"};
  p.inputTypes = {TensorType{DType::F32, Shape{Dim(kN)}}};
  OutputSpec y;
  y.kind = OutputSpec::Fresh;
  y.dtype = DType::F32;
  y.extents = {kN};
  p.outputs = {y};
  std::vector<float> w(kN);
  for (int64_t i = 0; i < kN; ++i)
    w[i] = float(i % 7) - 3.0f;
  p.weights = {Tensor::fromVector<float>(DType::F32, {kN}, w)};
  // t lives in the arena beside a scratch buffer of the first kernel (both live at launch 0).
  BufferRequest scratch{"scratch", 256, 0, 0};
  BufferRequest t{"t", kN * 4, 0, 1};
  p.plan = planBuffers({scratch, t});
  p.arenaBytes = (p.plan.peakBytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  int64_t tOffset = -1;
  for (const BufferPlan::Entry &e : p.plan.entries)
    if (e.name == "t")
      tOffset = e.offset;
  p.firstArg = {0, 3};
  p.args = {{SlotKind::Input, 0},
            {SlotKind::Weight, 0},
            {SlotKind::Arena, tOffset},
            {SlotKind::Arena, tOffset},
            {SlotKind::Output, 0}};
  return p;
}

nnc::Tensor makeInput() {
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i)
    x[i] = 0.5f * float(i % 11);
  return nnc::Tensor::fromVector<float>(nnc::DType::F32, {kN}, x);
}

void checkOutput(const char *what, const nnc::Expected<std::vector<nnc::Tensor>> &out,
                 const nnc::RunPlan &p, const nnc::Tensor &x) {
  CHECK(bool(out), "%s: %s", what, out ? "" : out.error().message().c_str());
  if (!out)
    return;
  CHECK(out->size() == 1 && (*out)[0].numElements() == kN, "%s: wrong outputs", what);
  if (out->size() != 1 || (*out)[0].numElements() != kN)
    return;
  const float *y = (*out)[0].data<float>(), *xs = x.data<float>();
  const float *w = p.weights[0].data<float>();
  int bad = 0;
  for (int64_t i = 0; i < kN; ++i)
    bad += y[i] != xs[i] * w[i] + 1.0f;
  CHECK(bad == 0, "%s: %d of %lld elements wrong (y[1] = %g)", what, bad, (long long)kN,
        double(y[1]));
}

void testCpu() {
  nnc::RunPlan p = makePlan();
  // Both buffers are live at launch 0: the plan keeps them apart, 64-byte aligned.
  CHECK(p.plan.entries.size() == 2 && p.plan.peakBytes >= kN * 4 + 256 &&
            p.plan.entries[0].offset % nnc::kArenaAlignment == 0 &&
            p.plan.entries[1].offset % nnc::kArenaAlignment == 0 &&
            p.plan.entries[0].offset != p.plan.entries[1].offset,
        "plan:\n%s", p.plan.str().c_str());
  nnc::ThreadPool pool(4);
  nnc::CpuLaunchList list(p, {&mulKernel, &addOneKernel}, &pool);
  nnc::Tensor x = makeInput();
  checkOutput("cpu", list.run({x}), p, x);
  CHECK(poolSeen == 1, "the kernel ran with the pool current %d times, expected 1",
        poolSeen.load());

  // Concurrent runs take separate arenas.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        auto out = list.run({x});
        if (!out)
          continue;
        const float *y = (*out)[0].data<float>();
        bool good = true;
        for (int64_t j = 0; j < kN; ++j)
          good &= y[j] == x.data<float>()[j] * p.weights[0].data<float>()[j] + 1.0f;
        ok += good;
      }
    });
  for (std::thread &t : threads)
    t.join();
  CHECK(ok == 80, "%d of 80 concurrent runs right", ok.load());

  // Per-kernel times are added when asked for.
  std::vector<double> ms(2, 0.0);
  checkOutput("cpu timed", list.run({x}, &ms), p, x);
  CHECK(ms[0] > 0 && ms[1] > 0, "kernel times %g %g", ms[0], ms[1]);

  // A wrong input is a clear error naming it.
  auto bad = list.run({nnc::Tensor::zeros(nnc::DType::F32, {3})});
  CHECK(!bad && bad.error().message().find("input 'x'") != std::string::npos,
        "a wrong input gave: %s", bad ? "success" : bad.error().message().c_str());
}

// The same plan as an OpenCL program; each buffer is a (base, byte offset) pair.
const char *kSource = R"(
__kernel void mul(__global uchar *x, ulong xo, __global uchar *w, ulong wo,
                  __global uchar *t, ulong to) {
  size_t i = get_global_id(0);
  ((__global float *)(t + to))[i] =
      ((__global const float *)(x + xo))[i] * ((__global const float *)(w + wo))[i];
}
__kernel void add_one(__global uchar *t, ulong to, __global uchar *y, ulong yo) {
  size_t i = get_global_id(0);
  ((__global float *)(y + yo))[i] = ((__global const float *)(t + to))[i] + 1.0f;
}
)";

void testOpenCL() {
  auto devices = nnc::listOpenCLDevices();
  if (!devices) {
    std::printf("OpenCL part skipped: %s\n", devices.error().message().c_str());
    return;
  }
  nnc::RunPlan p = makePlan();
  nnc::OpenCLLaunchOptions opts;
  opts.optimize = false;
  opts.profile = true;
  auto list = nnc::OpenCLLaunchList::create(
      p, kSource, {{"mul", 1, {kN, 1, 1}, {0, 0, 0}}, {"add_one", 1, {kN, 1, 1}, {0, 0, 0}}}, opts);
  CHECK(bool(list), "%s", list ? "" : list.error().message().c_str());
  if (!list)
    return;
  nnc::Tensor x = makeInput();
  checkOutput("opencl", (*list)->run({x}), p, x);
  CHECK((*list)->runs() == 1, "runs() = %lld", (long long)(*list)->runs());
  nnc::TransferStats t = (*list)->runTransfers();
  CHECK(t.uploads == 1 && t.uploadBytes == kN * 4 && t.downloads == 1 && t.downloadBytes == kN * 4,
        "run transfers %lld/%lld up, %lld/%lld down", (long long)t.uploads,
        (long long)t.uploadBytes, (long long)t.downloads, (long long)t.downloadBytes);
  CHECK((*list)->kernelTimes().size() == 2, "%zu kernel times", (*list)->kernelTimes().size());

  // Through pinned staging (a GPU's default), twice: the same results, the same transfers.
  nnc::OpenCLLaunchOptions pinnedOpts = opts;
  pinnedOpts.staging = nnc::OpenCLLaunchOptions::Staging::Pinned;
  auto pinned = nnc::OpenCLLaunchList::create(
      p, kSource, {{"mul", 1, {kN, 1, 1}, {0, 0, 0}}, {"add_one", 1, {kN, 1, 1}, {0, 0, 0}}},
      pinnedOpts);
  CHECK(bool(pinned), "%s", pinned ? "" : pinned.error().message().c_str());
  if (pinned) {
    checkOutput("opencl pinned", (*pinned)->run({x}), p, x);
    nnc::Tensor x2 = makeInput();
    for (int64_t i = 0; i < kN; ++i)
      x2.data<float>()[i] += 1.0f;
    checkOutput("opencl pinned, second run", (*pinned)->run({x2}), p, x2);
    CHECK((*pinned)->runTransfers().uploads == 2, "pinned uploads %lld",
          (long long)(*pinned)->runTransfers().uploads);
  }

  auto wrong = nnc::OpenCLLaunchList::create(p, kSource, {{"mul", 1, {kN, 1, 1}, {0, 0, 0}}}, opts);
  CHECK(!wrong && wrong.error().message().find("1 launches for a plan of 2") != std::string::npos,
        "a launch count mismatch gave: %s", wrong ? "success" : wrong.error().message().c_str());
  std::printf("OpenCL part ran on %s\n", (*list)->device().deviceName.c_str());
}

// Tensor I/O without the frontend: a run's output through a .npy file and back.
void testNpy() {
  nnc::RunPlan p = makePlan();
  nnc::CpuLaunchList list(p, {&mulKernel, &addOneKernel}, nullptr);
  nnc::Tensor x = makeInput();
  auto out = list.run({x});
  CHECK(bool(out), "%s", out ? "" : out.error().message().c_str());
  if (!out)
    return;
  std::string path = std::filesystem::temp_directory_path() /
                     ("nnc_core_test_" + std::to_string(::getpid()) + ".npy");
  nnc::Error e = nnc::writeNpyFile(path, (*out)[0]);
  CHECK(!e, "%s", e.message().c_str());
  auto back = nnc::readNpyFile(path);
  std::filesystem::remove(path);
  CHECK(back && back->dtype() == nnc::DType::F32 && back->extents() == nnc::Extents{kN} &&
            std::memcmp(back->rawData(), (*out)[0].rawData(), kN * 4) == 0,
        "the .npy round trip differs: %s", back ? "" : back.error().message().c_str());
  auto missing = nnc::readNpyFile(path);
  CHECK(!missing && missing.error().message().find(path) != std::string::npos,
        "reading a missing file gave: %s", missing ? "success" : missing.error().message().c_str());
}

} // namespace

int main() {
  testCpu();
  testOpenCL();
  testNpy();
  if (failures) {
    std::fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  std::printf("runtime core OK\n");
  return 0;
}

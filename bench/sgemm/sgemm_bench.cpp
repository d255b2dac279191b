// SGEMM peers: C[M,N] = A[M,K] * B[K,N] (f32, row major, B a constant weight for nnc) timed
// for nnc, oneDNN (dnnl_sgemm), OpenBLAS (cblas_sgemm) and Eigen, alternating one call of
// each per round, and reported as median GFLOP/s with nnc's ratio to oneDNN.
//
//   nnc-sgemm-bench [--m 1024] [--k 1024] [--n 1024] [--threads 1] [--rounds 30]
//                   [--config mk=1,mr=6,...]   (a gemm_cpu or gemv_cpu config for nnc instead
//                                               of the default)
//                   [--peers nnc,onednn,openblas,eigen]   (which peers run; default all built)
//                   [--clock wall|cpu]   (cpu: the calling thread's CPU time, with --threads 1
//                                         only: on a host shared with other work, a call that
//                                         the scheduler preempts is not charged the wait)
//                   [--flush MB]   (read MB megabytes before each timed call, so B comes from
//                                   memory, as a weight does that a model run last touched a
//                                   whole run ago: skinny shapes, M = 1..64, stream B)
//
// Besides GFLOP/s, each peer's `_weight_gbps` is B's bytes over its median time: for a skinny
// shape, how close it streams the weight to the memory bandwidth.
//
// OpenBLAS picks its kernels when the library loads, so the program re-executes itself with
// OPENBLAS_CORETYPE=SkylakeX (AVX-512 hosts) and the thread counts in the environment.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "PeerThreads.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/frontend/GraphBuilder.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

#ifdef NNC_HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef NNC_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef NNC_HAVE_EIGEN
#include <Eigen/Core>
#endif

namespace {

/// Every problem gets the one config given on the command line.
struct FixedConfig : nnc::tuning::ConfigSource {
  nnc::tuning::Config config;
  std::optional<nnc::tuning::Config> lookup(const nnc::tuning::Problem &) const override {
    return config;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool hostHasAvx512() {
  FILE *f = std::fopen("/proc/cpuinfo", "r");
  if (!f)
    return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f))
    found = std::strstr(line, "avx512f") != nullptr;
  std::fclose(f);
  return found;
}

} // namespace

int main(int argc, char **argv) {
  int64_t m = 1024, k = 1024, n = 1024;
  int threads = 1, rounds = 30;
  int64_t flushMb = 0;
  std::string only; // ",name,name," or empty: every peer
  bool cpuClock = false;
  std::string config;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--m") m = std::atoll(argv[i + 1]);
    else if (a == "--k") k = std::atoll(argv[i + 1]);
    else if (a == "--n") n = std::atoll(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--config") config = argv[i + 1];
    else if (a == "--flush") flushMb = std::atoll(argv[i + 1]);
    else if (a == "--peers") only = "," + std::string(argv[i + 1]) + ",";
    else if (a == "--clock") cpuClock = std::string(argv[i + 1]) == "cpu";
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (cpuClock && threads != 1) {
    std::fprintf(stderr, "--clock cpu times the calling thread: --threads 1 only\n");
    return 2;
  }
  if (nncbench::reexecWithPeerThreads(argv, threads, "NNC_SGEMM_BENCH_CHILD", [] {
        if (hostHasAvx512() && !std::getenv("OPENBLAS_CORETYPE"))
          setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
      }) != 0)
    return 1;

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), ref(size_t(m * n), 0.0f);
  for (float &x : a) x = dist(rng);
  for (float &x : b) x = dist(rng);

  // nnc: MatMul of an input by a constant weight.
  nnc::GraphBuilder gb("sgemm");
  nnc::Var x = gb.input("a", nnc::DType::F32, {m, k});
  gb.output(nnc::matmul(x, gb.constant(nnc::Tensor::fromVector<float>(nnc::DType::F32, {k, n}, b))));
  auto graph = gb.build();
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.error().message().c_str());
    return 1;
  }
  // The CPU the CLI would generate for ($NNC_CPU, else the host), made once.
  nnc::Expected<nnc::CpuTarget> cpu = nnc::CpuTarget::fromEnvironment();
  if (!cpu) {
    std::fprintf(stderr, "error: %s\n", cpu.error().message().c_str());
    return 1;
  }
  // The compiler's default pipeline (it packs the constant weight into panels).
  nnc::PassContext ctx;
  ctx.cpu = *cpu;
  ctx.evaluate = [](const nnc::Node &node, const std::vector<nnc::Tensor> &ops) {
    return nnc::evaluateNode(node, ops);
  };
  if (nnc::Error e = nnc::PassPipeline::defaultPipeline().run(**graph, ctx)) {
    std::fprintf(stderr, "error: %s\n", e.message().c_str());
    return 1;
  }
  nnc::CpuOptions opts(*cpu);
  opts.threads = threads;
  if (!config.empty()) {
    auto fixed = std::make_shared<FixedConfig>();
    auto parsed = nnc::tuning::parseConfig(config);
    if (!parsed) {
      std::fprintf(stderr, "error: bad config '%s'\n", config.c_str());
      return 2;
    }
    fixed->config = *parsed;
    opts.tuning = fixed;
  }
  auto exe = nnc::Executable::compile(**graph, opts);
  if (!exe) {
    std::fprintf(stderr, "error: %s\n", exe.error().message().c_str());
    return 1;
  }
  nnc::Tensor at = nnc::Tensor::fromVector<float>(nnc::DType::F32, {m, k}, a);
  std::vector<float> nncOut(size_t(m * n));

  struct Peer {
    std::string name;
    std::function<void()> run;
    std::vector<double> gflops;
  };
  std::vector<Peer> peers;
  peers.push_back({"nnc", [&] {
                     auto out = (*exe)->run({at});
                     if (!out) {
                       std::fprintf(stderr, "error: %s\n", out.error().message().c_str());
                       std::exit(1);
                     }
                     std::memcpy(nncOut.data(), (*out)[0].data<float>(), nncOut.size() * 4);
                   }, {}});
#ifdef NNC_HAVE_DNNL
  std::vector<float> cd(size_t(m * n));
  peers.push_back({"onednn", [&] {
                     dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                                cd.data(), n);
                   }, {}});
#endif
#ifdef NNC_HAVE_OPENBLAS
  std::vector<float> co(size_t(m * n));
  peers.push_back({"openblas", [&] {
                     cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                                 a.data(), k, b.data(), n, 0.0f, co.data(), n);
                   }, {}});
#endif
#ifdef NNC_HAVE_EIGEN
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMat> ea(a.data(), m, k), eb(b.data(), k, n);
  RowMat ec(m, n);
  if (threads == 1) // Eigen is built here without OpenMP: one thread only
    peers.push_back({"eigen", [&] { ec.noalias() = ea * eb; }, {}});
#endif

  if (!only.empty())
    peers.erase(std::remove_if(peers.begin(), peers.end(),
                               [&](const Peer &p) {
                                 return p.name != "nnc" &&
                                        only.find("," + p.name + ",") == std::string::npos;
                               }),
                peers.end());
  double flops = 2.0 * double(m) * double(k) * double(n);
  // Reading a buffer larger than the last-level cache evicts B (clean lines: nothing to write
  // back during the timed call).
  std::vector<float> flush(size_t(flushMb) * (1 << 20) / sizeof(float), 1.0f);
  volatile float flushSink = 0;
  auto evict = [&] {
    float s = 0;
    for (size_t i = 0; i < flush.size(); i += 16)
      s += flush[i];
    flushSink = flushSink + s;
  };
  for (Peer &p : peers) // warm up (JIT, first-touch, library initialization)
    for (int w = 0; w < 2; ++w)
      p.run();
  for (int r = 0; r < rounds; ++r)
    for (Peer &p : peers) {
      if (!flush.empty())
        evict();
      auto t0 = std::chrono::steady_clock::now();
      timespec c0{}, c1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      p.run();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      double s = cpuClock ? double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec)
                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                .count();
      p.gflops.push_back(flops / s * 1e-9);
    }

  // nnc against a peer's result (the first peer there is).
  double maxErr = 0;
  const float *other = nullptr;
  auto ran = [&](const char *name) {
    return std::any_of(peers.begin(), peers.end(), [&](const Peer &p) { return p.name == name; });
  };
#ifdef NNC_HAVE_DNNL
  if (ran("onednn"))
    other = cd.data();
#endif
#ifdef NNC_HAVE_OPENBLAS
  if (!other && ran("openblas"))
    other = co.data();
#endif
  if (other)
    for (size_t i = 0; i < nncOut.size(); ++i)
      maxErr = std::max(maxErr, double(std::fabs(nncOut[i] - other[i])));

  double dnnl = 0;
  for (Peer &p : peers)
    if (p.name == "onednn")
      dnnl = median(p.gflops);
  std::printf("{\"m\": %lld, \"k\": %lld, \"n\": %lld, \"threads\": %d, \"rounds\": %d, "
              "\"config\": \"%s\", \"flush_mb\": %lld, \"clock\": \"%s\", "
              "\"max_abs_diff\": %.3g",
              (long long)m, (long long)k, (long long)n, threads, rounds, config.c_str(),
              (long long)flushMb, cpuClock ? "cpu" : "wall", maxErr);
  for (Peer &p : peers)
    std::printf(", \"%s_gflops\": %.1f, \"%s_weight_gbps\": %.2f", p.name.c_str(),
                median(p.gflops), p.name.c_str(),
                median(p.gflops) * 1e9 / flops * double(k) * double(n) * 4.0 / 1e9);
  if (dnnl > 0)
    std::printf(", \"nnc_over_onednn\": %.3f", median(peers[0].gflops) / dnnl);
  std::printf("}\n");
  return 0;
}

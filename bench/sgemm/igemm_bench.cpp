// Integer GEMM peers: C[M,N] (i32) = A[M,K] (u8) * B[K,N] (i8, a constant weight for nnc),
// timed for nnc's matmul_integer, nnc's own f32 matmul of the same shape (the SGEMM rate the
// int8 path is measured against) and oneDNN's dnnl_gemm_u8s8s32, alternating one call of each
// per round in one process, and reported as median GOP/s with the ratios.
//
// oneDNN runs on --threads too: the program re-executes itself with OMP_NUM_THREADS set
// (PeerThreads.h), which an OpenMP runtime reads only when it loads.
//
//   nnc-igemm-bench [--m 1024] [--k 1024] [--n 1024] [--threads 1] [--rounds 30]
//                   [--config mr=8,nr=32,par=0]   (an igemm_cpu config instead of the default)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <dnnl.h>

#include "PeerThreads.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/frontend/GraphBuilder.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

namespace {

/// Problems of the integer space get the config given on the command line; others their
/// defaults.
struct FixedConfig : nnc::tuning::ConfigSource {
  nnc::tuning::Config config;
  std::optional<nnc::tuning::Config> lookup(const nnc::tuning::Problem &p) const override {
    if (p.kind != "igemm_cpu")
      return std::nullopt;
    return config;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void die(const std::string &what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

/// The graph `out = op(a, constant b)` compiled with the default pipeline for `cpu`.
std::unique_ptr<nnc::Executable> compile(nnc::OpKind op, nnc::DType at, const nnc::Tensor &b,
                                         int64_t m, int64_t k, const nnc::CpuTarget &cpu,
                                         int threads, const std::string &config) {
  nnc::GraphBuilder gb("gemm");
  nnc::Var x = gb.input("a", at, {m, k});
  gb.output(gb.op(op, {x, gb.constant(b)}));
  auto graph = gb.build();
  if (!graph)
    die(graph.error().message());
  nnc::PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const nnc::Node &node, const std::vector<nnc::Tensor> &ops) {
    return nnc::evaluateNode(node, ops);
  };
  if (nnc::Error e = nnc::PassPipeline::defaultPipeline().run(**graph, ctx))
    die(e.message());
  nnc::CpuOptions opts(cpu);
  opts.threads = threads;
  if (!config.empty()) {
    auto fixed = std::make_shared<FixedConfig>();
    auto parsed = nnc::tuning::parseConfig(config);
    if (!parsed)
      die("bad config '" + config + "'");
    fixed->config = *parsed;
    opts.tuning = fixed;
  }
  auto exe = nnc::Executable::compile(**graph, opts);
  if (!exe)
    die(exe.error().message());
  return std::move(*exe);
}

} // namespace

int main(int argc, char **argv) {
  int64_t m = 1024, k = 1024, n = 1024;
  int threads = 1, rounds = 30;
  std::string config;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--m") m = std::atoll(argv[i + 1]);
    else if (a == "--k") k = std::atoll(argv[i + 1]);
    else if (a == "--n") n = std::atoll(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--config") config = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (nncbench::reexecWithPeerThreads(argv, threads, "NNC_IGEMM_BENCH_CHILD", [] {}) != 0)
    return 1;

  std::mt19937 rng(1);
  std::vector<uint8_t> a(size_t(m * k));
  std::vector<int8_t> b(size_t(k * n));
  for (uint8_t &x : a) x = static_cast<uint8_t>(rng());
  for (int8_t &x : b) x = static_cast<int8_t>(rng());
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());

  nnc::Expected<nnc::CpuTarget> cpu = nnc::CpuTarget::fromEnvironment();
  if (!cpu)
    die(cpu.error().message());
  auto exeInt = compile(nnc::OpKind::MatMulInteger, nnc::DType::U8,
                        nnc::Tensor::fromVector<int8_t>(nnc::DType::I8, {k, n}, b), m, k, *cpu,
                        threads, config);
  auto exeF32 = compile(nnc::OpKind::MatMul, nnc::DType::F32,
                        nnc::Tensor::fromVector<float>(nnc::DType::F32, {k, n}, bf), m, k, *cpu,
                        threads, "");
  nnc::Tensor ai = nnc::Tensor::fromVector<uint8_t>(nnc::DType::U8, {m, k}, a);
  nnc::Tensor aff = nnc::Tensor::fromVector<float>(nnc::DType::F32, {m, k}, af);
  std::vector<int32_t> nncOut(size_t(m * n)), dnnlOut(size_t(m * n));

  struct Peer {
    std::string name;
    std::function<void()> run;
    std::vector<double> gops;
  };
  std::vector<Peer> peers;
  // nnc's run returns its result as a tensor (recycled from run to run); it is copied out
  // for the comparison below once, after the timed rounds, as oneDNN's C is only written.
  auto runInt = [&] {
    auto out = exeInt->run({ai});
    if (!out)
      die(out.error().message());
    return std::move((*out)[0]);
  };
  peers.push_back({"nnc_int8", [&] { runInt(); }, {}});
  peers.push_back({"nnc_f32", [&] {
                     auto out = exeF32->run({aff});
                     if (!out)
                       die(out.error().message());
                   }, {}});
  int32_t co = 0;
  peers.push_back({"onednn_int8", [&] {
                     dnnl_status_t s = dnnl_gemm_u8s8s32('N', 'N', 'F', m, n, k, 1.0f, a.data(),
                                                         k, 0, b.data(), n, 0, 0.0f,
                                                         dnnlOut.data(), n, &co);
                     if (s != dnnl_success)
                       die("dnnl_gemm_u8s8s32 failed");
                   }, {}});

  double ops = 2.0 * double(m) * double(k) * double(n);
  for (Peer &p : peers) // warm up (JIT, first-touch, library initialization)
    for (int w = 0; w < 2; ++w)
      p.run();
  for (int r = 0; r < rounds; ++r)
    for (Peer &p : peers) {
      auto t0 = std::chrono::steady_clock::now();
      p.run();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      p.gops.push_back(ops / s * 1e-9);
    }
  // The integer results agree exactly.
  nnc::Tensor last = runInt();
  std::memcpy(nncOut.data(), last.data<int32_t>(), nncOut.size() * 4);
  int64_t mismatches = 0;
  for (size_t i = 0; i < nncOut.size(); ++i)
    mismatches += nncOut[i] != dnnlOut[i];

  double nInt = median(peers[0].gops), nF32 = median(peers[1].gops), d = median(peers[2].gops);
  std::printf("{\"m\": %lld, \"k\": %lld, \"n\": %lld, \"threads\": %d, \"rounds\": %d, "
              "\"cpu\": \"%s\", \"config\": \"%s\", \"mismatches\": %lld",
              (long long)m, (long long)k, (long long)n, threads, rounds, cpu->str().c_str(),
              config.c_str(), (long long)mismatches);
  for (Peer &p : peers)
    std::printf(", \"%s_gops\": %.1f", p.name.c_str(), median(p.gops));
  // Per-round ratios (same round, so a load spike hits both sides), and their medians.
  std::vector<double> overF32, overDnnl;
  for (int r = 0; r < rounds; ++r) {
    overF32.push_back(peers[0].gops[r] / peers[1].gops[r]);
    overDnnl.push_back(peers[0].gops[r] / peers[2].gops[r]);
  }
  std::printf(", \"int8_over_f32\": %.3f, \"int8_over_onednn\": %.3f, "
              "\"median_round_int8_over_f32\": %.3f, \"median_round_int8_over_onednn\": %.3f}\n",
              nInt / nF32, nInt / d, median(overF32), median(overDnnl));
  return mismatches == 0 ? 0 : 1;
}

// Integer conv against nnc's own f32 conv of the same shape: ResNet-50-like layers (3x3
// 64->64 at 56x56, 1x1 256->64 at 56x56, 3x3 256->256 at 14x14) and a MobileNet-like
// depthwise 3x3 at 112x112 x 32, batch 1. Each is a one-node graph through the default
// pipeline (pack-gemm-weights packs the int8 weight, layout passes take the f32 conv),
// conv_integer on u8 x (zero point 128) and a constant i8 w; one run of each per round,
// alternating, reported as median GOP/s (2 * MACs, padding taps included) with the
// per-round ratio. The int8 result is checked against the interpreter once.
//
//   nnc-iconv-bench [--threads 1] [--rounds 20] [--layer NAME]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nnc/frontend/GraphBuilder.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

namespace {

struct Layer {
  const char *name;
  int64_t c, m, h, w, k, stride, pad, group;
};

const Layer kLayers[] = {
    {"3x3_64_56", 64, 64, 56, 56, 3, 1, 1, 1},
    {"1x1_256to64_56", 256, 64, 56, 56, 1, 1, 0, 1},
    {"3x3_256_14", 256, 256, 14, 14, 3, 1, 1, 1},
    {"dw3x3_32_112", 32, 32, 112, 112, 3, 1, 1, 32},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void die(const std::string &what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<nnc::Graph> convGraph(const Layer &l, bool integer, const nnc::Tensor &w) {
  nnc::GraphBuilder gb("conv");
  nnc::Var x = gb.input("x", integer ? nnc::DType::U8 : nnc::DType::F32, {1, l.c, l.h, l.w});
  nnc::AttrMap a;
  a["strides"] = std::vector<int64_t>{l.stride, l.stride};
  a["pads"] = std::vector<int64_t>{l.pad, l.pad, l.pad, l.pad};
  a["dilations"] = std::vector<int64_t>{1, 1};
  a["group"] = l.group;
  std::vector<nnc::Var> ops = {x, gb.constant(w)};
  if (integer) {
    nnc::Tensor zx = nnc::Tensor::zeros(nnc::DType::U8, {});
    zx.data<uint8_t>()[0] = 128;
    ops.push_back(gb.constant(zx));
  }
  gb.output(gb.op(integer ? nnc::OpKind::ConvInteger : nnc::OpKind::Conv, ops, a));
  auto g = gb.build();
  if (!g)
    die(g.error().message());
  return std::move(*g);
}

std::unique_ptr<nnc::Executable> compile(nnc::Graph &g, const nnc::CpuTarget &cpu, int threads) {
  nnc::PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const nnc::Node &node, const std::vector<nnc::Tensor> &ops) {
    return nnc::evaluateNode(node, ops);
  };
  if (nnc::Error e = nnc::PassPipeline::defaultPipeline().run(g, ctx))
    die(e.message());
  nnc::CpuOptions opts(cpu);
  opts.threads = threads;
  auto exe = nnc::Executable::compile(g, opts);
  if (!exe)
    die(exe.error().message());
  return std::move(*exe);
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1, rounds = 20;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--layer") only = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  nnc::Expected<nnc::CpuTarget> cpu = nnc::CpuTarget::fromEnvironment();
  if (!cpu)
    die(cpu.error().message());
  int bad = 0;
  for (const Layer &l : kLayers) {
    if (!only.empty() && only != l.name)
      continue;
    std::mt19937 rng(1);
    int64_t cg = l.c / l.group, xn = l.c * l.h * l.w, wn = l.m * cg * l.k * l.k;
    std::vector<uint8_t> xv(static_cast<size_t>(xn));
    std::vector<int8_t> wv(static_cast<size_t>(wn));
    for (uint8_t &v : xv) v = static_cast<uint8_t>(rng());
    for (int8_t &v : wv) v = static_cast<int8_t>(rng());
    std::vector<float> xf(xv.begin(), xv.end()), wf(wv.begin(), wv.end());
    nnc::Extents we{l.m, cg, l.k, l.k};
    auto gi = convGraph(l, true, nnc::Tensor::fromVector<int8_t>(nnc::DType::I8, we, wv));
    auto gf = convGraph(l, false, nnc::Tensor::fromVector<float>(nnc::DType::F32, we, wf));
    nnc::Tensor xi = nnc::Tensor::fromVector<uint8_t>(nnc::DType::U8, {1, l.c, l.h, l.w}, xv);
    nnc::Tensor xff = nnc::Tensor::fromVector<float>(nnc::DType::F32, {1, l.c, l.h, l.w}, xf);
    // The interpreter's answer from the unoptimized graph (before packing).
    auto want = nnc::interpret(*gi, {xi});
    if (!want)
      die(want.error().message());
    auto exeInt = compile(*gi, *cpu, threads);
    auto exeF32 = compile(*gf, *cpu, threads);
    auto got = exeInt->run({xi});
    if (!got)
      die(got.error().message());
    int64_t mismatches = 0;
    const nnc::Tensor &a = (*got)[0], &b = (*want)[0];
    for (int64_t i = 0; i < b.numElements(); ++i)
      mismatches += a.data<int32_t>()[i] != b.data<int32_t>()[i];
    bad += mismatches != 0;
    int64_t oh = (l.h + 2 * l.pad - l.k) / l.stride + 1, ow = (l.w + 2 * l.pad - l.k) / l.stride + 1;
    double ops = 2.0 * double(l.m) * double(oh * ow) * double(cg * l.k * l.k);
    std::vector<double> gi8, gf32, ratio;
    std::vector<std::function<void()>> run = {[&] {
                                                auto o = exeInt->run({xi});
                                                if (!o)
                                                  die(o.error().message());
                                              },
                                              [&] {
                                                auto o = exeF32->run({xff});
                                                if (!o)
                                                  die(o.error().message());
                                              }};
    for (int w = 0; w < 2; ++w)
      for (auto &r : run)
        r();
    for (int r = 0; r < rounds; ++r) {
      double s[2];
      for (int k = 0; k < 2; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        run[k]();
        s[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      gi8.push_back(ops / s[0] * 1e-9);
      gf32.push_back(ops / s[1] * 1e-9);
      ratio.push_back(s[1] / s[0]);
    }
    std::printf("{\"layer\": \"%s\", \"threads\": %d, \"rounds\": %d, \"cpu\": \"%s\", "
                "\"mismatches\": %lld, \"int8_gops\": %.1f, \"f32_gops\": %.1f, "
                "\"int8_ms\": %.3f, \"f32_ms\": %.3f, \"median_round_int8_over_f32\": %.2f}\n",
                l.name, threads, rounds, cpu->str().c_str(), (long long)mismatches, median(gi8),
                median(gf32), ops / median(gi8) * 1e-6, ops / median(gf32) * 1e-6,
                median(ratio));
    std::fflush(stdout);
  }
  return bad == 0 ? 0 : 1;
}

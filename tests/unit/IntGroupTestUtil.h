// Test helpers for the integer templates (ConvIntegerTest, IntGemmTest): the CPU targets of
// their tiles' paths that the host runs, and a check that a graph whose integer anchor carries
// a fused requantizing (or dequantizing) epilogue compiles, on each of them, to one kernel
// that stores the group's result at the template's own stores, bit for bit the interpreter's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "LowerTestUtil.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"

namespace nnc::lowertest {

/// The CPU targets of the tiles' paths the host runs: x86-64-v3 (AVX2's exact widened
/// multiply-adds; with AVX-VNNI's ymm dot products where the host has it) and the host
/// itself (AVX512-VNNI's zmm dot products on a VNNI host); x86-64 alone on an older one.
/// (IntGemmTileTest covers the microkernel on every ISA.)
inline std::vector<CpuTarget> intTileTargets() {
  const CpuTarget &host = CpuTarget::host();
  std::vector<CpuTarget> t;
  if (host.level >= CpuTarget::Level::V3) {
    t.push_back(CpuTarget::forLevel(CpuTarget::Level::V3));
    if (host.avxvnni) {
      t.push_back(CpuTarget::forLevel(CpuTarget::Level::V3));
      t.back().avxvnni = true;
    }
  }
  t.push_back(host);
  return t;
}

/// The default pipeline for `cpu`, constants folded by the interpreter, run on `g`
/// (pack-gemm-weights packs a constant i8 weight into the integer tiles' panels).
inline Error runDefaultPipeline(Graph &g, const CpuTarget &cpu) {
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const Node &node, const std::vector<Tensor> &ops) {
    return evaluateNode(node, ops);
  };
  return PassPipeline::defaultPipeline().run(g, ctx);
}

/// `g` (one output: a group anchored on matmul_integer or conv_integer) after the default
/// pipeline for each target of intTileTargets(), on `threads` threads, against the
/// interpreter: one kernel besides the transposes at the graph's edges (layout-nhwc runs a
/// conv channels last between them), the same bytes, and with `atStores` no i32 copy of the
/// result in scratch (the planner's pass after a template that left the epilogue unapplied
/// accumulates into one).
inline void checkIntegerGroup(const Graph &g, const std::vector<Tensor> &inputs,
                              const std::string &what, int threads = 2, bool atStores = true) {
  Expected<std::vector<Tensor>> want = interpret(g, inputs);
  ASSERT_TRUE(want) << what << ": interpreter: " << want.error().message();
  int64_t count = (*want)[0].numElements();
  for (const CpuTarget &cpu : intTileTargets()) {
    std::string on = what + " on " + cpu.levelName() + (cpu.int8DotBits() ? " vnni" : "");
    std::unique_ptr<Graph> c = g.clone();
    Error e = runDefaultPipeline(*c, cpu);
    ASSERT_FALSE(e) << on << ": " << e.message();
    CpuOptions o(cpu);
    o.threads = threads;
    o.codegen.cacheDir = "";
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*c, o);
    ASSERT_TRUE(exe) << on << ": " << exe.error().message();
    std::vector<const kir::Kernel *> work;
    for (const kir::Kernel &k : (*exe)->kernels())
      if (k.name.size() < 10 || k.name.substr(k.name.size() - 10) != "_transpose")
        work.push_back(&k);
    ASSERT_EQ(work.size(), 1u) << on;
    for (const kir::BufferDecl &b : work[0]->buffers)
      EXPECT_FALSE(atStores && b.role == kir::BufferRole::Scratch && !b.perThread &&
                   b.dtype == DType::I32 && b.numElements == count)
          << on << ": scratch " << b.name << " holds the result's i32 sums";
    Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
    ASSERT_TRUE(got) << on << ": " << got.error().message();
    expectClose((*got)[0], (*want)[0], on);
  }
}

} // namespace nnc::lowertest

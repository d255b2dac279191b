// The OpenCL backend: emitted OpenCL C checked with libclang for every elementwise op on every
// dtype it accepts and every cast (no device needed), line-numbered errors, and, where an
// OpenCL device exists (PoCL in CI), an executable against the interpreter that moves exactly
// the inputs to the device and the outputs back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/KernelParser.h"
#include "nnc/ir/Parser.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

using namespace nnc;

namespace {

const DType kAllTypes[] = {
#define NNC_X(id, name, size, onnx) DType::id,
    NNC_DTYPES(NNC_X)
#undef NNC_X
};

/// out[i] = expr over loads of buffers 0..n-1 (of `types`), for i in [0, 8).
kir::Kernel elementwiseKernel(const std::string &name, const std::vector<DType> &types,
                              const std::function<kir::Expr(std::vector<kir::Expr>)> &body,
                              bool parallel) {
  kir::Kernel k;
  k.name = name;
  std::vector<kir::Expr> loads;
  for (size_t i = 0; i < types.size(); ++i) {
    k.buffers.push_back({fmt::format("in{}", i), types[i], 8, kir::BufferRole::Operand,
                         static_cast<int>(i), false});
    loads.push_back(kir::load(static_cast<int>(i), types[i], kir::var("i")));
  }
  kir::Expr value = body(loads);
  k.buffers.push_back({"out", value->type, 8, kir::BufferRole::Result, 0, true});
  k.body = kir::forLoop("i", kir::intImm(8),
                        kir::store(static_cast<int>(types.size()), kir::var("i"), value));
  if (parallel)
    k.schedule.steps.push_back({kir::ScheduleStep::Parallel, "i", 0, {}});
  return k;
}

TEST(OpenCLEmitter, EveryElementwiseOpAndCastParsesAsOpenCLC) {
  std::vector<kir::Kernel> kernels;
  for (const OpInfo &info : allOps()) {
    if (!info.elementwise || info.arity < 1)
      continue;
    for (DType t : kAllTypes) {
      bool select = info.kind == OpKind::Select;
      if (isStorageOnly(t) || !typeClassAccepts(info.operandTypes, t))
        continue;
      std::vector<DType> types(static_cast<size_t>(info.arity), t);
      if (select)
        types[0] = DType::Bool;
      kernels.push_back(elementwiseKernel(
          fmt::format("op_{}_{}", info.name, dtypeName(t)), types,
          [&](std::vector<kir::Expr> a) { return kir::op(info.kind, std::move(a)); },
          kernels.size() % 2 == 0));
    }
  }
  for (DType from : kAllTypes)
    for (DType to : kAllTypes)
      if (from != to)
        kernels.push_back(elementwiseKernel(
            fmt::format("cast_{}_{}", dtypeName(from), dtypeName(to)), {from},
            [&](std::vector<kir::Expr> a) { return kir::cast(a[0], to); }, false));
  ASSERT_GT(kernels.size(), 500u);
  Expected<OpenCLProgram> prog = emitOpenCL(kernels, GpuTarget::generic());
  ASSERT_TRUE(prog) << prog.error().message();
  ASSERT_EQ(prog->launches.size(), kernels.size());
  // Parallel kernels run one iteration per work-item, the others as one work-item.
  EXPECT_EQ(prog->launches[0].globalSize[0], 8);
  EXPECT_EQ(prog->launches.back().globalSize[0], 1);
  Error e = checkOpenCLSource(prog->source);
  EXPECT_FALSE(e) << e.message();
}

TEST(OpenCLEmitter, WorkGroupsStayWithinTheDevicesLimits) {
  // A 1000-item grid: groups of 64 on a device that allows them, of 32 on one whose
  // work-groups (or first work-item dimension) stop at 32; small grids as one group (8 items:
  // 8, 40 items: 64).
  auto launchOf = [](const GpuTarget &device, int64_t items) {
    kir::Kernel k;
    k.name = "k";
    k.buffers.push_back({"out", DType::F32, items, kir::BufferRole::Result, 0, true});
    k.body =
        kir::forLoop("i", kir::intImm(items), kir::store(0, kir::var("i"), kir::floatImm(1.0)));
    k.schedule.steps.push_back({kir::ScheduleStep::Parallel, "i", 0, {}});
    Expected<OpenCLProgram> prog = emitOpenCL({k}, device);
    EXPECT_TRUE(prog) << prog.error().message();
    return prog ? prog->launches.at(0) : OpenCLLaunch{};
  };
  OpenCLLaunch l = launchOf(GpuTarget::generic(), 1000);
  EXPECT_EQ(l.localSize[0], 64);
  EXPECT_EQ(l.globalSize[0], 1024);
  GpuTarget small = GpuTarget::generic();
  small.maxWorkGroupSize = 32;
  l = launchOf(small, 1000);
  EXPECT_EQ(l.localSize[0], 32);
  EXPECT_EQ(l.globalSize[0], 1024);
  small = GpuTarget::generic();
  small.maxWorkItemSizes[0] = 16;
  EXPECT_EQ(launchOf(small, 1000).localSize[0], 16);
  l = launchOf(GpuTarget::generic(), 8);
  EXPECT_EQ(l.localSize[0], 8);
  EXPECT_EQ(l.globalSize[0], 8);
  l = launchOf(GpuTarget::generic(), 40);
  EXPECT_EQ(l.localSize[0], 64);
  EXPECT_EQ(l.globalSize[0], 64);
}

TEST(OpenCLEmitter, IndependentLoopsFormOneFlatGrid) {
  // out[i, j, c] = 1 over a 3 x 5 x 7 nest that gpu_grid declares independent (none of it
  // parallel): one work-item per element, the innermost index varying fastest. With only i
  // declared, the grid is i and each work-item loops over j and c.
  auto emit = [](std::vector<std::string> independent, OpenCLLaunch &l) {
    kir::Kernel k;
    k.name = "k";
    k.buffers.push_back({"out", DType::F32, 105, kir::BufferRole::Result, 0, true});
    kir::Expr at = kir::add(kir::add(kir::mul(kir::var("i"), kir::intImm(35)),
                                     kir::mul(kir::var("j"), kir::intImm(7))),
                            kir::var("c"));
    k.body = kir::forLoop(
        "i", kir::intImm(3),
        kir::forLoop("j", kir::intImm(5),
                     kir::forLoop("c", kir::intImm(7), kir::store(0, at, kir::floatImm(1.0)))));
    k.schedule.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, std::move(independent)});
    Expected<OpenCLProgram> prog = emitOpenCL({k}, GpuTarget::generic());
    EXPECT_TRUE(prog) << prog.error().message();
    if (!prog)
      return std::string();
    l = prog->launches.at(0);
    return prog->source;
  };
  OpenCLLaunch l;
  std::string src = emit({"i", "j", "c"}, l);
  EXPECT_EQ(l.globalSize[0], 128);
  EXPECT_EQ(l.localSize[0], 64);
  EXPECT_NE(src.find("if (nnc_gid >= 105u) return;"), std::string::npos) << src;
  EXPECT_LT(src.find("% 7u"), src.find("% 5u")) << src;
  EXPECT_EQ(src.find("for ("), std::string::npos) << src;
  EXPECT_FALSE(checkOpenCLSource(src));
  src = emit({"i"}, l);
  EXPECT_EQ(l.globalSize[0], 4);
  EXPECT_EQ(src.find("nnc_gid"), std::string::npos) << src;
  EXPECT_NE(src.find("for ("), std::string::npos) << src;
}

TEST(OpenCLEmitter, LocalsBeforeTheGridAreDeclaredPerWorkItem) {
  // out[i] = in[i] * s with s = in[0] read once before the loop (how a fused group reads a
  // scalar leaf): the loop is still the grid (it was one work-item for the whole kernel),
  // and each work-item declares s after its index.
  kir::Kernel k;
  k.name = "k";
  k.buffers.push_back({"in", DType::F32, 1000, kir::BufferRole::Operand, 0, false});
  k.buffers.push_back({"out", DType::F32, 1000, kir::BufferRole::Result, 0, true});
  kir::Expr i = kir::var("i");
  k.body = kir::block(
      {kir::decl("s", DType::F32, kir::load(0, DType::F32, kir::intImm(0))),
       kir::forLoop("i", kir::intImm(1000),
                    kir::store(1, i,
                               kir::op(OpKind::Mul, {kir::load(0, DType::F32, i),
                                                     kir::var("s", DType::F32)})))});
  k.schedule.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {"i"}});
  Expected<OpenCLProgram> prog = emitOpenCL({k}, GpuTarget::generic());
  ASSERT_TRUE(prog) << prog.error().message();
  const std::string &src = prog->source;
  EXPECT_EQ(prog->launches.at(0).globalSize[0], 1024) << src;
  EXPECT_EQ(src.find("for ("), std::string::npos) << src;
  EXPECT_LT(src.find("get_global_id(0)"), src.find(" s = ")) << src;
  EXPECT_FALSE(checkOpenCLSource(src));
}

TEST(OpenCLEmitter, GemmTilesOfADeviceThatPrefersVectorsUseVectorAccumulators) {
  // A device that prefers float vectors (an OpenCL CPU device) runs a work-item's register
  // tile of the NDRange GEMM as a GemmTile: rows of float vectors, one vector load of B's
  // row and one fma per vector and k step; a GPU's tile (float vectors 1) stays scalar.
  Graph g;
  Value *a = g.addInput("a", TensorType(DType::F32, shapeFromExtents({64, 96})));
  Value *b = g.addInput("b", TensorType(DType::F32, shapeFromExtents({96, 256})));
  Node *n = g.createNode(OpKind::MatMul, {a, b},
                         {TensorType(DType::F32, shapeFromExtents({64, 256}))}, {}, "mm");
  for (int vec : {1, 8}) {
    tuning::LowerOptions opts(testenv::testCpu());
    opts.gpu = GpuTarget::generic();
    opts.gpu->type = vec > 1 ? "cpu" : "gpu";
    opts.gpu->preferredFloatVector = vec;
    Expected<std::vector<kir::Kernel>> ks = lowerNode(*n, "k", opts);
    ASSERT_TRUE(ks) << ks.error().message();
    Expected<OpenCLProgram> prog = emitOpenCL(*ks, *opts.gpu);
    ASSERT_TRUE(prog) << prog.error().message();
    const std::string &src = prog->source;
    if (vec == 1) {
      EXPECT_EQ(src.find("gt_p"), std::string::npos) << src;
      continue;
    }
    EXPECT_NE(src.find("float16 gt_c0_0 = (float16)(0.0f);"), std::string::npos) << src;
    EXPECT_NE(src.find("float16 gt_b0 = vload16(0, b1_in1 + gt_b + gt_p * 256 + 0);"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("gt_c3_0 = fma(gt_a3, gt_b0, gt_c3_0);"), std::string::npos) << src;
    EXPECT_NE(src.find("vstore16(gt_c0_0, 0, b2_out0 + gt_c + 0);"), std::string::npos) << src;
    Error e = checkOpenCLSource(src);
    EXPECT_FALSE(e) << e.message();
  }
}

TEST(OpenCLEmitter, GemmTileRunsOfPartialSumsCompile) {
  // A GemmTile summing in runs (sumEvery), as float vectors and as the scalar nest (5
  // columns: no vector width), is valid OpenCL C.
  Expected<std::vector<kir::Kernel>> ks = kir::parseKernels(
      "kernel mm(a: f32[64] operand 0, b: f32[512] operand 1, c: f32[64] result 0 written) {\n"
      "  gemm_tile 4x16 c[0; ldc 16] += a[0; lda 16, ak 1] * b[0; ldb 32] over k < 16 sums "
      "every 4\n"
      "  gemm_tile 2x5 c[0; ldc 16] = a[0; lda 16, ak 1] * b[0; ldb 32] over k < 10 sums every "
      "3\n"
      "}\n",
      "runs.kir");
  ASSERT_TRUE(ks) << ks.error().message();
  Expected<OpenCLProgram> prog = emitOpenCL(*ks, GpuTarget::generic());
  ASSERT_TRUE(prog) << prog.error().message();
  EXPECT_NE(prog->source.find("gt_s0_0 += gt_c0_0;"), std::string::npos) << prog->source;
  EXPECT_NE(prog->source.find("gt_total += gt_acc;"), std::string::npos) << prog->source;
  Error e = checkOpenCLSource(prog->source);
  EXPECT_FALSE(e) << e.message();
}

TEST(OpenCLEmitter, SourceErrorsNameTheLine) {
  Error e = checkOpenCLSource("__kernel void k(__global float *p) {\n  p[0] = undefined_name;\n}\n",
                              "bad.cl");
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("bad.cl:2:"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("undefined_name"), std::string::npos) << e.message();
}

const char *kModel = R"(
graph @mlp(%x: f32[3,6], %b: f32[4]) -> (f32[3,4], f32[3,4]) {
  %w = constant {value = dense<f32[6,4]>[0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5, 0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5]} : f32[6,4]
  %mm = matmul(%x, %w) : f32[3,4]
  %a = add(%mm, %b) : f32[3,4]
  %t = tanh(%a) : f32[3,4]
  %y = softmax(%t) {axis = 1} : f32[3,4]
  %z = mul(%t, %y) : f32[3,4]
  return %y, %z
}
)";

Tensor ramp(const Extents &e, float scale) {
  Tensor t = Tensor::zeros(DType::F32, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = scale * static_cast<float>((i * 7) % 11 - 5);
  return t;
}

TEST(OpenCLExecutable, OneRunMovesExactlyTheInputsInAndTheOutputsOut) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices)
    GTEST_SKIP() << "no OpenCL device on this machine: " << devices.error().message();
  Expected<std::unique_ptr<Graph>> g = parseGraph(kModel);
  ASSERT_TRUE(g) << g.error().message();
  OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
  opts.cacheDir = "";
  opts.optimize = false; // a faster build; the transfers are the point here
  Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(**g, opts);
  ASSERT_TRUE(exe) << exe.error().message();
  TransferStats load = (*exe)->loadTransfers();
  EXPECT_EQ(load.uploads, 1); // the one weight
  EXPECT_EQ(load.uploadBytes, 6 * 4 * 4);
  EXPECT_EQ(load.downloads, 0);

  std::vector<Tensor> inputs = {ramp({3, 6}, 0.25f), ramp({4}, -0.5f)};
  Expected<std::vector<Tensor>> want = interpret(**g, inputs);
  ASSERT_TRUE(want) << want.error().message();
  for (int run = 1; run <= 2; ++run) {
    Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
    ASSERT_TRUE(got) << got.error().message();
    ASSERT_EQ(got->size(), 2u);
    for (size_t o = 0; o < 2; ++o)
      for (int64_t i = 0; i < 12; ++i)
        EXPECT_NEAR((*got)[o].data<float>()[i], (*want)[o].data<float>()[i],
                    1e-5 + 1e-3 * std::fabs((*want)[o].data<float>()[i]))
            << "output " << o << " element " << i;
    TransferStats t = (*exe)->runTransfers();
    EXPECT_EQ(t.uploads, 2 * run);
    EXPECT_EQ(t.uploadBytes, run * (3 * 6 + 4) * 4);
    EXPECT_EQ(t.downloads, 2 * run);
    EXPECT_EQ(t.downloadBytes, run * 2 * 12 * 4);
  }
  EXPECT_EQ((*exe)->loadTransfers().uploads, 1);
}

TEST(KernelIr, GpuLoopsFormTheOutermostNest) {
  // gpu_block / gpu_thread loops: outermost, blocks outside threads, one per kind and axis.
  auto kernelWith = [](std::vector<std::pair<kir::LoopKind, int>> loops, bool serialFirst) {
    kir::Kernel k;
    k.name = "k";
    k.buffers.push_back({"out", DType::F32, 64, kir::BufferRole::Result, 0, true});
    kir::Expr at = kir::intImm(0);
    for (size_t d = 0; d < loops.size(); ++d)
      at = kir::add(kir::mul(at, kir::intImm(4)), kir::var(fmt::format("v{}", d)));
    kir::Stmt s = kir::store(0, at, kir::floatImm(1.0));
    for (size_t d = loops.size(); d-- > 0;) {
      s = kir::forLoop(fmt::format("v{}", d), kir::intImm(4), s, loops[d].first);
      s->gpuAxis = loops[d].second;
    }
    if (serialFirst)
      s = kir::forLoop("s", kir::intImm(1), s);
    k.body = s;
    return k;
  };
  using L = kir::LoopKind;
  EXPECT_FALSE(kir::verifyKernel(
      kernelWith({{L::GpuBlock, 1}, {L::GpuBlock, 0}, {L::GpuThread, 0}}, false)));
  Error e = kir::verifyKernel(kernelWith({{L::GpuBlock, 0}, {L::GpuThread, 0}}, true));
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("not on the kernel's outermost loop nest"), std::string::npos)
      << e.message();
  e = kir::verifyKernel(kernelWith({{L::GpuThread, 0}, {L::GpuBlock, 0}}, false));
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("inside a gpu_thread loop"), std::string::npos) << e.message();
  e = kir::verifyKernel(kernelWith({{L::GpuBlock, 0}, {L::GpuBlock, 0}}, false));
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("two gpu_block loops on dimension 0"), std::string::npos)
      << e.message();
  e = kir::verifyKernel(kernelWith({{L::GpuBlock, 3}}, false));
  ASSERT_TRUE(e);
  // The NDRange of a valid nest: dimension 0 = 4 groups of 4, dimension 1 = 4 groups of 1.
  Expected<OpenCLProgram> prog =
      emitOpenCL({kernelWith({{L::GpuBlock, 1}, {L::GpuBlock, 0}, {L::GpuThread, 0}}, false)},
                 GpuTarget::generic());
  ASSERT_TRUE(prog) << prog.error().message();
  const OpenCLLaunch &l = prog->launches.at(0);
  EXPECT_EQ(l.dims, 2);
  EXPECT_EQ(l.globalSize[0], 16);
  EXPECT_EQ(l.localSize[0], 4);
  EXPECT_EQ(l.globalSize[1], 4);
  EXPECT_EQ(l.localSize[1], 1);
  EXPECT_NE(prog->source.find("get_local_id(0)"), std::string::npos);
  Error parsed = checkOpenCLSource(prog->source);
  EXPECT_FALSE(parsed) << parsed.message();
  // A work-group beyond the device's limit is an error naming the kernel.
  GpuTarget small = GpuTarget::generic();
  small.maxWorkGroupSize = 2;
  Expected<OpenCLProgram> big =
      emitOpenCL({kernelWith({{L::GpuBlock, 0}, {L::GpuThread, 0}}, false)}, small);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message().find("kernel k: work-groups of 4 work-items"), std::string::npos)
      << big.error().message();
}

TEST(OpenCLExecutable, MatMulRunsAsAnNDRangeOfRegisterTiles) {
  // Batched, broadcast and with edges in both dims: [3, 37, 29] x [29, 45] on the device
  // against the interpreter; its kernel is a 3-D NDRange (columns, rows, batch).
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices)
    GTEST_SKIP() << "no OpenCL device on this machine: " << devices.error().message();
  Expected<std::unique_ptr<Graph>> g = parseGraph(R"(
graph @mm(%a: f32[3,37,29], %b: f32[29,45]) -> (f32[3,37,45]) {
  %y = matmul(%a, %b) : f32[3,37,45]
  return %y
}
)");
  ASSERT_TRUE(g) << g.error().message();
  OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
  opts.cacheDir = "";
  opts.optimize = false;
  Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(**g, opts);
  ASSERT_TRUE(exe) << exe.error().message();
  EXPECT_NE((*exe)->source().find("get_group_id(2)"), std::string::npos);
  EXPECT_NE((*exe)->source().find("get_local_id(1)"), std::string::npos);
  std::vector<Tensor> inputs = {ramp({3, 37, 29}, 0.25f), ramp({29, 45}, -0.5f)};
  Expected<std::vector<Tensor>> want = interpret(**g, inputs);
  ASSERT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
  ASSERT_TRUE(got) << got.error().message();
  for (int64_t i = 0; i < 3 * 37 * 45; ++i)
    ASSERT_NEAR((*got)[0].data<float>()[i], (*want)[0].data<float>()[i],
                1e-4 + 1e-5 * std::fabs((*want)[0].data<float>()[i]))
        << "element " << i;
}

TEST(OpenCLExecutable, MissingDeviceIsAClearError) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices) {
    EXPECT_NE(devices.error().message().find("no OpenCL"), std::string::npos);
    return;
  }
  Expected<OpenCLDeviceInfo> d = pickOpenCLDevice(99, 0);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("no OpenCL device 99.0"), std::string::npos)
      << d.error().message();
}

} // namespace

TEST(OpenCLEmitter, NestsInSequenceBecomeOneGridEach) {
  // A concat (one nest per operand, after a fused add) and a split (one nest per result) on a
  // GPU: each nest is a kernel of its own and runs as a grid (each was one work-item for the
  // whole node), in order, with the node's buffers; where a device exists they match the
  // interpreter.
  const char *text = R"(
graph @g(%a: f32[3,40], %b: f32[5,40], %c: f32[8,40]) -> (f32[8,40], f32[2,40], f32[6,40]) {
  %x = concat(%a, %b) {axis = 0} : f32[8,40]
  %y = add(%x, %c) : f32[8,40]
  %s0, %s1 = split(%y) {axis = 0, sizes = [2, 6]} : f32[2,40], f32[6,40]
  return %y, %s0, %s1
})";
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  ASSERT_TRUE(g) << g.error().message();
  tuning::LowerOptions lo(testenv::testCpu());
  lo.gpu = GpuTarget::generic();
  Expected<std::vector<LoweringUnit>> units = loweringUnits(**g);
  ASSERT_TRUE(units) << units.error().message();
  std::vector<kir::Kernel> kernels;
  for (const LoweringUnit &u : *units) {
    Expected<std::vector<kir::Kernel>> ks = lowerUnit(u, "n" + std::to_string(kernels.size()), lo);
    ASSERT_TRUE(ks) << ks.error().message();
    for (kir::Kernel &k : *ks)
      kernels.push_back(std::move(k));
  }
  Expected<OpenCLProgram> prog = emitOpenCL(kernels, *lo.gpu);
  ASSERT_TRUE(prog) << prog.error().message();
  std::vector<std::string> names;
  for (const OpenCLLaunch &l : prog->launches) {
    names.push_back(l.name);
    EXPECT_GT(l.globalSize[0], 1) << l.name << " runs as one work-item\n" << prog->source;
  }
  EXPECT_GE(names.size(), 4u) << prog->source; // two pieces of the concat, two of the split
  EXPECT_NE(std::find(names.begin(), names.end(), names[0] + "_p1"), names.end())
      << prog->source;
  EXPECT_FALSE(checkOpenCLSource(prog->source));

  // A local that one nest updates and the next reads: the kernel stays whole.
  kir::Kernel k;
  k.name = "carry";
  k.buffers.push_back({"in", DType::F32, 64, kir::BufferRole::Operand, 0, false});
  k.buffers.push_back({"out", DType::F32, 64, kir::BufferRole::Result, 0, true});
  kir::Expr i = kir::var("i"), j = kir::var("j");
  k.body = kir::block(
      {kir::decl("acc", DType::F32, kir::floatImm(0.0)),
       kir::forLoop("i", kir::intImm(64),
                    kir::assign("acc", kir::add(kir::var("acc", DType::F32),
                                                kir::load(0, DType::F32, i)))),
       kir::forLoop("j", kir::intImm(64), kir::store(1, j, kir::var("acc", DType::F32)))});
  k.schedule.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {"j"}});
  std::vector<kir::Kernel> whole = splitGridPhases({k});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].name, "carry");

  // Locals first, then a block of the nests (a fused concat's hoisted scalar operands before
  // its pieces, YOLO's box decode): the nested block runs in sequence like its statements, so
  // each nest is a phase with the locals copied in.
  kir::Kernel nested;
  nested.name = "nested";
  nested.buffers = k.buffers;
  nested.buffers.push_back({"s", DType::F32, 1, kir::BufferRole::Operand, 1, false});
  kir::Expr sv = kir::var("s0", DType::F32);
  nested.body = kir::block(
      {kir::decl("s0", DType::F32, kir::load(2, DType::F32, kir::intImm(0))),
       kir::block({kir::forLoop("i", kir::intImm(32),
                                kir::store(1, i, kir::mul(kir::load(0, DType::F32, i), sv))),
                   kir::forLoop("j", kir::intImm(32),
                                kir::store(1, kir::add(j, kir::intImm(32)),
                                           kir::add(kir::load(0, DType::F32, j), sv)))})});
  nested.schedule.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {"i"}});
  nested.schedule.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {"j"}});
  std::vector<kir::Kernel> split = splitGridPhases({nested});
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[1].name, "nested_p1");
  for (const kir::Kernel &p : split)
    EXPECT_EQ(p.body->body.front()->kind, kir::StmtKind::Decl) << kir::printKernel(p);

  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  if (!devices)
    GTEST_SKIP() << "no OpenCL device on this machine: " << devices.error().message();
  OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
  opts.cacheDir = "";
  opts.optimize = false;
  Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(**g, opts);
  ASSERT_TRUE(exe) << exe.error().message();
  std::vector<Tensor> inputs = {ramp({3, 40}, 0.25f), ramp({5, 40}, -0.5f), ramp({8, 40}, 0.125f)};
  Expected<std::vector<Tensor>> want = interpret(**g, inputs);
  ASSERT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_EQ(got->size(), 3u);
  for (size_t o = 0; o < 3; ++o)
    for (int64_t e = 0; e < (*want)[o].numElements(); ++e)
      EXPECT_EQ((*got)[o].data<float>()[e], (*want)[o].data<float>()[e])
          << "output " << o << " element " << e;
}

// Lowering of the reductions, scans, topk, matmul, einsum, conv, conv_transpose, pools, lrn and
// resize, checked against the interpreter with the kernel evaluator on random inputs.
#include "LowerTestUtil.h"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

using Ints = std::vector<int64_t>;

int64_t I(int64_t v) { return v; }

/// Builds a one-node graph whose graph inputs are `inputs` (followed by `constants` as
/// constant operands, a null Tensor for an absent operand) and checks the lowered node.
void check(OpKind kind, const std::vector<Tensor> &inputs, AttrMap attrs, const std::string &what,
           int numResults = -1, const std::vector<Tensor> &constants = {},
           const tuning::LowerOptions *opts = nullptr) {
  Graph g;
  std::vector<Value *> ops;
  for (size_t i = 0; i < inputs.size(); ++i)
    ops.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
  for (const Tensor &c : constants)
    ops.push_back(c.isNull() ? nullptr : constantValue(g, c));
  Expected<Node *> n = g.createInferred(kind, ops, std::move(attrs), "n", numResults);
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  g.setOutputs((*n)->results());
  checkNode(**n, inputs, what, opts);
}

/// Random floats that are small integers, so that ties are common.
Tensor tiesTensor(DType t, const Extents &e, std::mt19937 &rng) {
  Tensor x = randomTensor(DType::I64, e, rng, -2, 3);
  Tensor r = Tensor::zeros(t, e);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double v = static_cast<double>(x.data<int64_t>()[i]);
    switch (t) {
    case DType::F32: r.data<float>()[i] = static_cast<float>(v); break;
    case DType::F64: r.data<double>()[i] = v; break;
    case DType::I32: r.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    default: NNC_ASSERT(false, "tiesTensor: unsupported dtype");
    }
  }
  return r;
}

void sprinkleNaN(Tensor &t, std::mt19937 &rng, int every = 7) {
  for (int64_t i = 0; i < t.numElements(); ++i)
    if (rng() % every == 0)
      t.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
}

std::string str(const Ints &v) { return extentsStr(v); }

} // namespace

// ---- reductions --------------------------------------------------------------------------------

TEST(LowerNN, Reductions) {
  std::mt19937 rng(1);
  const OpKind kinds[] = {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax,
                          OpKind::ReduceMin, OpKind::ReduceProd};
  struct Case {
    Extents shape;
    Ints axes;
  };
  const Case cases[] = {{{2, 3, 5}, {}},     {{2, 3, 5}, {1}},   {{2, 3, 5}, {0, 2}},
                        {{2, 3, 5}, {-1}},   {{2, 3, 5}, {0}},   {{7}, {0}},
                        {{3, 1, 4}, {1}},    {{4, 1, 6, 3}, {0, 1}}, {{}, {}},
                        {{2, 0, 3}, {1}},    {{5, 6, 7}, {0, 1, 2}}};
  for (OpKind k : kinds)
    for (DType t : {DType::F32, DType::F16, DType::F64, DType::I32, DType::U8, DType::I64})
      for (const Case &c : cases)
        for (int64_t keep : {0, 1}) {
          if (k == OpKind::ReduceProd && !isFloat(t) && c.shape.size() > 2)
            continue;
          Tensor x = randomTensor(t, c.shape, rng, k == OpKind::ReduceProd ? 0.5 : -3,
                                  k == OpKind::ReduceProd ? 1.5 : 3);
          if (!isFloat(t))
            x = randomTensor(t, c.shape, rng, -5, 30);
          check(k, {x}, {{"axes", c.axes}, {"keepdims", keep}},
                fmt::format("{} {} {} axes {} keepdims {}", opInfo(k).name, dtypeName(t),
                            str(c.shape), str(c.axes), keep));
        }
  // bool max/min, NaN propagation, long f32 sums.
  for (OpKind k : {OpKind::ReduceMax, OpKind::ReduceMin}) {
    check(k, {randomTensor(DType::Bool, {3, 4}, rng)}, {{"axes", Ints{1}}, {"keepdims", I(0)}},
          "bool");
    Tensor x = randomTensor(DType::F32, {4, 9}, rng);
    sprinkleNaN(x, rng);
    check(k, {x}, {{"axes", Ints{1}}, {"keepdims", I(1)}}, "nan");
    // Rows of 80 (the extremum ignoring NaN in vector lanes, and a NaN flag beside it): NaN
    // anywhere in a row, infinities, a row of NaN only.
    Tensor y = randomTensor(DType::F32, {6, 80}, rng);
    float *yp = y.data<float>();
    yp[80 * 1 + 40] = std::numeric_limits<float>::quiet_NaN();
    yp[80 * 4 + 79] = std::numeric_limits<float>::quiet_NaN();
    yp[80 * 2 + 7] = std::numeric_limits<float>::infinity();
    yp[80 * 3 + 70] = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < 80; ++i)
      yp[80 * 5 + i] = std::numeric_limits<float>::quiet_NaN();
    check(k, {y}, {{"axes", Ints{1}}, {"keepdims", I(0)}}, "nan rows of 80");
  }
  check(OpKind::ReduceSum, {randomTensor(DType::F32, {3, 20000}, rng, 0, 1000)},
        {{"axes", Ints{1}}, {"keepdims", I(0)}}, "long sum");
  check(OpKind::ReduceProd, {randomTensor(DType::I32, {4, 50}, rng, -9, 9)},
        {{"axes", Ints{1}}, {"keepdims", I(0)}}, "wrapping prod");
  check(OpKind::ReduceMean, {randomTensor(DType::F32, {64, 1024}, rng)},
        {{"axes", Ints{0}}, {"keepdims", I(0)}}, "large inner kept");
}

TEST(LowerNN, ReduceAsWorkGroupTreeForOpenCL) {
  // reduce_* over contiguous innermost rows on an OpenCL device: a work-group per output and
  // a tree in local memory (the evaluator runs its barriers in phases), ragged row lengths,
  // NaN and integer rows; rows too short for a tree keep the loop lowering; with the
  // innermost dim kept, an accumulator per output.
  std::mt19937 rng(9);
  tuning::LowerOptions opts(testenv::testCpu());
  opts.gpu = GpuTarget::generic();
  for (OpKind k : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
                   OpKind::ReduceProd}) {
    std::string name(opInfo(k).name);
    check(k, {randomTensor(DType::F32, {3, 257}, rng, 0.5, 1.5)},
          {{"axes", Ints{1}}, {"keepdims", I(1)}}, name + " opencl rows", -1, {}, &opts);
    check(k, {randomTensor(DType::F32, {2, 3, 10, 13}, rng)},
          {{"axes", Ints{2, 3}}, {"keepdims", I(0)}}, name + " opencl pool", -1, {}, &opts);
    Tensor x = randomTensor(DType::F32, {4, 100}, rng);
    sprinkleNaN(x, rng, 97);
    check(k, {x}, {{"axes", Ints{1}}, {"keepdims", I(0)}}, name + " opencl nan", -1, {}, &opts);
    check(k, {randomTensor(DType::I32, {2, 70}, rng, -3, 4)},
          {{"axes", Ints{1}}, {"keepdims", I(0)}}, name + " opencl i32", -1, {}, &opts);
    check(k, {randomTensor(DType::F32, {5, 9}, rng)}, {{"axes", Ints{1}}, {"keepdims", I(0)}},
          name + " opencl short rows", -1, {}, &opts);
    // The innermost dim kept (template reduce.per_output): one accumulator per output.
    check(k, {randomTensor(DType::F32, {4, 6, 33}, rng, 0.5, 1.5)},
          {{"axes", Ints{1}}, {"keepdims", I(0)}}, name + " opencl kept inner", -1, {}, &opts);
    check(k, {randomTensor(DType::I32, {2, 5, 3, 7}, rng, -3, 4)},
          {{"axes", Ints{0, 2}}, {"keepdims", I(1)}}, name + " opencl kept inner i32", -1, {},
          &opts);
  }
  check(OpKind::ReduceMax, {randomTensor(DType::Bool, {3, 4, 5}, rng)},
        {{"axes", Ints{1}}, {"keepdims", I(0)}}, "opencl kept inner bool", -1, {}, &opts);
}

TEST(LowerNN, ArgMaxArgMin) {
  std::mt19937 rng(2);
  for (OpKind k : {OpKind::ArgMax, OpKind::ArgMin})
    for (DType t : {DType::F32, DType::I32, DType::F16})
      for (Extents shape : {Extents{3, 5, 4}, Extents{7}, Extents{2, 1, 6}, Extents{3, 37}, Extents{53}, Extents{2, 19, 3}})
        for (int64_t axis = -1; axis < static_cast<int64_t>(shape.size()); ++axis)
          for (int64_t last : {0, 1})
            for (int64_t keep : {0, 1}) {
              Tensor x = t == DType::F16 ? randomTensor(t, shape, rng) : tiesTensor(t, shape, rng);
              if (t == DType::F32)
                sprinkleNaN(x, rng, 11);
              check(k, {x},
                    {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}},
                    fmt::format("{} {} {} axis {} last {} keep {}", opInfo(k).name,
                                dtypeName(t), str(shape), axis, last, keep));
            }
}

TEST(LowerNN, CumSumAndCumProd) {
  std::mt19937 rng(3);
  // Integer products wrap (in the i64 accumulator, then on the store): the kernels must wrap
  // as the interpreter does.
  for (OpKind k : {OpKind::CumSum, OpKind::CumProd})
    for (DType t : {DType::F32, DType::F16, DType::I32, DType::I8})
      for (Extents shape : {Extents{3, 5, 4}, Extents{9}})
        for (int64_t axis = -1; axis < static_cast<int64_t>(shape.size()); ++axis)
          for (int64_t excl : {0, 1})
            for (int64_t rev : {0, 1}) {
              Tensor x = isFloat(t) ? randomTensor(t, shape, rng)
                                    : randomTensor(t, shape, rng, -60, 60);
              check(k, {x}, {{"axis", axis}, {"exclusive", excl}, {"reverse", rev}},
                    fmt::format("{} {} {} axis {} excl {} rev {}", opInfo(k).name, dtypeName(t),
                                str(shape), axis, excl, rev));
            }
}

TEST(LowerNN, TopK) {
  // Rows of 300 with k of 2, 37 and 299: the heap's replacements and sort across several
  // levels, ties and NaNs among the kept and the dropped.
  std::mt19937 rng(4);
  for (DType t : {DType::F32, DType::I32, DType::F64})
    for (Extents shape :
         {Extents{3, 7}, Extents{4, 5, 3}, Extents{6}, Extents{2, 41, 3}, Extents{2, 300}})
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
        for (int64_t k : {int64_t(1), int64_t(2), int64_t(3), int64_t(37),
                          shape[static_cast<size_t>(axis)] - 1, shape[static_cast<size_t>(axis)]})
          for (int64_t largest : {0, 1}) {
            if (k < 1 || k > shape[static_cast<size_t>(axis)])
              continue;
            Tensor x = tiesTensor(t, shape, rng);
            if (t == DType::F32)
              sprinkleNaN(x, rng, 9);
            check(OpKind::TopK, {x}, {{"axis", axis}, {"largest", largest}, {"sorted", I(1)}},
                  fmt::format("topk {} {} axis {} k {} largest {}", dtypeName(t), str(shape),
                              axis, k, largest),
                  2, {i64Vector({k})});
          }
}

// ---- matmul and einsum -------------------------------------------------------------------------

TEST(LowerNN, MatMul) {
  std::mt19937 rng(5);
  const std::pair<Extents, Extents> shapes[] = {
      {{3, 4}, {4, 5}},       {{2, 1, 3, 4}, {5, 4, 6}}, {{4}, {4, 5}},    {{3, 4}, {4}},
      {{4}, {4}},             {{7, 13}, {13, 9}},        {{1, 5}, {5, 1}}, {{2, 3, 0}, {0, 4}},
      {{5, 2, 3}, {1, 3, 2}}, {{33, 17}, {17, 40}},      {{3}, {2, 3, 4}},
      {{2, 5, 100}, {100, 7}}, {{130}, {3, 130, 2}}, // k >= 64: f32 sums in f64
      // B shared over trailing batch dims: they fold into the rows (all, or under an outer
      // batch loop where B moves).
      {{6, 1, 5}, {5, 7}},    {{2, 3, 4, 5}, {2, 1, 5, 6}}, {{4, 2, 3, 70}, {70, 33}}};
  for (DType t : {DType::F32, DType::F16, DType::F64, DType::I32, DType::I8, DType::U8})
    for (const auto &[as, bs] : shapes) {
      Tensor a = isFloat(t) ? randomTensor(t, as, rng) : randomTensor(t, as, rng, 0, 100);
      Tensor b = isFloat(t) ? randomTensor(t, bs, rng) : randomTensor(t, bs, rng, 0, 100);
      check(OpKind::MatMul, {a, b}, {},
            fmt::format("matmul {} {} x {}", dtypeName(t), str(as), str(bs)));
    }
}

TEST(LowerNN, MatMulForOpenCLDevices) {
  // The NDRange GEMM (GpuGemm.cpp), its gpu loops run serially by the evaluator: for a GPU
  // (columns wn apart across work-items) and for a device that prefers float vectors
  // (adjacent columns per work-item), on batches, broadcasts, folds and ragged edges.
  std::mt19937 rng(7);
  const std::pair<Extents, Extents> shapes[] = {{{3, 4}, {4, 5}},
                                                {{2, 1, 3, 4}, {5, 4, 6}},
                                                {{4}, {4, 5}},
                                                {{3, 4}, {4}},
                                                {{4}, {4}},
                                                {{7, 13}, {13, 9}},
                                                {{5, 2, 3}, {1, 3, 2}},
                                                {{33, 17}, {17, 40}},
                                                {{2, 5, 100}, {100, 7}},
                                                {{70, 9}, {9, 130}},
                                                {{6, 1, 5}, {5, 7}},
                                                {{4, 2, 3, 70}, {70, 33}}};
  for (int vec : {1, 8}) {
    tuning::LowerOptions opts(testenv::testCpu());
    opts.gpu = GpuTarget::generic();
    opts.gpu->preferredFloatVector = vec;
    for (DType t : {DType::F32, DType::F16})
      for (const auto &[as, bs] : shapes) {
        Tensor a = randomTensor(t, as, rng), b = randomTensor(t, bs, rng);
        check(OpKind::MatMul, {a, b}, {},
              fmt::format("opencl matmul (float vectors {}) {} {} x {}", vec, dtypeName(t), str(as),
                          str(bs)),
              -1, {}, &opts);
      }
  }
  // A GPU's default for a large product: 8 x 8 per work-item, ragged on both sides (positive
  // operands: sums that cancel differ from the interpreter's f64 by more than its atol).
  tuning::LowerOptions gpu(testenv::testCpu());
  gpu.gpu = GpuTarget::generic();
  check(OpKind::MatMul,
        {randomTensor(DType::F32, {130, 67}, rng, 0.5, 1.5),
         randomTensor(DType::F32, {67, 135}, rng, 0.5, 1.5)},
        {}, "opencl matmul 130 x 67 x 135", -1, {}, &gpu);
}

/// The same config for every problem (the tuner's candidates, one at a time).
struct FixedConfig : tuning::ConfigSource {
  tuning::Config c;
  std::optional<tuning::Config> lookup(const tuning::Problem &) const override { return c; }
};

TEST(LowerNN, MatMulOpenCLSchedules) {
  // gemm_opencl configs beside the defaults: local tiles (barriers run in phases by the
  // evaluator) with vector loads and k tails, register tiles wider than the problem, and
  // the device-memory path, on ragged shapes and batches, with runs of partial sums
  // (sum_run) and without. Small integers keep every sum exact, so any schedule must give the
  // reference's numbers exactly.
  std::mt19937 rng(8);
  const std::pair<Extents, Extents> shapes[] = {
      {{7, 13}, {13, 9}}, {{2, 5, 100}, {100, 8}}, {{70, 37}, {37, 130}}, {{3, 33, 40}, {40, 64}}};
  const char *configs[] = {
      "mdimc=4,ndimc=4,mwi=2,nwi=4,vw=4,kwg=8,local=1",
      "mdimc=2,ndimc=8,mwi=4,nwi=2,vw=1,kwg=16,local=1",
      "mdimc=8,ndimc=2,mwi=1,nwi=8,vw=8,kwg=32,local=1",
      "mdimc=4,ndimc=4,mwi=2,nwi=4,vw=2,kwg=8,local=0",
      // A work-item's columns adjacent (vw = nwi): GemmTiles, scalar tiles at the edges.
      "mdimc=2,ndimc=4,mwi=4,nwi=8,vw=8,kwg=16,local=0",
  };
  for (const char *cs : configs) {
    FixedConfig fixed;
    fixed.c = *tuning::parseConfig(cs);
    tuning::LowerOptions opts(testenv::testCpu());
    opts.gpu = GpuTarget::generic();
    opts.configs = &fixed;
    for (const auto &[as, bs] : shapes) {
      Tensor a = tiesTensor(DType::F32, as, rng), b = tiesTensor(DType::F32, bs, rng);
      check(OpKind::MatMul, {a, b}, {},
            fmt::format("opencl matmul {} {} x {}", cs, str(as), str(bs)), -1, {}, &opts);
      check(OpKind::MatMul, {a, b}, {{"sum_run", I(5)}},
            fmt::format("opencl matmul {} {} x {} in runs of 5", cs, str(as), str(bs)), -1, {},
            &opts);
    }
  }
}

TEST(LowerNN, MatMulSumRunsOnCpuSchedules) {
  // sum_run on the CPU's GEMM paths: the scalar register tiles (with an unroll the runs
  // override), the microkernel tiles in k blocks that do not align with the runs, and the
  // defaults (GEMV or tiles). Small integers keep every sum exact, so runs must not change
  // the numbers: what they check is that every product is summed once.
  std::mt19937 rng(9);
  const std::pair<Extents, Extents> shapes[] = {{{7, 37}, {37, 9}}, {{2, 5, 100}, {100, 40}}};
  const char *configs[] = {
      "kc=0,ku=2,mc=0,mk=0,mr=2,nc=0,nr=8,order=0,pa=0,par=0,pb=0,pf=0",
      "kc=32,ku=1,mc=0,mk=1,mr=4,nc=0,nr=16,order=0,pa=0,par=0,pb=1,pf=0",
      "",
  };
  for (const char *cs : configs) {
    FixedConfig fixed;
    if (*cs)
      fixed.c = *tuning::parseConfig(cs);
    tuning::LowerOptions opts(testenv::testCpu());
    if (*cs)
      opts.configs = &fixed;
    for (const auto &[as, bs] : shapes) {
      Tensor a = tiesTensor(DType::F32, as, rng), b = tiesTensor(DType::F32, bs, rng);
      check(OpKind::MatMul, {a, b}, {{"sum_run", I(5)}},
            fmt::format("cpu matmul {} {} x {} in runs of 5", cs, str(as), str(bs)), -1, {},
            &opts);
    }
  }
}

TEST(LowerNN, ReduceOpenCLWidths) {
  // Every reduce_opencl width the tuner could pick (wider than the default, narrower, the
  // whole row) gives the reference's numbers: exact on integers and on max, within float
  // reassociation on sums of a ragged row.
  std::mt19937 rng(10);
  const tuning::Space &space = *tuning::findSpace("reduce_opencl");
  for (int64_t wg : space.knobs[0].values) {
    FixedConfig fixed;
    fixed.c = {{"wg", wg}};
    tuning::LowerOptions opts(testenv::testCpu());
    opts.gpu = GpuTarget::generic();
    opts.gpu->maxWorkGroupSize = 1024;
    opts.gpu->maxWorkItemSizes = {1024, 1024, 64};
    opts.configs = &fixed;
    bool applied = false;
    opts.onTunable = [&](const tuning::Problem &p, bool tuned) {
      applied = tuned && p.kind == "reduce_opencl";
    };
    check(OpKind::ReduceSum, {randomTensor(DType::F32, {3, 1100}, rng, 0.5, 1.5)},
          {{"axes", Ints{1}}, {"keepdims", I(1)}}, fmt::format("opencl sum wg={}", wg), -1, {},
          &opts);
    EXPECT_TRUE(applied) << "wg=" << wg;
    check(OpKind::ReduceMax, {randomTensor(DType::F32, {4, 1024}, rng)},
          {{"axes", Ints{1}}, {"keepdims", I(0)}}, fmt::format("opencl max wg={}", wg), -1, {},
          &opts);
    check(OpKind::ReduceSum, {randomTensor(DType::I32, {2, 1030}, rng, -3, 4)},
          {{"axes", Ints{1}}, {"keepdims", I(0)}}, fmt::format("opencl i32 wg={}", wg), -1, {},
          &opts);
  }
}

TEST(LowerNN, Einsum) {
  std::mt19937 rng(6);
  struct Case {
    std::string eq;
    std::vector<Extents> shapes;
  };
  const Case cases[] = {{"ij,jk->ik", {{3, 4}, {4, 5}}},
                        {"ii->i", {{4, 4}}},
                        {"ii", {{5, 5}}},
                        {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
                        {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}},
                        {"i,i", {{7}, {7}}},
                        {"ij->ji", {{3, 5}}},
                        {"ijk->", {{2, 3, 4}}},
                        {"i,j->ij", {{3}, {4}}},
                        {"iij->j", {{3, 3, 4}}},
                        {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
                        {"bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}},
                        {"i...->...", {{3, 2, 4}}}};
  for (DType t : {DType::F32, DType::I32, DType::F16})
    for (const Case &c : cases) {
      std::vector<Tensor> xs;
      for (const Extents &e : c.shapes)
        xs.push_back(isFloat(t) ? randomTensor(t, e, rng) : randomTensor(t, e, rng, -9, 9));
      check(OpKind::Einsum, xs, {{"equation", c.eq}},
            fmt::format("einsum {} {}", dtypeName(t), c.eq));
    }
}

// ---- conv and conv_transpose -------------------------------------------------------------------

namespace {

struct ConvCase {
  Extents x, w;
  Ints strides, pads, dilations;
  int64_t group;
  bool bias;
  std::string autoPad = "NOTSET";
};

} // namespace

TEST(LowerNN, Conv) {
  std::mt19937 rng(7);
  const ConvCase cases[] = {
      {{1, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{2, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2, true},
      {{1, 2, 5, 6}, {3, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false},
      {{1, 6, 10, 10}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6, true},
      {{2, 3, 11}, {5, 3, 4}, {3}, {2, 1}, {2}, 1, true},
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}, 1, true},
      {{1, 3, 7, 6}, {2, 3, 3, 3}, {2, 2}, {}, {1, 1}, 1, true, "SAME_UPPER"},
      {{1, 3, 7, 6}, {2, 3, 4, 2}, {2, 3}, {}, {1, 1}, 1, false, "SAME_LOWER"},
      {{1, 3, 7, 6}, {2, 3, 3, 3}, {1, 2}, {}, {1, 1}, 1, true, "VALID"},
      {{1, 1, 3, 3}, {1, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, false},
      {{1, 2, 6, 5}, {2, 2, 3, 3}, {4, 4}, {3, 3, 3, 3}, {3, 2}, 1, false},
      // Few taps and rows of 16+ columns: the row-vectorized direct conv (a LeNet conv1;
      // vertical stride and dilation with asymmetric pads; groups with a 17-column row, whose
      // last vector overlaps the one before).
      {{2, 1, 20, 24}, {6, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
      {{1, 3, 9, 21}, {4, 3, 3, 3}, {2, 1}, {1, 0, 2, 1}, {2, 2}, 1, false},
      {{1, 4, 6, 17}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
  };
  // The operands of a case (x, w and the bias when it has one), drawn from [lo, hi).
  auto operands = [&](const ConvCase &c, DType t, double lo, double hi) {
    std::vector<Tensor> xs{randomTensor(t, c.x, rng, lo, hi), randomTensor(t, c.w, rng, lo, hi)};
    if (c.bias)
      xs.push_back(randomTensor(t, {c.w[0]}, rng, lo, hi));
    return xs;
  };
  auto attrs = [](const ConvCase &c) -> AttrMap {
    return {{"strides", c.strides},
            {"pads", c.pads},
            {"dilations", c.dilations},
            {"group", c.group},
            {"auto_pad", c.autoPad}};
  };
  // The algorithms: the default (im2col + GEMM, or rows for few taps), direct loops (for huge
  // im2col matrices) and the im2col produced a GEMM cache block at a time (what col matrices
  // beyond the L2 take; f32).
  for (const char *algo : {"im2col", "direct", "blocked"})
    for (DType t : {DType::F32, DType::F16})
      for (const ConvCase &c : cases) {
        setenv("NNC_CONV_ALGO", algo, 1);
        // Blocked: positive operands (its fma order cancels signed sums differently; below).
        bool blocked = std::string(algo) == "blocked";
        check(OpKind::Conv, operands(c, t, blocked ? 0.5 : -3, blocked ? 1.5 : 3), attrs(c),
              fmt::format("conv {} {} x {} w {} strides {} pads {} dil {} group {} {}", algo,
                          dtypeName(t), str(c.x), str(c.w), str(c.strides), str(c.pads),
                          str(c.dilations), c.group, c.autoPad));
        unsetenv("NNC_CONV_ALGO");
      }
  // The blocked im2col over several k blocks (R = 432: 256 + 176), column blocks of 128 whose
  // output rows straddle them, a column edge and a row edge (3-D, groups, strides, dilation,
  // asymmetric pads); a 1-D conv over 300 positions; stride 2 along rows (strided copies).
  // Temporal convs (k x 1 x 1), whose copies run over whole depth x height x width runs
  // (stride 1, dilation 2; a kernel-1 axis with padding, whose padded width is its output's),
  // or height x width runs under a depth stride.
  const ConvCase blockedCases[] = {
      {{1, 32, 4, 10, 30}, {8, 16, 3, 3, 3}, {1, 2, 1}, {1, 1, 0, 1, 0, 1}, {1, 1, 2}, 2, true},
      {{1, 40, 300}, {8, 40, 5}, {1}, {2, 2}, {1}, 1, false},
      {{2, 8, 13, 40}, {12, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 144, 4, 6, 7}, {8, 144, 3, 1, 1}, {1, 1, 1}, {2, 0, 0, 2, 0, 0}, {2, 1, 1}, 1, true},
      {{1, 4, 5, 6, 7}, {4, 4, 3, 1, 1}, {1, 1, 1}, {1, 0, 1, 1, 0, 1}, {1, 1, 1}, 1, false},
      {{2, 8, 7, 6, 5}, {4, 8, 3, 1, 1}, {2, 1, 1}, {1, 0, 0, 1, 0, 0}, {1, 1, 1}, 1, true},
  };
  // Positive operands: sums of hundreds of signed terms cancel to below the check's absolute
  // tolerance in f32 (the GPU case below says more).
  setenv("NNC_CONV_ALGO", "blocked", 1);
  for (const ConvCase &c : blockedCases) {
    std::vector<Tensor> xs = operands(c, DType::F32, 0.5, 1.5);
    std::string what =
        fmt::format("conv blocked x {} w {} strides {} pads {} dil {} group {}", str(c.x), str(c.w),
                    str(c.strides), str(c.pads), str(c.dilations), c.group);
    check(OpKind::Conv, xs, attrs(c), what);
    // It took the blocked path: the padded input, then the GEMM producing its B (no im2col
    // kernel).
    Graph g;
    std::vector<Value *> ops;
    for (size_t i = 0; i < xs.size(); ++i)
      ops.push_back(g.addInput("x" + std::to_string(i), xs[i].type()));
    Expected<Node *> n = g.createInferred(OpKind::Conv, ops, attrs(c), "c");
    ASSERT_TRUE(n) << n.error().message();
    Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "c", testenv::testLowerOptions());
    ASSERT_TRUE(ks) << ks.error().message();
    ASSERT_EQ(ks->size(), 2u) << what;
    EXPECT_EQ(ks->at(0).name, "c_pad") << what;
    EXPECT_NE(kir::printKernel(ks->at(1)).find("gemm_tile"), std::string::npos) << what;
  }
  unsetenv("NNC_CONV_ALGO");
  // For an OpenCL GPU: im2col + the NDRange GEMM (work-groups over tiles of each image and
  // group's product, dimension 2 over images and groups; the evaluator runs the work-group
  // nest and its barriers), or the row conv where it applies.
  // Positive operands: the GEMM's fma order differs from the interpreter's sums, which
  // signed values can cancel to below the check's absolute tolerance; a wrong tap still
  // moves a sum by a few percent.
  tuning::LowerOptions gpu(testenv::testCpu());
  gpu.gpu = GpuTarget::generic();
  for (DType t : {DType::F32, DType::F16})
    for (const ConvCase &c : cases)
      check(OpKind::Conv, operands(c, t, 0.5, 1.5), attrs(c),
            fmt::format("conv opencl {} x {} w {} group {}", dtypeName(t), str(c.x), str(c.w),
                        c.group),
            -1, {}, &gpu);
  // A 3x3 conv over 16 channels: the GEMM kernel is the work-group nest.
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, shapeFromExtents({2, 16, 12, 12})));
  Value *w = g.addInput("w", TensorType(DType::F32, shapeFromExtents({32, 16, 3, 3})));
  Expected<Node *> n = g.createInferred(OpKind::Conv, {x, w}, {{"pads", Ints{1, 1, 1, 1}}}, "c");
  ASSERT_TRUE(n) << n.error().message();
  Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "c", gpu);
  ASSERT_TRUE(ks) << ks.error().message();
  ASSERT_EQ(ks->size(), 2u);
  EXPECT_EQ(ks->at(0).name, "c_im2col");
  std::string text = kir::printKernel(ks->at(1));
  EXPECT_NE(text.find("gpu_block(2)"), std::string::npos) << text;
  EXPECT_NE(text.find("barrier"), std::string::npos) << text;
}

TEST(LowerNN, ConvTranspose) {
  std::mt19937 rng(8);
  struct Case {
    ConvCase c;
    Ints outputPadding, outputShape;
  };
  const Case cases[] = {
      {{{1, 2, 3, 3}, {2, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true}, {}, {}},
      {{{2, 4, 3, 4}, {4, 2, 3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, 2, true}, {1, 1}, {}},
      {{{1, 3, 5}, {3, 2, 3}, {3}, {1, 2}, {2}, 1, false}, {}, {}},
      {{{1, 2, 3, 3}, {2, 1, 3, 3}, {2, 2}, {}, {1, 1}, 1, true}, {}, {6, 7}},
      {{{1, 2, 3, 3}, {2, 2, 2, 2}, {2, 2}, {}, {1, 1}, 1, false, "SAME_UPPER"}, {}, {}},
      {{{1, 2, 3, 3}, {2, 2, 3, 3}, {2, 1}, {}, {1, 1}, 1, false, "SAME_LOWER"}, {}, {}},
      {{{1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, {1, 2, 2}, {0, 1, 0, 0, 0, 1}, {2, 1, 1}, 1, true},
       {},
       {}},
  };
  for (const char *algo : {"gemm", "direct"})
  for (DType t : {DType::F32, DType::F16})
    for (const Case &k : cases) {
      setenv("NNC_CONV_ALGO", algo, 1);
      const ConvCase &c = k.c;
      std::vector<Tensor> xs{randomTensor(t, c.x, rng), randomTensor(t, c.w, rng)};
      if (c.bias)
        xs.push_back(randomTensor(t, {c.w[1] * c.group}, rng));
      AttrMap attrs{{"strides", c.strides},
                    {"pads", c.pads},
                    {"dilations", c.dilations},
                    {"group", c.group},
                    {"output_padding", k.outputPadding},
                    {"auto_pad", c.autoPad}};
      if (!k.outputShape.empty())
        attrs["output_shape"] = k.outputShape;
      check(OpKind::ConvTranspose, xs, attrs,
            fmt::format("conv_transpose {} {} x {} w {} strides {} pads {} {}", algo,
                        dtypeName(t), str(c.x), str(c.w), str(c.strides), str(c.pads),
                        c.autoPad));
      unsetenv("NNC_CONV_ALGO");
    }
}

// ---- pooling and lrn ---------------------------------------------------------------------------

TEST(LowerNN, Pooling) {
  std::mt19937 rng(9);
  struct Case {
    Extents x;
    Ints kernel, strides, pads, dilations;
    int64_t ceil;
    std::string autoPad = "NOTSET";
  };
  const Case cases[] = {
      {{1, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, 0},
      {{2, 3, 7, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0},
      {{2, 3, 7, 5}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, 1},
      {{1, 2, 8, 9}, {2, 3}, {3, 2}, {0, 0, 0, 0}, {2, 1}, 1},
      {{1, 1, 11}, {4}, {3}, {2, 1}, {}, 1},
      {{1, 2, 4, 5, 3}, {2, 2, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {}, 0},
      // 3-D f32 pools run one pass per axis: rows of 10 pooled per tap (S3D's 3x3x3, stride
      // 1); a dilated, ceil-mode window whose middle axis is left alone (no pass).
      {{2, 3, 4, 6, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {}, 0},
      {{1, 2, 5, 7, 9}, {3, 1, 3}, {2, 1, 2}, {1, 0, 1, 1, 0, 2}, {2, 1, 1}, 1},
      {{1, 2, 7, 6}, {3, 3}, {2, 2}, {}, {}, 0, "SAME_UPPER"},
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {}, {}, 0, "SAME_LOWER"},
      {{1, 2, 7, 6}, {3, 3}, {1, 2}, {}, {}, 0, "VALID"},
      {{1, 1, 5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}, {}, 0},
      // An innermost axis of lanes the window does not pool (the blocked NCHWc layout):
      // one accumulator per lane.
      {{2, 3, 7, 6, 8}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0, 1, 1, 0}, {}, 0},
      {{1, 2, 9, 9, 16}, {3, 2, 1}, {2, 2, 1}, {2, 0, 0, 2, 1, 0}, {2, 1, 1}, 1},
  };
  for (const Case &c : cases) {
    AttrMap base{{"kernel_shape", c.kernel},   {"strides", c.strides},
                 {"pads", c.pads},             {"dilations", c.dilations},
                 {"ceil_mode", c.ceil},        {"auto_pad", c.autoPad}};
    std::string what = fmt::format("x {} kernel {} strides {} pads {} dil {} ceil {} {}",
                                   str(c.x), str(c.kernel), str(c.strides), str(c.pads),
                                   str(c.dilations), c.ceil, c.autoPad);
    for (DType t : {DType::F32, DType::F16, DType::I8}) {
      Tensor x = isFloat(t) ? randomTensor(t, c.x, rng) : randomTensor(t, c.x, rng, -100, 100);
      if (t == DType::F32)
        sprinkleNaN(x, rng, 13);
      for (int64_t order : {0, 1}) {
        AttrMap attrs = base;
        attrs["storage_order"] = order;
        check(OpKind::MaxPool, {x}, attrs,
              fmt::format("max_pool {} order {} {}", dtypeName(t), order, what), 2);
      }
      check(OpKind::MaxPool, {x}, base, fmt::format("max_pool {} {}", dtypeName(t), what), 1);
      if (!isFloat(t))
        continue;
      for (int64_t include : {0, 1}) {
        AttrMap attrs = base;
        attrs["count_include_pad"] = include;
        check(OpKind::AvgPool, {randomTensor(t, c.x, rng)}, attrs,
              fmt::format("avg_pool {} include_pad {} {}", dtypeName(t), include, what));
      }
    }
  }
}

TEST(LowerNN, LRN) {
  std::mt19937 rng(10);
  for (int64_t size : {1, 2, 3, 5})
    for (Extents shape : {Extents{2, 7, 3, 4}, Extents{1, 4}, Extents{1, 5, 6}})
      for (DType t : {DType::F32, DType::F16})
        check(OpKind::LRN, {randomTensor(t, shape, rng)},
              {{"size", size}, {"alpha", 2e-2}, {"beta", 0.75}, {"bias", 1.5}},
              fmt::format("lrn {} size {} {}", dtypeName(t), size, str(shape)));
}

// ---- resize ------------------------------------------------------------------------------------

namespace {

AttrMap resizeAttrs(const std::string &mode, const std::string &ctm,
                    const std::string &nearest = "round_prefer_floor", int64_t antialias = 0,
                    int64_t exclude = 0, double cubicA = -0.75,
                    const std::string &policy = "stretch", double extrapolation = 0.0) {
  return {{"mode", mode},
          {"coordinate_transformation_mode", ctm},
          {"nearest_mode", nearest},
          {"cubic_coeff_a", cubicA},
          {"exclude_outside", exclude},
          {"extrapolation_value", extrapolation},
          {"antialias", antialias},
          {"keep_aspect_ratio_policy", policy}};
}

Tensor f32Vector(const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, {static_cast<int64_t>(v.size())}, v);
}

} // namespace

TEST(LowerNN, Resize) {
  std::mt19937 rng(11);
  const char *ctms[] = {"half_pixel",         "pytorch_half_pixel", "align_corners",
                        "asymmetric",         "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  const std::vector<float> scaleSets[] = {{1, 1, 2, 1.5}, {1, 1, 0.5, 0.6}, {1, 1, 1.7, 0.8}};
  Extents shape{1, 2, 5, 6};
  for (const char *mode : {"nearest", "linear", "cubic"})
    for (const char *ctm : ctms)
      for (const std::vector<float> &sc : scaleSets) {
        if (std::string(ctm) == "tf_half_pixel_for_nn" && std::string(mode) != "nearest")
          continue;
        check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)}, resizeAttrs(mode, ctm),
              fmt::format("resize {} {} scales {}", mode, ctm, sc[2]), 1,
              {Tensor(), f32Vector(sc), Tensor()});
      }
  for (const char *nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const std::vector<float> &sc : scaleSets)
      check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)},
            resizeAttrs("nearest", "asymmetric", nearest),
            fmt::format("resize nearest {} {}", nearest, sc[2]), 1,
            {Tensor(), f32Vector(sc), Tensor()});
  // antialias, exclude_outside, cubic coefficient.
  for (const char *mode : {"linear", "cubic"})
    for (const std::vector<float> &sc : scaleSets) {
      check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)},
            resizeAttrs(mode, "half_pixel", "round_prefer_floor", 1),
            fmt::format("resize {} antialias {}", mode, sc[2]), 1,
            {Tensor(), f32Vector(sc), Tensor()});
      check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)},
            resizeAttrs(mode, "half_pixel", "round_prefer_floor", 0, 1, -0.5),
            fmt::format("resize {} exclude_outside {}", mode, sc[2]), 1,
            {Tensor(), f32Vector(sc), Tensor()});
    }
  // sizes, keep_aspect_ratio_policy and axes.
  for (const char *policy : {"stretch", "not_larger", "not_smaller"})
    check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)},
          resizeAttrs("linear", "half_pixel", "round_prefer_floor", 0, 0, -0.75, policy),
          fmt::format("resize sizes {}", policy), 1,
          {Tensor(), Tensor(), i64Vector({1, 2, 8, 4})});
  {
    AttrMap attrs = resizeAttrs("cubic", "align_corners");
    attrs["axes"] = Ints{3, 2};
    check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)}, attrs, "resize axes", 1,
          {Tensor(), Tensor(), i64Vector({9, 3})});
  }
  // tf_crop_and_resize with a roi and extrapolation.
  for (const char *mode : {"nearest", "linear", "cubic"})
    check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)},
          resizeAttrs(mode, "tf_crop_and_resize", "round_prefer_floor", 0, 0, -0.75, "stretch",
                      10.0),
          fmt::format("resize {} tf_crop_and_resize", mode), 1,
          {f32Vector({0, 0, -0.2f, 0.4f, 1, 1, 0.6f, 1.3f}), Tensor(), i64Vector({1, 2, 6, 5})});
  // Other dtypes: f16 and u8 (rounded and saturated).
  for (DType t : {DType::F16, DType::U8, DType::F64})
    for (const char *mode : {"nearest", "linear", "cubic"})
      check(OpKind::Resize,
            {isFloat(t) ? randomTensor(t, shape, rng) : randomTensor(t, shape, rng, 0, 255)},
            resizeAttrs(mode, "half_pixel"), fmt::format("resize {} {}", dtypeName(t), mode), 1,
            {Tensor(), f32Vector({1, 1, 1.8f, 0.7f}), Tensor()});
  // Three axes of a volume: f32 resizes run one pass per axis, through two intermediates in
  // turn (the extrapolation test above covers the last pass's flags).
  for (const char *mode : {"linear", "cubic"})
    check(OpKind::Resize, {randomTensor(DType::F32, {1, 2, 3, 5, 6}, rng)},
          resizeAttrs(mode, "half_pixel"), fmt::format("resize {} 3 axes", mode), 1,
          {Tensor(), f32Vector({1, 1, 2, 0.6f, 1.5f}), Tensor()});
  // Identity along every axis: a plain copy.
  check(OpKind::Resize, {randomTensor(DType::F32, shape, rng)}, resizeAttrs("linear", "half_pixel"),
        "resize identity", 1, {Tensor(), f32Vector({1, 1, 1, 1}), Tensor()});
}

TEST(LowerNN, UnsupportedFailsClearly) {
  // A resize whose scales are a run-time input cannot be lowered: the error names the node.
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, shapeFromExtents({1, 1, 2, 2})));
  Value *s = g.addInput("s", TensorType(DType::F32, shapeFromExtents({4})));
  Node *n = g.createNode(OpKind::Resize, {x, nullptr, s},
                         {TensorType(DType::F32, shapeFromExtents({1, 1, 4, 4}))},
                         resizeAttrs("nearest", "asymmetric"), "up");
  Expected<std::vector<kir::Kernel>> ks = lowerNode(*n, "k", testenv::testLowerOptions());
  ASSERT_FALSE(ks);
  EXPECT_NE(ks.error().message().find("up"), std::string::npos) << ks.error().message();
  EXPECT_NE(ks.error().message().find("scales"), std::string::npos) << ks.error().message();
}

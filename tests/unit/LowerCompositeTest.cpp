// Lowering of the composite ops (softmax family, normalizations, attention, rotary embedding),
// checked against the interpreter with the kernel evaluator on random inputs, unscheduled and
// scheduled, over several shapes, dtypes and attribute combinations.
#include "LowerTestUtil.h"

#include <limits>

#include "TestTarget.h"
#include "ThreadPool.h"
#include "nnc/codegen/LLVMCodegen.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

/// One operand of a test case: a random tensor of this type, a given tensor, or absent.
struct In {
  DType dtype = DType::F32;
  Extents extents;
  bool absent = false;
  Tensor given; ///< Used when not null.
  double lo = -3, hi = 3;
};
In absent() {
  In i;
  i.absent = true;
  return i;
}
In f(Extents e, DType t = DType::F32) {
  In i;
  i.dtype = t;
  i.extents = std::move(e);
  return i;
}
In given(Tensor t) {
  In i;
  i.dtype = t.dtype();
  i.extents = t.extents();
  i.given = std::move(t);
  return i;
}
In positive(Extents e, DType t = DType::F32) {
  In i = f(std::move(e), t);
  i.lo = 0.1;
  return i;
}

/// Builds a one-node graph with the operands as inputs and checks lowering vs interpreter.
/// Runs the node's kernels compiled by the LLVM JIT and compares with the interpreter.
void checkJit(const Node &node, const std::vector<Tensor> &inputs, const std::string &what) {
  std::vector<Tensor> ops = bindOperands(node, inputs);
  Expected<std::vector<Tensor>> want = evaluateNode(node, ops);
  ASSERT_TRUE(want) << what << ": interpreter: " << want.error().message();
  Expected<std::vector<kir::Kernel>> ks = lowerNode(node, "k", testenv::testLowerOptions());
  ASSERT_TRUE(ks) << what << ": " << ks.error().message();
  CodegenOptions opts(testenv::testCpu());
  opts.cacheDir = "";
  opts.parallelFor = &nnc_parallel_for;
  Expected<std::unique_ptr<CompiledModule>> mod = compileKernels(*ks, opts);
  ASSERT_TRUE(mod) << what << ": " << mod.error().message();
  std::vector<Tensor> results;
  for (size_t r = 0; r < node.numResults(); ++r)
    results.push_back(
        Tensor::zeros(node.result(r)->dtype(), *staticExtents(node.result(r)->shape())));
  std::vector<std::vector<char>> scratch(16);
  for (const kir::Kernel &k : *ks) {
    std::vector<void *> bufs;
    for (const kir::BufferDecl &b : k.buffers) {
      if (b.role == kir::BufferRole::Operand) {
        bufs.push_back(const_cast<void *>(ops.at(b.index).rawData()));
      } else if (b.role == kir::BufferRole::Result) {
        bufs.push_back(results.at(b.index).rawData());
      } else {
        std::vector<char> &v = scratch.at(b.index);
        v.resize(std::max(v.size(), static_cast<size_t>(b.numElements) * dtypeSize(b.dtype)));
        bufs.push_back(v.data());
      }
    }
    KernelFn fn = (*mod)->lookup(k.name);
    ASSERT_NE(fn, nullptr) << what << ": no kernel " << k.name;
    fn(bufs.data());
  }
  for (size_t r = 0; r < want->size(); ++r)
    expectClose(results[r], (*want)[r], what + " (jit) result " + std::to_string(r));
}

/// With `opts` (an OpenCL device's lowering), the kernel evaluator alone runs the kernels.
void check(OpKind kind, const std::vector<In> &ins, AttrMap attrs, int numResults,
           const std::string &what, uint32_t seed = 1, bool jit = true,
           const tuning::LowerOptions *opts = nullptr) {
  std::mt19937 rng(seed);
  Graph g;
  std::vector<Value *> operands;
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k].absent) {
      operands.push_back(nullptr);
      continue;
    }
    operands.push_back(g.addInput("x" + std::to_string(k),
                                  TensorType(ins[k].dtype, shapeFromExtents(ins[k].extents))));
    inputs.push_back(ins[k].given.isNull()
                         ? randomTensor(ins[k].dtype, ins[k].extents, rng, ins[k].lo, ins[k].hi)
                         : ins[k].given);
  }
  Expected<Node *> n = g.createInferred(kind, operands, std::move(attrs), "n", numResults);
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  checkNode(**n, inputs, what, opts);
  if (jit && !opts)
    checkJit(**n, inputs, what);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

} // namespace

TEST(LowerComposite, SoftmaxFamily) {
  const std::vector<std::pair<Extents, int64_t>> cases = {
      {{7}, 0},       {{3, 5}, 1},     {{3, 5}, 0},          {{2, 3, 4}, -2},
      {{2, 3, 4}, 0}, {{4, 40}, -1},   {{1, 1}, 1},          {{0, 3}, 1},
      {{64, 600}, 1}, {{2, 5, 24}, 1}, {{2, 64, 16, 32}, 1}, {{2, 3, 1}, 2}};
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::Hardmax})
    for (DType t : {DType::F32, DType::F16, DType::F64, DType::BF16})
      for (auto &[e, axis] : cases)
        check(op, {f(e, t)}, {{"axis", axis}}, 1,
              std::string(opInfo(op).name) + " " + std::string(dtypeName(t)) + " " + extentsStr(e) +
                  " axis " + std::to_string(axis));
}

TEST(LowerComposite, SoftmaxEdgeCases) {
  // Rows: all -inf (NaN), with +inf (NaN), with NaN, ties (hardmax takes the first), normal.
  Tensor x = Tensor::fromVector<float>(
      DType::F32, {5, 3}, {-kInf, -kInf, -kInf, 1, kInf, 2, 0, kNaN, 1, 2, 2, 1, -kInf, 0, 1});
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::Hardmax})
    check(op, {given(x)}, {{"axis", int64_t(1)}}, 1, std::string(opInfo(op).name) + " edge cases");
}

TEST(LowerComposite, LayerNorm) {
  struct Case {
    Extents x, scale, bias;
    int64_t axis;
    DType t, stash;
    int results;
  };
  const std::vector<Case> cases = {
      {{3, 8}, {8}, {8}, -1, DType::F32, DType::F32, 3},
      {{2, 3, 5}, {3, 5}, {}, 1, DType::F32, DType::F32, 1},
      {{2, 3, 5}, {5}, {1, 5}, -2, DType::F32, DType::F32, 2},
      {{2, 3, 5}, {2, 3, 5}, {3, 1}, 0, DType::F32, DType::F64, 3},
      {{2, 3, 4}, {3, 1}, {4}, 1, DType::F32, DType::F32, 3}, // scale broadcast inside cols
      {{4, 16}, {16}, {16}, 1, DType::F16, DType::F32, 3},
      {{4, 16}, {16}, {16}, 1, DType::BF16, DType::F32, 1},
      {{4, 16}, {16}, {16}, 1, DType::F64, DType::F64, 3},
      {{4, 16}, {16}, {16}, 1, DType::F32, DType::F16, 3},
      {{64, 1024}, {1024}, {1024}, -1, DType::F32, DType::F32, 3},
  };
  for (const Case &c : cases) {
    std::vector<In> ins = {f(c.x, c.t), f(c.scale, c.t),
                           c.bias.empty() ? absent() : f(c.bias, c.t)};
    check(OpKind::LayerNorm, ins, {{"axis", c.axis}, {"epsilon", 1e-5}, {"stash_type", c.stash}},
          c.results,
          "layer_norm " + extentsStr(c.x) + " axis " + std::to_string(c.axis) + " " +
              std::string(dtypeName(c.t)) + " stash " + std::string(dtypeName(c.stash)));
  }
}

TEST(LowerComposite, RMSNorm) {
  struct Case {
    Extents x, scale;
    int64_t axis;
    DType t, scaleType, stash;
  };
  const std::vector<Case> cases = {
      {{3, 8}, {8}, -1, DType::F32, DType::F32, DType::F32},
      {{2, 3, 5}, {3, 5}, 1, DType::F32, DType::F32, DType::F32},
      {{2, 3, 5}, {2, 1, 5}, 1, DType::F32, DType::F32, DType::F32},
      {{4, 16}, {16}, 1, DType::F16, DType::F16, DType::F32},
      {{4, 16}, {16}, 1, DType::F16, DType::F32, DType::F32},
      {{4, 16}, {16}, 1, DType::F64, DType::F64, DType::F64},
      {{4, 16}, {16}, 0, DType::F32, DType::F32, DType::BF16},
  };
  for (const Case &c : cases)
    check(OpKind::RMSNorm, {f(c.x, c.t), f(c.scale, c.scaleType)},
          {{"axis", c.axis}, {"epsilon", 1e-5}, {"stash_type", c.stash}}, 1,
          "rms_norm " + extentsStr(c.x) + " scale " + extentsStr(c.scale) + " " +
              std::string(dtypeName(c.t)) + "/" + std::string(dtypeName(c.scaleType)) + " stash " +
              std::string(dtypeName(c.stash)));
}

TEST(LowerComposite, GroupInstanceBatchNorm) {
  struct Case {
    Extents x;
    int64_t groups;
    DType t, stash;
  };
  const std::vector<Case> cases = {
      {{2, 4, 3, 3}, 2, DType::F32, DType::F32}, {{1, 6, 5}, 3, DType::F32, DType::F32},
      {{2, 4}, 4, DType::F32, DType::F32},       {{2, 6, 2, 2}, 1, DType::F16, DType::F32},
      {{1, 8, 16}, 4, DType::F64, DType::F64},   {{2, 4, 8}, 2, DType::F32, DType::F16},
      {{2, 4, 8}, 4, DType::BF16, DType::F32},   {{4, 32, 32, 32}, 8, DType::F32, DType::F32},
  };
  for (const Case &c : cases) {
    int64_t ch = c.x[1];
    std::string shape = extentsStr(c.x) + " " + std::string(dtypeName(c.t));
    check(OpKind::GroupNorm, {f(c.x, c.t), f({ch}, c.t), f({ch}, c.t)},
          {{"num_groups", c.groups}, {"epsilon", 1e-5}, {"stash_type", c.stash}}, 1,
          "group_norm " + shape + " groups " + std::to_string(c.groups) + " stash " +
              std::string(dtypeName(c.stash)));
    check(OpKind::InstanceNorm, {f(c.x, c.t), f({ch}, c.t), f({ch}, c.t)}, {{"epsilon", 1e-5}}, 1,
          "instance_norm " + shape);
    check(OpKind::BatchNorm,
          {f(c.x, c.t), f({ch}, c.t), f({ch}, c.t), f({ch}, c.t), positive({ch}, c.t)},
          {{"epsilon", 1e-5}}, 1, "batch_norm " + shape);
  }
}

TEST(LowerComposite, NormsAsWorkGroupRowsForOpenCL) {
  // Template norm.workgroup_rows: a work-group per row, the row's sums as trees in local
  // memory (the evaluator runs the barriers in phases), every work-item normalizing every
  // G-th element. Ragged rows (not a multiple of the width), broadcast scales, the optional
  // mean and inverse outputs, a group spanning channels, narrow dtypes; rows too short for a
  // tree keep the loop form.
  tuning::LowerOptions opts(testenv::testCpu());
  opts.gpu = GpuTarget::generic();
  auto attrs = [](DType stash) -> AttrMap {
    return {{"axis", int64_t(-1)}, {"epsilon", 1e-5}, {"stash_type", stash}};
  };
  check(OpKind::LayerNorm, {f({3, 257}), f({257}), f({257})}, attrs(DType::F32), 3,
        "opencl layer_norm ragged", 1, false, &opts);
  check(OpKind::LayerNorm, {f({2, 3, 40}), f({3, 1}), absent()},
        {{"axis", int64_t(1)}, {"epsilon", 1e-5}, {"stash_type", DType::F32}}, 2,
        "opencl layer_norm scale broadcast", 2, false, &opts);
  check(OpKind::LayerNorm, {f({4, 96}, DType::F16), f({96}, DType::F16), f({96}, DType::F16)},
        attrs(DType::F32), 1, "opencl layer_norm f16", 3, false, &opts);
  check(OpKind::RMSNorm, {f({4, 100}), f({100})}, attrs(DType::F32), 1, "opencl rms_norm", 4, false,
        &opts);
  for (DType stash : {DType::F32, DType::F16})
    check(OpKind::GroupNorm, {f({2, 8, 9, 10}), f({8}), f({8})},
          {{"num_groups", int64_t(4)}, {"epsilon", 1e-5}, {"stash_type", stash}}, 1,
          "opencl group_norm stash " + std::string(dtypeName(stash)), 5, false, &opts);
  check(OpKind::InstanceNorm, {f({2, 3, 70}), f({3}), f({3})}, {{"epsilon", 1e-5}}, 1,
        "opencl instance_norm", 6, false, &opts);
  check(OpKind::LayerNorm, {f({5, 9}), f({9}), f({9})}, attrs(DType::F32), 3,
        "opencl layer_norm short rows", 7, false, &opts);

  // The long rows are the device form: a local buffer per kernel; short ones are not.
  auto locals = [&](const Extents &x) {
    Graph g;
    Value *in = g.addInput("x", TensorType(DType::F32, shapeFromExtents(x)));
    Value *sc = g.addInput("s", TensorType(DType::F32, shapeFromExtents({x.back()})));
    Expected<Node *> n = g.createInferred(OpKind::LayerNorm, {in, sc}, attrs(DType::F32), "n", 1);
    EXPECT_TRUE(n) << n.error().message();
    Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "k", opts);
    EXPECT_TRUE(ks) << ks.error().message();
    return ks && ks->size() == 1 ? ks->front().locals.size() : size_t(99);
  };
  EXPECT_EQ(locals({3, 257}), 1u);
  EXPECT_EQ(locals({5, 9}), 0u);
}

TEST(LowerComposite, LpNorm) {
  const std::vector<std::pair<Extents, int64_t>> cases = {
      {{7}, 0}, {{3, 5}, 1}, {{3, 5}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{8, 64}, 1}};
  for (int64_t p : {1, 2})
    for (DType t : {DType::F32, DType::F16, DType::F64})
      for (auto &[e, axis] : cases)
        check(OpKind::LpNorm, {f(e, t)}, {{"axis", axis}, {"p", p}}, 1,
              "lp_norm p" + std::to_string(p) + " " + std::string(dtypeName(t)) + " " +
                  extentsStr(e) + " axis " + std::to_string(axis));
  // A zero vector stays zero.
  Tensor x = Tensor::fromVector<float>(DType::F32, {2, 3}, {0, 0, 0, 1, -2, 3});
  for (int64_t p : {1, 2})
    check(OpKind::LpNorm, {given(x)}, {{"axis", int64_t(1)}, {"p", p}}, 1, "lp_norm zero row");
}

namespace {

struct AttnCase {
  std::string name;
  int64_t B = 2, Hq = 2, Hk = 2, S = 3, L = 4, D = 4, Dv = 4, P = 0;
  bool packed = false;
  int64_t causal = 0, mode = 0;
  double softcap = 0;
  std::optional<double> scale;
  std::optional<DType> precision;
  DType t = DType::F32;
  Extents mask; ///< Empty: no mask.
  DType maskType = DType::F32;
  bool nonpad = false;
  int results = 4;
};

void checkAttention(const AttnCase &c, uint32_t seed) {
  std::vector<In> ins;
  if (c.packed) {
    ins.push_back(f({c.B, c.S, c.Hq * c.D}, c.t));
    ins.push_back(f({c.B, c.L, c.Hk * c.D}, c.t));
    ins.push_back(f({c.B, c.L, c.Hk * c.Dv}, c.t));
  } else {
    ins.push_back(f({c.B, c.Hq, c.S, c.D}, c.t));
    ins.push_back(f({c.B, c.Hk, c.L, c.D}, c.t));
    ins.push_back(f({c.B, c.Hk, c.L, c.Dv}, c.t));
  }
  bool any = !c.mask.empty() || c.P > 0 || c.nonpad;
  if (any)
    ins.push_back(c.mask.empty() ? absent() : f(c.mask, c.maskType));
  if (c.P > 0 || c.nonpad) {
    ins.push_back(c.P > 0 ? f({c.B, c.Hk, c.P, c.D}, c.t) : absent());
    ins.push_back(c.P > 0 ? f({c.B, c.Hk, c.P, c.Dv}, c.t) : absent());
  }
  if (c.nonpad) {
    // Valid lengths between S and the total length (a causal offset stays >= 0).
    std::vector<int64_t> lens;
    for (int64_t b = 0; b < c.B; ++b)
      lens.push_back(std::min(c.P + c.L, c.S + b));
    ins.push_back(given(i64Vector(lens)));
  }
  AttrMap a = {{"is_causal", c.causal}, {"qk_matmul_output_mode", c.mode}, {"softcap", c.softcap}};
  if (c.packed) {
    a["q_num_heads"] = c.Hq;
    a["kv_num_heads"] = c.Hk;
  }
  if (c.scale)
    a["scale"] = *c.scale;
  if (c.precision)
    a["softmax_precision"] = *c.precision;
  check(OpKind::Attention, ins, a, c.results, "attention " + c.name, seed);
}

} // namespace

TEST(LowerComposite, Attention) {
  std::vector<AttnCase> cases;
  auto add = [&](const std::string &name, auto fn) {
    AttnCase c;
    c.name = name;
    fn(c);
    cases.push_back(c);
  };
  add("plain", [](AttnCase &) {});
  add("one result", [](AttnCase &c) { c.results = 1; });
  add("gqa", [](AttnCase &c) {
    c.Hq = 4;
    c.Hk = 2;
    c.Dv = 3;
  });
  add("mqa packed", [](AttnCase &c) {
    c.Hq = 3;
    c.Hk = 1;
    c.packed = true;
    c.D = 2;
    c.Dv = 5;
  });
  add("causal", [](AttnCase &c) {
    c.causal = 1;
    c.S = 4;
  });
  add("causal short queries", [](AttnCase &c) {
    c.causal = 1;
    c.S = 2;
    c.L = 5;
  });
  add("float mask 4d", [](AttnCase &c) { c.mask = {2, 2, 3, 4}; });
  add("float mask 2d", [](AttnCase &c) { c.mask = {3, 4}; });
  add("bool mask broadcast", [](AttnCase &c) {
    c.mask = {2, 1, 1, 4};
    c.maskType = DType::Bool;
  });
  add("short mask", [](AttnCase &c) {
    c.mask = {1, 3};
    c.P = 2;
  });
  add("short bool mask", [](AttnCase &c) {
    c.mask = {3, 2};
    c.maskType = DType::Bool;
  });
  add("past", [](AttnCase &c) { c.P = 3; });
  add("past causal gqa", [](AttnCase &c) {
    c.P = 3;
    c.causal = 1;
    c.Hq = 4;
    c.Hk = 1;
  });
  add("past packed two results", [](AttnCase &c) {
    c.P = 2;
    c.packed = true;
    c.results = 2;
  });
  add("past one result", [](AttnCase &c) {
    c.P = 2;
    c.results = 1;
  });
  add("softcap", [](AttnCase &c) {
    c.softcap = 2.0;
    c.scale = 0.9;
  });
  add("scale", [](AttnCase &c) { c.scale = 0.125; });
  add("nonpad", [](AttnCase &c) {
    c.nonpad = true;
    c.L = 5;
  });
  add("nonpad causal", [](AttnCase &c) {
    c.nonpad = true;
    c.causal = 1;
    c.L = 5;
    c.S = 2;
  });
  add("f16", [](AttnCase &c) {
    c.t = DType::F16;
    c.mask = {3, 4};
    c.maskType = DType::F16;
  });
  add("f16 precision f32", [](AttnCase &c) {
    c.t = DType::F16;
    c.precision = DType::F32;
  });
  add("f32 precision f16", [](AttnCase &c) { c.precision = DType::F16; });
  add("f64", [](AttnCase &c) {
    c.t = DType::F64;
    c.causal = 1;
  });
  add("larger", [](AttnCase &c) {
    c.B = 2;
    c.Hq = 8;
    c.Hk = 2;
    c.S = 32;
    c.L = 32;
    c.D = 16;
    c.Dv = 16;
    c.causal = 1;
  });
  for (int64_t mode = 0; mode <= 3; ++mode)
    for (int sc = 0; sc < 2; ++sc)
      add("mode " + std::to_string(mode) + (sc ? " softcap" : ""), [&](AttnCase &c) {
        c.mode = mode;
        c.softcap = sc ? 1.5 : 0.0;
        c.mask = {3, 4};
        c.causal = 1;
      });
  // A fully masked row gives NaN like the interpreter.
  add("fully masked", [](AttnCase &c) {
    c.mask = {2, 2, 3, 4};
    c.maskType = DType::Bool;
  });
  uint32_t seed = 7;
  for (const AttnCase &c : cases)
    checkAttention(c, seed++);
}

TEST(LowerComposite, AttentionFullyMaskedRow) {
  // Every key masked out for every query: the interpreter gives NaN, so must the kernels.
  Tensor mask = Tensor::fromVector<bool>(DType::Bool, {1, 3}, {false, false, false});
  std::vector<In> ins = {f({1, 1, 2, 2}), f({1, 1, 3, 2}), f({1, 1, 3, 2}), given(mask)};
  check(OpKind::Attention, ins,
        {{"is_causal", int64_t(0)}, {"qk_matmul_output_mode", int64_t(3)}, {"softcap", 0.0}}, 4,
        "attention fully masked");
}

TEST(LowerComposite, RotaryEmbedding) {
  struct Case {
    std::string name;
    Extents x, cache;
    Extents pos; ///< Empty: no position_ids.
    int64_t heads = 0, rot = 0, interleaved = 0;
    DType t = DType::F32;
  };
  const std::vector<Case> cases = {
      {"4d full", {2, 3, 4, 8}, {2, 4, 4}, {}, 0, 0, 0},
      {"4d interleaved", {2, 3, 4, 8}, {2, 4, 4}, {}, 0, 0, 1},
      {"4d partial", {2, 3, 4, 8}, {1, 4, 2}, {}, 0, 4, 0},
      {"3d", {2, 5, 12}, {2, 5, 3}, {}, 2, 0, 0},
      {"3d interleaved partial", {2, 5, 12}, {1, 1, 2}, {}, 3, 4, 1},
      {"position ids", {2, 3, 4, 8}, {10, 4}, {2, 4}, 0, 0, 0},
      {"position ids broadcast", {2, 3, 4, 8}, {10, 2}, {1, 4}, 0, 4, 1},
      {"3d position ids", {2, 5, 8}, {6, 2}, {2, 5}, 2, 0, 0},
      {"f16", {1, 2, 3, 8}, {1, 3, 4}, {}, 0, 0, 1, DType::F16},
      {"f64", {1, 2, 3, 8}, {1, 3, 4}, {}, 0, 0, 0, DType::F64},
  };
  uint32_t seed = 11;
  for (const Case &c : cases) {
    std::vector<In> ins = {f(c.x, c.t), f(c.cache, c.t), f(c.cache, c.t)};
    if (!c.pos.empty()) {
      std::mt19937 rng(seed);
      ins.push_back(given(randomTensor(DType::I64, c.pos, rng, 0, c.cache[0] - 1)));
    }
    AttrMap a = {{"interleaved", c.interleaved}, {"rotary_embedding_dim", c.rot}};
    if (c.heads)
      a["num_heads"] = c.heads;
    check(OpKind::RotaryEmbedding, ins, a, 1, "rotary_embedding " + c.name, seed++);
  }
}

TEST(LowerComposite, RotaryPositionIdOutOfRangeIsTheInterpretersError) {
  for (int64_t bad : {int64_t(10), int64_t(-1), int64_t(1) << 40}) {
    Graph g;
    Value *x = g.addInput("x", TensorType(DType::F32, shapeFromExtents({1, 3, 2, 8})));
    Value *cos = g.addInput("cos", TensorType(DType::F32, shapeFromExtents({10, 4})));
    Value *sin = g.addInput("sin", TensorType(DType::F32, shapeFromExtents({10, 4})));
    Value *pos = g.addInput("pos", TensorType(DType::I64, shapeFromExtents({1, 2})));
    AttrMap a = {{"interleaved", int64_t(0)}, {"rotary_embedding_dim", int64_t(0)}};
    Expected<Node *> n = g.createInferred(OpKind::RotaryEmbedding, {x, cos, sin, pos}, a, "rope");
    ASSERT_TRUE(n) << n.error().message();
    std::mt19937 rng(3);
    std::vector<Tensor> ops = {randomTensor(DType::F32, {1, 3, 2, 8}, rng),
                               randomTensor(DType::F32, {10, 4}, rng),
                               randomTensor(DType::F32, {10, 4}, rng),
                               Tensor::fromVector<int64_t>(DType::I64, {1, 2}, {3, bad})};
    Expected<std::vector<Tensor>> want = evaluateNode(**n, ops);
    ASSERT_FALSE(want) << "the interpreter accepts position id " << bad;
    EXPECT_NE(want.error().message().find("node 'rope'"), std::string::npos)
        << want.error().message();
    for (int mode = 0; mode < 3; ++mode) {
      Expected<std::vector<Tensor>> got = mode == 2 ? runJit(**n, ops) : runLowered(**n, ops, mode);
      ASSERT_FALSE(got) << "position id " << bad << " mode " << mode << ": no error";
      EXPECT_EQ(got.error().message(), want.error().message()) << "mode " << mode;
    }
  }
}

TEST(LowerComposite, UnsupportedInputFailsClearly) {
  // A 3-D attention without head counts is rejected by the shape rule before lowering; a
  // lowerer still names the node when it is called on bad attributes.
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, shapeFromExtents({2, 4, 3})));
  Value *s = g.addInput("s", TensorType(DType::F32, shapeFromExtents({4})));
  Value *b = g.addInput("b", TensorType(DType::F32, shapeFromExtents({4})));
  Node *n = g.createNode(
      OpKind::GroupNorm, {x, s, b}, {TensorType(DType::F32, shapeFromExtents({2, 4, 3}))},
      {{"num_groups", int64_t(3)}, {"epsilon", 1e-5}, {"stash_type", DType::F32}}, "gn");
  Expected<std::vector<kir::Kernel>> k = lowerNode(*n, "k", testenv::testLowerOptions());
  ASSERT_FALSE(k);
  EXPECT_NE(k.error().message().find("gn"), std::string::npos) << k.error().message();
  EXPECT_NE(k.error().message().find("num_groups"), std::string::npos) << k.error().message();
}

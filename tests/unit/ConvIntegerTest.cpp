// conv_integer against the interpreter, bit for bit: its lowerings through the kernel
// evaluator (node level), and whole graphs compiled for the CPU at each ISA level the host
// runs (the u8s8s32 tiles' VNNI and widened paths) and for OpenCL where there is a device;
// over strides, pads, dilations, groups, depthwise, 1-D and 2-D, batches, zero points at the
// ends of their ranges and per output channel, u8 and i8 operands. Its shape rule's errors.
#include <fmt/format.h>

#include "IntGroupTestUtil.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/runtime/OpenCL.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

/// A u8 or i8 tensor over the dtype's whole range.
Tensor bytes(DType t, const Extents &e, std::mt19937 &rng) {
  Tensor x = Tensor::zeros(t, e);
  for (int64_t i = 0; i < x.numElements(); ++i)
    static_cast<uint8_t *>(x.rawData())[i] = static_cast<uint8_t>(rng());
  return x;
}

Tensor scalarOf(DType t, int v) {
  Tensor z = Tensor::zeros(t, {});
  static_cast<uint8_t *>(z.rawData())[0] = static_cast<uint8_t>(v);
  return z;
}

struct ConvCase {
  Extents x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
};

AttrMap convAttrs(const ConvCase &c, bool channelsLast = false) {
  size_t d = c.x.size() - 2;
  AttrMap a;
  if (channelsLast)
    a["channels_last"] = int64_t{1};
  a["strides"] = c.strides.empty() ? std::vector<int64_t>(d, 1) : c.strides;
  a["pads"] = c.pads.empty() ? std::vector<int64_t>(2 * d, 0) : c.pads;
  a["dilations"] = c.dilations.empty() ? std::vector<int64_t>(d, 1) : c.dilations;
  a["group"] = c.group;
  return a;
}

/// The graph conv_integer(x, w, zx?, zw?) with x an input, w and the zero points constants
/// (`channelsLast`: channels_last = 1, x of c.x's extents with the channels last).
std::unique_ptr<Graph> convGraph(const ConvCase &c, const Tensor &x, const Tensor &w,
                                 const Tensor &zx, const Tensor &zw, Node **node = nullptr,
                                 bool channelsLast = false) {
  auto g = std::make_unique<Graph>();
  std::vector<Value *> ops = {g->addInput("x", x.type()), constantValue(*g, w)};
  if (!zx.isNull() || !zw.isNull())
    ops.push_back(zx.isNull() ? nullptr : constantValue(*g, zx));
  if (!zw.isNull())
    ops.push_back(constantValue(*g, zw));
  Expected<Node *> n =
      g->createInferred(OpKind::ConvInteger, ops, convAttrs(c, channelsLast), "conv");
  EXPECT_TRUE(n) << n.error().message();
  if (!n)
    return nullptr;
  g->setOutputs((*n)->results());
  if (node)
    *node = *n;
  return g;
}

void expectSame(const Tensor &got, const Tensor &want, const std::string &what) {
  expectClose(got, want, what);
}

/// The default pipeline for `cpu` run on a copy of `g` (pack-gemm-weights packs a constant
/// i8 weight of group 1 into the tiles' panels).
std::unique_ptr<Graph> optimized(const Graph &g, const CpuTarget &cpu) {
  std::unique_ptr<Graph> c = g.clone();
  Error e = runDefaultPipeline(*c, cpu);
  EXPECT_FALSE(e) << e.message();
  return c;
}

/// Runs the graph on every CPU target (`threads` threads; as it is and after the default
/// pipeline) and OpenCL, each against the interpreter.
void checkOnTargets(const Graph &g, const Tensor &x, const std::string &what, int threads = 2) {
  Expected<std::vector<Tensor>> want = interpret(g, {x});
  ASSERT_TRUE(want) << what << ": interpreter: " << want.error().message();
  for (const CpuTarget &cpu : intTileTargets())
    for (bool pipeline : {false, true}) {
      std::unique_ptr<Graph> opt = pipeline ? optimized(g, cpu) : nullptr;
      CpuOptions o(cpu);
      o.threads = threads;
      o.codegen.cacheDir = "";
      Expected<std::unique_ptr<Executable>> exe = Executable::compile(pipeline ? *opt : g, o);
      ASSERT_TRUE(exe) << what << " " << cpu.str() << ": " << exe.error().message();
      Expected<std::vector<Tensor>> got = (*exe)->run({x});
      ASSERT_TRUE(got) << what << " " << cpu.str() << ": " << got.error().message();
      expectSame((*got)[0], (*want)[0],
                 what + " on " + cpu.levelName() + (cpu.int8DotBits() ? " vnni" : "") +
                     (pipeline ? " optimized" : ""));
    }
  if (listOpenCLDevices()) {
    OpenCLOptions cl(testenv::testCpu(), testenv::testGpu());
    cl.cacheDir = "";
    cl.optimize = false;
    Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(g, cl);
    ASSERT_TRUE(exe) << what << " opencl: " << exe.error().message();
    Expected<std::vector<Tensor>> got = (*exe)->run({x});
    ASSERT_TRUE(got) << what << " opencl: " << got.error().message();
    expectSame((*got)[0], (*want)[0], what + " on opencl");
  }
}

const ConvCase kCases[] = {
    {{1, 8, 9, 9}, {16, 8, 3, 3}, {}, {1, 1, 1, 1}, {}, 1},          // 3x3 same
    {{2, 5, 7, 6}, {3, 5, 3, 2}, {2, 1}, {1, 0, 1, 1}, {}, 1},       // batch, odd sizes
    {{1, 6, 10, 11}, {9, 2, 3, 3}, {1, 2}, {2, 1, 0, 2}, {2, 1}, 3}, // grouped, dilated
    {{1, 12, 9, 9}, {12, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, 12},        // depthwise
    {{2, 4, 8, 13}, {4, 1, 3, 3}, {2, 2}, {0, 1, 1, 0}, {1, 2}, 4},  // depthwise, strided
    {{1, 8, 4, 4}, {8, 1, 5, 5}, {}, {2, 2, 2, 2}, {}, 8},           // depthwise, wide kernel
    {{1, 16, 7, 7}, {40, 16, 1, 1}, {}, {}, {}, 1},                  // pointwise
    {{1, 3, 17}, {5, 3, 4}, {3}, {2, 1}, {2}, 1},                    // 1-D
    {{2, 4, 1, 5}, {6, 2, 1, 3}, {}, {0, 1, 0, 1}, {}, 2},           // grouped 1 x 3
    {{1, 33, 6, 5}, {70, 33, 2, 2}, {1, 1}, {1, 0, 0, 1}, {}, 1},    // K not a multiple of 4
};

} // namespace

TEST(ConvInteger, LoweringsMatchInterpreter) {
  std::mt19937 rng(47);
  for (DType tx : {DType::U8, DType::I8})
    for (DType tw : {DType::I8, DType::U8})
      for (const ConvCase &c : kCases) {
        Tensor x = bytes(tx, c.x, rng), w = bytes(tw, c.w, rng);
        std::string base = fmt::format("{}{} * {}{} group {}", dtypeName(tx), extentsStr(c.x),
                                       dtypeName(tw), extentsStr(c.w), c.group);
        Node *n = nullptr;
        auto g = convGraph(c, x, w, scalarOf(tx, tx == DType::U8 ? 255 : -128),
                           bytes(tw, {c.w[0]}, rng), &n);
        ASSERT_TRUE(g);
        checkNode(*n, {x}, base + " zero points");
        g = convGraph(c, x, w, Tensor(), Tensor(), &n);
        checkNode(*n, {x}, base);
      }
}

TEST(ConvInteger, CompiledMatchesInterpreterOnEveryTarget) {
  std::mt19937 rng(48);
  for (DType tx : {DType::U8, DType::I8})
    for (DType tw : {DType::I8, DType::U8})
      for (const ConvCase &c : kCases) {
        Tensor x = bytes(tx, c.x, rng), w = bytes(tw, c.w, rng);
        std::string base = fmt::format("{}{} * {}{} group {}", dtypeName(tx), extentsStr(c.x),
                                       dtypeName(tw), extentsStr(c.w), c.group);
        // One of five zero-point variants per case, in turn (every variant meets every
        // case across the four dtype pairs and the cases' order).
        int zxs[] = {tx == DType::U8 ? 0 : -128, tx == DType::U8 ? 128 : 127,
                     tx == DType::U8 ? 255 : 0};
        int zws[] = {tw == DType::U8 ? 255 : 127, tw == DType::U8 ? 128 : -128, 0};
        int variant =
            static_cast<int>((&c - kCases) + 2 * int(tx == DType::I8) + int(tw == DType::U8)) % 5;
        std::unique_ptr<Graph> g;
        std::string what = base;
        if (variant < 3) {
          g = convGraph(c, x, w, scalarOf(tx, zxs[variant]), scalarOf(tw, zws[variant]));
          what += fmt::format(" zx {} zw {}", zxs[variant], zws[variant]);
        } else if (variant == 3) {
          g = convGraph(c, x, w, scalarOf(tx, zxs[1]), bytes(tw, {c.w[0]}, rng));
          what += " per-channel zw";
        } else {
          g = convGraph(c, x, w, Tensor(), Tensor());
          what += " no zero points";
        }
        ASSERT_TRUE(g);
        checkOnTargets(*g, x, what, /*threads=*/variant == 4 ? 1 : 2);
      }
}

TEST(ConvInteger, DeepLayerSharesItsPatchesAndSplitsThePanels) {
  // A weight bigger than half the L2 (2304 x 512 bytes) and few positions (25): the tiles
  // template makes the patches once and splits the panels into parallel groups, each over all
  // rows in k blocks that add to the sums (rows 25 = 3 tiles of 8 and an edge of 1, K 2304 in
  // blocks whose panel part takes half of L1: several, the last one shorter on a 32 KiB L1);
  // with zero points on both sides, per-channel on w's. On one thread the default takes the
  // plain row blocks instead, with the tallest tile the registers hold (14 rows and an edge).
  std::mt19937 rng(53);
  ConvCase c{{1, 256, 5, 5}, {512, 256, 3, 3}, {}, {1, 1, 1, 1}, {}, 1};
  Tensor x = bytes(DType::U8, c.x, rng), w = bytes(DType::I8, c.w, rng);
  auto g = convGraph(c, x, w, scalarOf(DType::U8, 131), bytes(DType::I8, {c.w[0]}, rng));
  ASSERT_TRUE(g);
  checkOnTargets(*g, x, "u8[1,256,5,5] * i8[512,256,3,3] per-channel zw");
  checkOnTargets(*g, x, "u8[1,256,5,5] * i8[512,256,3,3] per-channel zw, 1 thread", 1);
}

TEST(ConvInteger, RowsPastTheLastBlockRunInTheParallelLoop) {
  // 196 positions in blocks of 24 rows: 8 whole blocks and 4 rows past them, which are the
  // parallel loop's ninth step (a thread that is free takes them) rather than a serial tail;
  // at 2 threads and at 1, with x's zero point on both sides of the per-channel zw.
  std::mt19937 rng(57);
  ConvCase c{{1, 64, 14, 14}, {64, 64, 3, 3}, {}, {1, 1, 1, 1}, {}, 1};
  Tensor x = bytes(DType::U8, c.x, rng), w = bytes(DType::I8, c.w, rng);
  auto g = convGraph(c, x, w, scalarOf(DType::U8, 77), bytes(DType::I8, {c.w[0]}, rng));
  ASSERT_TRUE(g);
  checkOnTargets(*g, x, "u8[1,64,14,14] * i8[64,64,3,3] per-channel zw");
  checkOnTargets(*g, x, "u8[1,64,14,14] * i8[64,64,3,3] per-channel zw, 1 thread", 1);
}

TEST(ConvInteger, ChannelsLastMatchesChannelsFirst) {
  // channels_last = 1 (layout-nhwc): x [N, spatial..., C] and the result [N, spatial..., M].
  // The interpreter's result is the channels-first one transposed; every lowering and CPU
  // target (the tiles read a u8 x without padding in place and copy the others row by row)
  // and OpenCL match it bit for bit.
  std::mt19937 rng(50);
  for (DType tx : {DType::U8, DType::I8})
    for (const ConvCase &c : kCases) {
      std::vector<int64_t> toLast = channelsPerm(c.x.size(), true);
      Tensor xf = bytes(tx, c.x, rng), w = bytes(DType::I8, c.w, rng);
      Tensor zx = scalarOf(tx, tx == DType::U8 ? 200 : -5), zw = bytes(DType::I8, {c.w[0]}, rng);
      auto first = convGraph(c, xf, w, zx, zw);
      ASSERT_TRUE(first);
      Expected<std::vector<Tensor>> want = interpret(*first, {xf});
      ASSERT_TRUE(want) << want.error().message();
      // x and the expected result with the channels last.
      Graph perm;
      Value *in = perm.addInput("x", xf.type());
      Value *out = perm.addInput("y", (*want)[0].type());
      Expected<Node *> tx1 = perm.createInferred(OpKind::Transpose, {in}, {{"perm", toLast}});
      Expected<Node *> ty1 = perm.createInferred(OpKind::Transpose, {out},
                                                 {{"perm", channelsPerm((*want)[0].rank(), true)}});
      ASSERT_TRUE(tx1 && ty1);
      perm.setOutputs({(*tx1)->result(), (*ty1)->result()});
      Expected<std::vector<Tensor>> moved = interpret(perm, {xf, (*want)[0]});
      ASSERT_TRUE(moved) << moved.error().message();
      const Tensor &x = (*moved)[0];
      ConvCase cl = c;
      cl.x = permuted(c.x, toLast);
      std::string what = fmt::format("channels_last {}{} * i8{} group {}", dtypeName(tx),
                                     extentsStr(cl.x), extentsStr(c.w), c.group);
      Node *n = nullptr;
      // ConvCase::x is only the input's extents here: the attributes do not depend on it.
      auto last = convGraph(cl, x, w, zx, zw, &n, /*channelsLast=*/true);
      ASSERT_TRUE(last);
      Expected<std::vector<Tensor>> got = interpret(*last, {x});
      ASSERT_TRUE(got) << what << ": " << got.error().message();
      expectSame((*got)[0], (*moved)[1], what + " in the interpreter");
      checkNode(*n, {x}, what);
      checkOnTargets(*last, x, what);
    }
}

TEST(ConvInteger, LongSumsWrapLikeTheInterpreter) {
  // 255 * -128 over 70000 taps (7000 channels of 10) is below INT32_MIN: the i32 sum wraps.
  ConvCase c{{1, 7000, 1, 12}, {2, 7000, 1, 10}, {}, {}, {}, 1};
  Tensor x = Tensor::zeros(DType::U8, c.x), w = Tensor::zeros(DType::I8, c.w);
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<uint8_t>()[i] = 255;
  for (int64_t i = 0; i < w.numElements(); ++i)
    w.data<int8_t>()[i] = static_cast<int8_t>(i % 2 ? -128 : 127);
  auto g = convGraph(c, x, w, Tensor(), Tensor());
  ASSERT_TRUE(g);
  Expected<std::vector<Tensor>> want = interpret(*g, {x});
  ASSERT_TRUE(want);
  int64_t wide = 0;
  for (int64_t i = 0; i < 70000; ++i)
    wide += 255 * (i % 2 ? -128 : 127);
  EXPECT_EQ((*want)[0].data<int32_t>()[0], static_cast<int32_t>(static_cast<uint32_t>(wide)));
  checkOnTargets(*g, x, "70000 taps");
}

TEST(ConvInteger, BadOperandsAreErrors) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::U8, {Dim(1), Dim(4), Dim(5), Dim(5)}));
  Value *w = constantValue(g, Tensor::zeros(DType::I8, {6, 4, 3, 3}));
  ConvCase c;
  c.x = {1, 4, 5, 5};
  c.w = {6, 4, 3, 3};
  auto expectError = [&](std::vector<Value *> ops, const std::string &text) {
    Expected<Node *> n = g.createInferred(OpKind::ConvInteger, ops, convAttrs(c), "n");
    ASSERT_FALSE(n) << text;
    EXPECT_NE(n.error().message().find(text), std::string::npos) << n.error().message();
  };
  expectError({x, w, constantValue(g, Tensor::zeros(DType::U8, {4}))}, "scalar or hold one value");
  expectError({x, w, constantValue(g, Tensor::zeros(DType::I8, {}))}, "dtype i8, expected u8");
  expectError({x, w, nullptr, constantValue(g, Tensor::zeros(DType::I8, {5}))},
              "one value per output channel");
  expectError({x, constantValue(g, Tensor::zeros(DType::F32, {6, 4, 3, 3}))}, "u8 or i8");
  expectError({x, constantValue(g, Tensor::zeros(DType::I8, {6, 3, 3, 3}))}, "input channels");
  // Column sums (operand 4) belong to a weight that pack-gemm-weights packed.
  expectError({x, w, nullptr, nullptr, constantValue(g, Tensor::zeros(DType::I32, {6}))},
              "operand 4 (the weight's column sums) i32[6] needs an i8 weight of one matrix "
              "packed with packed_m");
}

TEST(ConvInteger, RequantizedConvIsOneKernel) {
  // conv_integer, then cast to f32, a per-channel scale, a bias, relu, a residual (a u8
  // input dequantized) and quantize to u8, or the f32 values themselves: one fusion group
  // anchored on the conv, one kernel, the same bytes as the interpreter's (the epilogue's
  // float steps are the members' own, in order), on one and two threads, beside the
  // transposes at the graph's edges (the default pipeline runs the conv channels last). The
  // im2col tiles and the channels-last depthwise template store the group's result
  // themselves. 40 output channels: a whole panel and a narrower one (the tiles run row
  // tiles outside the panels where the weight fits in L1, and the 81 positions leave a
  // partial row tile).
  std::mt19937 rng(49);
  for (int64_t group : {1, 8})
    for (int64_t outC : {16, 40})
      for (DType tx : {DType::U8, DType::I8})
        for (bool quantized : {true, false}) {
          if (group == 8 && outC != 16)
            continue;
          ConvCase c{{1, 8, 9, 9}, {outC, 8 / group, 3, 3}, {}, {1, 1, 1, 1}, {}, group};
          if (group == 8)
            c.w = {8, 1, 3, 3};
          Tensor x = bytes(tx, c.x, rng), w = bytes(DType::I8, c.w, rng);
          int64_t m = c.w[0];
          auto g = convGraph(c, x, w, scalarOf(tx, tx == DType::U8 ? 128 : -3),
                             bytes(DType::I8, {m}, rng));
          ASSERT_TRUE(g);
          Value *acc = g->outputs()[0];
          auto make = [&](OpKind k, std::vector<Value *> ops, AttrMap a = {}) {
            Expected<Node *> n = g->createInferred(k, ops, a);
            EXPECT_TRUE(n) << n.error().message();
            return (*n)->result();
          };
          auto scalarF32 = [&](float v) {
            Tensor t = Tensor::zeros(DType::F32, {});
            t.data<float>()[0] = v;
            return constantValue(*g, t);
          };
          Tensor scale = randomTensor(DType::F32, {m, 1, 1}, rng, 1e-4, 1e-3);
          Tensor bias = randomTensor(DType::F32, {m, 1, 1}, rng, -2, 2);
          Value *y = make(OpKind::Cast, {acc}, {{"to", DType::F32}});
          y = make(OpKind::Mul, {y, constantValue(*g, scale)});
          y = make(OpKind::Add, {y, constantValue(*g, bias)});
          y = make(OpKind::Max, {y, constantValue(*g, Tensor::zeros(DType::F32, {}))});
          std::vector<Tensor> inputs{x};
          if (quantized) {
            Extents re = *staticExtents(acc->shape());
            Value *r = g->addInput("r", TensorType(DType::U8, shapeFromExtents(re)));
            inputs.push_back(bytes(DType::U8, re, rng));
            y = make(OpKind::Add,
                     {y, make(OpKind::Dequantize,
                              {r, scalarF32(0.02f), constantValue(*g, scalarOf(DType::U8, 7))},
                              {{"to", DType::F32}})});
            y = make(OpKind::Quantize,
                     {y, scalarF32(0.05f), constantValue(*g, scalarOf(DType::U8, 3))});
          }
          g->setOutputs({y});
          for (int threads : {1, 2})
            checkIntegerGroup(*g, inputs,
                              fmt::format("{} conv group {}, {} channels{}, {} thread(s)",
                                          dtypeName(tx), group, outC,
                                          quantized ? " requantized" : " dequantized", threads),
                              threads, /*atStores=*/true);
        }
}

// The blocked channel layout (layout-nchwc): conv_nchwc and the layout transforms against the
// interpreter on the untransformed graph, over many conv configurations (strides, pads,
// dilations, auto_pad, groups, depthwise, odd channel counts, batch > 1), through the
// default pipeline (fusion included) and the CPU executable.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "TestTarget.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

PassContext::Evaluator interp() {
  return [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
}

/// The default pipeline with layout-nchwc at block `b`, without the winograd pass (which
/// would take the 3x3 stride-1 convs here off the conv_nchwc path; WinogradTest covers it).
PassPipeline pipelineWithBlock(int b) {
  std::string p = PassPipeline::defaultPipeline().str();
  size_t wino = p.find("winograd,");
  EXPECT_NE(wino, std::string::npos) << p;
  if (wino != std::string::npos)
    p.erase(wino, std::string("winograd,").size());
  size_t at = p.find("layout-nchwc");
  EXPECT_NE(at, std::string::npos) << p;
  p.insert(at + std::string("layout-nchwc").size(), fmt::format("{{block={},min-fill=0}}", b));
  Expected<PassPipeline> pp = PassPipeline::parse(p);
  EXPECT_TRUE(pp) << pp.error().message();
  return *pp;
}

std::string denseRandom(const std::vector<int64_t> &e, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  int64_t n = 1;
  std::string dims;
  for (int64_t d : e) {
    n *= d;
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  }
  std::string vals;
  for (int64_t i = 0; i < n; ++i)
    vals += (i ? ", " : "") + fmt::format("{:.6f}", u(rng));
  return fmt::format("constant {{value = dense<f32[{0}]>[{1}]}} : f32[{0}]", dims, vals);
}

Tensor randomInput(const Value &v, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::zeros(v.dtype(), *staticExtents(v.shape()));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

int countKind(const Graph &g, OpKind k) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->kind() == k;
  return n;
}

struct Counts {
  int convs = 0, blockedConvs = 0, toBlocked = 0, fromBlocked = 0;
};

/// Gives every conv_nchwc_cpu problem one config (which lowering applies where it is valid).
class FixedConvConfig : public tuning::ConfigSource {
public:
  explicit FixedConvConfig(tuning::Config c) : c_(std::move(c)) {}
  std::optional<tuning::Config> lookup(const tuning::Problem &p) const override {
    if (p.kind != "conv_nchwc_cpu")
      return std::nullopt;
    return c_;
  }

private:
  tuning::Config c_;
};

/// Runs the pipeline (layout at block `b`) on `text`'s graph; checks the interpreter on the
/// transformed graph and the CPU executable against the interpreter on the original. `tuning`
/// (optional) chooses the compiled kernels' configs; `kernels` (optional) receives them.
Counts checkLayout(const std::string &text, int b,
                   std::shared_ptr<const tuning::ConfigSource> tuning = nullptr,
                   std::vector<kir::Kernel> *kernels = nullptr) {
  SCOPED_TRACE(text);
  Expected<std::unique_ptr<Graph>> ref = parseGraph(text);
  EXPECT_TRUE(ref) << ref.error().message();
  if (!ref)
    return {};
  std::unique_ptr<Graph> opt = (*ref)->clone();
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = interp();
  Error e = pipelineWithBlock(b).run(*opt, ctx);
  EXPECT_FALSE(e) << e.message();
  Counts c{countKind(*opt, OpKind::Conv), countKind(*opt, OpKind::ConvNCHWc),
           countKind(*opt, OpKind::ToNCHWc), countKind(*opt, OpKind::FromNCHWc)};
  // Weights are packed at compile time.
  EXPECT_EQ(countKind(*opt, OpKind::PackConvWeight), 0);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < (*ref)->inputs().size(); ++i)
    inputs.push_back(randomInput(*(*ref)->inputs()[i], 11 + static_cast<unsigned>(i)));
  Expected<std::vector<Tensor>> want = interpret(**ref, inputs);
  EXPECT_TRUE(want) << want.error().message();
  Expected<std::vector<Tensor>> viaInterp = interpret(*opt, inputs);
  EXPECT_TRUE(viaInterp) << viaInterp.error().message();
  CpuOptions co(testenv::testCpu());
  co.tuning = std::move(tuning);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*opt, co);
  EXPECT_TRUE(exe) << exe.error().message();
  if (!want || !viaInterp || !exe)
    return c;
  if (kernels)
    *kernels = (*exe)->kernels();
  Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
  EXPECT_TRUE(got) << got.error().message();
  if (!got)
    return c;
  for (const std::vector<Tensor> *res : {&*viaInterp, &*got})
    for (size_t k = 0; k < want->size(); ++k) {
      const Tensor &w = (*want)[k], &r = (*res)[k];
      EXPECT_EQ(w.extents(), r.extents());
      if (w.extents() != r.extents())
        continue;
      int bad = 0;
      for (int64_t i = 0; i < w.numElements(); ++i) {
        double a = w.elementAsDouble(i), v = r.elementAsDouble(i);
        if (!(std::fabs(a - v) <= 1e-4 + 1e-3 * std::fabs(a)) && bad++ < 3)
          ADD_FAILURE() << (res == &*got ? "cpu" : "interp") << " output " << k << " element "
                        << i << ": " << v << " but expected " << a;
      }
    }
  return c;
}

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
  bool bias;
  std::string autoPad; ///< empty: none
};

std::string convGraph(const ConvCase &k, int64_t oh, int64_t ow) {
  std::string attrs = fmt::format("dilations = [{}], group = {}, pads = [{}], strides = [{}]",
                                  fmt::join(k.dilations, ", "), k.group, fmt::join(k.pads, ", "),
                                  fmt::join(k.strides, ", "));
  if (!k.autoPad.empty())
    attrs = fmt::format("auto_pad = \"{}\", ", k.autoPad) + attrs;
  return fmt::format(R"(
graph @conv(%x: f32[{0},{1},{2},{3}]) -> (f32[{0},{4},{5},{6}]) {{
  %w = {7}
  %b = {8}
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %y = conv(%x, %w{9}) {{{10}}} : f32[{0},{4},{5},{6}]
  %r = max(%y, %zero) : f32[{0},{4},{5},{6}]
  return %r
}})",
                     k.n, k.c, k.h, k.w, k.m, oh, ow,
                     denseRandom({k.m, k.c / k.group, k.kh, k.kw}, 3), denseRandom({k.m}, 5),
                     k.bias ? ", %b" : "", attrs);
}

int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
  return (in + p0 + p1 - (k - 1) * d - 1) / s + 1;
}

TEST(LayoutTest, ConvConfigurationsMatchInterpreter) {
  const ConvCase cases[] = {
      // plain input (3 < block channels), 3x3 pad 1, bias
      {1, 3, 9, 11, 10, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
      // blocked, stride 2, batch 2, channels a multiple of the block
      {2, 16, 9, 10, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
      // odd channel counts on both sides (padded lanes), 1x1, no bias
      {1, 13, 5, 7, 7, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false, ""},
      // dilation 2, asymmetric pads, rectangular kernel
      {1, 10, 8, 9, 9, 3, 2, {1, 2}, {0, 1, 2, 0}, {2, 2}, 1, true, ""},
      // depthwise, stride 2
      {2, 12, 7, 9, 12, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 12, true, ""},
      // grouped, per-group channels multiples of the block
      {1, 16, 6, 6, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true, ""},
      // a kernel wider than the input (no interior columns)
      {1, 9, 3, 2, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
      // 7x7 stride 2 pad 3 on a plain input (a ResNet stem)
      {1, 3, 16, 16, 8, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, true, ""},
      // a wide row: edge tiles, a loop of interior tiles, several output blocks per tile
      {1, 16, 4, 40, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
      // dilation 2 with pads 2: two guarded columns on each side, a narrower last tile
      {1, 8, 5, 23, 64, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, false, ""},
      // 4 groups of 16 output channels: tiles may pair blocks of one group, never two groups
      {1, 32, 3, 17, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, true, ""},
      // groups of 4 channels (half a block of 8), reading the channels they write: regrouped
      // into one group per block, stride 2
      {1, 24, 7, 9, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6, true, ""},
      // the same with channels that end inside a block (20 on blocks of 8): the last block
      // holds one old group beside padding lanes
      {1, 20, 7, 9, 20, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 5, true, ""},
      // odd output block counts (13, 5): tiles of several blocks and an edge tile of the
      // rest, pointwise on a 7x7 map and 3x3 with guarded edge columns
      {1, 16, 7, 7, 104, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, ""},
      {2, 8, 6, 13, 40, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
  };
  for (const ConvCase &k : cases) {
    int64_t oh = outSize(k.h, k.kh, k.strides[0], k.pads[0], k.pads[2], k.dilations[0]);
    int64_t ow = outSize(k.w, k.kw, k.strides[1], k.pads[1], k.pads[3], k.dilations[1]);
    Counts c = checkLayout(convGraph(k, oh, ow), 8);
    EXPECT_EQ(c.blockedConvs, 1);
    EXPECT_EQ(c.convs, 0);
    EXPECT_EQ(c.fromBlocked, 1);
    EXPECT_EQ(c.toBlocked, k.c < 8 && k.group == 1 ? 0 : 1);
  }
  // auto_pad SAME_UPPER, 5x5 on 6x9 (block 16 too)
  ConvCase same{1, 20, 6, 9, 17, 5, 5, {1, 1}, {}, {1, 1}, 1, true, "SAME_UPPER"};
  for (int b : {8, 16}) {
    Counts c = checkLayout(convGraph(same, 6, 9), b);
    EXPECT_EQ(c.blockedConvs, 1);
  }
  // Block 16 (the AVX-512 register tiles): a wide row with two and four blocks per tile,
  // 7 blocks (112 channels) as tiles of several and an edge tile, and groups of 8 channels
  // regrouped into blocks of 16, the last holding one group beside padding (RegNet-Y-400MF's
  // 104 channels: 24 here).
  for (ConvCase wide :
       {ConvCase{1, 16, 3, 61, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
        ConvCase{1, 32, 5, 7, 128, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
        ConvCase{1, 32, 5, 9, 112, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
        ConvCase{1, 24, 6, 7, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true, ""}}) {
    Counts c = checkLayout(convGraph(wide, wide.h, wide.w), 16);
    EXPECT_EQ(c.blockedConvs, 1);
  }
}

/// The scratch buffers of the executable's conv_nchwc kernel (partial sums between passes).
int convScratchBuffers(const std::vector<kir::Kernel> &ks) {
  int n = 0;
  for (const kir::Kernel &k : ks)
    if (k.name.find("conv_nchwc") != std::string::npos)
      for (const kir::BufferDecl &d : k.buffers)
        n += d.role == kir::BufferRole::Scratch;
  return n;
}

TEST(LayoutTest, ConvPassesAndTilesMatchInterpreter) {
  // Configs the tuner may pick, forced on convs whose shapes exercise them: the reduction
  // over input blocks in passes of kc blocks (a shorter last pass; a fused residual add that
  // must apply once, after the last), tiles of 3 and 5 blocks (groups of 3 and 5 blocks),
  // and edge tiles whose kernel columns split into runs (1x7 pad 3, dilation, stride). Every
  // config splits the reduction, so its scratch buffer for partial sums shows that lowering
  // applied it (an invalid config would fall back to the default silently).
  struct Forced {
    ConvCase conv;
    tuning::Config config;
  };
  const Forced cases[] = {
      // pointwise, 9 input blocks as passes of 4, 4 and 1
      {{1, 72, 5, 6, 24, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, ""},
       {{"m", 2}, {"r", 6}, {"kc", 4}}},
      // 1x7 pad 3 on 17 columns: edge tiles of runs; 3 input blocks one per pass
      {{1, 24, 3, 17, 24, 1, 7, {1, 1}, {0, 3, 0, 3}, {1, 1}, 1, true, ""},
       {{"m", 3}, {"r", 4}, {"kc", 1}}},
      // 7x1 pad 3: rows outside the input skipped in every pass
      {{1, 16, 9, 5, 16, 7, 1, {1, 1}, {3, 0, 3, 0}, {1, 1}, 1, true, ""},
       {{"m", 2}, {"r", 5}, {"kc", 1}}},
      // groups of 3 blocks (24 channels): tiles of the whole group, passes of 2 + 1 blocks
      {{1, 48, 6, 9, 48, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true, ""},
       {{"m", 3}, {"r", 4}, {"kc", 2}}},
      // groups of 5 blocks, stride 2 pad 1, passes of 3 + 2 blocks
      {{1, 80, 7, 11, 80, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true, ""},
       {{"m", 5}, {"r", 2}, {"kc", 3}}},
      // dilation 2, pads 2 and 3, stride 2 on columns: runs of taps per edge column
      {{1, 16, 6, 19, 16, 3, 5, {1, 2}, {2, 3, 2, 3}, {2, 2}, 1, false, ""},
       {{"m", 1}, {"r", 6}, {"kc", 1}}},
      // tiles of 4 blocks x 3 columns and 6 x 2 (fewer columns than blocks: one weight vector
      // live at a time beside the columns' broadcasts), edge columns, 7 and 6 blocks
      {{1, 16, 5, 11, 56, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
       {{"m", 4}, {"r", 3}, {"kc", 1}}},
      {{1, 24, 4, 9, 48, 3, 3, {2, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
       {{"m", 6}, {"r", 2}, {"kc", 2}}},
      // a plain input (3 channels) in passes of one channel, 7x7 stride 2 pad 3
      {{1, 3, 13, 13, 8, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, true, ""},
       {{"m", 1}, {"r", 4}, {"kc", 1}}},
  };
  for (const Forced &f : cases) {
    const ConvCase &k = f.conv;
    int64_t oh = outSize(k.h, k.kh, k.strides[0], k.pads[0], k.pads[2], k.dilations[0]);
    int64_t ow = outSize(k.w, k.kw, k.strides[1], k.pads[1], k.pads[3], k.dilations[1]);
    std::vector<kir::Kernel> ks;
    Counts c =
        checkLayout(convGraph(k, oh, ow), 8, std::make_shared<FixedConvConfig>(f.config), &ks);
    EXPECT_EQ(c.blockedConvs, 1);
    EXPECT_EQ(convScratchBuffers(ks), 1) << convGraph(k, oh, ow);
  }
  // A residual add and relu fused after a conv in passes: the epilogue reads the residual once,
  // after the last pass (the partial sums never pass through it).
  std::string residual = fmt::format(R"(
graph @res(%x: f32[1,40,4,7], %s: f32[1,16,4,7]) -> (f32[1,16,4,7]) {{
  %w = {}
  %y = conv(%x, %w) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,16,4,7]
  %a = add(%y, %s) : f32[1,16,4,7]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %r = max(%a, %zero) : f32[1,16,4,7]
  return %r
}})",
                                     denseRandom({16, 40, 3, 3}, 7));
  std::vector<kir::Kernel> ks;
  checkLayout(residual, 8,
              std::make_shared<FixedConvConfig>(tuning::Config{{"m", 2}, {"r", 3}, {"kc", 2}}),
              &ks);
  EXPECT_EQ(convScratchBuffers(ks), 1);
}

TEST(LayoutTest, EpilogueAtTheTileStores) {
  // The blocked conv's template applies a fused residual add and relu where its register
  // tiles store the outputs: no pass over the result follows the conv's loops.
  std::string text = fmt::format(R"(
graph @g(%x: f32[1,16,5,6]) -> (f32[1,16,5,6]) {{
  %v = {}
  %w = {}
  %s = conv(%x, %v) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,16,5,6]
  %y = conv(%s, %w) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,16,5,6]
  %a = add(%y, %s) : f32[1,16,5,6]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %r = max(%a, %zero) : f32[1,16,5,6]
  return %r
}})",
                                 denseRandom({16, 16, 1, 1}, 4), denseRandom({16, 16, 3, 3}, 5));
  std::vector<kir::Kernel> ks;
  Counts c = checkLayout(text, 8, nullptr, &ks);
  EXPECT_EQ(c.blockedConvs, 2);
  int fused = 0;
  for (const kir::Kernel &k : ks) {
    if (k.name.find("conv_nchwc_fused") == std::string::npos)
      continue;
    ++fused;
    std::string printed = kir::printKernel(k);
    EXPECT_NE(printed.find("var fz"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("for fz_r"), std::string::npos) << printed;
  }
  EXPECT_EQ(fused, 1);
}

TEST(LayoutTest, FusedEpilogueFinishesConvTilesInPlace) {
  // A residual add and relu fused into conv tiles of 2 blocks x 6 columns (the residual is the
  // first conv's result, blocked as the second's): each tile is a ConvTile statement writing
  // the result (one shared microkernel per shape), and the epilogue finishes the stored sums
  // in place in a loop per tile, not one store per element (96 per tile for the scalar tiles
  // this replaced). checkLayout compares the results with the interpreter's.
  std::string residual =
      fmt::format(R"(
graph @res(%x: f32[1,32,6,14]) -> (f32[1,32,6,14]) {{
  %w = {}
  %v = {}
  %s = conv(%x, %v) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,32,6,14]
  %y = conv(%s, %w) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,32,6,14]
  %a = add(%y, %s) : f32[1,32,6,14]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %r = max(%a, %zero) : f32[1,32,6,14]
  return %r
}})",
                  denseRandom({32, 32, 1, 1}, 9), denseRandom({32, 32, 1, 1}, 10));
  std::vector<kir::Kernel> ks;
  checkLayout(residual, 8,
              std::make_shared<FixedConvConfig>(tuning::Config{{"m", 2}, {"r", 6}, {"kc", 0}}),
              &ks);
  int64_t stores = 0, tiles = 0, tilesOfShape = 0;
  std::function<void(const kir::Stmt &, int)> walk = [&](const kir::Stmt &st, int result) {
    if (!st)
      return;
    if (st->kind == kir::StmtKind::Store && st->buffer == result)
      ++stores;
    if (st->kind == kir::StmtKind::ConvTile && st->buffer == result) {
      ++tiles;
      tilesOfShape += st->conv.blocks == 2 && st->conv.cols <= 6;
    }
    for (const kir::Stmt &c : st->body)
      walk(c, result);
  };
  std::string names;
  for (const kir::Kernel &k : ks) {
    names += k.name + " ";
    if (k.name.find("conv_nchwc_fused") != std::string::npos)
      for (size_t b = 0; b < k.buffers.size(); ++b)
        if (k.buffers[b].role == kir::BufferRole::Result)
          walk(k.body, static_cast<int>(b));
  }
  EXPECT_GE(tiles, 1) << names;
  EXPECT_EQ(tilesOfShape, tiles) << names;
  EXPECT_GE(stores, 1) << names;
  EXPECT_LE(stores, tiles) << names;
}

TEST(LayoutTest, ConvTilesSumInRunsOfAtMost32Products) {
  // The conv tiles' partial sums (ConvTileShape::sumEvery, in input blocks): runs of whole
  // blocks, at most 32 products but one block at the least. At block 8: a stem-like plain
  // 7x7 conv over 3 channels runs one channel at a time (49 products, not one chain of 147),
  // a 3x3 conv one block (72), a 1x1 conv four blocks (32). checkLayout compares the results
  // with the interpreter's.
  std::string text = fmt::format(R"(
graph @runs(%x: f32[1,3,20,20], %y: f32[1,32,10,10], %z: f32[1,64,10,10]) -> (f32[1,32,10,10], f32[1,64,10,10], f32[1,64,10,10]) {{
  %w1 = {}
  %w2 = {}
  %w3 = {}
  %a = conv(%x, %w1) {{dilations = [1, 1], group = 1, pads = [3, 3, 3, 3], strides = [2, 2]}} : f32[1,32,10,10]
  %b = conv(%y, %w2) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,64,10,10]
  %c = conv(%z, %w3) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,64,10,10]
  return %a, %b, %c
}})",
                                 denseRandom({32, 3, 7, 7}, 21), denseRandom({64, 32, 3, 3}, 22),
                                 denseRandom({64, 64, 1, 1}, 23));
  std::vector<kir::Kernel> ks;
  checkLayout(text, 8, nullptr, &ks);
  // The products per input block of each tile (its weight's block stride over the lanes)
  // and the runs of its tiles.
  std::map<int64_t, std::set<int64_t>> runs;
  std::function<void(const kir::Stmt &)> walk = [&](const kir::Stmt &st) {
    if (!st)
      return;
    if (st->kind == kir::StmtKind::ConvTile)
      runs[st->conv.ws[0] / st->conv.lanes].insert(st->conv.sumEvery);
    for (const kir::Stmt &c : st->body)
      walk(c);
  };
  for (const kir::Kernel &k : ks)
    walk(k.body);
  std::map<int64_t, std::set<int64_t>> want{{49, {1}}, {72, {1}}, {8, {4}}};
  EXPECT_EQ(runs, want);
}

TEST(LayoutTest, ConvRowsPrefetchTheNextGroupsWeights) {
  // A conv of several groups of output blocks prefetches, per row and pass, a share of the
  // next group's weights (its first row would wait on them from memory); a one-pass 1x1
  // conv over many input blocks would issue hundreds at a row's start and does not, nor does
  // a conv of one group. checkLayout compares the results with the interpreter's.
  struct Case {
    ConvCase conv;
    int64_t oh, ow;
    tuning::Config cfg;
    bool prefetches;
  };
  const Case cases[] = {
      {{1, 64, 7, 7, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
       7, 7, {{"m", 2}, {"r", 7}, {"kc", 1}}, true},
      {{1, 1024, 4, 4, 64, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false, ""},
       2, 2, {{"m", 2}, {"r", 2}, {"kc", 0}}, false},
      {{1, 64, 7, 7, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""},
       7, 7, {{"m", 2}, {"r", 7}, {"kc", 1}}, false},
  };
  for (const Case &c : cases) {
    std::vector<kir::Kernel> ks;
    checkLayout(convGraph(c.conv, c.oh, c.ow), 16, std::make_shared<FixedConvConfig>(c.cfg),
                &ks);
    int64_t prefetches = 0;
    std::function<void(const kir::Stmt &, int)> walk = [&](const kir::Stmt &st, int w) {
      if (!st)
        return;
      prefetches += st->kind == kir::StmtKind::Prefetch && st->buffer == w;
      for (const kir::Stmt &ch : st->body)
        walk(ch, w);
    };
    for (const kir::Kernel &k : ks)
      if (k.name.find("conv_nchwc") != std::string::npos)
        for (size_t b = 0; b < k.buffers.size(); ++b)
          if (k.buffers[b].role == kir::BufferRole::Operand && k.buffers[b].index == 1)
            walk(k.body, static_cast<int>(b));
    EXPECT_EQ(prefetches > 0, c.prefetches)
        << c.conv.c << " -> " << c.conv.m << " channels, " << c.conv.kh << "x" << c.conv.kw;
  }
}

TEST(LayoutTest, WholeBlockTransformsAreTiledTransposes) {
  // to_nchwc of 32 channels (whole blocks of 8 and of 16) is a transpose of [C/b, b, H*W]
  // into [C/b, H*W, b]: tiled (split and reordered loops, which LLVM transposes in
  // registers); 20 channels (a partial block, zero lanes) keep the per-element copy.
  for (auto [channels, block, tiled] :
       {std::tuple<int64_t, int, bool>{32, 8, true}, {32, 16, true}, {20, 8, false}}) {
    ConvCase k{1, channels, 6, 9, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, ""};
    std::vector<kir::Kernel> ks;
    checkLayout(convGraph(k, 6, 9), block, nullptr, &ks);
    int found = 0;
    for (const kir::Kernel &kn : ks)
      if (kn.name.find("to_nchwc") != std::string::npos) {
        ++found;
        bool reordered = false;
        for (const kir::ScheduleStep &st : kn.schedule.steps)
          reordered |= st.kind == kir::ScheduleStep::Reorder;
        EXPECT_EQ(reordered, tiled) << channels << " channels, block " << block << "\n"
                                    << kir::printKernel(kn);
      }
    EXPECT_EQ(found, 1) << channels << " channels, block " << block;
  }
}

TEST(LayoutTest, BlockedOutputPermutedToChannelsLastIsAffine) {
  // ConvNeXt's block: a blocked conv's result permuted to NHWC. The fused from_nchwc +
  // transpose reads channel c at (c / b, c % b): its channel loop becomes two loops, c / b
  // and c % b, and the index math affine (no division left), the block lanes innermost.
  for (int block : {8, 16}) {
    std::string text = fmt::format(R"(
graph @g(%x: f32[1,16,6,9]) -> (f32[1,6,9,32]) {{
  %w = {}
  %a = conv(%x, %w) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,32,6,9]
  %t = transpose(%a) {{perm = [0, 2, 3, 1]}} : f32[1,6,9,32]
  return %t
}})",
                                   denseRandom({32, 16, 3, 3}, 7));
    std::vector<kir::Kernel> ks;
    Counts c = checkLayout(text, block, nullptr, &ks);
    EXPECT_EQ(c.blockedConvs, 1);
    int found = 0;
    for (const kir::Kernel &kn : ks) {
      std::string printed = kir::printKernel(kn);
      if (printed.find("from_nchwc") == std::string::npos &&
          kn.name.find("transpose") == std::string::npos)
        continue;
      ++found;
      EXPECT_EQ(printed.find(fmt::format(" / {})", block)), std::string::npos) << printed;
      EXPECT_EQ(printed.find(fmt::format(" % {})", block)), std::string::npos) << printed;
      EXPECT_NE(printed.find(fmt::format("in 0..{} {{", block)), std::string::npos) << printed;
    }
    EXPECT_EQ(found, 1) << "block " << block;
  }
}

TEST(LayoutTest, GroupedConvWithUnalignedGroupsStays) {
  ConvCase k{1, 9, 5, 5, 6, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true, ""};
  Counts c = checkLayout(convGraph(k, 5, 5), 8);
  EXPECT_EQ(c.blockedConvs, 0);
  EXPECT_EQ(c.convs, 1);
}

TEST(LayoutTest, ResidualBlockStaysBlocked) {
  // conv, relu, conv, per-channel scale, residual add, max_pool, global mean: one transform
  // in (odd channels: 12 on block 8) and one out; the transforms between the convs cancel.
  std::string text = fmt::format(R"(
graph @block(%x: f32[2,12,8,8]) -> (f32[2,12,1,1]) {{
  %w1 = {}
  %w2 = {}
  %s = {}
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %a = conv(%x, %w1) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[2,12,8,8]
  %r = max(%a, %zero) : f32[2,12,8,8]
  %b = conv(%r, %w2) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[2,12,8,8]
  %m = mul(%b, %s) : f32[2,12,8,8]
  %t = add(%m, %r) : f32[2,12,8,8]
  %p = max_pool(%t) {{ceil_mode = 0, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}} : f32[2,12,4,4]
  %g = reduce_mean(%p) {{axes = [2, 3], keepdims = 1}} : f32[2,12,1,1]
  return %g
}})",
                                 denseRandom({12, 12, 3, 3}, 1), denseRandom({12, 12, 3, 3}, 2),
                                 denseRandom({12, 1, 1}, 4));
  Counts c = checkLayout(text, 8);
  EXPECT_EQ(c.blockedConvs, 2);
  EXPECT_EQ(c.toBlocked, 1);
  EXPECT_EQ(c.fromBlocked, 1);
}

TEST(LayoutTest, SqueezeExcitationStaysBlocked) {
  // An MBConv's squeeze-excitation on a batch of 2: conv + SiLU, global mean, two 1x1 convs,
  // sigmoid, and the scale [2, 12, 1, 1] broadcast over the activation [2, 12, 6, 6], then a
  // projection conv. The broadcast multiply runs blocked, so the only transforms left are the
  // input's and the output's.
  std::string text = fmt::format(R"(
graph @se(%x: f32[2,12,6,6]) -> (f32[2,12,6,6]) {{
  %w1 = {}
  %wr = {}
  %we = {}
  %w2 = {}
  %a = conv(%x, %w1) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[2,12,6,6]
  %sa = sigmoid(%a) : f32[2,12,6,6]
  %y = mul(%a, %sa) : f32[2,12,6,6]
  %g = reduce_mean(%y) {{axes = [2, 3], keepdims = 1}} : f32[2,12,1,1]
  %r = conv(%g, %wr) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[2,3,1,1]
  %e = conv(%r, %we) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[2,12,1,1]
  %s = sigmoid(%e) : f32[2,12,1,1]
  %z = mul(%s, %y) : f32[2,12,6,6]
  %o = conv(%z, %w2) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[2,12,6,6]
  return %o
}})",
                                 denseRandom({12, 12, 3, 3}, 5), denseRandom({3, 12, 1, 1}, 6),
                                 denseRandom({12, 3, 1, 1}, 7), denseRandom({12, 12, 1, 1}, 8));
  Counts c = checkLayout(text, 8);
  EXPECT_EQ(c.blockedConvs, 4);
  EXPECT_EQ(c.convs, 0);
  // Before the broadcast multiply ran blocked, z went out and back in (one more of each).
  EXPECT_EQ(c.toBlocked, 1);
  EXPECT_EQ(c.fromBlocked, 1);
}

} // namespace

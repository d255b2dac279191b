// Lowerers of the blocked channel layout: to_nchwc, from_nchwc, pack_conv_weight (index
// copies) and conv_nchwc, a register-blocked direct conv over [N, Cb, H, W, b] activations.
//
// Algorithm (conv_nchwc): one flat parallel loop runs over (image, group of M output channel
// blocks, output row). The row is cut into register tiles of R columns x M blocks x b lanes of
// accumulators (in vector registers; M and R come from a cost model of one multiply-add
// step, chooseConvTile). Each tile is a ConvTile statement, which the LLVM backend emits as one
// explicit-vector microkernel per tile shape (ConvNchwcTile.h, EmitConvTile.cpp). A tile loops
// over the input channel blocks of its group,
// the kernel rows (skipped when outside the input) and columns and the b input lanes; each
// step loads M vectors of b packed weights w[ob, icb, kh, kw, ci, 0..b) and one input value
// per column, and does R x M x b multiply-adds. Tiles whose taps all lie inside the input run
// in a loop; the edge tiles have constant first columns, and their kernel columns split into
// runs where the same tile columns read inside the input (those alone multiply: no guards).
// The reduction over input blocks may run in passes (the `kc` knob), each over the row's
// tiles, so that a tile's weights for one pass stay in L1 and the pass's input blocks do not
// crowd the few L1 sets their stride maps them to; partial sums wait in scratch.
// Depthwise convs (in_block 1, group = channels) multiply lane j of the input by lane j of
// the weight; a plain [N, C, H, W] input (in_block 1, group 1) is read directly.
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "ConvNchwcTile.h"
#include "Epilogue.h"
#include "Lowerers.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

/// A copy kernel over the result's extents reading `src(idx)` (null: 0 when `valid(idx)` is
/// false).
Kernels copyKernel(const Node &node, const std::string &prefix,
                   const std::function<Expr(const std::vector<Expr> &)> &src,
                   const std::function<Expr(const std::vector<Expr> &)> &valid) {
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  Extents out = extentsOf(node.result());
  std::vector<int64_t> os = stridesOf(out);
  DType t = kb.bufferType(ob);
  std::vector<std::string> loops;
  Stmt body = kb.loopNest(
      out,
      [&](const std::vector<Expr> &idx) {
        Expr at = flatIndex(idx, os);
        Expr ok = valid ? valid(idx) : nullptr;
        if (!ok)
          return kb.store(ob, at, kb.load(xb, src(idx)));
        return kir::ifThen(ok, kb.store(ob, at, kb.load(xb, src(idx))),
                           kb.store(ob, at, kir::constant(0, t)));
      },
      &loops);
  return Kernels{kb.finish(body, defaultSchedule(loops, out, /*vectorize=*/false))};
}

/// A whole number of blocks: [O, C, P] and [O, C/b, P, b] (O the dims before the channel
/// axis, P those after it) are transposes of each other's [O, C/b, b, P] view, copied in
/// tiles transposed in registers, as a permutation is (a per-element copy strided through one
/// side by b touches a new cache line for nearly every element on that side).
std::optional<Kernels> blockTranspose(const Node &node, const std::string &prefix,
                                      const Extents &plain, int64_t axis, int64_t b,
                                      bool toBlocked) {
  if (b < 2 || plain[axis] % b != 0)
    return std::nullopt;
  int64_t o = 1, p = 1;
  for (int64_t d = 0; d < axis; ++d)
    o *= plain[d];
  for (size_t d = axis + 1; d < plain.size(); ++d)
    p *= plain[d];
  int64_t cb = plain[axis] / b;
  if (toBlocked)
    return permuteKernel(node, prefix, {o, cb, b, p}, {0, 1, 3, 2});
  return permuteKernel(node, prefix, {o, cb, p, b}, {0, 1, 3, 2});
}

Expected<Kernels> lowerToNCHWc(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t axis = node.getInt("axis", 1), b = node.getInt("block", 1), c = in[axis];
  if (std::optional<Kernels> ks = blockTranspose(node, prefix, in, axis, b, true))
    return *ks;
  std::vector<int64_t> is = stridesOf(in);
  auto channel = [&](const std::vector<Expr> &idx) {
    return kir::add(kir::mul(idx[axis], i64(b)), idx.back());
  };
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src(idx.begin(), idx.end() - 1);
        src[axis] = kir::min(channel(idx), i64(c - 1));
        return flatIndex(src, is);
      },
      [&](const std::vector<Expr> &idx) -> Expr {
        return c % b == 0 ? nullptr : kir::lt(channel(idx), i64(c));
      });
}

Expected<Kernels> lowerFromNCHWc(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t axis = node.getInt("axis", 1), b = in.back();
  if (std::optional<Kernels> ks =
          blockTranspose(node, prefix, extentsOf(node.result(0)), axis, b, false))
    return *ks;
  std::vector<int64_t> is = stridesOf(in);
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src = idx;
        src[axis] = kir::div(idx[axis], i64(b));
        src.push_back(kir::mod(idx[axis], i64(b)));
        return flatIndex(src, is);
      },
      nullptr);
}

Expected<Kernels> lowerPackConvWeight(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t bi = node.getInt("in_block", 1), bo = node.getInt("out_block", 1);
  std::vector<int64_t> is = stridesOf(in);
  size_t r = in.size();
  auto chan = [&](const std::vector<Expr> &idx, size_t d, int64_t blk, size_t lane) {
    return kir::add(kir::mul(idx[d], i64(blk)), idx[lane]);
  };
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src(idx.begin(), idx.begin() + r);
        src[0] = kir::min(chan(idx, 0, bo, r + 1), i64(in[0] - 1));
        src[1] = kir::min(chan(idx, 1, bi, r), i64(in[1] - 1));
        return flatIndex(src, is);
      },
      [&](const std::vector<Expr> &idx) -> Expr {
        return kir::land(kir::lt(chan(idx, 0, bo, r + 1), i64(in[0])),
                         kir::lt(chan(idx, 1, bi, r), i64(in[1])));
      });
}

/// Positions of one output row of a conv_nchwc.
struct RowGeometry {
  WindowAxis h, w;
  int64_t lo = 0, hi = 0; ///< Interior output columns [lo, hi): every tap inside the input.
};

/// The register tile of a conv_nchwc: `blocks` output channel blocks x up to `positions`
/// output columns, in `tiles` tiles per row.
struct ConvTile {
  int64_t blocks = 1, positions = 1, tiles = 1;
  double cost = 0; ///< The model's cycles for one input lane of the row.
};

int64_t convTileMaxColumns(int64_t m, int64_t regs);

/// Cycles of one multiply-add step of a tile of m blocks x r columns (chooseConvTile's model).
double convStepCycles(int64_t m, int64_t r) {
  return std::max({double(r * m) / 2, double(m + r) / 2, 4.0});
}

/// The widest single-block tile: 14 columns (the AVX-512 cap; on AVX2, 14 accumulators, one
/// weight and one broadcast fill the 16 registers).
constexpr int64_t kConvTileMaxSingleColumns = 14;

struct ColumnTiles {
  int64_t width = 1, tiles = 1;
};

/// The tile width (at most rmax) whose tiles cost least for a row of ow columns of one block,
/// by convStepCycles; ties go to wider tiles (fewer of them).
ColumnTiles bestSingleBlockColumns(int64_t ow, int64_t rmax) {
  ColumnTiles best;
  double bestCost = -1;
  for (int64_t r = std::max<int64_t>(1, std::min(rmax, ow)); r >= 1; --r) {
    int64_t tiles = (ow + r - 1) / r;
    double cost = double(tiles) * convStepCycles(1, r);
    if (bestCost < 0 || cost < bestCost - 1e-9) {
      bestCost = cost;
      best = {r, tiles};
    }
  }
  return best;
}

/// Whether m output blocks may share a register tile: all of them (an ungrouped conv, whose
/// last tile of a row may hold fewer), or m dividing a group's blocks (a tile never spans
/// two groups, whose inputs differ).
bool blocksShareTile(int64_t m, int64_t mb, int64_t groupBlocks) {
  return groupBlocks == mb || groupBlocks % m == 0;
}

/// The block counts of the register tiles chooseConvTile weighs: 1 to 4 for an ungrouped conv
/// (`groupBlocks` == mb; a row's last tile takes the remaining blocks), else the divisors
/// of a group's blocks up to 8 (a tile never spans two groups). RegNet's groups of 24 channels
/// are 3 blocks of 8 lanes: tiles of one block, 6 accumulators and 7 loads per 6 multiply-adds,
/// are bound by their loads; tiles of 3 blocks x 4 columns hold 12 accumulators for 7 loads.
std::vector<int64_t> convTileBlockCounts(int64_t mb, int64_t groupBlocks) {
  std::vector<int64_t> v;
  int64_t most = groupBlocks == mb ? 4 : std::min<int64_t>(groupBlocks, 8);
  for (int64_t m = 1; m <= most; ++m)
    if (blocksShareTile(m, mb, groupBlocks))
      v.push_back(m);
  return v;
}

/// Whether one image's input (`inBytes`) exceeds half of L2: the parallel loop runs each group
/// of tile blocks over all rows, so such an input streams from L3 once per group
/// (chooseConvTile's ties then go to more blocks).
bool convInputBeyondL2(int64_t inBytes, const CpuTarget &cpu) {
  return inBytes > cpu.l2Bytes / 2;
}

/// The cache line of every x86-64 implementation.
constexpr int64_t kCacheLineBytes = 64;

/// The most cache lines of the next group's weights a conv row prefetches per pass
/// (lowerConvNCHWc).
constexpr int64_t kWeightPrefetchLines = 128;

/// The columns of a tile of several blocks come in multiples of this count: tiles whose
/// columns advance over whole cache lines of the input (`columnStepBytes`: the input bytes
/// one output column advances, a block's lanes times the stride), or 1 when a column already
/// takes whole lines (16-lane blocks) or a line holds no whole number of them. A tile of 3
/// columns of 8 floats (96 bytes) shares a line of every input block with the next tile, and
/// that line must then stay in L1 across the tile's whole pass over its input blocks, while
/// the pass's other input streams and its weights compete for the same sets (the blocks of a
/// 56x56 map are 98 KiB apart, so their streams fall in few sets). That is the likely cause,
/// not a verified one (no hardware counters were available where it was measured). On
/// AVX2 (32 KiB L1d) ResNeXt-50's and ResNet-50's convs measured faster with this rule as a
/// whole, though ResNet-50's 64-channel 1x1 convs, now 4 x 2, measured a little slower
/// (bench/results/measurements-behind-defaults.md).
int64_t convTileLineColumns(int64_t columnStepBytes) {
  if (columnStepBytes <= 0 || columnStepBytes >= kCacheLineBytes ||
      kCacheLineBytes % columnStepBytes != 0)
    return 1;
  return kCacheLineBytes / columnStepBytes;
}

/// Chooses the register tile of a row of `ow` columns and `mb` output blocks from a model of
/// one multiply-add step (one input lane): R*M vector FMAs at two per cycle, M weight vector
/// loads plus R broadcasts at two per cycle, and at least the FMA latency (4 cycles) per
/// accumulator chain. `regs` block-wide vector registers hold the accumulators, a step's
/// weights and the broadcast (convTileMaxColumns); tiles hold convTileBlockCounts blocks
/// (`groupBlocks` output blocks per group); the weights of a tile's blocks, reread for every
/// row, must stay in L2. Tiles that may hold several blocks take whole cache lines of input
/// columns (`lineColumns`, convTileLineColumns): m 4 x r 2 or m 2 x r 6 rather than 4 x 3 on
/// AVX2, the same cycles per multiply-add by the model.
/// Ties go to fewer blocks, unless one image's input exceeds half of L2 (`inputBeyondL2`): the
/// parallel loop runs each group of tile blocks over all rows, so the input then streams from
/// L3 once per group, and ties go to more blocks (EfficientNetV2-S's 192-to-48-channel 1x1
/// convs on 96x96 maps, 7 MiB of input: m 3 x r 4 against m 2 x r 6, fewer passes over the
/// input).
/// When m does not divide the block count, the last tile takes the
/// remaining blocks (RegNet's 13 and 55 blocks as tiles of 2 and one of 1: fewer broadcasts
/// per multiply-add than single-block tiles everywhere).
/// When one block per tile is the only choice (one output block, or groups of one block), its
/// tiles take any width the registers allow, the cheapest by the same model (ties to fewer
/// tiles): a 7x7 map's 49 columns as 5 tiles of 10 rather than 9 of 6, whose 6 accumulator
/// chains cannot cover the FMA latency (the tuner agreed on RegNet-Y-400MF's 440-channel
/// pointwise convs). That holds for 3x3 group convs of one block per group too, now that
/// edge tiles run without guards: tiles of 14 columns rather than 5-6 (the tuner, too, found
/// widths of 11-14 faster for ResNeXt-50's layer 1-2 group convs).
ConvTile chooseConvTile(int64_t ow, int64_t mb, int64_t regs, int64_t maxPositions,
                        int64_t lineColumns, int64_t weightBytesPerBlock, int64_t l2Bytes,
                        int64_t groupBlocks, bool inputBeyondL2) {
  std::vector<int64_t> counts = convTileBlockCounts(mb, groupBlocks);
  // m blocks per tile; when m does not divide mb, the last tile of each row takes the
  // remaining mb % m blocks (an edge group of the same columns).
  auto admissible = [&](int64_t m, int64_t rmax) {
    return m <= mb && rmax >= 1 && (m == 1 || m * weightBytesPerBlock <= l2Bytes * 3 / 4);
  };
  // Single-block tiles widen only where no multi-block tile is possible: where both are, the
  // wide single-block tile ties the model and measured slower (RegNet's stride-2 projections:
  // m 1 x r 14 against m 2 x r 6).
  bool onlySingle = true;
  for (int64_t m : counts)
    onlySingle = onlySingle &&
                 (m == 1 || !admissible(m, std::min(convTileMaxColumns(m, regs), maxPositions)));
  ConvTile best;
  double bestCost = -1;
  for (int64_t m : counts) {
    bool single = m == 1 && onlySingle;
    int64_t rmax = single ? std::min(convTileMaxColumns(1, regs), kConvTileMaxSingleColumns)
                          : std::min(convTileMaxColumns(m, regs), maxPositions);
    if (!admissible(m, rmax))
      continue;
    int64_t tiles, r;
    if (single) {
      ColumnTiles c = bestSingleBlockColumns(ow, rmax);
      tiles = c.tiles;
      r = c.width;
    } else {
      // Balanced tiles, of whole lines where the registers allow a line's columns.
      bool wholeLines = lineColumns > 1 && rmax >= lineColumns;
      if (wholeLines)
        rmax = rmax / lineColumns * lineColumns;
      tiles = (ow + rmax - 1) / rmax;
      r = (ow + tiles - 1) / tiles;
      if (wholeLines)
        r = std::min(rmax, (r + lineColumns - 1) / lineColumns * lineColumns);
    }
    double cost = double(mb / m) * double(tiles) * convStepCycles(m, r);
    if (mb % m != 0)
      cost += double(tiles) * convStepCycles(mb % m, r);
    // A tile that spans the whole row takes ties to more blocks too: its row cannot widen, so
    // more blocks are the only way to more accumulators per step (7x7 maps: m 3 x r 7 rather
    // than m 2 x r 7; the tuner chose 3 or 4 blocks there, in f32 and bf16).
    bool moreBlocksOnTies = inputBeyondL2 || (tiles == 1 && !single);
    if (bestCost < 0 || cost < bestCost - 1e-9 || (moreBlocksOnTies && cost <= bestCost + 1e-9)) {
      bestCost = cost;
      best = {m, r, tiles, cost};
    }
  }
  return best;
}

/// The target's vector registers counted in block-wide values (a block of b lanes takes
/// ceil(b / f32 lanes) registers).
int64_t convTileRegisters(int64_t b, const CpuTarget &cpu) {
  int64_t perBlock = std::max<int64_t>(1, (b + cpu.f32Lanes() - 1) / cpu.f32Lanes());
  return std::max<int64_t>(1, cpu.vectorRegisters / perBlock);
}

/// The most columns a tile of m blocks may have with `regs` block-wide registers: its m x r
/// accumulators and a step's operands must all stay in registers (one more and LLVM spills
/// accumulators inside the k loop). A step keeps the fewer of its operands live: the m weight
/// vectors and one broadcast at a time (column by column), or the r broadcasts and one weight
/// vector at a time (block by block, when r < m): m + 1 or r + 1 registers. On AVX2, m 4 x r 3
/// takes 16 registers (the tile of MLAS's pointwise and NCHWc conv kernels).
int64_t convTileMaxColumns(int64_t m, int64_t regs) {
  int64_t best = 0;
  for (int64_t r = 1; m * r + std::min(m, r) + 1 <= regs; ++r)
    best = r;
  return best;
}

/// The widest register tile a row may use: 14 columns with 16-lane blocks (AVX-512's 32
/// registers), 6 with 8-lane blocks (a pointwise conv whose tiles can hold only one block may
/// go to 14: chooseConvTile).
int64_t convTileMaxPositions(int64_t b) {
  return b >= 16 ? 14 : 6;
}

/// How many consecutive rows of a pointwise conv run as one row (a divisor of oh): the one
/// whose register tiles cost least per output column by chooseConvTile's model, keeping at
/// least 8 items (rows x tiles' channel groups) for the parallel loop. Ties go to fewer rows.
int64_t convRowsToMerge(int64_t oh, int64_t ow, int64_t images, int64_t mb, int64_t regs,
                        int64_t maxPositions, int64_t lineColumns, int64_t weightBytesPerBlock,
                        int64_t l2Bytes, int64_t groupBlocks, bool inputBeyondL2) {
  int64_t best = 1;
  double bestCost = -1;
  for (int64_t k = 1; k <= oh; ++k) {
    if (oh % k != 0)
      continue;
    ConvTile t = chooseConvTile(ow * k, mb, regs, maxPositions, lineColumns, weightBytesPerBlock,
                                l2Bytes, groupBlocks, inputBeyondL2);
    if (k > 1 && images * ((mb + t.blocks - 1) / t.blocks) * (oh / k) < 8)
      break;
    double cost = t.cost / double(k);
    if (bestCost < 0 || cost < bestCost - 1e-9) {
      bestCost = cost;
      best = k;
    }
  }
  return best;
}

// The tuning problem of a conv_nchwc: dims = {output blocks, output columns, block, output
// blocks per group (1 when a group's channels are not whole blocks), depthwise, packed weight
// bytes of one output block, input blocks of a group, bytes of one image's input, input bytes
// one output column advances, bytes from one input block to the next, a strided conv's input
// bytes of one column, images, whether the conv is pointwise (1x1, stride 1, no padding),
// whether its bf16 pairs are kernel columns (bf16_pairs 2)}.
enum ConvDim {
  kMb,
  kOW,
  kBlock,
  kGroupBlocks,
  kDepthwise,
  kWeightBytes,
  kKc,                 ///< the reduction's input blocks (input channels when the input is plain)
  kInBytes,            ///< one image's input
  kColumnStep,         ///< input bytes one output column advances (block lanes x element x stride)
  kBlockStride,        ///< bytes from one input block (or plain channel) to the next
  kStridedColumnBytes, ///< a strided conv's input bytes of one column (block lanes x element),
                       ///< 0 when plain, stride 1 or patch-like (kernel width = stride)
  kImages,
  kPointwise,
  kColumnPairs,
  kConvDims
};

/// Whether a pointwise conv's input streams from memory: the batch's input (`batchInBytes`)
/// is larger than L3, so no cache holds it between its producer and this conv, and each of
/// the conv's passes over a row reads it from memory. Ungrouped convs on blocked f32 inputs
/// (`columnStep`, the bytes from one column to the next, is a block of f32 lanes) only: the
/// others were not measured so.
bool convStreamsInput(bool pointwise, int64_t columnStep, int64_t block, int64_t mb,
                      int64_t groupBlocks, int64_t batchInBytes, const CpuTarget &cpu) {
  return pointwise && columnStep == block * 4 && groupBlocks == mb &&
         batchInBytes > cpu.l3Bytes;
}

/// The tile of a pointwise conv whose input streams from memory (convStreamsInput): all
/// output blocks in one tile up to 4 (each input line is read once per four blocks), as few
/// columns as keep 8 accumulator chains in flight (the FMA latency at two per cycle: 4 x 2,
/// 2 x 4, 1 x 8), and passes of one input block, so that a pass reads one input block's row
/// as a single sequential stream, which the hardware prefetcher follows, while the row's
/// partial sums stay in L1. The cache-resident defaults (14 columns over passes of up to six
/// input blocks, whose rows lie a multiple of 4 KiB apart) ran these convs at half the rate:
/// bench/results/domain-models.md.
tuning::Config streamingConvConfig(int64_t mb, int64_t ow, int64_t kc, int64_t regs) {
  int64_t m = std::min<int64_t>(mb, 4);
  int64_t r = std::min({(8 + m - 1) / m, convTileMaxColumns(m, regs), std::max<int64_t>(ow, 1)});
  return tuning::Config{{"m", m}, {"r", std::max<int64_t>(r, 1)}, {"kc", kc > 1 ? 1 : 0}};
}

/// Values of the `kc` knob: input blocks per pass over a row (0: all of them in one pass).
std::vector<int64_t> convPassBlocks() {
  return {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
}

/// The bytes an L1 data cache's sets span: 64 sets of 64-byte lines in every x86-64 L1d so far
/// (32 KiB of 8 ways, 48 KiB of 12), as a cache indexed within the 4 KiB page must have.
constexpr int64_t kL1SetSpanBytes = 4096;

/// How many input blocks `blockStride` bytes apart a pass may read before their lines crowd
/// the L1 sets they fall in: a tile reads the same columns of every block of its pass, so the
/// pass's blocks share the sets that their stride leaves distinct (all 64 when it is no
/// multiple of a line apart, one when it is a multiple of 4 KiB), and each such set may give
/// half its ways to them (the rest: the pass's weights and the partial sums).
int64_t convAliasingBlocks(int64_t blockStride, int64_t l1Bytes) {
  int64_t sets = kL1SetSpanBytes / kCacheLineBytes;
  if (blockStride > 0) {
    int64_t apart = std::gcd(blockStride % kL1SetSpanBytes == 0 ? kL1SetSpanBytes
                                                                : blockStride % kL1SetSpanBytes,
                             kL1SetSpanBytes);
    if (apart >= kCacheLineBytes)
      sets = kL1SetSpanBytes / apart;
  }
  int64_t ways = std::max<int64_t>(1, l1Bytes / kL1SetSpanBytes);
  return std::max<int64_t>(1, sets * ways / 2);
}

/// Input blocks per pass for tiles of m output blocks: all of them (0) when the pass fits,
/// else the largest count of convPassBlocks that does (at least 1). A pass fits when
///  1. the tile's weights for it take at most half the L1 data cache: a tile rereads its
///     weights for every column tile of the row, each weight vector serving only r columns
///     (m 4 x r 2 on AVX2: 8 multiply-adds per 4 weight loads), so they must come from L1,
///     not L2 (ResNet-50's, Inception-v3's and RegNet-Y-1.6GF's convs measured faster so).
///     Passes in an eighth of L1 measured better on ResNeXt-50 but split short reductions
///     too: ResNet-50's 3-channel 7x7 stem ran much slower in three passes, each pass
///     storing and reloading the partial sums of its m blocks.
///  2. and its input blocks (`blockStride` bytes apart) do not crowd the L1 sets that their
///     lines share (convAliasingBlocks). A 56x56 map of 8-lane blocks puts them 98 KiB
///     apart, 24.5 x 4 KiB: a column of every block falls in the same 2 of the 64 sets, so a
///     pass of 16 blocks holds 16 lines in the 16 ways of two sets while its weights need
///     them too (16-lane blocks on 56x56, or 8-lane ones on 112x112, share one set).
///     The figures: bench/results/measurements-behind-defaults.md.
/// With `oneTilePerRow` (a 1x1 conv whose row is one tile: 14x14 and 7x7 maps) the first
/// condition is moot: no other tile of the row rereads the weights, and splitting the
/// reduction only adds the partial sums' stores and reloads (bench/results/domain-models.md).
/// `weightBytes` is one output block's packed weights over `kc` input blocks.
int64_t convDefaultPassBlocks(int64_t m, int64_t kc, int64_t weightBytes, int64_t blockStride,
                              int64_t l1Bytes, bool oneTilePerRow) {
  int64_t perBlock = std::max<int64_t>(1, m * weightBytes / std::max<int64_t>(kc, 1));
  int64_t aliasing = convAliasingBlocks(blockStride, l1Bytes);
  auto fits = [&](int64_t blocks) {
    return (oneTilePerRow || blocks * perBlock <= l1Bytes / 2) && blocks <= aliasing;
  };
  if (fits(kc))
    return 0;
  int64_t best = 1;
  for (int64_t v : convPassBlocks())
    if (v >= 1 && v < kc && fits(v))
      best = std::max(best, v);
  return best;
}

/// Candidate tile widths: every count of columns the registers can hold.
std::vector<int64_t> convTileWidths() {
  std::vector<int64_t> v;
  for (int64_t r = 1; r <= 28; ++r)
    v.push_back(r);
  return v;
}

bool convTileValid(const tuning::Config &c, const tuning::Problem &p) {
  if (!tuning::namesEveryKnob(convNchwcCpuSpace(), c) || p.dims.size() != kConvDims)
    return false;
  int64_t m = c.at("m"), r = c.at("r"), kc = c.at("kc");
  // One pass (0), or passes of fewer blocks than the whole reduction.
  if (kc != 0 && (p.dims[kDepthwise] != 0 || kc >= p.dims[kKc]))
    return false;
  if (p.dims[kDepthwise] != 0)
    return m == 1 && r <= std::max<int64_t>(p.dims[kOW], 1);
  return m <= std::max<int64_t>(p.dims[kMb], 1) &&
         blocksShareTile(m, p.dims[kMb], p.dims[kGroupBlocks]) &&
         r <= convTileMaxColumns(m, convTileRegisters(p.dims[kBlock], p.cpu)) &&
         r <= std::max<int64_t>(p.dims[kOW], 1);
}

} // namespace

bool isDepthwiseConvNCHWc(const Node &node) {
  const Value *xv = node.operand(0), *wv = node.operand(1);
  if (!xv || !wv || xv->rank() != 5 || wv->rank() != 6)
    return false;
  Extents ws = extentsOf(wv);
  return ws[4] == 1 && ws[1] == 1 && node.getInt("group", 1) == ws[0] * ws[5];
}

Expected<Kernels> lowerConvNCHWc(const Node &node, const std::string &prefix,
                                 const tuning::LowerOptions *opts) {
  const Value *xv = node.operand(0), *wv = node.operand(1), *biasV = node.operand(2);
  Extents xs = extentsOf(xv), ws = extentsOf(wv), os = extentsOf(node.result());
  DType t = xv->dtype();
  DType acc = accType(t, /*wide=*/false);
  // The layout pass blocks f32 convs only; the ConvTile microkernel is f32's, or with
  // bf16_pairs (--precision bf16) bf16 x and w into f32 sums.
  const bool bf16 = node.getInt("bf16_pairs", 0) != 0;
  // A plain input's kernel columns in pairs (bf16_pairs 2): the kernel is 2 * ws[3] wide.
  const bool columnPairs = node.getInt("bf16_pairs", 0) == 2;
  for (const Value *v : {xv, wv, biasV, static_cast<const Value *>(node.result())}) {
    DType want = bf16 && (v == xv || v == wv) ? DType::BF16 : DType::F32;
    if (v && v->dtype() != want)
      return makeError("conv_nchwc %{}: operand %{} of {}, not {}", node.result()->name(),
                       v->name(), dtypeName(v->dtype()), dtypeName(want));
  }
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, 2));
  RowGeometry g;
  NNC_ASSIGN_OR_RETURN(g.h, windowAxis(node, a, 0, xs[2], ws[2]));
  NNC_ASSIGN_OR_RETURN(g.w, windowAxis(node, a, 1, xs[3], columnPairs ? 2 * ws[3] : ws[3]));
  const WindowAxis &ah = g.h, &aw = g.w;
  int64_t N = xs[0], H = xs[2], W = xs[3], OH = os[2], OW = os[3];
  int64_t Mb = ws[0], Kc = ws[1], KH = ws[2], KW = ws[3], bi = ws[4], b = ws[5];
  int64_t group = node.getInt("group", 1);
  bool plain = xs.size() == 4;
  int64_t Cx = xs[1]; // channels (plain) or channel blocks (blocked) of the input
  bool depthwise = isDepthwiseConvNCHWc(node);
  if (numElementsOf(os) == 0)
    return Kernels{emptyKernel(node, prefix)};
  if (columnPairs && (!plain || aw.padBegin != 0 || ah.padBegin != 0 || aw.dilation != 1))
    return makeError("conv_nchwc %{}: bf16_pairs 2 needs a plain input, no padding and "
                     "dilation 1 along W",
                     node.result()->name());
  // Interior columns: ow*s - p >= 0 and ow*s - p + (KW-1)*d < W (column pairs: the kernel's
  // 2 KW columns).
  g.lo = std::min(OW, (aw.padBegin + aw.stride - 1) / aw.stride);
  int64_t last = W - 1 + aw.padBegin - (columnPairs ? 2 * KW - 1 : (KW - 1) * aw.dilation);
  g.hi = last < 0 ? 0 : std::min(OW, last / aw.stride + 1);
  if (g.hi < g.lo)
    g.hi = g.lo;

  // A pointwise conv (1x1, stride 1, no padding) reads the same flat positions it writes, so
  // k consecutive rows can run as one row of k*OW columns: a 7x7 map then tiles as 49 columns
  // in tiles of 6 instead of 7 in tiles of 4 and 3 (too few accumulators to hide the loads;
  // RegNet's 7x7 stage). k is the divisor of OH that the tile cost model likes best, keeping
  // enough rows for the parallel loop.
  // Output channels per group; the blocks of one tile must share their group's input.
  int64_t mg = Mb * b / group;
  int64_t groupBlocks = group == 1 ? Mb : mg % b == 0 ? mg / b : 1;
  int64_t mergedRows = 1;
  bool pointwise = KH == 1 && KW == 1 && ah.stride == 1 && aw.stride == 1 && ah.padBegin == 0 &&
                   aw.padBegin == 0 && OH == H && OW == W;
  int64_t inBytes = Cx * H * W * (plain ? 1 : b) * int64_t(dtypeSize(t));
  bool inputBeyondL2 = convInputBeyondL2(inBytes, cpuOf(opts));
  // The input's lanes per column (its block; 1 when plain), as bytes one output column advances.
  int64_t columnStep = (plain ? 1 : xs[4]) * int64_t(dtypeSize(t)) * aw.stride;
  int64_t blockStride = H * W * (plain ? 1 : xs[4]) * int64_t(dtypeSize(t));
  if (pointwise && !depthwise)
    mergedRows =
        convRowsToMerge(OH, OW, N, Mb, convTileRegisters(b, cpuOf(opts)), convTileMaxPositions(b),
                        convTileLineColumns(columnStep), Kc * bi * b * int64_t(dtypeSize(t)),
                        cpuOf(opts).l2Bytes, groupBlocks, inputBeyondL2);
  if (mergedRows > 1) {
    OH /= mergedRows;
    H = OH;
    OW *= mergedRows;
    W = OW;
    g.lo = 0;
    g.hi = OW;
  }
  tuning::Problem prob;
  prob.kind = "conv_nchwc_cpu";
  prob.signature = fmt::format(
      "conv_nchwc_cpu {} n{} {}{}x{}x{} k{}x{} s{}x{} d{}x{} p{}x{} o{}x{}x{} g{}{}", dtypeName(t),
      N, plain ? "c" : "cb", Cx, H, W, KH, KW, ah.stride, aw.stride, ah.dilation, aw.dilation,
      ah.padBegin, aw.padBegin, Mb, b, Kc * bi, group, depthwise ? " depthwise" : "");
  if (columnPairs)
    prob.signature += " column-pairs";
  if (mergedRows > 1)
    prob.signature += fmt::format(" rows{}", mergedRows);
  prob.dims = {Mb,
               OW,
               b,
               groupBlocks,
               depthwise ? 1 : 0,
               Kc * KH * KW * bi * b * int64_t(dtypeSize(t)),
               depthwise ? 1 : Kc,
               inBytes,
               columnStep,
               blockStride,
               plain || aw.stride == 1 || KW == aw.stride ? 0 : xs[4] * int64_t(dtypeSize(t)),
               N,
               pointwise ? 1 : 0,
               columnPairs ? 1 : 0};
  prob.flops = 2.0 * double(N * Mb * b * OH * OW * (depthwise ? 1 : Kc * bi) * KH * KW);
  tuning::Config cfg = tuning::chooseConfig(prob, opts);
  ConvTile ct;
  ct.blocks = cfg.at("m");
  ct.positions = std::min(cfg.at("r"), OW);
  ct.tiles = (OW + ct.positions - 1) / ct.positions;
  // Groups of M output blocks; with Mb % M blocks left over, the last group of each row is
  // an edge group of that many (same columns, fewer accumulators).
  const int64_t M = ct.blocks, G = (Mb + M - 1) / M, fullGroups = Mb / M, edgeBlocks = Mb % M;
  // The reduction over input blocks in passes of `perPass` blocks (the last may hold fewer):
  // each pass runs the row's tiles over its blocks, its partial sums waiting in scratch for
  // the next, so that a tile's weights for one pass stay in L1 across the row's tiles.
  const int64_t kcAll = depthwise ? 1 : Kc;
  const int64_t perPass = cfg.at("kc") == 0 ? kcAll : std::min(cfg.at("kc"), kcAll);
  const int64_t passes = (kcAll + perPass - 1) / perPass;

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), wb = kb.operand(1), bb = biasV ? kb.operand(2) : -1, ob = kb.result(0);
  // Partial sums between passes: one slot per (parallel item, tile block, column, lane).
  Epilogue *ep = opts ? opts->epilogue : nullptr;
  // A group whose result is narrower than the sums (a cast to bf16 as its root, for the bf16
  // convs after it) keeps every pass's sums in the scratch, and its epilogue stores the final
  // values from there: the result buffer cannot hold the f32 sums.
  const bool sumsToScratch = ep && dtypeSize(ep->resultType()) < dtypeSize(acc);
  int part = passes > 1 || sumsToScratch ? kb.scratch(0, acc, N * G * OH * M * OW * b) : -1;
  std::vector<Stmt> epHoisted;
  // One flat parallel loop over (image, group of M output blocks, output row).
  Nest outer;
  Expr q = outer.add(kb, N * G * OH, "q");
  Expr n = kir::div(q, i64(G * OH));
  Expr o = kir::mod(kir::div(q, i64(OH)), i64(G));
  Expr oh = kir::mod(q, i64(OH));
  // Output block m of the tile, and the first input block of its group (blocked, not
  // depthwise).
  auto blockOf = [&](int64_t m) { return kir::add(kir::mul(o, i64(M)), i64(m)); };
  Expr icb0 = depthwise || plain
                  ? i64(0)
                  : kir::mul(kir::div(kir::mul(blockOf(0), i64(b)), i64(mg)), i64(Kc));
  bool hAlways = ah.padBegin == 0 && (OH - 1) * ah.stride + (KH - 1) * ah.dilation < H;
  // The tiles are ConvTiles (ConvNchwcTile.h): one shared explicit-vector microkernel per
  // tile shape. A fused epilogue finishes each tile's elements in place after its last pass,
  // while the tile's output and residual lines are in L1 (a pass afterwards would reread the
  // whole result); its scalar inputs are read once, before the kernel's loops.
  std::vector<std::string> laneLoops;
  NchwcTiles tiles{xb, wb, bb, ob, part, plain, depthwise, hAlways, Cx, H, W, OH, OW, Mb,
                   Kc, KH, KW, bi, b, M, ah, aw, q, n, oh, blockOf(0), icb0, bf16, columnPairs,
                   sumsToScratch, &laneLoops, {}};
  std::optional<Epilogue::InPlace> finish;
  std::optional<Epilogue::FromScratch> finishFrom;
  if (ep)
    tiles.epilogueReads = ep->elementInputBuffers(kb);
  if (ep && sumsToScratch)
    finishFrom = ep->fromScratch(kb, N * Mb * OH * OW, b);
  else if (ep)
    finish = ep->inPlace(kb, N * Mb * OH * OW, b);
  // A pass over input blocks [kcBase, kcBase + kcCount) of the group's: the first starts from
  // the bias, the last stores the result (where a fused epilogue applies), the others start
  // from and end in the partial sums' scratch.
  using Pass = NchwcPass;
  // One tile: output columns [ow0, ow0 + R) of row oh x Mt blocks from the group's first.
  // `first` is ow0 when it is a constant (-1 inside a loop of interior tiles); when some of
  // its columns lie outside the interior, its kernel columns split into runs (kwRuns).
  auto tile = [&](Expr ow0, int64_t first, int64_t R, int64_t Mt, const Pass &pass) -> Stmt {
    return nchwcVectorTile(kb, tiles, ow0, first, R, Mt, pass, finish ? &*finish : nullptr,
                           finishFrom ? &*finishFrom : nullptr,
                           epHoisted);
  };
  // The row's tiles of Mt blocks: ct.tiles tiles of ct.positions columns, the last one
  // possibly narrower. Runs of equal, interior tiles become one loop; the others (the edges)
  // are emitted with their constant first column (their taps in runs, see `tile`).
  int64_t R = ct.positions;
  // The next group's weights, prefetched a share per row and pass: a group's weights (a
  // layer-4 3x3 conv's 590 KB for two blocks) come from memory on every run, and without
  // this its first row waits on them, while the later rows find them in L2. Each row of a
  // full group fetches 1/OH of the next group's weights for its pass's input blocks before
  // its tiles. Only bursts of up to kWeightPrefetchLines lines: a one-pass 1x1 conv over 64
  // input blocks would issue hundreds at once, ahead of the tile's own loads, and measured
  // slower so (bench/results/measurements-behind-defaults.md).
  const int64_t tapElems = KH * KW * bi * b;
  const int64_t lineElems = kCacheLineBytes / int64_t(dtypeSize(t));
  auto prefetchNextGroup = [&](int64_t Mt, const Pass &pass) -> std::optional<Stmt> {
    if (depthwise || Mt != M || G < 2)
      return std::nullopt;
    int64_t share = (pass.kcCount * tapElems + OH - 1) / OH;
    int64_t lines = (share + lineElems - 1) / lineElems;
    if (lines * M > kWeightPrefetchLines)
      return std::nullopt;
    std::string mv = kb.freshName("pm"), lv = kb.freshName("pl");
    Expr blk = kir::add(kir::mul(kir::add(o, i64(1)), i64(M)), kir::var(mv));
    Expr at = kir::add(
        kir::add(kir::mul(kir::add(kir::mul(blk, i64(Kc)), pass.kcBase), i64(tapElems)),
                 kir::mul(oh, i64(share))),
        kir::mul(kir::var(lv), i64(lineElems)));
    return kir::forLoop(mv, i64(M), kir::forLoop(lv, i64(lines), kir::prefetch(wb, at)));
  };
  auto rowOf = [&](int64_t Mt, const Pass &pass) {
    std::vector<Stmt> row;
    if (std::optional<Stmt> pf = prefetchNextGroup(Mt, pass))
      row.push_back(*pf);
    for (int64_t i = 0; i < ct.tiles;) {
      int64_t first = i * R, width = std::min(R, OW - first);
      auto interior = [&](int64_t k) {
        int64_t f = k * R;
        return f >= g.lo && f + R <= g.hi && f + R <= OW;
      };
      int64_t j = i;
      while (j < ct.tiles && interior(j))
        ++j;
      if (j - i >= 2) {
        std::string v = kb.freshName("t");
        row.push_back(kir::forLoop(
            v, i64(j - i),
            tile(kir::add(i64(first), kir::mul(kir::var(v), i64(R))), -1, R, Mt, pass)));
        i = j;
        continue;
      }
      row.push_back(tile(i64(first), first, width, Mt, pass));
      ++i;
    }
    return kir::block(row);
  };
  // The row's passes: the first, a loop over the middle ones, the last.
  auto passesOf = [&](int64_t Mt) {
    if (passes == 1)
      return rowOf(Mt, Pass{i64(0), kcAll, true, true});
    std::vector<Stmt> ps{rowOf(Mt, Pass{i64(0), perPass, true, false})};
    if (passes > 2) {
      std::string v = kb.freshName("p");
      Expr base = kir::mul(kir::add(kir::var(v), i64(1)), i64(perPass));
      ps.push_back(kir::forLoop(v, i64(passes - 2), rowOf(Mt, Pass{base, perPass, false, false})));
    }
    int64_t lastBase = (passes - 1) * perPass;
    ps.push_back(rowOf(Mt, Pass{i64(lastBase), kcAll - lastBase, false, true}));
    return kir::block(ps);
  };
  Stmt body = edgeBlocks == 0
                  ? passesOf(M)
                  : kir::ifThen(kir::lt(o, i64(fullGroups)), passesOf(M), passesOf(edgeBlocks));
  int64_t work = N * Mb * b * OH * OW * (depthwise ? 1 : Kc * bi) * KH * KW;
  Stmt kernelBody = outer.wrap(body);
  if (ep) {
    ep->markApplied();
    epHoisted.push_back(kernelBody);
    kernelBody = kir::block(epHoisted);
  }
  // The epilogue's lane loops: vectorized, and independent, so LLVM needs no run-time check
  // of the group's inputs against the result (unmarked, it unrolled them into scalar code
  // whose loads could not pass the previous lane's store, and a residual add and relu took
  // over a quarter of the kernel's time).
  kir::Schedule sched = parallelOuter(outer, work);
  for (const std::string &lanes : laneLoops) {
    sched.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {lanes}});
    sched.steps.push_back({kir::ScheduleStep::Vectorize, lanes, 0, {}});
  }
  kir::Kernel k = kb.finish(kernelBody, std::move(sched));
  k.flops = prob.flops;
  if (bf16)
    k.flopsElems = kir::GemmElems::BF16;
  return Kernels{std::move(k)};
}

const tuning::Space &convNchwcCpuSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "conv_nchwc_cpu";
    // 2: pointwise convs merge rows (their r counts merged columns); 3: the problem says
    // whether the conv is pointwise (wide single-block tiles); 4: m need not divide the
    // output blocks of an ungrouped conv (an edge tile takes the rest), which earlier tuning
    // never measured; 5: the reduction may run in passes (kc), tiles of 3 and 5-8 blocks, wide
    // single-block tiles for any conv whose tiles can hold only one block (the problem no
    // longer says whether it is pointwise)
    s.version = 5;
    s.knobs = {
        {"m", {1, 2, 3, 4, 5, 6, 7, 8}, "output channel blocks of a register tile"},
        {"r", convTileWidths(),
         "output columns of a register tile (the last tile of a row may be narrower)"},
        {"kc", convPassBlocks(),
         "input channel blocks per pass over a row (0: one pass); partial sums between passes "
         "wait in scratch"},
    };
    s.valid = convTileValid;
    s.defaults = [](const tuning::Problem &p) {
      int64_t mb = p.dims[kMb], ow = p.dims[kOW], b = p.dims[kBlock];
      if (p.dims[kDepthwise] != 0) {
        // Depthwise: each column's tap loads its own input vector, so a step is r + 1 loads
        // for r multiply-adds, and r accumulator chains must cover the FMA latency (8 would at
        // 4 cycles and 2 per cycle). Tiles of up to 7 columns, as few as the model allows (7 on
        // 56 columns measured better than 8); 4 columns were latency-bound (ConvNeXt-T's,
        // EfficientNet-B0's and MobileNetV2's depthwise convs measured faster so).
        ColumnTiles c = bestSingleBlockColumns(
            std::max<int64_t>(ow, 1),
            std::min<int64_t>(7, convTileMaxColumns(1, convTileRegisters(b, p.cpu))));
        return tuning::Config{{"m", 1}, {"r", c.width}, {"kc", 0}};
      }
      if (p.dims.size() > kColumnPairs && p.dims[kColumnPairs] != 0) {
        // A stem's kernel-column pairs (3 input channels, 7x7 stride 2, bf16): single-block
        // tiles as wide as a line of the input's 4-byte columns. Tiles of two blocks and more
        // than 10 columns, the general rule's choice, measured far slower than the f32 stem,
        // one block of 13-17 columns the fastest (bench/results/measurements-behind-defaults.md).
        ColumnTiles c = bestSingleBlockColumns(
            std::max<int64_t>(ow, 1),
            std::min<int64_t>(convTileLineColumns(p.dims[kColumnStep]),
                              convTileMaxColumns(1, convTileRegisters(b, p.cpu))));
        return tuning::Config{{"m", 1}, {"r", c.width}, {"kc", 0}};
      }
      if (convStreamsInput(p.dims[kPointwise] != 0, p.dims[kColumnStep], b, mb,
                           p.dims[kGroupBlocks], p.dims[kImages] * p.dims[kInBytes], p.cpu))
        return streamingConvConfig(mb, ow, p.dims[kKc], convTileRegisters(b, p.cpu));
      // A strided conv whose taps leave part of each column's input lines unread (1x1, stride
      // 2) or share them with the next column (3x3, stride 2) also takes its tiles' columns in
      // whole lines of blocks, as a stride-1 conv does (convTileLineColumns): the wider tiles
      // that the model prices the same (4 x 3, 3 x 4 on AVX2) measured slower there. Patch-like
      // convs (kernel width = stride: ConvNeXt's 2x2 downsampling), whose every column reads
      // its lines whole, measured faster with them and keep them
      // (bench/results/measurements-behind-defaults.md).
      int64_t lineStep =
          p.dims[kStridedColumnBytes] > 0 ? p.dims[kStridedColumnBytes] : p.dims[kColumnStep];
      // One tap per input block and output lane pair (a 1x1 conv of any stride: f32 or bf16
      // weights), unlike kPointwise (stride 1, no padding).
      bool oneTap = p.dims[kWeightBytes] <= 4 * std::max<int64_t>(1, p.dims[kKc]) * b * b;
      ConvTile ct =
          chooseConvTile(ow, mb, convTileRegisters(b, p.cpu), convTileMaxPositions(b),
                         convTileLineColumns(lineStep), p.dims[kWeightBytes], p.cpu.l2Bytes,
                         p.dims[kGroupBlocks], convInputBeyondL2(p.dims[kInBytes], p.cpu));
      return tuning::Config{
          {"m", ct.blocks},
          {"r", ct.positions},
          {"kc",
           convDefaultPassBlocks(ct.blocks, p.dims[kKc], p.dims[kWeightBytes], p.dims[kBlockStride],
                                 p.cpu.l1dBytes, ct.tiles == 1 && oneTap)}};
    };
    return s;
  }();
  return space;
}

void registerLayoutLowerers(LowererTable &t) {
  t[OpKind::ToNCHWc] = lowerToNCHWc;
  t[OpKind::FromNCHWc] = lowerFromNCHWc;
  t[OpKind::PackConvWeight] = lowerPackConvWeight;
}

} // namespace nnc::lower

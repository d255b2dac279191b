// conv_integer's CPU template "conv_integer.depthwise_nhwc": a depthwise integer conv (group ==
// C == M) whose activations are channels last (channels_last = 1, layout-nhwc), vectorized
// along the channels, with a fused group's epilogue (the requantization) at its stores.
//
//  1. w - w_zp per channel as i32 [taps, C] (a row of channels per tap; i32, so that each
//     tap's multiply reads it as it is, with no widening per position).
//  2. x - x_zp as i16 [N, padded spatial..., C], the padding explicit (zeros: a padded tap adds
//     nothing, like the interpreter's zero padding of x - x_zp): zeros where the padding is,
//     then x's rows at their padded place (runs that vectorize).
//  3. Per (image, output row) in parallel, per output position: the C channels' sums, each
//     tap one vector of inputs times the tap's row of weights, then the epilogue over the
//     channels (contiguous: the sums, per-channel scales and biases, and a u8 result, all
//     read and written along channels) and the store.
#include "ConvInteger.h"
#include "Epilogue.h"
#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

namespace {

/// The largest number of taps unrolled per vector of channels.
constexpr int64_t kMaxTaps = 64;

} // namespace

bool convIntegerDepthwiseNHWCApplies(const Node &node) {
  Expected<IntConv> f = analyzeConvInteger(node);
  if (!f)
    return false; // the generic lowerer reports why
  const ConvSetup &s = f->s;
  return f->last && s.group > 1 && s.cg == 1 && s.mg == 1 && s.outN > 0 &&
         s.geo.kernelSize <= kMaxTaps;
}

Expected<Kernels> lowerConvIntegerDepthwiseNHWC(const Node &node, const std::string &prefix,
                                                const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(IntConv f, analyzeConvInteger(node));
  const ConvSetup &s = f.s;
  const ConvGeometry &geo = s.geo;
  const size_t D = geo.axes.size();
  const int64_t N = s.N, C = s.C, P = geo.outSize, KS = geo.kernelSize;
  Extents padded = paddedExtents(geo);
  const int64_t PS = numElementsOf(padded);
  std::vector<int64_t> padStride = stridesOf(padded), kStride = stridesOf(geo.kernel),
                       inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial);
  KernelBuilder kb(node, prefix);
  Epilogue *ep = opts ? opts->epilogue : nullptr;
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  const int xb = kb.operand(0), wb = kb.operand(1);
  const int ob = ep ? ep->resultBuffer(kb) : kb.result(0);
  if (ep)
    epIn = ep->inputsOf(kb);
  const int xp = kb.scratch(0, DType::I16, N * PS * C);
  const int wp = kb.scratch(1, DType::I32, KS * C);
  kir::Schedule sched;
  std::vector<Stmt> all;
  const bool big = N * PS * C >= (int64_t(1) << 15);

  // Step 1.
  {
    Nest wn;
    Expr t = wn.add(kb, KS, "wt"), c = wn.add(kb, C, "wc");
    Expr v = kir::sub(kir::cast(kb.load(wb, f.wIndex(c, i64(0), t)), DType::I32),
                  convZeroPoint(kb, f, 3, c));
    all.push_back(
        wn.wrap(kb.store(wp, kir::add(kir::mul(t, i64(C)), c), v)));
  }
  // Step 2.
  {
    // Zeros only where the copy below writes nothing: per padded row (images and the outer
    // axes), its left and right padding, and the whole row where an outer axis is outside
    // the input (zeroing every element first wrote the copy's elements twice, 830 KB per run
    // for MobileNetV2's first depthwise conv).
    Nest zero;
    std::vector<Expr> pos(D);
    Expr zn = zero.add(kb, N, "pn");
    std::vector<Expr> conds;
    for (size_t d = 0; d + 1 < D; ++d) {
      pos[d] = zero.add(kb, padded[d], "pz");
      conds.push_back(inRange(kir::sub(pos[d], i64(geo.axes[d].padBegin)), 0, geo.inSpatial[d]));
    }
    pos[D - 1] = i64(0);
    std::vector<Stmt> row;
    Expr rowAt = kb.bind(
        row, "zr", DType::I64,
        kir::mul(kir::add(kir::mul(zn, i64(PS)), flatIndex(pos, padStride)), i64(C)));
    const auto [left, mid, right] = paddedRowRuns(geo, C);
    auto zeros = [&](int64_t from, int64_t count) {
      std::string jv = kb.freshName("zj");
      return kir::forLoop(jv, i64(count),
                          kb.store(xp, kir::add(rowAt, kir::add(i64(from), kir::var(jv))),
                                   kir::constant(0, DType::I16)));
    };
    if (left > 0)
      row.push_back(zeros(0, left));
    if (!conds.empty() && mid > 0)
      row.push_back(kir::ifThen(kir::op(OpKind::Not, {allOf(conds)}), zeros(left, mid)));
    if (right > 0)
      row.push_back(zeros(left + mid, right));
    all.push_back(zero.wrap(kir::block(row)));
    Nest copy;
    // Images and the first spatial axis as one loop (a parallel share for each thread).
    Expr q = copy.add(kb, N * geo.inSpatial[0], "pq");
    Expr n = kir::div(q, i64(geo.inSpatial[0]));
    std::vector<Expr> in(D), at(D);
    in[0] = kir::mod(q, i64(geo.inSpatial[0]));
    for (size_t d = 1; d < D; ++d)
      in[d] = copy.add(kb, geo.inSpatial[d], "pi");
    for (size_t d = 0; d < D; ++d)
      at[d] = kir::add(in[d], i64(geo.axes[d].padBegin));
    Expr c = copy.add(kb, C, "pc");
    Expr v = kir::sub(kir::cast(kb.load(xb, f.xIndex(n, c, flatIndex(in, inStride))), DType::I32),
                  convZeroPoint(kb, f, 2, i64(0)));
    Expr to = kir::add(
        kir::mul(kir::add(kir::mul(n, i64(PS)), flatIndex(at, padStride)), i64(C)), c);
    all.push_back(copy.wrap(kb.store(xp, to, kir::cast(v, DType::I16))));
    if (big) {
      sched.steps.push_back({kir::ScheduleStep::Parallel, copy.loops[0].first, 0, {}});
    }
  }
  // Step 3: per (image, output row), rows along the last output axis.
  const WindowAxis &aw = geo.axes[D - 1];
  const int64_t OW = aw.out, rowsPer = P / OW;
  Nest outer;
  Expr q = outer.add(kb, N * rowsPer, "q");
  std::vector<Stmt> row;
  Expr n = kb.bind(row, "dn", DType::I64, kir::div(q, i64(rowsPer)));
  Expr r = kb.bind(row, "dr", DType::I64, kir::mod(q, i64(rowsPer)));
  // The row's padded offset (in positions): its outer output coordinates times their strides.
  Expr rowBase = kir::mul(n, i64(PS));
  for (size_t d = 0; d + 1 < D; ++d) {
    Expr o = kir::mod(kir::div(r, i64(outStride[d] / OW)), i64(geo.outSpatial[d]));
    rowBase = kir::add(rowBase, kir::mul(o, i64(geo.axes[d].stride * padStride[d])));
  }
  Expr base = kb.bind(row, "drow", DType::I64, rowBase);
  std::string owv = kb.freshName("ow"), cv = kb.freshName("dc");
  Expr ow = kir::var(owv), c = kir::var(cv);
  std::vector<Stmt> perPos;
  Expr pos = kb.bind(perPos, "dpos", DType::I64, kir::add(kir::mul(r, i64(OW)), ow));
  Expr first = kb.bind(perPos, "dx", DType::I64, kir::add(base, kir::mul(ow, i64(aw.stride))));
  std::string acc = kb.freshName("acc");
  std::vector<Stmt> st{kir::decl(acc, DType::I32, kir::constant(0, DType::I32))};
  for (int64_t t = 0; t < KS; ++t) {
    int64_t off = 0;
    for (size_t d = 0; d < D; ++d)
      off += (t / kStride[d]) % geo.kernel[d] * geo.axes[d].dilation * padStride[d];
    Expr xv = kir::cast(
        kb.load(xp, kir::add(kir::mul(kir::add(first, i64(off)), i64(C)), c)), DType::I32);
    Expr wv = kb.load(wp, kir::add(i64(t * C), c));
    st.push_back(kir::assign(
        acc, kir::op(OpKind::Add, {kir::var(acc, DType::I32), kir::op(OpKind::Mul, {xv, wv})})));
  }
  Expr at = f.yIndex(n, c, pos);
  Expr sum = kir::var(acc, DType::I32);
  if (ep) {
    LoopExtents env{{cv, C}, {pos->name, P}, {n->name, N}};
    st.push_back(kb.store(ob, at, ep->apply(at, sum, env, *epIn, st, epHoisted)));
  } else {
    st.push_back(kb.store(ob, at, sum));
  }
  perPos.push_back(kir::forLoop(cv, i64(C), kir::block(st)));
  row.push_back(kir::forLoop(owv, i64(OW), kir::block(perPos)));
  sched.steps.push_back({kir::ScheduleStep::Vectorize, cv, 0, {}});
  kir::Schedule rs = parallelOuter(outer, N * P * C * KS);
  for (const kir::ScheduleStep &step : rs.steps)
    if (step.kind == kir::ScheduleStep::Parallel)
      sched.steps.push_back(step);
  all.push_back(outer.wrap(kir::block(row)));
  if (ep) {
    ep->markApplied();
    epHoisted.insert(epHoisted.end(), all.begin(), all.end());
    all = std::move(epHoisted);
  }
  return Kernels{kb.finish(kir::block(all), sched)};
}

} // namespace nnc::lower

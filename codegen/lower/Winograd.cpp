// Lowerers of the Winograd conv transforms (winograd_input, winograd_output; the matrices and
// layouts are in include/nnc/ir/Winograd.h), the templates winograd.input_transform and
// winograd.output_transform (Templates.cpp). The matmul between them is the GEMM of Gemm.h.
//
// Algorithm (both ops): one loop nest over images, channel blocks and tiles, whose innermost
// loop runs over the b contiguous channel lanes and is vectorized (the CPU's input transform
// runs its tiles outside the channel blocks when V outgrows the L2: see tileMajor). Per lane
// the body is straight-line code: load the alpha x alpha patch (input) or the alpha^2 products
// (output), multiply by the transform matrices from both sides with their coefficients as
// constants (zero coefficients dropped, +-1 as adds and subtractions), then store. Input
// positions outside x (the padding) read 0 from a clamped address; on the CPU only the
// border's tiles carry those checks, the interior tiles (most of them) are a nest of their own
// that loads in place (36 clamps and selects fewer per tile of F(4x4, 3x3)). The output's edge
// tiles (OH or OW not a multiple of m) are separate loop nests that store only their valid
// rows and columns, so no store carries a guard.
#include <cmath>
#include <optional>

#include "Epilogue.h"
#include "Lowerers.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/ir/Winograd.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

/// sum_s coef[s] * term(s) with constant coefficients (zeros dropped, +-1 without a multiply).
Expr linearCombination(const std::vector<double> &coef, const std::function<Expr(size_t)> &term) {
  Expr sum;
  for (size_t s = 0; s < coef.size(); ++s) {
    double c = coef[s];
    if (c == 0)
      continue;
    Expr t = term(s);
    bool neg = c < 0;
    if (std::fabs(c) != 1)
      t = kir::mul(t, fc(std::fabs(c), DType::F32));
    if (!sum)
      sum = neg ? kir::op(OpKind::Neg, {t}) : t;
    else
      sum = neg ? kir::sub(sum, t) : kir::add(sum, t);
  }
  return sum ? sum : fc(0, DType::F32);
}

/// The flat index of (n, channel block cb, h, w, lane) in an NCHWc tensor of Cb blocks of b
/// lanes over H x W.
Expr nchwcIndex(Expr n, Expr cb, int64_t Cb, Expr h, int64_t H, Expr w, int64_t W, Expr lane,
                int64_t b) {
  Expr plane = kir::add(kir::mul(n, i64(Cb)), cb);
  Expr pos = kir::add(kir::mul(kir::add(kir::mul(plane, i64(H)), h), i64(W)), w);
  return kir::add(kir::mul(pos, i64(b)), lane);
}

/// y[r] = sum_s L[r][s] * x[s] for the rows r of L (rows x q), sharing the work the rows have
/// in common, as the transforms' hand-written kernels do: two rows whose coefficients are equal
/// up to sign (B^T's rows 1, 2 and 3, 4) take the sum E of their equal terms and O of their
/// opposite ones once, y = E + O and y' = E - O; two columns whose coefficients are equal up to
/// sign in every row (A^T's columns 1, 2 and 3, 4) add and subtract their inputs once. The
/// shared values are locals declared in `out`.
std::vector<Expr> transformRows(KernelBuilder &kb, const std::vector<double> &l, int64_t rows,
                                int64_t q, const std::vector<Expr> &x, std::vector<Stmt> &out) {
  auto at = [&](int64_t r, int64_t s) { return l[r * q + s]; };
  auto local = [&](Expr v) {
    std::string name = kb.freshName("w");
    out.push_back(kir::decl(name, DType::F32, v));
    return kir::var(name, DType::F32);
  };
  std::vector<Expr> y(rows);
  std::vector<bool> done(rows, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t r2 = r + 1; r2 < rows && !done[r]; ++r2) {
      bool pair = !done[r2], opposite = false, nonzero = false;
      for (int64_t s = 0; s < q && pair; ++s) {
        pair = std::fabs(at(r, s)) == std::fabs(at(r2, s));
        opposite |= at(r, s) != at(r2, s);
        nonzero |= at(r, s) != 0;
      }
      if (!pair || !opposite || !nonzero)
        continue;
      std::vector<double> even(q, 0.0), odd(q, 0.0);
      for (int64_t s = 0; s < q; ++s)
        (at(r, s) == at(r2, s) ? even : odd)[s] = at(r, s);
      auto term = [&](size_t s) { return x[s]; };
      Expr o = local(linearCombination(odd, term));
      if (std::all_of(even.begin(), even.end(), [](double c) { return c == 0; })) {
        y[r] = o;
        y[r2] = kir::op(OpKind::Neg, {o});
      } else {
        Expr e = local(linearCombination(even, term));
        y[r] = kir::add(e, o);
        y[r2] = kir::sub(e, o);
      }
      done[r] = done[r2] = true;
    }
  // Column pairs among the rows left: partner[s] = s2 when |L[r][s]| == |L[r][s2]| in every
  // such row and some coefficient is not zero.
  std::vector<int64_t> partner(q, -1);
  for (int64_t s = 0; s < q; ++s)
    for (int64_t s2 = s + 1; s2 < q && partner[s] < 0; ++s2) {
      bool pair = partner[s2] < 0, nonzero = false;
      for (int64_t r = 0; r < rows && pair; ++r)
        if (!done[r]) {
          pair = std::fabs(at(r, s)) == std::fabs(at(r, s2));
          nonzero |= at(r, s) != 0;
        }
      if (pair && nonzero)
        partner[s] = s2, partner[s2] = s;
    }
  std::vector<Expr> sums(q), diffs(q);
  for (int64_t r = 0; r < rows; ++r) {
    if (done[r])
      continue;
    // Pairs become one term each: the pair's sum or difference at the first column's index.
    std::vector<double> coef(q, 0.0);
    std::vector<Expr> terms(x);
    for (int64_t s = 0; s < q; ++s) {
      int64_t s2 = partner[s];
      if (s2 < 0) {
        coef[s] = at(r, s);
      } else if (s < s2 && at(r, s) != 0) {
        bool same = at(r, s) == at(r, s2);
        Expr &shared = same ? sums[s] : diffs[s];
        if (!shared)
          shared = local(same ? kir::add(x[s], x[s2]) : kir::sub(x[s], x[s2]));
        coef[s] = at(r, s);
        terms[s] = shared;
      }
    }
    y[r] = linearCombination(coef, [&](size_t s) { return terms[s]; });
  }
  return y;
}

/// Row i of the product t L^T: y[j] = sum_s t[i][s] * L[j][s] for the first `n` rows of L
/// (rows of q), t the locals named in `t` (rows of q).
std::vector<Expr> rightProductRow(KernelBuilder &kb, const std::vector<double> &l, int64_t n,
                                  int64_t q, const std::vector<std::string> &t, int64_t i,
                                  std::vector<Stmt> &out) {
  std::vector<Expr> row(q);
  for (int64_t s = 0; s < q; ++s)
    row[s] = kir::var(t[i * q + s], DType::F32);
  return transformRows(kb, l, n, q, row, out);
}

/// Declares locals r[i][j] = sum_s L[i][s] * x[s][j] for the first `rows` rows of L (rows of
/// q) and returns their names.
std::vector<std::string> leftProduct(KernelBuilder &kb, const std::vector<double> &l, int64_t rows,
                                     int64_t q, int64_t cols, const std::vector<std::string> &x,
                                     std::vector<Stmt> &out) {
  std::vector<std::string> r(rows * cols);
  for (int64_t j = 0; j < cols; ++j) {
    std::vector<Expr> column(q);
    for (int64_t s = 0; s < q; ++s)
      column[s] = kir::var(x[s * cols + j], DType::F32);
    std::vector<Expr> y = transformRows(kb, l, rows, q, column, out);
    for (int64_t i = 0; i < rows; ++i) {
      r[i * cols + j] = kb.freshName("t");
      out.push_back(kir::decl(r[i * cols + j], DType::F32, y[i]));
    }
  }
  return r;
}

} // namespace

Expected<Kernels> lowerWinogradInput(const Node &node, const std::string &prefix, bool peelBorder,
                                     int64_t l2Bytes) {
  Extents xs = extentsOf(node.operand(0));
  const WinogradMatrices &t = winogradMatrices(node.getInt("tile", 0));
  std::vector<int64_t> pads = node.getInts("pads", {});
  int64_t N = xs[0], Cb = xs[1], H = xs[2], W = xs[3], b = xs[4];
  int64_t m = t.m, a = t.alpha;
  int64_t tilesH = (H + pads[0] + pads[2] - 2 + m - 1) / m;
  int64_t tilesW = (W + pads[1] + pads[3] - 2 + m - 1) / m;
  int64_t P = N * tilesH * tilesW, C = Cb * b;
  // V's rows: the P tiles, then zero rows up to `rows` (which keep V's planes apart in cache).
  int64_t R = extentsOf(node.result())[1];
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), vb = kb.result(0);
  if (P == 0 || C == 0)
    return Kernels{emptyKernel(node, prefix)};
  kir::Schedule s;
  // Images and channel blocks outermost (cb runs on the thread pool), shared by every nest of
  // tiles below.
  Nest outer;
  Expr cb = outer.add(kb, Cb, "cb"), n = outer.add(kb, N, "n");
  // The zero rows [P, R) of channels [c0, c0 + width) in every plane, where `first` holds
  // (null: always): the block's lanes once per block (the first image's, or the first tile's
  // when the tiles are loops of `outer`), or every channel in the tile-major order.
  auto zeroRows = [&](Expr first, Expr c0, int64_t width) -> Stmt {
    if (R == P)
      return nullptr;
    Nest z;
    Expr e = z.add(kb, a * a, "e"), r = z.add(kb, R - P, "r");
    std::string cV = kb.freshName("l");
    Expr at = kir::add(kir::mul(kir::add(kir::mul(e, i64(R)), kir::add(r, i64(P))), i64(C)),
                       kir::add(c0, kir::var(cV)));
    s.steps.push_back({kir::ScheduleStep::Vectorize, cV, 0, {}});
    Stmt st = z.wrap(kir::forLoop(cV, i64(width), kb.store(vb, at, fc(0, DType::F32))));
    return first ? kir::ifThen(first, st) : st;
  };
  // The body of tile (th, tw) of image `nv` for channel block `cbv`: a vectorized loop over
  // the block's lanes; `guarded`: some patch position may lie in the padding (it reads 0 from
  // a clamped address), else every load is in place.
  auto tileBody = [&](Expr nv, Expr cbv, Expr th, Expr tw, bool guarded) -> Stmt {
    std::string laneV = kb.freshName("l");
    Expr lane = kir::var(laneV);
    std::vector<Stmt> body;
    // The patch d[u][w] (0 outside the input).
    std::vector<std::string> d(a * a);
    for (int64_t u = 0; u < a; ++u)
      for (int64_t w = 0; w < a; ++w) {
        Expr ih = kir::add(kir::mul(th, i64(m)), i64(u - pads[0]));
        Expr iw = kir::add(kir::mul(tw, i64(m)), i64(w - pads[1]));
        Expr ch = guarded ? kir::min(kir::max(ih, i64(0)), i64(H - 1)) : ih;
        Expr cw = guarded ? kir::min(kir::max(iw, i64(0)), i64(W - 1)) : iw;
        Expr v = kb.load(xb, nchwcIndex(nv, cbv, Cb, ch, H, cw, W, lane, b));
        d[u * a + w] = kb.freshName("d");
        body.push_back(kir::decl(
            d[u * a + w], DType::F32,
            guarded
                ? kir::select(kir::land(inRange(ih, 0, H), inRange(iw, 0, W)), v, fc(0, DType::F32))
                : v));
      }
    // t = B^T d, then V = t B: V[i][j] = sum_s t[i][s] * BT[j][s].
    std::vector<std::string> tt = leftProduct(kb, t.bt, a, a, a, d, body);
    Expr p = kir::add(kir::mul(kir::add(kir::mul(nv, i64(tilesH)), th), i64(tilesW)), tw);
    for (int64_t i = 0; i < a; ++i) {
      std::vector<Expr> vs = rightProductRow(kb, t.bt, a, a, tt, i, body);
      for (int64_t j = 0; j < a; ++j) {
        Expr v = vs[j];
        Expr at = kir::add(kir::mul(kir::add(i64((i * a + j) * R), p), i64(C)),
                           kir::add(kir::mul(cbv, i64(b)), lane));
        body.push_back(kb.store(vb, at, v));
      }
    }
    // Lanes are independent: no run-time overlap checks of x against V per tile (on the
    // CPU's peeled path; a device's nest without peeling keeps its lanes in each work-item).
    if (peelBorder)
      s.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {laneV}});
    s.steps.push_back({kir::ScheduleStep::Vectorize, laneV, 0, {}});
    return kir::forLoop(laneV, i64(b), kir::block(body));
  };
  // The tiles [th0, th0 + nh) x [tw0, tw0 + nw) of the outer loops' image and channel
  // block, their loops added to `inner`: the body inside them (the caller wraps it).
  auto tiles = [&](int64_t th0, int64_t nh, int64_t tw0, int64_t nw, bool guarded,
                   Nest &inner) -> Stmt {
    if (nh <= 0 || nw <= 0)
      return nullptr;
    Expr th = kir::add(inner.add(kb, nh, "th"), i64(th0)),
         tw = kir::add(inner.add(kb, nw, "tw"), i64(tw0));
    return tileBody(n, cb, th, tw, guarded);
  };
  int64_t work = P * C * a * a * 8;
  // Tile-major order (CPU): one loop over the images' tile rows on the thread pool, per row
  // its tiles, per tile every channel block, so each tile writes whole C-float rows of V's
  // planes and the next tile continues them: a^2 sequential streams. In the channel-block
  // order below, each tile writes b lanes (half a 64-byte line for b = 8) of each plane and
  // the line's other half comes a whole pass over the tiles later, so a V larger than the
  // cache takes each line from memory twice. Taken when V outgrows the L2 and the tile rows
  // give the thread pool at least as many iterations as the channel blocks (R(2+1)D-18's
  // input transforms, 8 frames batched by fold-conv-batch-axes, and ResNet-18's measured
  // faster so at 1 and 2 threads).
  bool tileMajor = a * a * R * C * 4 > l2Bytes && N * tilesH >= Cb;
  // Interior tiles, whose patch lies inside x (th*m - pad >= 0 and th*m - pad + a - 1 < H),
  // load in place; the border's tiles around them clamp and select. One guarded nest when
  // there is no interior, or on a device (peelBorder false: there every nest would be a
  // kernel of its own, and a guard costs little), whose loops are all its grid.
  auto interior = [&](int64_t pad, int64_t extent, int64_t count) {
    int64_t lo = (pad + m - 1) / m;
    int64_t hi = extent - a + pad >= 0 ? std::min(count, (extent - a + pad) / m + 1) : 0;
    return std::pair<int64_t, int64_t>{lo, std::max(lo, hi)};
  };
  auto [h0, h1] = interior(pads[0], H, tilesH);
  auto [w0, w1] = interior(pads[1], W, tilesW);
  if (peelBorder && tileMajor) {
    Nest rowsNest;
    Expr row = rowsNest.add(kb, N * tilesH, "row");
    Expr nv = N > 1 ? kir::div(row, i64(tilesH)) : i64(0);
    Expr th = N > 1 ? kir::rem(row, i64(tilesH)) : row;
    auto span = [&](int64_t tw0, int64_t nw, bool guarded) -> Stmt {
      if (nw <= 0)
        return nullptr;
      Nest in;
      Expr tw = kir::add(in.add(kb, nw, "tw"), i64(tw0));
      Expr cbv = in.add(kb, Cb, "cb");
      return in.wrap(tileBody(nv, cbv, th, tw, guarded));
    };
    Stmt body = span(0, tilesW, true);
    if (h1 > h0 && w1 > w0) {
      std::vector<Stmt> spans;
      for (Stmt st : {span(0, w0, true), span(w0, w1 - w0, false), span(w1, tilesW - w1, true)})
        if (st)
          spans.push_back(st);
      body = kir::ifThen(kir::land(kir::ge(th, i64(h0)), kir::lt(th, i64(h1))), kir::block(spans),
                         body);
    }
    std::vector<Stmt> nests{body};
    // Every channel's zero rows, by the first tile row's iteration.
    if (Stmt z = zeroRows(N * tilesH > 1 ? kir::lt(row, i64(1)) : nullptr, i64(0), C))
      nests.push_back(z);
    kir::Schedule sched = parallelOuter(rowsNest, work);
    sched.steps.insert(sched.steps.end(), s.steps.begin(), s.steps.end());
    return Kernels{kb.finish(rowsNest.wrap(kir::block(nests)), sched)};
  }
  if (!peelBorder || h1 <= h0 || w1 <= w0) {
    // The tiles' loops join the outer ones (a device's grid); the first tile of each channel
    // block writes its zero rows.
    Stmt nest = tiles(0, tilesH, 0, tilesW, true, outer);
    Expr first;
    for (size_t l = 1; l < outer.loops.size(); ++l)
      if (!kir::isIntImm(outer.loops[l].second, 1)) {
        Expr at = kir::lt(kir::var(outer.loops[l].first), i64(1));
        first = first ? kir::land(first, at) : at;
      }
    if (Stmt z = zeroRows(first, kir::mul(cb, i64(b)), b))
      nest = kir::block({nest, z});
    kir::Schedule grid = parallelOuter(outer, work);
    grid.steps.insert(grid.steps.end(), s.steps.begin(), s.steps.end());
    return Kernels{kb.finish(outer.wrap(nest), grid)};
  }
  std::vector<Stmt> nests;
  for (auto [th0, nh, tw0, nw, guarded] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, bool>{h0, h1 - h0, w0, w1 - w0, false},
        {0, h0, 0, tilesW, true},
        {h1, tilesH - h1, 0, tilesW, true},
        {h0, h1 - h0, 0, w0, true},
        {h0, h1 - h0, w1, tilesW - w1, true}}) {
    Nest inner;
    if (Stmt st = tiles(th0, nh, tw0, nw, guarded, inner))
      nests.push_back(inner.wrap(st));
  }
  if (Stmt z = zeroRows(N > 1 ? kir::lt(n, i64(1)) : nullptr, kir::mul(cb, i64(b)), b))
    nests.push_back(z);
  kir::Schedule sched = parallelOuter(outer, work);
  sched.steps.insert(sched.steps.end(), s.steps.begin(), s.steps.end());
  return Kernels{kb.finish(outer.wrap(kir::block(nests)), sched)};
}

Expected<Kernels> lowerWinogradOutput(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions &opts) {
  Extents ms = extentsOf(node.operand(0)), os = extentsOf(node.result());
  const WinogradMatrices &t = winogradMatrices(node.getInt("tile", 0));
  int64_t N = os[0], Kb = os[1], H = os[2], W = os[3], b = os[4];
  int64_t m = t.m, a = t.alpha, P = ms[1], K = ms[2];
  int64_t tilesH = (H + m - 1) / m, tilesW = (W + m - 1) / m;
  KernelBuilder kb(node, prefix);
  int mb = kb.operand(0), bb = node.operand(1) ? kb.operand(1) : -1, yb = kb.result(0);
  if (numElementsOf(os) == 0)
    return Kernels{emptyKernel(node, prefix)};
  Nest outer;
  Expr kblk = outer.add(kb, Kb, "kb"), n = outer.add(kb, N, "n");
  std::vector<std::string> lanes;
  // A fused epilogue runs on each output before its store, while the tile is in registers.
  // Its scalar inputs are read once, before the kernel's loops.
  Epilogue *ep = opts.epilogue;
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  if (ep)
    epIn = ep->inputsOf(kb);
  // One region of tiles: `rows` x `cols` valid outputs per tile, tile rows th0 + [0, nth),
  // tile columns tw0 + [0, ntw).
  auto region = [&](int64_t th0, int64_t nth, int64_t rows, int64_t tw0, int64_t ntw,
                    int64_t cols) -> Stmt {
    if (nth == 0 || ntw == 0)
      return nullptr;
    Nest tiles;
    Expr th = kir::add(i64(th0), tiles.add(kb, nth, "th"));
    Expr tw = kir::add(i64(tw0), tiles.add(kb, ntw, "tw"));
    std::string laneV = kb.freshName("l");
    lanes.push_back(laneV);
    Expr lane = kir::var(laneV);
    Expr k = kir::add(kir::mul(kblk, i64(b)), lane);
    Expr p = kir::add(kir::mul(kir::add(kir::mul(n, i64(tilesH)), th), i64(tilesW)), tw);
    std::vector<Stmt> body;
    std::vector<std::string> mm(a * a);
    for (int64_t e = 0; e < a * a; ++e) {
      mm[e] = kb.freshName("m");
      body.push_back(kir::decl(
          mm[e], DType::F32, kb.load(mb, kir::add(kir::mul(kir::add(i64(e * P), p), i64(K)), k))));
    }
    Expr bias = bb >= 0 ? kb.load(bb, k) : nullptr;
    // t = A^T M (only the `rows` valid rows), then Y = t A.
    std::vector<std::string> tt = leftProduct(kb, t.at, rows, a, a, mm, body);
    std::vector<std::pair<Expr, Expr>> outputs;
    for (int64_t u = 0; u < rows; ++u) {
      std::vector<Expr> ys = rightProductRow(kb, t.at, cols, a, tt, u, body);
      for (int64_t w = 0; w < cols; ++w) {
        Expr v = ys[w];
        if (bias)
          v = kir::add(v, bias);
        Expr oh = kir::add(kir::mul(th, i64(m)), i64(u)),
             ow = kir::add(kir::mul(tw, i64(m)), i64(w));
        Expr at = nchwcIndex(n, kblk, Kb, oh, H, ow, W, lane, b);
        if (ep)
          outputs.push_back({at, v});
        else
          body.push_back(kb.store(yb, at, v));
      }
    }
    if (ep)
      ep->storeFinal(yb, outputs, ep->chunkFor(opts.cpu), *epIn, body, epHoisted);
    return tiles.wrap(kir::forLoop(laneV, i64(b), kir::block(body)));
  };
  int64_t fullH = H / m, fullW = W / m, remH = H % m, remW = W % m;
  std::vector<Stmt> regions;
  for (Stmt s : {region(0, fullH, m, 0, fullW, m), region(0, fullH, m, fullW, remW ? 1 : 0, remW),
                 region(fullH, remH ? 1 : 0, remH, 0, fullW, m),
                 region(fullH, remH ? 1 : 0, remH, fullW, remW ? 1 : 0, remW)})
    if (s)
      regions.push_back(s);
  // The lane loops are independent (each lane reads M, the bias and a fused residual only at
  // its own channel): LLVM then needs no run-time check of those against Y on every tile.
  kir::Schedule s = parallelOuter(outer, P * K * a * a * 8);
  for (const std::string &l : lanes) {
    s.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {l}});
    s.steps.push_back({kir::ScheduleStep::Vectorize, l, 0, {}});
  }
  Stmt kernelBody = outer.wrap(kir::block(regions));
  if (ep) {
    ep->markApplied();
    epHoisted.push_back(kernelBody);
    kernelBody = kir::block(epHoisted);
  }
  return Kernels{kb.finish(kernelBody, s)};
}

} // namespace nnc::lower

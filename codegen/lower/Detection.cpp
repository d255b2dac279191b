// Lowerers of the detection ops, with the interpreter's arithmetic
// (runtime/interp/Detection.cpp): roi_align, one kernel over (roi, bin) whose sampling grid
// is a loop of the roi's data-dependent extent, each sample's position and weights computed
// once for all channels (summed in the compute type, the interpreter's in f64);
// non_max_suppression, one serial kernel that per (batch, class) sorts the candidates by
// score (a merge sort), keeps each in turn unless a kept box overlaps it beyond the threshold,
// and writes the kept rows packed with their count as the result's data-dependent extent.
#include <fmt/format.h>

#include "NNLowering.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

Expr D(double v) {
  return fc(v, DType::F64);
}
Expr T(bool v) {
  return kir::intImm(v ? 1 : 0, DType::Bool);
}

Expected<Kernels> lowerRoiAlign(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ye = extentsOf(node.result(0));
  DType t = node.operand(0)->dtype(), ct = computeType(t);
  int64_t n = xe[0], c = xe[1], h = xe[2], w = xe[3], r = ye[0];
  int64_t ph = ye[2], pw = ye[3];
  if (numElementsOf(ye) == 0)
    return Kernels{emptyKernel(node, prefix)};
  int64_t ratio = node.getInt("sampling_ratio", 0);
  double scale = node.getFloat("spatial_scale", 1.0);
  bool avg = node.getString("mode", "avg") == "avg";
  bool halfPixel = node.getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  double offset = halfPixel ? 0.5 : 0.0;

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), rb = kb.operand(1), bb = kb.operand(2), yb = kb.result(0);
  // The sums of every output element in the compute type: element (r, c, oy, ox) is only
  // touched by its bin's iteration, so the bins run independently.
  int accb = kb.scratch(0, ct, numElementsOf(ye));
  Nest outer;
  Expr ri = outer.add(kb, r, "r"), oy = outer.add(kb, ph, "oy"), ox = outer.add(kb, pw, "ox");
  std::vector<Stmt> body;
  auto bind = [&](const char *hint, DType dt, Expr e) { return kb.bind(body, hint, dt, e); };
  // The batch index, checked once per bin as the interpreter checks it per roi.
  Expr b = bind("b", DType::I64, kir::cast(kb.load(bb, ri), DType::I64));
  kir::RuntimeCheck check{node.describe() + ": batch index ",
                          fmt::format(" is out of range for a batch of {}", n)};
  body.push_back(kb.check(bor(kir::lt(b, i64(0)), kir::ge(b, i64(n))), b, std::move(check)));
  Expr bc = bind("b", DType::I64, kir::min(kir::max(b, i64(0)), i64(n - 1)));
  auto roi = [&](int64_t k) {
    return ssub(
        smul(kir::cast(kb.load(rb, kir::add(kir::mul(ri, i64(4)), i64(k))), DType::F64), D(scale)),
        D(offset));
  };
  Expr x0 = bind("x0", DType::F64, roi(0)), y0 = bind("y0", DType::F64, roi(1));
  Expr rw = bind("rw", DType::F64, ssub(roi(2), x0)), rh = bind("rh", DType::F64, ssub(roi(3), y0));
  if (!halfPixel) {
    rw = bind("rw", DType::F64, kir::max(rw, D(1)));
    rh = bind("rh", DType::F64, kir::max(rh, D(1)));
  }
  Expr bh = bind("bh", DType::F64, sdiv(rh, D(double(ph))));
  Expr bw = bind("bw", DType::F64, sdiv(rw, D(double(pw))));
  auto gridOf = [&](const Expr &extent, int64_t bins) -> Expr {
    if (ratio > 0)
      return i64(ratio);
    Expr g = bind("g", DType::F64, kir::op(OpKind::Ceil, {sdiv(extent, D(double(bins)))}));
    // NaN and g < 1 sample nothing; an absurd g is capped (interp gridOf()).
    Expr capped = kir::select(gt(g, D(1e6)), D(1e6), kir::select(kir::ge(g, D(1)), g, D(0)));
    return bind("gn", DType::I64, kir::cast(capped, DType::I64));
  };
  Expr gh = gridOf(rh, ph), gw = gridOf(rw, pw);
  Expr count = bind("cnt", ct, kir::cast(kir::max(kir::mul(gh, gw), i64(1)), ct));
  Expr img = bind("img", DType::I64, kir::mul(bc, i64(c * h * w)));
  auto accAt = [&](const Expr &ch) {
    return kir::add(
        kir::mul(kir::add(kir::mul(kir::add(kir::mul(ri, i64(c)), ch), i64(ph)), oy), i64(pw)), ox);
  };
  {
    std::string ch = kb.freshName("c");
    body.push_back(kir::forLoop(ch, i64(c), kb.store(accb, accAt(kir::var(ch)), fc(0, ct))));
  }
  // Per sample: its position, corners and weights once (f64, the interpreter's operations),
  // then every channel's weighted corners.
  std::string iy = kb.freshName("iy"), ix = kb.freshName("ix");
  std::vector<Stmt> s;
  auto sbind = [&](const char *hint, DType dt, Expr e) { return kb.bind(s, hint, dt, e); };
  Expr yy = sbind("yy", DType::F64,
                  sadd(sadd(y0, smul(kir::cast(oy, DType::F64), bh)),
                       sdiv(smul(sadd(kir::cast(kir::var(iy), DType::F64), D(0.5)), bh),
                            kir::cast(gh, DType::F64))));
  Expr xx = sbind("xx", DType::F64,
                  sadd(sadd(x0, smul(kir::cast(ox, DType::F64), bw)),
                       sdiv(smul(sadd(kir::cast(kir::var(ix), DType::F64), D(0.5)), bw),
                            kir::cast(gw, DType::F64))));
  Expr inside = sbind("in", DType::Bool,
                      bnot(bor(bor(kir::lt(yy, D(-1)), gt(yy, D(double(h)))),
                               bor(kir::lt(xx, D(-1)), gt(xx, D(double(w)))))));
  // Outside samples add 0; clamp them first so every read is in bounds.
  Expr yc = sbind("yc", DType::F64, kir::min(kir::max(yy, D(0)), D(double(h))));
  Expr xc = sbind("xc", DType::F64, kir::min(kir::max(xx, D(0)), D(double(w))));
  Expr ylo = sbind("yl", DType::I64, kir::cast(yc, DType::I64));
  Expr xlo = sbind("xl", DType::I64, kir::cast(xc, DType::I64));
  Expr yEdge = sbind("ye", DType::Bool, kir::ge(ylo, i64(h - 1)));
  Expr xEdge = sbind("xe", DType::Bool, kir::ge(xlo, i64(w - 1)));
  Expr yl = sbind("yl", DType::I64, kir::select(yEdge, i64(h - 1), ylo));
  Expr xl = sbind("xl", DType::I64, kir::select(xEdge, i64(w - 1), xlo));
  Expr yh = sbind("yh", DType::I64, kir::select(yEdge, i64(h - 1), kir::add(ylo, i64(1))));
  Expr xh = sbind("xh", DType::I64, kir::select(xEdge, i64(w - 1), kir::add(xlo, i64(1))));
  Expr ly =
      sbind("ly", DType::F64,
            ssub(kir::select(yEdge, kir::cast(yl, DType::F64), yc), kir::cast(yl, DType::F64)));
  Expr lx =
      sbind("lx", DType::F64,
            ssub(kir::select(xEdge, kir::cast(xl, DType::F64), xc), kir::cast(xl, DType::F64)));
  Expr hy = sbind("hy", DType::F64, ssub(D(1), ly)), hx = sbind("hx", DType::F64, ssub(D(1), lx));
  auto weight = [&](const Expr &wy, const Expr &wx) {
    return sbind("wt", ct, kir::select(inside, kir::cast(smul(wy, wx), ct), fc(0, ct)));
  };
  Expr w1 = weight(hy, hx), w2 = weight(hy, lx), w3 = weight(ly, hx), w4 = weight(ly, lx);
  auto at = [&](const Expr &yi, const Expr &xi) {
    return sbind("o", DType::I64, kir::add(img, kir::add(kir::mul(yi, i64(w)), xi)));
  };
  Expr o1 = at(yl, xl), o2 = at(yl, xh), o3 = at(yh, xl), o4 = at(yh, xh);
  Expr first =
      sbind("first", DType::Bool, kir::land(eq(kir::var(iy), i64(0)), eq(kir::var(ix), i64(0))));
  {
    std::string ch = kb.freshName("c");
    Expr chE = kir::var(ch), plane = kir::mul(chE, i64(h * w));
    auto term = [&](const Expr &wt, const Expr &o) {
      Expr v = kir::cast(kb.load(xb, kir::add(o, plane)), ct);
      return kir::select(inside, kir::mul(wt, v), fc(0, ct));
    };
    Expr v1 = term(w1, o1), v2 = term(w2, o2), v3 = term(w3, o3), v4 = term(w4, o4);
    Expr accE = kb.load(accb, accAt(chE));
    Expr next = avg ? kir::add(accE, kir::add(kir::add(kir::add(v1, v2), v3), v4))
                    : kir::select(first, kir::max(kir::max(v1, v2), kir::max(v3, v4)),
                                  kir::max(accE, kir::max(kir::max(v1, v2), kir::max(v3, v4))));
    s.push_back(kir::forLoop(ch, i64(c), kb.store(accb, accAt(chE), next)));
  }
  body.push_back(kir::forLoop(iy, gh, kir::forLoop(ix, gw, kir::block(s))));
  {
    std::string ch = kb.freshName("c");
    Expr a = kb.load(accb, accAt(kir::var(ch)));
    body.push_back(
        kir::forLoop(ch, i64(c),
                     kb.store(yb, accAt(kir::var(ch)),
                              kir::cast(avg ? kir::op(OpKind::Div, {a, count}) : a, t))));
  }
  Kernels kernels;
  kernels.push_back(
      kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, numElementsOf(ye) * 64)));
  return kernels;
}

Expected<Kernels> lowerNonMaxSuppression(const Node &node, const std::string &prefix) {
  Extents be = extentsOf(node.operand(0)), se = extentsOf(node.operand(1));
  DType ct = computeType(node.operand(0)->dtype());
  int64_t nb = be[0], nbox = be[1], nc = se[1];
  bool center = node.getInt("center_point_box", 0) != 0;
  auto present = [&](size_t i) {
    return i < node.numOperands() && node.operand(i) &&
           numElementsOf(extentsOf(node.operand(i))) > 0;
  };
  // The result holds at most min(max_output_boxes_per_class, boxes) rows per (batch, class).
  int64_t perClass = nbox;
  if (const Tensor *m = present(2) ? node.constantOperand(2) : nullptr)
    perClass = std::max<int64_t>(0, std::min<int64_t>(perClass, m->toInt64Vector()[0]));
  if (!present(2))
    perClass = 0;
  int64_t capacity = std::max<int64_t>(nb * nc * perClass * 3, 1);

  KernelBuilder kb(node, prefix);
  int boxes = kb.operand(0), scores = kb.operand(1);
  auto [out, extent] = kb.dynamicResult(0, capacity);
  int order = kb.scratch(0, DType::I64, std::max<int64_t>(nbox, 1));
  int merged = kb.scratch(2, DType::I64, std::max<int64_t>(nbox, 1));
  // The kept boxes of the current class as columns (x0, y0, x1, y1, area) of nbox each, so
  // that a candidate's test against all of them is one vectorizable loop.
  int kept = kb.scratch(1, ct, 5 * std::max<int64_t>(nbox, 1));
  auto keptAt = [&](int64_t field, const Expr &j) {
    return kir::add(i64(field * std::max<int64_t>(nbox, 1)), j);
  };
  std::vector<Stmt> body;
  auto bind = [&](std::vector<Stmt> &at, const char *hint, DType t, Expr e) {
    return kb.bind(at, hint, t, std::move(e));
  };
  Expr maxOut = present(2)
                    ? bind(body, "maxout", DType::I64,
                           kir::max(kir::cast(kb.load(kb.operand(2), i64(0)), DType::I64), i64(0)))
                    : i64(0);
  Expr iou =
      present(3) ? bind(body, "iou", ct, kir::cast(kb.load(kb.operand(3), i64(0)), ct)) : fc(0, ct);
  Expr scoreThr =
      present(4) ? bind(body, "sthr", ct, kir::cast(kb.load(kb.operand(4), i64(0)), ct)) : Expr();
  std::string total = kb.freshName("total");
  Expr totalE = kir::var(total);
  body.push_back(kir::decl(total, DType::I64, i64(0)));

  std::vector<Stmt> cls; // per (batch, class)
  std::string bv = kb.freshName("b"), cv = kb.freshName("cl");
  Expr b = kir::var(bv), cl = kir::var(cv);
  auto score = [&](const Expr &i) {
    return kir::cast(
        kb.load(scores, kir::add(kir::mul(kir::add(kir::mul(b, i64(nc)), cl), i64(nbox)), i)), ct);
  };
  std::string left = kb.freshName("left"), cnt = kb.freshName("cnt");
  Expr leftE = kir::var(left), cntE = kir::var(cnt);
  cls.push_back(kir::decl(left, DType::I64, i64(0)));
  cls.push_back(kir::decl(cnt, DType::I64, i64(0)));
  {
    // The candidates (past the score threshold) packed into `order`.
    std::string i = kb.freshName("i");
    Expr pass = scoreThr ? gt(score(kir::var(i)), scoreThr) : T(true);
    cls.push_back(
        kir::forLoop(i, i64(nbox),
                     kir::ifThen(pass, kir::block({kb.store(order, leftE, kir::var(i)),
                                                   kir::assign(left, kir::add(leftE, i64(1)))}))));
  }
  // A bottom-up merge sort of the candidates by descending score (NaN first); a stable merge
  // keeps equal scores in ascending box order, the interpreter's order.
  for (int64_t width = 1; width < nbox; width *= 2) {
    std::string blk = kb.freshName("blk"), t = kb.freshName("t"), u = kb.freshName("u");
    std::string li = kb.freshName("li"), ri = kb.freshName("ri");
    Expr lo = kir::mul(kir::var(blk), i64(2 * width));
    std::vector<Stmt> m;
    Expr mid = bind(m, "mid", DType::I64, kir::min(kir::add(lo, i64(width)), leftE));
    Expr hi = bind(m, "hi", DType::I64, kir::min(kir::add(lo, i64(2 * width)), leftE));
    Expr liE = kir::var(li), riE = kir::var(ri);
    m.push_back(kir::decl(li, DType::I64, lo));
    m.push_back(kir::decl(ri, DType::I64, mid));
    std::vector<Stmt> step;
    // A run that is used up reads position hi - 1 instead: entries from `left` on were never
    // written, and a box index read there would address the scores out of bounds.
    Expr last = kir::sub(hi, i64(1));
    Expr lb = bind(step, "lb", DType::I64, kb.load(order, kir::min(liE, last)));
    Expr rb = bind(step, "rb", DType::I64, kb.load(order, kir::min(riE, last)));
    Expr takeRight =
        bind(step, "tr", DType::Bool,
             kir::land(kir::lt(riE, hi), bor(kir::ge(liE, mid), greaterNaN(score(rb), score(lb)))));
    step.push_back(kb.store(merged, kir::add(lo, kir::var(t)), kir::select(takeRight, rb, lb)));
    step.push_back(kir::assign(ri, kir::add(riE, kir::select(takeRight, i64(1), i64(0)))));
    step.push_back(kir::assign(li, kir::add(liE, kir::select(takeRight, i64(0), i64(1)))));
    m.push_back(kir::forLoop(t, kir::sub(hi, lo), kir::block(step)));
    m.push_back(kir::forLoop(
        u, kir::sub(hi, lo),
        kb.store(order, kir::add(lo, kir::var(u)), kb.load(merged, kir::add(lo, kir::var(u))))));
    int64_t blocks = (nbox + 2 * width - 1) / (2 * width);
    cls.push_back(kir::forLoop(blk, i64(blocks), kir::ifThen(kir::lt(lo, leftE), kir::block(m))));
  }
  // The candidates in that order: each kept unless a kept box overlaps it too much.
  std::string pos = kb.freshName("pos");
  std::vector<Stmt> pick;
  Expr bestE = bind(pick, "best", DType::I64, kb.load(order, kir::var(pos)));
  // Box corners of box j of batch b, in the interpreter's order (suppresses()).
  auto corners = [&](std::vector<Stmt> &at, const Expr &j, Expr(&lo)[2], Expr(&hi)[2]) {
    Expr base = kir::mul(kir::add(kir::mul(b, i64(nbox)), j), i64(4));
    Expr v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = bind(at, "bx", ct, kir::cast(kb.load(boxes, kir::add(base, i64(k))), ct));
    if (center) {
      Expr hw = bind(at, "hw", ct, sdiv(v[2], fc(2, ct)));
      Expr hh = bind(at, "hh", ct, sdiv(v[3], fc(2, ct)));
      lo[0] = bind(at, "x0", ct, ssub(v[0], hw));
      hi[0] = bind(at, "x1", ct, sadd(v[0], hw));
      lo[1] = bind(at, "y0", ct, ssub(v[1], hh));
      hi[1] = bind(at, "y1", ct, sadd(v[1], hh));
    } else {
      lo[0] = bind(at, "x0", ct, kir::min(v[1], v[3]));
      hi[0] = bind(at, "x1", ct, kir::max(v[1], v[3]));
      lo[1] = bind(at, "y0", ct, kir::min(v[0], v[2]));
      hi[1] = bind(at, "y1", ct, kir::max(v[0], v[2]));
    }
  };
  Expr alo[2], ahi[2];
  corners(pick, bestE, alo, ahi);
  Expr a0 = bind(pick, "a0", ct, smul(ssub(ahi[0], alo[0]), ssub(ahi[1], alo[1])));
  std::string hits = kb.freshName("hits");
  Expr hitsE = kir::var(hits, DType::I32);
  pick.push_back(kir::decl(hits, DType::I32, kir::intImm(0, DType::I32)));
  {
    // Whether any kept box overlaps the candidate too much, all of them tested without a
    // branch (the same boolean as stopping at the first: each test reads only its own box).
    std::string j = kb.freshName("j");
    std::vector<Stmt> cmp;
    Expr jE = kir::var(j);
    Expr blo[2] = {kb.load(kept, keptAt(0, jE)), kb.load(kept, keptAt(1, jE))};
    Expr bhi[2] = {kb.load(kept, keptAt(2, jE)), kb.load(kept, keptAt(3, jE))};
    Expr a1 = kb.load(kept, keptAt(4, jE));
    Expr ix0 = bind(cmp, "ix0", ct, kir::max(alo[0], blo[0]));
    Expr ix1 = bind(cmp, "ix1", ct, kir::min(ahi[0], bhi[0]));
    Expr iy0 = bind(cmp, "iy0", ct, kir::max(alo[1], blo[1]));
    Expr iy1 = bind(cmp, "iy1", ct, kir::min(ahi[1], bhi[1]));
    Expr inter = bind(cmp, "inter", ct, smul(ssub(ix1, ix0), ssub(iy1, iy0)));
    Expr a1v = bind(cmp, "a1", ct, a1);
    Expr uni = bind(cmp, "uni", ct, ssub(sadd(a0, a1v), inter));
    Expr zero = fc(0, ct);
    Expr overlaps = kir::land(kir::land(gt(ix1, ix0), gt(iy1, iy0)),
                              kir::land(kir::land(gt(inter, zero), gt(a0, zero)),
                                        kir::land(gt(a1v, zero), gt(uni, zero))));
    Expr suppressed = kir::land(overlaps, gt(sdiv(inter, uni), iou));
    cmp.push_back(kir::accumulate(
        hits, kir::max(hitsE, kir::select(suppressed, kir::intImm(1, DType::I32),
                                          kir::intImm(0, DType::I32)))));
    pick.push_back(kir::forLoop(j, cntE, kir::block(cmp)));
  }
  Expr keepE = eq(hitsE, kir::intImm(0, DType::I32));
  std::vector<Stmt> add{kb.store(kept, keptAt(0, cntE), alo[0]),
                        kb.store(kept, keptAt(1, cntE), alo[1]),
                        kb.store(kept, keptAt(2, cntE), ahi[0]),
                        kb.store(kept, keptAt(3, cntE), ahi[1]), kb.store(kept, keptAt(4, cntE), a0)};
  Expr row = kir::mul(totalE, i64(3));
  add.push_back(kb.store(out, row, b));
  add.push_back(kb.store(out, kir::add(row, i64(1)), cl));
  add.push_back(kb.store(out, kir::add(row, i64(2)), bestE));
  add.push_back(kir::assign(cnt, kir::add(cntE, i64(1))));
  add.push_back(kir::assign(total, kir::add(totalE, i64(1))));
  pick.push_back(kir::ifThen(keepE, kir::block(add)));
  Expr more = kir::land(kir::lt(kir::var(pos), leftE), kir::lt(cntE, maxOut));
  if (perClass < nbox)
    more = kir::land(more, kir::lt(cntE, i64(perClass))); // the capacity's bound, if constant
  cls.push_back(kir::forLoop(pos, i64(nbox), kir::ifThen(more, kir::block(pick))));
  body.push_back(kir::forLoop(bv, i64(nb), kir::forLoop(cv, i64(nc), kir::block(cls))));
  body.push_back(kb.store(extent, i64(0), totalE));
  Kernels kernels;
  kernels.push_back(kb.finish(kir::block(body)));
  return kernels;
}

} // namespace

void registerDetectionLowerers(LowererTable &t) {
  t[OpKind::RoiAlign] = lowerRoiAlign;
  t[OpKind::NonMaxSuppression] = lowerNonMaxSuppression;
}

} // namespace nnc::lower

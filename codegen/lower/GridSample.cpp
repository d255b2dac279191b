// Lowerer of grid_sample (ONNX GridSample-20, N-D). A first kernel turns each output
// position's grid entry into its taps: per spatial axis the denormalized coordinate, put
// inside the image by the padding rule and rounded or split into interpolation taps, with the
// interpreter's operations in its order (runtime/interp/GridSample.cpp); the product of the
// axes' taps is stored as flat image offsets and weights, [N, taps, positions]. A second
// kernel sums each (batch, channel, position)'s weighted taps with the positions innermost,
// so the taps load contiguously and the loop vectorizes along the output positions (the
// image reads are gathers); every channel reuses its position's taps.
#include "NNLowering.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

Expr floorOf(Expr a) {
  return kir::op(OpKind::Floor, {std::move(a)});
}

struct AxisTap {
  Expr index; ///< i64, inside the image.
  Expr valid; ///< bool: false where zeros padding reads outside the image.
  Expr weight;
};

/// The per-axis math of one kernel: coordinates in the compute type `ct`.
class TapBuilder {
public:
  TapBuilder(KernelBuilder &kb, std::vector<Stmt> &body, DType ct, const std::string &mode,
             const std::string &pad, bool align)
      : kb_(kb), body_(body), ct_(ct), mode_(mode), pad_(pad), align_(align) {}

  Expr bind(const char *hint, DType t, Expr e) { return kb_.bind(body_, hint, t, std::move(e)); }
  Expr C(double v) const { return fc(v, ct_); }
  Expr D(double v) const { return fc(v, DType::F64); }

  /// ONNX's reflection of x (f64) into [lo, hi] (interp reflect()).
  Expr reflect(Expr x, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0)
      return D(lo);
    x = bind("rx", DType::F64, x);
    Expr below = bind("below", DType::Bool, kir::lt(x, D(lo)));
    Expr above = bind("above", DType::Bool, gt(x, D(hi)));
    Expr dx = bind("dx", DType::F64, kir::select(below, ssub(D(lo), x), ssub(x, D(hi))));
    Expr n = bind("n", DType::F64, floorOf(sdiv(dx, D(range))));
    Expr r = bind("r", DType::F64, ssub(dx, smul(n, D(range))));
    Expr even = eq(ssub(n, smul(D(2), floorOf(smul(n, D(0.5))))), D(0));
    Expr fromLo = sadd(D(lo), r), fromHi = ssub(D(hi), r);
    return kir::select(below, kir::select(even, fromLo, fromHi),
                       kir::select(above, kir::select(even, fromHi, fromLo), x));
  }

  /// The image index read for tap index i (i64) of an axis of `size`.
  AxisTap pixel(Expr i, int64_t size, double lo, double hi, Expr weight) {
    i = bind("ti", DType::I64, i);
    if (pad_ == "zeros") {
      Expr valid = bind("ok", DType::Bool, inRange(i, 0, size));
      return {kir::select(valid, i, i64(0)), valid, weight};
    }
    Expr j = i;
    if (pad_ == "reflection")
      j = kir::cast(reflect(kir::cast(i, DType::F64), lo, hi), DType::I64);
    j = kir::min(kir::max(j, i64(0)), i64(size - 1));
    return {bind("ix", DType::I64, j), kir::intImm(1, DType::Bool), weight};
  }

  /// The taps of axis `size` at the normalized coordinate g (in ct).
  std::vector<AxisTap> taps(Expr g, int64_t size) {
    Expr len = C(static_cast<double>(size));
    Expr x = align_ ? smul(sdiv(sadd(g, C(1)), C(2)), ssub(len, C(1)))
                    : sdiv(ssub(smul(sadd(g, C(1)), len), C(1)), C(2));
    x = bind("x", ct_, x);
    const double limit = 16777216.0; // 2^24: keeps every later index conversion exact
    x = bind("x", ct_,
             kir::min(kir::max(kir::select(isNaN(x), C(-limit), x), C(-limit)), C(limit)));
    if (mode_ == "nearest") // half to even on every rank, as the interpreter
      x = bind("x", ct_, kir::op(OpKind::Round, {x}));
    double lo = align_ ? 0.0 : -0.5;
    double hi = align_ ? static_cast<double>(size - 1) : static_cast<double>(size) - 0.5;
    if (pad_ == "border") {
      Expr x64 = kir::cast(x, DType::F64);
      Expr out = bor(kir::lt(x64, D(lo)), gt(x64, D(hi)));
      x = bind("x", ct_, kir::select(out, kir::min(kir::max(x, C(0)), ssub(len, C(1))), x));
    } else if (pad_ == "reflection") {
      x = bind("x", ct_, kir::cast(reflect(kir::cast(x, DType::F64), lo, hi), ct_));
    }
    if (mode_ == "nearest")
      return {pixel(kir::cast(x, DType::I64), size, lo, hi, C(1))};
    Expr fl = bind("fl", ct_, floorOf(x));
    Expr t = bind("t", ct_, ssub(x, fl));
    Expr i0 = bind("i0", DType::I64, kir::cast(fl, DType::I64));
    if (mode_ == "linear")
      return {pixel(i0, size, lo, hi, ssub(C(1), t)), pixel(kir::add(i0, i64(1)), size, lo, hi, t)};
    const double a = -0.75;
    Expr u = bind("u", ct_, sadd(t, C(1))), v = bind("v", ct_, ssub(C(1), t));
    Expr w = bind("w", ct_, ssub(C(2), t));
    auto outer = [&](const Expr &s) {
      return ssub(smul(sadd(smul(ssub(smul(C(a), s), C(5 * a)), s), C(8 * a)), s), C(4 * a));
    };
    auto inner = [&](const Expr &s) {
      return sadd(smul(smul(ssub(smul(C(a + 2), s), C(a + 3)), s), s), C(1));
    };
    Expr c[4] = {outer(u), inner(t), inner(v), outer(w)};
    std::vector<AxisTap> r;
    for (int k = 0; k < 4; ++k)
      r.push_back(pixel(kir::add(i0, i64(k - 1)), size, lo, hi, bind("c", ct_, c[k])));
    return r;
  }

private:
  KernelBuilder &kb_;
  std::vector<Stmt> &body_;
  DType ct_;
  const std::string &mode_, &pad_;
  bool align_;
};

Expected<Kernels> lowerGridSample(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ge = extentsOf(node.operand(1));
  Extents ye = extentsOf(node.result(0));
  DType t = node.operand(0)->dtype(), ct = computeType(t);
  if (!isFloat(t))
    return node.error("expects a floating-point X, got {}", dtypeName(t));
  size_t k = xe.size() - 2;
  int64_t n = xe[0], c = xe[1], positions = 1, image = 1;
  for (size_t d = 1; d + 1 < ge.size(); ++d)
    positions *= ge[d];
  for (size_t d = 0; d < k; ++d)
    image *= xe[2 + d];
  if (numElementsOf(ye) == 0)
    return Kernels{emptyKernel(node, prefix)};
  std::string mode = node.getString("mode", "linear");
  std::string pad = node.getString("padding_mode", "zeros");
  bool align = node.getInt("align_corners", 0) != 0;
  int64_t perAxis = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4, taps = 1;
  for (size_t d = 0; d < k; ++d)
    taps *= perAxis;
  std::vector<int64_t> imageStride = stridesOf(Extents(xe.begin() + 2, xe.end()));
  int64_t tableSize = n * taps * positions;
  Kernels kernels;

  // Kernel 1: the taps of every (batch, position).
  {
    KernelBuilder kb(node, prefix + "_taps");
    int gb = kb.operand(1);
    int ob = kb.scratch(0, DType::I64, tableSize), wb = kb.scratch(1, ct, tableSize);
    Nest outer;
    Expr b = outer.add(kb, n, "b"), p = outer.add(kb, positions, "p");
    std::vector<Stmt> body;
    TapBuilder tb(kb, body, ct, mode, pad, align);
    Expr row = kir::mul(kir::add(kir::mul(b, i64(positions)), p), i64(static_cast<int64_t>(k)));
    std::vector<std::vector<AxisTap>> axes(k);
    for (size_t d = 0; d < k; ++d) {
      Expr g = tb.bind(
          "g", ct, kir::cast(kb.load(gb, kir::add(row, i64(static_cast<int64_t>(k - 1 - d)))), ct));
      axes[d] = tb.taps(g, xe[2 + d]);
    }
    std::vector<int64_t> ti(k, 0);
    Extents perAxisCount(k, perAxis);
    for (int64_t combo = 0; combo < taps; ++combo) {
      Expr off = i64(0), valid = kir::intImm(1, DType::Bool), w;
      for (size_t d = 0; d < k; ++d) {
        const AxisTap &a = axes[d][static_cast<size_t>(ti[d])];
        off = kir::add(off, kir::mul(a.index, i64(imageStride[d])));
        valid = isTrue(a.valid) ? valid : (isTrue(valid) ? a.valid : kir::land(valid, a.valid));
        w = w ? kir::mul(w, a.weight) : a.weight;
      }
      Expr at = kir::add(kir::mul(kir::add(kir::mul(b, i64(taps)), i64(combo)), i64(positions)), p);
      body.push_back(kb.store(ob, at, isTrue(valid) ? off : kir::select(valid, off, i64(0))));
      body.push_back(kb.store(wb, at, isTrue(valid) ? w : kir::select(valid, w, fc(0, ct))));
      for (size_t d = k; d-- > 0;) {
        if (++ti[d] < perAxis)
          break;
        ti[d] = 0;
      }
    }
    kernels.push_back(
        kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, n * positions * taps * 8)));
  }

  // Kernel 2: y[b, c, p] = sum over the taps of weight * x[b, c, offset].
  {
    KernelBuilder kb(node, prefix);
    int xb = kb.operand(0), yb = kb.result(0);
    int ob = kb.scratch(0, DType::I64, tableSize), wb = kb.scratch(1, ct, tableSize);
    // Straight-line taps keep the position loop innermost, so it vectorizes; a 4-D cubic
    // sample (256 taps) sums in a loop instead.
    bool unrolled = taps <= 64;
    std::vector<std::string> loops;
    Stmt nest = kb.loopNest(
        Extents{n, c, positions},
        [&](const std::vector<Expr> &i) -> Stmt {
          Expr base = kir::mul(kir::add(kir::mul(i[0], i64(c)), i[1]), i64(image));
          auto term = [&](Expr tap) {
            Expr at =
                kir::add(kir::mul(kir::add(kir::mul(i[0], i64(taps)), tap), i64(positions)), i[2]);
            Expr v = kb.load(xb, kir::add(base, kb.load(ob, at)));
            return kir::mul(kb.load(wb, at), kir::cast(v, ct));
          };
          Expr yAt =
              kir::add(kir::mul(kir::add(kir::mul(i[0], i64(c)), i[1]), i64(positions)), i[2]);
          if (unrolled) {
            Expr sum;
            for (int64_t j = 0; j < taps; ++j)
              sum = sum ? kir::add(sum, term(i64(j))) : term(i64(j));
            return kb.store(yb, yAt, kir::cast(sum, t));
          }
          std::string acc = kb.freshName("acc"), j = kb.freshName("k");
          return kir::block(
              {kir::decl(acc, ct, fc(0, ct)),
               kir::forLoop(j, i64(taps),
                            kir::assign(acc, kir::add(kir::var(acc, ct), term(kir::var(j))))),
               kb.store(yb, yAt, kir::cast(kir::var(acc, ct), t))});
        },
        &loops);
    kernels.push_back(kb.finish(nest, defaultSchedule(loops, {n, c, positions}, unrolled)));
  }
  return kernels;
}

} // namespace

void registerGridSampleLowerer(LowererTable &t) {
  t[OpKind::GridSample] = lowerGridSample;
}

} // namespace nnc::lower

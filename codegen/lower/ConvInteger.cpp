// conv_integer: its generic loop nest (one i32 sum per output element, every target), and the
// CPU templates of ConvIntegerTiles.cpp share the zero-point reading declared here
// (ConvInteger.h). Semantics follow runtime/interp/Conv.cpp (evalConvInteger).
#include "ConvInteger.h"

#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

Expected<IntConv> nnl::analyzeConvInteger(const Node &node) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, /*transpose=*/false));
  IntConv f;
  f.s = s;
  f.last = channelsLast(node);
  f.xSigned = node.operand(0)->dtype() == DType::I8;
  f.wUnsigned = node.operand(1)->dtype() == DType::U8;
  if (node.hasAttr("packed_m")) {
    Extents pe = extentsOf(node.operand(1));
    int64_t k = s.C * s.geo.kernelSize;
    if (s.group != 1 || pe.size() != 4 || pe[3] != 4 || pe[1] != (k + 3) / 4 || pe[0] * pe[2] < s.M)
      return node.error("packed operand 1 {} does not hold {} channels of {} rows", extentsStr(pe),
                        s.M, k);
    f.packedNr = pe[2];
    f.colSums = node.operand(4) != nullptr;
  }
  for (size_t z = 2; z < 4; ++z) {
    const Value *zp = node.numOperands() > z ? node.operand(z) : nullptr;
    if (!zp)
      continue;
    int64_t count = numElementsOf(extentsOf(zp));
    if (zp->rank() > 1 || (count != 1 && (z == 2 || count != s.M)))
      return node.error("zero point {} {} must be a scalar{}", z, extentsStr(extentsOf(zp)),
                        z == 2 ? "" : fmt::format(" or hold {} values", s.M));
    (z == 2 ? f.zx : f.zw) = true;
    if (z == 3)
      f.zwPerChannel = count != 1;
  }
  return f;
}

Expr nnl::IntConv::wIndex(Expr m, Expr c, Expr tap) const {
  if (packedNr == 0)
    return kir::add(kir::mul(kir::add(kir::mul(m, i64(s.cg)), c), i64(s.geo.kernelSize)), tap);
  // Element (k, m) of the [K, M] matrix, k = tap * C + c (GemmPacking.h's K4 panels).
  int64_t groups = (s.C * s.geo.kernelSize + 3) / 4;
  Expr k = kir::add(kir::mul(tap, i64(s.C)), c);
  Expr group = kir::add(kir::mul(kir::div(m, i64(packedNr)), i64(groups)), kir::div(k, i64(4)));
  return kir::add(
      kir::mul(kir::add(kir::mul(group, i64(packedNr)), kir::mod(m, i64(packedNr))), i64(4)),
      kir::mod(k, i64(4)));
}

Expr nnl::IntConv::xIndex(Expr n, Expr c, Expr pos) const {
  if (last)
    return kir::add(kir::mul(kir::add(kir::mul(n, i64(s.geo.inSize)), pos), i64(s.C)), c);
  return kir::add(kir::mul(kir::add(kir::mul(n, i64(s.C)), c), i64(s.geo.inSize)), pos);
}

Expr nnl::IntConv::yIndex(Expr n, Expr m, Expr pos) const {
  if (last)
    return kir::add(kir::mul(kir::add(kir::mul(n, i64(s.geo.outSize)), pos), i64(s.M)), m);
  return kir::add(kir::mul(kir::add(kir::mul(n, i64(s.M)), m), i64(s.geo.outSize)), pos);
}

Expr nnl::convZeroPoint(KernelBuilder &kb, const IntConv &f, size_t z, Expr m) {
  bool given = z == 2 ? f.zx : f.zw;
  if (!given)
    return kir::constant(0, DType::I32);
  bool per = z == 3 && f.zwPerChannel;
  return kir::cast(kb.load(kb.operand(z), per ? m : i64(0)), DType::I32);
}

/// The generic nest: for each output (n, m, o...), the sum over the group's input channels and
/// the window's taps that fall inside the input of (x - x_zp) * (w - w_zp) in i32. Its outer
/// loops are independent (an OpenCL device's grid: a work-item per output element).
Expected<Kernels> lowerConvIntegerLoops(const Node &node, const std::string &prefix) {
  NNC_ASSIGN_OR_RETURN(IntConv f, analyzeConvInteger(node));
  const ConvSetup &s = f.s;
  const ConvGeometry &geo = s.geo;
  if (s.outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  size_t D = geo.axes.size();
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), wb = kb.operand(1), ob = kb.result(0);
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  Nest outer;
  Expr n = outer.add(kb, s.N, "n"), m = outer.add(kb, s.M, "m");
  std::vector<Expr> o(D);
  for (size_t d = 0; d < D; ++d)
    o[d] = outer.add(kb, geo.outSpatial[d], "o");
  Expr g = kir::div(m, i64(s.mg));
  Nest red;
  Expr ci = red.add(kb, s.cg, "c");
  std::vector<Expr> k(D), conds;
  std::vector<Expr> xTerms;
  std::vector<Expr> tapTerms;
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    k[d] = red.add(kb, a.kernel, "k");
    Expr pos = kir::add(kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(k[d], i64(a.dilation)));
    bool always = a.padBegin == 0 && (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation < a.in;
    if (!always)
      conds.push_back(inRange(pos, 0, a.in));
    xTerms.push_back(kir::mul(pos, i64(inStride[d])));
    tapTerms.push_back(kir::mul(k[d], i64(kStride[d])));
  }
  std::string acc = kb.freshName("acc");
  Expr accV = kir::var(acc, DType::I32);
  Expr xAt = f.xIndex(n, kir::add(kir::mul(g, i64(s.cg)), ci), sumOf(xTerms));
  Expr xv = kir::op(OpKind::Sub,
                    {kir::cast(kb.load(xb, xAt), DType::I32), convZeroPoint(kb, f, 2, m)});
  Expr wv =
      kir::op(OpKind::Sub, {kir::cast(kb.load(wb, f.wIndex(m, ci, sumOf(tapTerms))), DType::I32),
                            convZeroPoint(kb, f, 3, m)});
  Stmt upd = kir::assign(acc, kir::op(OpKind::Add, {accV, kir::op(OpKind::Mul, {xv, wv})}));
  Expr oIdx = f.yIndex(n, m, flatIndex(o, outStride));
  Stmt body = kir::block({kir::decl(acc, DType::I32, kir::constant(0, DType::I32)),
                          red.wrap(guarded(allOf(conds), upd)), kb.store(ob, oIdx, accV)});
  int64_t work = s.outN * s.cg * geo.kernelSize;
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
}

void registerConvIntegerLowerer(LowererTable &t) {
  t[OpKind::ConvInteger] = lowerConvIntegerLoops;
}

} // namespace nnc::lower

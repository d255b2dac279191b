// Lowerers of the linear-algebra and window ops: matmul, einsum, conv, conv_transpose,
// max_pool, avg_pool and lrn. Matmul and conv (im2col) run the tunable register-blocked GEMM
// of Gemm.h; the others are direct loop nests. The matmul, conv and conv_transpose fast paths
// are kernel templates (Templates.cpp chooses among them); the direct conv loops are conv's
// generic lowering. Semantics follow runtime/interp/MatMul.cpp, Conv.cpp and LocalWindow.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "Gemm.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

Expr sumOf(const std::vector<Expr> &terms) {
  Expr s = i64(0);
  for (const Expr &t : terms)
    s = kir::add(s, t);
  return s;
}

Expr allOf(const std::vector<Expr> &conds) {
  Expr c = kir::intImm(1, DType::Bool);
  for (const Expr &e : conds)
    c = kir::land(c, e);
  return c;
}

bool isTrue(const Expr &e) { return e->kind == kir::ExprKind::IntImm && e->intValue != 0; }

Stmt guarded(const Expr &cond, Stmt s) { return isTrue(cond) ? s : kir::ifThen(cond, s); }

// ---- matmul ------------------------------------------------------------------------------------

/// The GEMM as one OpenCL NDRange kernel (GpuGemm.cpp), its tile from the tuned or default
/// config of the "gemm_opencl" problem, the batch entries on NDRange dimension 2.
kir::Kernel ndrangeGemmKernel(KernelBuilder &kb, const GemmOperands &go, DType t, int64_t batch,
                              int64_t m, int64_t k, int64_t n,
                              const std::vector<std::pair<std::string, Expr>> &batchLoops,
                              const std::string &layout, const tuning::LowerOptions *opts) {
  GpuGemmTile tile =
      gpuGemmTileOf(tuning::chooseConfig(gpuGemmProblem(t, batch, m, k, n, layout), opts));
  std::vector<kir::LocalBuffer> locals;
  Stmt body = gpuGemmNest(kb, go, batch, m, k, n, batchLoops, tile, locals);
  kir::Kernel kernel = kb.finish(body, {});
  kernel.locals = std::move(locals);
  return kernel;
}

Expected<Kernels> lowerMatMul(const Node &node, const std::string &prefix,
                              const tuning::LowerOptions *opts,
                              const MakeElementFinish &makeFinish = nullptr,
                              MatMulPath path = MatMulPath::Tiles) {
  const Value *av = node.operand(0), *bv = node.operand(1);
  DType t = av->dtype();
  if (t != bv->dtype() || !isNumeric(t))
    return node.error("operands must have one numeric dtype, got {} and {}", dtypeName(t),
                      dtypeName(bv->dtype()));
  Extents as = extentsOf(av), bs = extentsOf(bv);
  if (as.empty() || bs.empty())
    return node.error("operands must have rank >= 1");
  // A weight packed into column panels (ir/GemmPacking.h): [..., P, K, nr] holding
  // [..., K, packed_n]; one matrix of panels takes P * K * nr elements.
  int64_t packedNr = 0, packedSize = 0;
  if (node.hasAttr("packed_n")) {
    size_t r = bs.size();
    if (r < 3 || as.size() < 2 || bs[r - 3] * bs[r - 1] < node.getInt("packed_n"))
      return node.error("packed operand 1 {} does not hold {} columns", extentsStr(bs),
                        node.getInt("packed_n"));
    packedNr = bs[r - 1];
    packedSize = bs[r - 3] * bs[r - 2] * bs[r - 1];
    Extents unpacked(bs.begin(), bs.end() - 3);
    unpacked.push_back(bs[r - 2]);
    unpacked.push_back(node.getInt("packed_n"));
    bs = unpacked;
  }
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return node.error("inner dims differ: {} and {}", extentsStr(extentsOf(av)),
                      extentsStr(extentsOf(bv)));
  Extents batchA(as.begin(), as.end() - 2), batchB(bs.begin(), bs.end() - 2);
  std::optional<Extents> batch = broadcastExtents(batchA, batchB);
  if (!batch)
    return node.error("batch dims {} and {} do not broadcast", extentsStr(batchA),
                      extentsStr(batchB));
  int64_t outN = numElementsOf(extentsOf(node.result(0)));
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  // Element strides of each output batch dim in A, B and the output.
  size_t nb = batch->size();
  auto batchStrides = [&](const Extents &in, int64_t matSize) {
    std::vector<int64_t> s(nb, 0);
    int64_t st = matSize;
    size_t off = nb - in.size();
    for (size_t i = in.size(); i-- > 0;) {
      s[off + i] = in[i] == 1 ? 0 : st;
      st *= in[i];
    }
    return s;
  };
  std::vector<int64_t> sa = batchStrides(batchA, m * k),
                       sb = batchStrides(batchB, packedNr > 0 ? packedSize : k * n),
                       so = batchStrides(*batch, m * n);
  // Trailing batch dims over which B stays put (a weight shared by those entries) while A
  // moves fold into the rows: A's and the output's entries there are consecutive m-row
  // matrices, so they are one matrix of m * fold rows, and one GEMM streams B once instead of
  // a batch loop of m-row GEMMs that each stream all of it (a sequence-first [L, 1, E] input
  // projected by [E, N] was L GEMMs of one row).
  size_t folded = nb;
  while (folded > 0 && sb[folded - 1] == 0 && (sa[folded - 1] != 0 || (*batch)[folded - 1] == 1))
    --folded;
  int64_t fold = 1;
  for (size_t d = folded; d < nb; ++d)
    fold *= (*batch)[d];
  if (fold > 1) {
    m *= fold;
    nb = folded;
    batch->resize(nb);
    sa.resize(nb);
    sb.resize(nb);
    so.resize(nb);
  }

  KernelBuilder kb(node, prefix);
  int ab = kb.operand(0), bb = kb.operand(1), ob = kb.result(0);
  Nest outer;
  Expr aOff = i64(0), bOff = i64(0), oOff = i64(0), rowOff = i64(0);
  for (size_t d = 0; d < nb; ++d) {
    Expr v = outer.add(kb, (*batch)[d], "b");
    aOff = kir::add(aOff, kir::mul(v, i64(sa[d])));
    bOff = kir::add(bOff, kir::mul(v, i64(sb[d])));
    oOff = kir::add(oOff, kir::mul(v, i64(so[d])));
    rowOff = kir::add(rowOff, kir::mul(v, i64(so[d] / n))); // so[d] is a multiple of m * n
  }
  // A register-blocked GEMM per batch entry; f32 accumulates in f32 (f16/bf16 in f32).
  GemmOperands g;
  g.a = ab;
  g.b = bb;
  g.c = ob;
  g.acc = accType(t, /*wide=*/false);
  g.aIndex = [&](Expr i, Expr p) { return kir::add(aOff, kir::add(kir::mul(i, i64(k)), p)); };
  g.bIndex = [&](Expr p, Expr j) {
    if (packedNr > 0)
      return kir::add(bOff,
                      kir::add(kir::mul(kir::add(kir::mul(kir::div(j, i64(packedNr)), i64(k)), p),
                                        i64(packedNr)),
                               kir::mod(j, i64(packedNr))));
    return kir::add(bOff, kir::add(kir::mul(p, i64(n)), j));
  };
  g.cIndex = [&](Expr i, Expr j) { return kir::add(oOff, kir::add(kir::mul(i, i64(n)), j)); };
  g.strided = GemmOperands::Strided{aOff, bOff, oOff, k, 1, n, n};
  g.packScratch = 0;
  g.packedNr = packedNr;
  if (makeFinish) {
    ElementFinish finish = makeFinish(kb);
    g.finish = [&, finish](Expr i, Expr j, std::vector<Stmt> &hoisted) {
      return finish(kir::add(rowOff, i), j, hoisted);
    };
  }
  int64_t batchCount = outN / (m * n);
  if (path == MatMulPath::NDRange) {
    // For an OpenCL device: the NDRange GEMM (GpuGemm.cpp), its batch loops on dimension 2.
    if (!opts || !opts->gpu || g.acc != DType::F32)
      return node.error("the NDRange GEMM needs an OpenCL device and f32 accumulation");
    if (!makeFinish)
      g.epilogue = opts->epilogue;
    return Kernels{ndrangeGemmKernel(
        kb, g, t, batchCount, m, k, n, outer.loops,
        fmt::format("matmul batch{} sa{} sb{}{}{}", extentsStr(*batch), extentsStr(sa),
                    extentsStr(sb), packedNr > 0 ? fmt::format(" packed{}", packedNr) : "",
                    makeFinish ? " epilogue" : ""),
        opts)};
  }
  tuning::Problem prob = gemmProblem(
      t, batchCount, m, k, n,
      fmt::format("matmul batch{} sa{} sb{}{}", extentsStr(*batch), extentsStr(sa),
                  extentsStr(sb), packedNr > 0 ? fmt::format(" packed{}", packedNr) : ""));
  tuning::Config cfg = tuning::chooseConfig(prob, opts);
  kir::Schedule sched;
  Stmt body = gemmNest(kb, g, m, k, n, cfg, outer.loops, sched);
  return Kernels{kb.finish(body, sched)};
}

// ---- einsum ------------------------------------------------------------------------------------

Expected<Kernels> lowerEinsum(const Node &node, const std::string &prefix) {
  size_t numOps = node.numOperands();
  std::vector<int64_t> ranks;
  std::vector<Extents> ext;
  DType t = node.operand(0)->dtype();
  for (size_t j = 0; j < numOps; ++j) {
    if (!node.operand(j))
      return node.error("operand {} is missing", j);
    if (node.operand(j)->dtype() != t)
      return node.error("operand dtypes differ");
    ext.push_back(extentsOf(node.operand(j)));
    ranks.push_back(static_cast<int64_t>(ext.back().size()));
  }
  if (!isNumeric(t))
    return node.error("unsupported dtype {}", dtypeName(t));
  NNC_ASSIGN_OR_RETURN(EinsumLabels labels, parseEinsum(node, ranks));
  std::map<int, int64_t> size;
  for (size_t j = 0; j < numOps; ++j)
    for (size_t d = 0; d < labels.operands[j].size(); ++d) {
      int l = labels.operands[j][d];
      int64_t e = ext[j][d];
      auto it = size.find(l);
      if (it == size.end() || it->second == 1)
        size[l] = e;
      else if (e != 1 && e != it->second)
        return node.error("label '{}' has sizes {} and {}",
                          l < 256 ? std::string(1, static_cast<char>(l)) : "...", it->second, e);
    }
  std::vector<int> outLabels = labels.output, sumLabels;
  for (auto [l, e] : size)
    if (std::find(outLabels.begin(), outLabels.end(), l) == outLabels.end())
      sumLabels.push_back(l);
  Extents outExt;
  for (int l : outLabels)
    outExt.push_back(size[l]);
  if (numElementsOf(outExt) == 0)
    return Kernels{emptyKernel(node, prefix)};
  // Stride of each label in each operand (a repeated label walks the diagonal; a broadcast
  // size-1 axis has stride 0).
  std::vector<std::map<int, int64_t>> labelStride(numOps);
  for (size_t j = 0; j < numOps; ++j) {
    std::vector<int64_t> st = stridesOf(ext[j]);
    for (size_t d = 0; d < labels.operands[j].size(); ++d)
      if (ext[j][d] != 1)
        labelStride[j][labels.operands[j][d]] += st[d];
  }
  DType acc = isFloat(t) ? (t == DType::F64 || t == DType::F32 ? DType::F64 : DType::F32) : t;
  KernelBuilder kb(node, prefix);
  std::vector<int> bufs;
  for (size_t j = 0; j < numOps; ++j)
    bufs.push_back(kb.operand(j));
  int ob = kb.result(0);
  Nest outer, red;
  std::map<int, Expr> vars;
  for (int l : outLabels)
    vars[l] = outer.add(kb, size[l], "o");
  int64_t sumN = 1;
  for (int l : sumLabels) {
    vars[l] = red.add(kb, size[l], "s");
    sumN *= size[l];
  }
  Expr prod;
  for (size_t j = 0; j < numOps; ++j) {
    Expr idx = i64(0);
    for (auto [l, s] : labelStride[j])
      idx = kir::add(idx, kir::mul(vars.at(l), i64(s)));
    Expr v = kir::cast(kb.load(bufs[j], idx), acc);
    prod = prod ? kir::mul(prod, v) : v;
  }
  Expr oIdx = flatIndex(
      [&] {
        std::vector<Expr> v;
        for (int l : outLabels)
          v.push_back(vars.at(l));
        return v;
      }(),
      stridesOf(outExt));
  Stmt body;
  if (sumLabels.empty()) {
    body = kb.store(ob, oIdx, kir::cast(prod, t));
  } else {
    std::string a = kb.freshName("acc");
    Expr aE = kir::var(a, acc);
    body = kir::block({kir::decl(a, acc, fc(0, acc)), red.wrap(kir::assign(a, kir::add(aE, prod))),
                       kb.store(ob, oIdx, kir::cast(aE, t))});
  }
  return Kernels{kb.finish(outer.wrap(body),
                           parallelOuter(outer, numElementsOf(outExt) * sumN * int64_t(numOps)))};
}

// ---- conv and conv_transpose -------------------------------------------------------------------

struct ConvGeometry {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial, kernel;
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

Expected<ConvGeometry> convGeometry(const Node &node, const Extents &xs, const Extents &ws,
                                    bool transpose) {
  if (xs.size() < 3 || ws.size() != xs.size())
    return node.error("input {} and weight {} must have one rank >= 3", extentsStr(xs),
                      extentsStr(ws));
  size_t n = xs.size() - 2;
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  ConvGeometry g;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xs[i + 2], k = ws[i + 2];
    Expected<WindowAxis> ax =
        transpose ? transposeWindowAxis(node, a, i, in, k) : windowAxis(node, a, i, in, k);
    if (!ax)
      return ax.takeError();
    g.axes.push_back(*ax);
    g.inSpatial.push_back(in);
    g.outSpatial.push_back(ax->out);
    g.kernel.push_back(k);
    g.inSize *= in;
    g.outSize *= ax->out;
    g.kernelSize *= k;
  }
  return g;
}

/// The range of "from" positions p in [0, fromCount) whose partner p*stride - padBegin +
/// tap*dilation lies in [0, toCount), for a kernel tap given as an expression: returns
/// {first, count} (count >= 0).
std::pair<Expr, Expr> tapRange(const WindowAxis &a, const Expr &tap, int64_t fromCount,
                               int64_t toCount) {
  // q = p*s + c with c = tap*d - padBegin; 0 <= q  <=>  p >= ceil(-c / s);
  // q <= toCount-1  <=>  p <= floor((toCount-1-c) / s).
  Expr negC = kir::sub(i64(a.padBegin), kir::mul(tap, i64(a.dilation)));
  Expr lo = kir::div(kir::add(kir::max(negC, i64(0)), i64(a.stride - 1)), i64(a.stride));
  Expr hiNum = kir::add(kir::add(i64(toCount - 1 + a.stride), negC), i64(0));
  Expr hi = kir::min(i64(fromCount), kir::div(kir::max(hiNum, i64(0)), i64(a.stride)));
  return {lo, kir::max(kir::sub(hi, lo), i64(0))};
}

/// The extents of a conv's input with its padding made explicit: every tap of every output
/// lies inside.
Extents paddedExtents(const ConvGeometry &geo) {
  Extents e;
  for (const WindowAxis &a : geo.axes)
    e.push_back(
        std::max(a.in + a.padBegin, (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1));
  return e;
}

/// How a padded input's rows are stored when split into `phases` phases: the row's columns
/// c with c % phases == f, in order, at f * (row's extent / phases, rounded up). A window of
/// stride s then reads a run of consecutive columns of one phase (phases = s) where it read
/// every s-th column of the row.
Extents phasedExtents(const Extents &padded, int64_t phases) {
  Extents e = padded;
  e.back() = (e.back() + phases - 1) / phases * phases;
  return e;
}

/// A kernel copying the conv's input (operand 0, N x C images) into node scratch 0 with its
/// padding made explicit (zeros; paddedExtents) and its rows split into `phases` phases
/// (phasedExtents; 1: as they are): per axis, zeros in the slab outside the input along it
/// (the slabs meet at the corners), then the input's rows at their padded place (the copy
/// vectorizes when phases is 1). Each element is written about once: zeroing the whole
/// buffer first took a third of the kernel for a 3x1x1 conv padded only along depth.
kir::Kernel padInputKernel(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                           int64_t N, int64_t C, DType t, int64_t phases = 1) {
  Extents padded = phasedExtents(paddedExtents(geo), phases);
  int64_t paddedSize = N * C * numElementsOf(padded), phaseWidth = padded.back() / phases;
  std::vector<int64_t> padStride = stridesOf(padded);
  size_t D = geo.axes.size();
  KernelBuilder kb(node, prefix + "_pad");
  int xb = kb.operand(0), pb = kb.scratch(0, t, paddedSize);
  // Padded position `at` along axis d, stored (the last axis' columns in phases).
  auto placed = [&](size_t d, Expr at) {
    if (d + 1 == D && phases > 1)
      at =
          kir::add(kir::mul(kir::mod(at, i64(phases)), i64(phaseWidth)), kir::div(at, i64(phases)));
    return kir::mul(at, i64(padStride[d]));
  };
  std::vector<Stmt> stmts;
  kir::Schedule sched;
  for (size_t d = 0; d < D; ++d) {
    // Axis d's positions outside [padBegin, padBegin + in): j < padBegin, else j + in.
    int64_t begin = geo.axes[d].padBegin, in = geo.inSpatial[d], outside = padded[d] - in;
    if (outside <= 0)
      continue;
    Extents slab{N * C};
    slab.insert(slab.end(), padded.begin(), padded.end());
    slab[d + 1] = outside;
    std::vector<std::string> zl;
    stmts.push_back(kb.loopNest(
        slab,
        [&](const std::vector<Expr> &idx) {
          Expr to = kir::mul(idx[0], i64(numElementsOf(padded)));
          for (size_t e = 0; e < D; ++e) {
            Expr at = idx[e + 1];
            if (e == d)
              at = begin == 0 ? kir::add(at, i64(in))
                              : kir::select(kir::lt(at, i64(begin)), at, kir::add(at, i64(in)));
            to = kir::add(to, placed(e, at));
          }
          return kb.store(pb, to, kir::constant(0, t));
        },
        &zl));
    for (const kir::ScheduleStep &step : defaultSchedule(zl, slab).steps)
      sched.steps.push_back(step);
  }
  std::vector<std::string> cl;
  Extents copyExtents{N * C};
  copyExtents.insert(copyExtents.end(), geo.inSpatial.begin(), geo.inSpatial.end());
  Stmt copy = kb.loopNest(
      copyExtents,
      [&](const std::vector<Expr> &idx) {
        Expr from = kir::mul(idx[0], i64(geo.inSize)),
             to = kir::mul(idx[0], i64(numElementsOf(padded)));
        std::vector<int64_t> inStride = stridesOf(geo.inSpatial);
        for (size_t d = 0; d < D; ++d) {
          from = kir::add(from, kir::mul(idx[d + 1], i64(inStride[d])));
          to = kir::add(to, placed(d, kir::add(idx[d + 1], i64(geo.axes[d].padBegin))));
        }
        return kb.store(pb, to, kb.load(xb, from));
      },
      &cl);
  stmts.push_back(copy);
  for (const kir::ScheduleStep &step : defaultSchedule(cl, copyExtents).steps)
    sched.steps.push_back(step);
  return kb.finish(kir::block(stmts), sched);
}

/// The first output axis of im2colBlock's rows: the rows are the last output axis, joined
/// with the axes outside it while the padded input continues them in the same order (the
/// inner axes' padded extents equal their output extents: kernel 1, stride 1; the joined axis
/// has stride 1). A temporal conv (kernel 3x1x1) copies whole T*H*W runs, not H*W/W pieces
/// of W columns.
size_t im2colRowAxis(const ConvGeometry &geo) {
  Extents padded = phasedExtents(paddedExtents(geo), geo.axes.back().stride);
  size_t first = geo.axes.size() - 1;
  while (first > 0 && padded[first] == geo.outSpatial[first] && geo.axes[first - 1].stride == 1)
    --first;
  return first;
}

/// The length of im2colBlock's rows: the output axes from im2colRowAxis on.
int64_t im2colRowLength(const ConvGeometry &geo) {
  return numElementsOf(Extents(geo.outSpatial.begin() + im2colRowAxis(geo), geo.outSpatial.end()));
}

/// Writes rows [k0, k0 + kCount) x columns [col0, col0 + cols) of image n and group g's
/// im2col matrix (row r: input channel g*cg + r / K, kernel tap r % K; column p: output
/// position p) at dst[r*ldb + (p - col0)]: the GEMM's B produced per cache block
/// (GemmOperands::produceB). It reads the padded input `xp` (padInputKernel), where every
/// tap lies inside and rows come in phases of the last axis' stride. The columns meet a few
/// output rows (im2colRowAxis); per output row q and B row, the row's part of the block is
/// one copy of consecutive input columns, of the same length for every B row (B rows inside
/// output rows: one length per inner loop, which the branches predict).
Stmt im2colBlock(KernelBuilder &kb, const ConvGeometry &geo, int64_t C, int64_t cg, int xp, Expr n,
                 Expr g, int dst, int64_t ldb, Expr col0, Expr cols, Expr k0, Expr kCount) {
  size_t D = geo.axes.size(), first = im2colRowAxis(geo);
  int64_t K = geo.kernelSize, OW = im2colRowLength(geo);
  // Rows in phases of the last axis' stride (padInputKernel): output column ow's tap kw
  // reads padded column ow*s + kw*dil, which is column ow + (kw*dil) / s of phase
  // (kw*dil) % s, so a run of output columns reads consecutive columns.
  const WindowAxis &aw = geo.axes[D - 1];
  int64_t phases = aw.stride;
  Extents padded = phasedExtents(paddedExtents(geo), phases);
  int64_t paddedSize = numElementsOf(padded), phaseWidth = padded.back() / phases;
  std::vector<int64_t> padStride = stridesOf(padded), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  // Values are bound to locals where they are loop-invariant: per output row, per B row.
  auto bind = [&](std::vector<Stmt> &at, const char *name, Expr e) {
    return kb.bind(at, name, DType::I64, std::move(e));
  };
  std::string qv = kb.freshName("bq"), rv = kb.freshName("br");
  // Per output row q (positions [q*OW, (q+1)*OW)): its part [lo, hi) of the block and the
  // padded input offset of its first column's window.
  std::vector<Stmt> perQ;
  Expr q0 = kir::div(col0, i64(OW));
  Expr nq =
      kir::sub(kir::div(kir::add(col0, kir::sub(cols, i64(1))), i64(OW)), kir::sub(q0, i64(1)));
  Expr q = bind(perQ, "bqq", kir::add(q0, kir::var(qv)));
  Expr qStart = bind(perQ, "bqs", kir::mul(q, i64(OW)));
  Expr lo = bind(perQ, "blo", kir::max(kir::sub(col0, qStart), i64(0)));
  Expr hi = bind(perQ, "bhi", kir::min(kir::sub(kir::add(col0, cols), qStart), i64(OW)));
  Expr len = bind(perQ, "blen", kir::sub(hi, lo));
  Expr qSrc = lo;
  for (size_t d = 0; d < first; ++d) {
    Expr o = kir::mod(kir::div(q, i64(outStride[d] / OW)), i64(geo.axes[d].out));
    qSrc = kir::add(qSrc, kir::mul(o, i64(geo.axes[d].stride * padStride[d])));
  }
  qSrc = bind(perQ, "bqsrc", qSrc);
  Expr qDst = bind(perQ, "bqdst", kir::sub(kir::add(qStart, lo), col0));
  // Per B row r: its channel and kernel taps.
  std::vector<Stmt> perRow;
  Expr row = bind(perRow, "brow", kir::add(k0, kir::var(rv)));
  Expr c = kir::add(kir::mul(g, i64(cg)), kir::div(row, i64(K)));
  Expr tap = bind(perRow, "btap", kir::mod(row, i64(K)));
  Expr src = kir::add(kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(paddedSize)), qSrc);
  for (size_t d = 0; d < D; ++d) {
    Expr kd = kir::mod(kir::div(tap, i64(kStride[d])), i64(geo.kernel[d]));
    if (d + 1 < D) {
      src = kir::add(src, kir::mul(kd, i64(geo.axes[d].dilation * padStride[d])));
    } else {
      Expr at = kir::mul(kd, i64(aw.dilation));
      src = kir::add(src, kir::add(kir::mul(kir::mod(at, i64(phases)), i64(phaseWidth)),
                                   kir::div(at, i64(phases))));
    }
  }
  src = bind(perRow, "bsrc", src);
  Expr out = bind(perRow, "bdst", kir::add(qDst, kir::mul(kir::var(rv), i64(ldb))));
  auto value = [&](Expr x) { return kb.load(xp, kir::add(src, x)); };
  // Runs of 8 or more go in 8-lane vector stores (the last one moved back to end at the
  // run's end, rewriting a few lanes with the same values); shorter runs lane by lane.
  // (LLVM's loop vectorizer, given these loops of 50-odd trips, spent more in its alias
  // checks and scalar remainders than in the copy.) All lanes are read before the store:
  // stores between the loads would keep LLVM's SLP vectorizer from joining them (the buffers
  // may alias as far as it knows).
  std::string vv = kb.freshName("bv"), xv = kb.freshName("bx");
  std::vector<Stmt> vec;
  Expr s0 = bind(vec, "bs", kir::min(kir::mul(kir::var(vv), i64(8)), kir::sub(len, i64(8))));
  std::vector<Expr> lanes;
  for (int64_t l = 0; l < 8; ++l) {
    std::string lv = kb.freshName("bl");
    vec.push_back(kir::decl(lv, DType::F32, value(kir::add(s0, i64(l)))));
    lanes.push_back(kir::var(lv, DType::F32));
  }
  vec.push_back(kb.vecStore(dst, kir::add(out, s0), lanes));
  Stmt vectors = kir::forLoop(vv, kir::div(kir::add(len, i64(7)), i64(8)), kir::block(vec));
  Stmt scalars = kir::forLoop(xv, kir::max(len, i64(0)),
                              kb.store(dst, kir::add(out, kir::var(xv)), value(kir::var(xv))));
  perRow.push_back(kir::ifThen(kir::lt(len, i64(8)), scalars, vectors));
  perQ.push_back(kir::forLoop(rv, kCount, kir::block(perRow)));
  return kir::forLoop(qv, nq, kir::block(perQ));
}

/// Conv as im2col + GEMM (the interpreter's method): a first kernel copies each window tap
/// of the input (0 in the padding) into a scratch matrix col[n, c, k, p]; the second computes
/// out[n, m, p] = bias[m] + sum_r w[m, r] * col[n, g*cg.., r, p] as the tunable
/// register-blocked GEMM (Gemm.h). A pointwise conv (1x1, stride 1, no padding) reads the
/// input directly. When the col matrix outgrows the L2 (3-D convs: R3D-18's first blocks take
/// 173 MB), the GEMM produces it a cache block at a time instead (im2colBlock, blocked): a
/// first kernel only makes the input's padding explicit (padInputKernel, where there is
/// padding or a stride along rows), and each block's columns are read while in cache.
Kernels lowerConvIm2col(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                        int64_t N, int64_t C, int64_t M, int64_t cg, int64_t mg, DType t,
                        bool hasBias, const tuning::LowerOptions *opts) {
  size_t D = geo.axes.size();
  int64_t K = geo.kernelSize, P = geo.outSize, R = cg * K;
  bool pointwise = true;
  for (const WindowAxis &a : geo.axes)
    pointwise = pointwise && a.kernel == 1 && a.stride == 1 && a.padBegin == 0 && a.out == a.in;
  DType acc = accType(t, /*wide=*/false);
  Kernels kernels;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  int64_t group = C / cg;
  std::string layout = fmt::format("conv n{} group{} bias{} {}", N, group, hasBias ? 1 : 0,
                                   pointwise ? "pointwise" : "im2col");
  // The col matrix of image n and group g is R x P, row-major: im2col's stores run along p
  // (writing it directly in the GEMM's column panels instead needs a div and mod per element
  // for the panel index, which cost more than the panels saved).
  int64_t colN = N * C * K * P;
  auto colIndex = [&](Expr mat, Expr r, Expr p) {
    return kir::add(kir::mul(mat, i64(R * P)), kir::add(kir::mul(r, i64(P)), p));
  };
  bool gpu = opts && opts->gpu;
  // Blocked when the col matrix would outgrow the L2 and its blocks pay for producing them
  // (or NNC_CONV_ALGO=blocked asks), on the CPU for f32 with the microkernel GEMM (the config
  // of the blocked problem may say not). A block's copies run along output rows
  // (im2colRowAxis), and each row block of the GEMM produces its B again: rows of 16 or more
  // and 1024 or more columns (R3D-18's convs with 56-wide rows of 25088 and 28-wide of 1568
  // columns measured faster blocked; its 14- and 7-wide rows of 392 and 49 columns slower,
  // their short copies costing more than the cache misses they save).
  const char *algo = std::getenv("NNC_CONV_ALGO");
  bool pays = colN * 4 > cpuOf(opts).l2Bytes && im2colRowLength(geo) >= 16 && P >= 1024;
  bool blocked =
      !pointwise && !gpu && t == DType::F32 && (pays || (algo && std::string(algo) == "blocked"));
  tuning::Config cfg;
  if (!gpu) {
    cfg = tuning::chooseConfig(gemmProblem(t, N * group, mg, R, P, layout, blocked), opts);
    blocked = blocked && cfg.count("mk") && cfg.at("mk") == 1;
  }
  // The producer reads the input with its padding made explicit (none to add: in place).
  bool padded = paddedExtents(geo) != geo.inSpatial;
  for (const WindowAxis &a : geo.axes)
    padded = padded || a.padBegin != 0;
  int64_t phases = geo.axes.back().stride;
  padded = padded || phases > 1;
  if (blocked && padded)
    kernels.push_back(padInputKernel(node, prefix, geo, N, C, t, phases));
  if (!pointwise && !blocked) {
    KernelBuilder ka(node, prefix + "_im2col");
    int xb = ka.operand(0), cb = ka.scratch(0, t, colN);
    Nest nest;
    Expr n = nest.add(ka, N, "n"), c = nest.add(ka, C, "c");
    std::vector<Expr> k(D), o(D), pos(D), conds;
    for (size_t d = 0; d < D; ++d)
      k[d] = nest.add(ka, geo.axes[d].kernel, "k");
    for (size_t d = 0; d < D; ++d)
      o[d] = nest.add(ka, geo.axes[d].out, "o");
    std::vector<Expr> xTerms{kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(geo.inSize))};
    for (size_t d = 0; d < D; ++d) {
      const WindowAxis &a = geo.axes[d];
      pos[d] = kir::add(kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(k[d], i64(a.dilation)));
      bool always = a.padBegin == 0 && (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation < a.in;
      if (!always)
        conds.push_back(inRange(pos[d], 0, a.in));
      xTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
    }
    // Row (c, k) of image n: matrix n*group + c/cg, row (c % cg)*K + k.
    Expr colIdx = colIndex(kir::add(kir::mul(n, i64(group)), kir::div(c, i64(cg))),
                           kir::add(kir::mul(kir::mod(c, i64(cg)), i64(K)), flatIndex(k, kStride)),
                           flatIndex(o, outStride));
    Expr cond = allOf(conds);
    Stmt copy = ka.store(cb, colIdx, ka.load(xb, sumOf(xTerms)));
    Stmt body = isTrue(cond) ? copy : kir::ifThen(cond, copy, ka.store(cb, colIdx, fc(0, t)));
    kernels.push_back(ka.finish(nest.wrap(body), parallelOuter(nest, colN)));
  }
  // Per image and group: out[n, g*mg + i, p] = bias + sum_r w[g*mg + i, r] * src[row(r), p],
  // the register-blocked GEMM of an mg x R weight block by an R x P column block.
  KernelBuilder kb(node, prefix);
  int src =
      pointwise ? kb.operand(0)
      : blocked
          ? (padded ? kb.scratch(0, t,
                                 N * C * numElementsOf(phasedExtents(paddedExtents(geo), phases)))
                    : kb.operand(0))
          : kb.scratch(0, t, colN);
  int wb = kb.operand(1), bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), g = outer.add(kb, group, "g");
  Expr m0 = kir::mul(g, i64(mg));
  Expr srcRow0 = kir::mul(kir::add(kir::mul(n, i64(C)), kir::mul(g, i64(cg))), i64(K));
  Expr outRow0 = kir::add(kir::mul(n, i64(M)), m0);
  GemmOperands go;
  go.a = wb;
  go.b = src;
  go.c = ob;
  go.acc = acc;
  go.aIndex = [&](Expr i, Expr r) { return kir::add(kir::mul(kir::add(m0, i), i64(R)), r); };
  Expr mat = kir::add(kir::mul(n, i64(group)), g);
  go.bIndex = [&](Expr r, Expr p) {
    return pointwise ? kir::add(kir::mul(kir::add(srcRow0, r), i64(P)), p) : colIndex(mat, r, p);
  };
  go.cIndex = [&](Expr i, Expr p) { return kir::add(kir::mul(kir::add(outRow0, i), i64(P)), p); };
  if (hasBias)
    go.init = [&](Expr i) { return kir::cast(kb.load(bb, kir::add(m0, i)), acc); };
  go.strided = GemmOperands::Strided{
      kir::mul(m0, i64(R)),
      pointwise ? kir::mul(srcRow0, i64(P)) : kir::mul(mat, i64(R * P)),
      kir::mul(outRow0, i64(P)), R, 1, P, P};
  if (opts && opts->gpu && acc == DType::F32) {
    // On an OpenCL device: the NDRange GEMM (GpuGemm.cpp), one product per image and group
    // on NDRange dimension 2, its work-groups over tiles of the mg x P result (the direct
    // loops give a GPU a work-item per output row at most).
    go.epilogue = opts->epilogue;
    kernels.push_back(ndrangeGemmKernel(kb, go, t, N * group, mg, R, P, outer.loops, layout, opts));
    return kernels;
  }
  go.packScratch = 1;
  kir::Schedule sched;
  if (blocked)
    go.produceB = [&](int dst, int64_t ldb, Expr col0, Expr cols, Expr k0, Expr kCount) {
      return im2colBlock(kb, geo, C, cg, src, n, g, dst, ldb, col0, cols, k0, kCount);
    };
  Stmt body = gemmNest(kb, go, mg, R, P, cfg, outer.loops, sched);
  kernels.push_back(kb.finish(body, sched));
  return kernels;
}

/// conv_transpose's col2im on an OpenCL device: one work-item per output element, which
/// gathers the column entries of the taps that land on it (tap k of axis d reaches output q
/// from input i = (q + pad - k*dilation) / stride when that divides and lies in the input),
/// instead of the CPU's scatter of each tap row into the output plane (a plane per
/// work-item). Each output element is written once, with its bias.
kir::Kernel col2imGather(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                         int64_t N, int64_t M, DType t, bool hasBias, int64_t colN) {
  size_t D = geo.axes.size();
  int64_t K = geo.kernelSize, I = geo.inSize;
  DType acc = accType(t, /*wide=*/false);
  KernelBuilder kb(node, prefix);
  int cb = kb.scratch(0, acc, colN);
  int bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  std::vector<Expr> q(D), k(D), i(D);
  for (size_t d = 0; d < D; ++d)
    q[d] = outer.add(kb, geo.axes[d].out, "q");
  Expr nm = kir::add(kir::mul(n, i64(M)), m);
  std::string sum = kb.freshName("sum");
  Nest taps;
  std::vector<Expr> conds;
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    k[d] = taps.add(kb, a.kernel, "k");
    Expr num = kir::sub(kir::add(q[d], i64(a.padBegin)), kir::mul(k[d], i64(a.dilation)));
    i[d] = a.stride == 1 ? num : kir::div(num, i64(a.stride));
    conds.push_back(kir::ge(num, i64(0)));
    if (a.stride != 1)
      conds.push_back(eq(kir::mod(num, i64(a.stride)), i64(0)));
    conds.push_back(kir::lt(i[d], i64(a.in)));
  }
  Expr colIdx = kir::add(kir::mul(kir::add(kir::mul(nm, i64(K)), flatIndex(k, kStride)), i64(I)),
                         flatIndex(i, inStride));
  Stmt add = kir::assign(sum, kir::add(kir::var(sum, acc), kb.load(cb, colIdx)));
  std::vector<Expr> oTerms{kir::mul(nm, i64(geo.outSize))};
  for (size_t d = 0; d < D; ++d)
    oTerms.push_back(kir::mul(q[d], i64(outStride[d])));
  Stmt body = kir::block(
      {kir::decl(sum, acc, hasBias ? kir::cast(kb.load(bb, m), acc) : fc(0, acc)),
       taps.wrap(guarded(allOf(conds), add)),
       kb.store(ob, sumOf(oTerms), kir::cast(kir::var(sum, acc), t))});
  int64_t outN = N * M * geo.outSize;
  return kb.finish(outer.wrap(body), parallelOuter(outer, outN * K));
}

/// conv_transpose as GEMM + col2im (the interpreter's method): a first kernel computes, per
/// image n and group g, col[n, g] (R x I, R = mg * taps) = W_g^T (R x cg) * x[n, g] (cg x I),
/// w[g*cg + ci, r] being A(r, ci) (strided: rows 1 apart, columns R apart), as the tunable
/// register-blocked GEMM (Gemm.h: microkernels for f32); the second scatter-adds each
/// (channel, tap) row of col into the output plane (only the taps that land inside it). On an
/// OpenCL device the GEMM is the NDRange GEMM and col2im gathers (col2imGather).
Kernels lowerConvTransposeGemm(const Node &node, const std::string &prefix,
                               const ConvGeometry &geo, int64_t N, int64_t C, int64_t M,
                               int64_t cg, int64_t mg, int64_t group, DType t, bool hasBias,
                               const tuning::LowerOptions *opts) {
  size_t D = geo.axes.size(), L = D - 1;
  int64_t K = geo.kernelSize, I = geo.inSize, P = geo.outSize, R = mg * K;
  DType acc = accType(t, /*wide=*/false);
  int64_t colN = N * M * K * I;
  Kernels kernels;
  {
    KernelBuilder ka(node, prefix + "_gemm");
    int xb = ka.operand(0), wb = ka.operand(1), cb = ka.scratch(0, acc, colN);
    Nest outer;
    Expr n = outer.add(ka, N, "n"), g = outer.add(ka, group, "g");
    Expr w0 = kir::mul(g, i64(cg * R));
    Expr x0 = kir::mul(kir::add(kir::mul(n, i64(C)), kir::mul(g, i64(cg))), i64(I));
    Expr c0 = kir::mul(kir::add(kir::mul(n, i64(group)), g), i64(R * I));
    GemmOperands go;
    go.a = wb;
    go.b = xb;
    go.c = cb;
    go.acc = acc;
    go.aIndex = [&](Expr r, Expr ci) { return kir::add(w0, kir::add(kir::mul(ci, i64(R)), r)); };
    go.bIndex = [&](Expr ci, Expr i) { return kir::add(x0, kir::add(kir::mul(ci, i64(I)), i)); };
    go.cIndex = [&](Expr r, Expr i) { return kir::add(c0, kir::add(kir::mul(r, i64(I)), i)); };
    go.strided = GemmOperands::Strided{w0, x0, c0, 1, R, I, I};
    // Scratch 0 is col and 1 the f16/bf16 accumulator of the second kernel: the GEMM may pack
    // into 2 and 3.
    std::string layout = fmt::format("conv_transpose n{} group{}", N, group);
    if (opts && opts->gpu && acc == DType::F32) {
      // On an OpenCL device: the NDRange GEMM (GpuGemm.cpp), one product per image and group
      // on NDRange dimension 2 (the CPU's register-tile nest ran there as one work-item).
      kernels.push_back(
          ndrangeGemmKernel(ka, go, t, N * group, R, cg, I, outer.loops, layout, opts));
    } else {
      go.packScratch = 2;
      tuning::Config cfg = tuning::chooseConfig(gemmProblem(t, N * group, R, cg, I, layout), opts);
      kir::Schedule sched;
      Stmt body = gemmNest(ka, go, R, cg, I, cfg, outer.loops, sched);
      kernels.push_back(ka.finish(body, sched));
    }
  }
  if (opts && opts->gpu) {
    kernels.push_back(col2imGather(node, prefix, geo, N, M, t, hasBias, colN));
    return kernels;
  }
  KernelBuilder kb(node, prefix);
  int cb = kb.scratch(0, acc, colN);
  int bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  int64_t outN = N * M * P;
  int accb = acc != t ? kb.scratch(1, acc, outN) : ob;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  Expr nm = kir::add(kir::mul(n, i64(M)), m);
  Expr plane = kir::mul(nm, i64(P));
  Nest initN, taps;
  Expr p0 = initN.add(kb, P, "o");
  Stmt initS = initN.wrap(
      kb.store(accb, kir::add(plane, p0), hasBias ? kir::cast(kb.load(bb, m), acc) : fc(0, acc)));
  std::vector<Expr> k(D), iv(D), conds;
  for (size_t d = 0; d < D; ++d)
    k[d] = taps.add(kb, geo.axes[d].kernel, "k");
  for (size_t d = 0; d < L; ++d)
    iv[d] = taps.add(kb, geo.axes[d].in, "i");
  const WindowAxis &last = geo.axes[L];
  auto [lo, cnt] = tapRange(last, k[L], last.in, last.out);
  iv[L] = kir::add(lo, taps.addDynamic(kb, cnt, "t"));
  std::vector<Expr> oTerms{plane};
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    Expr q = kir::add(kir::sub(kir::mul(iv[d], i64(a.stride)), i64(a.padBegin)),
                      kir::mul(k[d], i64(a.dilation)));
    if (d < L)
      conds.push_back(inRange(q, 0, a.out));
    oTerms.push_back(kir::mul(q, i64(outStride[d])));
  }
  Expr colIdx = kir::add(kir::mul(kir::add(kir::mul(nm, i64(K)), flatIndex(k, kStride)), i64(I)),
                         flatIndex(iv, inStride));
  Expr oIdx = sumOf(oTerms);
  Stmt upd = kb.store(accb, oIdx, kir::add(kb.load(accb, oIdx), kb.load(cb, colIdx)));
  // The guard of the outer axes sits around the last axis' loop.
  Nest lastN;
  lastN.loops.push_back(taps.loops.back());
  taps.loops.pop_back();
  Stmt scatter = taps.wrap(guarded(allOf(conds), lastN.wrap(upd)));
  std::vector<Stmt> stmts{outer.wrap(kir::block({initS, scatter}))};
  if (accb != ob) {
    Nest fin;
    Expr f = fin.add(kb, outN, "f");
    stmts.push_back(fin.wrap(kb.store(ob, f, kir::cast(kb.load(accb, f), t))));
  }
  kernels.push_back(kb.finish(kir::block(stmts), parallelOuter(outer, outN + colN)));
  return kernels;
}

/// Convs with few taps per output (cg * KH * KW <= kRowConvTaps: the first layer of a small
/// CNN, a conv with one or three input channels) run directly, vectorized along the output
/// row, with no im2col copy and no GEMM of a handful of rows.
constexpr int64_t kRowConvTaps = 80;

bool rowConvApplies(const ConvGeometry &geo, int64_t cg, DType t) {
  if (geo.axes.size() != 2 || cg * geo.kernelSize > kRowConvTaps || !isFloat(t))
    return false;
  const WindowAxis &w = geo.axes[1];
  // Contiguous vector loads need stride 1 along the row, and a row long enough to fill them.
  return w.stride == 1 && w.out >= 16;
}

/// The row-vectorized direct conv. A first kernel copies the input into scratch with its
/// padding made explicit (zeros), so that every tap of every output column lies inside it
/// (the input of such a conv has few channels: the copy is small next to the output).
/// The second runs, for each image n, block of up to 8 output channels of a group and output
/// row oh, the row in vectors of 16 columns (the last one shifted back to end at the row's
/// end, recomputing a few columns) with one accumulator per channel of the block: each tap
/// loads 16 consecutive padded inputs and multiplies them by the tap's weight.
Kernels lowerConvRows(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                      int64_t N, int64_t C, int64_t M, int64_t cg, int64_t mg, DType t,
                      bool hasBias) {
  const WindowAxis &ah = geo.axes[0], &aw = geo.axes[1];
  int64_t OH = ah.out, OW = aw.out, KH = ah.kernel, KW = aw.kernel;
  // The padded input: every tap of every output inside it.
  Extents padded = paddedExtents(geo);
  int64_t HP = padded[0], WP = padded[1];
  DType acc = accType(t, /*wide=*/false);
  Kernels kernels{padInputKernel(node, prefix, geo, N, C, t)};
  int64_t mt = 1; // channels of a block: the largest divisor of mg up to 8
  for (int64_t d = std::min<int64_t>(8, mg); d >= 1; --d)
    if (mg % d == 0) {
      mt = d;
      break;
    }
  int64_t blocks = M / mt, taps = cg * KH * KW;
  KernelBuilder kb(node, prefix);
  int pb = kb.scratch(0, t, N * C * HP * WP), wb = kb.operand(1),
      bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  Nest outer;
  Expr q = outer.add(kb, N * blocks * OH, "q");
  Expr n = kir::div(q, i64(blocks * OH)), blk = kir::mod(kir::div(q, i64(OH)), i64(blocks)),
       oh = kir::mod(q, i64(OH));
  Expr m0 = kir::mul(blk, i64(mt));
  Expr c0 = kir::mul(kir::div(m0, i64(mg)), i64(cg)); // the group's first input channel
  std::vector<Stmt> row;
  // A tap's weight, uniform across the vectorized loop (a broadcast operand of the FMA).
  auto weight = [&](int64_t j, int64_t tap) {
    return kir::cast(kb.load(wb, kir::add(kir::mul(kir::add(m0, i64(j)), i64(taps)), i64(tap))),
                     acc);
  };
  // Vectors of 16 columns; the last starts at OW - 16.
  int64_t vectors = (OW + 15) / 16;
  std::string vN = kb.freshName("v"), lN = kb.freshName("l");
  Expr ow0 = kir::min(kir::mul(kir::var(vN), i64(16)), i64(OW - 16));
  Expr ow = kir::add(ow0, kir::var(lN));
  std::vector<Stmt> st;
  std::vector<std::string> aN(mt);
  for (int64_t j = 0; j < mt; ++j) {
    aN[j] = kb.freshName("acc");
    Expr init = bb >= 0 ? kir::cast(kb.load(bb, kir::add(m0, i64(j))), acc) : fc(0, acc);
    st.push_back(kir::decl(aN[j], acc, init));
  }
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        Expr ih = kir::add(kir::mul(oh, i64(ah.stride)), i64(kh * ah.dilation));
        Expr at = kir::add(
            kir::mul(kir::add(kir::mul(kir::add(kir::mul(n, i64(C)), kir::add(c0, i64(ci))),
                                       i64(HP)),
                              ih),
                     i64(WP)),
            kir::add(ow, i64(kw * aw.dilation)));
        std::string xN = kb.freshName("x");
        st.push_back(kir::decl(xN, acc, kir::cast(kb.load(pb, at), acc)));
        int64_t tap = (ci * KH + kh) * KW + kw;
        for (int64_t j = 0; j < mt; ++j)
          st.push_back(kir::assign(
              aN[j], kir::add(kir::var(aN[j], acc), kir::mul(kir::var(xN, acc), weight(j, tap)))));
      }
  for (int64_t j = 0; j < mt; ++j) {
    Expr at = kir::add(
        kir::mul(kir::add(kir::mul(kir::add(kir::mul(n, i64(M)), kir::add(m0, i64(j))), i64(OH)),
                          oh),
                 i64(OW)),
        ow);
    st.push_back(kb.store(ob, at, kir::cast(kir::var(aN[j], acc), t)));
  }
  row.push_back(kir::forLoop(vN, i64(vectors), kir::forLoop(lN, i64(16), kir::block(st))));
  kir::Schedule sched = parallelOuter(outer, N * M * OH * OW * taps);
  sched.steps.push_back({kir::ScheduleStep::Vectorize, lN, 0, {}});
  kernels.push_back(kb.finish(outer.wrap(kir::block(row)), sched));
  return kernels;
}

/// What conv's lowerings share: the checked operands and the geometry.
struct ConvSetup {
  ConvGeometry geo;
  int64_t N = 0, C = 0, M = 0, cg = 0, mg = 0, group = 1, outN = 0;
  DType t;
  bool hasBias = false;
};

Expected<ConvSetup> convSetup(const Node &node, bool transpose) {
  const Value *xv = node.operand(0), *wv = node.operand(1);
  const Value *biasV = node.operand(2);
  DType t = xv->dtype();
  if (!isFloat(t) || wv->dtype() != t || (biasV && biasV->dtype() != t))
    return node.error("expects float operands of one dtype, got {}", dtypeName(t));
  Extents xs = extentsOf(xv), ws = extentsOf(wv);
  NNC_ASSIGN_OR_RETURN(ConvGeometry geo, convGeometry(node, xs, ws, transpose));
  int64_t group = node.getInt("group", 1);
  int64_t N = xs[0], C = xs[1], M, cg, mg;
  if (!transpose) {
    M = ws[0];
    if (group < 1 || C % group != 0 || M % group != 0 || ws[1] * group != C)
      return node.error("input {} and weight {} do not match group {}", extentsStr(xs),
                        extentsStr(ws), group);
    cg = C / group;
    mg = M / group;
  } else {
    if (group < 1 || C % group != 0 || ws[0] != C)
      return node.error("input {} and weight {} do not match group {}", extentsStr(xs),
                        extentsStr(ws), group);
    cg = C / group;
    mg = ws[1];
    M = mg * group;
  }
  if (biasV && numElementsOf(extentsOf(biasV)) != M)
    return node.error("bias has {} values for {} output channels",
                      numElementsOf(extentsOf(biasV)), M);
  ConvSetup s{geo, N, C, M, cg, mg, group, N * M * geo.outSize, t, biasV != nullptr};
  return s;
}

/// Conv and conv_transpose as direct loops: the generic lowering, for any size (the
/// templates of Templates.cpp take the convs their faster paths fit).
Expected<Kernels> lowerConvLike(const Node &node, const std::string &prefix, bool transpose) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, transpose));
  const ConvGeometry &geo = s.geo;
  const Value *biasV = node.operand(2);
  DType t = s.t;
  int64_t N = s.N, C = s.C, M = s.M, cg = s.cg, mg = s.mg, outN = s.outN;
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  size_t D = geo.axes.size(), L = D - 1;
  DType acc = accType(t, /*wide=*/false);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), wb = kb.operand(1), bb = biasV ? kb.operand(2) : -1, ob = kb.result(0);
  int accb = acc != t ? kb.scratch(0, acc, outN) : ob;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);

  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  Expr g = kir::div(m, i64(mg)), mi = kir::mod(m, i64(mg));
  Expr plane = kir::mul(kir::add(kir::mul(n, i64(M)), m), i64(geo.outSize));
  Expr initValue = bb >= 0 ? kir::cast(kb.load(bb, m), acc) : fc(0, acc);
  const WindowAxis &last = geo.axes[L];
  Stmt body;
  if (!transpose) {
    // for n, m, o[0..L): out row = bias; for ci, k[0..L) (if the taps are inside):
    //   for kw: for the ow whose tap is inside: out[ow] += w * x.
    std::vector<Expr> o(D), pos(D);
    std::vector<Expr> outTerms{plane}, conds;
    for (size_t d = 0; d < L; ++d) {
      o[d] = outer.add(kb, geo.outSpatial[d], "o");
      outTerms.push_back(kir::mul(o[d], i64(outStride[d])));
    }
    Expr rowBase = sumOf(outTerms);
    Nest initN;
    Expr ow0 = initN.add(kb, last.out, "ow");
    Stmt initS = initN.wrap(kb.store(accb, kir::add(rowBase, ow0), initValue));
    Nest red;
    Expr ci = red.add(kb, cg, "c");
    std::vector<Expr> kv(D);
    Expr xBase = kir::mul(kir::add(kir::mul(n, i64(C)), kir::add(kir::mul(g, i64(cg)), ci)),
                          i64(geo.inSize));
    Expr wBase = kir::mul(kir::add(kir::mul(m, i64(cg)), ci), i64(geo.kernelSize));
    std::vector<Expr> xTerms{xBase}, wTerms{wBase};
    for (size_t d = 0; d < L; ++d) {
      const WindowAxis &a = geo.axes[d];
      kv[d] = red.add(kb, a.kernel, "k");
      pos[d] = kir::add(kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(kv[d], i64(a.dilation)));
      bool always = a.padBegin == 0 && (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation < a.in;
      if (!always)
        conds.push_back(inRange(pos[d], 0, a.in));
      xTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
      wTerms.push_back(kir::mul(kv[d], i64(kStride[d])));
    }
    Nest kwN;
    Expr kw = kwN.add(kb, last.kernel, "kw");
    auto [lo, cnt] = tapRange(last, kw, last.out, last.in);
    Nest tN;
    Expr tt = tN.addDynamic(kb, cnt, "t");
    Expr ow = kir::add(lo, tt);
    Expr iw = kir::add(kir::sub(kir::mul(ow, i64(last.stride)), i64(last.padBegin)),
                       kir::mul(kw, i64(last.dilation)));
    std::string wname = kb.freshName("w");
    Expr oIdx = kir::add(rowBase, ow);
    Stmt upd = kb.store(
        accb, oIdx,
        kir::add(kb.load(accb, oIdx),
                 kir::mul(kir::var(wname, acc),
                          kir::cast(kb.load(xb, kir::add(sumOf(xTerms), iw)), acc))));
    Stmt kwS = kwN.wrap(kir::block(
        {kir::decl(wname, acc, kir::cast(kb.load(wb, kir::add(sumOf(wTerms), kw)), acc)),
         tN.wrap(upd)}));
    body = kir::block({initS, red.wrap(guarded(allOf(conds), kwS))});
  } else {
    // for n, m: out plane = bias; for ci, i[0..L), k[0..L) (if the targets are inside):
    //   for kw: for the iw whose target is inside: out[...] += w * x[iw].
    Nest initN;
    Expr p0 = initN.add(kb, geo.outSize, "o");
    Stmt initS = initN.wrap(kb.store(accb, kir::add(plane, p0), initValue));
    Nest red;
    Expr ci = red.add(kb, cg, "c");
    Expr c = kir::add(kir::mul(g, i64(cg)), ci);
    std::vector<Expr> iv(D), kv(D), conds;
    std::vector<Expr> xTerms{kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(geo.inSize))};
    std::vector<Expr> wTerms{
        kir::mul(kir::add(kir::mul(c, i64(mg)), mi), i64(geo.kernelSize))};
    std::vector<Expr> oTerms{plane};
    for (size_t d = 0; d < L; ++d)
      iv[d] = red.add(kb, geo.axes[d].in, "i");
    for (size_t d = 0; d < L; ++d) {
      const WindowAxis &a = geo.axes[d];
      kv[d] = red.add(kb, a.kernel, "k");
      Expr q = kir::add(kir::sub(kir::mul(iv[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(kv[d], i64(a.dilation)));
      conds.push_back(inRange(q, 0, a.out));
      xTerms.push_back(kir::mul(iv[d], i64(inStride[d])));
      wTerms.push_back(kir::mul(kv[d], i64(kStride[d])));
      oTerms.push_back(kir::mul(q, i64(outStride[d])));
    }
    Nest kwN;
    Expr kw = kwN.add(kb, last.kernel, "kw");
    auto [lo, cnt] = tapRange(last, kw, last.in, last.out);
    Nest tN;
    Expr tt = tN.addDynamic(kb, cnt, "t");
    Expr iw = kir::add(lo, tt);
    Expr ow = kir::add(kir::sub(kir::mul(iw, i64(last.stride)), i64(last.padBegin)),
                       kir::mul(kw, i64(last.dilation)));
    std::string wname = kb.freshName("w");
    Expr oIdx = kir::add(sumOf(oTerms), ow);
    Stmt upd = kb.store(
        accb, oIdx,
        kir::add(kb.load(accb, oIdx),
                 kir::mul(kir::var(wname, acc),
                          kir::cast(kb.load(xb, kir::add(sumOf(xTerms), iw)), acc))));
    Stmt kwS = kwN.wrap(kir::block(
        {kir::decl(wname, acc, kir::cast(kb.load(wb, kir::add(sumOf(wTerms), kw)), acc)),
         tN.wrap(upd)}));
    body = kir::block({initS, red.wrap(guarded(allOf(conds), kwS))});
  }
  std::vector<Stmt> stmts{outer.wrap(body)};
  if (accb != ob) {
    Nest fin;
    Expr f = fin.add(kb, outN, "f");
    stmts.push_back(fin.wrap(kb.store(ob, f, kir::cast(kb.load(accb, f), t))));
  }
  int64_t work = N * M * (transpose ? geo.inSize : geo.outSize) * cg * geo.kernelSize;
  return Kernels{kb.finish(kir::block(stmts), parallelOuter(outer, work))};
}

// ---- pooling -----------------------------------------------------------------------------------

struct PoolGeometry {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial;
  int64_t inSize = 1, outSize = 1, planes = 1, kernelSize = 1;
};

Expected<PoolGeometry> poolGeometry(const Node &node, const Extents &xs) {
  if (xs.size() < 3)
    return node.error("input must have rank >= 3 (N, C, spatial...), got {}", extentsStr(xs));
  size_t n = xs.size() - 2;
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  if (ks.size() != n)
    return node.error("kernel_shape has {} values for {} spatial axes", ks.size(), n);
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  PoolGeometry g;
  g.planes = xs[0] * xs[1];
  for (size_t i = 0; i < n; ++i) {
    NNC_ASSIGN_OR_RETURN(WindowAxis ax, windowAxis(node, a, i, xs[i + 2], ks[i]));
    g.axes.push_back(ax);
    g.inSpatial.push_back(xs[i + 2]);
    g.outSpatial.push_back(ax.out);
    g.inSize *= xs[i + 2];
    g.outSize *= ax.out;
    g.kernelSize *= ks[i];
  }
  return g;
}

/// One step of a max pool's running maximum without branches: `best` (which starts at NaN
/// for floats, at the lowest value otherwise) becomes v when v > best or best is NaN. NaNs are
/// thus skipped unless every tap is NaN, as ONNX MaxPool's reference does.
Expr maxPoolStep(Expr v, Expr best, bool isFloatType) {
  Expr take = isFloatType ? bor(gt(v, best), isNaN(best)) : gt(v, best);
  return kir::select(take, v, best);
}

/// ceil(max(v, 0) / b) for b > 0: the first tap of a window at or past input position 0 (v =
/// -start), or the taps before the input's end (v = in - start), per dilation b.
Expr ceilDivPos(Expr v, int64_t b) {
  return kir::div(kir::add(kir::max(v, i64(0)), i64(b - 1)), i64(b));
}

/// The pass of separablePool over the last axis (window `a`) of `cur` into `next`: per
/// output column, the taps inside the input, which for the columns whose window lies wholly
/// inside (all but a few at the row ends) are all K of them: a static loop, vectorized
/// across the columns.
kir::Kernel lastAxisPoolPass(KernelBuilder &kb, const WindowAxis &a, const Extents &cur,
                             const Extents &next, int src, int dst, bool isMax, bool includePad) {
  const DType t = DType::F32;
  size_t last = next.size() - 1;
  std::vector<int64_t> srcStride = stridesOf(cur), dstStride = stridesOf(next);
  Nest outer;
  std::vector<Expr> o(next.size());
  for (size_t x = 0; x < last; ++x)
    o[x] = outer.add(kb, next[x], "o");
  Expr srcRow = i64(0), dstRow = i64(0);
  for (size_t x = 0; x < last; ++x) {
    srcRow = kir::add(srcRow, kir::mul(o[x], i64(srcStride[x])));
    dstRow = kir::add(dstRow, kir::mul(o[x], i64(dstStride[x])));
  }
  std::vector<Stmt> row;
  srcRow = kb.bind(row, "srow", DType::I64, srcRow);
  dstRow = kb.bind(row, "drow", DType::I64, dstRow);
  // Output column ow; `inside`: its window lies wholly inside the input.
  auto column = [&](Expr ow, bool inside) -> Stmt {
    std::vector<Stmt> body;
    Expr start =
        kb.bind(body, "start", DType::I64, kir::sub(kir::mul(ow, i64(a.stride)), i64(a.padBegin)));
    Expr lo =
        inside ? i64(0)
               : kb.bind(body, "lo", DType::I64, ceilDivPos(kir::sub(i64(0), start), a.dilation));
    Expr count =
        inside ? i64(a.kernel)
               : kb.bind(
                     body, "count", DType::I64,
                     kir::max(kir::sub(kir::min(i64(a.kernel),
                                                ceilDivPos(kir::sub(i64(a.in), start), a.dilation)),
                                       lo),
                              i64(0)));
    Expr divisor =
        includePad
            ? kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start), a.dilation))
            : count;
    Expr init = isMax ? (inside ? fc(std::numeric_limits<double>::quiet_NaN(), t)
                                : kir::select(kir::lt(count, i64(1)), lowestOf(t),
                                              fc(std::numeric_limits<double>::quiet_NaN(), t)))
                      : fc(0, t);
    std::string acc = kb.freshName("acc"), tv = kb.freshName("t");
    Expr accE = kir::var(acc, t);
    Expr pos = kir::add(start, kir::mul(kir::add(lo, kir::var(tv)), i64(a.dilation)));
    Expr v = kb.load(src, kir::add(srcRow, pos));
    body.push_back(kir::decl(acc, t, init));
    body.push_back(kir::forLoop(
        tv, count, kir::assign(acc, isMax ? maxPoolStep(v, accE, true) : kir::add(accE, v))));
    Expr result = isMax ? accE : kir::op(OpKind::Div, {accE, kir::cast(divisor, t)});
    body.push_back(kb.store(dst, kir::add(dstRow, ow), result));
    return kir::block(body);
  };
  // Columns [first, end) have their windows inside: start >= 0 and start + (K-1)*dil < in.
  int64_t OW = next[last];
  int64_t first = std::min<int64_t>(OW, (a.padBegin + a.stride - 1) / a.stride);
  int64_t reach = a.in - 1 - (a.kernel - 1) * a.dilation + a.padBegin;
  int64_t end = reach < 0 ? first : std::max(first, std::min<int64_t>(OW, reach / a.stride + 1));
  kir::Schedule sched = parallelOuter(outer, numElementsOf(next) * a.kernel);
  auto range = [&](int64_t from, int64_t to, bool inside) {
    std::string jv = kb.freshName("c");
    if (inside)
      sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
    row.push_back(
        kir::forLoop(jv, i64(to - from), column(kir::add(i64(from), kir::var(jv)), inside)));
  };
  if (first > 0)
    range(0, first, false);
  if (end > first)
    range(first, end, true);
  if (OW > end)
    range(end, OW, false);
  return kb.finish(outer.wrap(kir::block(row)), sched);
}

/// An f32 pool over 3 or more spatial axes (max with one result, or average) as one pass per
/// axis, innermost first, each a kernel pooling one axis of the previous pass's result (the
/// input first) into f32 scratch, the last into the result. Max and sum over a box are max
/// and sum over its axes in turn (maxPoolStep's max, which skips NaNs unless all are, is
/// associative), and a box's tap count is the product of its axes' (each pass divides by its
/// own). A pass over an outer axis runs its taps along whole rows of the last axis, which
/// vectorize: per tap, row = step(row, input row). S3D's 3x3x3 max pools took the generic
/// loop, a scalar window walk per output (27 taps with bounds per tap). An axis the pool
/// leaves alone takes no pass.
Kernels separablePool(const Node &node, const std::string &prefix, const PoolGeometry &geo,
                      bool isMax, bool includePad) {
  size_t D = geo.axes.size(), last = D; // extents: [planes, spatial...]
  Extents cur{geo.planes};
  cur.insert(cur.end(), geo.inSpatial.begin(), geo.inSpatial.end());
  std::vector<size_t> axes;
  for (size_t d = D; d-- > 0;) {
    const WindowAxis &a = geo.axes[d];
    if (a.kernel != 1 || a.stride != 1 || a.padBegin != 0 || a.padEnd != 0 || a.out != a.in)
      axes.push_back(d);
  }
  const DType t = DType::F32;
  Kernels kernels;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t d = axes[i], e = d + 1; // e: the axis in the extents
    bool lastPass = i + 1 == axes.size();
    const WindowAxis &a = geo.axes[d];
    Extents next = cur;
    next[e] = a.out;
    KernelBuilder kb(node, lastPass ? prefix : prefix + "_axis" + std::to_string(d));
    int src =
        i == 0 ? kb.operand(0) : kb.scratch(static_cast<int>((i - 1) % 2), t, numElementsOf(cur));
    int dst = lastPass ? kb.result(0) : kb.scratch(static_cast<int>(i % 2), t, numElementsOf(next));
    std::vector<int64_t> srcStride = stridesOf(cur), dstStride = stridesOf(next);
    if (e == last) {
      kernels.push_back(lastAxisPoolPass(kb, a, cur, next, src, dst, isMax, includePad));
      cur = next;
      continue;
    }
    // An outer axis: whole rows of the last axis per tap (one column: element by element).
    bool rows = next[last] > 1;
    Nest outer;
    std::vector<Expr> o(next.size());
    for (size_t x = 0; x < next.size(); ++x)
      if (!rows || x != last)
        o[x] = outer.add(kb, next[x], "o");
    std::vector<Stmt> body;
    auto bind = [&](const char *name, DType bt, Expr v) { return kb.bind(body, name, bt, v); };
    // Taps of output o along this axis inside the input: [lo, hi) (LocalWindow's rule).
    Expr start =
        bind("start", DType::I64, kir::sub(kir::mul(o[e], i64(a.stride)), i64(a.padBegin)));
    Expr lo = bind("lo", DType::I64, ceilDivPos(kir::sub(i64(0), start), a.dilation));
    Expr hi = kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in), start), a.dilation));
    Expr count = bind("count", DType::I64, kir::max(kir::sub(hi, lo), i64(0)));
    Expr divisor = count;
    if (includePad)
      divisor =
          kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start), a.dilation));
    // Max starts from NaN (the first tap replaces it), or from the lowest value when no tap
    // is inside; a sum from 0.
    Expr init = isMax ? kir::select(kir::lt(count, i64(1)), lowestOf(t),
                                    fc(std::numeric_limits<double>::quiet_NaN(), t))
                      : fc(0, t);
    init = bind("init", t, init);
    Expr srcBase = i64(0), dstBase = i64(0);
    for (size_t x = 0; x < next.size(); ++x) {
      if (rows && x == last)
        continue;
      dstBase = kir::add(dstBase, kir::mul(o[x], i64(dstStride[x])));
      if (x != e)
        srcBase = kir::add(srcBase, kir::mul(o[x], i64(srcStride[x])));
    }
    srcBase = bind("sbase", DType::I64, srcBase);
    dstBase = bind("dbase", DType::I64, dstBase);
    std::string tv = kb.freshName("t");
    Expr pos = kir::add(start, kir::mul(kir::add(lo, kir::var(tv)), i64(a.dilation)));
    Expr from = kir::add(srcBase, kir::mul(pos, i64(srcStride[e])));
    auto step = [&](Expr acc, Expr v) {
      return isMax ? maxPoolStep(v, acc, true) : kir::add(acc, v);
    };
    auto finish = [&](Expr acc) {
      return isMax ? acc : kir::op(OpKind::Div, {acc, kir::cast(divisor, t)});
    };
    kir::Schedule sched = parallelOuter(outer, numElementsOf(next) * a.kernel);
    if (rows) {
      // Per tap, the whole row: dst row = step(dst row, src row).
      auto rowLoop = [&](const std::function<Stmt(Expr)> &f) {
        std::string jv = kb.freshName("j");
        sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
        return kir::forLoop(jv, i64(next[last]), f(kir::var(jv)));
      };
      body.push_back(rowLoop([&](Expr j) { return kb.store(dst, kir::add(dstBase, j), init); }));
      body.push_back(kir::forLoop(
          tv, count, rowLoop([&](Expr j) {
            Expr at = kir::add(dstBase, j);
            return kb.store(dst, at, step(kb.load(dst, at), kb.load(src, kir::add(from, j))));
          })));
      if (!isMax)
        body.push_back(rowLoop([&](Expr j) {
          Expr at = kir::add(dstBase, j);
          return kb.store(dst, at, finish(kb.load(dst, at)));
        }));
    } else {
      std::string acc = kb.freshName("acc");
      Expr accE = kir::var(acc, t);
      body.push_back(kir::decl(acc, t, init));
      body.push_back(kir::forLoop(tv, count, kir::assign(acc, step(accE, kb.load(src, from)))));
      body.push_back(kb.store(dst, dstBase, finish(accE)));
    }
    kernels.push_back(kb.finish(outer.wrap(kir::block(body)), sched));
    cur = next;
  }
  return kernels;
}

Expected<Kernels> lowerPool(const Node &node, const std::string &prefix, bool isMax) {
  const Value *xv = node.operand(0);
  DType t = xv->dtype();
  if (isMax ? !isNumeric(t) : !isFloat(t))
    return node.error("expects a {} dtype, got {}", isMax ? "numeric" : "float", dtypeName(t));
  Extents xs = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(PoolGeometry geo, poolGeometry(node, xs));
  int64_t outN = geo.planes * geo.outSize;
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  size_t D = geo.axes.size();
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial);
  // Lanes: an innermost axis of at most 16 the window does not pool (kernel 1, stride 1, no
  // pad; the channel lanes of the blocked NCHWc layout). Each output row of lanes then walks
  // the window once with one accumulator per lane, which vectorizes; a window loop per
  // element stays scalar.
  const WindowAxis &la = geo.axes.back();
  bool lanes = D >= 2 && la.kernel == 1 && la.stride == 1 && la.padBegin == 0 &&
               la.padEnd == 0 && la.out == la.in && la.in >= 4 && la.in <= 16 &&
               (isMax ? node.numResults() == 1 : accType(t, /*wide=*/false) == t);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  Nest outer, taps;
  Expr p = outer.add(kb, geo.planes, "p");
  std::vector<Expr> o(D), pos(D), inCount(D), padCount(D);
  std::vector<Expr> outTerms{kir::mul(p, i64(geo.outSize))};
  for (size_t d = 0; d < D; ++d) {
    // The lane axis contributes its own loop variable below (here 0).
    o[d] = lanes && d + 1 == D ? i64(0) : outer.add(kb, geo.outSpatial[d], "o");
    outTerms.push_back(kir::mul(o[d], i64(outStride[d])));
  }
  // Only the taps inside the input are visited (like the interpreter, so a huge kernel or pad
  // costs nothing): along axis d, the window starting at input position `start` covers taps
  // [lo, hi) with lo = ceil(max(-start, 0) / dil), hi = min(K, ceil(max(in - start, 0) / dil)).
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    Expr start = kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin));
    int64_t maxPos = (a.out - 1) * a.stride - a.padBegin + (a.kernel - 1) * a.dilation;
    Expr k;
    if (a.padBegin == 0 && maxPos < a.in) {
      k = taps.add(kb, a.kernel, "k");
      inCount[d] = i64(a.kernel);
    } else {
      Expr lo = ceilDivPos(kir::sub(i64(0), start), a.dilation);
      Expr hi = kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in), start), a.dilation));
      inCount[d] = kir::max(kir::sub(hi, lo), i64(0));
      k = kir::add(lo, taps.addDynamic(kb, inCount[d], "t"));
    }
    padCount[d] = maxPos < a.in + a.padEnd
                      ? i64(a.kernel)
                      : kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start),
                                                           a.dilation));
    pos[d] = kir::add(start, kir::mul(k, i64(a.dilation)));
  }
  std::vector<Expr> inTerms{kir::mul(p, i64(geo.inSize))};
  for (size_t d = 0; d < D; ++d)
    inTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
  Expr xIdx = sumOf(inTerms);
  Expr yIdx = sumOf(outTerms);
  int64_t work = outN * geo.kernelSize;
  // Taps of a window: those inside the input, or (includePad) inside the padded input too.
  bool dynamicTaps = false;
  for (size_t d = 0; d < D; ++d)
    dynamicTaps |= inCount[d]->kind != kir::ExprKind::IntImm;
  auto windowCount = [&](bool includePad) {
    Expr count = i64(1);
    for (size_t d = 0; d < D; ++d)
      count = kir::mul(count, includePad ? padCount[d] : inCount[d]);
    return count;
  };
  bool includePad = !isMax && node.getInt("count_include_pad", 0) != 0;

  // 3-D and beyond, f32: one pass per axis.
  if (!lanes && D >= 3 && t == DType::F32 && (isMax ? node.numResults() == 1 : true))
    return separablePool(node, prefix, geo, isMax, includePad);
  if (lanes) {
    // One accumulator local per lane, updated lane by lane in each tap: LLVM packs the
    // lanes' loads and selects into vectors (SLP), and nothing goes through memory.
    int64_t L = la.in;
    Expr count = windowCount(includePad);
    DType ct = isMax ? computeType(t) : t;
    bool fl = isFloat(ct);
    std::vector<std::string> acc(L);
    std::vector<Stmt> body, step;
    // Max: maxPoolStep from NaN; a window with no tap gives the lowest value.
    Expr init = isMax ? (fl ? fc(std::numeric_limits<double>::quiet_NaN(), ct) : lowestOf(ct))
                      : fc(0, ct);
    for (int64_t l = 0; l < L; ++l) {
      acc[l] = kb.freshName("acc");
      Expr a = kir::var(acc[l], ct);
      body.push_back(kir::decl(acc[l], ct, init));
      Expr v = kir::cast(kb.load(xb, kir::add(xIdx, i64(l))), ct);
      Expr next = isMax ? maxPoolStep(v, a, fl) : kir::add(a, v);
      step.push_back(kir::assign(acc[l], next));
    }
    body.push_back(taps.wrap(kir::block(step)));
    for (int64_t l = 0; l < L; ++l) {
      Expr a = kir::var(acc[l], ct), r = a;
      if (isMax && fl && dynamicTaps)
        r = kir::select(kir::lt(count, i64(1)), lowestOf(ct), a);
      if (!isMax)
        r = kir::op(OpKind::Div, {a, kir::cast(count, ct)});
      body.push_back(kb.store(yb, kir::add(yIdx, i64(l)), kir::cast(r, t)));
    }
    return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, work))};
  }

  if (isMax) {
    bool withIndices = node.numResults() > 1;
    bool colMajor = node.getInt("storage_order", 0) == 1;
    DType ct = computeType(t);
    bool fl = isFloat(ct);
    std::string best = kb.freshName("best"), bi = kb.freshName("bi"), any = kb.freshName("any"),
                nan = kb.freshName("nan"), v = kb.freshName("v");
    Expr bestE = kir::var(best, ct), anyE = kir::var(any, DType::Bool),
         nanE = kir::var(nan, DType::Bool), vE = kir::var(v, ct);
    Expr idx = xIdx;
    if (colMajor) {
      std::vector<Expr> terms{kir::mul(p, i64(geo.inSize))};
      int64_t s = 1;
      for (size_t d = 0; d < D; ++d) {
        terms.push_back(kir::mul(pos[d], i64(s)));
        s *= geo.inSpatial[d];
      }
      idx = sumOf(terms);
    }
    if (!withIndices) {
      // Branch-free (maxPoolStep), so the loop over outputs vectorizes; a window with no tap
      // gives the lowest value. With indices, the
      // flags below also track where the maximum is.
      Expr count = windowCount(false);
      Stmt tapS = taps.wrap(kir::block({kir::decl(v, ct, kir::cast(kb.load(xb, xIdx), ct)),
                                        kir::assign(best, maxPoolStep(vE, bestE, fl))}));
      Expr result = bestE;
      if (fl && dynamicTaps)
        result = kir::select(kir::lt(count, i64(1)), lowestOf(ct), bestE);
      Stmt body = kir::block(
          {kir::decl(best, ct,
                     fl ? fc(std::numeric_limits<double>::quiet_NaN(), ct) : lowestOf(ct)),
           tapS, kb.store(yb, yIdx, kir::cast(result, t))});
      return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
    }
    // Branch-free, so the loop over outputs vectorizes: a tap is taken when it is the first
    // non-NaN one or larger than the best so far (the first of equal maxima keeps its index);
    // NaNs are only noted (an all-NaN window gives NaN).
    std::string take = kb.freshName("take");
    Expr takeE = kir::var(take, DType::Bool);
    Expr takeV = bor(bnot(anyE), gt(vE, bestE));
    if (fl)
      takeV = kir::land(bnot(isNaN(vE)), takeV);
    std::vector<Stmt> update{kir::decl(v, ct, kir::cast(kb.load(xb, xIdx), ct)),
                             kir::decl(take, DType::Bool, takeV),
                             kir::assign(best, kir::select(takeE, vE, bestE)),
                             kir::assign(bi, kir::select(takeE, idx, kir::var(bi))),
                             kir::assign(any, bor(anyE, takeE))};
    if (fl)
      update.push_back(kir::assign(nan, bor(nanE, isNaN(vE))));
    Stmt tapS = taps.wrap(kir::block(update));
    std::vector<Stmt> body{kir::decl(best, ct, lowestOf(ct)),
                           kir::decl(any, DType::Bool, kir::intImm(0, DType::Bool))};
    if (withIndices)
      body.push_back(kir::decl(bi, DType::I64, i64(-1)));
    if (fl)
      body.push_back(kir::decl(nan, DType::Bool, kir::intImm(0, DType::Bool)));
    body.push_back(tapS);
    Expr result = bestE;
    if (fl)
      result = kir::select(kir::land(bnot(anyE), nanE),
                           fc(std::numeric_limits<double>::quiet_NaN(), ct), bestE);
    body.push_back(kb.store(yb, yIdx, kir::cast(result, t)));
    if (withIndices)
      body.push_back(kb.store(kb.result(1), yIdx, kir::var(bi)));
    // Vectorized across output positions: scalar, LLVM turns the selects back into branches,
    // which random data mispredicts (many times the cost of the max alone on LeNet's 2x2
    // pools).
    kir::Schedule sched = parallelOuter(outer, work);
    if (!dynamicTaps && !outer.empty() && outer.extent(outer.loops.size() - 1) >= 4)
      sched.steps.push_back({kir::ScheduleStep::Vectorize, outer.loops.back().first, 0, {}});
    return Kernels{kb.finish(outer.wrap(kir::block(body)), sched)};
  }

  DType acc = accType(t, /*wide=*/false);
  std::string sum = kb.freshName("sum");
  Expr sumE = kir::var(sum, acc);
  Expr count = windowCount(includePad);
  Stmt body = kir::block(
      {kir::decl(sum, acc, fc(0, acc)),
       taps.wrap(kir::assign(sum, kir::add(sumE, kir::cast(kb.load(xb, xIdx), acc)))),
       kb.store(yb, yIdx,
                kir::cast(kir::op(OpKind::Div, {sumE, kir::cast(count, acc)}), t))});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
}

// ---- lrn ---------------------------------------------------------------------------------------

Expected<Kernels> lowerLRN(const Node &node, const std::string &prefix) {
  const Value *xv = node.operand(0);
  DType t = xv->dtype();
  Extents xs = extentsOf(xv);
  if (!isFloat(t) || xs.size() < 2)
    return node.error("expects a float input of rank >= 2, got {} {}", dtypeName(t),
                      extentsStr(xs));
  int64_t size = node.getInt("size", 0);
  if (size < 1)
    return node.error("size {} must be >= 1", size);
  double alpha = node.getFloat("alpha", 1e-4), beta = node.getFloat("beta", 0.75),
         bias = node.getFloat("bias", 1.0);
  int64_t N = xs[0], C = xs[1], inner = 1;
  for (size_t d = 2; d < xs.size(); ++d)
    inner *= xs[d];
  if (N * C * inner == 0)
    return Kernels{emptyKernel(node, prefix)};
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  const DType ct = DType::F64;
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  Nest outer, win;
  Expr n = outer.add(kb, N, "n"), c = outer.add(kb, C, "c"), i = outer.add(kb, inner, "i");
  Expr lo = kir::max(kir::sub(c, i64(before)), i64(0));
  Expr hi = kir::min(kir::add(c, i64(after)), i64(C - 1));
  Expr tt = win.addDynamic(kb, kir::max(kir::add(kir::sub(hi, lo), i64(1)), i64(0)), "t");
  Expr cc = kir::add(lo, tt);
  std::string sq = kb.freshName("sq"), v = kb.freshName("v");
  Expr sqE = kir::var(sq, ct), vE = kir::var(v, ct);
  Expr nC = kir::mul(n, i64(C));
  Stmt acc = win.wrap(kir::block(
      {kir::decl(v, ct, kir::cast(kb.load(xb, kir::add(kir::mul(kir::add(nC, cc), i64(inner)), i)),
                                  ct)),
       kir::assign(sq, kir::add(sqE, kir::mul(vE, vE)))}));
  Expr at = kir::add(kir::mul(kir::add(nC, c), i64(inner)), i);
  Expr denom = kir::op(OpKind::Pow, {kir::add(fc(bias, ct), kir::mul(fc(alpha / static_cast<double>(size), ct), sqE)),
                                     fc(beta, ct)});
  Stmt body = kir::block(
      {kir::decl(sq, ct, fc(0, ct)), acc,
       kb.store(yb, at, kir::cast(kir::op(OpKind::Div, {kir::cast(kb.load(xb, at), ct), denom}), t))});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, N * C * inner * size))};
}

} // namespace

Expected<Kernels> lowerMatMulGemm(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts) {
  return lowerMatMul(node, prefix, opts);
}

Expected<Kernels> lowerMatMulNDRange(const Node &node, const std::string &prefix,
                                     const tuning::LowerOptions *opts) {
  return lowerMatMul(node, prefix, opts, nullptr, MatMulPath::NDRange);
}

std::optional<ConvFacts> convFacts(const Node &node, bool transpose) {
  Expected<ConvSetup> s = convSetup(node, transpose);
  if (!s)
    return std::nullopt; // the generic lowerer reports the error
  ConvFacts f;
  f.outElements = s->outN;
  f.rowsFit = !transpose && rowConvApplies(s->geo, s->cg, s->t);
  f.colBytes = transpose
                   ? s->N * s->M * s->geo.kernelSize * s->geo.inSize *
                         int64_t(dtypeSize(accType(s->t, /*wide=*/false)))
                   : s->N * s->C * s->geo.kernelSize * s->geo.outSize * int64_t(dtypeSize(s->t));
  const char *algo = std::getenv("NNC_CONV_ALGO");
  f.forceDirect = algo && std::string(algo) == "direct";
  return f;
}

Expected<Kernels> lowerConvRowsDirect(const Node &node, const std::string &prefix) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, false));
  return lowerConvRows(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.t, s.hasBias);
}

Expected<Kernels> lowerConvIm2colGemm(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, false));
  return lowerConvIm2col(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.t, s.hasBias, opts);
}

Expected<Kernels> lowerConvTransposeGemmCol2im(const Node &node, const std::string &prefix,
                                               const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, true));
  return lowerConvTransposeGemm(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.group, s.t,
                                s.hasBias, opts);
}

Expected<Kernels> lowerMatMulFinished(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts,
                                      const MakeElementFinish &makeFinish, MatMulPath path) {
  return lowerMatMul(node, prefix, opts, makeFinish, path);
}

void registerNNLowerers(LowererTable &t) {
  t[OpKind::Einsum] = lowerEinsum;
  t[OpKind::Conv] = [](const Node &n, const std::string &p) { return lowerConvLike(n, p, false); };
  t[OpKind::ConvTranspose] = [](const Node &n, const std::string &p) {
    return lowerConvLike(n, p, true);
  };
  t[OpKind::MaxPool] = [](const Node &n, const std::string &p) { return lowerPool(n, p, true); };
  t[OpKind::AvgPool] = [](const Node &n, const std::string &p) { return lowerPool(n, p, false); };
  t[OpKind::LRN] = lowerLRN;
}

} // namespace nnc::lower

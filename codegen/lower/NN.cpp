// Lowerers of the linear-algebra ops: matmul and einsum. Matmul runs the tunable
// register-blocked GEMM of Gemm.h (or the NDRange GEMM on an OpenCL device); einsum is a
// direct loop nest. The matmul fast paths are kernel templates (Templates.cpp chooses among
// them). Semantics follow runtime/interp/MatMul.cpp. The window ops: Conv.cpp, ConvIm2col.cpp,
// ConvTranspose.cpp, Pool.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "Epilogue.h"
#include "Gemm.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

std::vector<int64_t> batchStrides(size_t nb, const Extents &in, int64_t matSize) {
  std::vector<int64_t> s(nb, 0);
  int64_t st = matSize;
  size_t off = nb - in.size();
  for (size_t i = in.size(); i-- > 0;) {
    s[off + i] = in[i] == 1 ? 0 : st;
    st *= in[i];
  }
  return s;
}

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

// ---- matmul ------------------------------------------------------------------------------------

/// The GEMM as one OpenCL NDRange kernel (GpuGemm.cpp), its tile from the tuned or default
/// config of the "gemm_opencl" problem, the batch entries on NDRange dimension 2.
kir::Kernel ndrangeGemmKernel(KernelBuilder &kb, const GemmOperands &go, DType t, int64_t batch,
                              int64_t m, int64_t k, int64_t n,
                              const std::vector<std::pair<std::string, Expr>> &batchLoops,
                              const std::string &layout, const tuning::LowerOptions *opts) {
  tuning::Problem p = gpuGemmProblem(t, batch, m, k, n, layout);
  GpuGemmTile tile = gpuGemmTileOf(tuning::chooseConfig(p, opts));
  std::vector<kir::LocalBuffer> locals;
  Stmt body = gpuGemmNest(kb, go, batch, m, k, n, batchLoops, tile, locals);
  kir::Kernel kernel = kb.finish(body, {});
  kernel.locals = std::move(locals);
  kernel.flops = p.flops;
  return kernel;
}

Expected<Kernels> lowerMatMul(const Node &node, const std::string &prefix,
                              const tuning::LowerOptions *opts,
                              const MakeElementFinish &makeFinish = nullptr,
                              MatMulPath path = MatMulPath::Tiles) {
  const Value *av = node.operand(0), *bv = node.operand(1);
  DType t = av->dtype();
  // An f32 A by a bf16 weight in panels of k pairs (--precision bf16; ir/GemmPacking.h).
  bool bf16 = node.hasAttr("packed_n") && t == DType::F32 && bv->dtype() == DType::BF16;
  if ((t != bv->dtype() && !bf16) || !isNumeric(t))
    return node.error("operands must have one numeric dtype, got {} and {}", dtypeName(t),
                      dtypeName(bv->dtype()));
  Extents as = extentsOf(av), bs = extentsOf(bv);
  if (as.empty() || bs.empty())
    return node.error("operands must have rank >= 1");
  // A weight packed into column panels (ir/GemmPacking.h): [..., P, K, nr] holding
  // [..., K, packed_n]; one matrix of panels takes P * K * nr elements (bf16: [..., P,
  // ceil(K/2), nr, 2]).
  int64_t packedNr = 0, packedSize = 0;
  if (bf16) {
    size_t r = bs.size();
    if (r < 4 || as.size() < 2 || bs[r - 1] != 2 || bs[r - 4] * bs[r - 2] < node.getInt("packed_n") ||
        bs[r - 3] != (as.back() + 1) / 2)
      return node.error("packed operand 1 {} does not hold {} columns of {} rows in bf16 pairs",
                        extentsStr(bs), node.getInt("packed_n"), as.back());
    packedNr = bs[r - 2];
    packedSize = bs[r - 4] * bs[r - 3] * bs[r - 2] * 2;
    Extents unpacked(bs.begin(), bs.end() - 4);
    unpacked.push_back(as.back());
    unpacked.push_back(node.getInt("packed_n"));
    bs = unpacked;
  } else if (node.hasAttr("packed_n")) {
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
  std::vector<int64_t> sa = batchStrides(nb, batchA, m * k),
                       sb = batchStrides(nb, batchB, packedNr > 0 ? packedSize : k * n),
                       so = batchStrides(nb, *batch, m * n);
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
    if (bf16) {
      int64_t pairs = (k + 1) / 2;
      Expr pair = kir::add(kir::mul(kir::div(j, i64(packedNr)), i64(pairs)), kir::div(p, i64(2)));
      return kir::add(bOff, kir::add(kir::mul(kir::add(kir::mul(pair, i64(packedNr)),
                                                       kir::mod(j, i64(packedNr))),
                                              i64(2)),
                                     kir::mod(p, i64(2))));
    }
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
  g.bf16 = bf16;
  g.sumRun = node.getInt("sum_run", 0);
  if (node.hasAttr("sum_run") && g.sumRun < 1)
    return node.error("sum_run {} is not a positive number of products", g.sumRun);
  if (bf16 && aOff->kind != kir::ExprKind::IntImm)
    return node.error("a bf16 weight with batch dims {} that move operand 0 (only a [K, N] "
                      "weight, whose batch entries fold into the rows, is packed as bf16)",
                      extentsStr(*batch));
  // The finish of each result element: a group template's, or on the CPU the epilogue of a
  // group whose template this is (the result seen as rows of the GEMM's n columns: a
  // matrix-vector product's, n = 1, too).
  ElementFinish finish;
  if (makeFinish)
    finish = makeFinish(kb);
  else if (opts && opts->epilogue && path != MatMulPath::NDRange) {
    finish = opts->epilogue->inPlace(kb, outN / n, n);
    opts->epilogue->markApplied();
  }
  if (finish)
    g.finish = [&, finish](Expr i, Expr j, std::vector<Stmt> &hoisted) {
      return finish(kir::add(rowOff, i), j, hoisted);
    };
  int64_t batchCount = outN / (m * n);
  if (path == MatMulPath::NDRange) {
    // For an OpenCL device: the NDRange GEMM (GpuGemm.cpp), its batch loops on dimension 2.
    if (!opts || !opts->gpu || g.acc != DType::F32 || bf16)
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
  std::string layout =
      fmt::format("matmul batch{} sa{} sb{}{}", extentsStr(*batch), extentsStr(sa),
                  extentsStr(sb),
                  packedNr > 0 ? fmt::format(" {}packed{}", bf16 ? "bf16" : "", packedNr) : "");
  kir::Schedule sched;
  bool skinny = path == MatMulPath::Skinny && gemvEligible(kb, g, m, k, tuning::cpuOf(opts));
  // The distinct B matrices of a batch of weights packed at compile time (a Winograd conv's):
  // one per entry of the batch dims B moves along. (A produced B, attention's K, is in cache.)
  int64_t bMatrices = 1;
  for (size_t d = 0; d < nb && packedNr > 0; ++d)
    if (sb[d] != 0)
      bMatrices *= (*batch)[d];
  tuning::Problem p = skinny ? gemvProblem(t, batchCount, m, k, n, layout)
                             : gemmProblem(t, batchCount, m, k, n, layout, false, bMatrices);
  tuning::Config cfg = tuning::chooseConfig(p, opts);
  Stmt body = skinny ? gemvNest(kb, g, m, k, n, cfg, outer.loops, sched)
                     : gemmNest(kb, g, m, k, n, cfg, outer.loops, sched);
  kir::Kernel kernel = kb.finish(body, sched);
  kernel.flops = p.flops;
  kernel.flopsElems = g.bf16 ? kir::GemmElems::BF16 : kir::GemmElems::F32;
  return Kernels{std::move(kernel)};
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

} // namespace

Expected<Kernels> lowerMatMulGemm(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts) {
  return lowerMatMul(node, prefix, opts);
}

Expected<Kernels> lowerMatMulGemv(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts) {
  return lowerMatMul(node, prefix, opts, nullptr, MatMulPath::Skinny);
}

Expected<Kernels> lowerMatMulNDRange(const Node &node, const std::string &prefix,
                                     const tuning::LowerOptions *opts) {
  return lowerMatMul(node, prefix, opts, nullptr, MatMulPath::NDRange);
}

kir::Kernel nnl::ndrangeGemm(KernelBuilder &kb, const GemmOperands &go, DType t, int64_t batch,
                             int64_t m, int64_t k, int64_t n,
                             const std::vector<std::pair<std::string, Expr>> &batchLoops,
                             const std::string &layout, const tuning::LowerOptions *opts) {
  return ndrangeGemmKernel(kb, go, t, batch, m, k, n, batchLoops, layout, opts);
}

Expected<Kernels> lowerMatMulFinished(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts,
                                      const MakeElementFinish &makeFinish, MatMulPath path) {
  return lowerMatMul(node, prefix, opts, makeFinish, path);
}

void registerNNLowerers(LowererTable &t) {
  t[OpKind::Einsum] = lowerEinsum;
  registerConvLowerers(t);
  registerConvIntegerLowerer(t);
  registerPoolLowerers(t);
  registerGridSampleLowerer(t);
  registerDetectionLowerers(t);
  registerDetLowerer(t);
  registerLinearAttentionLowerer(t);
  registerUniqueLowerer(t);
  registerMLLowerers(t);
}

} // namespace nnc::lower

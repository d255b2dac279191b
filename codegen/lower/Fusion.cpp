// Code generation of fusion groups (ir/FusionGroup.h): the elementwise members of a group are
// composed into one kernel expression (the load of an intermediate value is replaced by the
// expression that computes it, leaves are loaded with broadcasting index math), so no
// intermediate of a group gets a buffer.
//
// Algorithm (lowerUnit of a group):
//  1. Without an anchor: one loop nest over the root's extents, collapsed like a single
//     elementwise op's (dims that every leaf has in full or broadcasts merge); the innermost
//     body declares a local for every member value used more than once, then stores the
//     root's expression.
//  2. With an anchor (matmul, conv): the group's lower::Epilogue E (Epilogue.h) is built once
//     and handed to the anchor's template. A template whose kernel stores each result element
//     once, with its final value, at the element's flat index I (the blocked conv, Winograd's
//     output transform, the row conv, the OpenCL GEMM's work-items) writes `t = v; out[I] =
//     E(t, leaves at I)` there itself, the leaves' indices derived from I; one that
//     accumulates onto its result (the CPU GEMM, the direct convs, col2im) finishes each
//     element in place once it is complete (Epilogue::inPlace). After any other template (no
//     such place: the OpenCL GEMM's GemmTile path) E runs as one pass over the
//     finished result: a loop at the end of the kernel on the CPU, a kernel of its own on an
//     OpenCL device; when E changes the dtype, the anchor accumulates in a scratch buffer
//     instead, unless its template stores the converted values itself (the integer templates:
//     KernelTemplate::convertsEpilogue, requantizing the i32 sums at their final stores). A
//     matmul anchor whose result keeps its dtype applies E in place inside its GEMM,
//     per cache block (lowerMatMulFinished, the group template epilogue.gemm_finish), so the
//     result is not read back from memory in a second pass.
#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <map>

#include "Epilogue.h"
#include "Gemm.h"
#include "LowerUtil.h"
#include "Lowerers.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {

namespace {

using kir::Expr;
using kir::Stmt;

using lower::Epilogue;
using lower::LoopExtents;

/// 1. A group without an anchor: its own loop nest.
Expected<std::vector<kir::Kernel>> lowerPointwiseGroup(const LoweringUnit &u, Epilogue &ep,
                                                       const std::string &prefix) {
  const Value *res = u.node->result();
  int64_t count = lower::numElementsOf(lower::extentsOf(res));
  if (count == 0)
    return std::vector<kir::Kernel>{};
  kir::Kernel k;
  k.name = prefix;
  std::vector<int> bufOf(u.operands.size(), -1);
  for (size_t i = 0; i < u.operands.size(); ++i) {
    bufOf[i] = static_cast<int>(k.buffers.size());
    k.buffers.push_back(ep.inputBuffer(i));
  }
  int ob = static_cast<int>(k.buffers.size());
  k.buffers.push_back({"out0", lower::movedType(res->dtype()), count, kir::BufferRole::Result, 0,
                       /*written=*/true});
  for (size_t i = 0; i < u.operands.size(); ++i)
    if (ep.readsOnlyAtElement(i))
      k.buffers[ob].inPlaceOver.push_back(bufOf[i]);
  const Extents &ext = ep.space().out;
  std::vector<std::string> loops;
  std::vector<Expr> idx;
  for (size_t d = 0; d < ext.size(); ++d) {
    loops.push_back("i" + std::to_string(d));
    idx.push_back(kir::var(loops.back()));
  }
  std::vector<Stmt> hoisted, body;
  Epilogue::Inputs in;
  in.buffer = [&](size_t i) { return bufOf[i]; };
  in.load = [&](int b, Expr at) { return kir::load(b, k.buffers[b].dtype, std::move(at)); };
  Expr value = ep.compose(
      "v",
      [&](size_t i) {
        return ep.leafValue(i, "vs" + std::to_string(i), in, hoisted, [&](const Extents &le) {
          return lower::broadcastIndex(idx, le);
        });
      },
      nullptr, body);
  body.push_back(kir::store(ob, lower::flatIndex(idx, lower::stridesOf(ext)), value));
  Stmt s = body.size() == 1 ? body[0] : kir::block(body);
  for (size_t d = ext.size(); d-- > 0;)
    s = kir::forLoop(loops[d], kir::intImm(ext[d]), s);
  if (!hoisted.empty()) {
    hoisted.push_back(s);
    s = kir::block(hoisted);
  }
  k.body = s;
  k.schedule = lower::defaultSchedule(loops, ext);
  return std::vector<kir::Kernel>{std::move(k)};
}

/// 2a. A matmul anchor whose result keeps its dtype: the epilogue finishes each element in
/// place inside the GEMM (lowerMatMulFinished: per cache block, while the block is in cache),
/// instead of a pass over the whole result after it.
Expected<std::vector<kir::Kernel>> lowerFinishedMatMulGroup(const LoweringUnit &u, Epilogue &ep,
                                                            const std::string &prefix,
                                                            const tuning::LowerOptions &opts,
                                                            lower::MatMulPath path) {
  const Node &anchor = *u.anchor;
  int64_t count = ep.numElements();
  int64_t cols = std::max<int64_t>(lower::extentsOf(anchor.result()).back(), 1);
  int64_t rows = count / cols;
  auto makeFinish = [&](lower::KernelBuilder &kb) -> lower::ElementFinish {
    return ep.inPlace(kb, rows, cols);
  };
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks,
                       lower::lowerMatMulFinished(anchor, prefix, &opts, makeFinish, path));
  for (kir::Kernel &k : ks)
    ep.renumberOperands(k);
  return ks;
}

/// 2b. A group with an anchor: the anchor's kernels, from the anchor's template. A template
/// that takes the epilogue (KernelTemplate::takesEpilogue; convertsEpilogue too when the
/// members change the anchor's dtype) applies it where it stores a final element of the
/// result, into a result buffer of the group's dtype. Otherwise (its stores are not final, a
/// generic lowerer, or a dtype change it does not take) the epilogue runs as one pass over the
/// finished result:
/// in the result buffer itself when the types agree, else from a scratch accumulator. On the
/// CPU the pass ends the kernel that writes the result (a CPU kernel runs its statements in
/// sequence); on an OpenCL device it is a kernel of its own (a kernel is one NDRange: a pass
/// after the anchor's grid in the same kernel would run on one work-item).
Expected<std::vector<kir::Kernel>> lowerAnchorGroup(const LoweringUnit &u, Epilogue &ep,
                                                    const std::string &prefix,
                                                    const tuning::LowerOptions &opts) {
  const Node &anchor = *u.anchor;
  tuning::LowerOptions o = opts;
  if (ep.appliesAtStores())
    o.epilogue = &ep;
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerNode(anchor, prefix, o));
  DType resType = ep.resultType();
  DType anchorType = lower::movedType(anchor.result()->dtype());
  int64_t count = ep.numElements();
  int nextScratch = 0;
  for (const kir::Kernel &k : ks)
    for (const kir::BufferDecl &b : k.buffers)
      if (b.role == kir::BufferRole::Scratch)
        nextScratch = std::max(nextScratch, b.index + 1);
  // The epilogue runs once, in or after the one kernel that writes the anchor's result.
  int writers = 0;
  for (const kir::Kernel &k : ks)
    for (const kir::BufferDecl &b : k.buffers)
      writers += b.role == kir::BufferRole::Result;
  if (writers != 1)
    return anchor.error("epilogue fusion needs exactly one kernel writing the result, got {}",
                        writers);
  std::deque<kir::Kernel> separate; // passes of their own (OpenCL), appended to ks
  for (kir::Kernel &k : ks) {
    ep.renumberOperands(k);
    int rb = -1;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      const kir::BufferDecl &d = k.buffers[b];
      if (d.role != kir::BufferRole::Result)
        continue;
      if (d.index != 0)
        return anchor.error("kernel '{}' writes result {}; epilogue fusion needs one result",
                            k.name, d.index);
      rb = static_cast<int>(b);
    }
    if (rb < 0)
      continue;
    // A template that applied the epilogue stored the group's dtype.
    if (k.buffers[rb].dtype != (ep.applied() ? resType : anchorType) ||
        k.buffers[rb].numElements != count)
      return anchor.error("kernel '{}': its result buffer does not match the group's result",
                          k.name);
    if (ep.applied())
      continue;
    int src = rb, ob = rb;
    if (k.buffers[rb].dtype != resType) {
      kir::BufferDecl &acc = k.buffers[rb];
      acc.role = kir::BufferRole::Scratch;
      acc.index = nextScratch++;
      acc.name = "tmp" + std::to_string(acc.index);
      if (!opts.gpu) {
        ob = static_cast<int>(k.buffers.size());
        k.buffers.push_back({"out0", resType, count, kir::BufferRole::Result, 0, /*written=*/true});
      }
    }
    if (opts.gpu) {
      kir::Kernel e;
      e.name = k.name + "_epilogue";
      e.buffers.push_back(k.buffers[rb]);
      e.buffers[0].written = e.buffers[0].role == kir::BufferRole::Result;
      src = ob = 0;
      if (k.buffers[rb].role == kir::BufferRole::Scratch) {
        ob = 1;
        e.buffers.push_back({"out0", resType, count, kir::BufferRole::Result, 0, /*written=*/true});
      }
      e.body = ep.pass(e, src, ob, /*before=*/nullptr);
      separate.push_back(std::move(e));
      continue;
    }
    std::vector<Stmt> body{k.body};
    Stmt loops = ep.pass(k, src, ob, &body);
    body.push_back(loops);
    k.body = kir::block(body);
  }
  for (kir::Kernel &e : separate)
    ks.push_back(std::move(e));
  return ks;
}

/// 3. An attention group, per batch entry b and block of up to kAttnRows query rows:
///    scores[r, :] = Q[b, i0 + r, :]·K^T[b] (the GEMM nest, microkernels for f32, into scratch, in
///    the matmul's accumulator type), then per row the epilogue (scale, mask, ...; none when the
///    scores are softmax's operand as they are, in its dtype), its maximum and e = exp(x - max)
///    with the sum s, then out[b, i0 + r, :] = (e·V[b]) / s (a second GEMM whose finish
///    divides the row's E results by its sum, rather than its T probabilities before). Only
///    a block of score rows per batch entry is ever stored (scratch of up to kAttnRows x T
///    per entry), never the [.., S, T] matrix.
constexpr int64_t kAttnRows = 32;

Expected<std::vector<kir::Kernel>> lowerAttentionGroup(const LoweringUnit &u, Epilogue &ep,
                                                       const std::string &prefix,
                                                       const tuning::LowerOptions &opts) {
  const CpuTarget &cpu = opts.cpu;
  using lower::extentsOf;
  using lower::nnl::i64;
  const Node &mm1 = *u.anchor, &mm2 = *u.node;
  const Value *qv = mm1.operand(0), *ktv = mm1.operand(1), *vv = mm2.operand(1);
  const Value *scores = u.softmax->operand(0);
  Extents qe = extentsOf(qv), ke = extentsOf(ktv), ve = extentsOf(vv),
          oe = extentsOf(mm2.result()), se = extentsOf(scores);
  DType t = qv->dtype();
  size_t r = qe.size();
  bool ok = r >= 2 && ke.size() == r && ve.size() == r && oe.size() == r && se.size() == r &&
            (t == DType::F32 || t == DType::F64) && ktv->dtype() == t && vv->dtype() == t &&
            scores->dtype() == t && u.softmax->result()->dtype() == t;
  for (size_t d = 0; ok && d + 2 < r; ++d)
    ok = ke[d] == qe[d] && ve[d] == qe[d] && oe[d] == qe[d];
  if (!ok)
    return mm2.error("attention fusion needs Q, K^T, V and the result of one float dtype, "
                     "rank >= 2 and equal batch dims; got {}, {}, {} and {}",
                     extentsStr(qe), extentsStr(ke), extentsStr(ve), extentsStr(oe));
  int64_t S = qe[r - 2], D = qe[r - 1], T = ke[r - 1], E = ve[r - 1];
  int64_t B = lower::numElementsOf(Extents(qe.begin(), qe.end() - 2));
  if (ke[r - 2] != D || ve[r - 2] != T || oe[r - 2] != S || oe[r - 1] != E ||
      se[r - 2] != S || se[r - 1] != T)
    return mm2.error("attention fusion: inner dims of {}, {} and {} do not match",
                     extentsStr(qe), extentsStr(ke), extentsStr(ve));
  if (B * S * E == 0)
    return std::vector<kir::Kernel>{};
  // Accumulators as the matmul lowering's (f32 for f32).
  DType acc1 = lower::nnl::accType(t, /*wide=*/false), acc2 = acc1;
  lower::KernelBuilder kb(mm2, prefix);
  std::vector<int> bufOf(u.operands.size());
  for (size_t i = 0; i < u.operands.size(); ++i)
    bufOf[i] = kb.declare(ep.inputBuffer(i));
  auto inputIndex = [&](const Value *v) {
    return static_cast<size_t>(std::find(u.operands.begin(), u.operands.end(), v) -
                               u.operands.begin());
  };
  int qb = bufOf[inputIndex(qv)], ktb = bufOf[inputIndex(ktv)], vb = bufOf[inputIndex(vv)];
  int ob = kb.result(0);
  // The two GEMMs take the target CPU's default configs (they are parts of this kernel, not
  // problems the tuner times on their own).
  tuning::LowerOptions gemmOpts(cpu);
  auto gemmConfig = [&](DType acc, int64_t m, int64_t k, int64_t n, const char *what) {
    tuning::Config c = tuning::chooseConfig(lower::gemmProblem(acc, 1, m, k, n, what), &gemmOpts);
    c["par"] = 0;
    return c;
  };
  // Blocks of whole register tiles of the scores' GEMM (30 rows for 6-row tiles): a row edge
  // in every block would run a short tile, whose few accumulator chains leave the FMA
  // latency uncovered, once per block.
  int64_t rows = std::min(S, kAttnRows);
  if (S > kAttnRows) {
    tuning::Config probe = gemmConfig(acc1, rows, D, T, "attention scores");
    int64_t mr = probe.count("mr") ? probe.at("mr") : 1;
    if (mr > 1 && mr <= rows)
      rows = rows / mr * mr;
  }
  int sb = kb.scratch(0, acc1, B * rows * T), pb = kb.scratch(1, t, B * rows * T),
      sumb = kb.scratch(2, t, B * rows);
  Expr b = kir::var("b");
  auto ld = [&](int buf, Expr idx) { return kb.load(buf, std::move(idx)); };
  // Row r of the block's scratch matrices (row-major, T per row).
  auto blockAt = [&](Expr row, Expr col) {
    return kir::add(kir::mul(kir::add(kir::mul(b, i64(rows)), row), i64(T)), col);
  };
  // Where the block's row `row` keeps its softmax sum.
  auto rowSumAt = [&](Expr row) { return kir::add(kir::mul(b, i64(rows)), row); };
  kir::Schedule sched;

  // The work of one block of `m` rows starting at query row i0.
  auto blockBody = [&](Expr i0, int64_t m) {
    std::vector<Stmt> body;
    auto qRowOf = [&](Expr rr) { return kir::add(kir::mul(b, i64(S)), kir::add(i0, rr)); };
    // Scores.
    lower::GemmOperands g1;
    g1.a = qb;
    g1.b = ktb;
    g1.c = sb;
    g1.acc = acc1;
    g1.aIndex = [&](Expr rr, Expr d) { return kir::add(kir::mul(qRowOf(rr), i64(D)), d); };
    g1.bIndex = [&](Expr d, Expr jj) {
      return kir::add(kir::mul(kir::add(kir::mul(b, i64(D)), d), i64(T)), jj);
    };
    g1.cIndex = blockAt;
    g1.strided = lower::GemmOperands::Strided{kir::mul(qRowOf(i64(0)), i64(D)),
                                              kir::mul(b, i64(D * T)),
                                              kir::mul(b, i64(rows * T)), D, 1, T, T};
    tuning::Config c1 = gemmConfig(acc1, m, D, T, "attention scores");
    body.push_back(lower::gemmNest(kb, g1, m, D, T, c1, {}, sched));

    // Per row: epilogue into p and the maximum; exp(x - max) into p and the sum, kept for
    // P·V's finish. Every name is fresh: a kernel has this block twice when S has a tail.
    std::string rv = kb.freshName("r"), iv = kb.freshName("i"), jv = kb.freshName("j"),
                j2v = kb.freshName("j"), sv = kb.freshName("sv"), evn = kb.freshName("ev"),
                mxv = kb.freshName("mx"), sumv = kb.freshName("sum"), exv = kb.freshName("ex");
    Expr rr = kir::var(rv), j = kir::var(jv), mx = kir::var(mxv, t), sum = kir::var(sumv, t);
    LoopExtents env{{"b", B}, {iv, S}, {jv, T}};
    std::vector<Stmt> row{kir::decl(iv, DType::I64, kir::add(i0, rr))};
    std::string epPrefix = kb.freshName("ep") + "_";
    Epilogue::Inputs in;
    in.buffer = [&](size_t i) { return bufOf[i]; };
    in.load = ld;
    std::vector<Stmt> decls;
    Expr ev = ep.compose(
        epPrefix,
        [&](size_t i) -> Expr { // scalar leaves: once per row, before its loop
          return ep.leafValue(i, epPrefix + "s" + std::to_string(i), in, row,
                              [&](const Extents &le) {
                                Expr at = kir::add(
                                    kir::mul(kir::add(kir::mul(b, i64(S)), kir::var(iv)), i64(T)),
                                    j);
                                return ep.leafIndexAt(at, le, env);
                              });
        },
        kir::var(sv, t), decls);
    // Without an epilogue, the maximum and exp read the scores where the GEMM left them.
    bool identity =
        decls.empty() && ev->kind == kir::ExprKind::Var && ev->name == sv && acc1 == t;
    int xb = identity ? sb : pb;
    if (!identity) {
      std::vector<Stmt> epi{kir::decl(sv, t, kir::cast(ld(sb, blockAt(rr, j)), t))};
      for (const Stmt &s : decls)
        epi.push_back(s);
      epi.push_back(kir::decl(evn, t, ev));
      epi.push_back(kb.store(pb, blockAt(rr, j), kir::var(evn, t)));
      row.push_back(kir::forLoop(jv, i64(T), kir::block(epi)));
    }
    // The row's maximum, in vector lanes: NaN operands may be ignored there, since a NaN
    // score also makes its exp, the row's sum and so every result of the row NaN (as a +inf
    // does through exp(inf - inf)), the same results as a NaN-propagating maximum gives.
    std::string jmv = kb.freshName("jm");
    row.push_back(kir::decl(mxv, t, kir::constant(-std::numeric_limits<double>::infinity(), t)));
    row.push_back(kir::forLoop(
        jmv, i64(T), kir::accumulateIgnoringNaN(mxv, t, ld(xb, blockAt(rr, kir::var(jmv))))));
    sched.steps.push_back({kir::ScheduleStep::Vectorize, jmv, 0, {}});
    row.push_back(kir::decl(sumv, t, kir::constant(0, t)));
    Expr j2 = kir::var(j2v);
    row.push_back(kir::forLoop(
        j2v, i64(T),
        kir::block(
            {kir::decl(exv, t, kir::op(OpKind::Exp, {kir::sub(ld(xb, blockAt(rr, j2)), mx)})),
             kb.store(pb, blockAt(rr, j2), kir::var(exv, t)),
             kir::accumulate(sumv, kir::add(sum, kir::var(exv, t)))})));
    row.push_back(kb.store(sumb, rowSumAt(rr), sum));
    body.push_back(kir::forLoop(rv, i64(m), kir::block(row)));

    // out = P·V.
    lower::GemmOperands g2;
    g2.a = pb;
    g2.b = vb;
    g2.c = ob;
    g2.acc = acc2;
    g2.aIndex = blockAt;
    g2.bIndex = [&](Expr jj, Expr e) {
      return kir::add(kir::mul(kir::add(kir::mul(b, i64(T)), jj), i64(E)), e);
    };
    g2.cIndex = [&](Expr r2, Expr e) { return kir::add(kir::mul(qRowOf(r2), i64(E)), e); };
    g2.strided = lower::GemmOperands::Strided{kir::mul(b, i64(rows * T)), kir::mul(b, i64(T * E)),
                                              kir::mul(qRowOf(i64(0)), i64(E)), T, 1, E, E};
    // Softmax's division, on the row's E results.
    g2.finish = [&](Expr r2, Expr e, std::vector<Stmt> &) {
      Expr at = g2.cIndex(r2, e);
      return kb.store(ob, at, kir::div(ld(ob, at), ld(sumb, rowSumAt(r2))));
    };
    tuning::Config c2 = gemmConfig(acc2, m, T, E, "attention values");
    body.push_back(lower::gemmNest(kb, g2, m, T, E, c2, {}, sched));
    return kir::block(body);
  };

  std::vector<Stmt> perBatch;
  int64_t full = S / rows, tail = S % rows;
  if (full > 0) {
    std::string blk = kb.freshName("blk");
    perBatch.push_back(
        kir::forLoop(blk, i64(full), blockBody(kir::mul(kir::var(blk), i64(rows)), rows)));
  }
  if (tail > 0)
    perBatch.push_back(blockBody(i64(full * rows), tail));
  Stmt body = kir::forLoop("b", i64(B), kir::block(perBatch));
  if (B >= 2 && B * S * T * (D + E) >= 65536)
    sched.steps.push_back({kir::ScheduleStep::Parallel, "b", 0, {}});
  kir::Kernel k = kb.finish(body, sched);
  // The two GEMMs' work (they are no tunable problems of their own).
  k.flops = 2.0 * double(B) * double(S) * double(T) * double(D + E);
  return std::vector<kir::Kernel>{std::move(k)};
}

} // namespace

Expected<std::vector<LoweringUnit>> loweringUnits(const Graph &g) {
  NNC_ASSIGN_OR_RETURN(std::vector<FusionGroup> groups, fusionGroups(g));
  std::map<const Node *, const FusionGroup *> groupOf;
  for (const FusionGroup &fg : groups)
    if (fg.members.size() > 1)
      for (const Node *m : fg.members)
        groupOf[m] = &fg;
  std::vector<LoweringUnit> units;
  for (Node *n : g.nodes()) {
    if (n->kind() == OpKind::Constant)
      continue;
    auto it = groupOf.find(n);
    LoweringUnit u;
    u.node = n;
    if (it == groupOf.end()) {
      u.operands = n->operands();
    } else {
      const FusionGroup &fg = *it->second;
      if (fg.root != n)
        continue;
      u.operands = fg.inputs;
      u.members.assign(fg.members.begin(), fg.members.end());
      u.anchor = fg.anchor;
      u.softmax = fg.softmax;
    }
    units.push_back(std::move(u));
  }
  return units;
}

namespace lower {

Expected<Kernels> lowerAttentionGroupUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Epilogue> ep, Epilogue::of(u));
  return lowerAttentionGroup(u, *ep, prefix, opts);
}

bool finishesInGemm(const LoweringUnit &u) {
  if (!u.anchor || u.softmax)
    return false;
  const Node &anchor = *u.anchor;
  return anchor.kind() == OpKind::MatMul && anchor.numOperands() == 2 && anchor.operand(1) &&
         anchor.operand(1)->rank() >= 2 && !lower::extentsOf(anchor.result()).empty() &&
         lower::movedType(u.node->result()->dtype()) ==
             lower::movedType(anchor.result()->dtype()) &&
         !isStorageOnly(anchor.result()->dtype()) &&
         lower::numElementsOf(lower::extentsOf(anchor.result())) ==
             lower::numElementsOf(lower::extentsOf(u.node->result()));
}

Expected<Kernels> lowerFinishedMatMulUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Epilogue> ep, Epilogue::of(u));
  return lowerFinishedMatMulGroup(u, *ep, prefix, opts, MatMulPath::Tiles);
}

Expected<Kernels> lowerFinishedMatMulUnitGemv(const LoweringUnit &u, const std::string &prefix,
                                              const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Epilogue> ep, Epilogue::of(u));
  return lowerFinishedMatMulGroup(u, *ep, prefix, opts, MatMulPath::Skinny);
}

Expected<Kernels> lowerFinishedMatMulUnitNDRange(const LoweringUnit &u, const std::string &prefix,
                                                 const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Epilogue> ep, Epilogue::of(u));
  return lowerFinishedMatMulGroup(u, *ep, prefix, opts, MatMulPath::NDRange);
}

} // namespace lower

namespace {

Expected<std::vector<kir::Kernel>> lowerUnitKernels(const LoweringUnit &u,
                                                    const std::string &namePrefix,
                                                    const tuning::LowerOptions &opts) {
  if (u.members.empty())
    return lowerNode(*u.node, namePrefix, opts);
  for (const Value *v : u.operands)
    if (!isStatic(v->shape()))
      return u.node->error("operand %{} has a symbolic shape {}; specialize shapes first",
                           v->name(), v->type().str());
  if (lower::isViewGroup(u))
    return lower::lowerViewGroup(u, namePrefix);
  // A group template (attention.fused_group, epilogue.gemm_finish), else the anchor's kernels
  // with the epilogue (lowerAnchorGroup), or one loop nest.
  return lower::lowerWithTemplate(
      lower::chooseTemplate(u, opts), u, namePrefix, opts,
      [&](const tuning::LowerOptions &o) -> Expected<std::vector<kir::Kernel>> {
        NNC_ASSIGN_OR_RETURN(std::unique_ptr<Epilogue> ep, Epilogue::of(u));
        if (u.anchor)
          return lowerAnchorGroup(u, *ep, namePrefix, o);
        return lowerPointwiseGroup(u, *ep, namePrefix);
      });
}

} // namespace

Expected<std::vector<kir::Kernel>> lowerUnit(const LoweringUnit &u, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerUnitKernels(u, namePrefix, opts));
  // On an OpenCL device a kernel of several nests in sequence would run as one work-item.
  if (opts.gpu)
    return splitGridPhases(std::move(ks));
  return ks;
}

} // namespace nnc

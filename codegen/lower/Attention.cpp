// The lowerer of the ONNX Attention op (what runtime/interp/Attention.cpp computes, with its
// roundings). Two kernels: present key/value (past ++ new), then per query row the scores,
// softmax and product with V, through scratch buffers that hold one row per (batch, head)
// pair (the pairs run in parallel), so the score matrix is not stored whole. A fused
// softmax(Q K^T) V group of plain ops is lowered in Fusion.cpp (lowerAttentionGroup). Both are
// kernel templates (attention.rows, attention.fused_group; Templates.cpp).
#include <optional>

#include "CompositeUtil.h"
#include "Templates.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::lower {
namespace {

using namespace composite;
using kir::Expr;
using kir::Stmt;
using Step = kir::ScheduleStep;

} // namespace

Expected<std::vector<kir::Kernel>> lowerAttentionRows(const Node &node, const std::string &prefix) {
  for (size_t i = 0; i < 3; ++i)
    NNC_TRY(checkFloat(node, i, i == 0 ? "Q" : i == 1 ? "K" : "V"));
  const Value *qVal = node.operand(0), *kVal = node.operand(1), *vVal = node.operand(2);
  const Value *maskVal = node.operand(3), *pastKVal = node.operand(4), *pastVVal = node.operand(5),
              *nonpadVal = node.operand(6);
  Extents qe = extentsOf(qVal), ke = extentsOf(kVal), ve = extentsOf(vVal);
  size_t rank = qe.size();
  if ((rank != 3 && rank != 4) || ke.size() != rank || ve.size() != rank)
    return node.error("Q, K and V must all have rank 3 or all rank 4, got {}, {} and {}",
                      extentsStr(qe), extentsStr(ke), extentsStr(ve));
  int64_t qHeadsAttr = node.getInt("q_num_heads", 0), kvHeadsAttr = node.getInt("kv_num_heads", 0);
  NNC_ASSIGN_OR_RETURN(HeadView qv, headView(node, qe, qHeadsAttr, "Q"));
  NNC_ASSIGN_OR_RETURN(HeadView kv, headView(node, ke, kvHeadsAttr, "K"));
  NNC_ASSIGN_OR_RETURN(HeadView vv, headView(node, ve, kvHeadsAttr, "V"));
  int64_t batch = qv.batch, qHeads = qv.heads, kvHeads = kv.heads, qLen = qv.seq, newLen = kv.seq,
          headSize = qv.head, vHeadSize = vv.head;
  if (kv.batch != batch || vv.batch != batch || vv.heads != kvHeads || vv.seq != newLen ||
      kv.head != headSize)
    return node.error("Q, K and V extents do not agree: {}, {} and {}", extentsStr(qe),
                      extentsStr(ke), extentsStr(ve));
  if (kvHeads == 0 || qHeads % kvHeads != 0)
    return node.error("Q head count {} is not a multiple of the K/V head count {}", qHeads,
                      kvHeads);
  int64_t group = qHeads / kvHeads;
  if ((pastKVal == nullptr) != (pastVVal == nullptr))
    return node.error("past_key and past_value must be given together");
  int64_t pastLen = 0;
  if (pastKVal) {
    NNC_TRY(checkFloat(node, 4, "past_key"));
    NNC_TRY(checkFloat(node, 5, "past_value"));
    Extents pk = extentsOf(pastKVal), pv = extentsOf(pastVVal);
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != batch || pk[1] != kvHeads ||
        pk[3] != headSize || pv[0] != batch || pv[1] != kvHeads || pv[2] != pk[2] ||
        pv[3] != vHeadSize)
      return node.error("past_key {} / past_value {} do not match K/V", extentsStr(pk),
                        extentsStr(pv));
    pastLen = pk[2];
  }
  int64_t total = pastLen + newLen;

  // The mask, broadcast over [batch, q_heads, q_len, _]; a short last dim is padded with -inf.
  AttentionMaskLayout mask;
  if (maskVal) {
    NNC_ASSIGN_OR_RETURN(mask, attentionMaskLayout(node, extentsOf(maskVal), maskVal->dtype(),
                                                   batch, qHeads, qLen, total));
  }
  const int64_t maskLen = mask.length, *maskStride = mask.strides;
  if (nonpadVal) {
    Extents ne = extentsOf(nonpadVal);
    if (!isInteger(nonpadVal->dtype()) || ne.size() != 1 || ne[0] != batch)
      return node.error("nonpad_kv_seqlen must be an integer vector of length {}, got {}", batch,
                        extentsStr(ne));
  }

  double scale = node.hasAttr("scale") ? node.getFloat("scale")
                                       : 1.0 / std::sqrt(static_cast<double>(headSize));
  double softcap = node.getFloat("softcap", 0.0);
  bool causal = node.getInt("is_causal", 0) != 0;
  int64_t mode = node.getInt("qk_matmul_output_mode", 0);
  bool hasPrecision = node.hasAttr("softmax_precision");
  DType precision = hasPrecision ? node.getDType("softmax_precision") : qVal->dtype();
  DType qType = qVal->dtype();
  DType ct = computeType({qType, kVal->dtype(), vVal->dtype(),
                          maskVal && isFloat(maskVal->dtype()) ? maskVal->dtype() : qType},
                         /*accurate=*/true);
  std::vector<kir::Kernel> kernels;

  // Kernel 1: present key/value (past ++ new, [batch, kv_heads, total, head]) when a result
  // asks for them or past values exist (the scores then read them from there).
  bool wantPresent = pastKVal || node.numResults() > 1;
  int64_t bhKv = batch * kvHeads;
  if (wantPresent && bhKv > 0 && total > 0) {
    KernelBuilder kb(node, prefix + "_present");
    std::string bh = kb.freshName("bh");
    Expr bhV = kir::var(bh);
    Expr b = kir::div(bhV, i64(kvHeads)), h = kir::mod(bhV, i64(kvHeads));
    std::vector<Stmt> body;
    for (int which = 0; which < 2; ++which) {
      int64_t size = which == 0 ? headSize : vHeadSize;
      const HeadView &view = which == 0 ? kv : vv;
      int dst = node.numResults() > static_cast<size_t>(1 + which)
                    ? kb.result(1 + which)
                    : kb.scratch(1 + which, movedType((which == 0 ? kVal : vVal)->dtype()),
                                 bhKv * total * size);
      DType dt = kb.bufferType(dst);
      if (pastLen > 0) {
        int src = kb.operand(4 + which);
        std::string t = kb.freshName("t"), d = kb.freshName("d");
        Expr idx = kir::add(kir::mul(kir::add(kir::mul(bhV, i64(total)), kir::var(t)), i64(size)),
                            kir::var(d));
        Expr from = kir::add(
            kir::mul(kir::add(kir::mul(bhV, i64(pastLen)), kir::var(t)), i64(size)), kir::var(d));
        body.push_back(kir::forLoop(
            t, i64(pastLen),
            kir::forLoop(d, i64(size), kb.store(dst, idx, kir::cast(kb.load(src, from), dt)))));
      }
      int src = kb.operand(1 + which);
      std::string t = kb.freshName("t"), d = kb.freshName("d");
      Expr idx = kir::add(
          kir::mul(kir::add(kir::mul(bhV, i64(total)), kir::add(kir::var(t), i64(pastLen))),
                   i64(size)),
          kir::var(d));
      Expr from = view.at(b, h, kir::var(t), kir::var(d));
      body.push_back(kir::forLoop(
          t, i64(newLen),
          kir::forLoop(d, i64(size), kb.store(dst, idx, kir::cast(kb.load(src, from), dt)))));
    }
    Sched sc;
    sc.rows(bh, bhKv, bhKv * total * (headSize + vHeadSize));
    kernels.push_back(kb.finish(kir::forLoop(bh, i64(bhKv), kir::block(body)), sc.s));
  }

  // Kernel 2: per query row r = (b, h, i): scores, softmax, and the product with V.
  int64_t rows = batch * qHeads * qLen;
  if (rows == 0)
    return kernels.empty() ? emptyKernel(node, prefix) : kernels;
  KernelBuilder kb(node, prefix + "_attn");
  int qB = kb.operand(0), y = kb.result(0);
  int kB = pastLen > 0 ? (node.numResults() > 1
                              ? kb.result(1)
                              : kb.scratch(1, movedType(kVal->dtype()), bhKv * total * headSize))
                       : kb.operand(1);
  int vB = pastLen > 0 ? (node.numResults() > 2
                              ? kb.result(2)
                              : kb.scratch(2, movedType(vVal->dtype()), bhKv * total * vHeadSize))
                       : kb.operand(2);
  // With several (batch, head) pairs, they run in parallel and the query rows of one pair in
  // order, so the score and accumulator scratch hold one row per pair: the [.., S, T] score
  // matrix is never stored whole. A single pair runs its rows in parallel, a row each.
  int64_t pairs = batch * qHeads;
  bool perPair = pairs >= 2;
  int64_t scratchRows = perPair ? pairs : rows;
  int scores = kb.scratch(0, ct, scratchRows * total);
  int acc = kb.scratch(3, ct, scratchRows * vHeadSize);
  int qk = node.numResults() > 3 ? kb.result(3) : -1;
  int maskB = maskVal ? kb.operand(3) : -1;
  int nonpadB = nonpadVal ? kb.operand(6) : -1;

  std::string r = kb.freshName("r"), j1 = kb.freshName("j"), d1 = kb.freshName("d"),
              j2 = kb.freshName("j"), j3 = kb.freshName("j"), j4 = kb.freshName("j"),
              d2 = kb.freshName("d"), j5 = kb.freshName("j"), d3 = kb.freshName("d"),
              d4 = kb.freshName("d");
  std::string bN = kb.freshName("b"), hN = kb.freshName("h"), iN = kb.freshName("iq"),
              kvhN = kb.freshName("kvh"), offN = kb.freshName("off"), vlN = kb.freshName("vlen");
  std::string dot = kb.freshName("dot"), raw = kb.freshName("raw"), cap = kb.freshName("cap"),
              biased = kb.freshName("biased"), m = kb.freshName("max"), sum = kb.freshName("sum"),
              p = kb.freshName("p");
  Expr rv = kir::var(r), b = kir::var(bN), h = kir::var(hN), iq = kir::var(iN),
       kvh = kir::var(kvhN);
  auto keyAt = [&](Expr j, Expr d) {
    if (pastLen > 0)
      return kir::add(
          kir::mul(kir::add(kir::mul(kir::add(kir::mul(b, i64(kvHeads)), kvh), i64(total)), j),
                   i64(headSize)),
          d);
    return kv.at(b, kvh, j, d);
  };
  auto valueAt = [&](Expr j, Expr d) {
    if (pastLen > 0)
      return kir::add(
          kir::mul(kir::add(kir::mul(kir::add(kir::mul(b, i64(kvHeads)), kvh), i64(total)), j),
                   i64(vHeadSize)),
          d);
    return vv.at(b, kvh, j, d);
  };
  auto rq = [&](Expr e) { return roundTo(std::move(e), qType, ct); };
  std::string pairN = kb.freshName("bh"), rowN = kb.freshName("iq");
  Expr scratchRow = perPair ? kir::var(pairN) : rv;
  Expr rowScores = kir::mul(scratchRow, i64(total)), qkRow = kir::mul(rv, i64(total));

  std::vector<Stmt> row;
  row.push_back(kir::decl(bN, DType::I64, kir::div(rv, i64(qHeads * qLen))));
  row.push_back(kir::decl(hN, DType::I64, kir::mod(kir::div(rv, i64(qLen)), i64(qHeads))));
  row.push_back(kir::decl(iN, DType::I64, kir::mod(rv, i64(qLen))));
  row.push_back(kir::decl(kvhN, DType::I64, kir::div(h, i64(group))));
  Expr validLen;
  if (nonpadVal) {
    row.push_back(kir::decl(vlN, DType::I64, kir::cast(kb.load(nonpadB, b), DType::I64)));
    validLen = kir::var(vlN);
  }
  // Causal masking is bottom-right aligned: query i sees keys j <= i + offset.
  if (causal) {
    Expr off = pastKVal ? i64(pastLen) : nonpadVal ? kir::sub(validLen, i64(qLen)) : i64(0);
    row.push_back(kir::decl(offN, DType::I64, off));
  }

  // Pass 1: the scores row (raw, softcapped, biased by masks), written to scratch.
  {
    Expr j = kir::var(j1);
    std::vector<Stmt> perKey;
    perKey.push_back(kir::decl(dot, ct, fimm(0, ct)));
    Expr prod = kir::mul(kir::cast(kb.load(qB, qv.at(b, h, iq, kir::var(d1))), ct),
                         kir::cast(kb.load(kB, keyAt(j, kir::var(d1))), ct));
    perKey.push_back(
        kir::forLoop(d1, i64(headSize), kir::accumulate(dot, kir::add(kir::var(dot, ct), prod))));
    perKey.push_back(kir::decl(raw, ct, rq(kir::mul(kir::var(dot, ct), fimm(scale, ct)))));
    Expr rawV = kir::var(raw, ct);
    Expr capE =
        softcap != 0
            ? rq(kir::mul(fimm(softcap, ct), fop(OpKind::Tanh, kir::div(rawV, fimm(softcap, ct)))))
            : rawV;
    perKey.push_back(kir::decl(cap, ct, capE));
    Expr capV = kir::var(cap, ct);
    Expr bias;
    auto addBias = [&](Expr term) { bias = bias ? kir::add(bias, term) : term; };
    if (maskVal) {
      Expr jm = maskLen < total ? kir::min(j, i64(std::max<int64_t>(maskLen - 1, 0))) : j;
      Expr midx = kir::add(
          kir::add(kir::add(kir::mul(b, i64(maskStride[0])), kir::mul(h, i64(maskStride[1]))),
                   kir::mul(iq, i64(maskStride[2]))),
          jm);
      Expr mv;
      if (maskLen == 0) {
        mv = fimm(-kInf, ct);
      } else {
        Expr ld = kb.load(maskB, midx);
        mv = maskVal->dtype() == DType::Bool ? kir::select(ld, fimm(0, ct), fimm(-kInf, ct))
                                             : kir::cast(ld, ct);
        if (maskLen < total)
          mv = kir::select(kir::lt(j, i64(maskLen)), mv, fimm(-kInf, ct));
      }
      addBias(mv);
    }
    if (causal)
      addBias(kir::select(fop(OpKind::Greater, j, kir::add(iq, kir::var(offN))), fimm(-kInf, ct),
                          fimm(0, ct)));
    if (nonpadVal)
      addBias(kir::select(kir::ge(j, validLen), fimm(-kInf, ct), fimm(0, ct)));
    perKey.push_back(kir::decl(biased, ct, bias ? rq(kir::add(capV, bias)) : capV));
    Expr biasedV = kir::var(biased, ct);
    perKey.push_back(kb.store(scores, kir::add(rowScores, j), biasedV));
    if (qk >= 0 && mode >= 0 && mode <= 2) {
      Expr chosen = mode == 0 ? rawV : mode == 1 ? capV : biasedV;
      perKey.push_back(kb.store(qk, kir::add(qkRow, j), narrow(chosen, kb.bufferType(qk))));
    }
    row.push_back(kir::forLoop(j1, i64(total), kir::block(perKey)));
  }
  // Pass 2: softmax in the softmax precision; a fully masked row gives NaN like the reference.
  auto score = [&](const std::string &j) {
    Expr s = kb.load(scores, kir::add(rowScores, kir::var(j)));
    return hasPrecision ? roundTo(s, precision, ct) : s;
  };
  Expr mV = kir::var(m, ct), sumV = kir::var(sum, ct);
  row.push_back(kir::decl(m, ct, fimm(-kInf, ct)));
  row.push_back(kir::forLoop(j2, i64(total), kir::assign(m, fop(OpKind::Max, mV, score(j2)))));
  row.push_back(kir::decl(sum, ct, fimm(0, ct)));
  {
    std::string e = kb.freshName("e");
    Expr idx = kir::add(rowScores, kir::var(j3));
    row.push_back(
        kir::forLoop(j3, i64(total),
                     kir::block({kir::decl(e, ct, fop(OpKind::Exp, kir::sub(score(j3), mV))),
                                 kb.store(scores, idx, kir::var(e, ct)),
                                 kir::accumulate(sum, kir::add(sumV, kir::var(e, ct)))})));
  }
  {
    Expr idx = kir::add(rowScores, kir::var(j4));
    Expr prob = rq(kir::div(kb.load(scores, idx), sumV));
    std::vector<Stmt> st{kb.store(scores, idx, prob)};
    if (qk >= 0 && (mode < 0 || mode > 2))
      st.push_back(kb.store(qk, kir::add(qkRow, kir::var(j4)),
                            narrow(kb.load(scores, idx), kb.bufferType(qk))));
    row.push_back(kir::forLoop(j4, i64(total), kir::block(st)));
  }
  // Pass 3: y = probabilities x V, accumulated over keys into a scratch row.
  Expr accRow = kir::mul(scratchRow, i64(vHeadSize));
  row.push_back(
      kir::forLoop(d2, i64(vHeadSize), kb.store(acc, kir::add(accRow, kir::var(d2)), fimm(0, ct))));
  {
    Expr aidx = kir::add(accRow, kir::var(d3));
    Stmt update = kb.store(
        acc, aidx,
        kir::add(kb.load(acc, aidx),
                 kir::mul(kir::var(p, ct),
                          kir::cast(kb.load(vB, valueAt(kir::var(j5), kir::var(d3))), ct))));
    row.push_back(kir::forLoop(
        j5, i64(total),
        kir::block({kir::decl(p, ct, kb.load(scores, kir::add(rowScores, kir::var(j5)))),
                    kir::forLoop(d3, i64(vHeadSize), update)})));
  }
  {
    Expr yidx =
        rank == 4
            ? kir::add(kir::mul(rv, i64(vHeadSize)), kir::var(d4))
            : kir::add(
                  kir::mul(kir::add(kir::mul(kir::add(kir::mul(b, i64(qLen)), iq), i64(qHeads)), h),
                           i64(vHeadSize)),
                  kir::var(d4));
    row.push_back(kir::forLoop(
        d4, i64(vHeadSize),
        kb.store(y, yidx, narrow(kb.load(acc, kir::add(accRow, kir::var(d4))), kb.bufferType(y)))));
  }
  Sched sc;
  Stmt body;
  if (perPair) {
    row.insert(
        row.begin(),
        kir::decl(r, DType::I64, kir::add(kir::mul(kir::var(pairN), i64(qLen)), kir::var(rowN))));
    body = kir::forLoop(pairN, i64(pairs), kir::forLoop(rowN, i64(qLen), kir::block(row)));
    sc.rows(pairN, pairs, rows * total * (headSize + vHeadSize));
  } else {
    body = kir::forLoop(r, i64(rows), kir::block(row));
    sc.rows(r, rows, rows * total * (headSize + vHeadSize));
  }
  sc.vectorize(d3, vHeadSize);
  kernels.push_back(kb.finish(body, sc.s));
  return kernels;
}

} // namespace nnc::lower

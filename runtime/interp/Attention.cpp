// Interpreter kernels of attention (ONNX Attention-23/24) and rotary_embedding
// (RotaryEmbedding-23), computed in double.
#include <cmath>
#include <limits>

#include "interp/CompositeSupport.h"
#include "interp/Kernels.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::interp {
namespace {

using namespace composite;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

const Tensor *optionalOperand(const Operands &ops, size_t i) {
  return i < ops.size() && !ops[i].isNull() ? &ops[i] : nullptr;
}

/// A [batch, heads, seq, head] view of a 4-D tensor or of a 3-D [batch, seq, heads*head] one.
struct HeadView {
  int64_t batch = 0, heads = 0, seq = 0, head = 0;
  bool packed = false; ///< 3-D layout.
  int64_t at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return packed ? ((b * seq + s) * heads + h) * head + d : ((b * heads + h) * seq + s) * head + d;
  }
};

Expected<HeadView> headView(const Node &node, const Tensor &t, int64_t heads, const char *what) {
  HeadView v;
  if (t.rank() == 4) {
    v = HeadView{t.dim(0), t.dim(1), t.dim(2), t.dim(3), false};
    return v;
  }
  if (heads <= 0 || t.dim(2) % heads != 0)
    return node.error("{} hidden size {} is not divisible by {} heads", what, t.dim(2), heads);
  v = HeadView{t.dim(0), heads, t.dim(1), t.dim(2) / heads, true};
  return v;
}

} // namespace

Results evalAttention(const Node &node, const Operands &ops) {
  if (ops.size() < 3)
    return node.error("expects at least 3 operands, got {}", ops.size());
  const Tensor &q = ops[0], &k = ops[1], &v = ops[2];
  for (const Tensor *t : {&q, &k, &v})
    if (t->isNull() || !isFloat(t->dtype()))
      return node.error("Q, K and V must be float tensors");
  const Tensor *mask = optionalOperand(ops, 3), *pastK = optionalOperand(ops, 4),
               *pastV = optionalOperand(ops, 5), *nonpad = optionalOperand(ops, 6);
  int64_t rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank)
    return node.error("Q, K and V must all have rank 3 or all rank 4, got {}, {} and {}",
                      extentsStr(q.extents()), extentsStr(k.extents()), extentsStr(v.extents()));
  int64_t qHeadsAttr = node.getInt("q_num_heads", 0), kvHeadsAttr = node.getInt("kv_num_heads", 0);
  NNC_ASSIGN_OR_RETURN(HeadView qv, headView(node, q, qHeadsAttr, "Q"));
  NNC_ASSIGN_OR_RETURN(HeadView kv, headView(node, k, kvHeadsAttr, "K"));
  NNC_ASSIGN_OR_RETURN(HeadView vv, headView(node, v, kvHeadsAttr, "V"));
  int64_t batch = qv.batch, qHeads = qv.heads, kvHeads = kv.heads, qLen = qv.seq, newLen = kv.seq,
          headSize = qv.head, vHeadSize = vv.head;
  if (kv.batch != batch || vv.batch != batch || vv.heads != kvHeads || vv.seq != newLen ||
      kv.head != headSize)
    return node.error("Q, K and V extents do not agree: {}, {} and {}", extentsStr(q.extents()),
                      extentsStr(k.extents()), extentsStr(v.extents()));
  if (kvHeads == 0 || qHeads % kvHeads != 0)
    return node.error("Q head count {} is not a multiple of the K/V head count {}", qHeads,
                      kvHeads);
  int64_t group = qHeads / kvHeads;

  // Present key/value: past concatenated with the new keys/values along the sequence.
  int64_t pastLen = 0;
  if ((pastK == nullptr) != (pastV == nullptr))
    return node.error("past_key and past_value must be given together");
  if (pastK) {
    const Extents &pk = pastK->extents(), &pv = pastV->extents();
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != batch || pk[1] != kvHeads ||
        pk[3] != headSize || pv[0] != batch || pv[1] != kvHeads || pv[2] != pk[2] ||
        pv[3] != vHeadSize)
      return node.error("past_key {} / past_value {} do not match K/V", extentsStr(pk),
                        extentsStr(pv));
    pastLen = pk[2];
  }
  int64_t total = pastLen + newLen;
  std::vector<double> presentK(static_cast<size_t>(batch * kvHeads * total * headSize));
  std::vector<double> presentV(static_cast<size_t>(batch * kvHeads * total * vHeadSize));
  {
    std::vector<double> kd = toDoubles(k), vd = toDoubles(v), pkd, pvd;
    if (pastK) {
      pkd = toDoubles(*pastK);
      pvd = toDoubles(*pastV);
    }
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < kvHeads; ++h)
        for (int64_t t = 0; t < total; ++t) {
          int64_t bh = b * kvHeads + h;
          for (int64_t d = 0; d < headSize; ++d)
            presentK[(bh * total + t) * headSize + d] = t < pastLen
                                                            ? pkd[(bh * pastLen + t) * headSize + d]
                                                            : kd[kv.at(b, h, t - pastLen, d)];
          for (int64_t d = 0; d < vHeadSize; ++d)
            presentV[(bh * total + t) * vHeadSize + d] =
                t < pastLen ? pvd[(bh * pastLen + t) * vHeadSize + d]
                            : vd[vv.at(b, h, t - pastLen, d)];
        }
  }

  // The mask: broadcast over [batch, q_heads, q_len, _]; its last dim may be shorter than
  // `total`, the rest counting as masked out (-inf).
  std::vector<double> maskValues;
  AttentionMaskLayout maskLayout;
  if (mask) {
    NNC_ASSIGN_OR_RETURN(maskLayout, attentionMaskLayout(node, mask->extents(), mask->dtype(),
                                                         batch, qHeads, qLen, total));
    maskValues = toDoubles(*mask);
    if (mask->dtype() == DType::Bool)
      for (double &m : maskValues)
        m = m != 0 ? 0.0 : kNegInf;
  }
  const int64_t maskLen = maskLayout.length, *maskStride = maskLayout.strides;
  std::vector<int64_t> validLen;
  if (nonpad) {
    if (!isInteger(nonpad->dtype()) || nonpad->rank() != 1 || nonpad->dim(0) != batch)
      return node.error("nonpad_kv_seqlen must be an integer vector of length {}, got {}", batch,
                        extentsStr(nonpad->extents()));
    validLen = nonpad->toInt64Vector();
  }

  double scale = node.hasAttr("scale") ? node.getFloat("scale")
                                       : 1.0 / std::sqrt(static_cast<double>(headSize));
  double softcap = node.getFloat("softcap", 0.0);
  bool causal = node.getInt("is_causal", 0) != 0;
  int64_t mode = node.getInt("qk_matmul_output_mode", 0);
  bool hasPrecision = node.hasAttr("softmax_precision");
  DType precision = hasPrecision ? node.getDType("softmax_precision") : q.dtype();
  DType qType = q.dtype();

  std::vector<double> qd = toDoubles(q);
  std::vector<double> y(static_cast<size_t>(batch * qHeads * qLen * vHeadSize));
  std::vector<double> qkOut(static_cast<size_t>(batch * qHeads * qLen * total));
  std::vector<double> raw(total), capped(total), biased(total), prob(total);
  for (int64_t b = 0; b < batch; ++b) {
    // Causal masking is bottom-right aligned: query i sees keys j <= i + offset.
    int64_t offset = pastK ? pastLen : (nonpad ? validLen[b] - qLen : 0);
    for (int64_t h = 0; h < qHeads; ++h) {
      int64_t kvh = h / group;
      for (int64_t i = 0; i < qLen; ++i) {
        for (int64_t j = 0; j < total; ++j) {
          const double *kr = &presentK[((b * kvHeads + kvh) * total + j) * headSize];
          double dot = 0;
          for (int64_t d = 0; d < headSize; ++d)
            dot += qd[qv.at(b, h, i, d)] * kr[d];
          raw[j] = roundTo(qType, dot * scale);
          capped[j] = softcap != 0 ? roundTo(qType, softcap * std::tanh(raw[j] / softcap)) : raw[j];
          double bias = 0;
          if (mask)
            bias += j < maskLen
                        ? maskValues[b * maskStride[0] + h * maskStride[1] + i * maskStride[2] + j]
                        : kNegInf;
          if (causal && j > i + offset)
            bias += kNegInf;
          if (nonpad && j >= validLen[b])
            bias += kNegInf;
          biased[j] = roundTo(qType, capped[j] + bias);
        }
        // Softmax in the softmax precision; a fully masked row gives NaN like the reference.
        double m = kNegInf;
        for (int64_t j = 0; j < total; ++j) {
          double s = hasPrecision ? roundTo(precision, biased[j]) : biased[j];
          if (std::isnan(s) || s > m)
            m = s;
          if (std::isnan(s))
            break;
        }
        double sum = 0;
        for (int64_t j = 0; j < total; ++j) {
          double s = hasPrecision ? roundTo(precision, biased[j]) : biased[j];
          prob[j] = std::exp(s - m);
          sum += prob[j];
        }
        for (int64_t j = 0; j < total; ++j)
          prob[j] = roundTo(qType, prob[j] / sum);
        double *qkRow = &qkOut[((b * qHeads + h) * qLen + i) * total];
        const std::vector<double> &chosen = mode == 0   ? raw
                                            : mode == 1 ? capped
                                            : mode == 2 ? biased
                                                        : prob;
        for (int64_t j = 0; j < total; ++j)
          qkRow[j] = chosen[j];
        for (int64_t d = 0; d < vHeadSize; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j)
            acc += prob[j] * presentV[((b * kvHeads + kvh) * total + j) * vHeadSize + d];
          int64_t yi = rank == 4 ? ((b * qHeads + h) * qLen + i) * vHeadSize + d
                                 : ((b * qLen + i) * qHeads + h) * vHeadSize + d;
          y[yi] = acc;
        }
      }
    }
  }

  Extents yExtents = rank == 4 ? Extents{batch, qHeads, qLen, vHeadSize}
                               : Extents{batch, qLen, qHeads * vHeadSize};
  std::vector<Tensor> results;
  NNC_ASSIGN_OR_RETURN(Tensor yt, fromDoubles(qType, yExtents, y));
  results.push_back(yt);
  if (node.numResults() > 1) {
    NNC_ASSIGN_OR_RETURN(Tensor t,
                         fromDoubles(k.dtype(), {batch, kvHeads, total, headSize}, presentK));
    results.push_back(t);
  }
  if (node.numResults() > 2) {
    NNC_ASSIGN_OR_RETURN(Tensor t,
                         fromDoubles(v.dtype(), {batch, kvHeads, total, vHeadSize}, presentV));
    results.push_back(t);
  }
  if (node.numResults() > 3) {
    NNC_ASSIGN_OR_RETURN(Tensor t, fromDoubles(qType, {batch, qHeads, qLen, total}, qkOut));
    results.push_back(t);
  }
  return results;
}

Results evalRotaryEmbedding(const Node &node, const Operands &ops) {
  if (ops.size() < 3)
    return node.error("expects at least 3 operands, got {}", ops.size());
  const Tensor &x = ops[0], &cosCache = ops[1], &sinCache = ops[2];
  const Tensor *positions = optionalOperand(ops, 3);
  if (!isFloat(x.dtype()) || !isFloat(cosCache.dtype()) || !isFloat(sinCache.dtype()))
    return node.error("input, cos_cache and sin_cache must be float tensors");
  if (x.rank() != 3 && x.rank() != 4)
    return node.error("input must have rank 3 or 4, got extents {}", extentsStr(x.extents()));
  NNC_ASSIGN_OR_RETURN(HeadView xv, headView(node, x, node.getInt("num_heads", 0), "input"));
  int64_t rot = node.getInt("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = xv.head;
  if (rot < 0 || rot % 2 != 0 || rot > xv.head)
    return node.error("rotary dimension {} must be even and at most the head size {}", rot,
                      xv.head);
  int64_t half = rot / 2;
  bool interleaved = node.getInt("interleaved", 0) != 0;

  // cos/sin rows per (batch, position): cache[position_ids[b, s]] or cache[b, s].
  const Extents &ce = cosCache.extents();
  if (sinCache.extents() != ce)
    return node.error("cos_cache {} and sin_cache {} differ", extentsStr(ce),
                      extentsStr(sinCache.extents()));
  std::vector<int64_t> ids;
  int64_t idBatch = 1, idSeq = 1;
  if (positions) {
    if (!isInteger(positions->dtype()) || positions->rank() != 2)
      return node.error("position_ids must be a rank-2 integer tensor, got extents {}",
                        extentsStr(positions->extents()));
    idBatch = positions->dim(0);
    idSeq = positions->dim(1);
    if ((idBatch != 1 && idBatch != xv.batch) || (idSeq != 1 && idSeq != xv.seq))
      return node.error("position_ids extents {} do not match [batch {}, seq {}]",
                        extentsStr(positions->extents()), xv.batch, xv.seq);
    if (ce.size() != 2 || ce[1] != half)
      return node.error("cos_cache must be [max_position, {}] with position_ids, got {}", half,
                        extentsStr(ce));
    ids = positions->toInt64Vector();
    for (int64_t id : ids)
      if (id < 0 || id >= ce[0])
        return node.error("position id {} is out of range [0, {})", id, ce[0]);
  } else {
    if (ce.size() != 3 || ce[2] != half || (ce[0] != 1 && ce[0] != xv.batch) ||
        (ce[1] != 1 && ce[1] != xv.seq))
      return node.error("cos_cache must be [{}, {}, {}] without position_ids, got {}", xv.batch,
                        xv.seq, half, extentsStr(ce));
  }
  auto cacheRow = [&](int64_t b, int64_t s) -> int64_t {
    if (positions)
      return ids[(idBatch == 1 ? 0 : b) * idSeq + (idSeq == 1 ? 0 : s)];
    return (ce[0] == 1 ? 0 : b) * ce[1] + (ce[1] == 1 ? 0 : s);
  };

  std::vector<double> in = toDoubles(x), out = in, cosv = toDoubles(cosCache),
                      sinv = toDoubles(sinCache);
  for (int64_t b = 0; b < xv.batch; ++b)
    for (int64_t s = 0; s < xv.seq; ++s) {
      int64_t row = cacheRow(b, s) * half;
      for (int64_t h = 0; h < xv.heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          int64_t p1 = xv.at(b, h, s, i1), p2 = xv.at(b, h, s, i2);
          double c = cosv[row + i], sn = sinv[row + i], x1 = in[p1], x2 = in[p2];
          out[p1] = c * x1 - sn * x2;
          out[p2] = sn * x1 + c * x2;
        }
    }
  NNC_ASSIGN_OR_RETURN(Tensor r, fromDoubles(x.dtype(), x.extents(), out));
  return std::vector<Tensor>{r};
}

} // namespace nnc::interp

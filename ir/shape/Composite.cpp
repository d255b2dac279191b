// Shape rules of the composite ops: softmax family, normalizations, attention, linear attention,
// rotary embedding.
#include "ShapeRules.h"

#include <cmath>
#include <optional>

#include "nnc/ir/ShapeUtils.h"

namespace nnc::shape {
namespace {

using Types = std::vector<TensorType>;

/// Operand i, which must be present and have a float dtype.
Expected<Value *> floatOperand(const Node &node, size_t i, const char *what) {
  Value *v = node.operand(i);
  if (!v)
    return node.error("operand {} ({}) is missing", i, what);
  if (!isFloat(v->dtype()))
    return node.error("{} must have a float dtype, got {}", what, dtypeName(v->dtype()));
  return v;
}

/// Operand i when present (it must then be float), else null.
Expected<Value *> optionalFloatOperand(const Node &node, size_t i, const char *what) {
  if (!node.operand(i))
    return static_cast<Value *>(nullptr);
  return floatOperand(node, i, what);
}

bool isStaticValue(const Dim &d, int64_t v) {
  return d.isStatic() && d.value() == v;
}

/// Errors when two dims are both static and differ.
Error checkSameDim(const Node &node, const Dim &a, const Dim &b, const std::string &what) {
  if (a.isStatic() && b.isStatic() && a.value() != b.value())
    return node.error("{}: {} vs {}", what, a.value(), b.value());
  return Error::success();
}

/// `s` must broadcast to `x` without changing x (numpy, one direction).
Error checkUnidirectional(const Node &node, const Shape &x, const Shape &s, const char *what) {
  if (s.size() > x.size())
    return node.error("{} has rank {}, more than the input's rank {}", what, s.size(), x.size());
  size_t off = x.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    const Dim &a = s[i], &b = x[off + i];
    if (isStaticValue(a, 1) || a == b)
      continue;
    if (a.isStatic() && b.isStatic())
      return node.error("{} of shape {} does not broadcast to the input shape {}", what,
                        shapeStr(s), shapeStr(x));
  }
  return Error::success();
}

/// A per-channel operand: rank 1 with `channels` elements.
Error checkPerChannel(const Node &node, size_t i, const char *what, const Dim &channels) {
  Expected<Value *> v = floatOperand(node, i, what);
  if (!v)
    return v.takeError();
  if ((*v)->rank() != 1)
    return node.error("{} must have rank 1, got {}", what, (*v)->rank());
  return checkSameDim(node, (*v)->shape()[0], channels,
                      fmt::format("{} length does not match the channel count", what));
}

Dim mulDim(const Dim &a, const Dim &b, Graph &g) {
  if (a.isStatic() && b.isStatic())
    return Dim(a.value() * b.value());
  if (isStaticValue(a, 1))
    return b;
  if (isStaticValue(b, 1))
    return a;
  return g.freshDim();
}

Dim addDim(const Dim &a, const Dim &b, Graph &g) {
  if (a.isStatic() && b.isStatic())
    return Dim(a.value() + b.value());
  if (isStaticValue(a, 0))
    return b;
  if (isStaticValue(b, 0))
    return a;
  return g.freshDim();
}

/// `hidden / heads`; errors when statically not divisible.
Expected<Dim> divDim(const Node &node, const Dim &hidden, int64_t heads, const char *what) {
  if (!hidden.isStatic())
    return heads == 1 ? hidden : node.graph()->freshDim();
  if (hidden.value() % heads != 0)
    return node.error("{} size {} is not divisible by {} heads", what, hidden.value(), heads);
  return Dim(hidden.value() / heads);
}

/// The rule of softmax, log_softmax and hardmax.
Expected<Types> inferAlongAxis(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  (void)axis;
  return Types{x->type()};
}

Error checkStashType(const Node &node) {
  DType t = node.getDType("stash_type");
  if (!isFloat(t))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(t));
  return Error::success();
}

} // namespace

Expected<Types> inferSoftmax(const Node &node) {
  return inferAlongAxis(node);
}
Expected<Types> inferLogSoftmax(const Node &node) {
  return inferAlongAxis(node);
}
Expected<Types> inferHardmax(const Node &node) {
  return inferAlongAxis(node);
}

Expected<Types> inferLayerNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * scale, floatOperand(node, 1, "scale"));
  NNC_ASSIGN_OR_RETURN(Value * bias, optionalFloatOperand(node, 2, "bias"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  NNC_TRY(checkStashType(node));
  NNC_TRY(checkUnidirectional(node, x->shape(), scale->shape(), "scale"));
  if (bias)
    NNC_TRY(checkUnidirectional(node, x->shape(), bias->shape(), "bias"));
  Shape stats = x->shape();
  for (int64_t i = axis; i < x->rank(); ++i)
    stats[i] = Dim(1);
  DType stash = node.getDType("stash_type");
  return Types{x->type(), TensorType(stash, stats), TensorType(stash, stats)};
}

Expected<Types> inferRMSNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * scale, floatOperand(node, 1, "scale"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  (void)axis;
  NNC_TRY(checkStashType(node));
  NNC_TRY(checkUnidirectional(node, x->shape(), scale->shape(), "scale"));
  // RMSNormalization-23: Y has the scale's type (V).
  return Types{TensorType(scale->dtype(), x->shape())};
}

Expected<Types> inferGroupNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  if (x->rank() < 2)
    return node.error("input must have rank >= 2 (N, C, ...), got rank {}", x->rank());
  NNC_TRY(checkStashType(node));
  int64_t groups = node.getInt("num_groups");
  if (groups <= 0)
    return node.error("num_groups must be positive, got {}", groups);
  const Dim &c = x->shape()[1];
  if (c.isStatic() && c.value() % groups != 0)
    return node.error("channel count {} is not divisible by num_groups {}", c.value(), groups);
  NNC_TRY(checkPerChannel(node, 1, "scale", c));
  NNC_TRY(checkPerChannel(node, 2, "bias", c));
  return Types{x->type()};
}

Expected<Types> inferInstanceNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  if (x->rank() < 2)
    return node.error("input must have rank >= 2 (N, C, ...), got rank {}", x->rank());
  NNC_TRY(checkPerChannel(node, 1, "scale", x->shape()[1]));
  NNC_TRY(checkPerChannel(node, 2, "bias", x->shape()[1]));
  return Types{x->type()};
}

Expected<Types> inferBatchNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  if (x->rank() < 2)
    return node.error("input must have rank >= 2 (N, C, ...), got rank {}", x->rank());
  const char *names[] = {"scale", "bias", "mean", "var"};
  for (size_t i = 1; i <= 4; ++i)
    NNC_TRY(checkPerChannel(node, i, names[i - 1], x->shape()[1]));
  return Types{x->type()};
}

Expected<Types> inferLpNorm(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  (void)axis;
  int64_t p = node.getInt("p");
  if (p != 1 && p != 2)
    return node.error("p must be 1 or 2, got {}", p);
  return Types{x->type()};
}

Expected<Types> inferAttention(const Node &node) {
  Graph &g = *node.graph();
  NNC_ASSIGN_OR_RETURN(Value * q, floatOperand(node, 0, "Q"));
  NNC_ASSIGN_OR_RETURN(Value * k, floatOperand(node, 1, "K"));
  NNC_ASSIGN_OR_RETURN(Value * v, floatOperand(node, 2, "V"));
  NNC_ASSIGN_OR_RETURN(Value * pastK, optionalFloatOperand(node, 4, "past_key"));
  NNC_ASSIGN_OR_RETURN(Value * pastV, optionalFloatOperand(node, 5, "past_value"));
  Value *mask = node.operand(3);
  Value *nonpad = node.operand(6);

  int64_t rank = q->rank();
  if (rank != 3 && rank != 4)
    return node.error("Q must have rank 3 or 4, got {}", rank);
  if (k->rank() != rank || v->rank() != rank)
    return node.error("Q, K and V must have the same rank, got {}, {} and {}", rank, k->rank(),
                      v->rank());
  if (k->dtype() != q->dtype())
    return node.error("Q and K dtypes differ: {} and {}", dtypeName(q->dtype()),
                      dtypeName(k->dtype()));
  int64_t mode = node.getInt("qk_matmul_output_mode");
  if (mode < 0 || mode > 3)
    return node.error("qk_matmul_output_mode must be 0, 1, 2 or 3, got {}", mode);
  int64_t causal = node.getInt("is_causal");
  if (causal != 0 && causal != 1)
    return node.error("is_causal must be 0 or 1, got {}", causal);
  if (node.hasAttr("softmax_precision") && !isFloat(node.getDType("softmax_precision")))
    return node.error("softmax_precision must be a float dtype, got {}",
                      dtypeName(node.getDType("softmax_precision")));
  if (node.hasAttr("scale") && !std::isfinite(node.getFloat("scale")))
    return node.error("scale must be finite");

  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  Dim batch = qs[0], qHeads, kvHeads, qLen, kvLen, headSize, vHeadSize;
  NNC_TRY(checkSameDim(node, qs[0], ks[0], "Q and K batch sizes differ"));
  NNC_TRY(checkSameDim(node, qs[0], vs[0], "Q and V batch sizes differ"));
  if (rank == 3) {
    int64_t qh = node.getInt("q_num_heads", 0), kvh = node.getInt("kv_num_heads", 0);
    if (qh <= 0 || kvh <= 0)
      return node.error("3-D inputs need positive q_num_heads and kv_num_heads (got {} and {})", qh,
                        kvh);
    if (qh % kvh != 0)
      return node.error("q_num_heads {} is not a multiple of kv_num_heads {}", qh, kvh);
    qHeads = Dim(qh);
    kvHeads = Dim(kvh);
    qLen = qs[1];
    kvLen = ks[1];
    NNC_TRY(checkSameDim(node, ks[1], vs[1], "K and V sequence lengths differ"));
    NNC_ASSIGN_OR_RETURN(headSize, divDim(node, qs[2], qh, "Q hidden"));
    NNC_ASSIGN_OR_RETURN(Dim kHead, divDim(node, ks[2], kvh, "K hidden"));
    NNC_TRY(checkSameDim(node, headSize, kHead, "Q and K head sizes differ"));
    NNC_ASSIGN_OR_RETURN(vHeadSize, divDim(node, vs[2], kvh, "V hidden"));
  } else {
    qHeads = qs[1];
    kvHeads = ks[1];
    qLen = qs[2];
    kvLen = ks[2];
    headSize = qs[3];
    vHeadSize = vs[3];
    NNC_TRY(checkSameDim(node, ks[1], vs[1], "K and V head counts differ"));
    NNC_TRY(checkSameDim(node, ks[2], vs[2], "K and V sequence lengths differ"));
    NNC_TRY(checkSameDim(node, qs[3], ks[3], "Q and K head sizes differ"));
    if (qHeads.isStatic() && kvHeads.isStatic() &&
        (kvHeads.value() == 0 || qHeads.value() % kvHeads.value() != 0))
      return node.error("Q head count {} is not a multiple of the K/V head count {}",
                        qHeads.value(), kvHeads.value());
  }

  Dim total = kvLen;
  if ((pastK == nullptr) != (pastV == nullptr))
    return node.error("past_key and past_value must be given together");
  if (pastK) {
    if (pastK->rank() != 4 || pastV->rank() != 4)
      return node.error("past_key and past_value must have rank 4, got {} and {}", pastK->rank(),
                        pastV->rank());
    if (pastK->dtype() != k->dtype() || pastV->dtype() != v->dtype())
      return node.error("past_key/past_value dtypes must match K/V");
    const Shape &pk = pastK->shape(), &pv = pastV->shape();
    NNC_TRY(checkSameDim(node, pk[0], batch, "past_key batch size differs"));
    NNC_TRY(checkSameDim(node, pk[1], kvHeads, "past_key head count differs from K's"));
    NNC_TRY(checkSameDim(node, pk[3], headSize, "past_key head size differs from K's"));
    NNC_TRY(checkSameDim(node, pv[0], batch, "past_value batch size differs"));
    NNC_TRY(checkSameDim(node, pv[1], kvHeads, "past_value head count differs from V's"));
    NNC_TRY(checkSameDim(node, pv[2], pk[2], "past_key and past_value lengths differ"));
    NNC_TRY(checkSameDim(node, pv[3], vHeadSize, "past_value head size differs from V's"));
    total = addDim(pk[2], kvLen, g);
  }

  if (mask) {
    if (mask->dtype() != DType::Bool && !isFloat(mask->dtype()))
      return node.error("attn_mask must be bool or float, got {}", dtypeName(mask->dtype()));
    if (mask->rank() < 1 || mask->rank() > 4)
      return node.error("attn_mask must have rank 1 to 4, got {}", mask->rank());
    const Shape &ms = mask->shape();
    const Dim &ml = ms.back();
    if (ml.isStatic() && total.isStatic() && ml.value() > total.value())
      return node.error("attn_mask length {} exceeds the total sequence length {}", ml.value(),
                        total.value());
    Shape lead = {batch, qHeads, qLen};
    for (size_t i = 0; i + 1 < ms.size(); ++i) {
      const Dim &m = ms[i];
      const Dim &t = lead[3 - (ms.size() - 1) + i];
      if (!isStaticValue(m, 1) && m.isStatic() && t.isStatic() && m.value() != t.value())
        return node.error("attn_mask shape {} does not broadcast to [batch, heads, q_len, _]",
                          shapeStr(ms));
    }
  }
  if (nonpad) {
    if (nonpad->dtype() != DType::I64 || nonpad->rank() != 1)
      return node.error("nonpad_kv_seqlen must be an i64 vector, got {}", nonpad->type().str());
    NNC_TRY(checkSameDim(node, nonpad->shape()[0], batch,
                         "nonpad_kv_seqlen length differs from the batch size"));
  }

  Shape y = rank == 4 ? Shape{batch, qHeads, qLen, vHeadSize}
                      : Shape{batch, qLen, mulDim(qHeads, vHeadSize, g)};
  return Types{TensorType(q->dtype(), y), TensorType(k->dtype(), {batch, kvHeads, total, headSize}),
               TensorType(v->dtype(), {batch, kvHeads, total, vHeadSize}),
               TensorType(q->dtype(), {batch, qHeads, qLen, total})};
}

Expected<Types> inferLinearAttention(const Node &node) {
  Graph &g = *node.graph();
  NNC_ASSIGN_OR_RETURN(Value * q, floatOperand(node, 0, "query"));
  NNC_ASSIGN_OR_RETURN(Value * k, floatOperand(node, 1, "key"));
  NNC_ASSIGN_OR_RETURN(Value * v, floatOperand(node, 2, "value"));
  NNC_ASSIGN_OR_RETURN(Value * past, optionalFloatOperand(node, 3, "past_state"));
  NNC_ASSIGN_OR_RETURN(Value * decay, optionalFloatOperand(node, 4, "decay"));
  NNC_ASSIGN_OR_RETURN(Value * beta, optionalFloatOperand(node, 5, "beta"));
  const std::string &rule = node.getString("update_rule");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return node.error("unknown update_rule '{}' (linear, gated, delta or gated_delta)", rule);
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  if (gating != (decay != nullptr))
    return node.error("update_rule '{}' {} the decay input", rule, gating ? "needs" : "takes no");
  if (delta != (beta != nullptr))
    return node.error("update_rule '{}' {} the beta input", rule, delta ? "needs" : "takes no");
  int64_t qh = node.getInt("q_num_heads"), kvh = node.getInt("kv_num_heads");
  if (qh <= 0 || kvh <= 0 || qh % kvh != 0)
    return node.error("q_num_heads ({}) must be a positive multiple of kv_num_heads ({})", qh, kvh);
  if (node.hasAttr("scale") && !std::isfinite(node.getFloat("scale")))
    return node.error("scale must be finite");
  for (const Value *t : {k, v, decay, beta})
    if (t && t->dtype() != q->dtype())
      return node.error("query, key, value, decay and beta must have one dtype, got {} and {}",
                        dtypeName(q->dtype()), dtypeName(t->dtype()));
  for (const Value *t : {q, k, v, decay, beta})
    if (t && t->rank() != 3)
      return node.error("query, key, value, decay and beta must be [B, T, heads * size], got {}",
                        t->type().str());
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  for (const Value *t : {k, v, decay, beta}) {
    if (!t)
      continue;
    NNC_TRY(checkSameDim(node, qs[0], t->shape()[0], "batch sizes differ"));
    NNC_TRY(checkSameDim(node, qs[1], t->shape()[1], "sequence lengths differ"));
  }
  NNC_ASSIGN_OR_RETURN(Dim dk, divDim(node, qs[2], qh, "query hidden"));
  NNC_ASSIGN_OR_RETURN(Dim kdk, divDim(node, ks[2], kvh, "key hidden"));
  NNC_TRY(checkSameDim(node, dk, kdk, "query and key head sizes differ"));
  NNC_ASSIGN_OR_RETURN(Dim dv, divDim(node, vs[2], kvh, "value hidden"));
  if (decay) {
    const Dim &last = decay->shape()[2];
    if (last.isStatic() && last.value() != kvh &&
        !(dk.isStatic() && last.value() == kvh * dk.value()))
      return node.error("decay's last dim {} must be kv_num_heads ({}) or kv_num_heads * d_k",
                        last.value(), kvh);
  }
  if (beta) {
    const Dim &last = beta->shape()[2];
    if (last.isStatic() && last.value() != kvh && last.value() != 1)
      return node.error("beta's last dim {} must be kv_num_heads ({}) or 1", last.value(), kvh);
  }
  Shape state{qs[0], Dim(kvh), dk, dv};
  if (past) {
    if (past->rank() != 4)
      return node.error("past_state must be [B, kv_num_heads, d_k, d_v], got {}",
                        past->type().str());
    const char *what[] = {"past_state batch size differs", "past_state head count differs",
                          "past_state d_k differs", "past_state d_v differs"};
    for (size_t d = 0; d < 4; ++d)
      NNC_TRY(checkSameDim(node, past->shape()[d], state[d], what[d]));
  }
  return Types{TensorType(q->dtype(), {qs[0], qs[1], mulDim(Dim(qh), dv, g)}),
               TensorType(past ? past->dtype() : q->dtype(), state)};
}

Expected<Types> inferRotaryEmbedding(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Value * x, floatOperand(node, 0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * cosCache, floatOperand(node, 1, "cos_cache"));
  NNC_ASSIGN_OR_RETURN(Value * sinCache, floatOperand(node, 2, "sin_cache"));
  Value *positions = node.operand(3);
  int64_t rank = x->rank();
  if (rank != 3 && rank != 4)
    return node.error("input must have rank 3 or 4, got {}", rank);
  if (cosCache->rank() != sinCache->rank())
    return node.error("cos_cache and sin_cache shapes differ: {} and {}",
                      shapeStr(cosCache->shape()), shapeStr(sinCache->shape()));
  Dim headSize;
  if (rank == 4) {
    headSize = x->shape()[3];
  } else {
    int64_t heads = node.getInt("num_heads", 0);
    if (heads <= 0)
      return node.error("3-D input needs a positive num_heads, got {}", heads);
    NNC_ASSIGN_OR_RETURN(headSize, divDim(node, x->shape()[2], heads, "hidden"));
  }
  int64_t rot = node.getInt("rotary_embedding_dim");
  if (rot < 0 || rot % 2 != 0)
    return node.error("rotary_embedding_dim must be even and non-negative, got {}", rot);
  if (rot > 0 && headSize.isStatic() && rot > headSize.value())
    return node.error("rotary_embedding_dim {} exceeds the head size {}", rot, headSize.value());
  if (rot == 0 && headSize.isStatic() && headSize.value() % 2 != 0)
    return node.error("head size {} must be even for a full rotation", headSize.value());
  std::optional<int64_t> half;
  if (rot > 0)
    half = rot / 2;
  else if (headSize.isStatic())
    half = headSize.value() / 2;
  int64_t cacheRank = positions ? 2 : 3;
  if (cosCache->rank() != cacheRank || sinCache->rank() != cacheRank)
    return node.error("cos_cache and sin_cache must have rank {} {} position_ids, got {}",
                      cacheRank, positions ? "with" : "without", cosCache->rank());
  const Dim &last = cosCache->shape().back();
  if (half)
    NNC_TRY(checkSameDim(node, last, Dim(*half), "cos_cache last dim must be rotary_dim / 2"));
  if (positions) {
    if (!isInteger(positions->dtype()) || positions->rank() != 2)
      return node.error("position_ids must be a rank-2 integer tensor, got {}",
                        positions->type().str());
  }
  return Types{x->type()};
}

} // namespace nnc::shape

// Interpreter kernel of linear_attention (ONNX LinearAttention-27): the recurrence run token by
// token as the spec states it, the state in f32 (f64 for f64 inputs) whatever the dtypes of
// the inputs and of the state. codegen/lower/LinearAttention.cpp runs the same steps per state
// column in the same order.
#include <cmath>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"

namespace nnc::interp {

namespace {

struct Geometry {
  int64_t batch, steps, qHeads, kvHeads, dk, dv;
  int64_t decayWidth; ///< decay's last dim: kvHeads (per head) or kvHeads * dk; 0 when absent.
  int64_t betaWidth;  ///< beta's last dim: kvHeads or 1; 0 when absent.
};

template <typename T>
Results run(const Node &node, const Operands &ops, const Geometry &g, T scale) {
  bool hasPast = !ops[3].isNull();
  const int64_t group = g.qHeads / g.kvHeads;
  std::vector<double> qv = nn::toDoubles(ops[0]), kv = nn::toDoubles(ops[1]),
                      vv = nn::toDoubles(ops[2]);
  std::vector<double> decay, beta;
  if (g.decayWidth)
    decay = nn::toDoubles(ops[4]);
  if (g.betaWidth)
    beta = nn::toDoubles(ops[5]);
  // state[((b * kvHeads + h) * dk + d) * dv + m]
  std::vector<T> state(static_cast<size_t>(g.batch * g.kvHeads * g.dk * g.dv), T(0));
  if (hasPast) {
    std::vector<double> p = nn::toDoubles(ops[3]);
    for (size_t i = 0; i < state.size(); ++i)
      state[i] = static_cast<T>(p[i]);
  }
  std::vector<double> out(static_cast<size_t>(g.batch * g.steps * g.qHeads * g.dv));
  std::vector<T> kt(static_cast<size_t>(g.dk)), vt(static_cast<size_t>(g.dv)),
      gate(static_cast<size_t>(g.dk));
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t t = 0; t < g.steps; ++t) {
      int64_t row = b * g.steps + t;
      for (int64_t h = 0; h < g.kvHeads; ++h) {
        T *s = &state[static_cast<size_t>((b * g.kvHeads + h) * g.dk * g.dv)];
        for (int64_t d = 0; d < g.dk; ++d)
          kt[d] = static_cast<T>(kv[static_cast<size_t>((row * g.kvHeads + h) * g.dk + d)]);
        for (int64_t m = 0; m < g.dv; ++m)
          vt[m] = static_cast<T>(vv[static_cast<size_t>((row * g.kvHeads + h) * g.dv + m)]);
        if (g.decayWidth) {
          for (int64_t d = 0; d < g.dk; ++d) {
            int64_t at =
                g.decayWidth == g.kvHeads ? row * g.kvHeads + h : (row * g.kvHeads + h) * g.dk + d;
            gate[d] = std::exp(static_cast<T>(decay[static_cast<size_t>(at)]));
          }
          for (int64_t d = 0; d < g.dk; ++d)
            for (int64_t m = 0; m < g.dv; ++m)
              s[d * g.dv + m] *= gate[d];
        }
        if (g.betaWidth) {
          T bt = static_cast<T>(
              beta[static_cast<size_t>(row * g.betaWidth + (g.betaWidth == 1 ? 0 : h))]);
          for (int64_t m = 0; m < g.dv; ++m) {
            T retrieved = 0;
            for (int64_t d = 0; d < g.dk; ++d)
              retrieved += s[d * g.dv + m] * kt[d];
            vt[m] = bt * (vt[m] - retrieved);
          }
        }
        for (int64_t d = 0; d < g.dk; ++d)
          for (int64_t m = 0; m < g.dv; ++m)
            s[d * g.dv + m] += kt[d] * vt[m];
        for (int64_t j = 0; j < group; ++j) {
          int64_t hq = h * group + j;
          const double *qt = &qv[static_cast<size_t>((row * g.qHeads + hq) * g.dk)];
          for (int64_t m = 0; m < g.dv; ++m) {
            T acc = 0;
            for (int64_t d = 0; d < g.dk; ++d)
              acc += static_cast<T>(qt[d]) * s[d * g.dv + m];
            out[static_cast<size_t>((row * g.qHeads + hq) * g.dv + m)] = scale * acc;
          }
        }
      }
    }
  NNC_ASSIGN_OR_RETURN(
      Tensor y, nn::fromDoubles(node.result(0)->dtype(), {g.batch, g.steps, g.qHeads * g.dv}, out));
  std::vector<double> st(state.begin(), state.end());
  NNC_ASSIGN_OR_RETURN(Tensor present, nn::fromDoubles(node.result(1)->dtype(),
                                                       {g.batch, g.kvHeads, g.dk, g.dv}, st));
  return std::vector<Tensor>{y, present};
}

} // namespace

Results evalLinearAttention(const Node &node, const Operands &ops) {
  if (ops.size() < 3 || ops[0].isNull() || ops[1].isNull() || ops[2].isNull())
    return node.error("needs query, key and value");
  Operands all = ops;
  all.resize(6);
  const Tensor &q = all[0], &k = all[1], &v = all[2];
  for (const Tensor *t : {&q, &k, &v})
    if (t->rank() != 3)
      return node.error("query, key and value must be [B, T, heads * size], got {}",
                        extentsStr(t->extents()));
  Geometry g{};
  g.batch = q.dim(0);
  g.steps = q.dim(1);
  g.qHeads = node.getInt("q_num_heads");
  g.kvHeads = node.getInt("kv_num_heads");
  if (g.qHeads <= 0 || g.kvHeads <= 0 || g.qHeads % g.kvHeads != 0 || q.dim(2) % g.qHeads != 0 ||
      v.dim(2) % g.kvHeads != 0)
    return node.error("query {} and value {} do not split into {} and {} heads",
                      extentsStr(q.extents()), extentsStr(v.extents()), g.qHeads, g.kvHeads);
  g.dk = q.dim(2) / g.qHeads;
  g.dv = v.dim(2) / g.kvHeads;
  auto fits = [&](const Tensor &t, int64_t last) {
    return t.rank() == 3 && t.dim(0) == g.batch && t.dim(1) == g.steps && t.dim(2) == last;
  };
  if (!fits(k, g.kvHeads * g.dk) || !fits(v, g.kvHeads * g.dv))
    return node.error("key {} and value {} do not fit query {}", extentsStr(k.extents()),
                      extentsStr(v.extents()), extentsStr(q.extents()));
  if (!all[3].isNull() && all[3].extents() != Extents{g.batch, g.kvHeads, g.dk, g.dv})
    return node.error("past_state {} is not [{}, {}, {}, {}]", extentsStr(all[3].extents()),
                      g.batch, g.kvHeads, g.dk, g.dv);
  if (!all[4].isNull()) {
    g.decayWidth = all[4].rank() == 3 ? all[4].dim(2) : -1;
    if (!fits(all[4], g.kvHeads) && !fits(all[4], g.kvHeads * g.dk))
      return node.error("decay {} is not [{}, {}, {} or {}]", extentsStr(all[4].extents()), g.batch,
                        g.steps, g.kvHeads, g.kvHeads * g.dk);
  }
  if (!all[5].isNull()) {
    g.betaWidth = all[5].rank() == 3 ? all[5].dim(2) : -1;
    if (!fits(all[5], g.kvHeads) && !fits(all[5], 1))
      return node.error("beta {} is not [{}, {}, {} or 1]", extentsStr(all[5].extents()), g.batch,
                        g.steps, g.kvHeads);
  }
  double scale = node.getFloat("scale", 0.0);
  if (scale == 0.0)
    scale = 1.0 / std::sqrt(static_cast<double>(g.dk));
  if (q.dtype() == DType::F64)
    return run<double>(node, all, g, scale);
  return run<float>(node, all, g, static_cast<float>(scale));
}

} // namespace nnc::interp

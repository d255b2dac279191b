// Interpreter kernels of the reductions, arg-reductions, cumsum/cumprod and topk.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "Scalar.h"
#include "interp/Kernels.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::interp {
namespace {

using namespace nnc::scalar;

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// The accumulator type: double for floats (f32 sums are accurate), a 64-bit integer
/// otherwise (integer sums wrap in the result type), bool for bool.
template <DType D> struct AccOf {
  using type = std::conditional_t<kIsFloat<Compute<D>>, double,
                                  std::conditional_t<std::is_same_v<Compute<D>, bool>, bool,
                                                     Compute<D>>>;
};

/// Splits the extents around `axis`: outer * size * inner.
struct AxisSplit {
  int64_t outer = 1, size = 1, inner = 1;
  AxisSplit(const Extents &e, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i)
      outer *= e[i];
    size = e[axis];
    for (size_t i = axis + 1; i < e.size(); ++i)
      inner *= e[i];
  }
};

template <DType D, ReduceKind K>
Results reduceTyped(const Node &node, const Tensor &x, const std::vector<bool> &reduced,
                    bool keepdims) {
  using T = Compute<D>;
  using Acc = typename AccOf<D>::type;
  int64_t rank = x.rank();
  Extents outKeep, outFinal;
  for (int64_t d = 0; d < rank; ++d) {
    outKeep.push_back(reduced[d] ? 1 : x.dim(d));
    if (!reduced[d])
      outFinal.push_back(x.dim(d));
    else if (keepdims)
      outFinal.push_back(1);
  }
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(D, outFinal));
  int64_t outN = out.numElements();
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d])
      count *= x.dim(d);

  Acc init;
  if constexpr (K == ReduceKind::Sum || K == ReduceKind::Mean)
    init = Acc(0);
  else if constexpr (K == ReduceKind::Prod)
    init = Acc(1);
  else if constexpr (K == ReduceKind::Max)
    init = std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::lowest();
  else
    init = std::numeric_limits<Acc>::has_infinity ? std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::max();
  std::unique_ptr<Acc[]> acc(new Acc[static_cast<size_t>(outN)]); // not vector<bool>
  std::fill(acc.get(), acc.get() + outN, init);

  // Output stride of each input dim (0 where reduced); walk the input in order.
  std::vector<int64_t> ostride(rank, 0);
  int64_t s = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    ostride[d] = reduced[d] ? 0 : s;
    s *= outKeep[d];
  }
  const Storage<D> *in = x.data<Storage<D>>();
  int64_t n = x.numElements();
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    Acc v = static_cast<Acc>(load<D>(in, i));
    Acc &a = acc[off];
    if constexpr (std::is_same_v<Acc, bool>) {
      if constexpr (K == ReduceKind::Max)
        a = a || v;
      else
        a = a && v;
    } else if constexpr (K == ReduceKind::Sum || K == ReduceKind::Mean) {
      a = add<Acc>(a, v);
    } else if constexpr (K == ReduceKind::Prod) {
      a = mul<Acc>(a, v);
    } else if constexpr (K == ReduceKind::Max) {
      a = max<Acc>(a, v);
    } else {
      a = min<Acc>(a, v);
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      off += ostride[d];
      if (++idx[d] < x.dim(d))
        break;
      off -= ostride[d] * x.dim(d);
      idx[d] = 0;
    }
  }

  Storage<D> *o = out.data<Storage<D>>();
  for (int64_t i = 0; i < outN; ++i) {
    if constexpr (K == ReduceKind::Mean) {
      if constexpr (kIsFloat<Acc>)
        store<D>(o, i, acc[i] / static_cast<double>(count));
      else
        store<D>(o, i, count == 0 ? T(0) : static_cast<T>(
                                               static_cast<double>(acc[i]) / double(count)));
    } else {
      store<D>(o, i, acc[i]);
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

template <ReduceKind K> Results evalReduce(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.isNull())
    return node.error("operand 0 is missing");
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                       normalizeAxes(node.getInts("axes"), x.rank(), node, "axes"));
  std::vector<bool> reduced(x.rank(), axes.empty());
  for (int64_t a : axes)
    reduced[a] = true;
  bool keepdims = node.getInt("keepdims") != 0;
  bool allowBool = K == ReduceKind::Max || K == ReduceKind::Min;
  Results result = node.error("operand must have a numeric type{}, got {}",
                              allowBool ? " or bool" : "", dtypeName(x.dtype()));
  dispatchArithmetic(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D != DType::Bool)
      result = reduceTyped<D, K>(node, x, reduced, keepdims);
    else if (allowBool)
      result = reduceTyped<D, K>(node, x, reduced, keepdims);
  });
  return result;
}

/// Orders values for arg/top-k: NaN counts as larger than every number.
template <typename T> bool greaterNaN(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a))
      return !std::isnan(b);
    if (std::isnan(b))
      return false;
  }
  return a > b;
}

/// a < b, except that NaN counts as smaller than every number.
template <typename T> bool lessNaN(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a))
      return !std::isnan(b);
    if (std::isnan(b))
      return false;
  }
  return a < b;
}

template <bool IsMax> Results evalArg(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.isNull())
    return node.error("operand 0 is missing");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  bool keepdims = node.getInt("keepdims") != 0;
  bool last = node.getInt("select_last_index") != 0;
  Extents outE;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != axis)
      outE.push_back(x.dim(d));
    else if (keepdims)
      outE.push_back(1);
  }
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(DType::I64, outE));
  AxisSplit sp(x.extents(), axis);
  if (sp.size == 0 && out.numElements() > 0)
    return node.error("cannot take the index of an extremum over axis {} of size 0", axis);
  Results result = node.error("operand must have a numeric type, got {}", dtypeName(x.dtype()));
  dispatchArithmetic(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D != DType::Bool) {
      using T = Compute<D>;
      const Storage<D> *in = x.data<Storage<D>>();
      int64_t *o = out.data<int64_t>();
      for (int64_t a = 0; a < sp.outer; ++a)
        for (int64_t b = 0; b < sp.inner; ++b) {
          int64_t base = a * sp.size * sp.inner + b;
          int64_t best = 0;
          T bv = load<D>(in, base);
          for (int64_t k = 1; k < sp.size; ++k) {
            T v = load<D>(in, base + k * sp.inner);
            // NaN wins over every number (like numpy's argmax and argmin).
            bool better = IsMax ? greaterNaN(v, bv) : lessNaN(v, bv);
            bool tie = !greaterNaN(v, bv) && !greaterNaN(bv, v);
            if (better || (last && tie)) {
              best = k;
              bv = v;
            }
          }
          o[a * sp.inner + b] = best;
        }
      result = std::vector<Tensor>{out};
    }
  });
  return result;
}

} // namespace

Results evalReduceSum(const Node &node, const Operands &ops) {
  return evalReduce<ReduceKind::Sum>(node, ops);
}
Results evalReduceMean(const Node &node, const Operands &ops) {
  return evalReduce<ReduceKind::Mean>(node, ops);
}
Results evalReduceMax(const Node &node, const Operands &ops) {
  return evalReduce<ReduceKind::Max>(node, ops);
}
Results evalReduceMin(const Node &node, const Operands &ops) {
  return evalReduce<ReduceKind::Min>(node, ops);
}
Results evalReduceProd(const Node &node, const Operands &ops) {
  return evalReduce<ReduceKind::Prod>(node, ops);
}
Results evalArgMax(const Node &node, const Operands &ops) { return evalArg<true>(node, ops); }
Results evalArgMin(const Node &node, const Operands &ops) { return evalArg<false>(node, ops); }

/// CumSum (Prod false) or CumProd (Prod true): the running sum or product along the axis,
/// accumulated in the wide type as the generated kernels do.
template <bool Prod> Results evalCumulative(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.isNull())
    return node.error("operand 0 is missing");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  bool exclusive = node.getInt("exclusive") != 0;
  bool reverse = node.getInt("reverse") != 0;
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(x.dtype(), x.extents()));
  AxisSplit sp(x.extents(), axis);
  Results result = node.error("operand must have a numeric type, got {}", dtypeName(x.dtype()));
  dispatchArithmetic(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D != DType::Bool) {
      using Acc = typename AccOf<D>::type;
      const Storage<D> *in = x.data<Storage<D>>();
      Storage<D> *o = out.data<Storage<D>>();
      for (int64_t a = 0; a < sp.outer; ++a)
        for (int64_t b = 0; b < sp.inner; ++b) {
          Acc sum = Acc(Prod ? 1 : 0);
          for (int64_t j = 0; j < sp.size; ++j) {
            int64_t k = reverse ? sp.size - 1 - j : j;
            int64_t i = (a * sp.size + k) * sp.inner + b;
            Acc v = static_cast<Acc>(load<D>(in, i));
            if (exclusive)
              store<D>(o, i, sum);
            if constexpr (Prod)
              sum = mul<Acc>(sum, v);
            else
              sum = add<Acc>(sum, v);
            if (!exclusive)
              store<D>(o, i, sum);
          }
        }
      result = std::vector<Tensor>{out};
    }
  });
  return result;
}
Results evalCumSum(const Node &node, const Operands &ops) {
  return evalCumulative<false>(node, ops);
}
Results evalCumProd(const Node &node, const Operands &ops) {
  return evalCumulative<true>(node, ops);
}

Results evalTopK(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.isNull() || ops.size() < 2 || ops[1].isNull())
    return node.error("expects operands (x, k)");
  if (x.rank() == 0)
    return node.error("operand 0 must have rank >= 1");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  const Tensor &kt = ops[1];
  if (kt.numElements() != 1 || !(isInteger(kt.dtype())))
    return node.error("k must be a one-element integer tensor, got {}{}", dtypeName(kt.dtype()),
                      extentsStr(kt.extents()));
  int64_t k = kt.elementAsInt(0);
  if (k < 0)
    return node.error("k must be non-negative, got {}", k);
  if (k > x.dim(axis))
    return node.error("k = {} is larger than axis {} of size {}", k, axis, x.dim(axis));
  bool largest = node.getInt("largest") != 0;
  Extents outE = x.extents();
  outE[axis] = k;
  NNC_ASSIGN_OR_RETURN(Tensor values, Tensor::create(x.dtype(), outE));
  NNC_ASSIGN_OR_RETURN(Tensor indices, Tensor::create(DType::I64, outE));
  AxisSplit sp(x.extents(), axis);
  Results result = node.error("operand must have a numeric type, got {}", dtypeName(x.dtype()));
  dispatchArithmetic(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D != DType::Bool) {
      using T = Compute<D>;
      const Storage<D> *in = x.data<Storage<D>>();
      Storage<D> *ov = values.data<Storage<D>>();
      int64_t *oi = indices.data<int64_t>();
      std::vector<int64_t> order(static_cast<size_t>(sp.size));
      std::vector<T> line(static_cast<size_t>(sp.size));
      for (int64_t a = 0; a < sp.outer; ++a)
        for (int64_t b = 0; b < sp.inner; ++b) {
          for (int64_t j = 0; j < sp.size; ++j)
            line[j] = load<D>(in, (a * sp.size + j) * sp.inner + b);
          std::iota(order.begin(), order.end(), int64_t(0));
          auto before = [&](int64_t p, int64_t q) {
            bool pq = largest ? greaterNaN(line[p], line[q]) : greaterNaN(line[q], line[p]);
            bool qp = largest ? greaterNaN(line[q], line[p]) : greaterNaN(line[p], line[q]);
            if (pq != qp)
              return pq;
            return p < q; // ties: lower index first
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          for (int64_t j = 0; j < k; ++j) {
            int64_t o = (a * k + j) * sp.inner + b;
            store<D>(ov, o, line[order[j]]);
            oi[o] = order[j];
          }
        }
      result = std::vector<Tensor>{values, indices};
    }
  });
  return result;
}

} // namespace nnc::interp

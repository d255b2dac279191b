// Interpreter kernels of all elementwise ops: the Ops.def formulas with numpy broadcasting.
#include <array>
#include <cmath>

#include "Scalar.h"
#include "interp/Kernels.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::interp {
namespace {

using namespace nnc::scalar;

constexpr int kMaxOperands = 3;

/// Walks the output of a broadcast, keeping each operand's flat offset.
struct BroadcastWalk {
  Extents out;
  int numOps = 0;
  std::array<std::vector<int64_t>, kMaxOperands> strides; // per output dim; 0 where broadcast

  BroadcastWalk(const Extents &outExtents, const std::vector<const Extents *> &in)
      : out(outExtents), numOps(static_cast<int>(in.size())) {
    size_t r = out.size();
    for (int k = 0; k < numOps; ++k) {
      const Extents &e = *in[k];
      strides[k].assign(r, 0);
      int64_t s = 1;
      for (size_t j = 0; j < e.size(); ++j) {
        size_t d = e.size() - 1 - j; // operand dim
        size_t od = r - 1 - j;       // output dim
        strides[k][od] = e[d] == 1 ? 0 : s;
        s *= e[d];
      }
    }
  }

  template <typename Body> void run(int64_t n, Body &&body) {
    size_t r = out.size();
    std::vector<int64_t> idx(r, 0);
    std::array<int64_t, kMaxOperands> off{0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      body(i, off);
      for (size_t j = r; j-- > 0;) {
        ++idx[j];
        for (int k = 0; k < numOps; ++k)
          off[k] += strides[k][j];
        if (idx[j] < out[j])
          break;
        for (int k = 0; k < numOps; ++k)
          off[k] -= strides[k][j] * out[j];
        idx[j] = 0;
      }
    }
  }
};

template <typename Fn, DType D>
Results runTyped(const Node &node, const Operands &ops, const Extents &outExtents) {
  using S = Storage<D>;
  using T = Compute<D>;
  constexpr bool isSelect = std::is_same_v<Fn, FnSelect>;
  constexpr DType outType = Fn::kBoolResult ? DType::Bool : D;
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(outType, outExtents));
  Storage<outType> *o = out.data<Storage<outType>>();
  int64_t n = out.numElements();

  const void *p[kMaxOperands] = {nullptr, nullptr, nullptr};
  bool same = true;
  std::vector<const Extents *> exts;
  for (size_t k = 0; k < ops.size(); ++k) {
    p[k] = ops[k].rawData();
    exts.push_back(&ops[k].extents());
    same = same && ops[k].extents() == outExtents;
  }

  auto compute = [&](int64_t i, int64_t i0, int64_t i1, int64_t i2) {
    if constexpr (isSelect) {
      bool cond = static_cast<const bool *>(p[0])[i0];
      T b = load<D>(static_cast<const S *>(p[1]), i1);
      T c = load<D>(static_cast<const S *>(p[2]), i2);
      store<outType>(o, i, Fn::apply(cond, b, c));
    } else if constexpr (Fn::kArity == 1) {
      T a = load<D>(static_cast<const S *>(p[0]), i0);
      if constexpr (std::is_same_v<Fn, FnNeg> && kIsInt<T>)
        store<outType>(o, i, sub<T>(T(0), a)); // wraps instead of overflowing on INT_MIN
      else
        store<outType>(o, i, Fn::apply(a, a, a));
    } else if constexpr (Fn::kArity == 2) {
      T a = load<D>(static_cast<const S *>(p[0]), i0);
      T b = load<D>(static_cast<const S *>(p[1]), i1);
      store<outType>(o, i, Fn::apply(a, b, b));
    } else {
      T a = load<D>(static_cast<const S *>(p[0]), i0);
      T b = load<D>(static_cast<const S *>(p[1]), i1);
      T c = load<D>(static_cast<const S *>(p[2]), i2);
      store<outType>(o, i, Fn::apply(a, b, c));
    }
  };

  if (same) {
    for (int64_t i = 0; i < n; ++i)
      compute(i, i, i, i);
  } else {
    BroadcastWalk walk(outExtents, exts);
    walk.run(n, [&](int64_t i, const std::array<int64_t, kMaxOperands> &off) {
      compute(i, off[0], off[1], off[2]);
    });
  }
  return std::vector<Tensor>{std::move(out)};
}

template <typename Fn> Results runOp(const Node &node, const Operands &ops) {
  if (ops.size() != static_cast<size_t>(Fn::kArity))
    return node.error("expects {} operands, got {}", Fn::kArity, ops.size());
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].isNull())
      return node.error("operand {} is missing", k);
  constexpr bool isSelect = std::is_same_v<Fn, FnSelect>;
  size_t first = isSelect ? 1 : 0;
  if (isSelect && ops[0].dtype() != DType::Bool)
    return node.error("condition must be bool, got {}", dtypeName(ops[0].dtype()));
  DType t = ops[first].dtype();
  for (size_t k = first; k < ops.size(); ++k)
    if (ops[k].dtype() != t)
      return node.error("operand dtypes differ: {} and {}", dtypeName(t),
                        dtypeName(ops[k].dtype()));

  Extents outExtents = ops[0].extents();
  for (size_t k = 1; k < ops.size(); ++k) {
    std::optional<Extents> b = broadcastExtents(outExtents, ops[k].extents());
    if (!b)
      return node.error("operand shapes {} do not broadcast", [&] {
        std::string s;
        for (size_t j = 0; j < ops.size(); ++j)
          s += (j ? " and " : "") + extentsStr(ops[j].extents());
        return s;
      }());
    outExtents = *b;
  }

  Results result = node.error("operands must have {}, got {}", typeClassName(Fn::kTypes),
                              dtypeName(t));
  dispatchArithmetic(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (accepts(Fn::kTypes, D))
      result = runTyped<Fn, D>(node, ops, outExtents);
  });
  return result;
}

} // namespace

Results evalElementwise(const Node &node, const Operands &ops) {
  switch (node.kind()) {
#define NNC_ELEMENTWISE(Id, ...)                                                                   \
  case OpKind::Id:                                                                                 \
    return runOp<Fn##Id>(node, ops);
#include "nnc/ir/Ops.def"
  default:
    break;
  }
  return node.error("is not an elementwise op");
}

} // namespace nnc::interp

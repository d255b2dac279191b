// What the composite lowerers (Composite.cpp, Attention.cpp) share: the compute type, small
// expression helpers, schedule steps, operand checks and the [batch, heads, seq, head] view.
#pragma once

#include <cmath>
#include <limits>

#include "LowerUtil.h"
#include "Lowerers.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower::composite {

using kir::Expr;
using kir::Stmt;
using Step = kir::ScheduleStep;

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Below this many elements of work a kernel runs serially.
constexpr int64_t kParallelWork = 32768;

inline int64_t product(const Extents &e, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < e.size(); ++i)
    p *= e[i];
  return p;
}

/// The arithmetic type of a kernel whose values have these dtypes. The interpreter computes
/// in double, and results are compared with it at rtol 1e-3 / atol 1e-7:
///  - `accurate` ops (normalizations, attention, rotary embedding) compute in f64: their
///    statistics over long rows and their sums of products of O(1) values that cancel to near
///    zero (y = n * scale + bias, Σ p v, c x1 - s x2) are off by more than 1e-7 in f32;
///  - the others (softmax family, lp_norm: positive sums and quotients) compute in f32 (f16
///    via f32), except for f64 and bf16, whose 8-bit mantissa makes one f32 rounding flip in
///    the last place a 0.4% error.
inline DType computeType(std::initializer_list<DType> ts, bool accurate) {
  if (accurate)
    return DType::F64;
  for (DType t : ts)
    if (t == DType::F64 || t == DType::BF16)
      return DType::F64;
  return DType::F32;
}

inline Expr fimm(double v, DType ct) {
  return kir::floatImm(v, ct);
}
inline Expr i64(int64_t v) {
  return kir::intImm(v);
}
inline Expr fop(OpKind k, Expr a) {
  return kir::op(k, {std::move(a)});
}
inline Expr fop(OpKind k, Expr a, Expr b) {
  return kir::op(k, {std::move(a), std::move(b)});
}

/// `e` converted to dtype `t` for a store. f64 goes to f16/bf16 through f32, as the
/// interpreter's fromDoubles()/roundTo() do (the two roundings differ from one in rare ties).
inline Expr narrow(Expr e, DType t) {
  if (e->type == DType::F64 && (t == DType::F16 || t == DType::BF16))
    e = kir::cast(std::move(e), DType::F32);
  return kir::cast(std::move(e), t);
}

/// `e` (of compute type ct) rounded to the precision of float dtype `t`, like the
/// interpreter's roundTo(): identity when t is ct or wider.
inline Expr roundTo(Expr e, DType t, DType ct) {
  if (t == ct || t == DType::F64 || !isFloat(t))
    return e;
  return kir::cast(narrow(std::move(e), t), ct);
}

/// Schedule steps built up per kernel.
struct Sched {
  kir::Schedule s;
  void parallel(const std::string &loop) { s.steps.push_back({Step::Parallel, loop, 0, {}}); }
  /// The loop over independent rows: an OpenCL device's grid (declared first, so later
  /// steps may split it), and parallel on the CPU when worthParallel(rows, work).
  void rows(const std::string &loop, int64_t rows, int64_t work);
  /// Vectorizes a loop of independent iterations over contiguous elements, by 8 when its
  /// extent is a multiple of 8 (no tail guard); else, from 16 iterations, whole (the
  /// emitter's width, LLVM's tail: a softmax row of 49 in a window of Swin).
  void vectorize(const std::string &loop, int64_t extent) {
    if (extent < 16)
      return;
    if (extent % 8 != 0) {
      s.steps.push_back({Step::Vectorize, loop, 0, {}});
      return;
    }
    s.steps.push_back({Step::Split, loop, 8, {}});
    s.steps.push_back({Step::Vectorize, loop + ".i", 0, {}});
  }
};

/// The loop over rows runs in parallel when there are two rows or more and enough work.
inline bool worthParallel(int64_t rows, int64_t work) {
  return rows >= 2 && work >= kParallelWork;
}

inline void Sched::rows(const std::string &loop, int64_t rows, int64_t work) {
  s.steps.insert(s.steps.begin(), {Step::GpuGrid, "", 0, {loop}});
  if (worthParallel(rows, work))
    parallel(loop);
}

inline Error checkFloat(const Node &node, size_t i, const char *what) {
  const Value *v = node.operand(i);
  if (!v)
    return node.error("{} (operand {}) is missing", what, i);
  if (!isFloat(v->dtype()))
    return node.error("{} must have a float dtype, got {}", what, dtypeName(v->dtype()));
  return Error::success();
}

/// A kernel that does nothing (a node with an empty result).
inline std::vector<kir::Kernel> emptyKernel(const Node &node, const std::string &prefix) {
  KernelBuilder kb(node, prefix);
  kb.result(0);
  return {kb.finish(kir::block({}))};
}

/// The flat index into an operand of extents `in` that broadcasts (numpy, one way) to `x`,
/// at flat position `flat` of x, where flat = row * cols + col. Common layouts fold: an
/// operand equal to x is `flat`, one equal to x's dims from `axis` on is `col`.
inline Expr broadcastFlat(const Extents &in, const Extents &x, size_t axis, const Expr &row,
                          const Expr &col, int64_t cols) {
  size_t off = x.size() - in.size();
  // onlyCols: `in` covers all of x's dims from `axis` on, and is 1 on those before.
  bool sameAsX = in == x, onlyCols = off <= axis;
  for (size_t d = 0; d < in.size(); ++d)
    if (off + d < axis ? in[d] != 1 : in[d] != x[off + d])
      onlyCols = false;
  Expr flat = kir::add(kir::mul(row, i64(cols)), col);
  if (sameAsX)
    return flat;
  if (onlyCols)
    return col;
  std::vector<int64_t> xs = stridesOf(x);
  std::vector<Expr> idx(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    Expr q = kir::div(flat, i64(xs[d]));
    idx[d] = d == 0 ? q : kir::mod(q, i64(x[d]));
  }
  return broadcastIndex(idx, in);
}

/// A [batch, heads, seq, head] view of a 4-D tensor or of a 3-D [batch, seq, heads*head] one.
struct HeadView {
  int64_t batch = 0, heads = 0, seq = 0, head = 0;
  bool packed = false;
  Expr at(Expr b, Expr h, Expr s, Expr d) const {
    using namespace kir;
    if (packed)
      return add(mul(add(mul(add(mul(b, i64(seq)), s), i64(heads)), h), i64(head)), d);
    return add(mul(add(mul(add(mul(b, i64(heads)), h), i64(seq)), s), i64(head)), d);
  }
};

inline Expected<HeadView> headView(const Node &node, const Extents &e, int64_t heads,
                                          const char *what) {
  if (e.size() == 4)
    return HeadView{e[0], e[1], e[2], e[3], false};
  if (heads <= 0 || e[2] % heads != 0)
    return node.error("{} hidden size {} is not divisible by {} heads", what, e[2], heads);
  return HeadView{e[0], heads, e[1], e[2] / heads, true};
}

} // namespace nnc::lower::composite

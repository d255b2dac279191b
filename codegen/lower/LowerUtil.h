// Helpers shared by the lowerers: static extents and strides, index expressions, a builder
// that declares a node's buffers and names loop variables, and default schedules.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nnc/codegen/Lowering.h"

namespace nnc::lower {

/// Knob `name` of a tuning config, `dflt` where the config does not set it.
inline int64_t knob(const tuning::Config &c, const char *name, int64_t dflt) {
  auto it = c.find(name);
  return it == c.end() ? dflt : it->second;
}

/// The static extents of `v` (lowerNode has checked that operand shapes are static; result
/// shapes are asserted static here).
Extents extentsOf(const Value *v);
/// Element count of static extents (1 for a scalar).
int64_t numElementsOf(const Extents &e);
/// Row-major strides in elements.
std::vector<int64_t> stridesOf(const Extents &e);

/// sum_d idx[d] * strides[d] as an i64 expression (stride-0 terms are dropped).
kir::Expr flatIndex(const std::vector<kir::Expr> &idx, const std::vector<int64_t> &strides);
/// The flat index into an operand of extents `in`, numpy-broadcast (right-aligned) to the
/// output position `outIdx`: stride 0 on the operand's size-1 dims.
kir::Expr broadcastIndex(const std::vector<kir::Expr> &outIdx, const Extents &in);

/// The value of `t`, a one-element constant, as an immediate of `type`: when `t` has that
/// dtype and a double holds its value exactly (f32, f64, integers of at most 32 bits; not a
/// 64-bit hash constant). Else (or for a null `t`) nullptr: the caller loads it.
kir::Expr exactImmediate(const Tensor *t, DType type);

/// Loop variables in scope with their (constant) extents.
using LoopExtents = std::map<std::string, int64_t>;
/// e / m for a non-negative index e whose terms (the operands of its additions) are each
/// non-negative: terms that are multiples of m divide exactly; the rest, when the loop
/// extents bound it below m, contributes nothing.
kir::Expr divIndex(const kir::Expr &e, int64_t m, const LoopExtents &env);
/// e % m under the same conditions.
kir::Expr modIndex(const kir::Expr &e, int64_t m, const LoopExtents &env);

/// The output extents and each operand's extents (same rank, 1 on broadcast dims) after
/// dropping size-1 output dims and merging neighbouring dims that every operand either has
/// in full or broadcasts: [N,C,H,W] + [1,C,1,1] becomes [N,C,H*W] + [1,C,1].
struct Collapsed {
  Extents out;
  std::vector<Extents> in;
};

Collapsed collapse(const Extents &out, const std::vector<Extents> &ins);

/// The scalar value of a pointwise node (isFusibleElementwise: an elementwise op, cast,
/// quantize or dequantize) from its operands' values: kir::op for the elementwise ops, a
/// kernel IR cast with the node's options, and quantize / dequantize spelled in primitives
/// (a division, round, compares, casts) that every backend already translates.
kir::Expr pointwiseExpr(const Node &n, const std::vector<kir::Expr> &args);

/// The dtype a kernel moves values of `t` as: `t` for arithmetic dtypes; u8 for the
/// storage-only formats (f8, f4, i4, ...), which take one byte per element in memory, so
/// copies need no arithmetic on them.
DType movedType(DType t);

/// Builds one kernel of a node. Buffers are declared on first use, in that order, with the
/// value's dtype (movedType) and static element count: operand k is named `in<k>` (role
/// Operand, index k), result k `out<k>` (role Result, index k, written).
class KernelBuilder {
public:
  KernelBuilder(const Node &node, std::string kernelName);

  const Node &node() const { return node_; }
  /// The buffer (index into Kernel::buffers) of operand i / result i.
  int operand(size_t i);
  int result(size_t i);
  /// Result i, one of whose dims depends on data (the others static), as a buffer of
  /// `capacity` elements written packed in row-major order for the actual extent, and the
  /// i64 buffer (role Extent) the kernel writes that dim's actual extent to.
  std::pair<int, int> dynamicResult(size_t i, int64_t capacity);
  /// A scratch buffer `index` of the node (declared once; written).
  /// `perThread`: BufferDecl::perThread (each thread's own, live within a parallel chunk).
  int scratch(int index, DType t, int64_t numElements, bool perThread = false);
  /// A parameter declared as given (for kernels of a fusion unit, whose operands are not the
  /// builder node's); returns its buffer index.
  int declare(kir::BufferDecl decl);
  DType bufferType(int b) const { return buffers_[b].dtype; }

  /// buffers[b][index], typed from the buffer.
  kir::Expr load(int b, kir::Expr index) const;
  /// Marks `b` written (operands are not, unless stored to) and returns the store.
  kir::Stmt store(int b, kir::Expr index, kir::Expr value);
  /// Marks `b` written and returns the vector store (kir::vecStore).
  kir::Stmt vecStore(int b, kir::Expr index, std::vector<kir::Expr> values);
  /// Marks `c` written and returns the GemmTile (kir::gemmTile) writing it.
  kir::Stmt gemmTile(const kir::GemmTileShape &shape, int c, kir::Expr aOff, kir::Expr bOff,
                     kir::Expr cOff, kir::Expr kc);
  /// Marks `c` written and returns the ConvTile (kir::convTile) writing it.
  kir::Stmt convTile(const kir::ConvTileShape &shape, int c, std::vector<kir::Expr> args);

  /// A runtime check (kir::RuntimeCheck): the statement that, when `failed` holds, records
  /// `value` (i64) in the kernel's status buffer (role Status, declared on first use), so
  /// the run fails with `c`'s message. Where it sits decides its cost: put it where the
  /// checked value is read once, outside vectorized loops.
  kir::Stmt check(kir::Expr failed, kir::Expr value, kir::RuntimeCheck c);

  /// A fresh variable name `<prefix><n>` (unique in the kernel).
  std::string freshName(const std::string &prefix = "i");
  /// A fresh local `<prefix><n>` of type t = init, declared by appending to `at`; returns it.
  kir::Expr bind(std::vector<kir::Stmt> &at, const std::string &prefix, DType t, kir::Expr init);
  /// A loop nest over `extents` (outermost first) with fresh variables; `body` gets the loop
  /// variables. For rank 0 it is just the body. `loopNames` (if given) receives the names.
  kir::Stmt loopNest(const Extents &extents,
                     const std::function<kir::Stmt(const std::vector<kir::Expr> &)> &body,
                     std::vector<std::string> *loopNames = nullptr);

  /// The finished kernel.
  kir::Kernel finish(kir::Stmt body, kir::Schedule schedule = {});
  /// The buffer declared with `role` and `index` (-1: none yet).
  int find(kir::BufferRole role, int index) const;

private:
  const Node &node_;
  std::string name_;
  std::vector<kir::BufferDecl> buffers_;
  std::vector<kir::RuntimeCheck> checks_;
  int nextName_ = 0;
};

/// Element `index` of integer operand `operand` as i64.
kir::Expr loadInt(KernelBuilder &b, size_t operand, kir::Expr index);

/// The zero of `t`.
inline kir::Expr zeroOf(DType t) { return kir::constant(0, t); }
/// The conjunction of `conds` (their `land`, left to right); null when there are none.
kir::Expr andAll(const std::vector<kir::Expr> &conds);

/// Strict float arithmetic (no reassociation or contraction), so that coordinates computed in
/// a kernel round as the interpreter's do.
kir::Expr sadd(kir::Expr a, kir::Expr b);
kir::Expr ssub(kir::Expr a, kir::Expr b);
kir::Expr smul(kir::Expr a, kir::Expr b);
kir::Expr sdiv(kir::Expr a, kir::Expr b);

/// The schedule of a permutation's loop nest over `mid` (output order; `inStrides` the input
/// strides of its loops; independent, as defaultSchedule's): when the input's contiguous loop
/// is not the last, both are split into tiles that move innermost, so reads and writes both go
/// along lines.
kir::Schedule permuteSchedule(const std::vector<std::string> &loops, const Extents &mid,
                              const std::vector<int64_t> &inStrides);

/// The default schedule of a loop nest that writes each output element once (its
/// iterations are independent): its loops are declared independent (an OpenCL device runs
/// them as its grid); nothing more below 65536 elements; above, the outermost loop
/// (or, for one loop, its outer part) runs in parallel and, when `vectorize` is set and the
/// innermost extent is at least 16, the innermost loop is split by 16 and vectorized.
kir::Schedule defaultSchedule(const std::vector<std::string> &loops, const Extents &extents,
                              bool vectorize = true);

} // namespace nnc::lower

// The kernel-level IR: what one generated kernel computes, as loops over an index space with
// loads, stores, scalar locals and index arithmetic, plus a Schedule kept apart from it.
//
// A Kernel reads and writes flat, row-major buffers (its parameters). All extents are
// compile-time constants: graphs with symbolic dims are specialized per concrete shape
// before lowering (runtime/), so index arithmetic folds to constants and strides.
//
// The algorithm never depends on the Schedule: lowering produces a canonical loop nest whose
// loops have names; the Schedule names loops and says how to split, reorder, vectorize,
// unroll and parallelize them; applySchedule() rewrites the nest accordingly. Any schedule
// gives the same numbers (up to float reassociation where a reduction loop is split).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nnc/ir/DType.h"
#include "nnc/ir/Op.h"
#include "nnc/support/Error.h"

namespace nnc::kir {

// ---- Expressions -----------------------------------------------------------------------------
//
// Lowering builds Ops of any elementwise kind and Casts. Backends see the primitive set only
// (see codegenBody): immediates, Var, Load, Op of a kind that is not composite for its dtype
// (arithmetic, comparisons, logic and bit operations, select, integer min/max, float div, abs,
// floor/ceil, sqrt, log and the trigonometric and hyperbolic functions but tanh), Convert,
// BitCast, Fma, Rem, Quot, Shl, Shr and Call, and Casts only between a storage-only dtype and
// its canonical arithmetic type (decoding or encoding the format's bits).

enum class ExprKind : uint8_t {
  IntImm,   ///< An integer constant of `type` (i64 for index math).
  FloatImm, ///< A float constant of `type`.
  Var,      ///< A loop variable or a local scalar (by name).
  Load,     ///< buffers[buffer][args[0]].
  Op,       ///< An elementwise op of the graph IR (add, exp, less, select, ...) on args.
  Cast,     ///< args[0] converted to `type` (ONNX Cast rules). One side may be a storage-only
            ///< dtype (f8*, f4e2m1, i4, u4, i2, u2: a byte holding the format's bits), with
            ///< `saturate` and `roundMode` as the cast op's attributes. The expansion rewrites
            ///< it into Converts and compares, leaving storage decodes and encodes only.
  // The primitives below exist for expandComposites() (KernelExpand.cpp); lowering does not
  // build them.
  BitCast, ///< The bits of args[0] as `type`: f32 <-> i32/u32, f64 <-> i64/u64.
  Fma,     ///< args[0] * args[1] + args[2] with one rounding (f32, f64).
  Rem,     ///< The truncating remainder of args[0] by args[1] (one dtype): C fmod for floats,
           ///< C % for integers, where the divisor must be neither 0 nor (signed) -1: the
           ///< expansion of mod/fmod guards it (the evaluator gives 0 there).
  Call,    ///< The C99 <math.h> function `name` (one of kMathFunctions) of args, of `type`
           ///< (f32 or f64, the args' dtype): libm or an LLVM intrinsic on the CPU, the
           ///< built-in of the same name in OpenCL.
  // The machine operations below are defined only on part of their operands' range; the
  // expansions of the ONNX-level ops (div, min/max, shifts, casts) guard them, so that no
  // backend decides what happens outside it (the evaluator gives the ONNX answer there).
  Quot,    ///< The truncating integer quotient of args[0] by args[1] (one dtype); the divisor
           ///< must be neither 0 nor (signed) -1.
  Shl,     ///< args[0] << args[1] (one unsigned dtype); the amount is below the bit width.
  Shr,     ///< args[0] >> args[1] (logical; as Shl).
  Convert, ///< args[0] converted to `type` (arithmetic dtypes): floats round once to float
           ///< types, integers wrap (two's complement) to integer types, and a float converted
           ///< to an integer type truncates toward zero, its truncation representable in
           ///< `type`. Never to bool (a cast to bool is a comparison with 0).
};

/// The math functions a Call may name, with their arity: what f64 still takes from the
/// platform's math library.
struct MathFunction {
  const char *name;
  int arity;
};
inline constexpr MathFunction kMathFunctions[] = {{"exp", 1}, {"tanh", 1}, {"erf", 1}, {"pow", 2}};

struct ExprNode;
/// Expressions are immutable and shared.
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprKind kind;
  DType type;
  int64_t intValue = 0;
  double floatValue = 0;
  std::string name; ///< Var.
  int buffer = -1;  ///< Load: index into Kernel::buffers.
  OpKind op = OpKind::Add;
  std::vector<Expr> args;
  /// Cast to an f8 format: out-of-range values become ±max (else inf or NaN).
  bool saturate = true;
  /// Cast to f8e8m0: "up" (the default when empty), "down" or "nearest".
  std::string roundMode;
  /// Op (float add, sub, mul, div, neg) and Fma: rounds exactly as written. Backends may
  /// otherwise contract a multiply feeding an add into an FMA (and reassociate an
  /// accumulation); the expansions of composite ops set it so that every backend computes
  /// the evaluator's numbers.
  bool strict = false;
};

Expr intImm(int64_t v, DType t = DType::I64);
Expr floatImm(double v, DType t = DType::F32);
/// A scalar of `type` and value `v`, for any arithmetic dtype.
Expr constant(double v, DType t);
Expr var(const std::string &name, DType t = DType::I64);
Expr load(int buffer, DType t, Expr index);
/// An elementwise op; the result type follows the op (bool for comparisons). Integer
/// immediates are folded (`add(i, 0)` is `i`), so index arithmetic stays small.
Expr op(OpKind kind, std::vector<Expr> args);
Expr cast(Expr e, DType to);
/// A cast with the cast op's options (they matter only for casts to storage-only formats).
Expr cast(Expr e, DType to, bool saturate, std::string roundMode);
// Index-arithmetic shorthands (i64).
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b); ///< Truncating; use on non-negative indices.
Expr mod(Expr a, Expr b); ///< Non-negative operands.
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr land(Expr a, Expr b);
/// Primitive builders (see ExprKind).
Expr bitCast(Expr e, DType to);
Expr fma(Expr a, Expr b, Expr c);
Expr rem(Expr a, Expr b);
Expr call(const std::string &name, std::vector<Expr> args);
Expr quot(Expr a, Expr b);
Expr shl(Expr a, Expr b);
Expr shr(Expr a, Expr b);
Expr convert(Expr e, DType to);
/// `e` (an Op or Fma) with `strict` set.
Expr strict(Expr e);
/// True when `e` is an IntImm equal to v.
bool isIntImm(const Expr &e, int64_t v);
/// True when `e` reads a variable named in `names`.
bool mentions(const Expr &e, const std::set<std::string> &names);
/// `e` with each subexpression that `replace` maps to a non-null Expr replaced by it (checked
/// outside in: a replaced subtree is not visited further). Unchanged subtrees are shared; a
/// rebuilt non-strict Op refolds its index arithmetic.
Expr rewrite(const Expr &e, const std::function<Expr(const Expr &)> &replace);

// ---- Statements ------------------------------------------------------------------------------

/// GpuBlock and GpuThread loops run their iterations on an OpenCL NDRange: one work-group
/// (block) or one work-item of a group (thread) per iteration, in dimension `gpuAxis`. They
/// form the outermost nest of a kernel (blocks outside threads, each axis at most once per
/// kind, constant extents); their iterations must be independent, as a parallel loop's. The
/// CPU backends and the evaluator run them as serial loops.
/// A Scalar loop is a serial loop whose body already spans the vector lanes (straight-line
/// updates of one named local per lane, which LLVM's SLP vectorizer packs into vectors: a
/// pooled row's running sums); the LLVM emitter keeps the loop vectorizer off it, which would
/// widen it along its own iterations instead (lanes gathered at the row's stride). Every
/// backend runs it as a serial loop.
enum class LoopKind : uint8_t {
  Serial,
  Parallel,
  Vectorized,
  Unrolled,
  GpuBlock,
  GpuThread,
  Scalar
};
const char *loopKindName(LoopKind k);

enum class StmtKind : uint8_t {
  For,      ///< for var in [0, extent): body
  Store,    ///< buffers[buffer][index] = value
  Decl,     ///< A mutable scalar local `name` of `type`, initialized to value.
  Assign,   ///< name = value (a Decl in scope).
  If,       ///< if cond then body[0] else body[1] (body[1] may be null).
  Block,    ///< body... in order.
  Barrier,  ///< A work-group barrier with a local-memory fence (OpenCL's
            ///< barrier(CLK_LOCAL_MEM_FENCE)): every work-item of the group reaches it before
            ///< any goes on, and their stores to local buffers are visible after it. Only
            ///< inside gpu_thread loops, on control flow every work-item takes (no If above it
            ///< there, loops of constant extent).
  VecLoad,  ///< Declares the locals `names` (of `type`) as buffers[buffer][index + l], lane
            ///< l < names.size() (2, 4, 8 or 16 lanes): one vector load (OpenCL's vloadN).
  VecStore, ///< buffers[buffer][index + l] = args[l] for each lane l (2, 4, 8 or 16): one
            ///< vector store (vstoreN).
  GemmTile, ///< A GEMM microkernel on one register tile (see GemmTileShape). f32:
            ///< for r < mr, j < nr: buffers[buffer][args[2] + r*ldc + j] =
            ///<   (accumulate ? that element : 0) + sum over p < args[3] of
            ///<   A[args[0] + r*lda + p*ak] * B[args[1] + p*ldb + j]
            ///< with A = buffers[tile.a], B = buffers[tile.b] (all f32). u8s8s32 (see
            ///< GemmElems) sums the same products in i32, with B in the dot-product layout.
            ///< The LLVM backend emits it as an explicit-vector function
            ///< <elems>_gemm_<mr>x<nr>_<isa>; other backends as the loop nest.
  Prefetch, ///< A hint, no effect on the result: the cache line of buffers[buffer][index] is
            ///< fetched ahead of its use (for a store when `write`). An index outside the
            ///< buffer is allowed and ignored.
  ConvTile, ///< A direct convolution's register tile (see ConvTileShape). f32: for
            ///< m < blocks, r < cols, j < lanes:
            ///<   buffers[buffer][args[2] + m*cblk + r*ccol + j] =
            ///<     (init < 0 ? 0 : I[args[3] + m*iblk + r*icol + j]) + sum, over the
            ///<     reduction indices i0 < args[4], i1 < args[5], i2 < args[6], i3 < args[7]
            ///<     in that nesting order, of X[args[0] + r*xcol + sum_d i_d*xs[d] (+ j when
            ///<     depthwise)] * W[args[1] + m*wblk + sum_d i_d*ws[d] + j]
            ///<     (with conv.kwCols, only the columns it gives for i2)
            ///< with X = buffers[conv.x], W = buffers[conv.w], I = buffers[conv.init].
            ///< The LLVM backend emits it as an explicit-vector function
            ///< <elems>_conv_<cols>x<blocks>x<lanes>_..._<isa> shared by every tile of that
            ///< shape; other backends as the loop nest.
};

/// The element types of a GemmTile.
enum class GemmElems : uint8_t {
  F32,     ///< f32 A, B and C; products fused into the sum in k order.
  U8S8S32, ///< u8 A, i8 B, i32 C (x86's vpdpbusd): the sum of zext(a) * sext(b) over
           ///< p < kc, which must be a multiple of 4, wrapping in i32. A's k stride `ak` is
           ///< 1 (a row's 4 bytes of one k group are one dword). B holds groups of 4 k rows
           ///< interleaved per column: element (p, j) at p/4 * ldb + 4*j + p%4 (ldb >= 4*nr;
           ///< ir/GemmPacking.h's packGemmPanelsK4 writes panels of it).
  BF16,    ///< bf16 A and B, f32 C (x86's vdpbf16ps): the products (exact in f32) added to C's
           ///< f32 sum over p < kc, which must be even, each addition rounded to nearest even
           ///< in an order the tile chooses within a pair of k (denormals flushed to zero).
           ///< A's k stride `ak` is 1 (a row's 2 values of one k pair are one dword). B holds
           ///< pairs of k rows interleaved per column: element (p, j) at p/2 * ldb + 2*j + p%2
           ///< (ldb >= 2*nr; ir/GemmPacking.h's packGemmPanelsBf16 writes panels of it).
};
/// "f32", "u8s8s32" or "bf16" (the microkernel names' prefix and the kernel IR's word).
const char *gemmElemsName(GemmElems e);

/// The static part of a GemmTile: operand buffers, tile size and element strides.
struct GemmTileShape {
  GemmElems elems = GemmElems::F32;
  int a = -1, b = -1;
  int64_t mr = 0, nr = 0;
  int64_t lda = 0, ak = 0; ///< A: row stride, k stride.
  int64_t ldb = 0;         ///< B: k stride (columns are contiguous); u8s8s32: the stride
                           ///< of a group of 4 k rows; bf16: of a pair of k rows.
  int64_t ldc = 0;         ///< C: row stride (columns are contiguous).
  bool accumulate = false; ///< Add to C's values instead of overwriting them.
  /// A hint, no effect on the result: when nonzero, the k step p also prefetches the B row
  /// at element offset p * ldb + prefetchB from the tile's B (e.g. the same row of the next
  /// panel), so a cold B streams in while this tile computes.
  int64_t prefetchB = 0;
  /// With prefetchB: the k step p prefetches the row p >> prefetchShift (at that offset)
  /// instead, so the tile prefetches 1/2^shift of its k rows, each row on 2^shift steps in a
  /// row; 2^shift tiles with offsets a part apart then share one panel's prefetch.
  int prefetchShift = 0;
  /// f32: when > 0, the k steps go in runs of this many, each run's products summed from
  /// zero and the run's sum then added to C's element (its value with accumulate, else zero
  /// for the first run): a long k's rounding grows with the length of its chains, about
  /// sqrt(run) + sqrt(runs) instead of sqrt(k) (ConvTileShape::sumEvery likewise). 0: one
  /// chain from C's value or zero.
  int64_t sumEvery = 0;
};

/// The static part of a ConvTile: a register tile of `cols` output columns x `blocks` output
/// channel blocks of `lanes` lanes, its operands' buffers and element strides. The reduction's
/// four nested dims (a conv's input blocks, kernel rows, kernel columns, input lanes) each step
/// X by xs[d] and W by ws[d] elements; their extents are the statement's args[4..7], so a tile
/// near an edge runs the same function over fewer kernel rows or columns.
/// bf16 tiles (elems BF16, not depthwise) read bf16 X and W into f32 sums (C and init f32):
/// the input lanes (dim 3, an even extent) go in pairs, W holding a pair's two lanes
/// interleaved per output lane: input lane d of output lane j at (d/2) * 2 ws[3] + 2 j + d%2
/// from the dim's base (vdpbf16ps's layout; ws[3] is the lanes).
struct ConvTileShape {
  GemmElems elems = GemmElems::F32; ///< F32 or BF16.
  int x = -1, w = -1;
  int init = -1; ///< The buffer of the initial values (a bias, partial sums), -1: zero.
  int64_t cols = 0, blocks = 0, lanes = 0;
  /// Input lane j pairs with weight lane j (X read as a vector at +j) instead of one X value
  /// broadcast over the lanes.
  bool depthwise = false;
  int64_t xcol = 0;             ///< X: the stride from one output column to the next.
  int64_t wblk = 0;             ///< W: the stride from one output block to the next.
  int64_t ccol = 0, cblk = 0;   ///< C: column and block strides.
  int64_t icol = 0, iblk = 0;   ///< init: column and block strides (0: shared, as a bias's).
  std::array<int64_t, 4> xs{}, ws{}; ///< The reduction dims' strides in X and W.
  /// When not empty, reduction dim 2 (a conv's kernel columns; its extent, args[6], must be
  /// this many, a constant) adds index i's products to columns [kwCols[i][0], kwCols[i][1])
  /// only: an edge tile, whose other columns would read outside the input there, in one
  /// tile.
  std::vector<std::array<int64_t, 2>> kwCols;
  /// When > 0, the sums go in runs of this many steps of reduction dim 0 (a conv's input
  /// blocks): each run's products are summed from zero and the run's sum then added to the
  /// element's running sum (from its initial value), as a BLAS kernel sums a k block before
  /// adding it to C: the rounding of a long reduction grows with the length of its chains,
  /// here about sqrt(run) + sqrt(runs) instead of sqrt(all). 0: one chain from the initial
  /// value.
  int64_t sumEvery = 0;
};

struct StmtNode;
/// Statements form a tree that schedule transforms rewrite in place.
using Stmt = std::shared_ptr<StmtNode>;

struct StmtNode {
  StmtKind kind;
  std::string name; ///< For: loop variable (unique in the kernel); Decl/Assign: local.
  DType type = DType::I64; ///< Decl.
  Expr extent;      ///< For (an i64 expression; usually an IntImm).
  LoopKind loopKind = LoopKind::Serial;
  int gpuAxis = 0;  ///< For, GpuBlock/GpuThread: the NDRange dimension (0, 1 or 2).
  /// For: the iterations are independent (ScheduleStep::GpuGrid); OpenCL's grid loops.
  bool independent = false;
  int buffer = -1;  ///< Store.
  Expr index;       ///< Store.
  Expr value;       ///< Store, Decl, Assign; If: the condition.
  /// Assign: the value accumulates into the local (a reduction) and its float additions and
  /// multiplications may be reassociated, so the loop around it may keep partial results in
  /// vector lanes. Never set on a GEMM tile (reassociation breaks its register blocking).
  bool reassociate = false;
  /// Assign with `reassociate`, of a float max(name, x) or min(name, x): the reduction may
  /// also ignore NaN operands (a NaN among the values gives NaN or any of them), so it
  /// vectorizes as the target's max/min instructions. Only where a NaN reaches the result
  /// along another path anyway: softmax's maximum, whose NaN also enters the sum of exps.
  bool ignoresNaN = false;
  /// Prefetch: the line is fetched to be written (x86's prefetchw), not only read.
  bool write = false;
  std::vector<Stmt> body;
  std::vector<Expr> args; ///< GemmTile: A offset, B offset, C offset, k extent (i64);
                          ///< VecStore: the lanes' values.
  GemmTileShape tile;     ///< GemmTile.
  ConvTileShape conv;     ///< ConvTile; its args: X, W, C and init offsets, the four
                          ///< reduction extents (i64).
  std::vector<std::string> names; ///< VecLoad: the lanes' locals.
};

/// rewrite() applied, in place, to every expression of statement tree `s`.
void rewriteStmt(const Stmt &s, const std::function<Expr(const Expr &)> &replace);

Stmt forLoop(const std::string &var, Expr extent, Stmt body, LoopKind k = LoopKind::Serial);
Stmt store(int buffer, Expr index, Expr value);
Stmt decl(const std::string &name, DType t, Expr init);
Stmt assign(const std::string &name, Expr value);
/// An Assign with `reassociate` set: `name = value` where value combines `name` with new
/// terms (sum, sum of squares, dot product) in an order that does not matter.
Stmt accumulate(const std::string &name, Expr value);
/// `name = max(name, x)` (`isMax`) or min, accumulated with `ignoresNaN` (see StmtNode).
Stmt accumulateIgnoringNaN(const std::string &name, DType t, Expr x, bool isMax = true);
Stmt ifThen(Expr cond, Stmt then, Stmt otherwise = nullptr);
Stmt block(std::vector<Stmt> stmts);
/// A work-group barrier (see StmtKind::Barrier).
Stmt barrier();
/// Locals `names` of type t = buffer[index + l] (see StmtKind::VecLoad).
Stmt vecLoad(std::vector<std::string> names, DType t, int buffer, Expr index);
/// buffer[index + l] = values[l] (see StmtKind::VecStore).
Stmt vecStore(int buffer, Expr index, std::vector<Expr> values);
/// A prefetch of buffer[index]'s cache line, to be read or written (see StmtKind::Prefetch).
Stmt prefetch(int buffer, Expr index, bool write = false);
/// A GemmTile writing buffer `c` at offset cOff, reading A at aOff and B at bOff, k extent kc.
Stmt gemmTile(const GemmTileShape &shape, int c, Expr aOff, Expr bOff, Expr cOff, Expr kc);
/// A ConvTile writing buffer `c`; args as StmtNode::conv says (X, W, C, init offsets and the
/// four reduction extents).
Stmt convTile(const ConvTileShape &shape, int c, std::vector<Expr> args);

// ---- Schedules -------------------------------------------------------------------------------

/// One scheduling directive, applied in order. Loops are named by their variables.
struct ScheduleStep {
  enum Kind : uint8_t {
    Split,      ///< loop -> loop.o (extent ceil(n/factor)) and loop.i (factor); a guard
                ///< keeps the tail correct when factor does not divide n.
    Reorder,    ///< Make `loops` (perfectly nested) appear in the given order.
    Vectorize,  ///< Mark `loop` vectorized (its extent is the vector width).
    Unroll,     ///< Mark `loop` unrolled.
    Parallel,   ///< Mark `loop` parallel (run on the thread pool).
    GpuBlocks,  ///< Bind `loop` to work-groups of NDRange dimension `factor` (0..2).
    GpuThreads, ///< Bind `loop` to the work-items of a group in dimension `factor`.
    GpuGrid,    ///< Declare `loops` independent (iterations in any order or at once, as a
                ///< parallel loop's): an OpenCL kernel without a work-group nest runs the
                ///< outermost perfect nest of independent loops as one flat NDRange, one
                ///< work-item per iteration of them all. The CPU backends ignore it. Split
                ///< loops stay independent; give it before other steps.
  } kind;
  std::string loop;
  int64_t factor = 0;
  std::vector<std::string> loops; ///< Reorder, GpuGrid.
};

/// How to run a kernel. Changing it never changes what the kernel computes.
struct Schedule {
  std::vector<ScheduleStep> steps;
  /// "split(i, 8); vectorize(i.i); parallel(i.o)".
  std::string str() const;
};

// ---- Kernels ---------------------------------------------------------------------------------

/// What a kernel parameter is bound to when the kernel runs as part of a graph node.
enum class BufferRole : uint8_t {
  Operand, ///< The node's operand `index`.
  Result,  ///< The node's result `index`.
  Scratch, ///< Temporary storage `index` of the node, shared by the node's kernels
           ///< (e.g. row maxima written by one kernel and read by the next).
  Extent,  ///< One i64 the kernel writes: the extent of the data-dependent last dim of
           ///< result `index` (NonZero's count). That result's buffer is then sized for the
           ///< largest possible extent and holds the result packed to the actual one.
  Status,  ///< The kernel's runtime checks (Kernel::checks): two i64 per check, which the
           ///< runtime zeroes before a run; a kernel whose check c fails writes 1 to element
           ///< 2c and the offending value to 2c+1 (and goes on without leaving its buffers),
           ///< and the run then fails with the check's message. `index` is 0.
};

/// A kernel parameter: a flat buffer of `numElements` elements of `dtype`.
struct BufferDecl {
  std::string name;
  DType dtype;
  int64_t numElements;
  BufferRole role;
  int index;
  bool written; ///< The kernel stores to it.
  /// Scratch whose contents matter only within one chunk of the kernel's parallel loop (or the
  /// whole kernel, outside one): the CPU code generator gives each thread its own (from the
  /// runtime's nnc_workspace, at the start of each chunk) instead of this parameter, and the
  /// launch plan for the CPU reserves no arena space for it.
  bool perThread = false;
  /// A result: the operand parameters the kernel reads only at the element it stores to this
  /// result, in the iteration that stores it and before it does (and it never reads this
  /// result), so the result may be written over one of them where that operand's value is
  /// not read after the kernel. Lowering states it (an elementwise loop nest knows which
  /// operands it loads at the index it stores); the launch plan reuses buffers by it.
  std::vector<int> inPlaceOver = {};
};

/// A buffer in an OpenCL work-group's local memory, shared by its work-items and declared by
/// the kernel itself (not a parameter). Loads and stores name local i as buffer
/// kLocalBufferBase + i. Only kernels whose outermost nest is gpu_thread loops may have them;
/// the CPU backends reject them.
struct LocalBuffer {
  std::string name;
  DType dtype;
  int64_t numElements;
};
inline constexpr int kLocalBufferBase = 1 << 20;

/// A condition a kernel checks at run time (an index within its axis) and the error it
/// stands for: the message is `before` + the offending value + `after`, worded as the
/// reference interpreter words the same failure, so every target says the same thing.
struct RuntimeCheck {
  std::string before, after;
  std::string message(int64_t value) const { return before + std::to_string(value) + after; }
};
inline bool isLocalBuffer(int b) {
  return b >= kLocalBufferBase;
}

struct Kernel {
  std::string name;                ///< A valid C/LLVM identifier, unique in an executable.
  std::vector<BufferDecl> buffers; ///< Parameters, in call order.
  std::vector<LocalBuffer> locals; ///< Work-group local buffers (buffer kLocalBufferBase + i).
  /// The runtime checks its BufferRole::Status buffer reports (2 elements each).
  std::vector<RuntimeCheck> checks;
  Stmt body;                       ///< The algorithm (canonical loop nest).
  Schedule schedule;               ///< Applied by applySchedule().
  /// The arithmetic work of one launch, where lowering knows it: the GEMMs (2 per
  /// multiply-add) or the work-group reduction of the tunable problem the kernel runs, or the
  /// attention group's two GEMMs; 0 elsewhere. A profile rates the kernel by it; code
  /// generation ignores it.
  double flops = 0;
  /// The operands of that work: f32, bf16, or u8 x s8 summed in i32 (as the GEMM tiles' own
  /// GemmElems), so that a profile rates the kernel against the machine's peak for them.
  GemmElems flopsElems = GemmElems::F32;
  /// A key for caches and the tuner: the kernel's text without names.
  std::string signature() const;
  /// Buffer b's dtype, element count and name, for a parameter or a local buffer; b must
  /// exist (hasBuffer).
  bool hasBuffer(int b) const;
  DType bufferType(int b) const;
  int64_t bufferElements(int b) const;
  const std::string &bufferName(int b) const;
  /// True when the kernel uses work-group constructs (local buffers, barriers): it runs on
  /// an OpenCL device only.
  bool usesWorkGroupMemory() const;
};

/// True when `s` or a statement nested in it is a work-group barrier.
bool containsBarrier(const Stmt &s);

/// The loop nest with `k.schedule` applied. Fails, naming the step, when a step names a loop
/// that does not exist or cannot be applied.
Expected<Stmt> applySchedule(const Kernel &k);

/// Text form for tests and `nnc inspect --kernels`.
std::string printKernel(const Kernel &k);
std::string printStmt(const Stmt &s, int indent = 0);
std::string printExpr(const Expr &e);

/// Checks that loads and stores name existing buffers with matching dtypes, variables are in
/// scope, types of op operands agree, and (for constant indices) accesses are in bounds.
Error verifyKernel(const Kernel &k);

/// Composite scalar ops: those expandComposites() rewrites into primitives, so that no backend
/// implements them (sigmoid, erf, exp, tanh, pow, mod, fmod, sign, reciprocal, is_nan, is_inf,
/// round, shifts; div on integers, min and max on floats), for operands of dtype `t` (the
/// dtype of the op's operands, the second one's for select).
bool isCompositeOp(OpKind k, DType t);
/// True for the nodes that expandComposites() rewrites: composite Ops and Casts but those
/// between a storage-only dtype and its canonical type.
bool isComposite(const ExprNode &e);

/// `body` with every composite op and cast rewritten into primitives (Ops without the
/// composites, Convert, BitCast, Fma, Rem, Quot, Shl, Shr, Call, storage decodes and encodes;
/// see KernelExpand.cpp). An operand or intermediate value that
/// an expansion uses more than once is bound to a Decl before the statement, so the tree-walking
/// backends emit it once; integer pow adds a loop over the exponent's bits.
Stmt expandComposites(const Stmt &body);

/// What the backends translate: `k`'s loop nest with its schedule applied, then composites
/// expanded. Every backend (LLVM, OpenCL) and the kernel evaluator go through it.
Expected<Stmt> codegenBody(const Kernel &k);

/// The error of the first failed check in `status` (the 2 * k.checks.size() i64 of the kernel's
/// BufferRole::Status buffer after a run), or success.
Error checkStatus(const Kernel &k, const int64_t *status);

/// Runs a kernel directly on buffers (a slow tree-walking evaluator, used in tests to check
/// lowering independently of code generation). `buffers[i]` points to buffer i's data. A
/// status buffer is zeroed first and read after, as the runtime does: a failed runtime check
/// is the returned error.
Error evaluateKernel(const Kernel &k, const std::vector<void *> &buffers);

} // namespace nnc::kir

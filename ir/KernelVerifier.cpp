// The kernel-level IR's verifier: buffers, scopes, operand types and constant-index bounds,
// before and after the schedule.
#include "nnc/ir/Kernel.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "KernelCheck.h"

namespace nnc::kir {

namespace {

struct Verifier {
  const Kernel &k;
  struct Local {
    std::string name;
    DType type;
    bool mutableLocal; ///< A Decl (assignable); loop variables are not.
  };
  std::vector<Local> scope;
  std::set<std::string> loopNames;
  int parallelDepth = 0;

  /// GPU-bound loops seen so far on the kernel's outermost nest, by kind and axis, and
  /// whether that nest is still open (only GPU loops, each the single statement of its parent).
  bool gpuBlockAxis[3] = {false, false, false}, gpuThreadAxis[3] = {false, false, false};
  bool gpuNestOpen = true, gpuThreadSeen = false;
  /// gpu_thread loops around the statement, and control flow below them that may differ
  /// between work-items (where a barrier may not be).
  int threadDepth = 0, divergentDepth = 0;

  explicit Verifier(const Kernel &kernel) : k(kernel) {}

  Error checkGpuLoop(const StmtNode &s) {
    bool block = s.loopKind == LoopKind::GpuBlock;
    if (!gpuNestOpen)
      return fail(fmt::format("{} loop '{}' is not on the kernel's outermost loop nest",
                              loopKindName(s.loopKind), s.name));
    if (s.gpuAxis < 0 || s.gpuAxis > 2)
      return fail(fmt::format("loop '{}' is bound to NDRange dimension {}", s.name, s.gpuAxis));
    if (block && gpuThreadSeen)
      return fail(fmt::format("gpu_block loop '{}' is inside a gpu_thread loop", s.name));
    bool &seen = (block ? gpuBlockAxis : gpuThreadAxis)[s.gpuAxis];
    if (seen)
      return fail(fmt::format("two {} loops on dimension {} ('{}')", loopKindName(s.loopKind),
                              s.gpuAxis, s.name));
    seen = true;
    gpuThreadSeen |= !block;
    if (s.extent->kind != ExprKind::IntImm || s.extent->intValue < 1)
      return fail(fmt::format("{} loop '{}' needs a constant extent of at least 1",
                              loopKindName(s.loopKind), s.name));
    return Error::success();
  }

  Error fail(const std::string &msg) const {
    return makeError("kernel {}: {}", k.name, msg);
  }

  const Local *lookup(const std::string &n) const {
    for (size_t i = scope.size(); i-- > 0;)
      if (scope[i].name == n)
        return &scope[i];
    return nullptr;
  }

  Error checkBuffer(int b, const char *what) const {
    if (!k.hasBuffer(b))
      return fail(fmt::format("{} of buffer {} which does not exist ({} buffers, {} local)", what,
                              b, k.buffers.size(), k.locals.size()));
    if (isLocalBuffer(b) && threadDepth == 0)
      return fail(fmt::format("{} of local buffer '{}' outside the gpu_thread loops", what,
                              k.bufferName(b)));
    return Error::success();
  }

  /// `lanes` consecutive elements from `index` (1 for a scalar access).
  Error checkIndex(int b, const Expr &index, const char *what, int64_t lanes = 1) {
    NNC_TRY(expr(index));
    if (index->type != DType::I64)
      return fail(fmt::format("{} index into '{}' must be i64, got {}", what, k.bufferName(b),
                              dtypeName(index->type)));
    if (index->kind == ExprKind::IntImm &&
        (index->intValue < 0 || index->intValue + lanes > k.bufferElements(b)))
      return fail(fmt::format("{} at index {} is out of bounds of '{}' ({} elements)", what,
                              index->intValue + lanes - 1, k.bufferName(b), k.bufferElements(b)));
    return Error::success();
  }

  static bool validLanes(size_t n) { return n == 2 || n == 4 || n == 8 || n == 16; }

  Error expr(const Expr &e) {
    if (!e)
      return fail("null expression");
    switch (e->kind) {
    case ExprKind::IntImm:
      if (!isInteger(e->type) && e->type != DType::Bool)
        return fail(fmt::format("integer immediate of type {}", dtypeName(e->type)));
      return Error::success();
    case ExprKind::FloatImm:
      if (!isFloat(e->type))
        return fail(fmt::format("float immediate of type {}", dtypeName(e->type)));
      return Error::success();
    case ExprKind::Var: {
      const Local *l = lookup(e->name);
      if (!l)
        return fail(fmt::format("variable '{}' is not in scope", e->name));
      if (l->type != e->type)
        return fail(fmt::format("variable '{}' is {} but used as {}", e->name,
                                dtypeName(l->type), dtypeName(e->type)));
      return Error::success();
    }
    case ExprKind::Load: {
      NNC_TRY(checkBuffer(e->buffer, "load"));
      if (e->args.size() != 1)
        return fail("load without exactly one index");
      DType held = k.bufferType(e->buffer);
      if (e->type != held)
        return fail(fmt::format("load of {} from '{}' which holds {}", dtypeName(e->type),
                                k.bufferName(e->buffer), dtypeName(held)));
      return checkIndex(e->buffer, e->args[0], "load");
    }
    case ExprKind::Op: {
      for (const Expr &a : e->args)
        NNC_TRY(expr(a));
      DType result = DType::I64;
      std::string problem = checkOp(e->op, e->args, result);
      if (!problem.empty())
        return fail(problem);
      if (result != e->type)
        return fail(fmt::format("'{}' gives {} but is typed {}", opInfo(e->op).name,
                                dtypeName(result), dtypeName(e->type)));
      return Error::success();
    }
    case ExprKind::Cast:
      if (e->args.size() != 1)
        return fail("cast without exactly one operand");
      NNC_TRY(expr(e->args[0]));
      // Storage-only values are only loaded, stored and cast (no ops take them), so any
      // cast between dtypes is fine; its options must be valid.
      if (!e->roundMode.empty() && e->roundMode != "up" && e->roundMode != "down" &&
          e->roundMode != "nearest")
        return fail(fmt::format("cast to {} with round mode '{}' (up, down or nearest)",
                                dtypeName(e->type), e->roundMode));
      return Error::success();
    case ExprKind::Convert: {
      if (e->args.size() != 1)
        return fail("convert without exactly one operand");
      NNC_TRY(expr(e->args[0]));
      DType from = e->args[0]->type, to = e->type;
      if (isStorageOnly(from) || isStorageOnly(to) || (to == DType::Bool && from != to))
        return fail(fmt::format("convert from {} to {}", dtypeName(from), dtypeName(to)));
      return Error::success();
    }
    case ExprKind::Quot:
    case ExprKind::Shl:
    case ExprKind::Shr: {
      const char *what = e->kind == ExprKind::Quot ? "quot" : e->kind == ExprKind::Shl ? "shl"
                                                                                        : "shr";
      if (e->args.size() != 2)
        return fail(fmt::format("{} takes 2 operands, got {}", what, e->args.size()));
      for (const Expr &a : e->args) {
        NNC_TRY(expr(a));
        if (a->type != e->type)
          return fail(fmt::format("{} of {} has an operand of {}", what, dtypeName(e->type),
                                  dtypeName(a->type)));
      }
      bool ok = e->kind == ExprKind::Quot ? isInteger(e->type) : isUnsignedInteger(e->type);
      if (!ok)
        return fail(fmt::format("{} on {}", what, dtypeName(e->type)));
      return Error::success();
    }
    case ExprKind::BitCast: {
      if (e->args.size() != 1)
        return fail("bitcast without exactly one operand");
      NNC_TRY(expr(e->args[0]));
      DType from = e->args[0]->type, to = e->type;
      bool ok = (from == DType::F32 && (to == DType::I32 || to == DType::U32)) ||
                (to == DType::F32 && (from == DType::I32 || from == DType::U32)) ||
                (from == DType::F64 && (to == DType::I64 || to == DType::U64)) ||
                (to == DType::F64 && (from == DType::I64 || from == DType::U64));
      if (!ok)
        return fail(fmt::format("bitcast from {} to {}", dtypeName(from), dtypeName(to)));
      return Error::success();
    }
    case ExprKind::Fma:
    case ExprKind::Rem:
    case ExprKind::Call: {
      const char *what = e->kind == ExprKind::Fma   ? "fma"
                         : e->kind == ExprKind::Rem ? "rem"
                                                    : "call";
      size_t arity = e->kind == ExprKind::Fma ? 3 : 2;
      if (e->kind == ExprKind::Call) {
        arity = 0;
        for (const MathFunction &m : kMathFunctions)
          if (e->name == m.name)
            arity = static_cast<size_t>(m.arity);
        if (!arity)
          return fail(fmt::format("call of unknown math function '{}'", e->name));
      }
      if (e->args.size() != arity)
        return fail(fmt::format("{} takes {} operands, got {}", what, arity, e->args.size()));
      for (const Expr &a : e->args) {
        NNC_TRY(expr(a));
        if (a->type != e->type)
          return fail(fmt::format("{} of {} has an operand of {}", what, dtypeName(e->type),
                                  dtypeName(a->type)));
      }
      bool floatOnly = e->kind != ExprKind::Rem;
      if (floatOnly ? (e->type != DType::F32 && e->type != DType::F64)
                    : !(isFloat(e->type) || isInteger(e->type)))
        return fail(fmt::format("{} on {}", what, dtypeName(e->type)));
      return Error::success();
    }
    }
    return fail("unknown expression kind");
  }

  Error stmt(const Stmt &s) {
    if (!s)
      return fail("null statement");
    bool gpuLoop = s->kind == StmtKind::For &&
                   (s->loopKind == LoopKind::GpuBlock || s->loopKind == LoopKind::GpuThread);
    if (!gpuLoop && !(s->kind == StmtKind::Block && s->body.size() == 1))
      gpuNestOpen = false;
    switch (s->kind) {
    case StmtKind::For: {
      NNC_TRY(expr(s->extent));
      if (s->extent->type != DType::I64)
        return fail(fmt::format("loop '{}' extent must be i64, got {}", s->name,
                                dtypeName(s->extent->type)));
      if (s->name.empty())
        return fail("loop without a variable name");
      if (!loopNames.insert(s->name).second)
        return fail(fmt::format("loop variable '{}' is used by more than one loop", s->name));
      if (lookup(s->name))
        return fail(fmt::format("loop variable '{}' shadows a local", s->name));
      if (s->body.size() != 1)
        return fail(fmt::format("loop '{}' must have exactly one body statement", s->name));
      if (gpuLoop)
        NNC_TRY(checkGpuLoop(*s));
      bool par = s->loopKind == LoopKind::Parallel;
      if (par && parallelDepth > 0)
        return fail(fmt::format("parallel loop '{}' is nested in another parallel loop",
                                s->name));
      bool thread = s->loopKind == LoopKind::GpuThread;
      // Inside the work-items, a loop whose extent is not a constant may run a different
      // number of times per work-item: no barrier below it.
      bool divergent = threadDepth > 0 && !thread && s->extent->kind != ExprKind::IntImm;
      parallelDepth += par;
      threadDepth += thread;
      divergentDepth += divergent;
      scope.push_back({s->name, DType::I64, false});
      Error err = stmt(s->body[0]);
      scope.pop_back();
      parallelDepth -= par;
      threadDepth -= thread;
      divergentDepth -= divergent;
      return err;
    }
    case StmtKind::Store: {
      NNC_TRY(checkBuffer(s->buffer, "store"));
      if (!isLocalBuffer(s->buffer) && !k.buffers[s->buffer].written)
        return fail(
            fmt::format("store to '{}' which is not marked written", k.bufferName(s->buffer)));
      NNC_TRY(expr(s->value));
      DType held = k.bufferType(s->buffer);
      if (s->value->type != held)
        return fail(fmt::format("store of {} to '{}' which holds {}", dtypeName(s->value->type),
                                k.bufferName(s->buffer), dtypeName(held)));
      return checkIndex(s->buffer, s->index, "store");
    }
    case StmtKind::Prefetch: {
      // A hint: any index of the right type (a line past the end is fetched, not read).
      NNC_TRY(checkBuffer(s->buffer, "prefetch"));
      NNC_TRY(expr(s->index));
      if (s->index->type != DType::I64)
        return fail(fmt::format("prefetch index into '{}' must be i64, got {}",
                                k.bufferName(s->buffer), dtypeName(s->index->type)));
      if (s->write && !isLocalBuffer(s->buffer) && !k.buffers[s->buffer].written)
        return fail(fmt::format("prefetch for a store to '{}' which is not marked written",
                                k.bufferName(s->buffer)));
      return Error::success();
    }
    case StmtKind::Barrier:
      if (threadDepth == 0)
        return fail("barrier outside the gpu_thread loops");
      if (divergentDepth > 0)
        return fail("barrier under control flow that depends on the work-item (an if, or a "
                    "loop without a constant extent)");
      return Error::success();
    case StmtKind::VecLoad: {
      NNC_TRY(checkBuffer(s->buffer, "vector load"));
      if (!validLanes(s->names.size()))
        return fail(fmt::format("vector load of {} lanes (2, 4, 8 or 16)", s->names.size()));
      if (s->type != k.bufferType(s->buffer))
        return fail(fmt::format("vector load of {} from '{}' which holds {}", dtypeName(s->type),
                                k.bufferName(s->buffer), dtypeName(k.bufferType(s->buffer))));
      if (isStorageOnly(s->type) || s->type == DType::F16 || s->type == DType::BF16 ||
          s->type == DType::Bool)
        return fail(fmt::format("vector load of {}", dtypeName(s->type)));
      NNC_TRY(
          checkIndex(s->buffer, s->index, "vector load", static_cast<int64_t>(s->names.size())));
      for (const std::string &n : s->names) {
        if (lookup(n))
          return fail(fmt::format("local '{}' is declared twice in one scope chain", n));
        scope.push_back({n, s->type, true});
      }
      return Error::success();
    }
    case StmtKind::VecStore: {
      NNC_TRY(checkBuffer(s->buffer, "vector store"));
      if (!validLanes(s->args.size()))
        return fail(fmt::format("vector store of {} lanes (2, 4, 8 or 16)", s->args.size()));
      if (!isLocalBuffer(s->buffer) && !k.buffers[s->buffer].written)
        return fail(
            fmt::format("store to '{}' which is not marked written", k.bufferName(s->buffer)));
      DType held = k.bufferType(s->buffer);
      if (isStorageOnly(held) || held == DType::F16 || held == DType::BF16 || held == DType::Bool)
        return fail(fmt::format("vector store of {}", dtypeName(held)));
      for (const Expr &a : s->args) {
        NNC_TRY(expr(a));
        if (a->type != held)
          return fail(fmt::format("vector store of {} to '{}' which holds {}", dtypeName(a->type),
                                  k.bufferName(s->buffer), dtypeName(held)));
      }
      return checkIndex(s->buffer, s->index, "vector store", static_cast<int64_t>(s->args.size()));
    }
    case StmtKind::Decl:
      NNC_TRY(expr(s->value));
      if (s->value->type != s->type)
        return fail(fmt::format("local '{}' of {} initialized with {}", s->name,
                                dtypeName(s->type), dtypeName(s->value->type)));
      if (lookup(s->name))
        return fail(fmt::format("local '{}' is declared twice in one scope chain", s->name));
      scope.push_back({s->name, s->type, true});
      return Error::success();
    case StmtKind::Assign: {
      NNC_TRY(expr(s->value));
      const Local *l = lookup(s->name);
      if (!l)
        return fail(fmt::format("assignment to undeclared local '{}'", s->name));
      if (!l->mutableLocal)
        return fail(fmt::format("assignment to loop variable '{}'", s->name));
      if (l->type != s->value->type)
        return fail(fmt::format("assignment of {} to local '{}' of {}",
                                dtypeName(s->value->type), s->name, dtypeName(l->type)));
      return Error::success();
    }
    case StmtKind::If: {
      NNC_TRY(expr(s->value));
      if (s->value->type != DType::Bool)
        return fail(fmt::format("if condition must be bool, got {}", dtypeName(s->value->type)));
      if (s->body.empty() || !s->body[0])
        return fail("if without a then-branch");
      divergentDepth += threadDepth > 0;
      for (size_t b = 0; b < s->body.size() && b < 2; ++b) {
        if (!s->body[b])
          continue;
        size_t mark = scope.size();
        Error err = stmt(s->body[b]);
        scope.resize(mark);
        if (err) {
          divergentDepth -= threadDepth > 0;
          return err;
        }
      }
      divergentDepth -= threadDepth > 0;
      return Error::success();
    }
    case StmtKind::Block: {
      size_t mark = scope.size();
      for (const Stmt &b : s->body) {
        Error err = stmt(b);
        if (err) {
          scope.resize(mark);
          return err;
        }
      }
      scope.resize(mark);
      return Error::success();
    }
    case StmtKind::GemmTile: return gemmTile(*s);
    case StmtKind::ConvTile: return convTile(*s);
    }
    return fail("unknown statement kind");
  }

  Error convTile(const StmtNode &s) {
    const ConvTileShape &t = s.conv;
    if (s.args.size() != 8)
      return fail("conv_tile without X, W, C and init offsets and four reduction extents");
    for (const Expr &e : s.args) {
      NNC_TRY(expr(e));
      if (e->type != DType::I64)
        return fail("conv_tile offset or extent is not i64");
    }
    const bool bf16 = t.elems == GemmElems::BF16;
    if (t.elems != GemmElems::F32 && !bf16)
      return fail(fmt::format("{} conv_tile (f32 and bf16 tiles exist)", gemmElemsName(t.elems)));
    if (bf16 && (t.depthwise || t.ws[3] != t.lanes))
      return fail("a bf16 conv_tile is not depthwise and its W holds pairs of input lanes of "
                  "`lanes` output lanes (ws[3] = lanes)");
    std::vector<int> operands{t.x, t.w, s.buffer};
    if (t.init >= 0)
      operands.push_back(t.init);
    for (int b : operands) {
      NNC_TRY(checkBuffer(b, "conv_tile"));
      if (isLocalBuffer(b))
        return fail("conv_tile on a local buffer");
      DType want = bf16 && (b == t.x || b == t.w) ? DType::BF16 : DType::F32;
      if (k.buffers[b].dtype != want)
        return fail(fmt::format("conv_tile on '{}' of {} ({} expected)", k.buffers[b].name,
                                dtypeName(k.buffers[b].dtype), dtypeName(want)));
    }
    if (!k.buffers[s.buffer].written)
      return fail(fmt::format("conv_tile writes '{}' which is not marked written",
                              k.buffers[s.buffer].name));
    if (t.cols <= 0 || t.blocks <= 0 || t.lanes <= 0 || (t.depthwise && t.blocks != 1))
      return fail(fmt::format("conv_tile {}x{}x{}{}", t.cols, t.blocks, t.lanes,
                              t.depthwise ? " depthwise (one block)" : ""));
    bool negative = t.xcol < 0 || t.wblk < 0 || t.ccol < 0 || t.cblk < 0 || t.icol < 0 ||
                    t.iblk < 0 || t.sumEvery < 0;
    for (int d = 0; d < 4; ++d)
      negative = negative || t.xs[d] < 0 || t.ws[d] < 0;
    if (negative)
      return fail(fmt::format("conv_tile {}x{}x{} with a negative stride", t.cols, t.blocks,
                              t.lanes));
    if (!t.kwCols.empty()) {
      if (s.args[6]->kind != ExprKind::IntImm ||
          s.args[6]->intValue != static_cast<int64_t>(t.kwCols.size()))
        return fail(fmt::format("conv_tile with {} kernel columns' windows over {} kernel columns",
                                t.kwCols.size(), printExpr(s.args[6])));
      for (const auto &w : t.kwCols)
        if (w[0] < 0 || w[0] > w[1] || w[1] > t.cols)
          return fail(fmt::format("conv_tile column window [{}, {}) outside its {} columns",
                                  w[0], w[1], t.cols));
    }
    // With constant offsets and extents, the last element each operand touches must lie in
    // its buffer.
    auto imm = [](const Expr &e) { return e->kind == ExprKind::IntImm; };
    bool constant = true, empty = false;
    int64_t xr = 0, wr = 0, xLo = 0;
    for (int d = 0; d < 4; ++d) {
      constant = constant && imm(s.args[4 + d]);
      if (!constant)
        break;
      int64_t n = s.args[4 + d]->intValue;
      empty = empty || n <= 0;
      if (d != 2 || t.kwCols.empty())
        xr += (n - 1) * t.xs[d];
      wr += (n - 1) * t.ws[d];
    }
    int64_t xCols = (t.cols - 1) * t.xcol;
    if (!t.kwCols.empty()) {
      // The X elements the windows read: from the first column of the first window that has
      // one to the last column of the last.
      bool any = false;
      for (size_t i = 0; i < t.kwCols.size(); ++i) {
        if (t.kwCols[i][1] <= t.kwCols[i][0])
          continue;
        int64_t lo = t.kwCols[i][0] * t.xcol + int64_t(i) * t.xs[2];
        int64_t hi = (t.kwCols[i][1] - 1) * t.xcol + int64_t(i) * t.xs[2];
        xLo = any ? std::min(xLo, lo) : lo;
        xCols = any ? std::max(xCols, hi) : hi;
        any = true;
      }
      empty = empty || !any;
    }
    struct Reach {
      int buffer;
      const Expr &off;
      int64_t last;
      bool check;
    } reach[] = {
        {t.x, s.args[0], xCols + xr + (t.depthwise ? t.lanes - 1 : 0), constant && !empty},
        {t.w, s.args[1], (t.blocks - 1) * t.wblk + wr + t.lanes - 1, constant && !empty},
        {s.buffer, s.args[2], (t.blocks - 1) * t.cblk + (t.cols - 1) * t.ccol + t.lanes - 1,
         true},
        {t.init, s.args[3], (t.blocks - 1) * t.iblk + (t.cols - 1) * t.icol + t.lanes - 1,
         t.init >= 0}};
    for (const Reach &r : reach)
      if (r.check && imm(r.off) &&
          (r.off->intValue + (r.buffer == t.x ? xLo : 0) < 0 ||
           r.off->intValue + r.last >= k.buffers[r.buffer].numElements))
        return fail(fmt::format("conv_tile reaches element {} of '{}' ({} elements)",
                                r.off->intValue + r.last, k.buffers[r.buffer].name,
                                k.buffers[r.buffer].numElements));
    return Error::success();
  }

  Error gemmTile(const StmtNode &s) {
    const GemmTileShape &t = s.tile;
    if (s.args.size() != 4)
      return fail("gemm_tile without A, B, C offsets and a k extent");
    for (const Expr &e : s.args) {
      NNC_TRY(expr(e));
      if (e->type != DType::I64)
        return fail("gemm_tile offset or k extent is not i64");
    }
    bool integer = t.elems == GemmElems::U8S8S32, bf16 = t.elems == GemmElems::BF16;
    const DType want[3] = {integer ? DType::U8 : bf16 ? DType::BF16 : DType::F32,
                           integer ? DType::I8 : bf16 ? DType::BF16 : DType::F32,
                           integer ? DType::I32 : DType::F32};
    const int operands[3] = {t.a, t.b, s.buffer};
    for (int o = 0; o < 3; ++o) {
      int b = operands[o];
      NNC_TRY(checkBuffer(b, "gemm_tile"));
      if (isLocalBuffer(b))
        return fail("gemm_tile on a local buffer");
      if (k.buffers[b].dtype != want[o])
        return fail(fmt::format("{} gemm_tile on '{}' of {} ({} expected)", gemmElemsName(t.elems),
                                k.buffers[b].name, dtypeName(k.buffers[b].dtype),
                                dtypeName(want[o])));
    }
    if (integer && t.ak != 1)
      return fail(fmt::format("u8s8s32 gemm_tile with ak {} (its k groups are dwords: ak 1)", t.ak));
    if (bf16 && t.ak != 1)
      return fail(fmt::format("bf16 gemm_tile with ak {} (its k pairs are dwords: ak 1)", t.ak));
    if (bf16 && t.ldb < 2 * t.nr)
      return fail(fmt::format("bf16 gemm_tile {}x{} with ldb {} below 2 * nr", t.mr, t.nr, t.ldb));
    if (integer && t.ldb < 4 * t.nr)
      return fail(fmt::format("u8s8s32 gemm_tile {}x{} with ldb {} below 4 * nr", t.mr, t.nr,
                              t.ldb));
    if (!k.buffers[s.buffer].written)
      return fail(fmt::format("gemm_tile writes '{}' which is not marked written",
                              k.buffers[s.buffer].name));
    if (t.mr <= 0 || t.nr <= 0 || t.lda < 0 || t.ak < 0 || t.ldb < 0 || t.ldc < 0)
      return fail(fmt::format("gemm_tile {}x{} with a negative stride", t.mr, t.nr));
    if (t.prefetchShift < 0 || t.prefetchShift > 30)
      return fail(fmt::format("gemm_tile prefetch shift {} outside [0, 30]", t.prefetchShift));
    if (t.sumEvery < 0 || (t.sumEvery > 0 && t.elems != GemmElems::F32))
      return fail(fmt::format("{} gemm_tile summing every {} k steps (runs are for f32 tiles, "
                              "of a positive length)",
                              gemmElemsName(t.elems), t.sumEvery));
    // With constant offsets and k extent, the last element each operand touches must lie
    // in its buffer.
    auto imm = [](const Expr &e) { return e->kind == ExprKind::IntImm; };
    if (integer && imm(s.args[3]) && s.args[3]->intValue % 4 != 0)
      return fail(fmt::format("u8s8s32 gemm_tile over k < {}, not a multiple of 4",
                              s.args[3]->intValue));
    if (bf16 && imm(s.args[3]) && s.args[3]->intValue % 2 != 0)
      return fail(fmt::format("bf16 gemm_tile over k < {}, not a multiple of 2",
                              s.args[3]->intValue));
    if (imm(s.args[3]) && s.args[3]->intValue > 0) {
      int64_t kc = s.args[3]->intValue;
      int64_t bLast = integer ? (kc / 4 - 1) * t.ldb + 4 * t.nr - 1
                      : bf16  ? (kc / 2 - 1) * t.ldb + 2 * t.nr - 1
                              : (kc - 1) * t.ldb + t.nr - 1;
      struct Reach {
        int buffer;
        const Expr &off;
        int64_t last;
      } reach[] = {{t.a, s.args[0], (t.mr - 1) * t.lda + (kc - 1) * t.ak},
                   {t.b, s.args[1], bLast},
                   {s.buffer, s.args[2], (t.mr - 1) * t.ldc + t.nr - 1}};
      for (const Reach &r : reach)
        if (imm(r.off) && (r.off->intValue < 0 ||
                           r.off->intValue + r.last >= k.buffers[r.buffer].numElements))
          return fail(fmt::format("gemm_tile reaches element {} of '{}' ({} elements)",
                                  r.off->intValue + r.last, k.buffers[r.buffer].name,
                                  k.buffers[r.buffer].numElements));
    }
    return Error::success();
  }
};

} // namespace

Error verifyKernel(const Kernel &k) {
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const BufferDecl &d = k.buffers[b];
    if (d.numElements < 0)
      return makeError("kernel {}: buffer '{}' has {} elements", k.name, d.name, d.numElements);
    if (d.role == BufferRole::Status &&
        (d.dtype != DType::I64 || d.numElements != 2 * static_cast<int64_t>(k.checks.size())))
      return makeError("kernel {}: status buffer '{}' is {}[{}] for {} checks (i64, 2 each)",
                       k.name, d.name, dtypeName(d.dtype), d.numElements, k.checks.size());
    // What in_place may name: the result's element i takes operand element i's place.
    if (!d.inPlaceOver.empty() && (d.role != BufferRole::Result || !d.written))
      return makeError("kernel {}: buffer '{}' is in place over operands but is not a written "
                       "result",
                       k.name, d.name);
    for (int o : d.inPlaceOver)
      if (o < 0 || o >= static_cast<int>(k.buffers.size()) ||
          k.buffers[o].role != BufferRole::Operand || k.buffers[o].numElements != d.numElements)
        return makeError("kernel {}: result '{}' is in place over '{}', which is not an operand "
                         "parameter of its {} elements",
                         k.name, d.name, k.hasBuffer(o) ? k.bufferName(o) : std::to_string(o),
                         d.numElements);
  }
  if (k.flops < 0 || !std::isfinite(k.flops))
    return makeError("kernel {}: its work is {} flops", k.name, k.flops);
  for (const LocalBuffer &l : k.locals)
    if (l.numElements < 1 || l.name.empty())
      return makeError("kernel {}: local buffer '{}' has {} elements", k.name, l.name,
                       l.numElements);
  {
    Verifier v(k);
    NNC_TRY(v.stmt(k.body));
  }
  if (!k.schedule.steps.empty()) {
    Expected<Stmt> scheduled = applySchedule(k);
    if (!scheduled)
      return scheduled.takeError();
    Kernel copy;
    copy.name = k.name;
    copy.buffers = k.buffers;
    copy.locals = k.locals;
    copy.checks = k.checks;
    copy.body = *scheduled;
    Verifier v(copy);
    if (Error e = v.stmt(copy.body))
      return e.withContext("after schedule '" + k.schedule.str() + "'");
  }
  return Error::success();
}

} // namespace nnc::kir

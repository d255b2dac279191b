// Permutation tiles transposed in registers (KernelEmitter.h).
#include <optional>

#include "llvm/KernelEmitter.h"

namespace nnc::llvmcg {
namespace {

/// The coefficient of loop variable `var` in the i64 index `e` when `e` is exactly affine in
/// it (terms without `var`, divisions and loads included, form its base); nullopt otherwise.
std::optional<int64_t> affineCoefficient(const kir::Expr &e, const std::string &var) {
  if (!mentionsVar(e, var))
    return 0;
  if (e->kind == kir::ExprKind::Var)
    return 1;
  if (e->kind != kir::ExprKind::Op || e->args.size() != 2 || e->type != DType::I64)
    return std::nullopt;
  const kir::Expr &a = e->args[0], &b = e->args[1];
  switch (e->op) {
  case OpKind::Add:
  case OpKind::Sub: {
    std::optional<int64_t> ca = affineCoefficient(a, var), cb = affineCoefficient(b, var);
    if (!ca || !cb)
      return std::nullopt;
    return e->op == OpKind::Add ? *ca + *cb : *ca - *cb;
  }
  case OpKind::Mul:
    if (b->kind == kir::ExprKind::IntImm)
      if (std::optional<int64_t> ca = affineCoefficient(a, var))
        return *ca * b->intValue;
    if (a->kind == kir::ExprKind::IntImm)
      if (std::optional<int64_t> cb = affineCoefficient(b, var))
        return *cb * a->intValue;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

/// Whether `cond` is a conjunction of `x < y` whose x only grows with loop variables `a` and `b`
/// and whose y mentions neither (a split's tail guards): then it holds on a whole tile of a
/// and b when it holds at the tile's last corner.
bool holdsOnTileIfAtCorner(const kir::Expr &cond, const std::string &a, const std::string &b) {
  if (cond->kind != kir::ExprKind::Op || cond->args.size() != 2)
    return false;
  if (cond->op == OpKind::And)
    return holdsOnTileIfAtCorner(cond->args[0], a, b) && holdsOnTileIfAtCorner(cond->args[1], a, b);
  if (cond->op != OpKind::Less || mentionsVar(cond->args[1], a) || mentionsVar(cond->args[1], b))
    return false;
  std::optional<int64_t> ca = affineCoefficient(cond->args[0], a),
                         cb = affineCoefficient(cond->args[0], b);
  return ca && cb && *ca >= 0 && *cb >= 0;
}

} // namespace

/// A permutation's tile (permuteSchedule): `for a < W { for b < W' { [if (guard)]
/// out[i(a, b)] = in[j(a, b)] } }`, W in {4, 8, 16} and W' = W or a split tail's min(W, X): a
/// pure copy whose load is contiguous along a and whose store is contiguous along b. Emitted as
/// W vector loads along a, a transpose of the W x W block in registers (log2 W stages of
/// two-vector shuffles, each swapping one bit of the row and column positions) and W vector
/// stores along b, instead of W*W scalar copies with one side striding through memory (ViT's
/// K^T copy reads rows 9 KiB apart). A guard (a split's tail) is tested at the tile's last
/// corner, and X >= W: where either fails, the loops run as written. Returns false, emitting
/// nothing, for any other loop.
bool KernelEmitter::emitTransposedTile(const kir::StmtNode &s) {
  auto constExtent = [](const kir::StmtNode &l) {
    return l.extent && l.extent->kind == kir::ExprKind::IntImm ? l.extent->intValue : -1;
  };
  int64_t w = constExtent(s);
  if (s.loopKind != kir::LoopKind::Serial || (w != 4 && w != 8 && w != 16) || s.body.size() != 1 ||
      !s.body[0] || s.body[0]->kind != kir::StmtKind::For)
    return false;
  const kir::StmtNode &in = *s.body[0];
  const std::string &av = s.name, &bv = in.name;
  // The inner extent: W, or min(W, X) from a split's tightened tail guard (tightenGuardedLoops),
  // whose tiles are whole where X >= W.
  kir::Expr innerLimit;
  if (constExtent(in) != w) {
    const kir::Expr &e = in.extent;
    if (!e || e->kind != kir::ExprKind::Op || e->op != OpKind::Min || e->args.size() != 2)
      return false;
    int imm = e->args[0]->kind == kir::ExprKind::IntImm ? 0 : 1;
    if (e->args[imm]->kind != kir::ExprKind::IntImm || e->args[imm]->intValue != w ||
        mentionsVar(e->args[1 - imm], av) || mentionsVar(e->args[1 - imm], bv))
      return false;
    innerLimit = e->args[1 - imm];
  }
  if (in.loopKind != kir::LoopKind::Serial || in.body.size() != 1 || !in.body[0])
    return false;
  // Guards (split tails: one If per tiled loop whose extent the factor does not divide).
  kir::Expr guard;
  const kir::StmtNode *st = in.body[0].get();
  while (st->kind == kir::StmtKind::If) {
    if (st->body.empty() || !st->body[0] || (st->body.size() > 1 && st->body[1]) ||
        !holdsOnTileIfAtCorner(st->value, av, bv))
      return false;
    guard = guard ? kir::land(guard, st->value) : st->value;
    st = st->body[0].get();
  }
  if (st->kind != kir::StmtKind::Store || !st->value || st->value->kind != kir::ExprKind::Load ||
      st->value->args.size() != 1)
    return false;
  const kir::ExprNode &ld = *st->value;
  int nb = static_cast<int>(k_.buffers.size());
  if (st->buffer < 0 || st->buffer >= nb || ld.buffer < 0 || ld.buffer >= nb ||
      ld.buffer == st->buffer || k_.buffers[ld.buffer].dtype != k_.buffers[st->buffer].dtype ||
      ld.type != k_.buffers[ld.buffer].dtype)
    return false;
  Type *et = storageType(k_.buffers[st->buffer].dtype);
  unsigned bits = et->getPrimitiveSizeInBits();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return false;
  const kir::Expr &li = ld.args[0], &si = st->index;
  if (affineCoefficient(li, av) != std::optional<int64_t>(1) || !affineCoefficient(li, bv) ||
      affineCoefficient(si, bv) != std::optional<int64_t>(1) || !affineCoefficient(si, av))
    return false;

  Scope saved = scope_;
  std::optional<ValueFrame> tileValues;
  auto at = [&](int64_t a, int64_t b) {
    scope_[av] = Binding{b_.getInt64(a), nullptr, DType::I64};
    scope_[bv] = Binding{b_.getInt64(b), nullptr, DType::I64};
  };
  llvm::BasicBlock *scalarB = nullptr, *join = nullptr;
  if (guard || innerLimit) {
    at(w - 1, w - 1);
    Value *ok = nullptr;
    if (guard)
      ok = emitExpr(guard);
    if (innerLimit && !error_) {
      Value *limit = emitExpr(innerLimit);
      if (!error_ && !limit->getType()->isIntegerTy(64))
        fail("loop {} has a non-i64 extent {}", bv, printExpr(in.extent));
      if (!error_) {
        Value *whole = b_.CreateICmpSGE(limit, b_.getInt64(w));
        ok = ok ? b_.CreateAnd(ok, whole) : whole;
      }
    }
    if (error_) {
      scope_ = std::move(saved);
      return true;
    }
    auto *vecB = llvm::BasicBlock::Create(c_, av + ".tile", fn_);
    scalarB = llvm::BasicBlock::Create(c_, av + ".edge", fn_);
    join = llvm::BasicBlock::Create(c_, av + ".tiled", fn_);
    b_.CreateCondBr(ok, vecB, scalarB);
    b_.SetInsertPoint(vecB);
    tileValues.emplace(*this); // vecB's values do not reach the edge loop
  }
  unsigned lanes = static_cast<unsigned>(w);
  auto *vt = llvm::FixedVectorType::get(et, lanes);
  llvm::Align align(bits / 8);
  // rows[b]: the elements at a = 0..W-1 of column b.
  std::vector<Value *> rows(lanes);
  DType dt;
  for (unsigned b = 0; b < lanes; ++b) {
    at(0, b);
    Value *p = bufferElement(ld.buffer, li, dt);
    if (!p) {
      scope_ = std::move(saved);
      return true;
    }
    rows[b] = b_.CreateAlignedLoad(vt, p, align);
  }
  // The stage of k = 1, 2, 4, ... swaps the bit of value k between the row and column
  // positions: rows i (that bit clear) and i + k exchange the elements where it differs.
  for (unsigned k = 1; k < lanes; k <<= 1)
    for (unsigned i = 0; i < lanes; ++i) {
      if (i & k)
        continue;
      std::vector<int> lo(lanes), hi(lanes);
      for (unsigned c = 0; c < lanes; ++c) {
        lo[c] = static_cast<int>((c & k) ? lanes + c - k : c);
        hi[c] = static_cast<int>((c & k) ? lanes + c : c + k);
      }
      Value *x = rows[i], *y = rows[i + k];
      rows[i] = b_.CreateShuffleVector(x, y, lo);
      rows[i + k] = b_.CreateShuffleVector(x, y, hi);
    }
  for (unsigned a = 0; a < lanes; ++a) {
    at(a, 0);
    Value *p = bufferElement(st->buffer, si, dt);
    if (!p) {
      scope_ = std::move(saved);
      return true;
    }
    b_.CreateAlignedStore(rows[a], p, align);
  }
  scope_ = saved;
  tileValues.reset();
  if (scalarB) {
    b_.CreateBr(join);
    b_.SetInsertPoint(scalarB);
    emitLoop(s.name, b_.getInt64(0), b_.getInt64(w), s.loopKind, s.extent, s.body, s.independent);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }
  return true;
}

} // namespace nnc::llvmcg

// Index math simplified by loop ranges (codegen/lower/IndexRanges.h): each simplified form is
// checked against the original at every point of the ranges, and for what it removed.
#include <gtest/gtest.h>

#include <functional>

#include "codegen/lower/IndexRanges.h"

namespace nnc::lower {
namespace {

using kir::Expr;

Expr v(const char *n) {
  return kir::var(n);
}
Expr k(int64_t c) {
  return kir::intImm(c);
}

/// The value of index expression `e` at `at` (the ops the simplifier handles).
int64_t eval(const Expr &e, const std::map<std::string, int64_t> &at) {
  switch (e->kind) {
  case kir::ExprKind::IntImm:
    return e->intValue;
  case kir::ExprKind::Var:
    return at.at(e->name);
  default:
    break;
  }
  auto a = [&](int i) { return eval(e->args[size_t(i)], at); };
  switch (e->op) {
  case OpKind::Add:
    return a(0) + a(1);
  case OpKind::Sub:
    return a(0) - a(1);
  case OpKind::Mul:
    return a(0) * a(1);
  case OpKind::Div:
    return a(0) / a(1);
  case OpKind::Mod:
    return a(0) % a(1);
  case OpKind::Min:
    return std::min(a(0), a(1));
  case OpKind::Max:
    return std::max(a(0), a(1));
  case OpKind::Less:
    return a(0) < a(1);
  case OpKind::Select:
    return a(0) ? a(1) : a(2);
  default:
    ADD_FAILURE() << "op " << int(e->op);
    return 0;
  }
}

bool uses(const Expr &e, OpKind op) {
  if (e->kind == kir::ExprKind::Op && e->op == op)
    return true;
  for (const Expr &x : e->args)
    if (uses(x, op))
      return true;
  return false;
}

/// `s`, the simplified `e`, equals `e` at every point of the (two-variable) `ranges`.
void expectSame(const Expr &e, const Expr &s, const VarRanges &ranges) {
  auto [ilo, ihi] = ranges.at("i");
  auto [jlo, jhi] = ranges.at("j");
  for (int64_t i = ilo; i <= ihi; ++i)
    for (int64_t j = jlo; j <= jhi; ++j)
      ASSERT_EQ(eval(e, {{"i", i}, {"j", j}}), eval(s, {{"i", i}, {"j", j}}))
          << kir::printExpr(e) << " vs " << kir::printExpr(s) << " at " << i << ", " << j;
}

TEST(IndexRanges, DivisionsOfAWholeBlockBecomeAffine) {
  VarRanges r{{"i", {8, 15}}, {"j", {0, 15}}};
  Expr x = kir::sub(kir::add(kir::mul(v("i"), k(16)), v("j")), k(128)); // 16 i + j - 128
  for (OpKind op : {OpKind::Div, OpKind::Mod}) {
    Expr e = kir::op(op, {x, k(16)}), s = simplifyIndexMath(e, r);
    expectSame(e, s, r);
    EXPECT_FALSE(uses(s, OpKind::Div) || uses(s, OpKind::Mod)) << kir::printExpr(s);
  }
  // 16 i + j + 4: the remainder j + 4 crosses a multiple of 16, so the division stays.
  Expr y = kir::add(kir::add(kir::mul(v("i"), k(16)), v("j")), k(4));
  Expr d = kir::div(y, k(16));
  EXPECT_TRUE(uses(simplifyIndexMath(d, r), OpKind::Div));
  // Unless j stays below 12.
  VarRanges low{{"i", {8, 15}}, {"j", {0, 11}}};
  Expr s = simplifyIndexMath(d, low);
  expectSame(d, s, low);
  EXPECT_FALSE(uses(s, OpKind::Div)) << kir::printExpr(s);
}

TEST(IndexRanges, ClampsAndSelectsThatTheRangesDecide) {
  VarRanges upper{{"i", {8, 15}}, {"j", {0, 15}}}, lower{{"i", {0, 7}}, {"j", {0, 15}}};
  Expr c = kir::add(kir::mul(v("i"), k(16)), v("j"));
  Expr clamp = kir::min(kir::max(kir::sub(c, k(128)), k(0)), k(127));
  Expr s = simplifyIndexMath(clamp, upper);
  expectSame(clamp, s, upper);
  EXPECT_FALSE(uses(s, OpKind::Min) || uses(s, OpKind::Max)) << kir::printExpr(s);
  Expr zero = simplifyIndexMath(clamp, lower); // the value is below the clamp there: 0
  expectSame(clamp, zero, lower);
  EXPECT_TRUE(kir::isIntImm(zero, 0)) << kir::printExpr(zero);
  VarRanges both{{"i", {7, 8}}, {"j", {0, 15}}}; // on both sides of 128: kept
  EXPECT_TRUE(uses(simplifyIndexMath(clamp, both), OpKind::Max));
  Expr sel = kir::select(kir::lt(c, k(128)), v("i"), v("j"));
  for (const VarRanges &r : {lower, upper}) {
    Expr t = simplifyIndexMath(sel, r);
    expectSame(sel, t, r);
    EXPECT_FALSE(uses(t, OpKind::Select)) << kir::printExpr(t);
  }
}

TEST(IndexRanges, CutsWhereACompareIsDecidedOnBothSides) {
  Expr c = kir::add(kir::mul(v("i"), k(16)), v("j"));
  VarRanges r{{"i", {0, 15}}, {"j", {0, 15}}};
  auto cut = decidingCut(kir::lt(c, k(128)), {"i", "j"}, r);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->first, "i");
  EXPECT_EQ(cut->second, 8);
  // A boundary inside a block of j: no single cut of i or j decides it.
  EXPECT_FALSE(decidingCut(kir::lt(c, k(120)), {"i", "j"}, r));
  // Already decided: nothing to cut.
  EXPECT_FALSE(decidingCut(kir::lt(c, k(1000)), {"i", "j"}, r));
}

TEST(IndexRanges, DivisionCutsHalveOtherVariablesThenFindTheBlockEdge) {
  // (10 a + c) / 16, a in [0, 2], c in [0, 9], c the contiguous loop: a is halved first.
  Expr x = kir::div(kir::add(kir::mul(v("a"), k(10)), v("c")), k(16));
  VarRanges r{{"a", {0, 2}}, {"c", {0, 9}}};
  auto cut = dividingCut(x, "c", r);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->first, "a");
  EXPECT_EQ(cut->second, 1); // [0, 0] and [1, 2]
  // a = 1: channels 10..19 cross 16 at c = 6.
  VarRanges one{{"a", {1, 1}}, {"c", {0, 9}}};
  cut = dividingCut(x, "c", one);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->first, "c");
  EXPECT_EQ(cut->second, 6);
  // Within one block (a = 0: channels 0..9), or c not involved: nothing to cut.
  EXPECT_FALSE(dividingCut(x, "c", VarRanges{{"a", {0, 0}}, {"c", {0, 9}}}));
  EXPECT_FALSE(dividingCut(x, "y", r));
}

} // namespace
} // namespace nnc::lower

// Index math simplified by loop ranges (IndexRanges.h).
//
// Bounds are intervals over the loop variables' inclusive ranges, computed bottom up (an
// affine sum takes each term's extreme; min, max, select, and division and remainder by a
// positive constant of a non-negative value follow their operands). The simplifier folds
// what the bounds decide. Division rests on an affine decomposition: x = d * Q + R, Q the
// terms whose coefficients (and the part of the constant) are multiples of d, R the rest;
// where R's bounds lie in [k d, (k + 1) d) for one k, x / d = Q + k and x % d = R - k d for
// every value of the variables (x >= 0, so truncation is floor).
#include "IndexRanges.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace nnc::lower {

using kir::Expr;
using kir::ExprKind;
using Bounds = std::pair<int64_t, int64_t>;

namespace {

constexpr int64_t kHuge = int64_t(1) << 50; // beyond any index; keeps sums from overflowing

bool isIndex(const Expr &e) {
  return e->type == DType::I64 || e->type == DType::I32;
}

bool isCompare(OpKind k) {
  return k == OpKind::Less || k == OpKind::LessEqual || k == OpKind::Greater ||
         k == OpKind::GreaterEqual || k == OpKind::Equal;
}

/// x = constant + sum of coefficient * variable, for an index expression of those terms.
struct Affine {
  int64_t constant = 0;
  std::map<std::string, int64_t> terms;
};

std::optional<Affine> affineOf(const Expr &e) {
  if (!isIndex(e))
    return std::nullopt;
  switch (e->kind) {
  case ExprKind::IntImm:
    return Affine{e->intValue, {}};
  case ExprKind::Var:
    return Affine{0, {{e->name, 1}}};
  case ExprKind::Op: {
    if (e->op == OpKind::Add || e->op == OpKind::Sub) {
      std::optional<Affine> a = affineOf(e->args[0]), b = affineOf(e->args[1]);
      if (!a || !b)
        return std::nullopt;
      int64_t s = e->op == OpKind::Add ? 1 : -1;
      a->constant += s * b->constant;
      for (const auto &[v, c] : b->terms)
        a->terms[v] += s * c;
      return a;
    }
    if (e->op == OpKind::Mul) {
      for (int i = 0; i < 2; ++i)
        if (e->args[i]->kind == ExprKind::IntImm) {
          std::optional<Affine> a = affineOf(e->args[1 - i]);
          if (!a)
            return std::nullopt;
          int64_t k = e->args[i]->intValue;
          a->constant *= k;
          for (auto &[v, c] : a->terms)
            c *= k;
          return a;
        }
    }
    return std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

std::optional<Bounds> affineBounds(const Affine &a, const VarRanges &ranges) {
  int64_t lo = a.constant, hi = a.constant;
  for (const auto &[v, c] : a.terms) {
    auto it = ranges.find(v);
    if (it == ranges.end() || std::abs(c) > kHuge)
      return std::nullopt;
    auto [vlo, vhi] = it->second;
    lo += c >= 0 ? c * vlo : c * vhi;
    hi += c >= 0 ? c * vhi : c * vlo;
    if (std::abs(lo) > kHuge || std::abs(hi) > kHuge)
      return std::nullopt;
  }
  return Bounds{lo, hi};
}

Expr affineExpr(const Affine &a, const Expr &like) {
  Expr r = kir::intImm(a.constant, like->type);
  for (const auto &[v, c] : a.terms)
    if (c != 0)
      r = kir::add(r, kir::mul(kir::var(v, like->type), kir::intImm(c, like->type)));
  return r;
}

/// Whether compare `k` holds for all values in `a` against all in `b` (true), none (false),
/// or some (nullopt).
std::optional<bool> decide(OpKind k, Bounds a, Bounds b) {
  switch (k) {
  case OpKind::Less:
    if (a.second < b.first)
      return true;
    if (a.first >= b.second)
      return false;
    return std::nullopt;
  case OpKind::LessEqual:
    if (a.second <= b.first)
      return true;
    if (a.first > b.second)
      return false;
    return std::nullopt;
  case OpKind::Greater:
    return decide(OpKind::Less, b, a);
  case OpKind::GreaterEqual:
    return decide(OpKind::LessEqual, b, a);
  case OpKind::Equal:
    if (a.first == a.second && b.first == b.second && a.first == b.first)
      return true;
    if (a.second < b.first || b.second < a.first)
      return false;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

/// The compare `e` decided over `ranges`, if it is one of index operands and they decide it.
std::optional<bool> decided(const Expr &e, const VarRanges &ranges) {
  if (e->kind != ExprKind::Op || !isCompare(e->op) || !isIndex(e->args[0]))
    return std::nullopt;
  std::optional<Bounds> a = boundsOf(e->args[0], ranges), b = boundsOf(e->args[1], ranges);
  if (!a || !b)
    return std::nullopt;
  return decide(e->op, *a, *b);
}

/// x / d (quotient) or x % d of an affine, non-negative x, when its remainder terms stay
/// within one multiple of d over `ranges`; else null.
Expr divided(const Expr &x, int64_t d, bool quotient, const VarRanges &ranges) {
  std::optional<Affine> a = affineOf(x);
  std::optional<Bounds> xb = boundsOf(x, ranges);
  if (!a || !xb || xb->first < 0 || d <= 0)
    return nullptr;
  Affine q, r;
  q.constant = a->constant / d;
  r.constant = a->constant % d;
  for (const auto &[v, c] : a->terms)
    (c % d == 0 ? q.terms[v] : r.terms[v]) = c % d == 0 ? c / d : c;
  std::optional<Bounds> rb = affineBounds(r, ranges);
  if (!rb)
    return nullptr;
  auto floorDiv = [](int64_t n, int64_t m) { return n >= 0 ? n / m : -((-n + m - 1) / m); };
  int64_t k = floorDiv(rb->first, d);
  if (floorDiv(rb->second, d) != k)
    return nullptr;
  if (quotient) {
    q.constant += k;
    return affineExpr(q, x);
  }
  r.constant -= k * d;
  return affineExpr(r, x);
}

} // namespace

std::optional<Bounds> boundsOf(const Expr &e, const VarRanges &ranges) {
  if (!isIndex(e))
    return std::nullopt;
  if (std::optional<Affine> a = affineOf(e))
    return affineBounds(*a, ranges);
  if (e->kind != ExprKind::Op)
    return std::nullopt;
  auto arg = [&](int i) { return boundsOf(e->args[i], ranges); };
  switch (e->op) {
  case OpKind::Min:
  case OpKind::Max: {
    std::optional<Bounds> a = arg(0), b = arg(1);
    if (!a || !b)
      return std::nullopt;
    if (e->op == OpKind::Min)
      return Bounds{std::min(a->first, b->first), std::min(a->second, b->second)};
    return Bounds{std::max(a->first, b->first), std::max(a->second, b->second)};
  }
  case OpKind::Div:
  case OpKind::Mod: {
    std::optional<Bounds> a = arg(0), b = arg(1);
    if (!a || !b || a->first < 0 || b->first != b->second || b->first <= 0)
      return std::nullopt;
    int64_t d = b->first;
    if (e->op == OpKind::Div)
      return Bounds{a->first / d, a->second / d};
    if (a->first / d == a->second / d)
      return Bounds{a->first % d, a->second % d};
    return Bounds{0, d - 1};
  }
  case OpKind::Select: {
    std::optional<Bounds> a = arg(1), b = arg(2);
    if (!a || !b)
      return std::nullopt;
    return Bounds{std::min(a->first, b->first), std::max(a->second, b->second)};
  }
  default:
    return std::nullopt;
  }
}

Expr simplifyIndexMath(const Expr &e, const VarRanges &ranges) {
  if (!e || e->args.empty())
    return e;
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr &a : e->args) {
    args.push_back(simplifyIndexMath(a, ranges));
    changed = changed || args.back() != a;
  }
  Expr s = e;
  if (changed) {
    if (e->kind == ExprKind::Load)
      s = kir::load(e->buffer, e->type, args[0]);
    else if (e->kind == ExprKind::Op && !e->strict)
      s = kir::op(e->op, args);
    else {
      auto n = std::make_shared<kir::ExprNode>(*e);
      n->args = args;
      s = n;
    }
  }
  if (s->kind != ExprKind::Op)
    return s;
  if (std::optional<bool> c = decided(s, ranges))
    return kir::intImm(*c ? 1 : 0, DType::Bool);
  switch (s->op) {
  case OpKind::Select:
    if (s->args[0]->kind == ExprKind::IntImm)
      return s->args[0]->intValue ? s->args[1] : s->args[2];
    return s;
  case OpKind::Min:
  case OpKind::Max: {
    if (!isIndex(s))
      return s;
    std::optional<Bounds> a = boundsOf(s->args[0], ranges), b = boundsOf(s->args[1], ranges);
    if (!a || !b)
      return s;
    bool aSmaller = a->second <= b->first, bSmaller = b->second <= a->first;
    if (s->op == OpKind::Min)
      return aSmaller ? s->args[0] : bSmaller ? s->args[1] : s;
    return aSmaller ? s->args[1] : bSmaller ? s->args[0] : s;
  }
  case OpKind::Div:
  case OpKind::Mod:
    if (isIndex(s) && s->args[1]->kind == ExprKind::IntImm)
      if (Expr r = divided(s->args[0], s->args[1]->intValue, s->op == OpKind::Div, ranges))
        return r;
    return s;
  default:
    return s;
  }
}

std::optional<std::pair<std::string, int64_t>>
decidingCut(const Expr &e, const std::vector<std::string> &loops, const VarRanges &ranges) {
  // The undecided compares of e.
  std::vector<Expr> compares;
  std::function<void(const Expr &)> walk = [&](const Expr &x) {
    if (!x)
      return;
    if (x->kind == ExprKind::Op && isCompare(x->op) && isIndex(x->args[0]) &&
        boundsOf(x->args[0], ranges) && boundsOf(x->args[1], ranges) && !decided(x, ranges))
      compares.push_back(x);
    for (const Expr &a : x->args)
      walk(a);
  };
  walk(e);
  for (const std::string &v : loops) {
    auto it = ranges.find(v);
    if (it == ranges.end() || it->second.first >= it->second.second)
      continue;
    for (const Expr &c : compares) {
      // The compare is monotone in v where v's coefficient has one sign, so the cut is where
      // the decided value changes; find it by bisection over v's range, then check both sides.
      VarRanges lower = ranges, upper = ranges;
      int64_t lo = it->second.first + 1, hi = it->second.second;
      while (lo < hi) { // the least cut whose lower side is decided... or none
        int64_t mid = lo + (hi - lo + 1) / 2;
        lower[v] = {it->second.first, mid - 1};
        if (decided(c, lower))
          lo = mid;
        else
          hi = mid - 1;
      }
      lower[v] = {it->second.first, lo - 1};
      upper[v] = {lo, it->second.second};
      if (decided(c, lower) && decided(c, upper))
        return std::pair<std::string, int64_t>{v, lo};
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, int64_t>> dividingCut(const Expr &e, const std::string &inner,
                                                           const VarRanges &ranges) {
  std::optional<std::pair<std::string, int64_t>> found;
  std::function<void(const Expr &)> walk = [&](const Expr &x) {
    if (found || !x)
      return;
    for (const Expr &a : x->args)
      walk(a);
    if (found || x->kind != ExprKind::Op || (x->op != OpKind::Div && x->op != OpKind::Mod) ||
        !isIndex(x) || x->args[1]->kind != ExprKind::IntImm || x->args[1]->intValue <= 1)
      return;
    int64_t d = x->args[1]->intValue;
    const Expr &num = x->args[0];
    std::optional<Affine> a = affineOf(num);
    std::optional<Bounds> nb = boundsOf(num, ranges);
    if (!a || !nb || nb->first < 0 || divided(num, d, true, ranges))
      return;
    // The variables of the remainder terms that still span several values.
    std::vector<std::string> spanning;
    bool hasInner = false;
    for (const auto &[v, c] : a->terms) {
      auto it = ranges.find(v);
      if (c % d == 0 || it == ranges.end() || it->second.first == it->second.second)
        continue;
      if (v == inner)
        hasInner = true;
      else
        spanning.push_back(v);
    }
    if (!hasInner)
      return;
    if (!spanning.empty()) {
      auto [lo, hi] = ranges.at(spanning.front());
      found = std::pair<std::string, int64_t>{spanning.front(), lo + (hi - lo + 1) / 2};
      return;
    }
    // Only `inner` spans: cut where the quotient first changes.
    auto [lo, hi] = ranges.at(inner);
    int64_t cut = lo + 1, top = hi;
    VarRanges lower = ranges;
    while (cut < top) {
      int64_t mid = cut + (top - cut + 1) / 2;
      lower[inner] = {lo, mid - 1};
      if (divided(num, d, true, lower))
        cut = mid;
      else
        top = mid - 1;
    }
    lower[inner] = {lo, cut - 1};
    if (cut <= hi && divided(num, d, true, lower))
      found = std::pair<std::string, int64_t>{inner, cut};
  };
  walk(e);
  return found;
}

} // namespace nnc::lower

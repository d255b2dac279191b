// Code generation of fusion groups that hold views (passes/FuseViews.cpp; isFusibleView in
// ir/FusionGroup.h): one kernel that reads the group's inputs and writes its root's result,
// with nothing in between stored.
//
// Algorithm (lowerViewGroup):
//  1. The root's value at output coordinates c is composed recursively (ViewComposer):
//     - a view maps c to coordinates of its operand (viewSources: one case per view op, the
//       index math of its standalone lowering in DataMovement.cpp); a concat or to_nchwc has
//       several sources or padding, chosen by a select on c (each source's coordinates are
//       clamped into its operand, so no load leaves its buffer);
//     - an elementwise member broadcasts c to each operand (numpy rules) and applies its op;
//       a member value used twice at the same coordinates is bound to a local once;
//     - a group input is loaded at its coordinates (a one-element input once, before the
//       loops).
//  2. One loop nest over the root's extents stores the value; a root concat instead gets one
//     nest per operand over that operand's extents (no select), and so does each operand of a
//     member concat that is one of those operands (nested concats flatten into pieces). A loop
//     whose variable the index math takes as var / d and var % d (a blocked channel) becomes
//     two loops, var / d and var % d, and the index math affine in both. A nest whose select
//     among sources (a member concat, padding) is decided on each side of a cut of one loop's
//     range, or a large nest whose contiguous loop crosses blocks of a division, runs as one
//     nest per part (IndexRanges: decidingCut, dividingCut), each part's index math
//     simplified over its ranges (decided selects, clamps and divisions folded).
//  3. Schedule: when the largest input is read along a loop other than the innermost (a
//     transpose-like group), permuteSchedule tiles the two loops; else defaultSchedule.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "IndexRanges.h"
#include "LowerUtil.h"
#include "Lowerers.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace {

using kir::Expr;
using kir::Stmt;
using Coords = std::vector<Expr>;

Expr imm(int64_t v) { return kir::intImm(v); }

/// c clamped into [0, hi].
Expr clampCoord(const Expr &c, int64_t hi) { return kir::min(kir::max(c, imm(0)), imm(hi)); }

/// Where a view reads one result element: its operand `operand` at `coords`, when `valid`
/// holds (null: always); where no source is valid the element is 0 (to_nchwc's padding).
struct Source {
  size_t operand = 0;
  Coords coords;
  Expr valid;
};

/// Coordinates in `in` of the element at coordinates `c` of `out` (same element count, both
/// row-major): dims are matched in groups of equal products, and within a group the linear
/// position is split over the operand's dims.
Expected<Coords> reshapeCoords(const Node &n, const Coords &c, const Extents &out,
                               const Extents &in, const LoopExtents &env) {
  Coords r(in.size());
  size_t i = 0, j = 0;
  while (i < out.size() || j < in.size()) {
    size_t i0 = i, j0 = j;
    int64_t po = 1, pi = 1;
    if (i < out.size())
      po *= out[i++];
    if (j < in.size())
      pi *= in[j++];
    while (po != pi) {
      if (po < pi && i < out.size())
        po *= out[i++];
      else if (pi < po && j < in.size())
        pi *= in[j++];
      else
        return n.error("result {} and operand {} differ in size", extentsStr(out),
                       extentsStr(in));
    }
    Expr lin = imm(0);
    int64_t stride = 1;
    for (size_t d = i; d-- > i0;) {
      lin = kir::add(kir::mul(c[d], imm(stride)), lin);
      stride *= out[d];
    }
    stride = 1;
    for (size_t d = j; d-- > j0;) {
      Expr q = divIndex(lin, stride, env);
      r[d] = d == j0 ? q : modIndex(q, in[d], env);
      stride *= in[d];
    }
  }
  return r;
}

/// The static, normalized starts and steps of a slice per operand dim.
Expected<std::pair<std::vector<int64_t>, std::vector<int64_t>>> sliceStarts(const Node &n,
                                                                            const Extents &xe) {
  int64_t r = static_cast<int64_t>(xe.size());
  std::vector<int64_t> starts = n.constantOperand(1)->toInt64Vector(), axes, steps;
  int64_t k = static_cast<int64_t>(starts.size());
  if (n.numOperands() > 3 && n.operand(3))
    axes = n.constantOperand(3)->toInt64Vector();
  else
    for (int64_t i = 0; i < k; ++i)
      axes.push_back(i);
  if (n.numOperands() > 4 && n.operand(4))
    steps = n.constantOperand(4)->toInt64Vector();
  else
    steps.assign(k, 1);
  if (static_cast<int64_t>(axes.size()) != k || static_cast<int64_t>(steps.size()) != k)
    return n.error("starts, axes and steps have different lengths");
  NNC_ASSIGN_OR_RETURN(axes, normalizeAxes(axes, r, n));
  std::vector<int64_t> first(r, 0), step(r, 1);
  for (int64_t i = 0; i < k; ++i) {
    int64_t ax = axes[i], dim = xe[ax], st = starts[i], sp = steps[i];
    if (sp == 0)
      return n.error("steps must not be 0");
    if (st < 0)
      st += dim;
    st = sp > 0 ? std::clamp<int64_t>(st, 0, dim)
                : std::clamp<int64_t>(st, 0, std::max<int64_t>(dim - 1, 0));
    first[ax] = st;
    step[ax] = sp;
  }
  return std::make_pair(first, step);
}

Expected<std::vector<Source>> viewSources(const Node &n, const Coords &c,
                                          const LoopExtents &env) {
  Extents in = extentsOf(n.operand(0)), out = extentsOf(n.result());
  int64_t r = static_cast<int64_t>(in.size());
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze: {
    NNC_ASSIGN_OR_RETURN(Coords rc, reshapeCoords(n, c, out, in, env));
    return std::vector<Source>{{0, rc, nullptr}};
  }
  case OpKind::Transpose: {
    std::vector<int64_t> perm = n.getInts("perm", {});
    if (perm.empty())
      for (int64_t i = r - 1; i >= 0; --i)
        perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != r)
      return n.error("perm does not match rank {}", r);
    Coords rc(r);
    for (int64_t i = 0; i < r; ++i) {
      if (perm[i] < 0 || perm[i] >= r || rc[perm[i]])
        return n.error("perm is not a permutation");
      rc[perm[i]] = c[i];
    }
    return std::vector<Source>{{0, rc, nullptr}};
  }
  case OpKind::Slice: {
    NNC_ASSIGN_OR_RETURN(auto fs, sliceStarts(n, in));
    Coords rc(r);
    for (int64_t d = 0; d < r; ++d) {
      int64_t f = fs.first[d], s = fs.second[d];
      // A negative step stays one subtraction: the index helpers split sums into terms that
      // must each be non-negative.
      rc[d] = s > 0 ? kir::add(imm(f), kir::mul(c[d], imm(s)))
                    : kir::sub(imm(f), kir::mul(c[d], imm(-s)));
    }
    return std::vector<Source>{{0, rc, nullptr}};
  }
  case OpKind::Gather: {
    NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.getInt("axis"), r, n));
    int64_t i = n.constantOperand(1)->elementAsInt(0);
    if (i < 0)
      i += in[axis];
    if (i < 0 || i >= in[axis])
      return n.error("index {} is out of range for axis {} of extent {}", i, axis, in[axis]);
    Coords rc(c.begin(), c.begin() + axis);
    rc.push_back(imm(i));
    rc.insert(rc.end(), c.begin() + axis, c.end());
    return std::vector<Source>{{0, rc, nullptr}};
  }
  case OpKind::ToNCHWc: {
    int64_t block = n.getInt("block");
    NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.getInt("axis"), r, n));
    Coords rc(c.begin(), c.end() - 1);
    Expr ch = kir::add(kir::mul(c[axis], imm(block)), c.back());
    int64_t channels = in[axis];
    if (channels % block == 0) {
      rc[axis] = ch;
      return std::vector<Source>{{0, rc, nullptr}};
    }
    rc[axis] = kir::min(ch, imm(channels - 1));
    return std::vector<Source>{{0, rc, kir::lt(ch, imm(channels))}};
  }
  case OpKind::FromNCHWc: {
    NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.getInt("axis"), r - 1, n));
    int64_t block = in.back();
    Coords rc = c;
    rc[axis] = divIndex(c[axis], block, env);
    rc.push_back(modIndex(c[axis], block, env));
    return std::vector<Source>{{0, rc, nullptr}};
  }
  case OpKind::Concat: {
    NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.getInt("axis"), r, n));
    std::vector<Source> out;
    int64_t lo = 0;
    for (size_t k = 0; k < n.numOperands(); ++k) {
      int64_t size = extentsOf(n.operand(k))[axis];
      if (size > 0) {
        Coords rc = c;
        rc[axis] = clampCoord(kir::sub(c[axis], imm(lo)), size - 1);
        out.push_back({k, rc, kir::lt(c[axis], imm(lo + size))});
      }
      lo += size;
    }
    if (!out.empty())
      out.back().valid = nullptr; // the last part covers the rest
    return out;
  }
  default: return n.error("op '{}' is not a view", n.opName());
  }
}

/// `c` broadcast (numpy rules, right-aligned) to an operand of extents `e`.
Coords broadcastCoords(const Coords &c, const Extents &e) {
  Coords r(e.size());
  size_t off = c.size() - e.size();
  for (size_t d = 0; d < e.size(); ++d)
    r[d] = e[d] == 1 ? imm(0) : c[off + d];
  return r;
}

/// The value of a group's values at coordinates, built from the members.
class ViewComposer {
public:
  ViewComposer(const LoweringUnit &u, const std::map<const Value *, int> &uses,
               std::string localPrefix, std::function<Expr(size_t input, const Coords &)> leaf,
               const LoopExtents &env)
      : u_(u), uses_(uses), prefix_(std::move(localPrefix)), leaf_(std::move(leaf)), env_(env) {
    members_.insert(u.members.begin(), u.members.end());
  }

  Expected<Expr> valueAt(const Value *v, const Coords &c) {
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(v));
    for (const Expr &x : c)
      key += "|" + kir::printExpr(x);
    auto it = memo_.find(key);
    if (it != memo_.end())
      return it->second;
    Expr e;
    const Node *p = v->producer();
    if (p && members_.count(p) && isFusibleView(*p) && !isFusibleElementwise(*p)) {
      NNC_ASSIGN_OR_RETURN(std::vector<Source> srcs, viewSources(*p, c, env_));
      if (srcs.empty())
        return p->error("a view with no elements to read");
      for (size_t k = srcs.size(); k-- > 0;) {
        NNC_ASSIGN_OR_RETURN(Expr x, valueAt(p->operand(srcs[k].operand), srcs[k].coords));
        if (!srcs[k].valid)
          e = x;
        else
          e = kir::select(srcs[k].valid, x, e ? e : kir::constant(0, x->type));
      }
    } else if (p && members_.count(p)) {
      std::vector<Expr> args;
      for (const Value *o : p->operands()) {
        NNC_ASSIGN_OR_RETURN(Expr a, valueAt(o, broadcastCoords(c, extentsOf(o))));
        args.push_back(a);
      }
      e = pointwiseExpr(*p, args);
      auto uit = uses_.find(v);
      if (uit != uses_.end() && uit->second > 1) {
        std::string name = prefix_ + std::to_string(decls_.size());
        decls_.push_back(kir::decl(name, e->type, e));
        e = kir::var(name, e->type);
      }
    } else {
      size_t idx = std::find(u_.operands.begin(), u_.operands.end(), v) - u_.operands.begin();
      if (idx >= u_.operands.size())
        return u_.node->error("group input %{} is not listed", v->name());
      e = leaf_(idx, c);
    }
    memo_[key] = e;
    return e;
  }

  const std::vector<Stmt> &decls() const { return decls_; }

private:
  const LoweringUnit &u_;
  const std::map<const Value *, int> &uses_;
  std::set<const Node *> members_;
  std::string prefix_;
  std::function<Expr(size_t, const Coords &)> leaf_;
  const LoopExtents &env_;
  std::map<std::string, Expr> memo_;
  std::vector<Stmt> decls_;
};

/// The coefficient of loop variable `var` in index `e` (div and mod taken as scaling), or
/// NaN when `e` is not of that form.
double coefficientOf(const Expr &e, const std::string &var) {
  switch (e->kind) {
  case kir::ExprKind::IntImm: return 0;
  case kir::ExprKind::Var: return e->name == var ? 1 : 0;
  case kir::ExprKind::Op: {
    const Expr &a = e->args[0];
    const Expr &b = e->args.size() > 1 ? e->args[1] : e->args[0];
    switch (e->op) {
    case OpKind::Add: return coefficientOf(a, var) + coefficientOf(b, var);
    case OpKind::Sub: return coefficientOf(a, var) - coefficientOf(b, var);
    case OpKind::Mul:
      if (b->kind == kir::ExprKind::IntImm)
        return coefficientOf(a, var) * static_cast<double>(b->intValue);
      if (a->kind == kir::ExprKind::IntImm)
        return coefficientOf(b, var) * static_cast<double>(a->intValue);
      return NAN;
    case OpKind::Div:
      return b->kind == kir::ExprKind::IntImm ? coefficientOf(a, var) / b->intValue : NAN;
    case OpKind::Mod: return coefficientOf(a, var);
    case OpKind::Min:
    case OpKind::Max:
      return a->kind == kir::ExprKind::IntImm ? coefficientOf(b, var) : coefficientOf(a, var);
    default: return NAN;
    }
  }
  default: return NAN;
  }
}

/// Adds to `out` the loop variables that the index math of `e` (a value expression) uses in a
/// way a loop cannot stride through: under a div, mod, min, max or comparison (a concat's or
/// to_nchwc's select, a reshape's split) or a product of two variables.
void nonAffineVars(const Expr &e, bool inside, std::set<std::string> &out) {
  switch (e->kind) {
  case kir::ExprKind::Var:
    if (inside)
      out.insert(e->name);
    return;
  case kir::ExprKind::Load: nonAffineVars(e->args[0], false, out); return;
  case kir::ExprKind::Op: {
    if (e->op == OpKind::Select) {
      nonAffineVars(e->args[0], true, out);
      nonAffineVars(e->args[1], inside, out);
      nonAffineVars(e->args[2], inside, out);
      return;
    }
    bool index = e->type == DType::I64 || e->type == DType::Bool;
    bool affine = !index || e->op == OpKind::Add || e->op == OpKind::Sub ||
                  (e->op == OpKind::Mul && (e->args[0]->kind == kir::ExprKind::IntImm ||
                                            e->args[1]->kind == kir::ExprKind::IntImm));
    for (const Expr &a : e->args)
      nonAffineVars(a, inside || !affine, out);
    return;
  }
  default:
    for (const Expr &a : e->args)
      nonAffineVars(a, inside, out);
  }
}

/// The index of the load of buffer `b` in `e` (the first found), or null.
Expr loadIndexOf(const Expr &e, int b) {
  if (e->kind == kir::ExprKind::Load && e->buffer == b)
    return e->args[0];
  for (const Expr &a : e->args)
    if (Expr x = loadIndexOf(a, b))
      return x;
  return nullptr;
}

/// The divisors d of loop variable `var` in `e`'s index math taken exactly as var / d or
/// var % d (d > 1).
void blockDivisors(const Expr &e, const std::string &var, std::set<int64_t> &out) {
  if (e->kind == kir::ExprKind::Op && (e->op == OpKind::Div || e->op == OpKind::Mod) &&
      e->args[0]->kind == kir::ExprKind::Var && e->args[0]->name == var &&
      e->args[1]->kind == kir::ExprKind::IntImm && e->args[1]->intValue > 1) {
    out.insert(e->args[1]->intValue);
    return;
  }
  for (const Expr &a : e->args)
    blockDivisors(a, var, out);
}

/// The rewrite (kir::rewrite) of loop variable `var` as q * d + r (0 <= r < d): var / d is q,
/// var % d is r, and any other use of var is q * d + r.
std::function<Expr(const Expr &)> splitVar(const std::string &var, int64_t d, const Expr &q,
                                           const Expr &r) {
  auto isVar = [var](const Expr &x) { return x->kind == kir::ExprKind::Var && x->name == var; };
  return [=](const Expr &x) -> Expr {
    if (isVar(x))
      return kir::add(kir::mul(q, imm(d)), r);
    if (x->kind == kir::ExprKind::Op && (x->op == OpKind::Div || x->op == OpKind::Mod) &&
        isVar(x->args[0]) && kir::isIntImm(x->args[1], d))
      return x->op == OpKind::Div ? q : r;
    return nullptr;
  };
}

/// Whether value `e` computes a transcendental function (exp, erf, tanh, sigmoid, pow, log,
/// or a math library call): tens of vector instructions per element, which a permutation's
/// tiles would leave scalar.
bool transcendental(const Expr &e) {
  if (e->kind == kir::ExprKind::Call)
    return true;
  if (e->kind == kir::ExprKind::Op)
    switch (e->op) {
    case OpKind::Exp:
    case OpKind::Erf:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Pow:
    case OpKind::Log:
      return true;
    default:
      break;
    }
  for (const Expr &x : e->args)
    if (transcendental(x))
      return true;
  return false;
}

/// The ranges of a piece's loops, cut where the index compares of its statements `body` are
/// decided (IndexRanges' decidingCut; up to kMaxParts parts), then, in a large piece, where a
/// division of the contiguous loop changes its quotient (dividingCut; up to
/// kMaxDivisionParts); the whole ranges alone when no cut applies (or a statement has a body
/// of its own, which the copies of partNest would share).
std::vector<VarRanges> cutRanges(const std::vector<Stmt> &body,
                                 const std::vector<std::string> &loops, const Extents &ext) {
  constexpr size_t kMaxParts = 8, kMaxDivisionParts = 24;
  constexpr int64_t kMinDivisionCutElements = int64_t(1) << 18;
  VarRanges whole;
  for (size_t d = 0; d < loops.size(); ++d)
    whole[loops[d]] = {0, ext[d] - 1};
  std::vector<VarRanges> parts{whole};
  for (const Stmt &st : body)
    if (!st->body.empty())
      return parts;
  for (size_t i = 0; i < parts.size() && parts.size() < kMaxDivisionParts;) {
    std::optional<std::pair<std::string, int64_t>> cut;
    for (const Stmt &st : body)
      for (const Expr &e : {st->index, st->value})
        if (!cut && e && parts.size() < kMaxParts)
          cut = decidingCut(e, loops, parts[i]);
    // Then a division of the output's contiguous loop (the last) with others, as a blocked
    // channel at an offset that is not a whole block (YOLO's decode reads channel 85 a + 4 + c
    // of an NCHWc16 result): its ranges cut into runs within one block each. Only for a
    // piece of 2^18 elements or more: each part is a nest that LLVM compiles (and fully
    // unrolls where its loops are short) on its own, which costs more compile time than a
    // smaller piece's run saves (YOLO's decode heads at 20 x 20 and 10 x 10 did).
    for (const Stmt &st : body)
      for (const Expr &e : {st->index, st->value})
        if (!cut && e && parts.size() < kMaxDivisionParts &&
            numElementsOf(ext) >= kMinDivisionCutElements)
          cut = dividingCut(e, loops.back(), parts[i]);
    if (!cut) {
      ++i;
      continue;
    }
    VarRanges upper = parts[i];
    parts[i][cut->first].second = cut->second - 1;
    upper[cut->first].first = cut->second;
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1, upper);
  }
  return parts;
}

/// One part of a cut nest: its loops (renamed with `tag`, each from 0), their extents, and a
/// copy of `body` with every loop variable v replaced by v' + the part's first v, its locals
/// renamed with `tag`, and its index math simplified over the part's ranges.
struct PartNest {
  std::vector<std::string> loops;
  Extents ext;
  std::vector<Stmt> body;
};

PartNest partNest(const std::vector<Stmt> &body, const std::vector<std::string> &loops,
                  const VarRanges &ranges, const std::string &tag) {
  PartNest n;
  std::map<std::string, Expr> subst;
  VarRanges local;
  for (const std::string &l : loops) {
    auto [lo, hi] = ranges.at(l);
    std::string name = l + tag;
    n.loops.push_back(name);
    n.ext.push_back(hi - lo + 1);
    subst[l] = kir::add(kir::var(name), imm(lo));
    local[name] = {0, hi - lo};
  }
  for (const Stmt &st : body)
    if (st->kind == kir::StmtKind::Decl)
      subst[st->name] = kir::var(st->name + tag, st->type);
  auto replace = [&](const Expr &x) -> Expr {
    if (x->kind != kir::ExprKind::Var)
      return nullptr;
    auto it = subst.find(x->name);
    return it == subst.end() ? nullptr : it->second;
  };
  for (const Stmt &st : body) {
    Stmt c = std::make_shared<kir::StmtNode>(*st);
    if (c->kind == kir::StmtKind::Decl)
      c->name += tag;
    kir::rewriteStmt(c, replace);
    for (Expr *e : {&c->index, &c->value})
      if (*e)
        *e = simplifyIndexMath(*e, local);
    n.body.push_back(c);
  }
  return n;
}

/// The schedule of a permutation-like nest whose elements cost more than their movement: the
/// loop along which input `strides` are 1 goes innermost and takes the vector lanes (loads and
/// the work contiguous, the stores strided); the first other loop of 2+ iterations runs in
/// parallel. Empty when no loop reads the input contiguously.
kir::Schedule alongInputSchedule(const std::vector<std::string> &loops, const Extents &ext,
                                 const std::vector<int64_t> &strides) {
  size_t q = loops.size();
  for (size_t i = 0; i < loops.size(); ++i)
    if (strides[i] == 1 && ext[i] >= 4)
      q = i;
  if (q == loops.size())
    return {};
  std::vector<std::string> order;
  for (size_t i = 0; i < loops.size(); ++i)
    if (i != q)
      order.push_back(loops[i]);
  order.push_back(loops[q]);
  kir::Schedule s;
  s.steps.push_back({kir::ScheduleStep::Reorder, "", 0, order});
  s.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, order});
  s.steps.push_back({kir::ScheduleStep::Vectorize, loops[q], 0, {}});
  if (numElementsOf(ext) >= 65536)
    for (size_t i = 0; i < loops.size(); ++i)
      if (i != q && ext[i] >= 2) {
        s.steps.push_back({kir::ScheduleStep::Parallel, loops[i], 0, {}});
        break;
      }
  return s;
}

} // namespace

bool isViewGroup(const LoweringUnit &u) {
  for (const Node *m : u.members)
    if (isFusibleView(*m) && !isFusibleElementwise(*m))
      return !u.anchor && !u.softmax;
  return false;
}

Expected<std::vector<kir::Kernel>> lowerViewGroup(const LoweringUnit &u,
                                                  const std::string &prefix) {
  const Value *res = u.node->result();
  Extents oe = extentsOf(res);
  kir::Kernel k;
  k.name = prefix;
  std::vector<Extents> inExt;
  for (size_t i = 0; i < u.operands.size(); ++i) {
    const Value *v = u.operands[i];
    inExt.push_back(extentsOf(v));
    k.buffers.push_back({"in" + std::to_string(i), movedType(v->dtype()),
                         numElementsOf(inExt.back()), kir::BufferRole::Operand,
                         static_cast<int>(i), /*written=*/false});
  }
  int ob = static_cast<int>(k.buffers.size());
  k.buffers.push_back({"out0", movedType(res->dtype()), numElementsOf(oe),
                       kir::BufferRole::Result, 0, /*written=*/true});
  if (numElementsOf(oe) == 0)
    return std::vector<kir::Kernel>{};
  // Uses of each member's result inside the group (a value read twice gets a local).
  std::set<const Node *> members(u.members.begin(), u.members.end());
  std::map<const Value *, int> uses;
  for (const Node *m : u.members)
    for (const Value *o : m->operands())
      if (o && o->producer() && members.count(o->producer()))
        ++uses[o];
  // One-element inputs are read once, before the loops.
  std::vector<Stmt> hoisted;
  std::map<size_t, Expr> scalars;
  // The largest input: its loads choose the schedule.
  int64_t biggest = -1, biggestSize = 0;
  for (size_t i = 0; i < u.operands.size(); ++i)
    if (numElementsOf(inExt[i]) > biggestSize) {
      biggestSize = numElementsOf(inExt[i]);
      biggest = static_cast<int64_t>(i);
    }
  auto leaf = [&](size_t in, const Coords &c) -> Expr {
    const kir::BufferDecl &bd = k.buffers[in];
    if (numElementsOf(inExt[in]) == 1) {
      auto it = scalars.find(in);
      if (it != scalars.end())
        return it->second;
      std::string name = "vs" + std::to_string(in);
      hoisted.push_back(kir::decl(name, bd.dtype, kir::load(int(in), bd.dtype, imm(0))));
      return scalars[in] = kir::var(name, bd.dtype);
    }
    return kir::load(static_cast<int>(in), bd.dtype, flatIndex(c, stridesOf(inExt[in])));
  };

  // One nest per piece: the root's extents, or each operand of a root concat.
  // A piece: a value written at an offset into the root's result. A root concat's operands
  // are pieces, and so are the operands of a member concat among them (nested concats: a
  // gradient's concat of steps, each a concat of gates), so no select picks among sources.
  struct Piece {
    const Value *value;
    Extents ext;
    std::vector<int64_t> offset; ///< Per result dim.
  };
  std::vector<Piece> pieces;
  std::function<Error(const Value *, std::vector<int64_t>)> addPieces =
      [&](const Value *v, std::vector<int64_t> offset) -> Error {
    Extents e = extentsOf(v);
    const Node *p = v->producer();
    bool nested = p && p->kind() == OpKind::Concat && (p == u.node || members.count(p));
    if (!nested) {
      if (numElementsOf(e) > 0)
        pieces.push_back({v, e, offset});
      return Error::success();
    }
    NNC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(p->getInt("axis"), static_cast<int64_t>(e.size()), *p));
    for (const Value *o : p->operands()) {
      NNC_TRY(addPieces(o, offset));
      offset[axis] += extentsOf(o)[axis];
    }
    return Error::success();
  };
  if (u.node->kind() == OpKind::Concat) {
    NNC_TRY(addPieces(res, std::vector<int64_t>(oe.size(), 0)));
  } else {
    pieces.push_back({res, oe, std::vector<int64_t>(oe.size(), 0)});
  }
  std::vector<Stmt> nests;
  for (size_t pi = 0; pi < pieces.size(); ++pi) {
    const Piece &p = pieces[pi];
    std::vector<std::string> loops;
    Coords c;
    LoopExtents env;
    for (size_t d = 0; d < p.ext.size(); ++d) {
      loops.push_back("p" + std::to_string(pi) + "_i" + std::to_string(d));
      c.push_back(kir::var(loops.back()));
      env[loops.back()] = p.ext[d];
    }
    ViewComposer comp(u, uses, "v" + std::to_string(pi) + "_", leaf, env);
    NNC_ASSIGN_OR_RETURN(Expr value, comp.valueAt(p.value, c));
    Coords dst = c;
    for (size_t d = 0; d < dst.size(); ++d)
      dst[d] = kir::add(c[d], imm(p.offset[d]));
    std::vector<Stmt> body = comp.decls();
    body.push_back(kir::store(ob, flatIndex(dst, stridesOf(oe)), value));
    // A concat that picks its source by an index compare (a select per element) runs as one
    // nest per range of a loop where the compare is decided (IndexRanges: the cut), each
    // with the other source's loads gone and its clamps and divisions simplified away: a
    // concat of a blocked and a plain input into a blocked result (UNet's skip connections)
    // copies the first lane to lane and transposes the second in tiles, instead of one nest
    // whose select and clamps kept the lane loop outermost.
    std::vector<VarRanges> parts = cutRanges(body, loops, p.ext);
    auto emit = [&](std::vector<std::string> loops, Extents ext, std::vector<Stmt> body, bool cut) {
      Expr value;
      // A loop whose variable the index math divides by one d, as var / d and var % d (a
      // blocked layout's channel: from_nchwc, fused with a permute or not), becomes two loops,
      // var / d and var % d, over which the index math is affine: the schedule below then sees
      // the contiguous runs of d (ConvNeXt's NCHWc16 -> NHWC permute had its channel loop
      // outermost for the division, storing 16-element runs 384 floats apart).
      for (size_t d = 0; d < loops.size(); ++d) {
        std::set<int64_t> ds;
        for (const Stmt &st : body)
          for (const Expr &e : {st->index, st->value})
            if (e)
              blockDivisors(e, loops[d], ds);
        if (ds.size() != 1 || ext[d] <= *ds.begin() || ext[d] % *ds.begin() != 0)
          continue;
        int64_t dv = *ds.begin();
        std::string qn = loops[d] + "q", rn = loops[d] + "r";
        for (const Stmt &st : body)
          kir::rewriteStmt(st, splitVar(loops[d], dv, kir::var(qn), kir::var(rn)));
        loops[d] = qn;
        loops.insert(loops.begin() + static_cast<std::ptrdiff_t>(d) + 1, rn);
        env[qn] = ext[d] / dv;
        env[rn] = dv;
        ext[d] /= dv;
        ext.insert(ext.begin() + static_cast<std::ptrdiff_t>(d) + 1, dv);
        ++d;
      }
      value = body.back()->value;
      Stmt s = body.size() == 1 ? body[0] : kir::block(body);
      for (size_t d = ext.size(); d-- > 0;)
        s = kir::forLoop(loops[d], imm(ext[d]), s);
      nests.push_back(s);
      // Loops whose variables feed selects, divisions or clamps go outside the others, so the
      // index math of each of their iterations is computed once (LLVM hoists it) and the inner
      // loops only stride; else read along the loop that walks the largest input contiguously.
      kir::Schedule sched = defaultSchedule(loops, ext);
      std::set<std::string> outer;
      nonAffineVars(value, false, outer);
      std::vector<std::string> order;
      for (const std::string &l : loops)
        if (outer.count(l))
          order.push_back(l);
      size_t numOuter = order.size();
      for (const std::string &l : loops)
        if (!outer.count(l))
          order.push_back(l);
      // The largest input's loads; in a part of a cut concat, which reads one of its
      // sources, the largest input the part reads.
      Expr idx = biggest >= 0 ? loadIndexOf(value, static_cast<int>(biggest)) : nullptr;
      for (size_t i = 0, size = 0; !idx && cut && i < u.operands.size(); ++i)
        if (size_t(numElementsOf(inExt[i])) > size)
          if (Expr li = loadIndexOf(value, static_cast<int>(i)); li) {
            idx = li;
            size = size_t(numElementsOf(inExt[i]));
          }
      if (numOuter > 0 && numOuter < loops.size() && order != loops) {
        sched = kir::Schedule{};
        sched.steps.push_back({kir::ScheduleStep::Reorder, "", 0, order});
        // Each element is stored once: on an OpenCL device the loops are one NDRange.
        sched.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, order});
        if (numElementsOf(ext) >= 65536)
          for (const std::string &l : order)
            if (env[l] >= 2) {
              sched.steps.push_back({kir::ScheduleStep::Parallel, l, 0, {}});
              break;
            }
      } else if (idx && ext.size() >= 2) {
        std::vector<int64_t> strides;
        bool known = true;
        for (const std::string &l : loops) {
          double s = coefficientOf(idx, l);
          known = known && std::isfinite(s);
          strides.push_back(known ? static_cast<int64_t>(std::llround(std::fabs(s))) : 0);
        }
        if (known && strides.back() != 1) {
          // A GELU after from_nchwc (MaxViT's MBConv): the permutation's 8 x 8 tiles computed
          // erf scalar, one lane at a time; along the input's blocked channel, 16 lanes.
          kir::Schedule along;
          if (transcendental(value))
            along = alongInputSchedule(loops, ext, strides);
          sched = along.steps.empty() ? permuteSchedule(loops, ext, strides) : along;
        }
      }
      for (const kir::ScheduleStep &st : sched.steps)
        k.schedule.steps.push_back(st);
    };
    if (parts.size() == 1) {
      emit(loops, p.ext, body, /*cut=*/false);
      continue;
    }
    for (size_t j = 0; j < parts.size(); ++j) {
      PartNest part = partNest(body, loops, parts[j], "s" + std::to_string(j));
      for (size_t d = 0; d < part.loops.size(); ++d)
        env[part.loops[d]] = part.ext[d];
      emit(part.loops, part.ext, part.body, /*cut=*/true);
    }
  }
  Stmt body = nests.size() == 1 ? nests[0] : kir::block(nests);
  if (!hoisted.empty()) {
    hoisted.push_back(body);
    body = kir::block(hoisted);
  }
  k.body = body;
  return std::vector<kir::Kernel>{std::move(k)};
}

} // namespace nnc::lower

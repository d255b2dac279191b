// Lowerers of the shape and data-movement ops: copies (reshape and friends, bitcast),
// permutations (transpose, depth/space), broadcasts, concat/split, slice, pad, tile and the
// generators (range, constant_of_shape, one_hot, eye_like, trilu, nonzero). Gathers and
// scatters, whose indices are data, are in Indexing.cpp.
//
// Runtime slice starts and pads are read like the interpreter reads them (negative values
// count from the back) and clamped as it clamps them, so no access ever leaves its buffer.
#include <algorithm>

#include "LowerUtil.h"
#include "Lowerers.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace {

using Kernels = Expected<std::vector<kir::Kernel>>;
using kir::Expr;
using kir::Stmt;
using Idx = std::vector<Expr>;

Expr imm(int64_t v) { return kir::intImm(v); }
Expr eq(Expr a, Expr b) { return kir::op(OpKind::Equal, {std::move(a), std::move(b)}); }
Expr le(Expr a, Expr b) { return kir::ge(std::move(b), std::move(a)); }
Expr gt(Expr a, Expr b) { return kir::lt(std::move(b), std::move(a)); }
Expr clampExpr(Expr v, int64_t lo, int64_t hi) {
  return kir::min(kir::max(std::move(v), imm(lo)), imm(hi));
}
/// Python's % (sign of the divisor) on i64.
Expr pyMod(Expr a, Expr b) { return kir::op(OpKind::Mod, {std::move(a), std::move(b)}); }

/// The values of operand i when it is a constant, else nullopt.
std::optional<std::vector<int64_t>> constInts(const Node &node, size_t i) {
  const Tensor *t = node.constantOperand(i);
  if (!t)
    return std::nullopt;
  return t->toInt64Vector();
}

/// The scalar `value` (one element of `t`) as a kernel constant of movedType(t).
Expr tensorElement(const Tensor &t, int64_t i) {
  DType d = t.dtype();
  if (isStorageOnly(d))
    return kir::intImm(t.data<uint8_t>()[i], DType::U8);
  if (isFloat(d))
    return kir::constant(t.elementAsDouble(i), d);
  if (d == DType::Bool)
    return kir::constant(t.elementAsInt(i) != 0 ? 1 : 0, DType::Bool);
  return kir::intImm(t.elementAsInt(i), d);
}

// ---- Copies and permutations ----------------------------------------------------------------

/// out0[i] = in0[i]: reshape, flatten, squeeze and unsqueeze (the runtime may alias them).
Kernels lowerCopy(const Node &node, const std::string &prefix) {
  KernelBuilder b(node, prefix);
  int in = b.operand(0), out = b.result(0);
  Extents n{numElementsOf(extentsOf(node.result(0)))};
  if (n[0] != numElementsOf(extentsOf(node.operand(0))))
    return node.error("result {} and operand {} differ in size", node.result(0)->type().str(),
                      node.operand(0)->type().str());
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      n, [&](const Idx &i) { return b.store(out, i[0], b.load(in, i[0])); }, &loops);
  return std::vector<kir::Kernel>{b.finish(body, defaultSchedule(loops, n))};
}

/// bitcast: the operand's bytes copied, both buffers seen as the unsigned integer of the
/// element size (bitsType); a bool result from another dtype holds min(bits, 1). Where no
/// graph output is in between, the runtime binds the result to the operand's storage instead
/// (isStorageView).
Kernels lowerBitCast(const Node &node, const std::string &prefix) {
  KernelBuilder b(node, prefix);
  DType from = node.operand(0)->dtype(), to = node.result(0)->dtype(), bits = bitsType(to);
  int64_t n = numElementsOf(extentsOf(node.result(0)));
  if (bitsType(from) != bits || n != numElementsOf(extentsOf(node.operand(0))))
    return node.error("cannot reinterpret {} as {}", node.operand(0)->type().str(),
                      node.result(0)->type().str());
  int in = b.declare({"in0", bits, n, kir::BufferRole::Operand, 0, /*written=*/false});
  int out = b.declare({"out0", bits, n, kir::BufferRole::Result, 0, /*written=*/true});
  bool toBool = to == DType::Bool && from != DType::Bool;
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      {n},
      [&](const Idx &i) {
        Expr v = b.load(in, i[0]);
        if (toBool)
          v = kir::op(OpKind::Min, {v, kir::intImm(1, bits)});
        return b.store(out, i[0], v);
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(body, defaultSchedule(loops, {n}))};
}

} // namespace

std::vector<kir::Kernel> permuteKernel(const Node &node, const std::string &prefix,
                                       const Extents &view, const std::vector<int64_t> &perm) {
  KernelBuilder b(node, prefix);
  int in = b.operand(0), out = b.result(0);
  std::vector<int64_t> vs = stridesOf(view), inStrides;
  Extents mid;
  for (int64_t p : perm) {
    mid.push_back(view[p]);
    inStrides.push_back(vs[p]);
  }
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      mid,
      [&](const Idx &i) {
        return b.store(out, flatIndex(i, stridesOf(mid)), b.load(in, flatIndex(i, inStrides)));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(body, permuteSchedule(loops, mid, inStrides))};
}

namespace {

Kernels lowerShapeOf(const Node &node, const std::string &prefix) {
  Extents e = extentsOf(node.operand(0));
  int64_t rank = static_cast<int64_t>(e.size());
  int64_t start = node.getInt("start", 0), end = node.getInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  std::vector<Stmt> stores;
  for (int64_t i = start; i < end; ++i)
    stores.push_back(b.store(out, imm(i - start), imm(e[i])));
  return std::vector<kir::Kernel>{b.finish(kir::block(stores))};
}

Kernels lowerTranspose(const Node &node, const std::string &prefix) {
  Extents e = extentsOf(node.operand(0));
  int64_t r = static_cast<int64_t>(e.size());
  std::vector<int64_t> perm = node.getInts("perm", {});
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  std::vector<bool> seen(r, false);
  if (static_cast<int64_t>(perm.size()) != r)
    return node.error("perm does not match rank {}", r);
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      return node.error("perm is not a permutation");
    seen[p] = true;
  }
  return permuteKernel(node, prefix, e, perm);
}

Kernels lowerDepthToSpace(const Node &node, const std::string &prefix) {
  Extents x = extentsOf(node.operand(0));
  int64_t bs = node.getInt("blocksize");
  if (x.size() != 4 || bs < 1 || x[1] % (bs * bs) != 0)
    return node.error("needs NCHW with channels divisible by blocksize^2");
  int64_t n = x[0], c2 = x[1] / (bs * bs), h = x[2], w = x[3];
  if (node.getString("mode") == "CRD")
    return permuteKernel(node, prefix, {n, c2, bs, bs, h, w}, {0, 1, 4, 2, 5, 3});
  return permuteKernel(node, prefix, {n, bs, bs, c2, h, w}, {0, 3, 4, 1, 5, 2});
}

Kernels lowerSpaceToDepth(const Node &node, const std::string &prefix) {
  Extents x = extentsOf(node.operand(0));
  int64_t bs = node.getInt("blocksize");
  if (x.size() != 4 || bs < 1 || x[2] % bs != 0 || x[3] % bs != 0)
    return node.error("needs NCHW with spatial dims divisible by blocksize");
  return permuteKernel(node, prefix, {x[0], x[1], x[2] / bs, bs, x[3] / bs, bs},
                       {0, 3, 5, 1, 2, 4});
}

/// out = operand 0 numpy-broadcast to the result's extents.
Kernels lowerExpand(const Node &node, const std::string &prefix) {
  KernelBuilder b(node, prefix);
  Extents xe = extentsOf(node.operand(0)), oe = extentsOf(node.result(0));
  if (xe.size() > oe.size())
    return node.error("result rank is below the operand's");
  int in = b.operand(0), out = b.result(0);
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      oe,
      [&](const Idx &i) {
        return b.store(out, flatIndex(i, stridesOf(oe)), b.load(in, broadcastIndex(i, xe)));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(body, defaultSchedule(loops, oe))};
}

Kernels lowerTile(const Node &node, const std::string &prefix) {
  KernelBuilder b(node, prefix);
  Extents xe = extentsOf(node.operand(0)), oe = extentsOf(node.result(0));
  if (xe.size() != oe.size())
    return node.error("result rank differs from the operand's");
  int in = b.operand(0), out = b.result(0);
  std::vector<int64_t> xs = stridesOf(xe);
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      oe,
      [&](const Idx &i) {
        Expr src = imm(0);
        for (size_t d = 0; d < xe.size(); ++d) {
          if (xe[d] == 0)
            continue; // the output is empty too
          Expr c = xe[d] == 1 ? imm(0) : oe[d] == xe[d] ? i[d] : kir::mod(i[d], imm(xe[d]));
          src = kir::add(src, kir::mul(c, imm(xs[d])));
        }
        return b.store(out, flatIndex(i, stridesOf(oe)), b.load(in, src));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(body, defaultSchedule(loops, oe))};
}

// ---- Concat and split -----------------------------------------------------------------------

Kernels lowerConcat(const Node &node, const std::string &prefix) {
  Extents oe = extentsOf(node.result(0));
  int64_t r = static_cast<int64_t>(oe.size());
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= oe[d];
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= oe[d];
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  int64_t outRow = oe[axis] * inner, at = 0;
  std::vector<Stmt> nests;
  kir::Schedule sched;
  for (size_t k = 0; k < node.numOperands(); ++k) {
    Extents ie = extentsOf(node.operand(k));
    if (static_cast<int64_t>(ie.size()) != r)
      return node.error("operand {} has rank {}, the result {}", k, ie.size(), r);
    int64_t row = ie[axis] * inner;
    if (row == 0 || outer == 0)
      continue;
    int in = b.operand(k);
    Extents ext{outer, row};
    std::vector<std::string> loops;
    nests.push_back(b.loopNest(
        ext,
        [&](const Idx &i) {
          Expr dst = kir::add(kir::add(kir::mul(i[0], imm(outRow)), imm(at)), i[1]);
          return b.store(out, dst, b.load(in, kir::add(kir::mul(i[0], imm(row)), i[1])));
        },
        &loops));
    for (auto &s : defaultSchedule(loops, ext).steps)
      sched.steps.push_back(s);
    at += row;
  }
  if (at != outRow && outer != 0)
    return node.error("operands do not add up to the result along axis {}", axis);
  return std::vector<kir::Kernel>{b.finish(kir::block(nests), sched)};
}

Kernels lowerSplit(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  int64_t r = static_cast<int64_t>(xe.size());
  if (r == 0)
    return node.error("cannot split a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= xe[d];
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= xe[d];
  KernelBuilder b(node, prefix);
  int in = b.operand(0);
  int64_t inRow = xe[axis] * inner, at = 0;
  std::vector<Stmt> nests;
  kir::Schedule sched;
  for (size_t k = 0; k < node.numResults(); ++k) {
    Extents re = extentsOf(node.result(k));
    int64_t row = re[axis] * inner;
    if (row == 0 || outer == 0)
      continue;
    int out = b.result(k);
    Extents ext{outer, row};
    std::vector<std::string> loops;
    nests.push_back(b.loopNest(
        ext,
        [&](const Idx &i) {
          Expr src = kir::add(kir::add(kir::mul(i[0], imm(inRow)), imm(at)), i[1]);
          return b.store(out, kir::add(kir::mul(i[0], imm(row)), i[1]), b.load(in, src));
        },
        &loops));
    for (auto &s : defaultSchedule(loops, ext).steps)
      sched.steps.push_back(s);
    at += row;
  }
  if (at != inRow && outer != 0)
    return node.error("results do not add up to the operand along axis {}", axis);
  return std::vector<kir::Kernel>{b.finish(kir::block(nests), sched)};
}

// ---- Slice and pad --------------------------------------------------------------------------

Kernels lowerSlice(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), oe = extentsOf(node.result(0));
  int64_t r = static_cast<int64_t>(xe.size());
  if (static_cast<int64_t>(oe.size()) != r)
    return node.error("result rank differs from the operand's");
  Extents se = extentsOf(node.operand(1));
  if (se.size() != 1)
    return node.error("starts must be a vector");
  int64_t n = se[0];
  bool hasAxes = node.operand(3) != nullptr, hasSteps = node.operand(4) != nullptr;
  std::optional<std::vector<int64_t>> starts = constInts(node, 1);
  std::optional<std::vector<int64_t>> axes = hasAxes ? constInts(node, 3) : std::vector<int64_t>();
  std::optional<std::vector<int64_t>> steps =
      hasSteps ? constInts(node, 4) : std::vector<int64_t>(n, 1);
  if (axes && !hasAxes)
    for (int64_t i = 0; i < n; ++i)
      axes->push_back(i);
  if ((starts && static_cast<int64_t>(starts->size()) != n) ||
      (axes && static_cast<int64_t>(axes->size()) != n) ||
      (steps && static_cast<int64_t>(steps->size()) != n))
    return node.error("starts, axes and steps have different lengths");
  if (axes) {
    NNC_ASSIGN_OR_RETURN(*axes, normalizeAxes(*axes, r, node));
  }

  KernelBuilder b(node, prefix);
  int in = b.operand(0), out = b.result(0);
  std::vector<int64_t> xs = stridesOf(xe);
  std::vector<Expr> first(r), step(r);
  std::vector<Stmt> prologue;
  bool dynamic = !(starts && axes && steps);
  if (!dynamic) {
    std::vector<int64_t> f(r, 0), s(r, 1);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ax = (*axes)[i], dim = xe[ax], st = (*starts)[i], sp = (*steps)[i];
      if (sp == 0)
        return node.error("steps must not be 0");
      if (st < 0)
        st += dim;
      st = sp > 0 ? std::clamp<int64_t>(st, 0, dim) : std::clamp<int64_t>(st, 0, dim - 1);
      f[ax] = st;
      s[ax] = sp;
    }
    for (int64_t d = 0; d < r; ++d) {
      first[d] = imm(f[d]);
      step[d] = imm(s[d]);
    }
  } else {
    // Computed once before the loops, with the interpreter's clamping.
    for (int64_t d = 0; d < r; ++d) {
      std::string st = b.freshName("start"), sp = b.freshName("step");
      prologue.push_back(kir::decl(st, DType::I64, imm(0)));
      prologue.push_back(kir::decl(sp, DType::I64, imm(1)));
      first[d] = kir::var(st);
      step[d] = kir::var(sp);
    }
    for (int64_t i = 0; i < n; ++i) {
      Expr raw = starts ? imm((*starts)[i]) : loadInt(b, 1, imm(i));
      Expr sp = steps ? imm((*steps)[i]) : loadInt(b, 4, imm(i));
      Expr ax = axes ? imm((*axes)[i]) : loadInt(b, 3, imm(i));
      for (int64_t d = 0; d < r; ++d) {
        if (axes && (*axes)[i] != d)
          continue;
        int64_t dim = xe[d];
        Expr s = kir::select(kir::lt(raw, imm(0)), kir::add(raw, imm(dim)), raw);
        Expr v = kir::select(gt(sp, imm(0)), clampExpr(s, 0, dim),
                             clampExpr(s, 0, std::max<int64_t>(dim - 1, 0)));
        Stmt set = kir::block({kir::assign(first[d]->name, v), kir::assign(step[d]->name, sp)});
        prologue.push_back(axes ? set
                                : kir::ifThen(kir::op(OpKind::Or, {eq(ax, imm(d)),
                                                                   eq(ax, imm(d - r))}),
                                              set));
      }
    }
  }
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      oe,
      [&](const Idx &i) {
        Expr src = imm(0);
        for (int64_t d = 0; d < r; ++d) {
          Expr c = kir::add(first[d], kir::mul(i[d], step[d]));
          if (dynamic)
            c = clampExpr(c, 0, std::max<int64_t>(xe[d] - 1, 0));
          src = kir::add(src, kir::mul(c, imm(xs[d])));
        }
        return b.store(out, flatIndex(i, stridesOf(oe)), b.load(in, src));
      },
      &loops);
  if (!dynamic)
    return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe))};
  prologue.push_back(nest);
  return std::vector<kir::Kernel>{b.finish(kir::block(prologue))};
}

Kernels lowerPad(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), oe = extentsOf(node.result(0));
  int64_t r = static_cast<int64_t>(xe.size());
  const std::string &mode = node.getString("mode");
  bool constant = mode == "constant";
  if (!constant && mode != "reflect" && mode != "edge" && mode != "wrap")
    return node.error("unknown mode '{}'", mode);
  if (static_cast<int64_t>(oe.size()) != r)
    return node.error("result rank differs from the operand's");
  std::optional<std::vector<int64_t>> pads = constInts(node, 1);
  if (pads && static_cast<int64_t>(pads->size()) != 2 * r)
    return node.error("pads has {} entries for rank {}", pads->size(), r);
  bool dynamic = !pads;

  KernelBuilder b(node, prefix);
  int out = b.result(0);
  DType t = b.bufferType(out);
  // Per dim: the cropped range [cs, cs + cn) of the operand, placed after pb fill elements.
  std::vector<Expr> cs(r), cn(r), pb(r);
  std::vector<Stmt> prologue;
  for (int64_t d = 0; d < r; ++d) {
    if (!dynamic) {
      int64_t bg = (*pads)[d], en = (*pads)[d + r];
      int64_t c = std::max<int64_t>(-bg, 0), len = xe[d] - c - std::max<int64_t>(-en, 0);
      if (xe[d] + bg + en != oe[d])
        return node.error("pads do not give the result's extents");
      if (len <= 0 && !constant && oe[d] > 0)
        return node.error("mode {} cannot pad axis {}: nothing is left of it after cropping",
                          mode, d);
      cs[d] = imm(c);
      cn[d] = imm(len);
      pb[d] = imm(std::max<int64_t>(bg, 0));
      continue;
    }
    Expr bg = loadInt(b, 1, imm(d)), en = loadInt(b, 1, imm(d + r));
    Expr c = kir::max(kir::sub(imm(0), bg), imm(0));
    Expr len = kir::sub(kir::sub(imm(xe[d]), c), kir::max(kir::sub(imm(0), en), imm(0)));
    std::string csN = b.freshName("crop"), cnN = b.freshName("len"), pbN = b.freshName("pad");
    prologue.push_back(kir::decl(csN, DType::I64, c));
    prologue.push_back(kir::decl(cnN, DType::I64, len));
    prologue.push_back(kir::decl(pbN, DType::I64, kir::max(bg, imm(0))));
    cs[d] = kir::var(csN);
    cn[d] = kir::var(cnN);
    pb[d] = kir::var(pbN);
  }
  if (dynamic && !constant && numElementsOf(oe) > 0 && numElementsOf(xe) == 0)
    return node.error("mode {} cannot pad an empty operand", mode);
  Expr fill = zeroOf(t);
  if (node.operand(2) && numElementsOf(extentsOf(node.operand(2))) > 0) {
    int fb = b.operand(2);
    if (b.bufferType(fb) != t)
      return node.error("the pad value's dtype differs from the data's");
    fill = b.load(fb, imm(0));
  }
  int in = numElementsOf(xe) > 0 ? b.operand(0) : -1;
  std::vector<int64_t> xs = stridesOf(xe);
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      oe,
      [&](const Idx &i) {
        Expr dst = flatIndex(i, stridesOf(oe));
        if (in < 0)
          return b.store(out, dst, fill);
        std::vector<Expr> inside;
        Expr src = imm(0);
        for (int64_t d = 0; d < r; ++d) {
          Expr j = kir::sub(i[d], pb[d]);
          bool trivial = !dynamic && isIntImm(pb[d], 0) && isIntImm(cn[d], oe[d]);
          if (constant) {
            if (!trivial)
              inside.push_back(kir::land(kir::ge(j, imm(0)), kir::lt(j, cn[d])));
          } else if (!trivial) {
            Expr len1 = kir::max(cn[d], imm(1));
            if (mode == "edge") {
              j = kir::min(kir::max(j, imm(0)), kir::sub(len1, imm(1)));
            } else if (mode == "wrap") {
              j = pyMod(j, len1);
            } else { // reflect: period 2(cn-1), like numpy
              Expr p = kir::max(kir::mul(kir::sub(cn[d], imm(1)), imm(2)), imm(1));
              Expr m = pyMod(j, p);
              j = kir::select(kir::ge(m, cn[d]), kir::sub(p, m), m);
              j = kir::select(le(cn[d], imm(1)), imm(0), j);
            }
          }
          Expr c = kir::add(cs[d], j);
          if (dynamic)
            c = clampExpr(c, 0, std::max<int64_t>(xe[d] - 1, 0));
          src = kir::add(src, kir::mul(c, imm(xs[d])));
        }
        Stmt copy = b.store(out, dst, b.load(in, src));
        if (inside.empty())
          return copy;
        return kir::ifThen(andAll(inside), copy, b.store(out, dst, fill));
      },
      &loops);
  if (!dynamic)
    return std::vector<kir::Kernel>{
        b.finish(nest, defaultSchedule(loops, oe, /*vectorize=*/!constant))};
  prologue.push_back(nest);
  return std::vector<kir::Kernel>{b.finish(kir::block(prologue))};
}

// ---- Generators -----------------------------------------------------------------------------

Kernels lowerRange(const Node &node, const std::string &prefix) {
  DType t = node.result(0)->dtype();
  if (!isNumeric(t))
    return node.error("range needs a numeric dtype, got {}", dtypeName(t));
  Extents oe = extentsOf(node.result(0));
  KernelBuilder b(node, prefix);
  int out = b.result(0), s = b.operand(0), dl = b.operand(2);
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      oe,
      [&](const Idx &i) {
        Expr v;
        if (isFloat(t)) {
          // In f64 like the interpreter: start + i * delta, then rounded to t.
          Expr start = kir::cast(b.load(s, imm(0)), DType::F64);
          Expr delta = kir::cast(b.load(dl, imm(0)), DType::F64);
          v = kir::op(OpKind::Add,
                      {start, kir::op(OpKind::Mul, {kir::cast(i[0], DType::F64), delta})});
        } else {
          // Wrapping i64 arithmetic, truncated to t.
          Expr start = loadInt(b, 0, imm(0)), delta = loadInt(b, 2, imm(0));
          v = kir::op(OpKind::Add, {start, kir::op(OpKind::Mul, {i[0], delta})});
        }
        return b.store(out, i[0], t == DType::I64 ? v : kir::cast(v, t));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe, false))};
}

Kernels lowerConstantOfShape(const Node &node, const std::string &prefix) {
  const Tensor &value = node.getTensor("value");
  if (value.isNull() || value.numElements() != 1)
    return node.error("value must hold exactly one element");
  if (value.dtype() != node.result(0)->dtype())
    return node.error("value's dtype differs from the result's");
  Extents n{numElementsOf(extentsOf(node.result(0)))};
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  Expr v = tensorElement(value, 0);
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(n, [&](const Idx &i) { return b.store(out, i[0], v); }, &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, n))};
}

Kernels lowerOneHot(const Node &node, const std::string &prefix) {
  Extents ie = extentsOf(node.operand(0)), oe = extentsOf(node.result(0));
  int64_t r = static_cast<int64_t>(ie.size()), axis = node.getInt("axis");
  if (axis < -(r + 1) || axis > r)
    return node.error("axis {} is out of range for rank {}", axis, r + 1);
  if (axis < 0)
    axis += r + 1;
  if (static_cast<int64_t>(oe.size()) != r + 1)
    return node.error("result rank does not match");
  if (numElementsOf(extentsOf(node.operand(2))) != 2)
    return node.error("values must have 2 elements [off, on]");
  DType it = node.operand(0)->dtype();
  if (!isNumeric(it))
    return node.error("indices must be numeric, got {}", dtypeName(it));
  int64_t depth = oe[axis];
  KernelBuilder b(node, prefix);
  int out = b.result(0), idx = b.operand(0), vals = b.operand(2);
  std::vector<int64_t> is = stridesOf(ie);
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      oe,
      [&](const Idx &i) {
        Idx ii(i);
        ii.erase(ii.begin() + axis);
        Expr v = b.load(idx, flatIndex(ii, is));
        Expr raw, valid;
        if (isFloat(it)) {
          // raw = trunc(v) is in [-depth, depth) iff -depth-1 < v < depth (false for NaN).
          Expr d = kir::cast(v, DType::F64);
          valid = kir::land(gt(d, kir::constant(-static_cast<double>(depth) - 1, DType::F64)),
                            kir::lt(d, kir::constant(static_cast<double>(depth), DType::F64)));
          raw = kir::cast(kir::select(valid, d, kir::constant(0, DType::F64)), DType::I64);
        } else {
          raw = it == DType::I64 ? v : kir::cast(v, DType::I64);
          valid = kir::land(kir::ge(raw, imm(-depth)), kir::lt(raw, imm(depth)));
        }
        Expr w = kir::select(kir::lt(raw, imm(0)), kir::add(raw, imm(depth)), raw);
        Expr hit = kir::land(valid, eq(w, i[axis]));
        return b.store(out, flatIndex(i, stridesOf(oe)),
                       kir::select(hit, b.load(vals, imm(1)), b.load(vals, imm(0))));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe, false))};
}

/// The bits of 1 in dtype t, as a constant of movedType(t).
Expr oneOf(DType t) {
  switch (t) {
  case DType::F8E4M3FN: return kir::intImm(0x38, DType::U8);
  case DType::F8E4M3FNUZ: return kir::intImm(0x40, DType::U8);
  case DType::F8E5M2: return kir::intImm(0x3C, DType::U8);
  case DType::F8E5M2FNUZ: return kir::intImm(0x40, DType::U8);
  case DType::F4E2M1: return kir::intImm(0x2, DType::U8);
  case DType::F8E8M0: return kir::intImm(0x7F, DType::U8);
  case DType::U4:
  case DType::I4:
  case DType::U2:
  case DType::I2: return kir::intImm(1, DType::U8);
  default: return kir::constant(1, t);
  }
}

Kernels lowerEyeLike(const Node &node, const std::string &prefix) {
  Extents oe = extentsOf(node.result(0));
  if (oe.size() != 2)
    return node.error("needs a 2-D operand");
  DType t = node.result(0)->dtype();
  int64_t k = node.getInt("k", 0);
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  Expr one = oneOf(t), zero = zeroOf(movedType(t));
  bool noDiagonal = k >= oe[1] || k <= -oe[0];
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      oe,
      [&](const Idx &i) {
        Expr dst = flatIndex(i, stridesOf(oe));
        if (noDiagonal)
          return b.store(out, dst, zero);
        return b.store(out, dst, kir::select(eq(i[1], kir::add(i[0], imm(k))), one, zero));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe, false))};
}

Kernels lowerTrilu(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  int64_t r = static_cast<int64_t>(xe.size());
  if (r < 2)
    return node.error("needs rank >= 2");
  bool upper = node.getInt("upper") != 0;
  KernelBuilder b(node, prefix);
  int in = b.operand(0), out = b.result(0);
  DType t = b.bufferType(out);
  Expr k = imm(0);
  if (node.operand(1)) {
    if (numElementsOf(extentsOf(node.operand(1))) != 1 || !isInteger(node.operand(1)->dtype()))
      return node.error("k must be an integer scalar");
    std::optional<std::vector<int64_t>> kc = constInts(node, 1);
    k = kc ? imm((*kc)[0]) : loadInt(b, 1, imm(0));
  }
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      xe,
      [&](const Idx &i) {
        Expr diff = kir::sub(i[r - 1], i[r - 2]);
        Expr keep = upper ? kir::ge(diff, k) : le(diff, k);
        Expr at = flatIndex(i, stridesOf(xe));
        return b.store(out, at, kir::select(keep, b.load(in, at), zeroOf(t)));
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, xe, false))};
}

/// True where element `i` of NonZero's operand is not zero. Storage-only formats are bytes:
/// the f8 and f4 formats with a sign bit have a negative zero, f8e8m0 has no zero at all.
Expr isNonZeroAt(KernelBuilder &b, int in, DType t, Expr i) {
  Expr v = b.load(in, std::move(i));
  auto masked = [&](int64_t mask) {
    return kir::op(OpKind::BitAnd, {v, kir::intImm(mask, DType::U8)});
  };
  switch (t) {
  case DType::F8E4M3FN:
  case DType::F8E5M2: v = masked(0x7F); break;
  case DType::F4E2M1: v = masked(0x7); break;
  case DType::F8E8M0: return kir::intImm(1, DType::Bool);
  default: break;
  }
  return kir::op(OpKind::Not, {eq(v, zeroOf(b.bufferType(in)))});
}

/// NonZero: one pass counts the nonzero elements, a second writes their coordinates packed
/// as [rank, count] into a buffer sized for the all-nonzero case; the count is the result's
/// data-dependent extent (role Extent), which the runtime reads after the run.
Kernels lowerNonZero(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  int64_t r = static_cast<int64_t>(xe.size()), n = numElementsOf(xe);
  KernelBuilder b(node, prefix);
  int in = b.operand(0);
  auto [out, extent] = b.dynamicResult(0, r * n);
  DType t = node.operand(0)->dtype();
  std::string count = b.freshName("count"), pos = b.freshName("pos");
  std::string i = b.freshName("i"), j = b.freshName("i");
  Stmt counting = kir::forLoop(
      i, imm(n),
      kir::ifThen(isNonZeroAt(b, in, t, kir::var(i)),
                  kir::assign(count, kir::add(kir::var(count), imm(1)))));
  std::vector<int64_t> strides = stridesOf(xe);
  std::vector<Stmt> coords;
  for (int64_t d = 0; d < r; ++d) {
    Expr coord = kir::mod(kir::div(kir::var(j), imm(strides[d])), imm(xe[d]));
    coords.push_back(
        b.store(out, kir::add(kir::mul(imm(d), kir::var(count)), kir::var(pos)), coord));
  }
  coords.push_back(kir::assign(pos, kir::add(kir::var(pos), imm(1))));
  Stmt filling =
      kir::forLoop(j, imm(n), kir::ifThen(isNonZeroAt(b, in, t, kir::var(j)), kir::block(coords)));
  Stmt body = kir::block({kir::decl(count, DType::I64, imm(0)), counting,
                          b.store(extent, imm(0), kir::var(count)),
                          kir::decl(pos, DType::I64, imm(0)), filling});
  return std::vector<kir::Kernel>{b.finish(body)};
}

} // namespace

namespace {
constexpr OpKind kCopyOps[] = {OpKind::Reshape, OpKind::Flatten, OpKind::Squeeze,
                               OpKind::Unsqueeze};
} // namespace

bool isCopyOp(OpKind k) {
  return std::find(std::begin(kCopyOps), std::end(kCopyOps), k) != std::end(kCopyOps);
}

void registerDataMovementLowerers(LowererTable &t) {
  t[OpKind::ShapeOf] = lowerShapeOf;
  for (OpKind k : kCopyOps)
    t[k] = lowerCopy;
  t[OpKind::BitCast] = lowerBitCast;
  t[OpKind::Transpose] = lowerTranspose;
  t[OpKind::Expand] = lowerExpand;
  t[OpKind::Concat] = lowerConcat;
  t[OpKind::Split] = lowerSplit;
  t[OpKind::Slice] = lowerSlice;
  t[OpKind::Pad] = lowerPad;
  t[OpKind::Tile] = lowerTile;
  t[OpKind::Range] = lowerRange;
  t[OpKind::ConstantOfShape] = lowerConstantOfShape;
  t[OpKind::OneHot] = lowerOneHot;
  t[OpKind::EyeLike] = lowerEyeLike;
  t[OpKind::Trilu] = lowerTrilu;
  t[OpKind::NonZero] = lowerNonZero;
  t[OpKind::DepthToSpace] = lowerDepthToSpace;
  t[OpKind::SpaceToDepth] = lowerSpaceToDepth;
  // constant has no kernel (the runtime keeps constants as weights); nonzero's result shape
  // depends on the data, so it is not lowered.
}

} // namespace nnc::lower

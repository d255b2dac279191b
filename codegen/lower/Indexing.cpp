// Lowerers of the ops that take indices as data: gather, gather_elements, gather_nd,
// scatter_elements and scatter_nd.
//
// An index is read like the interpreter reads it (negative values count from the back). One
// that is out of range is an error on every target, as in the interpreter: the kernel records
// it with a runtime check (KernelBuilder::check) where the index is read, once per index
// element (so the copy loops inside stay vectorizable), and the run then fails with the
// interpreter's message naming the node. The access itself uses the index clamped into its
// axis and a scatter drops the write, so no access leaves its buffer even after a failed
// check. Constant indices all in range need no check and no clamp.
#include <algorithm>
#include <functional>

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

/// True when operand 1 (the indices) is a constant whose every element k lies in
/// [-dimOf(k), dimOf(k)): the kernel reads it without a check.
bool constantInRange(const Node &node, const std::function<int64_t(int64_t)> &dimOf) {
  const Tensor *t = node.constantOperand(1);
  if (!t)
    return false;
  for (int64_t k = 0; k < t->numElements(); ++k) {
    int64_t v = t->elementAsInt(k), dim = dimOf(k);
    if (v < -dim || v >= dim)
      return false;
  }
  return true;
}

/// An index into an axis of extent `dim`, read at run time.
struct RuntimeIndex {
  Expr at;    ///< Where to access: in [0, dim) whenever dim > 0.
  Expr valid; ///< The raw value was in range.
  Stmt check; ///< Records the node's error when it was not (null for a known index).
};

/// Reads index `raw` into an axis of extent `dim`; `stmts` receives a local holding it (the
/// raw value is used several times) and `known` says the index is a constant in range.
RuntimeIndex readIndex(KernelBuilder &b, std::vector<Stmt> &stmts, Expr raw, int64_t dim,
                       bool known) {
  Expr v = b.bind(stmts, "raw", DType::I64, std::move(raw));
  Expr w = kir::select(kir::lt(v, imm(0)), kir::add(v, imm(dim)), v);
  if (known)
    return {w, nullptr, nullptr};
  Expr valid = kir::land(kir::ge(v, imm(-dim)), kir::lt(v, imm(dim)));
  Expr failed = kir::op(OpKind::Or, {kir::lt(v, imm(-dim)), kir::ge(v, imm(dim))});
  // The interpreter's wording (runtime/interp checkIndex), so every target says the same.
  kir::RuntimeCheck c{b.node().describe() + ": index ",
                      fmt::format(" is out of range for an axis of size {}", dim)};
  Expr at = kir::min(kir::max(w, imm(0)), imm(std::max<int64_t>(dim - 1, 0)));
  return {at, valid, b.check(failed, v, std::move(c))};
}

/// A loop nest over `extents` where `wrap` gets the variables of the first `level` loops and
/// the remaining loops (with `body` innermost), and returns what runs in loop `level - 1`:
/// it computes what depends only on the outer loops once (Decls, an If). With level 0 the
/// wrap goes into the innermost body instead, so no local lives outside the loops.
Stmt hoistedNest(KernelBuilder &b, const Extents &extents, size_t level,
                 const std::function<Stmt(const Idx &, Stmt)> &wrap,
                 const std::function<Stmt(const Idx &)> &body, std::vector<std::string> *loops) {
  if (level == 0)
    level = extents.size();
  std::vector<std::string> names;
  Idx vars;
  for (size_t d = 0; d < extents.size(); ++d) {
    names.push_back(b.freshName("i"));
    vars.push_back(kir::var(names.back()));
  }
  Stmt s = body(vars);
  for (size_t d = extents.size(); d-- > level;)
    s = kir::forLoop(names[d], imm(extents[d]), s);
  s = wrap(vars, s);
  for (size_t d = level; d-- > 0;)
    s = kir::forLoop(names[d], imm(extents[d]), s);
  *loops = names;
  return s;
}

// ---- Gathers --------------------------------------------------------------------------------

Kernels lowerGather(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ie = extentsOf(node.operand(1)),
          oe = extentsOf(node.result(0));
  int64_t r = static_cast<int64_t>(xe.size()), q = static_cast<int64_t>(ie.size());
  if (r == 0)
    return node.error("cannot gather from a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  if (static_cast<int64_t>(oe.size()) != r - 1 + q)
    return node.error("result rank does not match");
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  DType t = b.bufferType(out);
  // An empty operand has an empty axis (the other dims are the result's): every index read
  // fails its check, and nothing is loaded.
  bool empty = numElementsOf(xe) == 0;
  int in = empty ? -1 : b.operand(0);
  std::vector<int64_t> xs = stridesOf(xe), is = stridesOf(ie);
  std::string atN = b.freshName("at");
  Expr at = kir::var(atN);
  // Constant indices all in range need no check; a constant scalar index (an attention's
  // q, k, v = qkv[0], qkv[1], qkv[2]) is a fixed offset, so the nest is a plain copy whose
  // innermost loop vectorizes, where a runtime scalar index is read and checked at every
  // element (level 0 below).
  bool known = !empty && constantInRange(node, [&](int64_t) { return xe[axis]; });
  if (known && q == 0) {
    int64_t c = node.constantOperand(1)->elementAsInt(0);
    at = imm(c < 0 ? c + xe[axis] : c);
  }
  // The index is read (and checked) once per position of the loops up to the index dims.
  size_t level = static_cast<size_t>(axis + q);
  std::vector<std::string> loops;
  Stmt nest = hoistedNest(
      b, oe, level,
      [&](const Idx &i, Stmt inner) {
        if (known && q == 0)
          return inner;
        Idx ii(i.begin() + axis, i.begin() + axis + q);
        std::vector<Stmt> stmts;
        RuntimeIndex ri = readIndex(b, stmts, loadInt(b, 1, flatIndex(ii, is)), xe[axis], known);
        if (ri.check)
          stmts.push_back(ri.check);
        stmts.push_back(kir::decl(atN, DType::I64, ri.at));
        stmts.push_back(inner);
        return kir::block(stmts);
      },
      [&](const Idx &i) {
        Expr dst = flatIndex(i, stridesOf(oe));
        if (empty)
          return b.store(out, dst, zeroOf(t));
        Expr src = kir::mul(at, imm(xs[axis]));
        for (int64_t d = 0; d < axis; ++d)
          src = kir::add(src, kir::mul(i[d], imm(xs[d])));
        for (int64_t d = axis + 1; d < r; ++d)
          src = kir::add(src, kir::mul(i[d - 1 + q], imm(xs[d])));
        return b.store(out, dst, b.load(in, src));
      },
      &loops);
  bool vectorize = (level > 0 || (known && q == 0)) && level < oe.size();
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe, vectorize))};
}

Kernels lowerGatherElements(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ie = extentsOf(node.operand(1));
  int64_t r = static_cast<int64_t>(xe.size());
  if (r == 0 || static_cast<int64_t>(ie.size()) != r)
    return node.error("data and indices must have one rank >= 1");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && ie[d] > xe[d])
      return node.error("indices exceed data on axis {}", d);
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  DType t = b.bufferType(out);
  bool empty = numElementsOf(xe) == 0; // then the axis is empty: every index fails
  int in = empty ? -1 : b.operand(0);
  bool known = !empty && constantInRange(node, [&](int64_t) { return xe[axis]; });
  std::vector<int64_t> xs = stridesOf(xe), is = stridesOf(ie);
  std::vector<std::string> loops;
  Stmt nest = b.loopNest(
      ie,
      [&](const Idx &i) {
        Expr dst = flatIndex(i, is);
        std::vector<Stmt> stmts;
        RuntimeIndex at = readIndex(b, stmts, loadInt(b, 1, dst), xe[axis], known);
        if (at.check)
          stmts.push_back(at.check);
        if (empty) {
          stmts.push_back(b.store(out, dst, zeroOf(t)));
          return kir::block(stmts);
        }
        Idx c = i;
        c[axis] = at.at;
        stmts.push_back(b.store(out, dst, b.load(in, flatIndex(c, xs))));
        return kir::block(stmts);
      },
      &loops);
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, ie, false))};
}

Kernels lowerGatherND(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ie = extentsOf(node.operand(1)),
          oe = extentsOf(node.result(0));
  int64_t bd = node.getInt("batch_dims"), r = static_cast<int64_t>(xe.size()),
          q = static_cast<int64_t>(ie.size());
  if (r < 1 || q < 1 || bd < 0 || bd >= std::min(r, q))
    return node.error("bad ranks");
  int64_t k = ie[q - 1];
  if (k < 1 || bd + k > r)
    return node.error("indices index too many dims");
  KernelBuilder b(node, prefix);
  int out = b.result(0);
  DType t = b.bufferType(out);
  bool empty = numElementsOf(xe) == 0;
  int in = empty ? -1 : b.operand(0);
  bool known = !empty && constantInRange(node, [&](int64_t e) { return xe[bd + e % k]; });
  std::vector<int64_t> xs = stridesOf(xe);
  Extents tupleExt(ie.begin(), ie.end() - 1);
  std::vector<int64_t> ts = stridesOf(tupleExt);
  std::string baseN = b.freshName("base");
  Expr base = kir::var(baseN);
  // Output dims: [batch (bd), tuple (q-1-bd), slice (r-bd-k)]; the tuple is read and
  // checked once per position of the first q-1 loops.
  std::vector<std::string> loops;
  Stmt nest = hoistedNest(
      b, oe, static_cast<size_t>(q - 1),
      [&](const Idx &i, Stmt inner) {
        Idx ti(i.begin(), i.begin() + (q - 1));
        Expr tupleAt = kir::mul(flatIndex(ti, ts), imm(k));
        Expr src = imm(0);
        std::vector<Stmt> stmts;
        for (int64_t d = 0; d < bd; ++d)
          src = kir::add(src, kir::mul(i[d], imm(xs[d])));
        for (int64_t j = 0; j < k; ++j) {
          RuntimeIndex at =
              readIndex(b, stmts, loadInt(b, 1, kir::add(tupleAt, imm(j))), xe[bd + j], known);
          if (at.check)
            stmts.push_back(at.check);
          src = kir::add(src, kir::mul(at.at, imm(xs[bd + j])));
        }
        if (!empty)
          stmts.push_back(kir::decl(baseN, DType::I64, src));
        stmts.push_back(inner);
        return kir::block(stmts);
      },
      [&](const Idx &i) {
        Expr dst = flatIndex(i, stridesOf(oe));
        if (empty)
          return b.store(out, dst, zeroOf(t));
        Expr src = base;
        for (int64_t d = bd + k; d < r; ++d)
          src = kir::add(src, kir::mul(i[q - 1 + d - bd - k], imm(xs[d])));
        return b.store(out, dst, b.load(in, src));
      },
      &loops);
  bool vectorize = q > 1 && static_cast<size_t>(q - 1) < oe.size();
  return std::vector<kir::Kernel>{b.finish(nest, defaultSchedule(loops, oe, vectorize))};
}

// ---- Scatters -------------------------------------------------------------------------------

/// The value a scatter writes: `upd`, or `old` combined with it by the reduction.
Expected<Expr> combine(const Node &node, DType t, Expr old, Expr upd) {
  std::string red = node.getString("reduction", "none");
  if (red == "none")
    return upd;
  if (isStorageOnly(t))
    return node.error("reduction '{}' is not defined on {}", red, dtypeName(t));
  OpKind k;
  if (red == "add")
    k = t == DType::Bool ? OpKind::Or : OpKind::Add;
  else if (red == "mul")
    k = t == DType::Bool ? OpKind::And : OpKind::Mul;
  else if (red == "max")
    k = t == DType::Bool ? OpKind::Or : OpKind::Max;
  else if (red == "min")
    k = t == DType::Bool ? OpKind::And : OpKind::Min;
  else
    return node.error("unknown reduction '{}'", red);
  return kir::op(k, {std::move(old), std::move(upd)});
}

/// The copy kernel of a scatter: out0 = in0.
kir::Kernel scatterCopy(const Node &node, const std::string &prefix) {
  KernelBuilder b(node, prefix + "_copy");
  int in = b.operand(0), out = b.result(0);
  Extents n{numElementsOf(extentsOf(node.operand(0)))};
  std::vector<std::string> loops;
  Stmt body = b.loopNest(
      n, [&](const Idx &i) { return b.store(out, i[0], b.load(in, i[0])); }, &loops);
  return b.finish(body, defaultSchedule(loops, n));
}

Kernels lowerScatterElements(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ie = extentsOf(node.operand(1)),
          ue = extentsOf(node.operand(2));
  int64_t r = static_cast<int64_t>(xe.size());
  if (r == 0 || static_cast<int64_t>(ie.size()) != r || ue != ie)
    return node.error("data, indices and updates do not fit together");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && ie[d] > xe[d])
      return node.error("indices exceed data on axis {}", d);
  std::vector<kir::Kernel> ks{scatterCopy(node, prefix)};
  bool empty = numElementsOf(xe) == 0; // then the axis is empty: every index fails
  if (numElementsOf(ie) == 0)
    return ks;
  bool known = !empty && constantInRange(node, [&](int64_t) { return xe[axis]; });
  KernelBuilder b(node, prefix + "_update");
  int out = empty ? -1 : b.result(0), upd = empty ? -1 : b.operand(2);
  DType t = movedType(node.result(0)->dtype());
  std::vector<int64_t> xs = stridesOf(xe), is = stridesOf(ie);
  Error err = Error::success();
  // Serial, in row-major order of the indices, so duplicates apply in order.
  Stmt nest = b.loopNest(ie, [&](const Idx &i) -> Stmt {
    Expr k = flatIndex(i, is);
    std::vector<Stmt> stmts;
    RuntimeIndex at = readIndex(b, stmts, loadInt(b, 1, k), xe[axis], known);
    if (at.check)
      stmts.push_back(at.check);
    if (empty)
      return kir::block(stmts);
    Idx c = i;
    c[axis] = at.at;
    Expr dst = flatIndex(c, xs);
    Expected<Expr> v = combine(node, t, b.load(out, dst), b.load(upd, k));
    if (!v) {
      err = v.takeError();
      return kir::block({});
    }
    Stmt write = b.store(out, dst, *v);
    stmts.push_back(at.valid ? kir::ifThen(at.valid, write) : write);
    return kir::block(stmts);
  });
  if (err)
    return err;
  ks.push_back(b.finish(nest));
  return ks;
}

Kernels lowerScatterND(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0)), ie = extentsOf(node.operand(1)),
          ue = extentsOf(node.operand(2));
  int64_t r = static_cast<int64_t>(xe.size()), q = static_cast<int64_t>(ie.size());
  if (r < 1 || q < 1)
    return node.error("data and indices must have rank >= 1");
  int64_t k = ie[q - 1];
  if (k > r)
    return node.error("indices index more dims than data has");
  Extents want(ie.begin(), ie.end() - 1);
  want.insert(want.end(), xe.begin() + k, xe.end());
  if (ue != want)
    return node.error("updates {} should be {}", extentsStr(ue), extentsStr(want));
  std::vector<kir::Kernel> ks{scatterCopy(node, prefix)};
  Extents tupleExt(ie.begin(), ie.end() - 1);
  // Every tuple's indices are checked, also where its slice is empty (as the interpreter).
  if (numElementsOf(tupleExt) == 0)
    return ks;
  bool empty = numElementsOf(ue) == 0 || numElementsOf(xe) == 0;
  bool known = k == 0 || constantInRange(node, [&](int64_t e) { return xe[e % k]; });
  if (empty && known)
    return ks;
  KernelBuilder b(node, prefix + "_update");
  int out = empty ? -1 : b.result(0), upd = empty ? -1 : b.operand(2);
  DType t = movedType(node.result(0)->dtype());
  std::vector<int64_t> xs = stridesOf(xe), us = stridesOf(ue);
  std::vector<int64_t> ts = stridesOf(tupleExt);
  Error err = Error::success();
  std::string baseN = b.freshName("base");
  Expr base = kir::var(baseN);
  // The indices, read and checked once per tuple.
  auto readTuple = [&](const Idx &ti, std::vector<Stmt> &stmts) {
    Expr tupleAt = kir::mul(flatIndex(ti, ts), imm(k));
    Expr dst = imm(0);
    std::vector<Expr> ok;
    for (int64_t j = 0; j < k; ++j) {
      RuntimeIndex at = readIndex(b, stmts, loadInt(b, 1, kir::add(tupleAt, imm(j))), xe[j], known);
      if (at.check)
        stmts.push_back(at.check);
      if (at.valid)
        ok.push_back(at.valid);
      dst = kir::add(dst, kir::mul(at.at, imm(xs[j])));
    }
    return std::make_pair(dst, andAll(ok));
  };
  if (empty) {
    // Nothing to write (the slices are empty), but the tuples are still checked.
    Stmt nest = b.loopNest(tupleExt, [&](const Idx &ti) -> Stmt {
      std::vector<Stmt> stmts;
      readTuple(ti, stmts);
      return kir::block(stmts);
    });
    ks.push_back(b.finish(nest));
    return ks;
  }
  // Loops over [tuples (q-1), slice (r-k)], serial so duplicates apply in order.
  std::vector<std::string> loops;
  Stmt nest = hoistedNest(
      b, ue, static_cast<size_t>(q - 1),
      [&](const Idx &i, Stmt inner) -> Stmt {
        Idx ti(i.begin(), i.begin() + (q - 1));
        std::vector<Stmt> stmts;
        auto [dst, valid] = readTuple(ti, stmts);
        stmts.push_back(kir::decl(baseN, DType::I64, dst));
        stmts.push_back(valid ? kir::ifThen(valid, inner) : inner);
        return kir::block(stmts);
      },
      [&](const Idx &i) -> Stmt {
        Expr dst = base;
        for (int64_t d = k; d < r; ++d)
          dst = kir::add(dst, kir::mul(i[q - 1 + d - k], imm(xs[d])));
        Expected<Expr> v = combine(node, t, b.load(out, dst), b.load(upd, flatIndex(i, us)));
        if (!v) {
          err = v.takeError();
          return kir::block({});
        }
        return b.store(out, dst, *v);
      },
      &loops);
  if (err)
    return err;
  ks.push_back(b.finish(nest));
  return ks;
}

} // namespace

void registerIndexingLowerers(LowererTable &t) {
  t[OpKind::Gather] = lowerGather;
  t[OpKind::GatherElements] = lowerGatherElements;
  t[OpKind::GatherND] = lowerGatherND;
  t[OpKind::ScatterElements] = lowerScatterElements;
  t[OpKind::ScatterND] = lowerScatterND;
}

} // namespace nnc::lower

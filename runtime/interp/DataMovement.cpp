// Interpreter kernels of the layout ops: shape, reshape, squeeze, transpose, expand, concat,
// split, slice, pad, tile, depth_to_space, space_to_depth. All are byte moves by element size.
#include "interp/DataMovement.h"

#include <algorithm>
#include <set>

#include <fmt/ranges.h>

#include "nnc/ir/ShapeUtils.h"

namespace nnc::interp {

namespace dm {

namespace {
struct TableCopy {
  char *dst;
  const char *src;
  size_t es;
  const std::vector<std::vector<int64_t>> &tables;
  const char *fill;
  int64_t last;
  int64_t outIdx = 0;

  void run(int64_t d, int64_t off, bool filled) {
    const std::vector<int64_t> &tab = tables[d];
    if (d == last) {
      for (int64_t v : tab) {
        char *o = dst + (outIdx++) * es;
        if (filled || v == kFill)
          copyElement(o, fill, es);
        else
          copyElement(o, src + (off + v) * es, es);
      }
      return;
    }
    for (int64_t v : tab)
      run(d + 1, v == kFill ? off : off + v, filled || v == kFill);
  }
};
} // namespace

void copyByTables(Tensor &out, const Tensor &src, const std::vector<std::vector<int64_t>> &tables,
                  const void *fill) {
  if (out.numElements() == 0)
    return;
  size_t es = dtypeSize(out.dtype());
  if (out.rank() == 0) {
    copyElement(static_cast<char *>(out.rawData()), static_cast<const char *>(src.rawData()), es);
    return;
  }
  TableCopy c{static_cast<char *>(out.rawData()), static_cast<const char *>(src.rawData()), es,
              tables, static_cast<const char *>(fill), out.rank() - 1};
  c.run(0, 0, false);
}

Expected<std::vector<int64_t>> intValues(const Node &node, const Operands &ops, size_t i,
                                         const char *what) {
  if (i >= ops.size() || ops[i].isNull())
    return node.error("{} (operand {}) is missing", what, i);
  if (!isInteger(ops[i].dtype()))
    return node.error("{} must be integers, got {}", what, dtypeName(ops[i].dtype()));
  return ops[i].toInt64Vector();
}

} // namespace dm

using namespace dm;

namespace {

/// The operand's buffer seen with new extents, deep-copied so results never alias operands.
Results reshapedCopy(const Node &node, const Tensor &x, const Extents &e) {
  std::optional<int64_t> n = checkedNumElements(e);
  if (!n || *n != x.numElements())
    return node.error("cannot reshape {} to {}", extentsStr(x.extents()), extentsStr(e));
  return std::vector<Tensor>{x.clone().reshaped(e)};
}

/// A tensor of `extents` filled by offset tables.
Results tableResult(const Tensor &x, const Extents &extents,
                    const std::vector<std::vector<int64_t>> &tables, const void *fill = nullptr) {
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(x.dtype(), extents));
  copyByTables(out, x, tables, fill);
  return std::vector<Tensor>{out};
}

/// Refuses a result too large to allocate before per-axis offset tables are built for it, and
/// gives an empty result directly (its tables could still be absurdly long: [0, 2^62]).
Expected<std::optional<Tensor>> checkTableResult(const Node &node, DType t,
                                                 const Extents &extents) {
  std::optional<int64_t> n = checkedNumElements(extents);
  if (!n || *n > maxTensorBytes() / static_cast<int64_t>(std::max<size_t>(1, dtypeSize(t))))
    return node.error("result {}{} is too large", dtypeName(t), extentsStr(extents));
  if (*n == 0) {
    NNC_ASSIGN_OR_RETURN(Tensor empty, Tensor::create(t, extents));
    return std::optional<Tensor>(empty);
  }
  return std::optional<Tensor>();
}

} // namespace

Results evalShapeOf(const Node &node, const Operands &ops) {
  const Extents &e = ops[0].extents();
  int64_t rank = static_cast<int64_t>(e.size());
  int64_t start = node.getInt("start", 0), end = node.getInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> v;
  for (int64_t i = start; i < end; ++i)
    v.push_back(e[i]);
  return std::vector<Tensor>{
      Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v)};
}

Results evalReshape(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intValues(node, ops, 1, "shape"));
  bool allowZero = node.getInt("allowzero", 0) != 0;
  Extents out(shape.size());
  int inferAt = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t v = shape[i];
    if (v == -1) {
      if (inferAt >= 0)
        return node.error("shape [{}] has more than one -1", fmt::join(shape, ","));
      inferAt = static_cast<int>(i);
      continue;
    }
    if (v < -1)
      return node.error("shape [{}] has an invalid dim {}", fmt::join(shape, ","), v);
    if (v == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= x.rank())
        return node.error("shape [{}] copies dim {} of {}, which has no such dim",
                          fmt::join(shape, ","), i, extentsStr(x.extents()));
      v = x.dim(i);
    }
    out[i] = v;
    known *= v;
  }
  if (inferAt >= 0) {
    if (known == 0 || x.numElements() % known != 0)
      return node.error("cannot reshape {} to [{}]", extentsStr(x.extents()),
                        fmt::join(shape, ","));
    out[inferAt] = x.numElements() / known;
  }
  return reshapedCopy(node, x, out);
}

Results evalFlatten(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank(), axis = node.getInt("axis");
  if (axis < -r || axis > r)
    return node.error("axis {} is out of range for rank {}", axis, r);
  if (axis < 0)
    axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i)
    (i < axis ? a : b) *= x.dim(i);
  return reshapedCopy(node, x, {a, b});
}

Results evalSqueeze(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  const std::vector<int64_t> &axesAttr = node.getInts("axes");
  Extents out;
  if (axesAttr.empty()) {
    for (int64_t d : x.extents())
      if (d != 1)
        out.push_back(d);
    return reshapedCopy(node, x, out);
  }
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalizeAxes(axesAttr, x.rank(), node));
  std::set<int64_t> drop(axes.begin(), axes.end());
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!drop.count(i))
      out.push_back(x.dim(i));
    else if (x.dim(i) != 1)
      return node.error("cannot squeeze axis {} of {}: its size is {}", i,
                        extentsStr(x.extents()), x.dim(i));
  }
  return reshapedCopy(node, x, out);
}

Results evalUnsqueeze(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  const std::vector<int64_t> &axesAttr = node.getInts("axes");
  int64_t outRank = x.rank() + static_cast<int64_t>(axesAttr.size());
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalizeAxes(axesAttr, outRank, node));
  std::set<int64_t> ins(axes.begin(), axes.end());
  Extents out;
  int64_t j = 0;
  for (int64_t i = 0; i < outRank; ++i)
    out.push_back(ins.count(i) ? 1 : x.dim(j++));
  return reshapedCopy(node, x, out);
}

Results evalTranspose(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  std::vector<int64_t> perm = node.getInts("perm", {});
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    return node.error("perm [{}] does not match rank {}", fmt::join(perm, ","), r);
  Extents strides = stridesOf(x.extents()), out;
  std::vector<std::vector<int64_t>> tables;
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      return node.error("perm [{}] is not a permutation", fmt::join(perm, ","));
    seen[p] = true;
    out.push_back(x.dim(p));
    std::vector<int64_t> t(x.dim(p));
    for (int64_t o = 0; o < x.dim(p); ++o)
      t[o] = o * strides[p];
    tables.push_back(std::move(t));
  }
  return tableResult(x, out, tables);
}

Results evalExpand(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intValues(node, ops, 1, "shape"));
  for (int64_t v : shape)
    if (v < 0)
      return node.error("shape [{}] has a negative dim", fmt::join(shape, ","));
  std::optional<Extents> out = broadcastExtents(x.extents(), shape);
  if (!out)
    return node.error("cannot expand {} to [{}]", extentsStr(x.extents()), fmt::join(shape, ","));
  NNC_ASSIGN_OR_RETURN(std::optional<Tensor> early, checkTableResult(node, x.dtype(), *out));
  if (early)
    return std::vector<Tensor>{*early};
  int64_t r = static_cast<int64_t>(out->size());
  Extents strides = stridesOf(x.extents());
  std::vector<std::vector<int64_t>> tables(r);
  for (int64_t d = 0; d < r; ++d) {
    int64_t xd = d - (r - x.rank());
    tables[d].resize((*out)[d], 0);
    if (xd >= 0 && x.dim(xd) != 1)
      for (int64_t o = 0; o < (*out)[d]; ++o)
        tables[d][o] = o * strides[xd];
  }
  return tableResult(x, *out, tables);
}

Results evalConcat(const Node &node, const Operands &ops) {
  const Tensor &x0 = ops[0];
  int64_t r = x0.rank();
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  Extents out = x0.extents();
  out[axis] = 0;
  for (const Tensor &t : ops) {
    if (t.dtype() != x0.dtype() || t.rank() != r)
      return node.error("operands {} and {} cannot be concatenated", t.type().str(),
                        x0.type().str());
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && t.dim(d) != x0.dim(d))
        return node.error("operands {} and {} differ off axis {}", extentsStr(t.extents()),
                          extentsStr(x0.extents()), axis);
    out[axis] += t.dim(axis);
  }
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x0.dtype(), out));
  size_t es = dtypeSize(x0.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out[d];
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= out[d];
  size_t outRow = static_cast<size_t>(out[axis] * inner) * es;
  char *dst = res.data<char>();
  size_t at = 0;
  for (const Tensor &t : ops) {
    size_t row = static_cast<size_t>(t.dim(axis) * inner) * es;
    for (int64_t o = 0; o < outer && row; ++o)
      std::memcpy(dst + o * outRow + at, t.data<char>() + o * row, row);
    at += row;
  }
  return std::vector<Tensor>{res};
}

Results evalSplit(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  if (r == 0)
    return node.error("cannot split a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  std::vector<int64_t> sizes = node.getInts("sizes");
  int64_t dim = x.dim(axis);
  if (sizes.empty()) {
    int64_t n = static_cast<int64_t>(node.numResults());
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::clamp<int64_t>(dim - chunk * i, 0, chunk));
  }
  int64_t sum = 0;
  for (int64_t s : sizes)
    sum += s;
  if (sum != dim)
    return node.error("sizes [{}] do not sum to the size {} of axis {}", fmt::join(sizes, ","),
                      dim, axis);
  size_t es = dtypeSize(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= x.dim(d);
  size_t inRow = static_cast<size_t>(dim * inner) * es, at = 0;
  std::vector<Tensor> results;
  for (int64_t s : sizes) {
    Extents e = x.extents();
    e[axis] = s;
    NNC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(x.dtype(), e));
    size_t row = static_cast<size_t>(s * inner) * es;
    for (int64_t o = 0; o < outer && row; ++o)
      std::memcpy(t.data<char>() + o * row, x.data<char>() + o * inRow + at, row);
    at += row;
    results.push_back(t);
  }
  return results;
}

Results evalSlice(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> starts, intValues(node, ops, 1, "starts"));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> ends, intValues(node, ops, 2, "ends"));
  size_t n = starts.size();
  if (ends.size() != n)
    return node.error("starts and ends have different lengths ({} and {})", n, ends.size());
  std::vector<int64_t> axes, steps(n, 1);
  if (ops.size() > 3 && !ops[3].isNull()) {
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> a, intValues(node, ops, 3, "axes"));
    if (a.size() != n)
      return node.error("axes has {} entries, starts has {}", a.size(), n);
    NNC_ASSIGN_OR_RETURN(axes, normalizeAxes(a, r, node));
  } else {
    if (static_cast<int64_t>(n) > r)
      return node.error("starts has {} entries for rank {}", n, r);
    for (size_t i = 0; i < n; ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (ops.size() > 4 && !ops[4].isNull()) {
    NNC_ASSIGN_OR_RETURN(steps, intValues(node, ops, 4, "steps"));
    if (steps.size() != n)
      return node.error("steps has {} entries, starts has {}", steps.size(), n);
  }
  Extents out = x.extents(), strides = stridesOf(x.extents());
  std::vector<int64_t> first(r, 0), step(r, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t ax = axes[i], dim = x.dim(ax), st = starts[i], en = ends[i], sp = steps[i];
    if (sp == 0)
      return node.error("steps must not be 0");
    if (st < 0)
      st += dim;
    if (en < 0)
      en += dim;
    int64_t count;
    if (sp > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
      count = en > st ? (en - st - 1) / sp + 1 : 0;
    } else {
      st = std::clamp<int64_t>(st, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
      count = st > en ? (st - en - 1) / (-sp) + 1 : 0;
    }
    if (dim == 0)
      count = 0;
    out[ax] = count;
    first[ax] = st;
    step[ax] = sp;
  }
  std::vector<std::vector<int64_t>> tables(r);
  for (int64_t d = 0; d < r; ++d) {
    tables[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o)
      tables[d][o] = (first[d] + o * step[d]) * strides[d];
  }
  return tableResult(x, out, tables);
}

Results evalPad(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  const std::string &mode = node.getString("mode");
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> pads, intValues(node, ops, 1, "pads"));
  if (static_cast<int64_t>(pads.size()) != 2 * r)
    return node.error("pads has {} entries; {} needs {}", pads.size(), extentsStr(x.extents()),
                      2 * r);
  size_t es = dtypeSize(x.dtype());
  std::vector<char> fill(es, 0);
  if (ops.size() > 2 && !ops[2].isNull() && ops[2].numElements() > 0) {
    if (ops[2].dtype() != x.dtype())
      return node.error("the pad value has dtype {}, the data {}", dtypeName(ops[2].dtype()),
                        dtypeName(x.dtype()));
    std::memcpy(fill.data(), ops[2].rawData(), es);
  }
  bool constant = mode == "constant";
  if (!constant && mode != "reflect" && mode != "edge" && mode != "wrap")
    return node.error("unknown mode '{}'", mode);
  Extents out(r), strides = stridesOf(x.extents());
  for (int64_t d = 0; d < r; ++d) {
    if (__builtin_add_overflow(x.dim(d), pads[d], &out[d]) ||
        __builtin_add_overflow(out[d], pads[d + r], &out[d]))
      return node.error("pads [{}] make axis {} too large", fmt::join(pads, ","), d);
    if (out[d] < 0)
      return node.error("pads [{}] crop axis {} of {} below zero", fmt::join(pads, ","), d,
                        extentsStr(x.extents()));
  }
  NNC_ASSIGN_OR_RETURN(std::optional<Tensor> early, checkTableResult(node, x.dtype(), out));
  if (early)
    return std::vector<Tensor>{*early};
  std::vector<std::vector<int64_t>> tables(r);
  for (int64_t d = 0; d < r; ++d) {
    int64_t n = x.dim(d), b = pads[d], e = pads[d + r];
    // Crop first (negative pads), then pad the cropped range [cs, cs + cn).
    int64_t cs = std::max<int64_t>(-b, 0), cn = n - cs - std::max<int64_t>(-e, 0);
    int64_t pb = std::max<int64_t>(b, 0);
    if (cn <= 0 && !constant && out[d] > 0)
      return node.error("mode {} cannot pad axis {}: nothing is left of it after cropping", mode,
                        d);
    tables[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t j = o - pb;
      if (j < 0 || j >= cn) {
        if (constant) {
          tables[d][o] = kFill;
          continue;
        }
        if (mode == "edge") {
          j = std::clamp<int64_t>(j, 0, cn - 1);
        } else if (mode == "wrap") {
          j = ((j % cn) + cn) % cn;
        } else if (cn == 1) {
          j = 0;
        } else { // reflect (periodic with period 2(cn-1), like numpy)
          int64_t p = 2 * (cn - 1);
          j = ((j % p) + p) % p;
          if (j >= cn)
            j = p - j;
        }
      }
      tables[d][o] = (cs + j) * strides[d];
    }
  }
  return tableResult(x, out, tables, fill.data());
}

Results evalTile(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> reps, intValues(node, ops, 1, "repeats"));
  if (static_cast<int64_t>(reps.size()) != r)
    return node.error("repeats has {} entries for {}", reps.size(), extentsStr(x.extents()));
  Extents out(r), strides = stridesOf(x.extents());
  for (int64_t d = 0; d < r; ++d) {
    if (reps[d] < 0)
      return node.error("repeats [{}] has a negative entry", fmt::join(reps, ","));
    if (__builtin_mul_overflow(x.dim(d), reps[d], &out[d]))
      return node.error("repeats [{}] make axis {} too large", fmt::join(reps, ","), d);
  }
  NNC_ASSIGN_OR_RETURN(std::optional<Tensor> early, checkTableResult(node, x.dtype(), out));
  if (early)
    return std::vector<Tensor>{*early};
  std::vector<std::vector<int64_t>> tables(r);
  for (int64_t d = 0; d < r; ++d) {
    tables[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o)
      tables[d][o] = (o % x.dim(d)) * strides[d];
  }
  return tableResult(x, out, tables);
}

namespace {
/// DepthToSpace and SpaceToDepth are a reshape to 6-D, a transpose and a reshape back: the
/// offset tables of the transpose over the 6-D view of `x`.
Results blockTranspose(const Tensor &x, const Extents &view, const std::vector<int64_t> &perm,
                       const Extents &out) {
  Extents strides = stridesOf(view), mid;
  std::vector<std::vector<int64_t>> tables;
  for (int64_t p : perm) {
    mid.push_back(view[p]);
    std::vector<int64_t> t(view[p]);
    for (int64_t o = 0; o < view[p]; ++o)
      t[o] = o * strides[p];
    tables.push_back(std::move(t));
  }
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x.dtype(), mid));
  copyByTables(res, x, tables, nullptr);
  return std::vector<Tensor>{res.reshaped(out)};
}
} // namespace

Results evalDepthToSpace(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.rank() != 4)
    return node.error("needs a 4-D NCHW operand, got {}", extentsStr(x.extents()));
  int64_t b = node.getInt("blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), bb, hb, wb;
  if (b < 1 || __builtin_mul_overflow(b, b, &bb) || __builtin_mul_overflow(h, b, &hb) ||
      __builtin_mul_overflow(w, b, &wb))
    return node.error("blocksize {} is out of range for {}", b, extentsStr(x.extents()));
  if (c % bb != 0)
    return node.error("channels {} are not divisible by blocksize^2 (blocksize {})", c, b);
  int64_t c2 = c / bb;
  Extents out{n, c2, hb, wb};
  NNC_ASSIGN_OR_RETURN(std::optional<Tensor> early, checkTableResult(node, x.dtype(), out));
  if (early)
    return std::vector<Tensor>{*early};
  if (node.getString("mode") == "CRD")
    return blockTranspose(x, {n, c2, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
  return blockTranspose(x, {n, b, b, c2, h, w}, {0, 3, 4, 1, 5, 2}, out);
}

Results evalSpaceToDepth(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.rank() != 4)
    return node.error("needs a 4-D NCHW operand, got {}", extentsStr(x.extents()));
  int64_t b = node.getInt("blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t bb, cbb;
  if (b < 1 || h % b != 0 || w % b != 0)
    return node.error("spatial dims {}x{} are not divisible by blocksize {}", h, w, b);
  if (__builtin_mul_overflow(b, b, &bb) || __builtin_mul_overflow(c, bb, &cbb))
    return node.error("blocksize {} is too large", b);
  Extents out{n, cbb, h / b, w / b};
  NNC_ASSIGN_OR_RETURN(std::optional<Tensor> early, checkTableResult(node, x.dtype(), out));
  if (early)
    return std::vector<Tensor>{*early};
  return blockTranspose(x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, out);
}

} // namespace nnc::interp

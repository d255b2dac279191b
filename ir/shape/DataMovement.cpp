// Shape rules of the shape and data-movement ops (reshape, slice, gather, pad, ...).
#include "ShapeRules.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/ranges.h>

#include "nnc/ir/ShapeUtils.h"

namespace nnc::shape {

namespace {

using Types = std::vector<TensorType>;

/// Checks that operands [0, n) are present.
Error requireOperands(const Node &node, size_t n) {
  if (node.numOperands() < n)
    return node.error("expects at least {} operands, got {}", n, node.numOperands());
  for (size_t i = 0; i < n; ++i)
    if (!node.operand(i))
      return node.error("operand {} is missing", i);
  return Error::success();
}

Expected<int64_t> intAttr(const Node &node, const char *name) {
  const Attribute *a = node.attr(name);
  if (!a || !std::holds_alternative<int64_t>(*a))
    return node.error("missing int attribute '{}'", name);
  return std::get<int64_t>(*a);
}

Expected<std::string> stringAttr(const Node &node, const char *name) {
  const Attribute *a = node.attr(name);
  if (!a || !std::holds_alternative<std::string>(*a))
    return node.error("missing string attribute '{}'", name);
  return std::get<std::string>(*a);
}

Expected<std::vector<int64_t>> intsAttr(const Node &node, const char *name) {
  const Attribute *a = node.attr(name);
  if (!a || !std::holds_alternative<std::vector<int64_t>>(*a))
    return node.error("missing ints attribute '{}'", name);
  return std::get<std::vector<int64_t>>(*a);
}

/// The values of operand i when it is a constant of an integer dtype.
std::optional<std::vector<int64_t>> constInts(const Node &node, size_t i) {
  const Tensor *t = node.constantOperand(i);
  if (!t || t->isNull() || !(isInteger(t->dtype()) || isFloat(t->dtype())))
    return std::nullopt;
  return t->toInt64Vector();
}

/// Operand i must be a 1-D integer vector with a static length; returns the length.
Expected<int64_t> vectorLength(const Node &node, size_t i, const char *what) {
  const Value *v = node.operand(i);
  if (!isInteger(v->dtype()))
    return node.error("{} must be an integer vector, got {}", what, v->type().str());
  if (v->rank() != 1)
    return node.error("{} must be 1-D, got {}", what, v->type().str());
  if (!v->shape()[0].isStatic())
    return node.error("{} has an unknown length ({}), so the result rank is unknown", what,
                      v->type().str());
  return v->shape()[0].value();
}

/// The product of dims [b, e): static when all are, the one symbol when the rest are 1s,
/// else a fresh symbol.
Dim productDim(const Shape &s, size_t b, size_t e, Graph &g) {
  int64_t p = 1;
  std::vector<Dim> syms;
  for (size_t i = b; i < e; ++i) {
    if (s[i].isStatic())
      p *= s[i].value();
    else
      syms.push_back(s[i]);
  }
  if (p == 0)
    return Dim(0);
  if (syms.empty())
    return Dim(p);
  if (syms.size() == 1 && p == 1)
    return syms[0];
  return g.freshDim();
}

/// Merges two dims that must be equal; errors when both are static and differ.
Expected<Dim> mergeDims(const Dim &a, const Dim &b, const Node &node, const char *what) {
  if (a.isStatic() && b.isStatic() && a.value() != b.value())
    return node.error("{}: {} vs {}", what, a.value(), b.value());
  return a.isStatic() ? a : b;
}

const std::set<std::string> kReductions = {"none", "add", "mul", "max", "min"};

} // namespace

Expected<Types> inferShapeOf(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  int64_t rank = node.operand(0)->rank();
  int64_t start = node.getInt("start", 0), end = node.getInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return Types{TensorType(DType::I64, {std::max<int64_t>(end - start, 0)})};
}

Expected<Types> inferReshape(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(int64_t k, vectorLength(node, 1, "shape"));
  Graph &g = *node.graph();
  bool allowZero = node.getInt("allowzero", 0) != 0;
  std::optional<std::vector<int64_t>> vals = constInts(node, 1);
  if (!vals) {
    Shape s;
    for (int64_t i = 0; i < k; ++i)
      s.push_back(g.freshDim());
    return Types{TensorType(x->dtype(), s)};
  }
  const Shape &in = x->shape();
  Shape out(vals->size());
  int inferAt = -1;
  bool hasZero = false;
  for (size_t i = 0; i < vals->size(); ++i) {
    int64_t v = (*vals)[i];
    if (v == -1) {
      if (inferAt >= 0)
        return node.error("shape {} has more than one -1", fmt::join(*vals, ","));
      inferAt = static_cast<int>(i);
    } else if (v < -1) {
      return node.error("shape has invalid dim {}", v);
    } else if (v == 0 && !allowZero) {
      if (i >= in.size())
        return node.error("shape copies dim {} (0) but the input {} has rank {}", i,
                          x->type().str(), in.size());
      out[i] = in[i];
    } else {
      hasZero |= v == 0;
      out[i] = Dim(v);
    }
  }
  if (allowZero && hasZero && inferAt >= 0)
    return node.error("shape has both 0 and -1 with allowzero=1");
  // Cancel the known output dims against the input's: static products and symbol multisets.
  int64_t inProd = 1, outProd = 1;
  std::multiset<std::string> inSyms, outSyms;
  for (const Dim &d : in) {
    if (d.isStatic())
      inProd *= d.value();
    else
      inSyms.insert(d.symbolName());
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(i) == inferAt)
      continue;
    if (out[i].isStatic())
      outProd *= out[i].value();
    else
      outSyms.insert(out[i].symbolName());
  }
  bool symsCancel = true;
  for (const std::string &s : outSyms) {
    auto it = inSyms.find(s);
    if (it == inSyms.end()) {
      symsCancel = false;
      break;
    }
    inSyms.erase(it);
  }
  if (inferAt >= 0) {
    Dim inferred = g.freshDim();
    if (symsCancel && inSyms.empty()) {
      if (outProd == 0)
        return node.error("cannot infer the -1 dim of shape {} when other dims are 0",
                          fmt::join(*vals, ","));
      if (inProd % outProd != 0)
        return node.error("cannot reshape {} to {}", x->type().str(), fmt::join(*vals, ","));
      inferred = Dim(inProd / outProd);
    } else if (symsCancel && inSyms.size() == 1 && inProd == outProd && outProd != 0) {
      inferred = Dim::symbol(*inSyms.begin());
    }
    out[inferAt] = inferred;
  } else if (symsCancel && inSyms.empty() && inProd != outProd) {
    return node.error("cannot reshape {} to {} (element counts differ)", x->type().str(),
                      shapeStr(out));
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferFlatten(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  int64_t r = x->rank();
  NNC_ASSIGN_OR_RETURN(int64_t axis, intAttr(node, "axis"));
  if (axis < -r || axis > r)
    return node.error("axis {} is out of range for rank {}", axis, r);
  if (axis < 0)
    axis += r;
  Graph &g = *node.graph();
  return Types{TensorType(x->dtype(), {productDim(x->shape(), 0, axis, g),
                                       productDim(x->shape(), axis, r, g)})};
}

Expected<Types> inferSqueeze(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axesAttr, intsAttr(node, "axes"));
  const Shape &in = x->shape();
  Shape out;
  if (axesAttr.empty()) {
    for (const Dim &d : in)
      if (!(d.isStatic() && d.value() == 1))
        out.push_back(d);
    return Types{TensorType(x->dtype(), out)};
  }
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalizeAxes(axesAttr, x->rank(), node));
  std::set<int64_t> drop(axes.begin(), axes.end());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop.count(i)) {
      out.push_back(in[i]);
      continue;
    }
    if (in[i].isStatic() && in[i].value() != 1)
      return node.error("cannot squeeze axis {} of {}: its size is {}", i, x->type().str(),
                        in[i].value());
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferUnsqueeze(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axesAttr, intsAttr(node, "axes"));
  int64_t outRank = x->rank() + static_cast<int64_t>(axesAttr.size());
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalizeAxes(axesAttr, outRank, node));
  std::set<int64_t> ins(axes.begin(), axes.end());
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < outRank; ++i)
    out.push_back(ins.count(i) ? Dim(1) : x->shape()[j++]);
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferTranspose(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  int64_t r = x->rank();
  std::vector<int64_t> perm = node.getInts("perm", {});
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    return node.error("perm [{}] has {} entries for rank {}", fmt::join(perm, ","), perm.size(),
                      r);
  std::vector<bool> seen(r, false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      return node.error("perm [{}] is not a permutation of 0..{}", fmt::join(perm, ","), r - 1);
    seen[p] = true;
    out.push_back(x->shape()[p]);
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferExpand(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(int64_t k, vectorLength(node, 1, "shape"));
  Graph &g = *node.graph();
  if (std::optional<std::vector<int64_t>> vals = constInts(node, 1)) {
    for (int64_t v : *vals)
      if (v < 0)
        return node.error("shape has a negative dim {}", v);
    Expected<Shape> s = broadcastShapes(x->shape(), shapeFromExtents(*vals), g);
    if (!s)
      return s.takeError().withContext(node.describe());
    return Types{TensorType(x->dtype(), *s)};
  }
  int64_t r = std::max(k, x->rank());
  Shape out(r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t xi = i - (r - x->rank());
    if (xi >= 0 && x->shape()[xi].isStatic() && x->shape()[xi].value() != 1)
      out[i] = x->shape()[xi];
    else
      out[i] = g.freshDim();
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferConcat(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  NNC_TRY(requireOperands(node, node.numOperands()));
  const Value *x0 = node.operand(0);
  int64_t r = x0->rank();
  if (r == 0)
    return node.error("cannot concatenate scalars");
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axisAttr, r, node));
  Shape out = x0->shape();
  int64_t sum = 0;
  int numSymbolic = 0;
  int symbolicAt = -1;
  for (size_t i = 0; i < node.numOperands(); ++i) {
    const Value *v = node.operand(i);
    if (v->dtype() != x0->dtype())
      return node.error("operand dtypes differ: {} and {}", x0->type().str(), v->type().str());
    if (v->rank() != r)
      return node.error("operand ranks differ: {} and {}", x0->type().str(), v->type().str());
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis)
        continue;
      Expected<Dim> m = mergeDims(out[d], v->shape()[d], node, "operand shapes differ off the axis");
      if (!m)
        return m.takeError();
      out[d] = *m;
    }
    const Dim &a = v->shape()[axis];
    if (a.isStatic()) {
      sum += a.value();
    } else {
      ++numSymbolic;
      symbolicAt = static_cast<int>(i);
    }
  }
  if (numSymbolic == 0)
    out[axis] = Dim(sum);
  else if (numSymbolic == 1 && sum == 0)
    out[axis] = node.operand(symbolicAt)->shape()[axis];
  else
    out[axis] = node.graph()->freshDim();
  return Types{TensorType(x0->dtype(), out)};
}

Expected<Types> inferSplit(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() == 0)
    return node.error("cannot split a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axisAttr, x->rank(), node));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, intsAttr(node, "sizes"));
  const Dim &d = x->shape()[axis];
  Types out;
  if (sizes.empty()) {
    // Equal parts, one per result; like Split-18's num_outputs, the last may be smaller.
    int64_t n = static_cast<int64_t>(node.numResults());
    if (n < 1)
      return node.error("has no results to split into");
    for (int64_t i = 0; i < n; ++i) {
      Shape s = x->shape();
      if (d.isStatic()) {
        int64_t chunk = (d.value() + n - 1) / n;
        s[axis] = Dim(std::clamp<int64_t>(d.value() - chunk * i, 0, chunk));
      } else {
        s[axis] = node.graph()->freshDim();
      }
      out.emplace_back(x->dtype(), s);
    }
    return out;
  }
  if (sizes.size() < node.numResults())
    return node.error("sizes [{}] give {} pieces but the node has {} results",
                      fmt::join(sizes, ","), sizes.size(), node.numResults());
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return node.error("sizes [{}] has a negative size", fmt::join(sizes, ","));
    sum += s;
  }
  if (d.isStatic() && sum != d.value())
    return node.error("sizes [{}] sum to {}, but axis {} of {} has size {}", fmt::join(sizes, ","),
                      sum, axis, x->type().str(), d.value());
  for (int64_t s : sizes) {
    Shape sh = x->shape();
    sh[axis] = Dim(s);
    out.emplace_back(x->dtype(), sh);
  }
  return out;
}

Expected<Types> inferSlice(const Node &node) {
  NNC_TRY(requireOperands(node, 3));
  const Value *x = node.operand(0);
  int64_t r = x->rank();
  Graph &g = *node.graph();
  NNC_ASSIGN_OR_RETURN(int64_t n, vectorLength(node, 1, "starts"));
  NNC_ASSIGN_OR_RETURN(int64_t ne, vectorLength(node, 2, "ends"));
  if (ne != n)
    return node.error("starts and ends have different lengths ({} and {})", n, ne);
  bool hasAxes = node.operand(3) != nullptr, hasSteps = node.operand(4) != nullptr;
  if (hasAxes) {
    NNC_ASSIGN_OR_RETURN(int64_t na, vectorLength(node, 3, "axes"));
    if (na != n)
      return node.error("axes has length {}, starts has {}", na, n);
  }
  if (hasSteps) {
    NNC_ASSIGN_OR_RETURN(int64_t ns, vectorLength(node, 4, "steps"));
    if (ns != n)
      return node.error("steps has length {}, starts has {}", ns, n);
  }
  std::vector<int64_t> axes;
  if (hasAxes) {
    std::optional<std::vector<int64_t>> a = constInts(node, 3);
    if (!a) {
      // Which axes are sliced is unknown: every dim may change.
      Shape s;
      for (int64_t i = 0; i < r; ++i)
        s.push_back(g.freshDim());
      return Types{TensorType(x->dtype(), s)};
    }
    NNC_ASSIGN_OR_RETURN(axes, normalizeAxes(*a, r, node));
  } else {
    if (n > r)
      return node.error("starts has {} entries for rank {}", n, r);
    for (int64_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  std::optional<std::vector<int64_t>> starts = constInts(node, 1), ends = constInts(node, 2);
  std::optional<std::vector<int64_t>> steps =
      hasSteps ? constInts(node, 4) : std::optional<std::vector<int64_t>>(std::vector<int64_t>(n, 1));
  if (steps)
    for (int64_t s : *steps)
      if (s == 0)
        return node.error("steps must not be 0");
  Shape out = x->shape();
  for (int64_t i = 0; i < n; ++i) {
    int64_t ax = axes[i];
    const Dim &d = x->shape()[ax];
    if (!starts || !ends || !steps) {
      out[ax] = g.freshDim();
      continue;
    }
    int64_t st = (*starts)[i], en = (*ends)[i], sp = (*steps)[i];
    if (d.isStatic()) {
      int64_t first, count;
      sliceAxis(d.value(), st, en, sp, first, count);
      out[ax] = Dim(count);
    } else if (sp == 1 && st == 0 && en >= INT32_MAX) {
      out[ax] = d;
    } else {
      out[ax] = g.freshDim();
    }
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferPad(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0);
  int64_t r = x->rank();
  NNC_ASSIGN_OR_RETURN(std::string mode, stringAttr(node, "mode"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return node.error("unknown mode '{}' (expected constant, reflect, edge or wrap)", mode);
  NNC_ASSIGN_OR_RETURN(int64_t n, vectorLength(node, 1, "pads"));
  if (n != 2 * r)
    return node.error("pads has {} entries; {} needs {}", n, x->type().str(), 2 * r);
  if (const Value *v = node.operand(2)) {
    if (v->dtype() != x->dtype())
      return node.error("the pad value {} does not have the dtype of {}", v->type().str(),
                        x->type().str());
    if (v->rank() > 1)
      return node.error("the pad value must be a scalar, got {}", v->type().str());
  }
  Graph &g = *node.graph();
  Shape out = x->shape();
  std::optional<std::vector<int64_t>> pads = constInts(node, 1);
  for (int64_t i = 0; i < r; ++i) {
    const Dim &d = out[i];
    if (!pads) {
      out[i] = g.freshDim();
      continue;
    }
    int64_t delta, size;
    if (__builtin_add_overflow((*pads)[i], (*pads)[i + r], &delta) ||
        (d.isStatic() && __builtin_add_overflow(d.value(), delta, &size)))
      return node.error("pads [{}] make axis {} too large", fmt::join(*pads, ","), i);
    if (d.isStatic()) {
      if (d.value() + delta < 0)
        return node.error("pads [{}] crop axis {} of {} below zero", fmt::join(*pads, ","), i,
                          x->type().str());
      out[i] = Dim(d.value() + delta);
    } else if (delta != 0) {
      out[i] = g.freshDim();
    }
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferTile(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0);
  int64_t r = x->rank();
  NNC_ASSIGN_OR_RETURN(int64_t n, vectorLength(node, 1, "repeats"));
  if (n != r)
    return node.error("repeats has {} entries for {}", n, x->type().str());
  Graph &g = *node.graph();
  Shape out = x->shape();
  std::optional<std::vector<int64_t>> reps = constInts(node, 1);
  for (int64_t i = 0; i < r; ++i) {
    if (!reps) {
      out[i] = g.freshDim();
      continue;
    }
    int64_t rep = (*reps)[i];
    if (rep < 0)
      return node.error("repeats has a negative entry {}", rep);
    if (rep == 0)
      out[i] = Dim(0);
    else if (out[i].isStatic()) {
      int64_t size;
      if (__builtin_mul_overflow(out[i].value(), rep, &size))
        return node.error("repeats entry {} makes axis {} too large", rep, i);
      out[i] = Dim(size);
    }
    else if (rep != 1)
      out[i] = g.freshDim();
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferGather(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *idx = node.operand(1);
  if (!isInteger(idx->dtype()))
    return node.error("indices must be integers, got {}", idx->type().str());
  if (x->rank() == 0)
    return node.error("cannot gather from a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axisAttr, x->rank(), node));
  Shape out(x->shape().begin(), x->shape().begin() + axis);
  out.insert(out.end(), idx->shape().begin(), idx->shape().end());
  out.insert(out.end(), x->shape().begin() + axis + 1, x->shape().end());
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferGatherElements(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *idx = node.operand(1);
  if (!isInteger(idx->dtype()))
    return node.error("indices must be integers, got {}", idx->type().str());
  if (x->rank() == 0)
    return node.error("cannot gather from a scalar");
  if (idx->rank() != x->rank())
    return node.error("indices {} must have the rank of the data {}", idx->type().str(),
                      x->type().str());
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  NNC_TRY(normalizeAxis(axisAttr, x->rank(), node).takeError());
  return Types{TensorType(x->dtype(), idx->shape())};
}

Expected<Types> inferGatherND(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *idx = node.operand(1);
  if (!isInteger(idx->dtype()))
    return node.error("indices must be integers, got {}", idx->type().str());
  NNC_ASSIGN_OR_RETURN(int64_t b, intAttr(node, "batch_dims"));
  int64_t r = x->rank(), q = idx->rank();
  if (r < 1 || q < 1)
    return node.error("data {} and indices {} must have rank >= 1", x->type().str(),
                      idx->type().str());
  if (b < 0 || b >= std::min(r, q))
    return node.error("batch_dims {} must be in [0, {})", b, std::min(r, q));
  const Dim &last = idx->shape()[q - 1];
  if (!last.isStatic())
    return node.error("the last dim of indices {} must be static", idx->type().str());
  int64_t k = last.value();
  if (k < 1 || b + k > r)
    return node.error("indices {} index {} dims of data {} after {} batch dims",
                      idx->type().str(), k, x->type().str(), b);
  Shape out;
  for (int64_t i = 0; i < q - 1; ++i) {
    if (i < b) {
      Expected<Dim> m = mergeDims(idx->shape()[i], x->shape()[i], node,
                                  "batch dims of data and indices differ");
      if (!m)
        return m.takeError();
      out.push_back(*m);
    } else {
      out.push_back(idx->shape()[i]);
    }
  }
  out.insert(out.end(), x->shape().begin() + b + k, x->shape().end());
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferScatterElements(const Node &node) {
  NNC_TRY(requireOperands(node, 3));
  const Value *x = node.operand(0), *idx = node.operand(1), *upd = node.operand(2);
  if (!isInteger(idx->dtype()))
    return node.error("indices must be integers, got {}", idx->type().str());
  if (upd->dtype() != x->dtype())
    return node.error("updates {} must have the dtype of the data {}", upd->type().str(),
                      x->type().str());
  if (x->rank() == 0 || idx->rank() != x->rank() || upd->rank() != x->rank())
    return node.error("data {}, indices {} and updates {} must have one rank >= 1",
                      x->type().str(), idx->type().str(), upd->type().str());
  for (int64_t i = 0; i < idx->rank(); ++i)
    NNC_TRY(mergeDims(idx->shape()[i], upd->shape()[i], node,
                      "indices and updates have different shapes")
                .takeError());
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  NNC_TRY(normalizeAxis(axisAttr, x->rank(), node).takeError());
  NNC_ASSIGN_OR_RETURN(std::string red, stringAttr(node, "reduction"));
  if (!kReductions.count(red))
    return node.error("unknown reduction '{}' (expected none, add, mul, max or min)", red);
  return Types{x->type()};
}

Expected<Types> inferScatterND(const Node &node) {
  NNC_TRY(requireOperands(node, 3));
  const Value *x = node.operand(0), *idx = node.operand(1), *upd = node.operand(2);
  if (!isInteger(idx->dtype()))
    return node.error("indices must be integers, got {}", idx->type().str());
  if (upd->dtype() != x->dtype())
    return node.error("updates {} must have the dtype of the data {}", upd->type().str(),
                      x->type().str());
  NNC_ASSIGN_OR_RETURN(std::string red, stringAttr(node, "reduction"));
  if (!kReductions.count(red))
    return node.error("unknown reduction '{}' (expected none, add, mul, max or min)", red);
  int64_t r = x->rank(), q = idx->rank();
  if (r < 1 || q < 1)
    return node.error("data {} and indices {} must have rank >= 1", x->type().str(),
                      idx->type().str());
  const Dim &last = idx->shape()[q - 1];
  if (last.isStatic()) {
    int64_t k = last.value();
    if (k > r)
      return node.error("indices {} index {} dims of data {}", idx->type().str(), k,
                        x->type().str());
    if (upd->rank() != q - 1 + r - k)
      return node.error("updates {} must have rank {} for data {} and indices {}",
                        upd->type().str(), q - 1 + r - k, x->type().str(), idx->type().str());
    for (int64_t i = 0; i < upd->rank(); ++i) {
      const Dim &want = i < q - 1 ? idx->shape()[i] : x->shape()[k + i - (q - 1)];
      NNC_TRY(mergeDims(want, upd->shape()[i], node, "updates has the wrong shape").takeError());
    }
  }
  return Types{x->type()};
}

Expected<Types> inferRange(const Node &node) {
  NNC_TRY(requireOperands(node, 3));
  DType t = node.operand(0)->dtype();
  for (size_t i = 0; i < 3; ++i) {
    const Value *v = node.operand(i);
    if (v->dtype() != t)
      return node.error("start, limit and delta must share a dtype, got {} and {}", dtypeName(t),
                        dtypeName(v->dtype()));
    bool scalarLike = v->rank() == 0 || (v->rank() == 1 && v->shape()[0] == Dim(1));
    if (!scalarLike)
      return node.error("operand {} must be a scalar, got {}", i, v->type().str());
  }
  if (!isNumeric(t))
    return node.error("range needs a numeric dtype, got {}", dtypeName(t));
  const Tensor *s = node.constantOperand(0), *l = node.constantOperand(1),
               *d = node.constantOperand(2);
  if (!s || !l || !d)
    return Types{TensorType(t, {node.graph()->freshDim()})};
  int64_t count;
  if (isFloat(t)) {
    double start = s->elementAsDouble(0), limit = l->elementAsDouble(0),
           delta = d->elementAsDouble(0);
    if (delta == 0)
      return node.error("delta must not be 0");
    double c = t == DType::F64 ? std::ceil((limit - start) / delta)
                               : std::ceil(static_cast<float>(static_cast<float>(limit - start) /
                                                              static_cast<float>(delta)));
    if (!(c < 9.2e18))
      return node.error("range has too many elements");
    // An empty range can be any negative count, -inf included (a limit of -inf), which
    // does not convert to an integer.
    count = c > 0 ? static_cast<int64_t>(c) : 0;
  } else {
    __int128 start = s->elementAsInt(0), limit = l->elementAsInt(0), delta = d->elementAsInt(0);
    if (t == DType::U64) {
      start = s->data<uint64_t>()[0];
      limit = l->data<uint64_t>()[0];
      delta = d->data<uint64_t>()[0];
    }
    if (delta == 0)
      return node.error("delta must not be 0");
    __int128 diff = limit - start;
    __int128 c = delta > 0 ? (diff > 0 ? (diff + delta - 1) / delta : 0)
                           : (diff < 0 ? (diff + delta + 1) / delta : 0);
    count = static_cast<int64_t>(c);
  }
  return Types{TensorType(t, {count})};
}

Expected<Types> inferConstantOfShape(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Attribute *a = node.attr("value");
  if (!a || !std::holds_alternative<Tensor>(*a))
    return node.error("missing tensor attribute 'value'");
  const Tensor &value = std::get<Tensor>(*a);
  if (value.isNull() || value.numElements() != 1)
    return node.error("value must hold exactly one element");
  const Value *s = node.operand(0);
  if (s->rank() == 1 && s->shape()[0] == Dim(0))
    return Types{TensorType(value.dtype(), {})};
  NNC_ASSIGN_OR_RETURN(int64_t k, vectorLength(node, 0, "shape"));
  Shape out;
  if (std::optional<std::vector<int64_t>> vals = constInts(node, 0)) {
    for (int64_t v : *vals) {
      if (v < 0)
        return node.error("shape has a negative dim {}", v);
      out.push_back(Dim(v));
    }
  } else {
    for (int64_t i = 0; i < k; ++i)
      out.push_back(node.graph()->freshDim());
  }
  return Types{TensorType(value.dtype(), out)};
}

Expected<Types> inferOneHot(const Node &node) {
  NNC_TRY(requireOperands(node, 3));
  const Value *idx = node.operand(0), *depth = node.operand(1), *values = node.operand(2);
  if (!isNumeric(idx->dtype()))
    return node.error("indices must be numeric, got {}", idx->type().str());
  if (!isNumeric(depth->dtype()) ||
      !(depth->rank() == 0 || (depth->rank() == 1 && depth->shape()[0] == Dim(1))))
    return node.error("depth must be a numeric scalar, got {}", depth->type().str());
  if (values->rank() != 1 || values->shape()[0] != Dim(2))
    return node.error("values must be a 2-element vector [off, on], got {}",
                      values->type().str());
  int64_t r = idx->rank();
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, intAttr(node, "axis"));
  if (axisAttr < -(r + 1) || axisAttr > r)
    return node.error("axis {} is out of range for rank {}", axisAttr, r + 1);
  int64_t axis = axisAttr < 0 ? axisAttr + r + 1 : axisAttr;
  Dim d = node.graph()->freshDim();
  if (const Tensor *t = node.constantOperand(1)) {
    double v = t->elementAsDouble(0);
    if (!(v >= 1) || v > 9.2e18)
      return node.error("depth must be positive, got {}", v);
    d = Dim(static_cast<int64_t>(v));
  }
  Shape out = idx->shape();
  out.insert(out.begin() + axis, d);
  return Types{TensorType(values->dtype(), out)};
}

Expected<Types> inferEyeLike(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() != 2)
    return node.error("needs a 2-D operand, got {}", x->type().str());
  NNC_TRY(intAttr(node, "k").takeError());
  const Attribute *a = node.attr("dtype");
  DType t = a && std::holds_alternative<DType>(*a) ? std::get<DType>(*a) : x->dtype();
  return Types{TensorType(t, x->shape())};
}

Expected<Types> inferTrilu(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() < 2)
    return node.error("needs rank >= 2, got {}", x->type().str());
  NNC_TRY(intAttr(node, "upper").takeError());
  if (const Value *k = node.operand(1)) {
    if (!isInteger(k->dtype()) ||
        !(k->rank() == 0 || (k->rank() == 1 && k->shape()[0] == Dim(1))))
      return node.error("k must be an integer scalar, got {}", k->type().str());
  }
  return Types{x->type()};
}

Expected<Types> inferNonZero(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  return Types{TensorType(DType::I64, {Dim(x->rank()), node.graph()->freshDim()})};
}

Expected<Types> inferDepthToSpace(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() != 4)
    return node.error("needs a 4-D NCHW operand, got {}", x->type().str());
  NNC_ASSIGN_OR_RETURN(int64_t b, intAttr(node, "blocksize"));
  if (b < 1)
    return node.error("blocksize must be positive, got {}", b);
  NNC_ASSIGN_OR_RETURN(std::string mode, stringAttr(node, "mode"));
  if (mode != "DCR" && mode != "CRD")
    return node.error("unknown mode '{}' (expected DCR or CRD)", mode);
  int64_t bb;
  if (__builtin_mul_overflow(b, b, &bb))
    return node.error("blocksize {} is too large", b);
  Graph &g = *node.graph();
  const Shape &s = x->shape();
  Shape out = s;
  if (s[1].isStatic()) {
    if (s[1].value() % (b * b) != 0)
      return node.error("channels {} are not divisible by blocksize^2 = {}", s[1].value(), b * b);
    out[1] = Dim(s[1].value() / (b * b));
  } else if (b != 1) {
    out[1] = g.freshDim();
  }
  for (int i = 2; i < 4; ++i) {
    int64_t size = 0;
    if (s[i].isStatic() && __builtin_mul_overflow(s[i].value(), b, &size))
      return node.error("blocksize {} makes dim {} of {} too large", b, i, x->type().str());
    out[i] = s[i].isStatic() ? Dim(size) : (b == 1 ? s[i] : g.freshDim());
  }
  return Types{TensorType(x->dtype(), out)};
}

Expected<Types> inferSpaceToDepth(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() != 4)
    return node.error("needs a 4-D NCHW operand, got {}", x->type().str());
  NNC_ASSIGN_OR_RETURN(int64_t b, intAttr(node, "blocksize"));
  if (b < 1)
    return node.error("blocksize must be positive, got {}", b);
  int64_t bb, c = 0;
  if (__builtin_mul_overflow(b, b, &bb) ||
      (x->shape()[1].isStatic() && __builtin_mul_overflow(x->shape()[1].value(), bb, &c)))
    return node.error("blocksize {} is too large", b);
  Graph &g = *node.graph();
  const Shape &s = x->shape();
  Shape out = s;
  out[1] = s[1].isStatic() ? Dim(c) : (b == 1 ? s[1] : g.freshDim());
  for (int i = 2; i < 4; ++i) {
    if (s[i].isStatic()) {
      if (s[i].value() % b != 0)
        return node.error("dim {} of {} is not divisible by blocksize {}", i, x->type().str(), b);
      out[i] = Dim(s[i].value() / b);
    } else if (b != 1) {
      out[i] = g.freshDim();
    }
  }
  return Types{TensorType(x->dtype(), out)};
}

} // namespace nnc::shape

// Shape rules of unique (data-dependent results) and the table-driven ops of text and tree
// models: tfidf_vectorizer and tree_ensemble.
#include "ShapeRules.h"

namespace nnc::shape {

namespace {

using Types = Expected<std::vector<TensorType>>;

/// The static element count of `v`, or -1 when a dim is symbolic.
int64_t staticCount(const Value *v) {
  int64_t n = 1;
  for (const Dim &d : v->shape()) {
    if (!d.isStatic())
      return -1;
    n *= d.value();
  }
  return n;
}

/// `v` is a vector of dtype `t` (of `len` entries when len >= 0); else an error naming `what`.
Error requireVector(const Node &node, const Value *v, DType t, int64_t len, const char *what) {
  if (!v || v->dtype() != t || v->rank() != 1 ||
      (len >= 0 && v->shape()[0].isStatic() && v->shape()[0].value() != len))
    return node.error("{} must be a {} vector{}, got {}", what, dtypeName(t),
                      len >= 0 ? fmt::format(" of {} entries", len) : std::string(),
                      v ? v->type().str() : std::string("nothing"));
  return Error::success();
}

} // namespace

Types inferUnique(const Node &node) {
  const Value *x = node.operand(0);
  if (!x)
    return node.error("operand 0 is missing");
  if (!isNumeric(x->dtype()) && x->dtype() != DType::Bool)
    return node.error("x must be numeric or bool, got {}", x->type().str());
  int64_t s = node.getInt("sorted", 1);
  if (s != 0 && s != 1)
    return node.error("sorted must be 0 or 1, got {}", s);
  Dim u = node.graph()->freshDim();
  Shape y{u}, inverse;
  if (node.hasAttr("axis")) {
    int64_t r = x->rank(), axis = node.getInt("axis");
    if (axis < -r || axis >= r)
      return node.error("axis {} is out of range for x {}", axis, x->type().str());
    axis = axis < 0 ? axis + r : axis;
    y = x->shape();
    y[static_cast<size_t>(axis)] = u;
    inverse = {x->shape()[static_cast<size_t>(axis)]};
  } else {
    int64_t n = staticCount(x);
    inverse = {n >= 0 ? Dim(n) : node.graph()->freshDim()};
  }
  std::vector<TensorType> types{TensorType(x->dtype(), y), TensorType(DType::I64, {u}),
                                TensorType(DType::I64, inverse), TensorType(DType::I64, {u})};
  types.resize(std::min<size_t>(types.size(), std::max<size_t>(node.numResults(), 1)));
  return types;
}

Types inferTfIdfVectorizer(const Node &node) {
  const Value *x = node.operand(0);
  if (!x || !isInteger(x->dtype()) || x->rank() < 1 || x->rank() > 2)
    return node.error("x must be an integer [C] or [B, C], got {}",
                      x ? x->type().str() : std::string("nothing"));
  int64_t lo = node.getInt("min_gram_length"), hi = node.getInt("max_gram_length");
  int64_t skip = node.getInt("max_skip_count"), size = node.getInt("output_size");
  if (lo < 1 || hi < lo)
    return node.error("min_gram_length {} and max_gram_length {} must satisfy 1 <= min <= max", lo,
                      hi);
  if (skip < 0)
    return node.error("max_skip_count must not be negative, got {}", skip);
  if (size < 1)
    return node.error("output_size must be positive, got {}", size);
  std::string mode = node.getString("mode");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return node.error("unknown mode '{}' (TF, IDF or TFIDF)", mode);
  NNC_TRY(requireVector(node, node.operand(1), DType::I64, -1, "pool"));
  NNC_TRY(requireVector(node, node.operand(2), DType::I64, -1, "columns"));
  int64_t pool = staticCount(node.operand(1)), grams = staticCount(node.operand(2));
  // ngram_counts: the start in the pool of each length's n-grams, ascending.
  const std::vector<int64_t> &starts = node.getInts("ngram_counts");
  int64_t total = 0;
  for (size_t n = 0; n < starts.size(); ++n) {
    int64_t end = n + 1 < starts.size() ? starts[n + 1] : pool;
    if (starts[n] < 0 || (pool >= 0 && end > pool) || end < starts[n] ||
        (end - starts[n]) % int64_t(n + 1) != 0)
      return node.error("ngram_counts entry {} ({}) does not start a run of {}-grams in a pool "
                        "of {}",
                        n, starts[n], n + 1, pool);
    total += (end - starts[n]) / int64_t(n + 1);
  }
  if (pool >= 0 && grams >= 0 && total != grams)
    return node.error("the pool holds {} n-grams but columns (ngram_indexes) has {} entries", total,
                      grams);
  if (const Value *w = node.operand(3)) {
    NNC_TRY(requireVector(node, w, DType::F32, -1, "weights"));
    int64_t nw = staticCount(w);
    if (nw >= 0 && nw < size)
      return node.error("weights has {} entries, fewer than the {} output columns", nw, size);
  }
  Shape out{Dim(size)};
  if (x->rank() == 2)
    out.insert(out.begin(), x->shape()[0]);
  return std::vector<TensorType>{TensorType(DType::F32, out)};
}

Types inferTreeEnsemble(const Node &node) {
  const Value *x = node.operand(0);
  if (!x || !isFloat(x->dtype()) || x->rank() != 2)
    return node.error("x must be a floating-point [N, features], got {}",
                      x ? x->type().str() : std::string("nothing"));
  DType t = x->dtype();
  const Value *nodes = node.operand(1);
  if (!nodes || nodes->dtype() != DType::I64 || nodes->rank() != 2 ||
      !nodes->shape()[1].isStatic() || nodes->shape()[1].value() != 9)
    return node.error("nodes must be i64 [M, 9], got {}",
                      nodes ? nodes->type().str() : std::string("nothing"));
  int64_t m = nodes->shape()[0].isStatic() ? nodes->shape()[0].value() : -1;
  NNC_TRY(requireVector(node, node.operand(2), t, m, "splits"));
  NNC_TRY(requireVector(node, node.operand(3), DType::I64, -1, "leaf_targets"));
  int64_t leaves = staticCount(node.operand(3));
  NNC_TRY(requireVector(node, node.operand(4), t, leaves, "leaf_weights"));
  NNC_TRY(requireVector(node, node.operand(5), DType::I64, -1, "roots"));
  if (node.numOperands() > 6 && node.operand(6))
    NNC_TRY(requireVector(node, node.operand(6), t, -1, "members"));
  int64_t agg = node.getInt("aggregate_function"), post = node.getInt("post_transform");
  int64_t targets = node.getInt("n_targets"), depth = node.getInt("depth");
  if (agg < 0 || agg > 3)
    return node.error("aggregate_function must be 0-3 (average, sum, min, max), got {}", agg);
  if (post < 0 || post > 4)
    return node.error("post_transform must be 0-4 (none, softmax, logistic, softmax_zero, "
                      "probit), got {}",
                      post);
  if (targets < 1)
    return node.error("n_targets must be positive, got {}", targets);
  if (depth < 0)
    return node.error("depth must not be negative, got {}", depth);
  return std::vector<TensorType>{TensorType(t, {x->shape()[0], Dim(targets)})};
}

} // namespace nnc::shape

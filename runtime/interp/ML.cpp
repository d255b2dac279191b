// Interpreter kernels of the table-driven text and tree ops: tfidf_vectorizer (ONNX
// TfIdfVectorizer-9 over integers) and tree_ensemble (ai.onnx.ml TreeEnsemble-5), as ONNX's
// reference computes them (the post transforms as onnxruntime's).
#include <algorithm>
#include <cmath>
#include <limits>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"

namespace nnc::interp {

Results evalTfIdfVectorizer(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  std::vector<int64_t> pool = ops[1].toInt64Vector(), cols = ops[2].toInt64Vector();
  bool hasWeights = ops.size() > 3 && !ops[3].isNull();
  std::vector<double> w = hasWeights ? nn::toDoubles(ops[3]) : std::vector<double>{};
  int64_t lo = node.getInt("min_gram_length"), hi = node.getInt("max_gram_length");
  int64_t skip = node.getInt("max_skip_count"), size = node.getInt("output_size");
  std::string mode = node.getString("mode");
  const std::vector<int64_t> &starts = node.getInts("ngram_counts");
  if (hasWeights && static_cast<int64_t>(w.size()) < size)
    return node.error("weights has {} entries, fewer than the {} output columns", w.size(), size);
  Extents xe = x.extents();
  int64_t rows = xe.size() == 2 ? xe[0] : 1, c = xe.back();
  // The n-grams of length n: `count[n]` of them from pool[starts[n - 1]], ids from base[n].
  int64_t lengths = static_cast<int64_t>(starts.size());
  std::vector<int64_t> count(static_cast<size_t>(lengths + 1), 0),
      base(static_cast<size_t>(lengths + 1), 0);
  int64_t id = 0;
  for (int64_t n = 1; n <= lengths; ++n) {
    int64_t end = n < lengths ? starts[size_t(n)] : static_cast<int64_t>(pool.size());
    count[size_t(n)] = (end - starts[size_t(n - 1)]) / n;
    base[size_t(n)] = id;
    id += count[size_t(n)];
  }
  if (id != static_cast<int64_t>(cols.size()))
    return node.error("the pool holds {} n-grams but columns has {} entries", id, cols.size());
  std::vector<double> freq(static_cast<size_t>(rows * size), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    auto item = [&](int64_t i) { return x.elementAsInt(r * c + i); };
    for (int64_t d = 1; d <= skip + 1; ++d) {
      // Unigrams do not depend on the skip: they count at distance 1 only.
      int64_t from = d == 1 ? lo : std::max<int64_t>(lo, 2);
      if (from > hi)
        break;
      for (int64_t s = 0; s < c; ++s)
        for (int64_t n = from; n <= std::min(hi, lengths) && s + (n - 1) * d < c; ++n) {
          int64_t found = -1;
          const int64_t *grams = pool.data() + starts[size_t(n - 1)];
          for (int64_t g = 0; g < count[size_t(n)]; ++g) {
            bool match = true;
            for (int64_t k = 0; k < n && match; ++k)
              match = grams[g * n + k] == item(s + k * d);
            found = match ? g : found;
          }
          if (found < 0)
            continue;
          int64_t col = cols[size_t(base[size_t(n)] + found)];
          if (col < 0 || col >= size)
            return node.error("ngram_indexes entry {} is {}, outside the {} output columns",
                              base[size_t(n)] + found, col, size);
          freq[size_t(r * size + col)] += 1;
        }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < size; ++i) {
      double &f = freq[size_t(r * size + i)];
      double wi = hasWeights ? w[size_t(i)] : 1.0;
      if (mode == "IDF")
        f = f > 0 ? wi : 0.0;
      else if (mode == "TFIDF")
        f = wi * f;
    }
  Extents ye{size};
  if (xe.size() == 2)
    ye = {rows, size};
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(DType::F32, ye, freq));
  return std::vector<Tensor>{y};
}

namespace {

/// Whether interior node `row` of tree_ensemble's table sends feature value v to its true
/// child.
bool goesTrue(const int64_t *row, double split, double v, const std::vector<double> &members) {
  if (row[6] != 0 && std::isnan(v))
    return true;
  switch (row[1]) {
  case 0:
    return v <= split;
  case 1:
    return v < split;
  case 2:
    return v >= split;
  case 3:
    return v > split;
  case 4:
    return v == split;
  case 5:
    return v != split;
  default:
    for (int64_t m = row[7]; m < row[8]; ++m)
      if (members[size_t(m)] == v)
        return true;
    return false;
  }
}

/// onnxruntime's inverse error function (Winitzki's approximation).
double erfInv(double x) {
  double sgn = x < 0 ? -1.0 : 1.0;
  x = (1 - x) * (1 + x);
  double lg = std::log(x);
  double v = 2 / (3.14159 * 0.147) + 0.5 * lg;
  double v2 = 1 / 0.147 * lg;
  double v3 = -v + std::sqrt(v * v - v2);
  return sgn * std::sqrt(v3 - v);
}

} // namespace

Results evalTreeEnsemble(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t rows = x.extents()[0], features = x.extents()[1];
  std::vector<int64_t> nodes = ops[1].toInt64Vector(), leafTargets = ops[3].toInt64Vector(),
                       roots = ops[5].toInt64Vector();
  std::vector<double> xv = nn::toDoubles(x), splits = nn::toDoubles(ops[2]),
                      leafWeights = nn::toDoubles(ops[4]);
  std::vector<double> members =
      ops.size() > 6 && !ops[6].isNull() ? nn::toDoubles(ops[6]) : std::vector<double>{};
  int64_t agg = node.getInt("aggregate_function"), post = node.getInt("post_transform");
  int64_t targets = node.getInt("n_targets"), depth = node.getInt("depth");
  int64_t numNodes = static_cast<int64_t>(splits.size()),
          numLeaves = static_cast<int64_t>(leafWeights.size());
  // The importer checked the tables; a hand-written graph gets the same checks here.
  for (int64_t i = 0; i < numNodes; ++i) {
    const int64_t *row = &nodes[size_t(i * 9)];
    bool ok = row[0] >= 0 && row[0] < features && row[1] >= 0 && row[1] <= 6 && row[2] >= 0 &&
              row[2] < (row[3] ? numLeaves : numNodes) && row[4] >= 0 &&
              row[4] < (row[5] ? numLeaves : numNodes) && row[7] >= 0 && row[7] <= row[8] &&
              row[8] <= static_cast<int64_t>(members.size());
    if (!ok)
      return node.error("tree node {} refers outside the tables", i);
  }
  for (int64_t l : leafTargets)
    if (l < 0 || l >= targets)
      return node.error("leaf target {} is outside the {} targets", l, targets);
  double dtMax = x.dtype() == DType::F64   ? std::numeric_limits<double>::max()
                 : x.dtype() == DType::F32 ? double(std::numeric_limits<float>::max())
                 : x.dtype() == DType::F16 ? 65504.0
                                           : 3.3895313892515355e38;
  double init = agg == 2 ? dtMax : agg == 3 ? -dtMax : 0.0;
  std::vector<double> y(static_cast<size_t>(rows * targets), init);
  double trees = double(roots.size());
  for (int64_t r = 0; r < rows; ++r) {
    double *out = &y[size_t(r * targets)];
    for (int64_t root : roots) {
      int64_t leaf = root < 0 ? -1 - root : -1, cur = root;
      for (int64_t step = 0; leaf < 0 && step < depth; ++step) {
        if (cur < 0 || cur >= numNodes)
          return node.error("tree root {} is outside the {} nodes", cur, numNodes);
        const int64_t *row = &nodes[size_t(cur * 9)];
        bool t = goesTrue(row, splits[size_t(cur)], xv[size_t(r * features + row[0])], members);
        int64_t next = t ? row[2] : row[4];
        if (t ? row[3] : row[5])
          leaf = next;
        else
          cur = next;
      }
      if (leaf < 0 || leaf >= numLeaves)
        return node.error("a tree does not reach a leaf within {} nodes", depth);
      double wv = leafWeights[size_t(leaf)];
      double &o = out[size_t(leafTargets[size_t(leaf)])];
      if (agg == 0)
        o += wv / trees;
      else if (agg == 1)
        o += wv;
      else if (agg == 2)
        o = std::min(o, wv);
      else
        o = std::max(o, wv);
    }
    if (post == 1 || post == 3) {
      double mx = *std::max_element(out, out + targets), sum = 0;
      for (int64_t k = 0; k < targets; ++k) {
        if (post == 3 && !(out[k] > 1e-7 || out[k] < -1e-7)) {
          out[k] *= std::exp(-mx);
        } else {
          out[k] = std::exp(out[k] - mx);
          sum += out[k];
        }
      }
      for (int64_t k = 0; k < targets; ++k)
        out[k] /= sum;
    } else if (post == 2) {
      for (int64_t k = 0; k < targets; ++k)
        out[k] = 1 / (1 + std::exp(-out[k]));
    } else if (post == 4) {
      for (int64_t k = 0; k < targets; ++k)
        out[k] = std::sqrt(2.0) * erfInv(2 * out[k] - 1);
    }
  }
  NNC_ASSIGN_OR_RETURN(Tensor yt, nn::fromDoubles(x.dtype(), {rows, targets}, y));
  return std::vector<Tensor>{yt};
}

} // namespace nnc::interp

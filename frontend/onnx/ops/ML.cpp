// ONNX lowerings of the classic machine-learning operators: TfIdfVectorizer (tfidf_vectorizer,
// its pool as constant operands) and the ai.onnx.ml operators nnc supports: ArrayFeatureExtractor
// and Binarizer (compositions of gather, compares and casts) and TreeEnsemble (tree_ensemble
// over tables the importer builds from the attributes and checks: indices in range, every tree
// acyclic). The other ai.onnx.ml operators stay unsupported (the importer names them); those
// over string tensors (LabelEncoder's string keys, ...) cannot be, nnc having no string dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

/// ArrayFeatureExtractor-1: the entries `indices` (any shape, read flat) of X's last axis:
/// gather(X, reshape(indices, [-1]), axis = -1); a 1-D X gives [1, count], as ONNX's reference.
Error lowerArrayFeatureExtractor(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "Y"));
  if (x->rank() < 1)
    return ctx.error("X must have rank >= 1, got {}", x->type().str());
  if (!isInteger(idx->dtype()))
    return ctx.error("Y (the indices) must be an integer tensor, got {}", idx->type().str());
  if (idx->dtype() != DType::I64) {
    NNC_ASSIGN_OR_RETURN(idx, ctx.emit(K::Cast, {idx}, {{"to", DType::I64}}));
  }
  if (idx->rank() != 1) {
    NNC_ASSIGN_OR_RETURN(idx, ctx.emit(K::Reshape, {idx, ctx.i64Vector({-1})},
                                       {{"allowzero", Attribute(int64_t(0))}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * y,
                       ctx.emit(K::Gather, {x, idx}, {{"axis", Attribute(x->rank() - 1)}}));
  if (x->rank() == 1) {
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Reshape, {y, ctx.i64Vector({1, -1})},
                                     {{"allowzero", Attribute(int64_t(0))}}));
  }
  return ctx.setOutput(0, y);
}

/// Binarizer-1: 1 where X > threshold, else 0, in X's dtype (NaN gives 0). For an integer X
/// the float threshold t is compared exactly: x > t is x > floor(t), clamped to X's range.
Error lowerBinarizer(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(double t, ctx.floatAttr("threshold", 0.0));
  DType dt = x->dtype();
  if (dt == DType::Bool || !(isFloat(dt) || isInteger(dt)))
    return ctx.error("X must be a numeric tensor, got {}", x->type().str());
  K cmp = K::Greater;
  Value *thr = nullptr;
  if (isFloat(dt)) {
    thr = ctx.scalar(dt, t);
  } else {
    // x > t for integers x is x > floor(t): every x passes below the dtype's range, none at
    // or above its largest value (or for a NaN t).
    int bits = static_cast<int>(dtypeSize(dt)) * 8;
    double lowest = isSignedInteger(dt) ? -std::ldexp(1.0, bits - 1) : 0.0;
    double highest = isSignedInteger(dt) ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
    double f = std::floor(t);
    if (std::isnan(t) || f >= highest - 1) {
      NNC_ASSIGN_OR_RETURN(Value * zero, ctx.emit(K::Sub, {x, x}));
      return ctx.setOutput(0, zero);
    }
    if (f < lowest) {
      cmp = K::GreaterEqual;
      f = lowest;
    }
    thr = ctx.scalar(dt, f);
  }
  NNC_ASSIGN_OR_RETURN(Value * above, ctx.emit(cmp, {x, thr}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::Cast, {above}, {{"to", dt}}));
  return ctx.setOutput(0, y);
}

/// A constant of x's float dtype `t` holding `v` (built in f64, cast when t is narrower).
Expected<Value *> floatConstant(LoweringContext &ctx, const std::vector<double> &v, DType t) {
  Value *c =
      ctx.constant(Tensor::fromVector<double>(DType::F64, {static_cast<int64_t>(v.size())}, v));
  if (t == DType::F64)
    return c;
  return ctx.emit(K::Cast, {c}, {{"to", t}});
}

std::vector<double> doublesOf(const Tensor &t) {
  std::vector<double> v(static_cast<size_t>(t.numElements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.elementAsDouble(static_cast<int64_t>(i));
  return v;
}

/// TfIdfVectorizer-9 over an integer X [C] or [B, C] (a string pool needs string tensors):
/// tfidf_vectorizer(x, pool, columns, weights?) with output_size max(ngram_indexes) + 1.
Error lowerTfIdfVectorizer(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  if (ctx.hasAttr("pool_strings"))
    return ctx.error("attribute 'pool_strings' needs string tensors, which nnc does not have");
  if (!isInteger(x->dtype()))
    return ctx.error("X must be an integer tensor, got {}", x->type().str());
  if (x->rank() == 0) {
    NNC_ASSIGN_OR_RETURN(
        x, ctx.emit(K::Reshape, {x, ctx.i64Vector({1})}, {{"allowzero", Attribute(int64_t(0))}}));
  }
  NNC_ASSIGN_OR_RETURN(int64_t lo, ctx.intAttr("min_gram_length", 1));
  NNC_ASSIGN_OR_RETURN(int64_t hi, ctx.intAttr("max_gram_length", 1));
  NNC_ASSIGN_OR_RETURN(int64_t skip, ctx.intAttr("max_skip_count", 0));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", ""));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> counts, ctx.intsAttr("ngram_counts", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> columns, ctx.intsAttr("ngram_indexes", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> pool, ctx.intsAttr("pool_int64s", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<double> weights, ctx.floatsAttr("weights", {}));
  if (columns.empty())
    return ctx.error("attribute 'ngram_indexes' is missing or empty");
  int64_t size = *std::max_element(columns.begin(), columns.end()) + 1;
  for (int64_t c : columns)
    if (c < 0)
      return ctx.error("ngram_indexes holds the negative column {}", c);
  std::vector<Value *> ops{x, ctx.i64Vector(pool), ctx.i64Vector(columns)};
  if (!weights.empty()) {
    std::vector<float> w(weights.begin(), weights.end());
    ops.push_back(ctx.constant(Tensor::fromVector<float>(DType::F32, {int64_t(w.size())}, w)));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::TfIdfVectorizer, ops,
                                           {{"min_gram_length", Attribute(lo)},
                                            {"max_gram_length", Attribute(hi)},
                                            {"max_skip_count", Attribute(skip)},
                                            {"mode", Attribute(mode)},
                                            {"ngram_counts", Attribute(counts)},
                                            {"output_size", Attribute(size)}}));
  return ctx.setOutput(0, y);
}

/// The interior nodes on the longest root-to-leaf path of the trees whose interior nodes are
/// `nodes` (true child, its leaf flag, false child, its leaf flag: rows of 9 as tree_ensemble
/// takes them) from `roots` (-1 - leaf for a tree that is one leaf); -1 when a tree has a cycle.
int64_t treeDepth(const std::vector<int64_t> &nodes, const std::vector<int64_t> &roots) {
  size_t m = nodes.size() / 9;
  // depth[i]: 0 not yet seen, -1 on the current path, else the depth below and at node i.
  std::vector<int64_t> depth(m, 0);
  int64_t deepest = 0;
  for (int64_t root : roots) {
    if (root < 0)
      continue;
    std::vector<std::pair<size_t, int>> stack{{size_t(root), 0}};
    while (!stack.empty()) {
      auto &[i, child] = stack.back();
      const int64_t *row = &nodes[i * 9];
      if (child == 0) {
        if (depth[i] > 0) {
          stack.pop_back();
          continue;
        }
        depth[i] = -1;
      }
      if (child < 2) {
        int64_t next = row[child == 0 ? 2 : 4];
        bool leaf = row[child == 0 ? 3 : 5] != 0;
        ++child;
        if (!leaf) {
          if (depth[size_t(next)] < 0)
            return -1;
          if (depth[size_t(next)] == 0)
            stack.push_back({size_t(next), 0});
        }
        continue;
      }
      int64_t below = 0;
      for (int side = 0; side < 2; ++side)
        if (row[side == 0 ? 3 : 5] == 0)
          below = std::max(below, depth[size_t(row[side == 0 ? 2 : 4])]);
      depth[i] = below + 1;
      deepest = std::max(deepest, depth[i]);
      stack.pop_back();
    }
  }
  return deepest;
}

/// TreeEnsemble-5 (ai.onnx.ml): the attributes checked and packed into tree_ensemble's tables.
Error lowerTreeEnsemble(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  if (ctx.opset() < 5)
    return ctx.error("TreeEnsemble is in ai.onnx.ml from opset 5; the model imports opset {}",
                     ctx.opset());
  DType dt = x->dtype();
  if (!isFloat(dt) || x->rank() != 2 || !x->shape()[1].isStatic())
    return ctx.error("X must be a floating-point [N, features] with static features, got {}",
                     x->type().str());
  int64_t features = x->shape()[1].value();
  NNC_ASSIGN_OR_RETURN(int64_t agg, ctx.intAttr("aggregate_function", 1));
  NNC_ASSIGN_OR_RETURN(int64_t post, ctx.intAttr("post_transform", 0));
  NNC_ASSIGN_OR_RETURN(int64_t targets, ctx.intAttr("n_targets", 0));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> featureIds, ctx.intsAttr("nodes_featureids", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> trueIds, ctx.intsAttr("nodes_truenodeids", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> falseIds, ctx.intsAttr("nodes_falsenodeids", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> trueLeafs, ctx.intsAttr("nodes_trueleafs", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> falseLeafs, ctx.intsAttr("nodes_falseleafs", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> leafTargets, ctx.intsAttr("leaf_targetids", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> roots, ctx.intsAttr("tree_roots", {}));
  size_t m = featureIds.size();
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> missing,
                       ctx.intsAttr("nodes_missing_value_tracks_true", std::vector<int64_t>(m, 0)));
  NNC_ASSIGN_OR_RETURN(Tensor modesT, ctx.tensorAttr("nodes_modes"));
  NNC_ASSIGN_OR_RETURN(Tensor splitsT, ctx.tensorAttr("nodes_splits"));
  NNC_ASSIGN_OR_RETURN(Tensor weightsT, ctx.tensorAttr("leaf_weights"));
  std::vector<int64_t> modes = modesT.toInt64Vector();
  std::vector<double> splits = doublesOf(splitsT), weights = doublesOf(weightsT), members;
  if (ctx.hasAttr("membership_values")) {
    NNC_ASSIGN_OR_RETURN(Tensor membersT, ctx.tensorAttr("membership_values"));
    members = doublesOf(membersT);
  }
  if (trueIds.size() != m || falseIds.size() != m || trueLeafs.size() != m ||
      falseLeafs.size() != m || missing.size() != m || modes.size() != m || splits.size() != m)
    return ctx.error("the nodes_* attributes must all have {} entries (nodes_featureids')", m);
  size_t leaves = weights.size();
  if (leafTargets.size() != leaves)
    return ctx.error("leaf_targetids has {} entries but leaf_weights {}", leafTargets.size(),
                     leaves);
  if (targets < 1)
    return ctx.error("n_targets must be positive, got {}", targets);
  if (agg < 0 || agg > 3 || post < 0 || post > 4)
    return ctx.error("aggregate_function {} must be 0-3 and post_transform {} 0-4", agg, post);
  for (int64_t t : leafTargets)
    if (t < 0 || t >= targets)
      return ctx.error("leaf_targetids holds {}, outside the {} targets", t, targets);
  // Node rows; each MEMBER node takes the next NaN-terminated run of membership_values.
  std::vector<int64_t> table;
  std::vector<double> memberList;
  size_t nextMember = 0;
  for (size_t i = 0; i < m; ++i) {
    auto inRange = [&](int64_t id, int64_t leaf) {
      return id >= 0 && size_t(id) < (leaf ? leaves : m);
    };
    if (featureIds[i] < 0 || featureIds[i] >= features || modes[i] < 0 || modes[i] > 6 ||
        !inRange(trueIds[i], trueLeafs[i]) || !inRange(falseIds[i], falseLeafs[i]))
      return ctx.error("tree node {} (feature {}, mode {}, children {} and {}) refers outside "
                       "the {} features, {} nodes or {} leaves",
                       i, featureIds[i], modes[i], trueIds[i], falseIds[i], features, m, leaves);
    int64_t begin = int64_t(memberList.size());
    if (modes[i] == 6) {
      while (nextMember < members.size() && !std::isnan(members[nextMember]))
        memberList.push_back(members[nextMember++]);
      if (nextMember >= members.size())
        return ctx.error("membership_values has no NaN-ended set for member node {}", i);
      ++nextMember;
    }
    table.insert(table.end(),
                 {featureIds[i], modes[i], trueIds[i], trueLeafs[i] != 0, falseIds[i],
                  falseLeafs[i] != 0, missing[i] != 0, begin, int64_t(memberList.size())});
  }
  if (nextMember != members.size())
    return ctx.error("membership_values holds more sets than there are member nodes");
  std::vector<int64_t> rootRows;
  for (int64_t r : roots) {
    if (r < 0 || size_t(r) >= m)
      return ctx.error("tree_roots holds {}, outside the {} nodes", r, m);
    size_t u = size_t(r);
    // A tree that is a single leaf (both branches the same leaf) is that leaf: leaf r, as
    // ONNX's reference reads it.
    bool single = trueLeafs[u] && falseLeafs[u] && trueIds[u] == falseIds[u];
    if (single && u >= leaves)
      return ctx.error("tree root {} is a single leaf but there are {} leaves", r, leaves);
    rootRows.push_back(single ? -1 - r : r);
  }
  int64_t depth = treeDepth(table, rootRows);
  if (depth < 0)
    return ctx.error("the trees have a cycle (nodes_truenodeids / nodes_falsenodeids)");
  Value *nodesV = ctx.constant(Tensor::fromVector<int64_t>(DType::I64, {int64_t(m), 9}, table));
  NNC_ASSIGN_OR_RETURN(Value * splitsV, floatConstant(ctx, splits, dt));
  NNC_ASSIGN_OR_RETURN(Value * weightsV, floatConstant(ctx, weights, dt));
  std::vector<Value *> ops{
      x, nodesV, splitsV, ctx.i64Vector(leafTargets), weightsV, ctx.i64Vector(rootRows)};
  if (!memberList.empty()) {
    NNC_ASSIGN_OR_RETURN(Value * membersV, floatConstant(ctx, memberList, dt));
    ops.push_back(membersV);
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::TreeEnsemble, ops,
                                           {{"aggregate_function", Attribute(agg)},
                                            {"post_transform", Attribute(post)},
                                            {"n_targets", Attribute(targets)},
                                            {"depth", Attribute(depth)}}));
  return ctx.setOutput(0, y);
}

} // namespace

void registerMLLowerings(LoweringTable &t) {
  t["TfIdfVectorizer"] = {{"max_gram_length", "max_skip_count", "min_gram_length", "mode",
                           "ngram_counts", "ngram_indexes", "pool_int64s", "pool_strings",
                           "weights"},
                          lowerTfIdfVectorizer};
  t["ai.onnx.ml:ArrayFeatureExtractor"] = {{}, lowerArrayFeatureExtractor};
  t["ai.onnx.ml:Binarizer"] = {{"threshold"}, lowerBinarizer};
  t["ai.onnx.ml:TreeEnsemble"] = {
      {"aggregate_function", "leaf_targetids", "leaf_weights", "membership_values", "n_targets",
       "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates",
       "nodes_missing_value_tracks_true", "nodes_modes", "nodes_splits", "nodes_trueleafs",
       "nodes_truenodeids", "post_transform", "tree_roots"},
      lowerTreeEnsemble};
}

} // namespace nnc::onnxfe

// Lowering of tfidf_vectorizer and tree_ensemble checked against the interpreter with the
// kernel evaluator (unscheduled and scheduled): every mode, gram range and skip count of the
// n-gram counter (a duplicate pool n-gram counts for the later), every branch mode (NaN
// features, set membership), aggregate function and post transform of the tree walk; and the
// shape rules' errors naming the node. (unique's data-dependent results run in the
// conformance tests: the kernel evaluator here has no extent buffers.)
#include "LowerTestUtil.h"

#include <fmt/format.h>

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"

using namespace nnc;
using namespace nnc::lowertest;

TEST(LowerML, TfIdfVectorizerEveryModeGramRangeAndSkip) {
  std::mt19937 rng(9);
  // Unigrams 0..3, bigrams (0 1) (1 2) (2 2) (0 1) -- listed twice --, the trigram (0 1 2).
  std::vector<int64_t> pool{0, 1, 2, 3, 0, 1, 1, 2, 2, 2, 0, 1, 0, 1, 2};
  std::vector<int64_t> columns{3, 0, 8, 1, 2, 7, 4, 6, 5};
  std::vector<float> weights{0.5f, 2, 1.5f, 3, 0.25f, 1, 4, 2.5f, 0.75f};
  for (const char *mode : {"TF", "IDF", "TFIDF"})
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{1, 1}, {1, 3}, {2, 2}, {2, 3}})
      for (int64_t skip : {0, 1, 3})
        for (bool withWeights : {false, true})
          for (Extents xe : {Extents{3, 8}, Extents{9}}) {
            Graph g;
            Value *x = g.addInput("x", TensorType(DType::I32, shapeFromExtents(xe)));
            std::vector<Value *> ops{x, constantValue(g, i64Vector(pool)),
                                     constantValue(g, i64Vector(columns))};
            if (withWeights)
              ops.push_back(constantValue(
                  g, Tensor::fromVector<float>(DType::F32, {int64_t(weights.size())}, weights)));
            Expected<Node *> n = g.createInferred(OpKind::TfIdfVectorizer, ops,
                                                  {{"min_gram_length", lo},
                                                   {"max_gram_length", hi},
                                                   {"max_skip_count", skip},
                                                   {"mode", std::string(mode)},
                                                   {"ngram_counts", std::vector<int64_t>{0, 4, 12}},
                                                   {"output_size", int64_t(9)}},
                                                  "tfidf");
            ASSERT_TRUE(n) << n.error().message();
            g.setOutputs({(*n)->result()});
            checkNode(**n, {randomTensor(DType::I32, xe, rng, 0, 3.9)},
                      fmt::format("tfidf {} grams {}-{} skip {} weights {} x {}", mode, lo, hi,
                                  skip, withWeights, extentsStr(xe)));
          }
}

TEST(LowerML, TfIdfVectorizerPoolNotMatchingItsCountsIsTheNodesError) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::I64, {4}));
  Expected<Node *> n = g.createInferred(
      OpKind::TfIdfVectorizer,
      {x, constantValue(g, i64Vector({1, 2, 3})), constantValue(g, i64Vector({0}))},
      {{"min_gram_length", int64_t(2)},
       {"max_gram_length", int64_t(2)},
       {"max_skip_count", int64_t(0)},
       {"mode", std::string("TF")},
       {"ngram_counts", std::vector<int64_t>{0, 0}},
       {"output_size", int64_t(1)}},
      "tf");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("'tf'"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("2-grams"), std::string::npos) << n.error().message();
}

namespace {

/// Two trees over 3 features that take every branch mode (and a third that is one leaf):
/// rows of tree_ensemble's node table (feature, mode, true, true is leaf, false, false is
/// leaf, NaN goes true, members begin, end).
const std::vector<int64_t> kNodes = {
    0, 0, 1, 0, 2, 0, 0, 0, 0, // 0: x0 <= s ? node 1 : node 2
    1, 6, 0, 1, 1, 1, 1, 0, 2, // 1: x1 in {0.5, 1} (or NaN) ? leaf 0 : leaf 1
    2, 3, 3, 0, 2, 1, 0, 0, 0, // 2: x2 > s ? node 3 : leaf 2
    0, 5, 3, 1, 4, 1, 0, 0, 0, // 3: x0 != s ? leaf 3 : leaf 4
    1, 1, 5, 1, 5, 0, 0, 0, 0, // 4: x1 < s ? leaf 5 : node 5
    2, 2, 6, 0, 6, 1, 0, 0, 0, // 5: x2 >= s ? node 6 : leaf 6
    0, 4, 7, 1, 0, 1, 1, 0, 0, // 6: x0 == s (or NaN) ? leaf 7 : leaf 0
};

} // namespace

TEST(LowerML, TreeEnsembleEveryModeAggregateAndPostTransform) {
  std::mt19937 rng(5);
  const double values[] = {-1, -0.5, 0, 0.5, 1, std::nan("")};
  for (DType t : {DType::F32, DType::F64})
    for (int64_t agg = 0; agg < 4; ++agg)
      for (int64_t post = 0; post < 5; ++post) {
        Graph g;
        Value *x = g.addInput("x", TensorType(t, {16, 3}));
        auto floats = [&](std::vector<double> v) {
          int64_t n = static_cast<int64_t>(v.size());
          if (t == DType::F64)
            return constantValue(g, Tensor::fromVector<double>(DType::F64, {n}, v));
          std::vector<float> f(v.begin(), v.end());
          return constantValue(g, Tensor::fromVector<float>(DType::F32, {n}, f));
        };
        std::vector<Value *> ops{
            x,
            constantValue(g, Tensor::fromVector<int64_t>(DType::I64, {7, 9}, kNodes)),
            floats({0, 0, -0.5, 0.5, 0.5, 0, 1}),
            constantValue(g, i64Vector({0, 1, 2, 0, 1, 2, 0, 1})),
            floats({0.5, -1.25, 2, 0.75, -0.5, 1.5, 0.125, 3}),
            constantValue(g, i64Vector({0, 4, -4})),
            floats({0.5, 1})};
        Expected<Node *> n = g.createInferred(OpKind::TreeEnsemble, ops,
                                              {{"aggregate_function", agg},
                                               {"post_transform", post},
                                               {"n_targets", int64_t(3)},
                                               {"depth", int64_t(3)}},
                                              "trees");
        ASSERT_TRUE(n) << n.error().message();
        g.setOutputs({(*n)->result()});
        std::vector<double> xs(48);
        for (double &v : xs)
          v = values[rng() % 6];
        Expected<Tensor> xt = Tensor::create(t, {16, 3});
        ASSERT_TRUE(xt);
        for (int64_t i = 0; i < 48; ++i) {
          if (t == DType::F32)
            xt->data<float>()[i] = static_cast<float>(xs[size_t(i)]);
          else
            xt->data<double>()[i] = xs[size_t(i)];
        }
        checkNode(**n, {*xt},
                  fmt::format("tree_ensemble {} aggregate {} post {}", dtypeName(t), agg, post));
      }
}

TEST(LowerML, TreeEnsembleOfTheWrongTablesIsTheNodesError) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3}));
  Value *f = g.addInput("f", TensorType(DType::F32, {7}));
  Value *leaves = g.addInput("l", TensorType(DType::F64, {8}));
  Expected<Node *> n = g.createInferred(
      OpKind::TreeEnsemble,
      {x, constantValue(g, Tensor::fromVector<int64_t>(DType::I64, {7, 9}, kNodes)), f,
       constantValue(g, i64Vector({0, 1, 2, 0, 1, 2, 0, 1})), leaves,
       constantValue(g, i64Vector({0}))},
      {{"aggregate_function", int64_t(1)},
       {"post_transform", int64_t(0)},
       {"n_targets", int64_t(3)},
       {"depth", int64_t(3)}},
      "te");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("'te'"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("leaf_weights"), std::string::npos) << n.error().message();
}

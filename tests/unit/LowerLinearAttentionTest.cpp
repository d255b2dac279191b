// Lowering of linear_attention checked against the interpreter with the kernel evaluator
// (unscheduled and scheduled) on random inputs: every update rule, grouped and multi-query
// heads, per-head and per-key decay, a shared beta, a past state of another dtype, f16 and
// f64; and the shape rule's errors named at the node.
#include "LowerTestUtil.h"

#include <fmt/format.h>

using namespace nnc;
using namespace nnc::lowertest;

namespace {

struct Case {
  const char *rule;
  int64_t batch, steps, qHeads, kvHeads, dk, dv;
  bool perKeyDecay = true, sharedBeta = false, past = false;
  DType t = DType::F32, state = DType::F32;
  double scale = 0.0;
};

void check(const Case &c) {
  std::string rule = c.rule;
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  std::mt19937 rng(27);
  Graph g;
  std::vector<Tensor> inputs;
  std::vector<Value *> ops(6, nullptr);
  auto add = [&](size_t slot, DType t, const Extents &e, double lo, double hi) {
    inputs.push_back(randomTensor(t, e, rng, lo, hi));
    ops[slot] = g.addInput("x" + std::to_string(slot), inputs.back().type());
  };
  add(0, c.t, {c.batch, c.steps, c.qHeads * c.dk}, -1, 1);
  add(1, c.t, {c.batch, c.steps, c.kvHeads * c.dk}, -0.4, 0.4);
  add(2, c.t, {c.batch, c.steps, c.kvHeads * c.dv}, -1, 1);
  if (c.past)
    add(3, c.state, {c.batch, c.kvHeads, c.dk, c.dv}, -0.3, 0.3);
  if (gating)
    add(4, c.t, {c.batch, c.steps, c.perKeyDecay ? c.kvHeads * c.dk : c.kvHeads}, -0.5, 0);
  if (delta)
    add(5, c.t, {c.batch, c.steps, c.sharedBeta ? 1 : c.kvHeads}, 0, 1);
  while (!ops.back())
    ops.pop_back();
  AttrMap attrs{
      {"q_num_heads", c.qHeads}, {"kv_num_heads", c.kvHeads}, {"update_rule", std::string(c.rule)}};
  if (c.scale != 0.0)
    attrs["scale"] = c.scale;
  std::string what =
      fmt::format("{} B{} T{} heads {}/{} dk {} dv {} {}{}{} {}/{}", c.rule, c.batch, c.steps,
                  c.qHeads, c.kvHeads, c.dk, c.dv, c.perKeyDecay ? "" : "per-head decay ",
                  c.sharedBeta ? "shared beta " : "", c.past ? "past " : "", dtypeName(c.t),
                  dtypeName(c.state));
  Expected<Node *> n = g.createInferred(OpKind::LinearAttention, ops, attrs, "la");
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  g.setOutputs((*n)->results());
  checkNode(**n, inputs, what);
}

} // namespace

TEST(LowerLinearAttention, EveryRuleAndHeadLayout) {
  for (const char *rule : {"linear", "gated", "delta", "gated_delta"}) {
    check({rule, 2, 5, 4, 4, 8, 8});
    check({rule, 1, 3, 6, 2, 4, 5, /*perKeyDecay=*/false, /*sharedBeta=*/true, /*past=*/true});
    check({rule, 2, 1, 4, 1, 3, 6, true, false, true});
  }
}

TEST(LowerLinearAttention, DtypesAndScale) {
  check({"gated_delta", 2, 4, 4, 2, 8, 8, true, false, true, DType::F16, DType::F16});
  check({"gated_delta", 2, 4, 4, 2, 8, 8, true, false, true, DType::F16, DType::F32});
  check({"gated_delta", 1, 4, 2, 2, 4, 4, false, true, true, DType::F64, DType::F64, 0.5});
  check({"delta", 1, 6, 2, 2, 4, 4, true, false, true, DType::F32, DType::F16, 0.25});
}

TEST(LowerLinearAttention, BadOperandsAreTheNodesError) {
  Graph g;
  auto in = [&](const char *name, Extents e) {
    return g.addInput(name, TensorType(DType::F32, Shape(e.begin(), e.end())));
  };
  Value *q = in("q", {1, 2, 8}), *k = in("k", {1, 2, 8}), *v = in("v", {1, 2, 8});
  AttrMap attrs{{"q_num_heads", int64_t(2)},
                {"kv_num_heads", int64_t(2)},
                {"update_rule", std::string("gated")}};
  Expected<Node *> n = g.createInferred(OpKind::LinearAttention, {q, k, v}, attrs, "la");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("'la'"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("needs the decay input"), std::string::npos)
      << n.error().message();
  attrs["update_rule"] = std::string("linear");
  attrs["q_num_heads"] = int64_t(3);
  Expected<Node *> m = g.createInferred(OpKind::LinearAttention, {q, k, v}, attrs, "la2");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("positive multiple"), std::string::npos)
      << m.error().message();
}

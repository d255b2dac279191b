// ONNX lowering of LinearAttention-27 to the IR's linear_attention. Its recurrence over time
// (the delta rule reads the state each step wrote) is not a composition of existing ops, so it
// is one op with its own kernel (codegen/lower/LinearAttention.cpp). chunk_size is a tuning
// hint of chunk-parallel implementations that does not change the results; it is accepted
// and not needed.
#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

Error lowerLinearAttention(LoweringContext &ctx) {
  const char *names[] = {"query", "key", "value"};
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.input(i))
      return ctx.error("missing required input {} ({})", i, names[i]);
  for (const char *a : {"q_num_heads", "kv_num_heads"})
    if (!ctx.hasAttr(a))
      return ctx.error("the attribute '{}' is required", a);
  NNC_ASSIGN_OR_RETURN(int64_t qHeads, ctx.intAttr("q_num_heads", 0));
  NNC_ASSIGN_OR_RETURN(int64_t kvHeads, ctx.intAttr("kv_num_heads", 0));
  NNC_ASSIGN_OR_RETURN(int64_t chunk, ctx.intAttr("chunk_size", 64));
  if (chunk <= 0)
    return ctx.error("chunk_size must be positive, got {}", chunk);
  NNC_ASSIGN_OR_RETURN(double scale, ctx.floatAttr("scale", 0.0));
  NNC_ASSIGN_OR_RETURN(std::string rule, ctx.stringAttr("update_rule", "gated_delta"));
  std::vector<Value *> ops;
  for (size_t i = 0; i < 6; ++i)
    ops.push_back(ctx.input(i));
  while (!ops.back())
    ops.pop_back();
  AttrMap attrs{{"q_num_heads", Attribute(qHeads)},
                {"kv_num_heads", Attribute(kvHeads)},
                {"update_rule", Attribute(rule)}};
  if (scale != 0.0)
    attrs["scale"] = Attribute(scale);
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> rs,
                       ctx.emitMulti(OpKind::LinearAttention, ops, std::move(attrs), 2));
  NNC_TRY(ctx.setOutput(0, rs[0]));
  return ctx.setOutput(1, rs[1]);
}

} // namespace

void registerLinearAttentionLowerings(LoweringTable &t) {
  t["LinearAttention"] = {{"chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"},
                          lowerLinearAttention};
}

} // namespace nnc::onnxfe

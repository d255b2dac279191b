// The autodiff pass: appends the gradients of a loss output w.r.t. the graph's float inputs as
// new graph outputs (nnc::gradients; the rules are in include/nnc/ir/Gradients.def).
//
// Algorithm:
//  1. The loss is the graph output named by the option `loss` (default: the first output);
//     it must be a float value of one element.
//  2. nnc::gradients differentiates it w.r.t. every float graph input.
//  3. Each gradient becomes an output named `d_<input>`, after the existing outputs.
#include "nnc/ir/Gradients.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
class AutodiffPass : public Pass {
public:
  std::string_view name() const override { return "autodiff"; }
  bool runsOnBodies() const override { return false; }
  Expected<bool> run(Graph &g, PassContext &ctx) override {
    NNC_TRY(ctx.checkOptionNames(name(), {"loss"}));
    NNC_USER_CHECK(!g.outputs().empty(), "autodiff: the graph has no output");
    Value *loss = g.outputs()[0];
    auto it = ctx.passOptions.find("loss");
    if (it != ctx.passOptions.end()) {
      loss = nullptr;
      for (Value *o : g.outputs())
        if (o->name() == it->second)
          loss = o;
      NNC_USER_CHECK(loss, "autodiff: no graph output named '{}'", it->second);
    }
    std::vector<Value *> wrt;
    for (Value *in : g.inputs())
      if (isFloat(in->dtype()))
        wrt.push_back(in);
    NNC_ASSIGN_OR_RETURN(std::vector<Value *> grads, gradients(g, loss, wrt));
    std::vector<Value *> outs = g.outputs();
    for (size_t i = 0; i < grads.size(); ++i) {
      g.renameValue(grads[i], "d_" + wrt[i]->name());
      outs.push_back(grads[i]);
    }
    g.setOutputs(outs);
    addStat("gradients", static_cast<int64_t>(grads.size()));
    return !grads.empty();
  }
};
} // namespace

std::unique_ptr<Pass> createAutodiffPass() {
  return std::make_unique<AutodiffPass>();
}

} // namespace nnc

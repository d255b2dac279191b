// libFuzzer target: the ONNX importer. Model bytes are loaded (OnnxModel::load), checked
// (nnc check), imported with constant folding, optimized with the default pipeline and
// verified; a model whose inputs are all static and small is then interpreted on
// deterministic inputs. Each stage must succeed or give an Error with a message; an optimized
// graph that does not verify, or an escaping C++ exception, is a finding.
#include <cstring>

#include "FuzzUtil.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

/// The most input elements (in all) of a model that is interpreted.
constexpr int64_t kMaxRunElements = 1 << 14;

void check(bool ok) {
  if (!ok)
    std::abort();
}

void checkMessage(const Error &e) {
  check(!e.message().empty());
}

void runOne(const std::string &path) {
  Expected<std::unique_ptr<OnnxModel>> model = OnnxModel::load(path);
  if (!model) {
    checkMessage(model.error());
    return;
  }
  for (const OnnxIssue &issue : (*model)->check())
    check(!issue.message.empty());
  (void)(*model)->inputNames();
  ImportOptions opts;
  opts.evaluate = [](const Node &n, const std::vector<Tensor> &operands) {
    return evaluateNode(n, operands);
  };
  Expected<std::unique_ptr<Graph>> g = (*model)->import(opts);
  if (!g) {
    checkMessage(g.error());
    return;
  }
  PassContext ctx;
  ctx.cpu = CpuTarget::host(); // the CPU pipeline's decisions for this host, as `nnc run`
  ctx.evaluate = opts.evaluate;
  if (Error e = PassPipeline::defaultPipeline().run(**g, ctx)) {
    checkMessage(e);
    return;
  }
  check(!verify(**g));
  std::optional<std::vector<Tensor>> inputs = fuzz::patternInputs(**g, kMaxRunElements);
  if (!inputs)
    return;
  Expected<std::vector<Tensor>> outs = interpret(**g, *inputs);
  if (!outs)
    checkMessage(outs.error());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::limitTensorBytes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::writeScratch(data, size, ".onnx");
  runOne(path);
  std::remove(path.c_str());
  return 0;
}

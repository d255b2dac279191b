// libFuzzer target: the text IR parser, as nnc-opt reads a .nir file. A parsed graph must
// print, parse back and print again to the same text (the round-trip contract of Printer.h);
// a graph that verifies then goes through the default pipeline, which must succeed or give an
// Error, and leave a graph that verifies; one whose inputs are all static and small is then
// interpreted on deterministic inputs (an index out of range must be the interpreter's Error).
#include <string_view>

#include "FuzzUtil.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

/// The most input elements (in all) of a graph that is interpreted.
constexpr int64_t kMaxRunElements = 1 << 14;

void check(bool ok) {
  if (!ok)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::limitTensorBytes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Expected<std::unique_ptr<Graph>> g = parseGraph(text, "fuzz.nir");
  if (!g) {
    check(!g.error().message().empty());
    return 0;
  }
  std::string printed = printGraph(**g);
  Expected<std::unique_ptr<Graph>> again = parseGraph(printed, "printed.nir");
  if (!again) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s\n", again.error().message().c_str(),
                 printed.c_str());
    std::abort();
  }
  std::string reprinted = printGraph(**again);
  if (reprinted != printed) {
    std::fprintf(stderr, "print(parse(print(g))) != print(g):\n%s\n---\n%s\n", printed.c_str(),
                 reprinted.c_str());
    std::abort();
  }
  if (Error e = verify(**g)) {
    check(!e.message().empty());
    return 0;
  }
  PassContext ctx;
  ctx.cpu = CpuTarget::host(); // the CPU pipeline's decisions for this host, as `nnc run`
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &operands) {
    return evaluateNode(n, operands);
  };
  if (Error e = PassPipeline::defaultPipeline().run(**g, ctx)) {
    check(!e.message().empty());
    return 0;
  }
  check(!verify(**g));
  std::optional<std::vector<Tensor>> inputs = fuzz::patternInputs(**g, kMaxRunElements);
  if (!inputs)
    return 0;
  Expected<std::vector<Tensor>> outs = interpret(**g, *inputs);
  if (!outs)
    check(!outs.error().message().empty());
  return 0;
}

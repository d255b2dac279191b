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

/// Inputs with more elements than this (in all) are not interpreted: the interpreter's
/// speed is not under test, and a large model would only slow the fuzzer down.
constexpr int64_t kMaxRunElements = 1 << 14;

void check(bool ok) {
  if (!ok)
    std::abort();
}

void checkMessage(const Error &e) {
  check(!e.message().empty());
}

/// Small values (-1.5 .. 1.5, or -3 .. 3 for integers) of `type`, or a null tensor when the
/// type has a symbolic dim or is storage-only.
Tensor patternInput(const TensorType &type, int64_t &budget) {
  if (!isStatic(type.shape) || isStorageOnly(type.dtype))
    return Tensor();
  Extents e;
  for (const Dim &d : type.shape)
    e.push_back(d.value());
  std::optional<int64_t> n = checkedNumElements(e);
  if (!n || *n > budget)
    return Tensor();
  budget -= *n;
  Expected<Tensor> t = Tensor::create(type.dtype, e);
  if (!t)
    return Tensor();
  for (int64_t i = 0; i < *n; ++i) {
    int v = static_cast<int>(i % 7) - 3;
    switch (type.dtype) {
    case DType::F32:
      t->data<float>()[i] = static_cast<float>(v) * 0.5f;
      break;
    case DType::F64:
      t->data<double>()[i] = v * 0.5;
      break;
    case DType::I64:
      t->data<int64_t>()[i] = v;
      break;
    case DType::I32:
      t->data<int32_t>()[i] = v;
      break;
    case DType::Bool:
      t->data<uint8_t>()[i] = static_cast<uint8_t>(i & 1);
      break;
    default:
      break; // Other types keep the zeros Tensor::create gave them.
    }
  }
  return *t;
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
  int64_t budget = kMaxRunElements;
  std::vector<Tensor> inputs;
  for (const Value *v : (*g)->inputs()) {
    Tensor t = patternInput(v->type(), budget);
    if (t.isNull())
      return;
    inputs.push_back(std::move(t));
  }
  Expected<std::vector<Tensor>> outs = interpret(**g, inputs);
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

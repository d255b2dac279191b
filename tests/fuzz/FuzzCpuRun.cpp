// libFuzzer target: a small ONNX model on the compiled CPU path beside the interpreter. Model
// bytes are loaded, imported and optimized as `nnc run` does; a model of at most kMaxNodes
// nodes whose inputs are all static and small is then run on the interpreter and compiled and
// run for the CPU (one thread, no tuning cache) on the same deterministic inputs. Each step must
// succeed or give an Error with a message, and an index the interpreter finds out of range must
// be an error on the CPU as well (runtime/interp checkIndex, codegen/lower/Indexing.cpp): the
// compiled kernels are outside the sanitizers' view, so their bounds checks are held to the
// interpreter's verdict instead. Values are not compared: a fuzzed graph can amplify the
// backends' rounding past any tolerance, and the conformance tests hold the numerics.
//
// Every input that gets this far costs an LLVM compile, so this target runs far fewer inputs per
// second than onnx_import, which covers the same front end; it exists for what only the
// compiled path does (lowering, runtime checks, the launch list).
#include <string>

#include "FuzzUtil.h"
#include "nnc/driver/Driver.h"

using namespace nnc;

namespace {

/// The most nodes of an optimized model that is compiled (each one is at least a kernel).
constexpr size_t kMaxNodes = 16;
/// The most input elements (in all) of a model that is run.
constexpr int64_t kMaxRunElements = 1 << 12;

void check(bool ok) {
  if (!ok)
    std::abort();
}

bool outOfRange(const Error &e) {
  return e.message().find("is out of range for an axis of size") != std::string::npos;
}

void runOne(const std::string &path) {
  Expected<std::unique_ptr<driver::ModelFile>> file = driver::ModelFile::open(path);
  if (!file) {
    check(!file.error().message().empty());
    return;
  }
  Expected<std::unique_ptr<Graph>> g = (*file)->load();
  if (!g) {
    check(!g.error().message().empty());
    return;
  }
  Target cpu(Target::Cpu, CpuTarget::host());
  if (Error e = driver::optimize(**g, cpu)) {
    check(!e.message().empty());
    return;
  }
  if ((*g)->numNodes() > kMaxNodes)
    return;
  std::optional<std::vector<Tensor>> inputs = fuzz::patternInputs(**g, kMaxRunElements);
  if (!inputs)
    return;
  Expected<std::vector<Tensor>> ref =
      driver::execute(**g, *inputs, Target(Target::Interp, CpuTarget::host()));
  driver::ExecOptions opts;
  opts.threads = 1;
  opts.useTuningCache = false;
  Expected<std::vector<Tensor>> got = driver::execute(**g, *inputs, cpu, opts);
  if (!got)
    check(!got.error().message().empty());
  if (!ref) {
    check(!ref.error().message().empty());
    if (outOfRange(ref.error()) && got) {
      std::fprintf(stderr, "the interpreter says '%s'; the CPU ran without an error\n",
                   ref.error().message().c_str());
      std::abort();
    }
  }
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

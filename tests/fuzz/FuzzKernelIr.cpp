// libFuzzer target: the kernel-IR parser, as nnc-opt reads a .kir file. Parsed kernels must
// print, parse back and print again to the same text; a kernel that verifies must also give
// the backends' body (schedule applied, composites expanded: codegenBody), which must verify
// and round-trip in its turn.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "nnc/ir/KernelParser.h"

using namespace nnc;

namespace {

/// Aborts unless `kernels` print, parse and print again to the same text.
void checkRoundTrip(const std::vector<kir::Kernel> &kernels) {
  std::string printed;
  for (const kir::Kernel &k : kernels)
    printed += kir::printKernel(k);
  Expected<std::vector<kir::Kernel>> again = kir::parseKernels(printed, "printed.kir");
  if (!again) {
    std::fprintf(stderr, "printed kernels do not parse: %s\n%s\n",
                 again.error().message().c_str(), printed.c_str());
    std::abort();
  }
  std::string reprinted;
  for (const kir::Kernel &k : *again)
    reprinted += kir::printKernel(k);
  if (reprinted != printed) {
    std::fprintf(stderr, "print(parse(print(k))) != print(k):\n%s\n---\n%s\n", printed.c_str(),
                 reprinted.c_str());
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Expected<std::vector<kir::Kernel>> kernels = kir::parseKernels(text, "fuzz.kir");
  if (!kernels) {
    if (kernels.error().message().empty())
      std::abort();
    return 0;
  }
  checkRoundTrip(*kernels);
  for (const kir::Kernel &k : *kernels) {
    if (Error e = kir::verifyKernel(k)) {
      if (e.message().empty())
        std::abort();
      continue;
    }
    Expected<kir::Stmt> body = kir::codegenBody(k);
    if (!body) {
      std::fprintf(stderr, "a verified kernel has no codegen body: %s\n%s\n",
                   body.error().message().c_str(), kir::printKernel(k).c_str());
      std::abort();
    }
    kir::Kernel lowered = k;
    lowered.body = *body;
    lowered.schedule = {};
    if (Error e = kir::verifyKernel(lowered)) {
      std::fprintf(stderr, "the codegen body does not verify: %s\n%s\n", e.message().c_str(),
                   kir::printKernel(lowered).c_str());
      std::abort();
    }
    checkRoundTrip({lowered});
  }
  return 0;
}

// Target's name (include/nnc/ir/Target.h). No probing here: the entry points make targets.
#include "nnc/ir/Target.h"

#include <fmt/format.h>

namespace nnc {

std::string Target::name() const {
  switch (kind) {
  case Interp:
    return "interp";
  case Cpu:
    return "cpu";
  case OpenCL:
    return platform < 0 ? "opencl" : fmt::format("opencl:{}.{}", platform, device);
  }
  return "?";
}

} // namespace nnc

// The target unit tests generate code for when a test does not pin one (PinnedTarget.h): the
// CPU the CLI would choose ($NNC_CPU, else the host), so `NNC_CPU=x86-64-v3 nnc_unit_tests`
// runs them on the AVX2 path too. Made once, handed to every option struct explicitly.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Target.h"
#include "nnc/runtime/OpenCL.h"

namespace nnc::testenv {

inline const CpuTarget &testCpu() {
  static const CpuTarget cpu = [] {
    Expected<CpuTarget> c = CpuTarget::fromEnvironment();
    if (!c) {
      std::fprintf(stderr, "%s\n", c.error().message().c_str());
      std::exit(2);
    }
    return *c;
  }();
  return cpu;
}

/// The OpenCL device the CLI would choose by default (the best one there is), chosen once; for
/// tests that have checked there is one.
inline const GpuTarget &testGpu() {
  static const GpuTarget gpu = [] {
    Expected<OpenCLDeviceInfo> d = pickOpenCLDevice();
    if (!d) {
      std::fprintf(stderr, "%s\n", d.error().message().c_str());
      std::exit(2);
    }
    return d->target();
  }();
  return gpu;
}

/// A target of `kind` for testCpu() (an OpenCL one on testGpu()).
inline Target testTarget(Target::Kind kind = Target::Cpu) {
  Target t(kind, testCpu());
  if (kind == Target::OpenCL)
    t.gpu = testGpu();
  return t;
}

/// Lowering options for testCpu(), without tuning.
inline tuning::LowerOptions testLowerOptions() {
  return tuning::LowerOptions(testCpu());
}

} // namespace nnc::testenv

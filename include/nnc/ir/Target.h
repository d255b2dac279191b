// What a graph is compiled for and run on: the one description the entry points (the nnc CLI,
// the Python package, the C++ driver API, the trainer, the conformance runner) make once from
// their options (--target, --cpu / $NNC_CPU) and hand down explicitly.
//
// A target is a CPU (CpuTarget), or an OpenCL device (GpuTarget: its limits and which device
// it is) together with the CPU that runs the host side and the graph passes. The reference
// interpreter is a kind too, so that every entry point carries one value; it runs on the CPU
// and its graph is the CPU's. Probing the machine (cpuid, the OpenCL platforms) happens only
// where a target is made: CpuTarget::host() and the driver's device choice
// (driver::chooseDevice), never below.
#pragma once

#include <optional>
#include <string>

#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/GpuTarget.h"

namespace nnc {

struct Target {
  enum Kind { Interp, Cpu, OpenCL };
  Kind kind;
  /// The CPU code is generated for: the kernels of cpu, the host side of opencl (the CPU
  /// templates its registry also holds), and the graph passes of every kind.
  CpuTarget cpu;
  /// opencl: the device asked for (platform.device in ICD order; -1: the best one there is).
  int platform = -1;
  int device = -1;
  /// opencl: the device chosen for `platform`.`device` (its limits and indices), or the
  /// generic description when the code is only written out and no device is here. Unset
  /// until the device is chosen (driver::chooseDevice); code generation needs it set.
  std::optional<GpuTarget> gpu;
  /// opencl: the device type the graph passes are chosen for ("gpu", "cpu", ...); empty:
  /// gpu->type (a GPU's conv lowering can so be run on PoCL).
  std::string openclType;

  /// No default: whoever makes a target says which CPU it is for.
  Target(Kind k, CpuTarget c) : kind(k), cpu(std::move(c)) {}
  bool operator==(Kind k) const { return kind == k; }
  bool operator!=(Kind k) const { return kind != k; }
  /// "interp", "cpu", "opencl" or "opencl:P.D" (as asked).
  std::string name() const;
};

} // namespace nnc

// The OpenCL device runtime: device discovery, and executables whose whole launch plan runs on
// one OpenCL device (weights uploaded once, one device arena, inputs in and outputs out once
// per run), with program binaries cached on disk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnc/runtime/Executable.h"
#include "nnc/runtime/OpenCLDevice.h"

namespace nnc {

struct OpenCLOptions {
  /// No default target: the caller hands down the one it made (nnc::Target's cpu and gpu).
  OpenCLOptions(CpuTarget hostCpu, GpuTarget device)
      : cpu(std::move(hostCpu)), gpu(std::move(device)) {}
  /// The CPU the host side is generated for (the CPU templates OpenCL's registry also holds).
  CpuTarget cpu;
  /// The device: the kernels are lowered and printed for its limits, and the executable runs
  /// on gpu.platform.gpu.device (a description without a device, GpuTarget::generic(), cannot
  /// run).
  GpuTarget gpu;
  /// Folder of the program-binary cache ("" disables it). Default: $NNC_CACHE_DIR/opencl or
  /// ~/.cache/nnc/objects/opencl.
  std::string cacheDir = defaultCacheDir();
  /// Time every kernel with OpenCL profiling events.
  bool profile = false;
  /// False builds with -cl-opt-disable: same source and numbers, much faster builds (no driver
  /// optimizer), slower kernels. For test suites that build many small programs once.
  bool optimize = true;
  /// Tuned configs of tunable kernels: usually the tuning cache's records for the device
  /// (CachedConfigs under openclDeviceFingerprint); null: the defaults.
  std::shared_ptr<const tuning::ConfigSource> tuning;
  static std::string defaultCacheDir();
};

/// An executable on an OpenCL device. run() calls are serialized (one arena per device).
class OpenCLExecutable : public Executable {
public:
  static Expected<std::unique_ptr<OpenCLExecutable>> compile(const Graph &g,
                                                             const OpenCLOptions &opts);
  /// The device it runs on.
  virtual const OpenCLDeviceInfo &device() const = 0;
  /// The OpenCL C source of the program.
  virtual const std::string &source() const = 0;
  /// Transfers at load (weights) and over all runs since load.
  virtual TransferStats loadTransfers() const = 0;
  virtual TransferStats runTransfers() const = 0;
  virtual int64_t runs() const = 0;
  /// Per kernel in launch order (empty unless OpenCLOptions::profile), and the device time of
  /// the transfers of the runs.
  virtual std::vector<KernelTime> kernelTimes() const = 0;
  virtual double transferDeviceMs() const = 0;
  /// Zeroes the run counters and kernel times (e.g. after warm-up runs, whose first launch of
  /// each kernel may include the driver's lazy compilation).
  virtual void resetRunCounters() = 0;
  /// Keeps inputs on the device across runs (a train step's parameters and optimizer state):
  /// `initial[k]` is uploaded now as input `resident[k].input`; after each run, an input with
  /// `fromOutput` takes that output's value on the device, by swapping their regions. run()
  /// then neither reads those inputs (they may be null tensors) nor downloads the outputs that
  /// feed them (they come back null). Replaces any earlier set.
  virtual Error keepResident(const std::vector<ResidentInput> &resident,
                             const std::vector<Tensor> &initial) = 0;
  /// Downloads the current value of resident input `resident[k].input`.
  virtual Expected<Tensor> readResident(size_t k) const = 0;
};

} // namespace nnc

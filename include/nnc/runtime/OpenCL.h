// The OpenCL device runtime: device discovery, and executables whose whole launch plan runs on
// one OpenCL device (weights uploaded once, one device arena, inputs in and outputs out once
// per run), with program binaries cached on disk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnc/runtime/Executable.h"

namespace nnc {

/// One OpenCL device and its key properties.
struct OpenCLDeviceInfo {
  int platform = 0; ///< Index of the platform (ICD order).
  int device = 0;   ///< Index of the device in its platform.
  std::string platformName;
  std::string deviceName;
  std::string vendor;
  std::string type;          ///< "gpu", "cpu", "accelerator", "other".
  std::string version;       ///< CL_DEVICE_VERSION.
  std::string driverVersion; ///< CL_DRIVER_VERSION.
  int computeUnits = 0;
  int64_t globalMemBytes = 0;
  int64_t localMemBytes = 0;
  int64_t maxWorkGroupSize = 0;
  int maxClockMHz = 0;
  bool fp64 = false;
  bool fp16 = false;
};

/// Every device of every OpenCL platform. Fails, saying what is missing, when there is no
/// OpenCL platform (no ICD loader driver installed).
Expected<std::vector<OpenCLDeviceInfo>> listOpenCLDevices();

/// The device `platform`.`device`, or with -1 for both the best one there is (the GPU with the
/// most compute units x clock, else the first device).
Expected<OpenCLDeviceInfo> pickOpenCLDevice(int platform = -1, int device = -1);

struct OpenCLOptions {
  int platform = -1; ///< -1: pickOpenCLDevice's choice.
  int device = -1;
  /// Folder of the program-binary cache ("" disables it). Default: $NNC_CACHE_DIR/opencl or
  /// ~/.cache/nnc/objects/opencl.
  std::string cacheDir = defaultCacheDir();
  /// Time every kernel with OpenCL profiling events.
  bool profile = false;
  /// False builds with -cl-opt-disable: same source and numbers, much faster builds (PoCL:
  /// ~6x), slower kernels. For test suites that build many small programs once.
  bool optimize = true;
  static std::string defaultCacheDir();
};

/// What crossed between host and device.
struct TransferStats {
  int64_t uploads = 0;
  int64_t uploadBytes = 0;
  int64_t downloads = 0;
  int64_t downloadBytes = 0;
};

/// Device time of one kernel, summed over the profiled runs.
struct KernelTime {
  std::string name;
  double deviceMs = 0;
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
};

} // namespace nnc

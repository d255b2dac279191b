// OpenCL devices as the runtime core sees them: discovery, choice, and what a run moved and
// took. Part of nnc_runtime_core (no code generation needed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nnc/ir/GpuTarget.h"
#include "nnc/support/Error.h"

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
  std::array<int64_t, 3> maxWorkItemSizes{0, 0, 0};
  int preferredFloatVector = 1;
  bool localMemDedicated = true; ///< CL_DEVICE_LOCAL_MEM_TYPE == CL_LOCAL.
  int maxClockMHz = 0;
  bool fp64 = false;
  bool fp16 = false;

  /// The device as code generation sees it (handed to lowering and the OpenCL printer).
  GpuTarget target() const;
};

/// Every device of every OpenCL platform. Fails, saying what is missing, when there is no
/// OpenCL platform (no ICD loader driver installed).
Expected<std::vector<OpenCLDeviceInfo>> listOpenCLDevices();

/// The device `platform`.`device`, or with -1 for both the best one there is (the GPU with the
/// most compute units x clock, else the first device).
Expected<OpenCLDeviceInfo> pickOpenCLDevice(int platform = -1, int device = -1);

/// What crossed between host and device.
struct TransferStats {
  int64_t uploads = 0;
  int64_t uploadBytes = 0;
  int64_t downloads = 0;
  int64_t downloadBytes = 0;
};

/// An input kept on the device between runs (OpenCLExecutable::keepResident): uploaded once,
/// then, with `fromOutput`, replaced after every run by that output, on the device.
struct ResidentInput {
  size_t input = 0;
  std::optional<size_t> fromOutput;
};

/// Device time of one kernel, summed over the profiled runs.
struct KernelTime {
  std::string name;
  double deviceMs = 0;
};

} // namespace nnc

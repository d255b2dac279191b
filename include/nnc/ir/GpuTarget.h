// The OpenCL device that code is generated for, as lowering and the OpenCL printer see it:
// what bounds work-groups, local memory and vector types.
//
// Made once where the target is made, from the device chosen for it (driver::chooseDevice,
// OpenCLDeviceInfo::target() in nnc/runtime/OpenCLDevice.h), before anything is lowered, and
// handed down in nnc::Target: LowerOptions::gpu to lowering and the tuning spaces,
// emitOpenCL() to the printer, OpenCLOptions to the executable that opens that device. Like
// CpuTarget, nothing below asks the device itself; every limit comes from here.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace nnc {

struct GpuTarget {
  std::string name;   ///< CL_DEVICE_NAME (fingerprints and notes, never a decision).
  std::string vendor; ///< CL_DEVICE_VENDOR (idem).
  std::string type = "gpu"; ///< "gpu", "cpu", "accelerator", "other".
  /// Which device this is (OpenCL platform and device index, ICD order): what the runtime
  /// opens. -1 for a description without a device (generic()). Not part of str(): a cache key
  /// names the device by what it is, not where the ICD lists it.
  int platform = -1, device = -1;
  int computeUnits = 1;
  int64_t localMemBytes = 16 << 10;  ///< CL_DEVICE_LOCAL_MEM_SIZE (OpenCL 1.2's minimum).
  int64_t maxWorkGroupSize = 1;      ///< CL_DEVICE_MAX_WORK_GROUP_SIZE.
  std::array<int64_t, 3> maxWorkItemSizes{1, 1, 1}; ///< CL_DEVICE_MAX_WORK_ITEM_SIZES.
  int preferredFloatVector = 1;      ///< CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT.
  /// CL_DEVICE_LOCAL_MEM_TYPE is CL_LOCAL: local memory is on the compute unit (a GPU's
  /// shared memory), so staging tiles there saves global traffic. CL_GLOBAL (a CPU device
  /// such as PoCL's) emulates it in ordinary memory, where it only adds copies and barriers.
  bool localMemDedicated = true;
  bool fp64 = false, fp16 = false;

  /// The 1-D work-group size for a grid of `items` work-items: the smaller of `wanted` and
  /// `items` rounded up to a power of two, within the device's limits (work-group size and
  /// first work-item dimension); at least 1.
  int64_t workGroupSize1D(int64_t items, int64_t wanted) const;
  /// A device description for OpenCL C written without a device at hand (`nnc compile
  /// --target opencl` where no OpenCL device is found): the limits of OpenCL 1.2's full
  /// profile that every GPU driver we know exceeds (32K local memory, work-groups of 256),
  /// and 64 compute units: a limit nothing relies on, but what sizes the NDRange GEMM's
  /// work-groups, so that code written for no device in particular fills a discrete GPU (with
  /// one, ResNet-18's 7x7 convs would run as 32 work-groups on a GPU of a hundred or more).
  static GpuTarget generic();
  /// One line for `nnc devices` and cache keys: "gpu 'NAME' (VENDOR): 132 CUs, 48K local,
  /// work-groups <= 1024 (1024x1024x64), float vectors 1".
  std::string str() const;
};

} // namespace nnc

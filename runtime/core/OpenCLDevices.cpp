// OpenCL device discovery: every platform's devices and what nnc reports of them, the choice
// of a device, and one context per device for the whole process.
#include "OpenCLInternal.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace nnc {

namespace ocl {

namespace {

std::string deviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' '))
    s.pop_back();
  return s;
}

template <typename T> T deviceValue(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

std::string platformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  clGetPlatformInfo(p, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

} // namespace

const char *clErrorName(cl_int e) {
  switch (e) {
  case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
  case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
  case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
  case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
  case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
  case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
  case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
  case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
  case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
  case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
  case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
  default: return "an OpenCL error";
  }
}

Error clError(cl_int e, const std::string &what) {
  return makeError("OpenCL: {} failed: {} ({})", what, clErrorName(e), e);
}

Expected<std::vector<ClDevice>> enumerate() {
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, nullptr, &np);
  if (e == -1001 /*CL_PLATFORM_NOT_FOUND_KHR*/ || (e == CL_SUCCESS && np == 0))
    return makeError("no OpenCL platform found: the OpenCL ICD loader lists no driver (install "
                     "one, e.g. pocl-opencl-icd for the CPU or the GPU vendor's, so that "
                     "/etc/OpenCL/vendors names it)");
  NNC_CL(e, "clGetPlatformIDs");
  std::vector<cl_platform_id> ps(np);
  NNC_CL(clGetPlatformIDs(np, ps.data(), nullptr), "clGetPlatformIDs");
  std::vector<ClDevice> out;
  for (cl_uint p = 0; p < np; ++p) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0)
      continue;
    std::vector<cl_device_id> ds(nd);
    NNC_CL(clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr), "clGetDeviceIDs");
    for (cl_uint d = 0; d < nd; ++d) {
      ClDevice c;
      c.platform = ps[p];
      c.id = ds[d];
      OpenCLDeviceInfo &i = c.info;
      i.platform = static_cast<int>(p);
      i.device = static_cast<int>(d);
      i.platformName = platformString(ps[p], CL_PLATFORM_NAME);
      i.deviceName = deviceString(ds[d], CL_DEVICE_NAME);
      i.vendor = deviceString(ds[d], CL_DEVICE_VENDOR);
      cl_device_type t = deviceValue<cl_device_type>(ds[d], CL_DEVICE_TYPE);
      i.type = (t & CL_DEVICE_TYPE_GPU)           ? "gpu"
               : (t & CL_DEVICE_TYPE_CPU)         ? "cpu"
               : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                  : "other";
      i.version = deviceString(ds[d], CL_DEVICE_VERSION);
      i.driverVersion = deviceString(ds[d], CL_DRIVER_VERSION);
      i.computeUnits = static_cast<int>(deviceValue<cl_uint>(ds[d], CL_DEVICE_MAX_COMPUTE_UNITS));
      i.globalMemBytes = static_cast<int64_t>(deviceValue<cl_ulong>(ds[d], CL_DEVICE_GLOBAL_MEM_SIZE));
      i.localMemBytes = static_cast<int64_t>(deviceValue<cl_ulong>(ds[d], CL_DEVICE_LOCAL_MEM_SIZE));
      i.maxWorkGroupSize =
          static_cast<int64_t>(deviceValue<size_t>(ds[d], CL_DEVICE_MAX_WORK_GROUP_SIZE));
      size_t items[3] = {0, 0, 0};
      if (deviceValue<cl_uint>(ds[d], CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS) >= 3)
        clGetDeviceInfo(ds[d], CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, nullptr);
      for (int k = 0; k < 3; ++k)
        i.maxWorkItemSizes[k] = static_cast<int64_t>(items[k]);
      i.preferredFloatVector =
          static_cast<int>(deviceValue<cl_uint>(ds[d], CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT));
      i.localMemDedicated =
          deviceValue<cl_device_local_mem_type>(ds[d], CL_DEVICE_LOCAL_MEM_TYPE) == CL_LOCAL;
      i.maxClockMHz = static_cast<int>(deviceValue<cl_uint>(ds[d], CL_DEVICE_MAX_CLOCK_FREQUENCY));
      std::string ext = deviceString(ds[d], CL_DEVICE_EXTENSIONS);
      i.fp64 = ext.find("cl_khr_fp64") != std::string::npos;
      i.fp16 = ext.find("cl_khr_fp16") != std::string::npos;
      out.push_back(std::move(c));
    }
  }
  if (out.empty())
    return makeError("no OpenCL device found: {} OpenCL platform(s), none with a device", np);
  return out;
}

Expected<ClDevice> pick(int platform, int device) {
  NNC_ASSIGN_OR_RETURN(std::vector<ClDevice> all, enumerate());
  if (platform >= 0 || device >= 0) {
    for (const ClDevice &d : all)
      if (d.info.platform == std::max(platform, 0) && d.info.device == std::max(device, 0))
        return d;
    std::string have;
    for (const ClDevice &d : all)
      have += fmt::format(" {}.{}", d.info.platform, d.info.device);
    return makeError("no OpenCL device {}.{} (there are:{}; see `nnc devices`)",
                     std::max(platform, 0), std::max(device, 0), have);
  }
  const ClDevice *best = &all[0];
  auto score = [](const ClDevice &d) {
    return (d.info.type == "gpu" ? 1e12 : 0.0) +
           double(d.info.computeUnits) * double(std::max(d.info.maxClockMHz, 1));
  };
  for (const ClDevice &d : all)
    if (score(d) > score(*best))
      best = &d;
  return *best;
}

Expected<cl_context> sharedContext(const ClDevice &d) {
  static std::mutex m;
  static std::map<cl_device_id, cl_context> contexts;
  std::lock_guard<std::mutex> lock(m);
  auto it = contexts.find(d.id);
  if (it != contexts.end())
    return it->second;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(d.platform), 0};
  cl_int e = CL_SUCCESS;
  cl_context c = clCreateContext(props, 1, &d.id, nullptr, nullptr, &e);
  NNC_CL(e, "clCreateContext");
  contexts[d.id] = c;
  return c;
}

} // namespace ocl

using namespace ocl;

Expected<std::vector<OpenCLDeviceInfo>> listOpenCLDevices() {
  NNC_ASSIGN_OR_RETURN(std::vector<ClDevice> all, enumerate());
  std::vector<OpenCLDeviceInfo> out;
  for (const ClDevice &d : all)
    out.push_back(d.info);
  return out;
}

GpuTarget OpenCLDeviceInfo::target() const {
  GpuTarget t;
  t.name = deviceName;
  t.vendor = vendor;
  t.type = type;
  t.platform = platform;
  t.device = device;
  t.computeUnits = std::max(computeUnits, 1);
  t.localMemBytes = localMemBytes;
  t.maxWorkGroupSize = std::max<int64_t>(maxWorkGroupSize, 1);
  t.maxWorkItemSizes = maxWorkItemSizes;
  t.preferredFloatVector = std::max(preferredFloatVector, 1);
  t.localMemDedicated = localMemDedicated;
  t.fp64 = fp64;
  t.fp16 = fp16;
  return t;
}

Expected<OpenCLDeviceInfo> pickOpenCLDevice(int platform, int device) {
  NNC_ASSIGN_OR_RETURN(ClDevice d, pick(platform, device));
  return d.info;
}

} // namespace nnc

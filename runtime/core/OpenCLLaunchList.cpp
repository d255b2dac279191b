// The OpenCL launch list: device discovery, one context per device, the program-binary cache,
// device memory and the launches of a given program.
//
// Algorithm (create):
//  1. The program's binary comes from the on-disk cache when the key (source hash, build
//     options, platform, device, driver version) matches, else it is built and stored.
//  2. Device memory: one weights buffer (uploaded once, here) and one arena holding the
//     planned intermediates, then every input and every output the kernels write. Every kernel
//     parameter is a (buffer, byte offset) pair, so all kernel arguments are set once, here.
// A run writes the inputs into the arena, enqueues every kernel on an in-order queue and
// reads the outputs back; with runtime checks in the kernels (RunPlan::checks) it also clears
// their status area first and reads it back once at the end: nothing else crosses. Resident
// inputs (keepResident: a train step's parameters and optimizer state) are written once; after
// a run each takes the output that feeds it by swapping the two arena regions and re-setting
// the arguments that point there.
#include "OpenCLLaunchList.h"

#include <CL/cl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <unistd.h>

#include "BufferPlan.h"
#include "nnc/ir/TensorCheck.h"
#include "nnc/support/Warning.h"

namespace nnc {

namespace fs = std::filesystem;

namespace {

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

#define NNC_CL(call, what)                                                                         \
  do {                                                                                             \
    cl_int err_ = (call);                                                                          \
    if (err_ != CL_SUCCESS)                                                                        \
      return clError(err_, what);                                                                  \
  } while (0)

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

struct ClDevice {
  OpenCLDeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
};

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

/// One context per device for the whole process (PoCL's context creation is not free).
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

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string buildOptions(bool optimize) {
  return optimize ? "-cl-std=CL1.2" : "-cl-std=CL1.2 -cl-opt-disable";
}

/// The last build's log of `program` on `d`.
std::string buildLog(cl_program program, const ClDevice &d) {
  size_t n = 0;
  clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  return log;
}

/// `source` built for `d`; the error carries the build log. A driver that fails the optimized
/// build (its optimizer's bug, or a resource it runs out of) often builds the program
/// unoptimized: slower kernels beat no results, so that is tried next, said on stderr, and
/// `*cacheable` set false (a fixed driver gets its chance next time).
/// NNC_FAULT=opencl-build makes the device fail the first build (an option it does not know),
/// so that the tests see the fallback work with a real driver's failure.
Expected<cl_program> buildFromSource(cl_context ctx, const ClDevice &d, const std::string &source,
                                     const std::string &options, bool *cacheable) {
  const char *src = source.c_str();
  size_t len = source.size();
  cl_int e = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(ctx, 1, &src, &len, &e);
  NNC_CL(e, "clCreateProgramWithSource");
  std::string first = options + (faultInjected("opencl-build") ? " -nnc-injected-fault" : "");
  e = clBuildProgram(program, 1, &d.id, first.c_str(), nullptr, nullptr);
  *cacheable = first == options;
  if (e != CL_SUCCESS && options.find("-cl-opt-disable") == std::string::npos) {
    std::string log = buildLog(program, d);
    std::string fallback = buildOptions(/*optimize=*/false);
    if (clBuildProgram(program, 1, &d.id, fallback.c_str(), nullptr, nullptr) == CL_SUCCESS) {
      std::string line = log.substr(0, log.find('\n'));
      warnOnce(fmt::format("OpenCL: {} failed to build the optimized program ({}{}{}); built it "
                           "with -cl-opt-disable instead",
                           d.info.deviceName, clErrorName(e), line.empty() ? "" : ": ",
                           line.substr(0, 200)));
      *cacheable = false;
      return program;
    }
  }
  if (e != CL_SUCCESS) {
    std::string log = buildLog(program, d);
    clReleaseProgram(program);
    if (log.size() > 4000)
      log = log.substr(0, 4000) + "\n...";
    return makeError("OpenCL: building the program for {} failed ({}):\n{}", d.info.deviceName,
                     clErrorName(e), log);
  }
  return program;
}

/// The device binary of a program built for one device ("" when the driver gives none).
std::string programBinary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) !=
          CL_SUCCESS ||
      size == 0)
    return "";
  std::string bin(size, '\0');
  unsigned char *ptr = reinterpret_cast<unsigned char *>(bin.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS)
    return "";
  return bin;
}

/// The program-binary cache: one file per key, holding the key text (checked on load, so a
/// hash collision is a miss), a checksum of the binary (so a corrupted file is not handed to
/// the driver) and the binary; written to a temporary name, then renamed. A file that cannot
/// be used or written is skipped, and said so on stderr.
class ProgramCache {
public:
  ProgramCache(std::string dir, const ClDevice &d, const std::string &options,
               const std::string &source)
      : dir_(std::move(dir)) {
    key_ = fmt::format("nnc-opencl-2\n{}\n{}\n{}\n{}\n{}\n{:016x}{:016x}\n", options,
                       d.info.platformName, d.info.deviceName, d.info.version, d.info.driverVersion,
                       fnv1a(source), fnv1a(source + "\x01"));
    path_ = dir_.empty() ? "" : fmt::format("{}/{:016x}.bin", dir_, fnv1a(key_));
  }
  const std::string &path() const { return path_; }
  /// A cache file's text for `binary`: the key, the binary's checksum, the binary. Also what
  /// buildOpenCLProgramBinary gives for an artifact to carry.
  std::string entry(const std::string &binary) const {
    return key_ + fmt::format("{:016x}\n", fnv1a(binary)) + binary;
  }
  /// The binary of `entry` when it is for this key; nullopt for another key, and also (with
  /// `corrupt` set) for a truncated or corrupted entry of this key.
  std::optional<std::string> match(const std::string &entry, bool *corrupt = nullptr) const {
    if (entry.compare(0, key_.size(), key_) != 0)
      return std::nullopt;           // another key (or another key with the same hash)
    constexpr size_t kSumChars = 17; // "%016x\n"
    std::string binary = entry.size() > key_.size() + kSumChars
                             ? entry.substr(key_.size() + kSumChars)
                             : std::string();
    if (binary.empty() ||
        entry.compare(key_.size(), kSumChars, fmt::format("{:016x}\n", fnv1a(binary))) != 0) {
      if (corrupt)
        *corrupt = true;
      return std::nullopt;
    }
    return binary;
  }
  std::optional<std::string> load() const {
    if (path_.empty())
      return std::nullopt;
    std::ifstream in(path_, std::ios::binary);
    if (!in)
      return std::nullopt;
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bool corrupt = false;
    std::optional<std::string> binary = match(all, &corrupt);
    if (corrupt)
      warnOnce(fmt::format("OpenCL program cache: {} is truncated or corrupted; building the "
                           "program from source",
                           path_));
    return binary;
  }
  void store(const std::string &binary) const {
    if (path_.empty() || binary.empty())
      return;
    auto skipped = [&](const std::string &why) {
      warnOnce(fmt::format("OpenCL program cache: cannot write to {} ({}); the program is built "
                           "but not cached",
                           dir_, why));
    };
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec)
      return skipped(ec.message());
    std::string tmp = fmt::format("{}.{}.tmp", path_, static_cast<long>(getpid()));
    {
      std::ofstream out(tmp, std::ios::binary);
      if (!out)
        return skipped(std::strerror(errno));
      out << key_ << fmt::format("{:016x}\n", fnv1a(binary)) << binary;
      out.flush();
      if (!out) {
        int err = errno;
        out.close();
        fs::remove(tmp, ec);
        return skipped(err ? std::strerror(err) : "write error");
      }
    }
    fs::rename(tmp, path_, ec);
    if (ec) {
      fs::remove(tmp, ec);
      skipped(ec.message());
    }
  }

private:
  std::string dir_, key_, path_;
};

class ClLaunchList : public OpenCLLaunchList {
public:
  ~ClLaunchList() override {
    for (cl_kernel k : kernels_)
      if (k)
        clReleaseKernel(k);
    if (program_)
      clReleaseProgram(program_);
    if (arena_)
      clReleaseMemObject(arena_);
    if (weights_)
      clReleaseMemObject(weights_);
    if (queue_)
      clReleaseCommandQueue(queue_);
  }

  explicit ClLaunchList(const RunPlan &p) : p_(p) {}
  Error build(const std::string &source, std::vector<OpenCLLaunch> launches,
              const OpenCLLaunchOptions &opts);
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override;
  Error keepResident(const std::vector<ResidentInput> &resident,
                     const std::vector<Tensor> &initial) override;
  Expected<Tensor> readResident(size_t k) const override;

  ProgramOrigin programOrigin() const override { return origin_; }
  const OpenCLDeviceInfo &device() const override { return dev_.info; }
  TransferStats loadTransfers() const override { return load_; }
  TransferStats runTransfers() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return runStats_;
  }
  int64_t runs() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }
  std::vector<KernelTime> kernelTimes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return times_;
  }
  double transferDeviceMs() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return transferMs_;
  }
  void resetRunCounters() override {
    std::lock_guard<std::mutex> lock(mutex_);
    runStats_ = {};
    runs_ = 0;
    transferMs_ = 0;
    for (KernelTime &t : times_)
      t.deviceMs = 0;
  }

private:
  Error buildProgram(cl_context ctx, const std::string &source, const OpenCLLaunchOptions &opts,
                     const std::string &options);
  Error runLocked(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  /// The device buffer and byte offset a slot points at.
  std::pair<cl_mem, cl_ulong> place(const Slot &s) const {
    cl_ulong off = static_cast<cl_ulong>(s.offset);
    switch (s.kind) {
    case SlotKind::Input:
      return {arena_, off + static_cast<cl_ulong>(inputOffset_[s.index])};
    case SlotKind::Output:
      return {arena_, off + static_cast<cl_ulong>(outputOffset_[s.index])};
    case SlotKind::Weight:
      return {weights_, off + static_cast<cl_ulong>(weightOffset_[s.index])};
    case SlotKind::Arena:
      return {arena_, off + static_cast<cl_ulong>(s.index)};
    }
    return {arena_, off};
  }
  /// Kernel k's parameter b (its (buffer, offset) argument pair) points at `s`.
  Error setArg(size_t k, size_t b, const Slot &s) {
    auto [base, off] = place(s);
    cl_uint arg = static_cast<cl_uint>(2 * b);
    NNC_CL(clSetKernelArg(kernels_[k], arg, sizeof base, &base), "clSetKernelArg");
    NNC_CL(clSetKernelArg(kernels_[k], arg + 1, sizeof off, &off), "clSetKernelArg");
    return Error::success();
  }
  /// Sets kernel k's (buffer, offset) arguments from the current offsets.
  Error setArgs(size_t k) {
    for (size_t b = 0; b < p_.numArgs(k); ++b)
      NNC_TRY(setArg(k, b, p_.args[p_.firstArg[k] + b]));
    return Error::success();
  }

  const RunPlan &p_;
  std::vector<OpenCLLaunch> launches_;
  ClDevice dev_;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::vector<cl_kernel> kernels_;
  cl_mem arena_ = nullptr, weights_ = nullptr;
  std::vector<int64_t> inputOffset_, outputOffset_, weightOffset_;
  std::vector<char> status_; ///< The run's status area (RunPlan::checks), read back per run.
  std::vector<ResidentInput> resident_;
  std::vector<bool> residentInput_, residentOutput_; ///< Per input / output.
  std::vector<size_t> residentKernels_; ///< Kernels with an argument in a swapped region.
  bool profile_ = false;
  ProgramOrigin origin_ = ProgramOrigin::Source;
  TransferStats load_;
  mutable std::mutex mutex_;
  mutable TransferStats runStats_;
  int64_t runs_ = 0;
  std::vector<KernelTime> times_;
  double transferMs_ = 0;
};

int64_t alignUp(int64_t v) { return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

Error ClLaunchList::buildProgram(cl_context ctx, const std::string &source,
                                const OpenCLLaunchOptions &opts, const std::string &options) {
  ProgramCache cache(opts.cacheDir, dev_, options, source);
  // A binary that this device rejects (another driver version wrote it) is skipped.
  auto fromBinary = [&](const std::string &bin, const std::string &where) {
    const unsigned char *data = reinterpret_cast<const unsigned char *>(bin.data());
    size_t size = bin.size();
    cl_int status = CL_SUCCESS, e = CL_SUCCESS;
    program_ = clCreateProgramWithBinary(ctx, 1, &dev_.id, &size, &data, &status, &e);
    cl_int built = CL_INVALID_BINARY;
    if (e == CL_SUCCESS && status == CL_SUCCESS)
      built = clBuildProgram(program_, 1, &dev_.id, options.c_str(), nullptr, nullptr);
    if (built == CL_SUCCESS)
      return true;
    if (program_)
      clReleaseProgram(program_);
    program_ = nullptr; // a stale or foreign binary: build from source
    warnOnce(fmt::format("OpenCL: the program binary in {} did not load on {} ({}); building the "
                         "program from source",
                         where, dev_.info.deviceName,
                         clErrorName(e != CL_SUCCESS        ? e
                                     : status != CL_SUCCESS ? status
                                                            : built)));
    return false;
  };
  for (const std::string &entry : opts.binaries)
    if (std::optional<std::string> bin = cache.match(entry);
        bin && fromBinary(*bin, "the artifact")) {
      origin_ = ProgramOrigin::Prebuilt;
      return Error::success();
    }
  if (std::optional<std::string> bin = cache.load(); bin && fromBinary(*bin, cache.path())) {
    origin_ = ProgramOrigin::Cache;
    return Error::success();
  }
  bool cacheable = true;
  NNC_ASSIGN_OR_RETURN(program_, buildFromSource(ctx, dev_, source, options, &cacheable));
  if (cacheable)
    cache.store(programBinary(program_));
  return Error::success();
}

Error ClLaunchList::build(const std::string &source, std::vector<OpenCLLaunch> launches,
                         const OpenCLLaunchOptions &opts) {
  NNC_USER_CHECK(launches.size() == p_.numKernels(),
                 "OpenCL: the program has {} launches for a plan of {} kernels", launches.size(),
                 p_.numKernels());
  launches_ = std::move(launches);
  NNC_ASSIGN_OR_RETURN(dev_, pick(opts.platform, opts.device));
  NNC_ASSIGN_OR_RETURN(cl_context ctx, sharedContext(dev_));
  profile_ = opts.profile;
  cl_int e = CL_SUCCESS;
  queue_ = clCreateCommandQueue(ctx, dev_.id, profile_ ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
  NNC_CL(e, "clCreateCommandQueue");
  if (!launches_.empty()) {
    NNC_TRY(buildProgram(ctx, source, opts, buildOptions(opts.optimize)));
    for (const OpenCLLaunch &l : launches_) {
      kernels_.push_back(clCreateKernel(program_, l.name.c_str(), &e));
      NNC_CL(e, "clCreateKernel " + l.name);
    }
  }

  // Device memory: the arena (plan, inputs, outputs) and the weights.
  int64_t arenaBytes = alignUp(p_.plan.peakBytes);
  for (const TensorType &t : p_.inputTypes) {
    inputOffset_.push_back(arenaBytes);
    std::optional<Extents> ext = staticExtents(t.shape);
    int64_t n = ext ? checkedNumElements(*ext).value_or(0) : 0;
    arenaBytes += alignUp(n * static_cast<int64_t>(dtypeSize(t.dtype)));
  }
  for (const OutputSpec &o : p_.outputs) {
    outputOffset_.push_back(arenaBytes);
    if (o.kind == OutputSpec::Fresh)
      arenaBytes += alignUp(checkedNumElements(o.extents).value_or(0) *
                            static_cast<int64_t>(dtypeSize(o.dtype)));
  }
  int64_t weightBytes = 0;
  for (const Tensor &w : p_.weights) {
    weightOffset_.push_back(weightBytes);
    weightBytes += alignUp(static_cast<int64_t>(w.byteSize()));
  }
  arena_ = clCreateBuffer(ctx, CL_MEM_READ_WRITE, static_cast<size_t>(std::max<int64_t>(arenaBytes, 64)),
                          nullptr, &e);
  NNC_CL(e, fmt::format("allocating a device arena of {} bytes", arenaBytes));
  weights_ = clCreateBuffer(ctx, CL_MEM_READ_ONLY,
                            static_cast<size_t>(std::max<int64_t>(weightBytes, 64)), nullptr, &e);
  NNC_CL(e, fmt::format("allocating {} bytes of weights", weightBytes));
  for (size_t i = 0; i < p_.weights.size(); ++i) {
    size_t bytes = static_cast<size_t>(p_.weights[i].byteSize());
    if (bytes == 0)
      continue;
    NNC_CL(clEnqueueWriteBuffer(queue_, weights_, CL_FALSE, static_cast<size_t>(weightOffset_[i]),
                                bytes, p_.weights[i].rawData(), 0, nullptr, nullptr),
           "uploading weights");
    ++load_.uploads;
    load_.uploadBytes += static_cast<int64_t>(bytes);
  }
  NNC_CL(clFinish(queue_), "uploading weights");

  // Kernel arguments, once: (base, byte offset) per parameter.
  for (size_t k = 0; k < kernels_.size(); ++k) {
    NNC_TRY(setArgs(k));
    // Code generation bounded the work-groups by this device's limits (GpuTarget); a group
    // beyond them here means the program was written for another device.
    const OpenCLLaunch &l = launches_[k];
    int64_t group = l.localSize[0] * l.localSize[1] * l.localSize[2];
    if (l.localSize[0] > 0 && group > dev_.info.maxWorkGroupSize)
      return makeError("OpenCL kernel {}: work-groups of {} work-items, more than {} allows ({})",
                       l.name, group, dev_.info.deviceName, dev_.info.maxWorkGroupSize);
  }
  for (const OpenCLLaunch &l : launches_)
    times_.push_back({l.name, 0.0});
  return Error::success();
}

Error ClLaunchList::keepResident(const std::vector<ResidentInput> &resident,
                                 const std::vector<Tensor> &initial) {
  NNC_USER_CHECK(resident.size() == initial.size(), "{} resident inputs but {} initial values",
                 resident.size(), initial.size());
  size_t ni = p_.inputTypes.size(), no = p_.outputs.size();
  std::vector<bool> in(ni, false), out(no, false);
  for (const ResidentInput &r : resident) {
    NNC_USER_CHECK(r.input < ni && !in[r.input], "resident input {}: out of range or repeated",
                   r.input);
    in[r.input] = true;
    if (!r.fromOutput)
      continue;
    size_t o = *r.fromOutput;
    NNC_USER_CHECK(o < no && !out[o], "resident input '{}': output {} out of range or repeated",
                   p_.inputNames[r.input], o);
    const OutputSpec &spec = p_.outputs[o];
    std::optional<Extents> e = staticExtents(p_.inputTypes[r.input].shape);
    NNC_USER_CHECK(spec.kind == OutputSpec::Fresh,
                   "resident input '{}': output {} is not written by a kernel",
                   p_.inputNames[r.input], o);
    NNC_USER_CHECK(e && *e == spec.extents && spec.dtype == p_.inputTypes[r.input].dtype,
                   "resident input '{}' is {}, output {} is {} {}", p_.inputNames[r.input],
                   p_.inputTypes[r.input].str(), o, dtypeName(spec.dtype),
                   extentsStr(spec.extents));
    out[o] = true;
  }
  for (size_t o = 0; o < no; ++o) {
    const OutputSpec &spec = p_.outputs[o];
    NNC_USER_CHECK(!(spec.kind == OutputSpec::FromInput && in[spec.index]),
                   "output {} is a copy of resident input '{}'", o, p_.inputNames[spec.index]);
    NNC_USER_CHECK(!(spec.kind == OutputSpec::CopyOfOutput && out[spec.index]),
                   "output {} is a copy of output {}, which feeds a resident input", o, spec.index);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = 0; k < resident.size(); ++k) {
    size_t i = resident[k].input;
    std::map<std::string, int64_t> symbols;
    NNC_TRY(checkAgainstType(initial[k], p_.inputTypes[i], symbols,
                             fmt::format("resident input '{}'", p_.inputNames[i])));
    size_t bytes = static_cast<size_t>(initial[k].byteSize());
    if (bytes == 0)
      continue;
    NNC_CL(clEnqueueWriteBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(inputOffset_[i]),
                                bytes, initial[k].rawData(), 0, nullptr, nullptr),
           fmt::format("uploading resident input '{}'", p_.inputNames[i]));
    ++load_.uploads;
    load_.uploadBytes += static_cast<int64_t>(bytes);
  }
  NNC_CL(clFinish(queue_), "uploading resident inputs");
  resident_ = resident;
  residentInput_ = std::move(in);
  residentOutput_ = std::move(out);
  residentKernels_.clear();
  for (size_t k = 0; k < kernels_.size(); ++k)
    for (size_t b = 0; b < p_.numArgs(k); ++b) {
      const Slot &s = p_.args[p_.firstArg[k] + b];
      if ((s.kind == SlotKind::Input && residentInput_[s.index]) ||
          (s.kind == SlotKind::Output && residentOutput_[s.index])) {
        residentKernels_.push_back(k);
        break;
      }
    }
  return Error::success();
}

Expected<Tensor> ClLaunchList::readResident(size_t k) const {
  NNC_USER_CHECK(k < resident_.size(), "no resident input #{}", k);
  size_t i = resident_[k].input;
  std::optional<Extents> e = staticExtents(p_.inputTypes[i].shape);
  NNC_ASSERT(e, "resident input '{}' has no static shape", p_.inputNames[i]);
  NNC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(p_.inputTypes[i].dtype, *e));
  std::lock_guard<std::mutex> lock(mutex_);
  if (t.byteSize() > 0) {
    NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(inputOffset_[i]),
                               t.byteSize(), t.rawData(), 0, nullptr, nullptr),
           fmt::format("downloading resident input '{}'", p_.inputNames[i]));
    NNC_CL(clFinish(queue_), "downloading a resident input");
    ++runStats_.downloads;
    runStats_.downloadBytes += static_cast<int64_t>(t.byteSize());
  }
  return t;
}

double eventMs(cl_event ev) {
  cl_ulong a = 0, b = 0;
  clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, nullptr);
  clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, nullptr);
  return b > a ? double(b - a) * 1e-6 : 0.0;
}

Error ClLaunchList::runLocked(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  std::vector<cl_event> transferEvents, kernelEvents;
  std::vector<size_t> eventKernel; // per kernel event: the kernel it timed
  auto ev = [&](std::vector<cl_event> &v) -> cl_event * {
    if (!profile_)
      return nullptr;
    v.push_back(nullptr);
    return &v.back();
  };
  auto release = [&]() {
    for (cl_event e : transferEvents)
      if (e)
        clReleaseEvent(e);
    for (cl_event e : kernelEvents)
      if (e)
        clReleaseEvent(e);
  };
  TransferStats t;
  Error err = [&]() -> Error {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!residentInput_.empty() && residentInput_[i])
        continue;
      size_t bytes = static_cast<size_t>(inputs[i].byteSize());
      if (bytes == 0)
        continue;
      NNC_CL(clEnqueueWriteBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(inputOffset_[i]),
                                  bytes, inputs[i].rawData(), 0, nullptr, ev(transferEvents)),
             fmt::format("uploading input '{}'", p_.inputNames[i]));
      ++t.uploads;
      t.uploadBytes += static_cast<int64_t>(bytes);
    }
    // The kernels' runtime checks report into a zeroed status area, read back once below.
    if (p_.statusBytes > 0) {
      const cl_long zero = 0;
      NNC_CL(clEnqueueFillBuffer(queue_, arena_, &zero, sizeof zero,
                                 static_cast<size_t>(p_.statusOffset),
                                 static_cast<size_t>(p_.statusBytes), 0, nullptr, nullptr),
             "clearing the status of the runtime checks");
    }
    kernelEvents.reserve(kernels_.size());
    auto enqueue = [&](size_t from, size_t to) -> Error {
      for (size_t k = from; k < to; ++k) {
        const OpenCLLaunch &l = launches_[k];
        size_t global[3], local[3];
        for (int d = 0; d < 3; ++d) {
          global[d] = static_cast<size_t>(l.globalSize[d]);
          local[d] = static_cast<size_t>(l.localSize[d]);
        }
        NNC_CL(clEnqueueNDRangeKernel(queue_, kernels_[k], static_cast<cl_uint>(l.dims), nullptr,
                                      global, local[0] ? local : nullptr, 0, nullptr,
                                      ev(kernelEvents)),
               "launching kernel " + l.name);
        if (profile_)
          eventKernel.push_back(k);
      }
      return Error::success();
    };
    // A loop's launches are enqueued `count` times back to back, with the parameters that
    // move per iteration set in between (arguments are captured at enqueue): no host wait.
    size_t next = 0;
    for (const LoopPlan &l : p_.loops) {
      NNC_TRY(enqueue(next, l.firstKernel));
      for (int64_t t = 0; t < l.count; ++t) {
        for (const LoopPlan::Binding &b : l.bindings) {
          size_t k =
              static_cast<size_t>(std::upper_bound(p_.firstArg.begin(), p_.firstArg.end(), b.arg) -
                                  p_.firstArg.begin() - 1);
          NNC_TRY(setArg(k, b.arg - p_.firstArg[k], b.slots[t]));
        }
        NNC_TRY(enqueue(l.firstKernel, l.firstKernel + l.numKernels));
        for (const LoopPlan::Copy &c : l.copies) {
          auto [src, srcOff] = place(c.src[t]);
          auto [dst, dstOff] = place(c.dst[t]);
          NNC_CL(clEnqueueCopyBuffer(queue_, src, dst, srcOff, dstOff, static_cast<size_t>(c.bytes),
                                     0, nullptr, nullptr),
                 "copying a loop body's output");
        }
      }
      next = l.firstKernel + l.numKernels;
    }
    NNC_TRY(enqueue(next, kernels_.size()));
    if (p_.statusBytes > 0) {
      status_.resize(static_cast<size_t>(p_.statusBytes));
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(p_.statusOffset),
                                 status_.size(), status_.data(), 0, nullptr, ev(transferEvents)),
             "downloading the status of the runtime checks");
      ++t.downloads;
      t.downloadBytes += p_.statusBytes;
    }
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (p_.outputs[o].kind != OutputSpec::Fresh || outputs[o].isNull())
        continue;
      size_t bytes = static_cast<size_t>(outputs[o].byteSize());
      if (bytes == 0)
        continue;
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(outputOffset_[o]),
                                 bytes, outputs[o].rawData(), 0, nullptr, ev(transferEvents)),
             "downloading output " + std::to_string(o));
      ++t.downloads;
      t.downloadBytes += static_cast<int64_t>(bytes);
    }
    // Data-dependent outputs: their extents first, then as many bytes as they say. (Reads
    // are never blocking: PoCL's pthread device does not finish a blocking read in a forked
    // child, as the conformance runner's are; clFinish does.)
    std::vector<int64_t> extents(p_.outputs.size(), 0);
    bool dynamic = false;
    for (const OutputSpec &o : p_.outputs) {
      if (o.kind != OutputSpec::Dynamic)
        continue;
      dynamic = true;
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(o.extentOffset),
                                 sizeof(int64_t), &extents[o.index], 0, nullptr,
                                 ev(transferEvents)),
             "downloading the extent of output " + std::to_string(o.index));
      ++t.downloads;
      t.downloadBytes += sizeof(int64_t);
    }
    if (dynamic)
      NNC_CL(clFinish(queue_), "running the kernels");
    for (const OutputSpec &o : p_.outputs) {
      if (o.kind != OutputSpec::Dynamic)
        continue;
      NNC_ASSIGN_OR_RETURN(outputs[o.index], dynamicOutputTensor(o, extents[o.index]));
      size_t bytes = outputs[o.index].byteSize();
      if (bytes == 0)
        continue;
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(o.dataOffset),
                                 bytes, outputs[o.index].rawData(), 0, nullptr,
                                 ev(transferEvents)),
             "downloading output " + std::to_string(o.index));
      ++t.downloads;
      t.downloadBytes += static_cast<int64_t>(bytes);
    }
    NNC_CL(clFinish(queue_), "running the kernels");
    if (p_.statusBytes > 0)
      NNC_TRY(checkStatus(p_.checks, status_.data()));
    // The outputs that feed resident inputs become those inputs for the next run.
    if (resident_.empty())
      return Error::success();
    for (const ResidentInput &r : resident_)
      if (r.fromOutput)
        std::swap(inputOffset_[r.input], outputOffset_[*r.fromOutput]);
    for (size_t k : residentKernels_)
      NNC_TRY(setArgs(k));
    return Error::success();
  }();
  if (!err) {
    runStats_.uploads += t.uploads;
    runStats_.uploadBytes += t.uploadBytes;
    runStats_.downloads += t.downloads;
    runStats_.downloadBytes += t.downloadBytes;
    ++runs_;
    if (profile_) {
      for (size_t e = 0; e < kernelEvents.size(); ++e)
        times_[eventKernel[e]].deviceMs += eventMs(kernelEvents[e]);
      for (cl_event e : transferEvents)
        transferMs_ += eventMs(e);
    }
  }
  release();
  return err;
}

Expected<std::vector<Tensor>> ClLaunchList::run(const std::vector<Tensor> &inputs) {
  NNC_TRY(checkRunInputs(p_, inputs, residentInput_));
  std::vector<Tensor> outputs(p_.outputs.size());
  for (size_t o = 0; o < p_.outputs.size(); ++o) {
    if (p_.outputs[o].kind != OutputSpec::Fresh || (!residentOutput_.empty() && residentOutput_[o]))
      continue;
    NNC_ASSIGN_OR_RETURN(outputs[o], Tensor::create(p_.outputs[o].dtype, p_.outputs[o].extents));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    NNC_TRY(runLocked(inputs, outputs));
  }
  finishOutputs(p_, inputs, outputs);
  return outputs;
}

} // namespace

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

Expected<std::string> buildOpenCLProgramBinary(const std::string &source,
                                               const OpenCLLaunchOptions &opts) {
  NNC_ASSIGN_OR_RETURN(ClDevice d, pick(opts.platform, opts.device));
  NNC_ASSIGN_OR_RETURN(cl_context ctx, sharedContext(d));
  std::string options = buildOptions(opts.optimize);
  bool cacheable = true;
  NNC_ASSIGN_OR_RETURN(cl_program program, buildFromSource(ctx, d, source, options, &cacheable));
  std::string bin = programBinary(program);
  clReleaseProgram(program);
  if (!cacheable)
    return makeError("OpenCL: {} built the program only with -cl-opt-disable", d.info.deviceName);
  if (bin.empty())
    return makeError("OpenCL: {} gives no program binary", d.info.deviceName);
  return ProgramCache("", d, options, source).entry(bin);
}

Expected<std::unique_ptr<OpenCLLaunchList>>
OpenCLLaunchList::create(const RunPlan &plan, const std::string &source,
                         std::vector<OpenCLLaunch> launches, const OpenCLLaunchOptions &opts) {
  auto list = std::make_unique<ClLaunchList>(plan);
  if (Error e = list->build(source, std::move(launches), opts))
    return e;
  return std::unique_ptr<OpenCLLaunchList>(std::move(list));
}

} // namespace nnc

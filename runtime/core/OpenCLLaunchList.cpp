// The OpenCL launch list: device memory and the launches of a given program, on a device of
// OpenCLDevices.cpp, with the program built or loaded by OpenCLProgram.cpp.
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

#include <algorithm>
#include <cstring>
#include <mutex>

#include "BufferPlan.h"
#include "OpenCLInternal.h"
#include "nnc/ir/TensorCheck.h"
#include "nnc/support/Warning.h"

namespace nnc {

using namespace ocl;

namespace {

class ClLaunchList : public OpenCLLaunchList {
public:
  ~ClLaunchList() override {
    for (cl_kernel k : kernels_)
      if (k)
        clReleaseKernel(k);
    if (program_)
      clReleaseProgram(program_);
    if (stagingPtr_)
      clEnqueueUnmapMemObject(queue_, staging_, stagingPtr_, 0, nullptr, nullptr);
    if (queue_)
      clFinish(queue_);
    if (staging_)
      clReleaseMemObject(staging_);
    if (arena_)
      clReleaseMemObject(arena_);
    if (weights_)
      clReleaseMemObject(weights_);
    if (queue_)
      clReleaseCommandQueue(queue_);
  }

  explicit ClLaunchList(const RunPlan &p)
      : p_(p),
        outputPool_(std::make_shared<TensorPool>(2 * std::max<size_t>(1, p.outputs.size()))) {}
  Error build(const std::string &source, std::vector<OpenCLLaunch> launches,
              const OpenCLLaunchOptions &opts);
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override {
    return run(inputs, {});
  }
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs,
                                    const std::vector<void *> &into) override;
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
  std::vector<int64_t> inputBytes_, outputBytes_; ///< Their static sizes (0: not static).
  // Pinned staging (OpenCLLaunchOptions::staging): a mapped copy of the arena's input and
  // output regions, at the offsets the build gave them (from ioBase_).
  cl_mem staging_ = nullptr;
  char *stagingPtr_ = nullptr;
  int64_t ioBase_ = 0;
  std::vector<int64_t> inputStage_, outputStage_;
  /// Where `bytes` of input i (or fresh output o) cross: its place in the pinned buffer, or
  /// null to cross from or to the tensor's own memory.
  char *staged(const std::vector<int64_t> &stage, const std::vector<int64_t> &size, size_t i,
               size_t bytes) const {
    if (!stagingPtr_ || static_cast<int64_t>(bytes) > size[i])
      return nullptr;
    return stagingPtr_ + stage[i];
  }
  /// The memory of released outputs, for the next run's (two runs' worth kept).
  std::shared_ptr<TensorPool> outputPool_;
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
  // Without a cache the device is not asked for the binary (PoCL compiles every kernel
  // again for it).
  if (cacheable && !cache.path().empty())
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
  ioBase_ = arenaBytes;
  for (const TensorType &t : p_.inputTypes) {
    std::optional<Extents> ext = staticExtents(t.shape);
    int64_t n = ext ? checkedNumElements(*ext).value_or(0) : 0;
    inputOffset_.push_back(arenaBytes);
    inputStage_.push_back(arenaBytes - ioBase_);
    inputBytes_.push_back(n * static_cast<int64_t>(dtypeSize(t.dtype)));
    arenaBytes += alignUp(inputBytes_.back());
  }
  for (const OutputSpec &o : p_.outputs) {
    outputOffset_.push_back(arenaBytes);
    outputStage_.push_back(arenaBytes - ioBase_);
    outputBytes_.push_back(o.kind == OutputSpec::Fresh
                               ? checkedNumElements(o.extents).value_or(0) *
                                     static_cast<int64_t>(dtypeSize(o.dtype))
                               : 0);
    arenaBytes += alignUp(outputBytes_.back());
  }
  int64_t weightBytes = 0;
  for (const Tensor &w : p_.weights) {
    weightOffset_.push_back(weightBytes);
    weightBytes += alignUp(static_cast<int64_t>(w.byteSize()));
  }
  // The pinned staging buffer: the arena's input and output regions.
  bool pinned = opts.staging == OpenCLLaunchOptions::Staging::Pinned ||
                (opts.staging == OpenCLLaunchOptions::Staging::Auto && dev_.info.type == "gpu");
  int64_t stagingBytes = arenaBytes - ioBase_;
  if (pinned && stagingBytes > 0) {
    staging_ = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                              static_cast<size_t>(stagingBytes), nullptr, &e);
    NNC_CL(e, fmt::format("allocating {} bytes of pinned host memory", stagingBytes));
    stagingPtr_ = static_cast<char *>(
        clEnqueueMapBuffer(queue_, staging_, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                           static_cast<size_t>(stagingBytes), 0, nullptr, nullptr, &e));
    NNC_CL(e, "mapping the pinned host memory");
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
      const void *from = inputs[i].rawData();
      if (char *stage = staged(inputStage_, inputBytes_, i, bytes)) {
        std::memcpy(stage, from, bytes);
        from = stage;
      }
      NNC_CL(clEnqueueWriteBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(inputOffset_[i]),
                                  bytes, from, 0, nullptr, ev(transferEvents)),
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
    // move per iteration set in between (arguments are captured at enqueue): no host wait. A
    // while loop reads its condition back before each iteration (and the runtime checks'
    // status, so that a failed check stops it).
    LaunchHooks hooks;
    hooks.launch = enqueue;
    hooks.goesOn = [&](const LoopPlan &l, int64_t t, size_t at) -> Expected<bool> {
      auto [cb, cOff] = place(l.condition[at]);
      uint8_t cond = 0;
      NNC_CL(clEnqueueReadBuffer(queue_, cb, CL_TRUE, cOff, 1, &cond, 0, nullptr, nullptr),
             "reading a while loop's condition");
      if (cond == 0)
        return false;
      if (p_.statusBytes == 0 || t == 0)
        return true;
      status_.resize(static_cast<size_t>(p_.statusBytes));
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_TRUE, static_cast<size_t>(p_.statusOffset),
                                 status_.size(), status_.data(), 0, nullptr, nullptr),
             "downloading the status of the runtime checks");
      return !checkStatus(p_.checks, status_.data()); // a failure is reported below
    };
    hooks.bind = [&](size_t arg, const Slot &s) -> Error {
      size_t k = static_cast<size_t>(std::upper_bound(p_.firstArg.begin(), p_.firstArg.end(), arg) -
                                     p_.firstArg.begin() - 1);
      return setArg(k, arg - p_.firstArg[k], s);
    };
    hooks.copy = [&](const Slot &from, const Slot &to, int64_t bytes) -> Error {
      auto [src, srcOff] = place(from);
      auto [dst, dstOff] = place(to);
      NNC_CL(clEnqueueCopyBuffer(queue_, src, dst, srcOff, dstOff, static_cast<size_t>(bytes), 0,
                                 nullptr, nullptr),
             "copying a loop body's output");
      return Error::success();
    };
    NNC_TRY(runLaunches(p_, hooks));
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
      char *stage = staged(outputStage_, outputBytes_, o, bytes);
      NNC_CL(clEnqueueReadBuffer(queue_, arena_, CL_FALSE, static_cast<size_t>(outputOffset_[o]),
                                 bytes, stage ? stage : outputs[o].rawData(), 0, nullptr,
                                 ev(transferEvents)),
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
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (p_.outputs[o].kind != OutputSpec::Fresh || outputs[o].isNull())
        continue;
      size_t bytes = static_cast<size_t>(outputs[o].byteSize());
      if (char *stage = bytes ? staged(outputStage_, outputBytes_, o, bytes) : nullptr)
        std::memcpy(outputs[o].rawData(), stage, bytes);
    }
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

Expected<std::vector<Tensor>> ClLaunchList::run(const std::vector<Tensor> &inputs,
                                                const std::vector<void *> &into) {
  NNC_TRY(checkRunInputs(p_, inputs, residentInput_));
  std::vector<Tensor> outputs(p_.outputs.size());
  for (size_t o = 0; o < p_.outputs.size(); ++o) {
    if (p_.outputs[o].kind != OutputSpec::Fresh || (!residentOutput_.empty() && residentOutput_[o]))
      continue;
    if (o < into.size() && into[o]) {
      outputs[o] = Tensor::borrow(p_.outputs[o].dtype, p_.outputs[o].extents, into[o]);
      continue;
    }
    // Every byte comes down from the device: uninitialized memory, from the pool of released
    // outputs (a fresh mapping per run page-faulted every run).
    NNC_ASSIGN_OR_RETURN(outputs[o], Tensor::createUninitialized(
                                         p_.outputs[o].dtype, p_.outputs[o].extents, outputPool_));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    NNC_TRY(runLocked(inputs, outputs));
  }
  finishOutputs(p_, inputs, outputs);
  return outputs;
}

} // namespace

Expected<std::unique_ptr<OpenCLLaunchList>>
OpenCLLaunchList::create(const RunPlan &plan, const std::string &source,
                         std::vector<OpenCLLaunch> launches, const OpenCLLaunchOptions &opts) {
  auto list = std::make_unique<ClLaunchList>(plan);
  if (Error e = list->build(source, std::move(launches), opts))
    return e;
  return std::unique_ptr<OpenCLLaunchList>(std::move(list));
}

} // namespace nnc

// libnnc_runtime: the C ABI (nnc/runtime/nnc_runtime.h) over an artifact's data and kernels.
// A CPU model binds the plan's slots straight to the caller's buffers and to the weights in
// the mapped library, so nothing is copied at load or per run; an OpenCL model hands the
// plan to the runtime core's OpenCLLaunchList.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "ArtifactFormat.h"
#include "BufferPlan.h"
#include "OpenCLLaunchList.h"
#include "RunPlan.h"
#include "ThreadPool.h"
#include "nnc/ir/KernelHelpers.h"
#include "nnc/ir/CpuTarget.h"
#include "nnc/runtime/nnc_runtime.h"

namespace {

thread_local std::string tlsError;

struct TensorInfo {
  std::string name;
  int dtype = 0;
  uint32_t elementBytes = 0;
  std::vector<int64_t> dims;
  int64_t bytes = 0;
  uint8_t kind = 0; // outputs: nnc::OutputSpec::Kind
  int32_t index = 0;
};

struct WeightInfo {
  int dtype = 0;
  std::vector<int64_t> dims;
  const void *data = nullptr;
  uint64_t bytes = 0;
};

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<void, AlignedFree>;

AlignedBuffer alignedBuffer(int64_t bytes) {
  size_t n = static_cast<size_t>((std::max<int64_t>(bytes, 1) + nnc::kArenaAlignment - 1) /
                                 nnc::kArenaAlignment * nnc::kArenaAlignment);
  return AlignedBuffer(std::aligned_alloc(nnc::kArenaAlignment, n));
}

template <typename... Args> void setError(fmt::format_string<Args...> f, Args &&...args) {
  tlsError = fmt::format(f, std::forward<Args>(args)...);
}

std::string shapeText(const int64_t *d, int rank) {
  std::string s;
  for (int i = 0; i < rank; ++i)
    s += (i ? "x" : "") + std::to_string(d[i]);
  return rank == 0 ? "a scalar" : s;
}

} // namespace

struct nnc_model {
  std::string path;
  void *dl = nullptr;
  nnc::artifact::TargetKind target = nnc::artifact::TargetKind::Cpu;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<WeightInfo> weights;
  std::vector<std::string> kernelNames;
  std::vector<nnc::KernelFn> fns;
  std::vector<uint64_t> firstArg;
  std::vector<nnc::OpenCLLaunch> launches;
  std::vector<nnc::Slot> args;
  int64_t arenaBytes = 0;
  // The kernels' runtime checks (nnc::RunPlan::checks) and their status area in the arena.
  std::vector<nnc::RunCheck> checks;
  int64_t statusOffset = 0, statusBytes = 0;
  std::string clSource, notes;
  std::vector<std::string> clBinaries;
  std::string description; // nnc_describe's text
  // NNC_LOAD_PROFILE: each CPU kernel's wall time summed over the runs (OpenCL: the launch
  // list's kernelTimes()), and the run count.
  bool profile = false;
  std::vector<double> kernelMs;
  int64_t profiledRuns = 0;

  std::vector<const void *> boundIn;
  std::vector<void *> boundOut;
  AlignedBuffer arena;
  std::vector<AlignedBuffer> outScratch; // outputs bound to unaligned memory
  std::vector<void *> ptrs;
  // OpenCL
  std::unique_ptr<nnc::RunPlan> plan;
  std::unique_ptr<nnc::OpenCLLaunchList> cl;
  // The CPU weights' copy in transparent huge pages (see moveWeightsToHugePages), or null.
  void *weightPages = nullptr;
  size_t weightPagesBytes = 0;

  ~nnc_model() {
    cl.reset();
    plan.reset();
    if (weightPages)
      munmap(weightPages, weightPagesBytes);
    if (dl)
      dlclose(dl);
  }

  void moveWeightsToHugePages();

  bool parse(const uint8_t *data, uint64_t size);
  bool runCpu(int threads);
  bool runOpenCL();
};

bool nnc_model::parse(const uint8_t *data, uint64_t size) {
  using namespace nnc::artifact;
  if (size < sizeof kMagic || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    setError("{}: not an nnc artifact (bad magic)", path);
    return false;
  }
  Reader r(data + sizeof kMagic, size - sizeof kMagic);
  uint32_t version = r.u32();
  if (version < 1 || version > kVersion) {
    setError("{}: artifact format version {}, this runtime reads versions 1 to {}", path, version,
             kVersion);
    return false;
  }
  target = static_cast<TargetKind>(r.u32());
  auto level = static_cast<nnc::CpuTarget::Level>(r.u32());
  std::string levelName = r.str();
  notes = r.str();
  if (target == TargetKind::Cpu && nnc::CpuTarget::host().level < level) {
    setError("{}: compiled for {}, which this CPU ({}) does not support", path, levelName,
             nnc::CpuTarget::host().levelName());
    return false;
  }
  auto readTensor = [&](TensorInfo &t, bool output) {
    t.name = r.str();
    t.dtype = r.i32();
    t.elementBytes = r.u32();
    uint32_t rank = r.u32();
    t.bytes = t.elementBytes;
    for (uint32_t d = 0; d < rank && r.ok(); ++d) {
      t.dims.push_back(r.i64());
      t.bytes *= t.dims.back();
    }
    if (output) {
      t.kind = r.u8();
      t.index = r.i32();
    }
  };
  inputs.resize(r.u32());
  for (TensorInfo &t : inputs)
    readTensor(t, false);
  outputs.resize(r.u32());
  for (TensorInfo &t : outputs)
    readTensor(t, true);
  weights.resize(r.ok() ? r.u32() : 0);
  for (WeightInfo &w : weights) {
    w.dtype = r.i32();
    uint32_t rank = r.u32();
    for (uint32_t d = 0; d < rank && r.ok(); ++d)
      w.dims.push_back(r.i64());
    uint64_t offset = r.u64();
    w.bytes = r.u64();
    if (offset > size || w.bytes > size - offset) {
      setError("{}: corrupt artifact (a weight lies outside its data)", path);
      return false;
    }
    w.data = data + offset;
  }
  uint32_t numKernels = r.ok() ? r.u32() : 0;
  for (uint32_t k = 0; k < numKernels && r.ok(); ++k) {
    kernelNames.push_back(r.str());
    firstArg.push_back(r.u64());
    nnc::OpenCLLaunch l;
    l.name = kernelNames.back();
    l.dims = static_cast<int>(r.u32());
    for (int64_t &v : l.globalSize)
      v = r.i64();
    for (int64_t &v : l.localSize)
      v = r.i64();
    launches.push_back(l);
  }
  uint64_t numArgs = r.ok() ? r.u64() : 0;
  for (uint64_t a = 0; a < numArgs && r.ok(); ++a) {
    auto kind = static_cast<nnc::SlotKind>(r.u8());
    args.push_back({kind, r.i64()});
  }
  arenaBytes = r.i64();
  clSource = r.str();
  uint32_t numBinaries = version >= 2 && r.ok() ? r.u32() : 0;
  for (uint32_t b = 0; b < numBinaries && r.ok(); ++b)
    clBinaries.push_back(r.str());
  if (version >= 3 && r.ok()) {
    statusOffset = r.i64();
    statusBytes = r.i64();
    uint32_t numChecks = r.u32();
    for (uint32_t c = 0; c < numChecks && r.ok(); ++c) {
      nnc::RunCheck check;
      check.offset = r.i64();
      check.before = r.str();
      check.after = r.str();
      checks.push_back(std::move(check));
    }
  }
  if (!r.ok()) {
    setError("{}: corrupt artifact (its data ends early)", path);
    return false;
  }
  bool statusFits = statusOffset >= 0 && statusBytes >= 0 && statusBytes <= arenaBytes &&
                    statusOffset <= arenaBytes - statusBytes;
  for (const nnc::RunCheck &c : checks)
    statusFits = statusFits && c.offset >= 0 && c.offset + 16 <= statusBytes;
  if (!statusFits) {
    setError("{}: corrupt artifact (a runtime check lies outside the arena)", path);
    return false;
  }
  for (const nnc::Slot &s : args) {
    size_t limit = s.kind == nnc::SlotKind::Input    ? inputs.size()
                   : s.kind == nnc::SlotKind::Output ? outputs.size()
                   : s.kind == nnc::SlotKind::Weight ? weights.size()
                                                     : size_t(-1);
    if (s.index < 0 || size_t(s.index) >= limit) {
      setError("{}: corrupt artifact (a kernel parameter points nowhere)", path);
      return false;
    }
  }
  boundIn.assign(inputs.size(), nullptr);
  boundOut.assign(outputs.size(), nullptr);
  outScratch.resize(outputs.size());
  ptrs.resize(args.size());
  return true;
}

/// Large CPU weights are copied once, at load, into an anonymous mapping advised for
/// transparent huge pages, as the JIT's constants live (ir/Tensor.cpp): read in place from the
/// library's file-backed 4 KiB pages, the GEMM and conv kernels' weight streams miss the TLB
/// (a model with tens of MB of weights ran measurably slower than under `nnc bench`). Small
/// models keep reading in place (nothing to gain, a copy to pay).
void nnc_model::moveWeightsToHugePages() {
  constexpr uint64_t kMinBytes = uint64_t(2) << 20;
  uint64_t total = 0;
  for (const WeightInfo &w : weights)
    total = (total + nnc::kArenaAlignment - 1) / nnc::kArenaAlignment * nnc::kArenaAlignment +
            w.bytes;
  if (target != nnc::artifact::TargetKind::Cpu || total < kMinBytes)
    return;
  void *p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return; // keep reading in place
#ifdef MADV_HUGEPAGE
  madvise(p, total, MADV_HUGEPAGE); // advice only
#endif
  // Each weight's whole pages in the library are clean file pages: dropped right after the
  // copy, so the peak holds the copy and one weight's source, not two copies of everything.
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uint64_t at = 0;
  for (WeightInfo &w : weights) {
    at = (at + nnc::kArenaAlignment - 1) / nnc::kArenaAlignment * nnc::kArenaAlignment;
    std::memcpy(static_cast<char *>(p) + at, w.data, w.bytes);
    uintptr_t first = (reinterpret_cast<uintptr_t>(w.data) + page - 1) / page * page;
    uintptr_t last = (reinterpret_cast<uintptr_t>(w.data) + w.bytes) / page * page;
    if (last > first)
      madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
    w.data = static_cast<char *>(p) + at;
    at += w.bytes;
  }
  weightPages = p;
  weightPagesBytes = total;
}

bool nnc_model::runCpu(int threads) {
  using nnc::SlotKind;
  if (!arena && arenaBytes > 0) {
    arena = alignedBuffer(arenaBytes);
    if (!arena) {
      setError("cannot allocate an arena of {} bytes", arenaBytes);
      return false;
    }
  }
  // Kernels assume the buffers they write are 64-byte aligned.
  std::vector<void *> out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    out[i] = boundOut[i];
    if (reinterpret_cast<uintptr_t>(out[i]) % nnc::kArenaAlignment != 0) {
      if (!outScratch[i])
        outScratch[i] = alignedBuffer(outputs[i].bytes);
      out[i] = outScratch[i].get();
    }
  }
  for (size_t a = 0; a < args.size(); ++a) {
    const nnc::Slot &s = args[a];
    switch (s.kind) {
    case SlotKind::Input:
      ptrs[a] = const_cast<void *>(boundIn[s.index]);
      break;
    case SlotKind::Output:
      ptrs[a] = out[s.index];
      break;
    case SlotKind::Weight:
      ptrs[a] = const_cast<void *>(weights[s.index].data);
      break;
    case SlotKind::Arena:
      ptrs[a] = static_cast<char *>(arena.get()) + s.index;
      break;
    }
  }
  char *status = static_cast<char *>(arena.get()) + statusOffset;
  if (statusBytes > 0)
    std::memset(status, 0, static_cast<size_t>(statusBytes));
  {
    nnc::ThreadPool::Scope scope(threads == 1 ? nullptr : nnc::ThreadPool::shared(threads));
    for (size_t k = 0; k < fns.size(); ++k) {
      if (!profile) {
        fns[k](ptrs.data() + firstArg[k]);
        continue;
      }
      auto start = std::chrono::steady_clock::now();
      fns[k](ptrs.data() + firstArg[k]);
      kernelMs[k] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    }
  }
  if (statusBytes > 0) {
    if (nnc::Error e = nnc::checkStatus(checks, status)) {
      tlsError = e.message();
      return false;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorInfo &o = outputs[i];
    const void *from = nullptr;
    switch (static_cast<nnc::OutputSpec::Kind>(o.kind)) {
    case nnc::OutputSpec::Fresh:
      from = out[i] == boundOut[i] ? nullptr : out[i];
      break;
    case nnc::OutputSpec::FromInput:
      from = boundIn[o.index];
      break;
    case nnc::OutputSpec::FromWeight:
      from = weights[o.index].data;
      break;
    case nnc::OutputSpec::CopyOfOutput:
      from = boundOut[o.index];
      break;
    case nnc::OutputSpec::Dynamic:
      break;
    }
    if (from)
      std::memcpy(boundOut[i], from, static_cast<size_t>(o.bytes));
  }
  return true;
}

bool nnc_model::runOpenCL() {
  std::vector<nnc::Tensor> in;
  // The runtime reads the bound inputs in place (it never writes an input) and downloads the
  // fresh outputs straight into the bound buffers (nnc_bind_output checked their sizes).
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(nnc::Tensor::borrow(plan->inputTypes[i].dtype, nnc::Extents(inputs[i].dims),
                                     const_cast<void *>(boundIn[i])));
  std::vector<void *> into(outputs.size(), nullptr);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (static_cast<nnc::OutputSpec::Kind>(outputs[i].kind) == nnc::OutputSpec::Fresh)
      into[i] = boundOut[i];
  nnc::Expected<std::vector<nnc::Tensor>> result = cl->run(in, into);
  if (!result) {
    tlsError = result.error().message();
    return false;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if ((*result)[i].rawData() != boundOut[i])
      std::memcpy(boundOut[i], (*result)[i].rawData(), static_cast<size_t>(outputs[i].bytes));
  return true;
}

namespace {

/// The OpenCL launch list of `m`: its run plan rebuilt (weights copied: they go to the device
/// once) and the program built for the default device.
bool createOpenCL(nnc_model &m) {
  auto p = std::make_unique<nnc::RunPlan>();
  auto dtypeOf = [&](int code) -> std::optional<nnc::DType> {
    std::optional<nnc::DType> d = nnc::dtypeFromOnnx(code);
    if (!d)
      setError("{}: unknown dtype code {}", m.path, code);
    return d;
  };
  for (const TensorInfo &t : m.inputs) {
    std::optional<nnc::DType> d = dtypeOf(t.dtype);
    if (!d)
      return false;
    p->inputNames.push_back(t.name);
    nnc::Shape shape;
    for (int64_t e : t.dims)
      shape.push_back(nnc::Dim(e));
    p->inputTypes.push_back(nnc::TensorType{*d, shape});
  }
  for (const TensorInfo &t : m.outputs) {
    std::optional<nnc::DType> d = dtypeOf(t.dtype);
    if (!d)
      return false;
    nnc::OutputSpec o{};
    o.kind = static_cast<nnc::OutputSpec::Kind>(t.kind);
    o.index = t.index;
    o.dtype = *d;
    o.extents = nnc::Extents(t.dims);
    p->outputs.push_back(o);
  }
  for (const WeightInfo &w : m.weights) {
    std::optional<nnc::DType> d = dtypeOf(w.dtype);
    if (!d)
      return false;
    p->weights.push_back(nnc::Tensor::fromBytes(*d, nnc::Extents(w.dims), w.data));
  }
  p->args = m.args;
  p->firstArg.assign(m.firstArg.begin(), m.firstArg.end());
  p->arenaBytes = m.arenaBytes;
  p->plan.peakBytes = m.arenaBytes;
  p->checks = m.checks;
  p->statusOffset = m.statusOffset;
  p->statusBytes = m.statusBytes;
  nnc::OpenCLLaunchOptions options;
  options.binaries = m.clBinaries;
  options.profile = m.profile;
  nnc::Expected<std::unique_ptr<nnc::OpenCLLaunchList>> cl =
      nnc::OpenCLLaunchList::create(*p, m.clSource, m.launches, options);
  if (!cl) {
    setError("{}: {}", m.path, cl.error().message());
    return false;
  }
  m.plan = std::move(p);
  m.cl = std::move(*cl);
  const nnc::OpenCLDeviceInfo &dev = m.cl->device();
  m.description += fmt::format("\nOpenCL device {}.{} {} (driver {}): program {}", dev.platform,
                               dev.device, dev.deviceName, dev.driverVersion,
                               m.cl->programOrigin() == nnc::ProgramOrigin::Prebuilt
                                   ? "from the artifact's device binary"
                                   : "built from its OpenCL C source");
  return true;
}

const TensorInfo *tensorAt(const std::vector<TensorInfo> &v, const nnc_model *m, int i) {
  if (!m || i < 0 || size_t(i) >= v.size())
    return nullptr;
  return &v[i];
}

int indexOf(const std::vector<TensorInfo> &v, const char *name) {
  for (size_t i = 0; name && i < v.size(); ++i)
    if (v[i].name == name)
      return static_cast<int>(i);
  return -1;
}

} // namespace

extern "C" {

const char *nnc_last_error(void) {
  return tlsError.c_str();
}

nnc_model *nnc_load(const char *path) {
  return nnc_load_with(path, 0);
}

nnc_model *nnc_load_with(const char *path, unsigned flags) {
  tlsError.clear();
  if (flags & ~unsigned(NNC_LOAD_PROFILE)) {
    setError("nnc_load_with: unknown flags {:#x}", flags & ~unsigned(NNC_LOAD_PROFILE));
    return nullptr;
  }
  if (!path) {
    setError("nnc_load: no path");
    return nullptr;
  }
  struct stat st;
  if (stat(path, &st) != 0) {
    setError("{}: no such file", path);
    return nullptr;
  }
  // Generated code calls nnc_parallel_for and the scalar helpers (nnc/ir/KernelHelpers.h:
  // f16/bf16 rounding, the f8/f4 storage formats), which this library defines (the reference
  // below links the helpers in): make its symbols global in case it was itself opened
  // RTLD_LOCAL (as Python's ctypes does).
  int helpers = 0;
  (void)nnc::kernelHelpers(&helpers);
  Dl_info self;
  if (dladdr(reinterpret_cast<void *>(&nnc_load), &self) && self.dli_fname)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  auto m = std::make_unique<nnc_model>();
  m->path = path;
  m->profile = (flags & NNC_LOAD_PROFILE) != 0;
  // RTLD_LOCAL: two artifacts' kernels may share names.
  m->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->dl) {
    const char *e = dlerror();
    setError("{}: cannot load: {}", path, e ? e : "unknown error");
    return nullptr;
  }
  auto *data = static_cast<const uint8_t *>(dlsym(m->dl, nnc::artifact::kDataSymbol));
  auto *size = static_cast<const uint64_t *>(dlsym(m->dl, nnc::artifact::kSizeSymbol));
  if (!data || !size) {
    setError("{}: not an nnc artifact (no {} symbol)", path, nnc::artifact::kDataSymbol);
    return nullptr;
  }
  if (!m->parse(data, *size))
    return nullptr;
  m->description = m->notes;
  m->moveWeightsToHugePages();
  if (m->target == nnc::artifact::TargetKind::OpenCL) {
    if (!createOpenCL(*m))
      return nullptr;
    return m.release();
  }
  for (const std::string &name : m->kernelNames) {
    auto fn = reinterpret_cast<nnc::KernelFn>(dlsym(m->dl, name.c_str()));
    if (!fn) {
      setError("{}: kernel {} is missing", path, name);
      return nullptr;
    }
    m->fns.push_back(fn);
  }
  if (m->profile)
    m->kernelMs.assign(m->fns.size(), 0.0);
  return m.release();
}

const char *nnc_describe(const nnc_model *model) {
  return model ? model->description.c_str() : nullptr;
}

void nnc_free(nnc_model *model) {
  delete model;
}

int nnc_num_inputs(const nnc_model *m) {
  return m ? static_cast<int>(m->inputs.size()) : -1;
}
int nnc_num_outputs(const nnc_model *m) {
  return m ? static_cast<int>(m->outputs.size()) : -1;
}

#define NNC_TENSOR_QUERIES(kind, list)                                                             \
  const char *nnc_##kind##_name(const nnc_model *m, int i) {                                       \
    const TensorInfo *t = m ? tensorAt(m->list, m, i) : nullptr;                                   \
    return t ? t->name.c_str() : nullptr;                                                          \
  }                                                                                                \
  int nnc_##kind##_dtype(const nnc_model *m, int i) {                                              \
    const TensorInfo *t = m ? tensorAt(m->list, m, i) : nullptr;                                   \
    return t ? t->dtype : -1;                                                                      \
  }                                                                                                \
  int nnc_##kind##_rank(const nnc_model *m, int i) {                                               \
    const TensorInfo *t = m ? tensorAt(m->list, m, i) : nullptr;                                   \
    return t ? static_cast<int>(t->dims.size()) : -1;                                              \
  }                                                                                                \
  const int64_t *nnc_##kind##_shape(const nnc_model *m, int i) {                                   \
    const TensorInfo *t = m ? tensorAt(m->list, m, i) : nullptr;                                   \
    return t ? t->dims.data() : nullptr;                                                           \
  }                                                                                                \
  int64_t nnc_##kind##_bytes(const nnc_model *m, int i) {                                          \
    const TensorInfo *t = m ? tensorAt(m->list, m, i) : nullptr;                                   \
    return t ? t->bytes : -1;                                                                      \
  }                                                                                                \
  int nnc_##kind##_index(const nnc_model *m, const char *name) {                                   \
    return m ? indexOf(m->list, name) : -1;                                                        \
  }
NNC_TENSOR_QUERIES(input, inputs)
NNC_TENSOR_QUERIES(output, outputs)
#undef NNC_TENSOR_QUERIES

int nnc_bind_input(nnc_model *m, int i, const void *data, int rank, const int64_t *shape) {
  const TensorInfo *t = m ? tensorAt(m->inputs, m, i) : nullptr;
  if (!t) {
    setError("nnc_bind_input: no input {}", i);
    return -1;
  }
  if (!data || rank < 0 || (rank > 0 && !shape)) {
    setError("input '{}': no data or shape given", t->name);
    return -1;
  }
  if (size_t(rank) != t->dims.size() ||
      (rank > 0 && std::memcmp(shape, t->dims.data(), sizeof(int64_t) * size_t(rank)) != 0)) {
    setError("input '{}': shape {} given, but the artifact runs {} only (compile another "
             "with --shape for other shapes)",
             t->name, shapeText(shape, rank),
             shapeText(t->dims.data(), static_cast<int>(t->dims.size())));
    return -1;
  }
  m->boundIn[i] = data;
  return 0;
}

int nnc_bind_output(nnc_model *m, int i, void *data, size_t bytes) {
  const TensorInfo *t = m ? tensorAt(m->outputs, m, i) : nullptr;
  if (!t) {
    setError("nnc_bind_output: no output {}", i);
    return -1;
  }
  if (!data || bytes < size_t(t->bytes)) {
    setError("output '{}': a buffer of {} bytes given, it needs {}", t->name, data ? bytes : 0,
             t->bytes);
    return -1;
  }
  m->boundOut[i] = data;
  return 0;
}

int nnc_run(nnc_model *m, int threads) {
  if (!m) {
    setError("nnc_run: no model");
    return -1;
  }
  for (size_t i = 0; i < m->inputs.size(); ++i)
    if (!m->boundIn[i]) {
      setError("input '{}' is not bound (nnc_bind_input)", m->inputs[i].name);
      return -1;
    }
  for (size_t i = 0; i < m->outputs.size(); ++i)
    if (!m->boundOut[i]) {
      setError("output '{}' is not bound (nnc_bind_output)", m->outputs[i].name);
      return -1;
    }
  bool ok = m->target == nnc::artifact::TargetKind::OpenCL ? m->runOpenCL() : m->runCpu(threads);
  if (ok && m->profile && m->target == nnc::artifact::TargetKind::Cpu)
    ++m->profiledRuns;
  return ok ? 0 : -1;
}

int nnc_num_kernels(const nnc_model *m) {
  return m ? static_cast<int>(m->kernelNames.size()) : -1;
}

const char *nnc_kernel_name(const nnc_model *m, int k) {
  if (!m || k < 0 || size_t(k) >= m->kernelNames.size())
    return nullptr;
  return m->kernelNames[size_t(k)].c_str();
}

double nnc_kernel_ms(const nnc_model *m, int k) {
  if (!m || !m->profile || k < 0 || size_t(k) >= m->kernelNames.size())
    return -1;
  if (m->cl) {
    std::vector<nnc::KernelTime> times = m->cl->kernelTimes();
    return size_t(k) < times.size() ? times[size_t(k)].deviceMs : -1;
  }
  return m->kernelMs[size_t(k)];
}

int64_t nnc_profiled_runs(const nnc_model *m) {
  if (!m || !m->profile)
    return -1;
  return m->cl ? m->cl->runs() : m->profiledRuns;
}

} // extern "C"

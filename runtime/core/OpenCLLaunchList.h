// A launch list on an OpenCL device: a program given as OpenCL C source (its binary cached on
// disk), built for one device, with the whole model resident there (weights uploaded once, one
// device arena, inputs in and outputs out once per run). What a compiled OpenCL model needs at
// run time; generating the source is the compiler's business.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "RunPlan.h"
#include "nnc/runtime/OpenCLDevice.h"
#include "nnc/support/KernelAbi.h"

namespace nnc {

struct OpenCLLaunchOptions {
  int platform = -1; ///< -1: pickOpenCLDevice's choice.
  int device = -1;
  /// Folder of the program-binary cache ("" disables it).
  std::string cacheDir;
  /// Time every kernel with OpenCL profiling events.
  bool profile = false;
  /// False builds with -cl-opt-disable.
  bool optimize = true;
  /// Inputs and outputs cross through one pinned host buffer (CL_MEM_ALLOC_HOST_PTR, mapped
  /// once): a copy on the host, then DMA, instead of the driver staging pageable memory in
  /// pieces. Auto: on a GPU (a CPU device's "device memory" is host memory already).
  enum class Staging { Auto, Pinned, Direct } staging = Staging::Auto;
  /// Prebuilt programs (buildOpenCLProgramBinary's), tried before the cache and the source;
  /// one built for another device, driver, option set or source is skipped.
  std::vector<std::string> binaries;
};

/// Where a launch list's program came from.
enum class ProgramOrigin { Source, Cache, Prebuilt };

/// `source` built for the device `opts` picks, as the device binary keyed by what it was built
/// for (device, driver version, options, source), for OpenCLLaunchOptions::binaries.
Expected<std::string> buildOpenCLProgramBinary(const std::string &source,
                                               const OpenCLLaunchOptions &opts);

/// run() calls are serialized (one arena per device).
class OpenCLLaunchList {
public:
  virtual ~OpenCLLaunchList() = default;
  /// Builds `source` for the device (or loads its binary from the cache), uploads the plan's
  /// weights and sets every kernel argument: kernel k of `plan` is launches[k] of the program.
  /// `plan` must outlive the list.
  static Expected<std::unique_ptr<OpenCLLaunchList>> create(const RunPlan &plan,
                                                            const std::string &source,
                                                            std::vector<OpenCLLaunch> launches,
                                                            const OpenCLLaunchOptions &opts);

  /// Checks the inputs against the plan, runs every kernel and returns the outputs. The
  /// inputs kept resident are not read (they may be null tensors) and the outputs that feed
  /// them come back null: neither crosses.
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) = 0;
  /// As run(), with fresh output o downloaded straight into into[o] where that is not null
  /// (memory of at least the output's bytes, which the returned tensor is then over).
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs,
                                            const std::vector<void *> &into) = 0;
  /// Keeps inputs on the device across runs (a train step's parameters and optimizer state):
  /// `initial[k]` is uploaded now as input `resident[k].input`; after each run, an input with
  /// `fromOutput` takes that output's value by swapping the two device regions (no copy, no
  /// transfer). A fed-back output must be one the kernels write, of the input's type, and no
  /// other output may be a copy of a resident input. Replaces any earlier set.
  virtual Error keepResident(const std::vector<ResidentInput> &resident,
                             const std::vector<Tensor> &initial) = 0;
  /// Downloads the current value of resident input `resident[k]` (counted as a run transfer).
  virtual Expected<Tensor> readResident(size_t k) const = 0;
  virtual const OpenCLDeviceInfo &device() const = 0;
  virtual ProgramOrigin programOrigin() const = 0;
  /// True when the program binary came from the cache.
  bool fromCache() const { return programOrigin() == ProgramOrigin::Cache; }
  /// Transfers at load (weights) and over all runs since load.
  virtual TransferStats loadTransfers() const = 0;
  virtual TransferStats runTransfers() const = 0;
  virtual int64_t runs() const = 0;
  /// Per kernel in launch order (empty unless profiling), and the device time of the runs'
  /// transfers.
  virtual std::vector<KernelTime> kernelTimes() const = 0;
  virtual double transferDeviceMs() const = 0;
  /// Zeroes the run counters and kernel times.
  virtual void resetRunCounters() = 0;
};

} // namespace nnc

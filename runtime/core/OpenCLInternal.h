// What the OpenCL launch list's parts share (OpenCLDevices.cpp: device discovery and one
// context per device; OpenCLProgram.cpp: building programs and the program-binary cache;
// OpenCLLaunchList.cpp: device memory and launches). Private to runtime/core (not installed).
#pragma once

#include <CL/cl.h>

#include <optional>
#include <string>
#include <vector>

#include "OpenCLLaunchList.h"
#include "nnc/support/Error.h"

namespace nnc::ocl {

/// The name of OpenCL error code `e` ("an OpenCL error" for one not listed).
const char *clErrorName(cl_int e);
/// The error of OpenCL call `what` failing with `e`.
Error clError(cl_int e, const std::string &what);

/// Returns clError from the enclosing function when `call` fails.
#define NNC_CL(call, what)                                                                         \
  do {                                                                                             \
    cl_int err_ = (call);                                                                          \
    if (err_ != CL_SUCCESS)                                                                        \
      return clError(err_, what);                                                                  \
  } while (0)

/// A device of the system: what nnc reports of it, and its OpenCL handles.
struct ClDevice {
  OpenCLDeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
};

/// Every device of every platform (an error naming what is missing when there is none).
Expected<std::vector<ClDevice>> enumerate();
/// Device `device` of platform `platform` (-1 for either: 0); with both -1, nnc's choice: a
/// GPU before other devices, then the most compute units times clock.
Expected<ClDevice> pick(int platform, int device);
/// One context per device for the whole process (PoCL's context creation is not free).
Expected<cl_context> sharedContext(const ClDevice &d);

/// The build options of an optimized (or, `optimize` false, unoptimized) program.
std::string buildOptions(bool optimize);
/// `source` built for `d`; the error carries the build log. A driver that fails the optimized
/// build (its optimizer's bug, or a resource it runs out of) often builds the program
/// unoptimized: slower kernels beat no results, so that is tried next, said on stderr, and
/// `*cacheable` set false (a fixed driver gets its chance next time).
/// NNC_FAULT=opencl-build makes the device fail the first build (an option it does not know),
/// so that the tests see the fallback work with a real driver's failure.
Expected<cl_program> buildFromSource(cl_context ctx, const ClDevice &d, const std::string &source,
                                     const std::string &options, bool *cacheable);
/// The device binary of a program built for one device ("" when the driver gives none).
std::string programBinary(cl_program program);

/// The program-binary cache: one file per key, holding the key text (checked on load, so a
/// hash collision is a miss), a checksum of the binary (so a corrupted file is not handed to
/// the driver) and the binary; written to a temporary name, then renamed. A file that cannot
/// be used or written is skipped, and said so on stderr.
class ProgramCache {
public:
  /// The cache in `dir` ("" for none: load and store do nothing) of the program built from
  /// `source` with `options` for `d`.
  ProgramCache(std::string dir, const ClDevice &d, const std::string &options,
               const std::string &source);
  const std::string &path() const { return path_; }
  /// A cache file's text for `binary`: the key, the binary's checksum, the binary. Also what
  /// buildOpenCLProgramBinary gives for an artifact to carry.
  std::string entry(const std::string &binary) const;
  /// The binary of `entry` when it is for this key; nullopt for another key, and also (with
  /// `corrupt` set) for a truncated or corrupted entry of this key.
  std::optional<std::string> match(const std::string &entry, bool *corrupt = nullptr) const;
  /// The binary of this key's cache file (nullopt when there is none or it is unusable).
  std::optional<std::string> load() const;
  /// Writes `binary`'s cache file (nothing for an empty binary or without a directory).
  void store(const std::string &binary) const;

private:
  std::string dir_, key_, path_;
};

} // namespace nnc::ocl

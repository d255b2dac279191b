// Building OpenCL programs: from source (with the unoptimized build as the fallback of a
// driver that fails the optimized one), and the on-disk program-binary cache.
#include "OpenCLInternal.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "nnc/support/Hash.h"
#include "nnc/support/Warning.h"

namespace nnc {

namespace ocl {

namespace fs = std::filesystem;

namespace {

/// The program cache's and the artifacts' checksums and keys are FNV-1a from this start value
/// (a digit short of FNV's own offset basis, as they were first written); kept so that
/// existing caches and `--emit=lib` artifacts still find their device binaries.
constexpr uint64_t kProgramHashStart = 1469598103934665603ull;

uint64_t programHash(const std::string &s) { return fnv1a(s, kProgramHashStart); }

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

} // namespace

std::string buildOptions(bool optimize) {
  return optimize ? "-cl-std=CL1.2" : "-cl-std=CL1.2 -cl-opt-disable";
}

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

ProgramCache::ProgramCache(std::string dir, const ClDevice &d, const std::string &options,
                           const std::string &source)
    : dir_(std::move(dir)) {
  key_ = fmt::format("nnc-opencl-2\n{}\n{}\n{}\n{}\n{}\n{:016x}{:016x}\n", options,
                     d.info.platformName, d.info.deviceName, d.info.version, d.info.driverVersion,
                     programHash(source), programHash(source + "\x01"));
  path_ = dir_.empty() ? "" : fmt::format("{}/{:016x}.bin", dir_, programHash(key_));
}

std::string ProgramCache::entry(const std::string &binary) const {
  return key_ + fmt::format("{:016x}\n", programHash(binary)) + binary;
}

std::optional<std::string> ProgramCache::match(const std::string &entry, bool *corrupt) const {
  if (entry.compare(0, key_.size(), key_) != 0)
    return std::nullopt;           // another key (or another key with the same hash)
  constexpr size_t kSumChars = 17; // "%016x\n"
  std::string binary = entry.size() > key_.size() + kSumChars
                           ? entry.substr(key_.size() + kSumChars)
                           : std::string();
  if (binary.empty() ||
      entry.compare(key_.size(), kSumChars, fmt::format("{:016x}\n", programHash(binary))) != 0) {
    if (corrupt)
      *corrupt = true;
    return std::nullopt;
  }
  return binary;
}

std::optional<std::string> ProgramCache::load() const {
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

void ProgramCache::store(const std::string &binary) const {
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
    out << key_ << fmt::format("{:016x}\n", programHash(binary)) << binary;
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

} // namespace ocl

using namespace ocl;

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

} // namespace nnc

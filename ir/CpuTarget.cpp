// CpuTarget: the host's x86-64 level from cpuid and the OS's saved register state, its cache
// sizes from sysfs (bounded), and the levels a user may ask for.
#include "nnc/ir/CpuTarget.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/ranges.h>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace nnc {

namespace {

/// What cpuid and XCR0 say about the host.
struct HostFeatures {
  bool v3 = false, v4 = false, vnni = false, avxVnni = false, bf16 = false, amx = false;
  std::vector<std::string> missingV3, missingV4;
};

HostFeatures detectFeatures() {
  HostFeatures h;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  auto bit = [](unsigned r, int i) { return ((r >> i) & 1u) != 0; };
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return h;
  bool fma = bit(c, 12), movbe = bit(c, 22), osxsave = bit(c, 27), avx = bit(c, 28),
       f16c = bit(c, 29);
  uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t(hi) << 32) | lo;
  }
  bool ymmState = (xcr0 & 0x6) == 0x6;   // SSE and AVX state saved by the OS
  bool zmmState = (xcr0 & 0xe6) == 0xe6; // ... and the opmask and upper ZMM state
  unsigned maxLeaf = __get_cpuid_max(0, nullptr);
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (maxLeaf >= 7) {
    __cpuid_count(7, 0, a, b7, c7, d7);
    unsigned sub = a;
    if (sub >= 1) {
      unsigned x = 0, y = 0, z = 0;
      __cpuid_count(7, 1, a71, x, y, z);
    }
  }
  bool lzcnt = false;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d))
    lzcnt = bit(c, 5);
  struct Need {
    const char *name;
    bool have;
  };
  const Need v3[] = {{"avx", avx && ymmState},
                     {"avx2", bit(b7, 5) && ymmState},
                     {"fma", fma},
                     {"f16c", f16c},
                     {"bmi", bit(b7, 3)},
                     {"bmi2", bit(b7, 8)},
                     {"lzcnt", lzcnt},
                     {"movbe", movbe}};
  const Need v4[] = {{"avx512f", bit(b7, 16) && zmmState},
                     {"avx512dq", bit(b7, 17)},
                     {"avx512cd", bit(b7, 28)},
                     {"avx512bw", bit(b7, 30)},
                     {"avx512vl", bit(b7, 31)}};
  for (const Need &n : v3)
    if (!n.have)
      h.missingV3.push_back(n.name);
  for (const Need &n : v4)
    if (!n.have)
      h.missingV4.push_back(n.name);
  h.v3 = h.missingV3.empty();
  h.v4 = h.v3 && h.missingV4.empty();
  h.vnni = h.v4 && bit(c7, 11);
  h.avxVnni = h.v3 && bit(a71, 4);
  h.bf16 = h.v4 && bit(a71, 5);
  h.amx = bit(d7, 24) && (xcr0 & (uint64_t(3) << 17)) == (uint64_t(3) << 17);
#else
  h.missingV3.push_back("an x86-64 CPU");
  h.missingV4.push_back("an x86-64 CPU");
#endif
  return h;
}

const HostFeatures &hostFeatures() {
  static const HostFeatures h = detectFeatures();
  return h;
}

/// The data (or unified) cache of `level` from /sys/devices/system/cpu/cpu0/cache/index*/,
/// else sysconf's, else 0.
int64_t reportedCacheBytes(int level) {
  for (int i = 0;; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l))
      break;
    if (l != level || !(ty >> type) || type == "Instruction" || !(sz >> size) || size.empty())
      continue;
    char unit = size.back();
    int64_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
    int64_t v = std::atoll(size.c_str()) * scale;
    if (v > 0)
      return v;
  }
  long sc = level == 1   ? sysconf(_SC_LEVEL1_DCACHE_SIZE)
            : level == 2 ? sysconf(_SC_LEVEL2_CACHE_SIZE)
                         : sysconf(_SC_LEVEL3_CACHE_SIZE);
  return sc > 0 ? int64_t(sc) : 0;
}

/// `v` within [lo, hi]; `dflt` when unknown.
int64_t bounded(int64_t v, int64_t lo, int64_t hi, int64_t dflt) {
  return v <= 0 ? dflt : std::clamp(v, lo, hi);
}

struct Caches {
  int64_t l1d, l2, l3;
};

const Caches &hostCaches() {
  static const Caches c = [] {
    constexpr int64_t K = 1024, M = 1024 * 1024;
    Caches r;
    r.l1d = bounded(reportedCacheBytes(1), 16 * K, 128 * K, 32 * K);
    r.l2 = bounded(reportedCacheBytes(2), 256 * K, 4 * M, 1 * M);
    r.l3 = bounded(reportedCacheBytes(3), 2 * M, 1024 * M, 8 * M);
    return r;
  }();
  return c;
}

std::string sizeStr(int64_t bytes) {
  if (bytes % (1024 * 1024) == 0)
    return std::to_string(bytes / (1024 * 1024)) + "M";
  return std::to_string(bytes / 1024) + "K";
}

} // namespace

std::string CpuTarget::levelName() const {
  switch (level) {
  case Level::X86_64:
    return "x86-64";
  case Level::V3:
    return "x86-64-v3";
  case Level::V4:
    return "x86-64-v4";
  }
  return "?";
}

std::string CpuTarget::llvmFeatures() const {
  std::vector<const char *> f;
  if (avx512vnni)
    f.push_back("+avx512vnni");
  if (avxvnni)
    f.push_back("+avxvnni");
  if (avx512bf16)
    f.push_back("+avx512bf16");
  return fmt::format("{}", fmt::join(f, ","));
}

std::string CpuTarget::hostModelName() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0) {
        size_t colon = line.find(':');
        if (colon != std::string::npos && colon + 1 < line.size())
          return line.substr(std::min(line.find_first_not_of(' ', colon + 1), line.size()));
      }
    return std::string("unknown cpu");
  }();
  return name;
}

std::string CpuTarget::str() const {
  std::string ext;
  for (auto [on, name] :
       {std::pair{avx512vnni, "avx512-vnni"}, std::pair{avxvnni, "avx-vnni"},
        std::pair{avx512bf16, "avx512-bf16"}, std::pair{amx, "amx"}})
    if (on)
      ext += std::string("; ") + name;
  return fmt::format("{}{} ({}-bit vectors, {} registers{}) L1d {} L2 {} L3 {}{}", levelName(),
                     native ? " native" : "", vectorBits, vectorRegisters, ext, sizeStr(l1dBytes),
                     sizeStr(l2Bytes), sizeStr(l3Bytes),
                     precision == Precision::BF16 ? " precision bf16" : "");
}

Error CpuTarget::setPrecision(const std::string &name) {
  if (name == "fp32" || name == "f32") {
    precision = Precision::F32;
    return Error::success();
  }
  if (name != "bf16")
    return makeError("--precision '{}': unknown (available: fp32, bf16)", name);
  if (!avx512bf16 || vectorBits < 512)
    return makeError("--precision bf16 needs AVX512-BF16 on 512-bit vectors (the bf16 dot "
                     "product vdpbf16ps), which CPU target {} lacks{}",
                     levelName(), native ? "" : " (only --cpu native has the host's extensions)");
  precision = Precision::BF16;
  return Error::success();
}

CpuTarget CpuTarget::forLevel(Level level) {
  CpuTarget t;
  t.level = level;
  t.vectorBits = level == Level::V4 ? 512 : level == Level::V3 ? 256 : 128;
  t.vectorRegisters = level == Level::V4 ? 32 : 16;
  const Caches &c = hostCaches();
  t.l1dBytes = c.l1d;
  t.l2Bytes = c.l2;
  t.l3Bytes = c.l3;
  // A result larger than the last-level cache cannot stay there for its reader; beyond 32 MiB
  // a reported L3 is a socket's (shared with other cores and tenants) or invented, and a
  // result that large would be evicted before it is read anyway.
  t.streamingStoreBytes = std::clamp<int64_t>(c.l3, 4 << 20, 32 << 20);
  return t;
}

const CpuTarget &CpuTarget::host() {
  static const CpuTarget t = [] {
    const HostFeatures &h = hostFeatures();
    CpuTarget r = forLevel(h.v4 ? Level::V4 : h.v3 ? Level::V3 : Level::X86_64);
    r.native = true;
    r.avx512vnni = h.vnni;
    r.avxvnni = h.avxVnni;
    r.avx512bf16 = h.bf16;
    r.amx = h.amx;
    return r;
  }();
  return t;
}

Expected<CpuTarget> CpuTarget::parse(const std::string &name, bool runsHere) {
  if (name == "native" || name.empty())
    return host();
  Level level;
  if (name == "x86-64-v4")
    level = Level::V4;
  else if (name == "x86-64-v3")
    level = Level::V3;
  else if (name == "x86-64")
    level = Level::X86_64;
  else
    return makeError("unknown CPU target '{}' (available: native, x86-64-v4, x86-64-v3, x86-64)",
                     name);
  if (!runsHere)
    return forLevel(level);
  const HostFeatures &h = hostFeatures();
  std::vector<std::string> missing;
  if (level >= Level::V3)
    missing = h.missingV3;
  if (level == Level::V4)
    missing.insert(missing.end(), h.missingV4.begin(), h.missingV4.end());
  if (!missing.empty())
    return makeError("CPU target {}: this host lacks {} (its code would not run here)", name,
                     fmt::join(missing, ", "));
  return forLevel(level);
}

Expected<CpuTarget> CpuTarget::fromEnvironment(bool runsHere) {
  const char *e = std::getenv("NNC_CPU");
  if (!e || !*e)
    return host();
  Expected<CpuTarget> t = parse(e, runsHere);
  if (!t)
    return t.error().withContext("NNC_CPU");
  return t;
}

int CpuTarget::hostCores() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

bool CpuTarget::operator==(const CpuTarget &o) const {
  return level == o.level && native == o.native && vectorBits == o.vectorBits &&
         vectorRegisters == o.vectorRegisters && avx512vnni == o.avx512vnni && avxvnni == o.avxvnni &&
         avx512bf16 == o.avx512bf16 && amx == o.amx && precision == o.precision &&
         l1dBytes == o.l1dBytes &&
         l2Bytes == o.l2Bytes && l3Bytes == o.l3Bytes &&
         streamingStoreBytes == o.streamingStoreBytes;
}

} // namespace nnc

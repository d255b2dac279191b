// The byte layout of the data an ahead-of-time artifact (lib<name>.so) carries beside its
// kernels: the run plan, the buffer plan's arena size, the packed weights and, for OpenCL, the
// program text. Written by writeArtifact (compiler side), read by the C runtime; both include
// this header so the two sides cannot drift. Little-endian, fixed-width fields, no protobuf.
//
// Layout (version 3; version 2 lacks the checks, version 1 also the binaries):
//   magic "NNCART01", u32 version, u32 target (0 cpu, 1 opencl), str cpu level, str notes
//   u32 inputs  { str name, i32 onnx dtype, u32 element bytes, u32 rank, i64 dims[rank] }
//   u32 outputs { str name, i32 onnx dtype, u32 element bytes, u32 rank, i64 dims[rank],
//                 u8 kind (OutputSpec::Kind), i32 index }
//   u32 weights { i32 onnx dtype, u32 rank, i64 dims[rank], u64 offset, u64 bytes }
//   u32 kernels { str name, u64 first arg, u32 nd, i64 global[3], i64 local[3] }
//   u64 args    { u8 kind (SlotKind), i64 index (an arena slot: its byte offset) }
//   i64 arena bytes, str OpenCL C source ("" for cpu)
//   u32 binaries { str device binary, prefixed by the device, driver and options it is for }
//   i64 status offset, i64 status bytes (in the arena; RunPlan::checks)
//   u32 checks  { i64 offset in the status area, str before, str after }
//   then each weight's bytes at its offset from the blob's start, 64-byte aligned.
// A str is u32 length + bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace nnc::artifact {

inline constexpr char kMagic[8] = {'N', 'N', 'C', 'A', 'R', 'T', '0', '1'};
inline constexpr uint32_t kVersion = 3;
enum class TargetKind : uint32_t { Cpu = 0, OpenCL = 1 };
/// The symbols of the blob and its size in lib<name>.so.
inline constexpr const char *kDataSymbol = "nnc_artifact_data";
inline constexpr const char *kSizeSymbol = "nnc_artifact_size";
/// Alignment of the blob and of each weight in it (what generated code may assume).
inline constexpr uint64_t kAlignment = 64;

class Writer {
public:
  void u8(uint8_t v) { raw(&v, 1); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void *p, size_t n) { out_.append(static_cast<const char *>(p), n); }
  void align(uint64_t a) { out_.resize((out_.size() + a - 1) / a * a, '\0'); }
  size_t size() const { return out_.size(); }
  /// Overwrites 8 bytes at `at` (a u64 written earlier as a placeholder).
  void patchU64(size_t at, uint64_t v) { std::memcpy(&out_[at], &v, 8); }
  const std::string &bytes() const { return out_; }

private:
  std::string out_;
};

/// Reads fields in order; after the first read past the end every read gives zeros and ok()
/// is false.
class Reader {
public:
  Reader(const uint8_t *data, uint64_t size) : p_(data), end_(data + size) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return get<int32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int64_t i64() { return get<int64_t>(); }
  std::string str() {
    uint32_t n = u32();
    if (!ok_ || uint64_t(end_ - p_) < n) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char *>(p_), n);
    p_ += n;
    return s;
  }
  bool ok() const { return ok_; }

private:
  template <typename T> T get() {
    T v{};
    if (!ok_ || uint64_t(end_ - p_) < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  const uint8_t *p_, *end_;
  bool ok_ = true;
};

} // namespace nnc::artifact

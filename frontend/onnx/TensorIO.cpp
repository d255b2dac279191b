// Tensor files: ONNX TensorProto decoding/encoding (with external data). NumPy .npy files are
// the runtime core's (runtime/core/NpyFile.cpp).
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/support/Float16.h"
#include "onnx/OnnxInternal.h"

namespace nnc {
namespace onnxfe {

namespace fs = std::filesystem;

namespace {

/// Bits per element of the packed sub-byte types; 0 for the others.
int subByteBits(DType t) {
  switch (t) {
  case DType::I4:
  case DType::U4:
  case DType::F4E2M1: return 4;
  case DType::I2:
  case DType::U2: return 2;
  default: return 0;
  }
}

/// Bytes the packed (file) form of `n` elements of `t` takes.
int64_t packedBytes(DType t, int64_t n) {
  int bits = subByteBits(t);
  if (bits == 0)
    return n * static_cast<int64_t>(dtypeSize(t));
  return (n * bits + 7) / 8;
}

/// Unpacks sub-byte elements (low bits first). In memory each element's bits sit in the low
/// bits of its byte, the high bits zero (also for the signed types, like the interpreter).
void unpackSubByte(DType t, const uint8_t *src, int64_t n, uint8_t *dst) {
  int bits = subByteBits(t);
  uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  for (int64_t k = 0; k < n; ++k) {
    int64_t bit = k * bits;
    dst[k] = static_cast<uint8_t>((src[bit / 8] >> (bit % 8)) & mask);
  }
}

void packSubByte(DType t, const uint8_t *src, int64_t n, uint8_t *dst) {
  int bits = subByteBits(t);
  uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  std::memset(dst, 0, static_cast<size_t>(packedBytes(t, n)));
  for (int64_t k = 0; k < n; ++k) {
    int64_t bit = k * bits;
    dst[bit / 8] = static_cast<uint8_t>(dst[bit / 8] | ((src[k] & mask) << (bit % 8)));
  }
}

/// Copies `bytes` of the file form into `t` (unpacking sub-byte types; bool normalized).
void fillFromBytes(Tensor &t, const uint8_t *bytes) {
  int64_t n = t.numElements();
  if (subByteBits(t.dtype())) {
    unpackSubByte(t.dtype(), bytes, n, t.data<uint8_t>());
  } else if (t.byteSize()) {
    std::memcpy(t.rawData(), bytes, t.byteSize());
    if (t.dtype() == DType::Bool)
      for (int64_t i = 0; i < n; ++i)
        t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
  }
}

bool isInside(const fs::path &dir, const fs::path &p) {
  auto d = dir.begin(), q = p.begin();
  for (; d != dir.end(); ++d, ++q) {
    if (d->empty())
      continue;
    if (q == p.end() || *d != *q)
      return false;
  }
  return true;
}

Error readExternal(const onnx::TensorProto &p, const std::string &baseDir,
                   const std::string &what, Tensor &t) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : p.external_data()) {
    const std::string &k = kv.key();
    if (k == "location") {
      location = kv.value();
    } else if (k == "offset" || k == "length") {
      const std::string &s = kv.value();
      errno = 0;
      char *end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      NNC_USER_CHECK(!s.empty() && end && *end == 0 && errno == 0 && v >= 0,
                     "{}: external data {} '{}' is not a non-negative integer", what, k, s);
      (k == "offset" ? offset : length) = v;
    }
  }
  NNC_USER_CHECK(!location.empty(), "{}: external data has no location", what);
  NNC_USER_CHECK(!baseDir.empty(), "{}: external data '{}' is not allowed here", what, location);
  fs::path loc(location);
  NNC_USER_CHECK(!loc.is_absolute() && !loc.has_root_name() && !loc.has_root_directory(),
                 "{}: external data location '{}' is an absolute path; it must be relative to "
                 "the model's folder",
                 what, location);
  fs::path norm = loc.lexically_normal();
  NNC_USER_CHECK(norm.empty() || *norm.begin() != "..",
                 "{}: external data location '{}' escapes the model's folder", what, location);
  std::error_code ec;
  fs::path base = fs::canonical(fs::path(baseDir), ec);
  NNC_USER_CHECK(!ec, "{}: cannot resolve the model folder '{}': {}", what, baseDir,
                 ec.message());
  fs::path full = fs::path(baseDir) / norm;
  NNC_USER_CHECK(fs::exists(full, ec), "{}: external data file '{}' does not exist", what,
                 full.string());
  fs::path canon = fs::canonical(full, ec);
  NNC_USER_CHECK(!ec, "{}: cannot resolve external data file '{}': {}", what, full.string(),
                 ec.message());
  NNC_USER_CHECK(isInside(base, canon),
                 "{}: external data location '{}' escapes the model's folder (resolves to '{}')",
                 what, location, canon.string());
  NNC_USER_CHECK(fs::is_regular_file(canon, ec), "{}: external data '{}' is not a regular file",
                 what, full.string());
  uintmax_t fileSize = fs::file_size(canon, ec);
  NNC_USER_CHECK(!ec, "{}: cannot stat external data file '{}'", what, full.string());
  int64_t need = packedBytes(t.dtype(), t.numElements());
  NNC_USER_CHECK(length < 0 || length == need,
                 "{}: external data length {} does not match the {} bytes its shape needs", what,
                 length, need);
  NNC_USER_CHECK(static_cast<uintmax_t>(offset) <= fileSize &&
                     fileSize - static_cast<uintmax_t>(offset) >= static_cast<uintmax_t>(need),
                 "{}: external data file '{}' is too short ({} bytes; needs {} from offset {})",
                 what, full.string(), fileSize, need, offset);
  std::ifstream in(canon, std::ios::binary);
  NNC_USER_CHECK(in.good(), "{}: cannot open external data file '{}'", what, full.string());
  in.seekg(offset);
  if (subByteBits(t.dtype())) {
    std::vector<uint8_t> buf(static_cast<size_t>(need));
    in.read(reinterpret_cast<char *>(buf.data()), need);
    NNC_USER_CHECK(in.good() || need == 0, "{}: reading external data file '{}' failed", what,
                   full.string());
    fillFromBytes(t, buf.data());
  } else {
    in.read(static_cast<char *>(t.rawData()), need);
    NNC_USER_CHECK(in.good() || need == 0, "{}: reading external data file '{}' failed", what,
                   full.string());
    fillFromBytes(t, static_cast<const uint8_t *>(t.rawData()));
  }
  return Error::success();
}

template <typename Field>
Error checkCount(const Field &f, int64_t n, const char *field, const std::string &what) {
  NNC_USER_CHECK(static_cast<int64_t>(f.size()) == n,
                 "{}: {} has {} values but the shape needs {}", what, field, f.size(), n);
  return Error::success();
}

} // namespace

void setElementFromDouble(Tensor &t, int64_t i, double v) {
  switch (t.dtype()) {
  case DType::F32: t.data<float>()[i] = static_cast<float>(v); break;
  case DType::F64: t.data<double>()[i] = v; break;
  case DType::F16: t.data<uint16_t>()[i] = floatToHalf(static_cast<float>(v)); break;
  case DType::BF16: t.data<uint16_t>()[i] = floatToBf16(static_cast<float>(v)); break;
  case DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
  case DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
  case DType::I16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
  case DType::U16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
  case DType::I32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
  case DType::U32: t.data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
  case DType::I64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
  case DType::U64: t.data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
  case DType::Bool: t.data<bool>()[i] = v != 0; break;
  default: NNC_ASSERT(false, "setElementFromDouble on storage-only dtype {}", dtypeName(t.dtype()));
  }
}

Expected<Tensor> tensorFromProto(const onnx::TensorProto &p, const std::string &baseDir,
                                 const std::string &what) {
  std::optional<DType> dt = dtypeFromOnnx(p.data_type());
  NNC_USER_CHECK(dt.has_value(), "{}: unsupported data type {}{}", what, p.data_type(),
                 p.data_type() == 8 ? " (string)"
                 : p.data_type() == 14 || p.data_type() == 15 ? " (complex)"
                 : p.data_type() == 0 ? " (undefined)"
                                      : "");
  NNC_USER_CHECK(!p.has_segment(), "{}: segmented tensors are not supported", what);
  Extents ext;
  for (int64_t d : p.dims()) {
    NNC_USER_CHECK(d >= 0, "{}: negative dimension {}", what, d);
    ext.push_back(d);
  }
  Expected<Tensor> created = Tensor::create(*dt, ext);
  if (!created)
    return created.takeError().withContext(what);
  Tensor t = std::move(*created);
  int64_t n = t.numElements();
  DType d = *dt;

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    NNC_TRY(readExternal(p, baseDir, what, t));
    return t;
  }
  if (p.has_raw_data()) {
    const std::string &raw = p.raw_data();
    int64_t need = packedBytes(d, n);
    NNC_USER_CHECK(static_cast<int64_t>(raw.size()) == need,
                   "{}: raw_data has {} bytes but {}{} needs {}", what, raw.size(), dtypeName(d),
                   extentsStr(ext), need);
    fillFromBytes(t, reinterpret_cast<const uint8_t *>(raw.data()));
    return t;
  }
  switch (d) {
  case DType::F32:
    if (n || p.float_data_size()) {
      NNC_TRY(checkCount(p.float_data(), n, "float_data", what));
      std::memcpy(t.rawData(), p.float_data().data(), t.byteSize());
    }
    break;
  case DType::F64:
    if (n || p.double_data_size()) {
      NNC_TRY(checkCount(p.double_data(), n, "double_data", what));
      std::memcpy(t.rawData(), p.double_data().data(), t.byteSize());
    }
    break;
  case DType::I64:
    if (n || p.int64_data_size()) {
      NNC_TRY(checkCount(p.int64_data(), n, "int64_data", what));
      std::memcpy(t.rawData(), p.int64_data().data(), t.byteSize());
    }
    break;
  case DType::U32:
  case DType::U64:
    if (n || p.uint64_data_size()) {
      NNC_TRY(checkCount(p.uint64_data(), n, "uint64_data", what));
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = p.uint64_data(static_cast<int>(i));
        if (d == DType::U32)
          t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else
          t.data<uint64_t>()[i] = v;
      }
    }
    break;
  default: {
    // Everything else travels in int32_data: one value (or bit pattern) per element, or one
    // packed byte per entry for the sub-byte types.
    int64_t count = subByteBits(d) ? packedBytes(d, n) : n;
    if (!(count || p.int32_data_size()))
      break;
    NNC_TRY(checkCount(p.int32_data(), count, "int32_data", what));
    if (subByteBits(d)) {
      std::vector<uint8_t> bytes(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        bytes[i] = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)));
      unpackSubByte(d, bytes.data(), n, t.data<uint8_t>());
      break;
    }
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = p.int32_data(static_cast<int>(i));
      switch (d) {
      case DType::I32: t.data<int32_t>()[i] = v; break;
      case DType::I16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
      case DType::U16:
      case DType::F16:
      case DType::BF16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
      case DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
      default: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break; // u8 and the f8 formats
      }
    }
    break;
  }
  }
  return t;
}

Expected<onnx::TensorProto> tensorToProto(const Tensor &t, const std::string &name) {
  NNC_USER_CHECK(!t.isNull(), "tensor '{}' is null", name);
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(dtypeToOnnx(t.dtype()));
  for (int64_t d : t.extents())
    p.add_dims(d);
  if (subByteBits(t.dtype())) {
    std::string raw(static_cast<size_t>(packedBytes(t.dtype(), t.numElements())), '\0');
    packSubByte(t.dtype(), t.data<uint8_t>(), t.numElements(),
                reinterpret_cast<uint8_t *>(raw.data()));
    p.set_raw_data(std::move(raw));
  } else {
    p.set_raw_data(std::string(static_cast<const char *>(t.rawData()), t.byteSize()));
  }
  return p;
}

Expected<std::string> readWholeFile(const std::string &path) {
  std::error_code ec;
  NNC_USER_CHECK(fs::exists(path, ec), "{}: no such file", path);
  NNC_USER_CHECK(!fs::is_directory(path, ec), "{}: is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  NNC_USER_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  // Read at once into a buffer of the file's size (a stringstream grows and copies it).
  uintmax_t size = fs::file_size(path, ec);
  if (!ec) {
    std::string bytes(static_cast<size_t>(size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    NNC_USER_CHECK(!in.bad() && in.gcount() == static_cast<std::streamsize>(size), "{}: read error",
                   path);
    return bytes;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  NNC_USER_CHECK(!in.bad(), "{}: read error", path);
  return ss.str();
}

} // namespace onnxfe

using namespace onnxfe;

Expected<Tensor> readTensorProtoFile(const std::string &path, std::string *name) {
  NNC_ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
  NNC_USER_CHECK(!bytes.empty(), "{}: file is empty (expected a serialized onnx.TensorProto)",
                 path);
  onnx::TensorProto p;
  NNC_USER_CHECK(p.ParseFromString(bytes),
                 "{}: not a valid serialized onnx.TensorProto (truncated or corrupt)", path);
  NNC_USER_CHECK(p.has_data_type(), "{}: TensorProto has no data_type (not a tensor file?)",
                 path);
  if (name)
    *name = p.name();
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty())
    dir = ".";
  Expected<Tensor> t = tensorFromProto(
      p, dir, fmt::format("{}: tensor '{}'", path, p.name()));
  return t;
}

Error writeTensorProtoFile(const std::string &path, const Tensor &t, const std::string &name) {
  Expected<onnx::TensorProto> p = tensorToProto(t, name);
  if (!p)
    return p.takeError().withContext(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  NNC_USER_CHECK(out.good(), "{}: cannot open for writing: {}", path, std::strerror(errno));
  NNC_USER_CHECK(p->SerializeToOstream(&out), "{}: write failed", path);
  out.close();
  NNC_USER_CHECK(!out.fail(), "{}: write failed", path);
  return Error::success();
}

} // namespace nnc

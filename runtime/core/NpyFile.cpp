// NumPy .npy files: how a runner without the ONNX frontend reads inputs and writes outputs.
#include "nnc/runtime/NpyFile.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace nnc {

namespace fs = std::filesystem;

namespace {

struct NpyType {
  const char *descr;
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16}, {"i1", DType::I8},
    {"u1", DType::U8},  {"i2", DType::I16}, {"u2", DType::U16}, {"i4", DType::I32},
    {"u4", DType::U32}, {"i8", DType::I64}, {"u8", DType::U64}, {"b1", DType::Bool},
};

/// The value text of `key` in a Python dict literal, or empty.
std::string dictValue(const std::string &h, const std::string &key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    k = h.find("\"" + key + "\"");
  if (k == std::string::npos)
    return "";
  size_t colon = h.find(':', k + key.size() + 2);
  if (colon == std::string::npos)
    return "";
  size_t b = h.find_first_not_of(" \t", colon + 1);
  if (b == std::string::npos)
    return "";
  size_t e;
  if (h[b] == '(') {
    e = h.find(')', b);
    return e == std::string::npos ? "" : h.substr(b, e - b + 1);
  }
  if (h[b] == '\'' || h[b] == '"') {
    e = h.find(h[b], b + 1);
    return e == std::string::npos ? "" : h.substr(b + 1, e - b - 1);
  }
  e = h.find_first_of(",}", b);
  std::string v = h.substr(b, e == std::string::npos ? std::string::npos : e - b);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.pop_back();
  return v;
}

/// The whole file, or an error naming it.
Expected<std::string> readFile(const std::string &path) {
  std::error_code ec;
  NNC_USER_CHECK(fs::exists(path, ec), "{}: no such file", path);
  NNC_USER_CHECK(!fs::is_directory(path, ec), "{}: is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  NNC_USER_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  NNC_USER_CHECK(!in.bad(), "{}: read error", path);
  return ss.str();
}

} // namespace

Expected<Tensor> readNpyFile(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
  NNC_USER_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0,
                 "{}: not a NumPy .npy file (bad magic)", path);
  int major = static_cast<uint8_t>(bytes[6]);
  NNC_USER_CHECK(major >= 1 && major <= 3, "{}: unsupported .npy format version {}", path, major);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
    headerStart = 10;
  } else {
    NNC_USER_CHECK(bytes.size() >= 12, "{}: truncated .npy header", path);
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  }
  NNC_USER_CHECK(headerStart + headerLen <= bytes.size(), "{}: truncated .npy header", path);
  std::string h = bytes.substr(headerStart, headerLen);
  std::string descr = dictValue(h, "descr");
  std::string fortran = dictValue(h, "fortran_order");
  std::string shape = dictValue(h, "shape");
  NNC_USER_CHECK(!descr.empty() && !shape.empty(), "{}: malformed .npy header: {}", path, h);
  NNC_USER_CHECK(fortran != "True", "{}: Fortran-order .npy arrays are not supported", path);
  NNC_USER_CHECK(fortran == "False" || fortran.empty(), "{}: bad fortran_order '{}'", path,
                 fortran);
  NNC_USER_CHECK(descr.size() == 3, "{}: unsupported .npy dtype '{}'", path, descr);
  char order = descr[0];
  std::string kind = descr.substr(1);
  std::optional<DType> dt;
  for (const NpyType &n : kNpyTypes)
    if (kind == n.descr)
      dt = n.dtype;
  NNC_USER_CHECK(dt.has_value(), "{}: unsupported .npy dtype '{}'", path, descr);
  NNC_USER_CHECK(order == '<' || order == '|' || order == '=' ||
                     (order == '>' && dtypeSize(*dt) == 1),
                 "{}: big-endian .npy dtype '{}' is not supported", path, descr);
  Extents ext;
  {
    std::string s = shape.substr(1, shape.size() - 2);
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find(',', i);
      std::string tok = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
      size_t b = tok.find_first_not_of(" \tL"), e = tok.find_last_not_of(" \tL");
      if (b != std::string::npos) {
        tok = tok.substr(b, e - b + 1);
        errno = 0;
        char *end = nullptr;
        long long v = std::strtoll(tok.c_str(), &end, 10);
        NNC_USER_CHECK(end && *end == 0 && errno == 0 && v >= 0, "{}: bad .npy shape {}", path,
                       shape);
        ext.push_back(v);
      }
      if (j == std::string::npos)
        break;
      i = j + 1;
    }
  }
  Expected<Tensor> created = Tensor::create(*dt, ext);
  if (!created)
    return created.takeError().withContext(path);
  Tensor t = std::move(*created);
  size_t dataStart = headerStart + headerLen;
  NNC_USER_CHECK(bytes.size() - dataStart >= t.byteSize(),
                 "{}: .npy data is truncated ({} bytes, {}{} needs {})", path,
                 bytes.size() - dataStart, dtypeName(*dt), extentsStr(ext), t.byteSize());
  if (t.byteSize())
    std::memcpy(t.rawData(), bytes.data() + dataStart, t.byteSize());
  if (t.dtype() == DType::Bool) // any nonzero byte is true
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
  return t;
}

Error writeNpyFile(const std::string &path, const Tensor &t) {
  NNC_USER_CHECK(!t.isNull(), "{}: cannot write a null tensor", path);
  const char *descr = nullptr;
  for (const NpyType &n : kNpyTypes)
    if (n.dtype == t.dtype())
      descr = n.descr;
  NNC_USER_CHECK(descr, "{}: dtype {} has no NumPy .npy equivalent", path, dtypeName(t.dtype()));
  std::string shape = "(";
  for (size_t i = 0; i < t.extents().size(); ++i)
    shape += std::to_string(t.extents()[i]) + (t.extents().size() == 1 ? "," : (i + 1 < t.extents().size() ? ", " : ""));
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}{}', 'fortran_order': False, 'shape': {}, }}",
                                   dtypeSize(t.dtype()) == 1 ? '|' : '<', descr, shape);
  // Pad so that the data starts at a multiple of 64 bytes; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  header += std::string(pad, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  NNC_USER_CHECK(header.size() < 65536, "{}: .npy header too long", path);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  NNC_USER_CHECK(f.good(), "{}: cannot open for writing: {}", path, std::strerror(errno));
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  f.write(static_cast<const char *>(t.rawData()), static_cast<std::streamsize>(t.byteSize()));
  f.close();
  NNC_USER_CHECK(!f.fail(), "{}: write failed", path);
  return Error::success();
}

} // namespace nnc

// Model values beyond tensors at the boundary: ValueForm, and the ONNX SequenceProto and
// OptionalProto files of the backend test data (sequences of tensors, optionals of a tensor
// or of such a sequence), by their wire format.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "nnc/frontend/OnnxImporter.h"
#include "onnx/OnnxInternal.h"

namespace nnc {

using namespace onnxfe;
namespace fs = std::filesystem;

std::string ValueForm::str() const {
  std::string seq = fmt::format("sequence of {} {}", elements.size(),
                                elements.size() == 1 ? "tensor" : "tensors");
  switch (kind) {
  case Kind::Tensor: return "a tensor";
  case Kind::Sequence: return "a " + seq;
  case Kind::Optional:
    if (!present)
      return ofSequence ? "an empty optional (of a sequence)" : "an empty optional (of a tensor)";
    return "an optional " + (ofSequence ? seq : std::string("tensor"));
  }
  return "";
}

OnnxValue OnnxValue::ofTensor(Tensor t) {
  OnnxValue v;
  v.form.dtype = t.dtype();
  v.form.elements = {t.type()};
  v.tensors = {std::move(t)};
  return v;
}

namespace {

// onnx-data.proto's SequenceProto and OptionalProto, which Debian's onnx.proto lacks, read
// and written by their wire format here. Both number their fields alike: 1 name, 2 elem_type,
// 3 tensor value(s), 4 sparse tensor(s), 5 sequence(s), 6 map(s), 7 optional(s).
constexpr int kElemTensor = 1, kElemSequence = 3;
enum Field { kName = 1, kElemType = 2, kTensor = 3, kSequence = 5 };

/// A decoded SequenceProto or OptionalProto: the serialized tensors and sequences it holds.
struct Container {
  std::string name;
  int64_t elemType = 0;
  std::vector<std::string> tensors, sequences;
  bool other = false; ///< Holds sparse tensors, maps or optionals.
};

Expected<Container> decodeContainer(const std::string &bytes, const std::string &what) {
  namespace wf = google::protobuf::internal;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  Container c;
  auto bad = [&] { return makeError("{} (truncated or corrupt)", what); };
  while (uint32_t tag = in.ReadTag()) {
    uint32_t field = tag >> 3;
    bool len = wf::WireFormatLite::GetTagWireType(tag) ==
               wf::WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == kElemType && !len) {
      uint64_t v = 0;
      if (!in.ReadVarint64(&v))
        return bad();
      c.elemType = static_cast<int64_t>(v);
      continue;
    }
    if (len && (field == kName || field == kTensor || field == kSequence)) {
      uint32_t n = 0;
      std::string v;
      if (!in.ReadVarint32(&n) || !in.ReadString(&v, static_cast<int>(n)))
        return bad();
      if (field == kName)
        c.name = std::move(v);
      else
        (field == kTensor ? c.tensors : c.sequences).push_back(std::move(v));
      continue;
    }
    if (field >= 4 && field <= 7)
      c.other = true;
    if (!wf::WireFormatLite::SkipField(&in, tag))
      return bad();
  }
  if (!in.ConsumedEntireMessage())
    return bad();
  return c;
}

void putBytes(std::string &out, int field, const std::string &bytes) {
  google::protobuf::io::StringOutputStream s(&out);
  google::protobuf::io::CodedOutputStream o(&s);
  o.WriteTag(static_cast<uint32_t>(field) << 3 | 2);
  o.WriteVarint32(static_cast<uint32_t>(bytes.size()));
  o.WriteString(bytes);
}

void putVarint(std::string &out, int field, uint64_t v) {
  google::protobuf::io::StringOutputStream s(&out);
  google::protobuf::io::CodedOutputStream o(&s);
  o.WriteTag(static_cast<uint32_t>(field) << 3);
  o.WriteVarint64(v);
}

Expected<std::vector<Tensor>> sequenceTensors(const std::string &bytes, const std::string &dir,
                                              const std::string &what) {
  NNC_ASSIGN_OR_RETURN(Container s,
                       decodeContainer(bytes, what + ": not a valid serialized onnx.SequenceProto"));
  NNC_USER_CHECK(!s.other && s.sequences.empty() &&
                     (s.elemType == kElemTensor || s.elemType == 0),
                 "{}: a sequence of elements of type {} (only sequences of tensors are "
                 "supported)",
                 what, s.elemType);
  std::vector<Tensor> ts;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    onnx::TensorProto p;
    NNC_USER_CHECK(p.ParseFromString(s.tensors[i]), "{}: element {} is not a valid TensorProto",
                   what, i);
    NNC_ASSIGN_OR_RETURN(Tensor t, tensorFromProto(p, dir, fmt::format("{}: element {}", what, i)));
    NNC_USER_CHECK(ts.empty() || t.dtype() == ts[0].dtype(),
                   "{}: element {} is {} but element 0 is {} (a sequence holds one element "
                   "type)",
                   what, i, dtypeName(t.dtype()), dtypeName(ts[0].dtype()));
    ts.push_back(std::move(t));
  }
  return ts;
}

OnnxValue sequenceValue(std::vector<Tensor> ts) {
  OnnxValue v;
  v.form.kind = ValueForm::Kind::Sequence;
  if (!ts.empty())
    v.form.dtype = ts[0].dtype();
  for (const Tensor &t : ts)
    v.form.elements.push_back(t.type());
  v.tensors = std::move(ts);
  return v;
}

Expected<std::string> encodeSequence(const std::vector<Tensor> &ts, const std::string &name) {
  std::string out;
  putBytes(out, kName, name);
  putVarint(out, kElemType, kElemTensor);
  for (size_t i = 0; i < ts.size(); ++i) {
    NNC_ASSIGN_OR_RETURN(onnx::TensorProto p, tensorToProto(ts[i], fmt::format("{}.{}", name, i)));
    putBytes(out, kTensor, p.SerializeAsString());
  }
  return out;
}

Error writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  NNC_USER_CHECK(out.good(), "{}: cannot open for writing: {}", path, std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  NNC_USER_CHECK(!out.fail(), "{}: write failed", path);
  return Error::success();
}

} // namespace

Expected<OnnxValue> readOnnxValueFile(const std::string &path, ValueForm::Kind kind) {
  if (kind == ValueForm::Kind::Tensor) {
    NNC_ASSIGN_OR_RETURN(Tensor t, readTensorProtoFile(path));
    return OnnxValue::ofTensor(std::move(t));
  }
  NNC_ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty())
    dir = ".";
  if (kind == ValueForm::Kind::Sequence) {
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> ts, sequenceTensors(bytes, dir, path));
    return sequenceValue(std::move(ts));
  }
  NNC_ASSIGN_OR_RETURN(Container o,
                       decodeContainer(bytes, path + ": not a valid serialized onnx.OptionalProto"));
  OnnxValue v;
  v.form.kind = ValueForm::Kind::Optional;
  v.form.ofSequence = o.elemType == kElemSequence || !o.sequences.empty();
  NNC_USER_CHECK(!o.other && (v.form.ofSequence || o.elemType == kElemTensor || o.elemType == 0),
                 "{}: an optional of element type {} (only optionals of a tensor or of a "
                 "sequence of tensors are supported)",
                 path, o.elemType);
  NNC_USER_CHECK(o.tensors.size() + o.sequences.size() <= 1,
                 "{}: the optional holds more than one value", path);
  if (!o.tensors.empty()) {
    onnx::TensorProto p;
    NNC_USER_CHECK(p.ParseFromString(o.tensors[0]), "{}: the optional's tensor is not a valid "
                   "TensorProto", path);
    NNC_ASSIGN_OR_RETURN(Tensor t,
                         tensorFromProto(p, dir, fmt::format("{}: optional's tensor", path)));
    v.form.dtype = t.dtype();
    v.form.elements = {t.type()};
    v.tensors = {std::move(t)};
  } else if (!o.sequences.empty()) {
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> ts,
                         sequenceTensors(o.sequences[0], dir, path + ": optional's sequence"));
    OnnxValue s = sequenceValue(std::move(ts));
    v.form.dtype = s.form.dtype;
    v.form.elements = std::move(s.form.elements);
    v.tensors = std::move(s.tensors);
  } else {
    v.form.present = false;
  }
  return v;
}

Error writeOnnxValueFile(const std::string &path, const OnnxValue &v, const std::string &name) {
  const ValueForm &f = v.form;
  NNC_USER_CHECK(v.tensors.size() == f.elements.size(),
                 "{}: value '{}' is {} but holds {} tensors", path, name, f.str(),
                 v.tensors.size());
  if (f.kind == ValueForm::Kind::Tensor) {
    NNC_USER_CHECK(v.tensors.size() == 1, "{}: tensor value '{}' holds {} tensors", path, name,
                   v.tensors.size());
    return writeTensorProtoFile(path, v.tensors[0], name);
  }
  if (f.kind == ValueForm::Kind::Sequence) {
    NNC_ASSIGN_OR_RETURN(std::string bytes, encodeSequence(v.tensors, name));
    return writeBytes(path, bytes);
  }
  std::string out;
  putBytes(out, kName, name);
  putVarint(out, kElemType, f.ofSequence ? kElemSequence : kElemTensor);
  if (f.present && f.ofSequence) {
    NNC_ASSIGN_OR_RETURN(std::string seq, encodeSequence(v.tensors, name));
    putBytes(out, kSequence, seq);
  } else if (f.present) {
    NNC_USER_CHECK(v.tensors.size() == 1, "{}: optional tensor '{}' holds {} tensors", path,
                   name, v.tensors.size());
    NNC_ASSIGN_OR_RETURN(onnx::TensorProto p, tensorToProto(v.tensors[0], name));
    putBytes(out, kTensor, p.SerializeAsString());
  }
  return writeBytes(path, out);
}

} // namespace nnc

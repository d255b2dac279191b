// Writing trained weights back into an ONNX model (include/nnc/frontend/OnnxExport.h).
#include <fstream>
#include <set>

#include "nnc/frontend/OnnxExport.h"
#include "onnx/OnnxInternal.h"

namespace nnc {

namespace {

Expected<onnx::ModelProto> readModel(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::string bytes, onnxfe::readWholeFile(path));
  onnx::ModelProto model;
  NNC_USER_CHECK(model.ParseFromString(bytes), "{}: not a valid ONNX model (protobuf parse failed)",
                 path);
  return model;
}

} // namespace

Expected<std::vector<std::string>> onnxInitializerNames(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(onnx::ModelProto model, readModel(path));
  std::vector<std::string> names;
  for (const onnx::TensorProto &t : model.graph().initializer())
    names.push_back(t.name());
  return names;
}

Error writeOnnxWithInitializers(const std::string &in, const std::string &out,
                                const std::map<std::string, Tensor> &values) {
  NNC_ASSIGN_OR_RETURN(onnx::ModelProto model, readModel(in));
  std::set<std::string> replaced;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(t.name());
    if (it == values.end())
      continue;
    NNC_ASSIGN_OR_RETURN(onnx::TensorProto p, onnxfe::tensorToProto(it->second, t.name()));
    NNC_USER_CHECK(p.data_type() == t.data_type(), "{}: initializer '{}' has another dtype than {}",
                   in, t.name(), dtypeName(it->second.dtype()));
    NNC_USER_CHECK(std::equal(p.dims().begin(), p.dims().end(), t.dims().begin(), t.dims().end()),
                   "{}: initializer '{}' has another shape than {}", in, t.name(),
                   extentsStr(it->second.extents()));
    t = std::move(p);
    replaced.insert(t.name());
  }
  for (const auto &[name, tensor] : values)
    NNC_USER_CHECK(replaced.count(name), "{}: no initializer named '{}'", in, name);
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  NNC_USER_CHECK(f && model.SerializeToOstream(&f), "{}: cannot write the model", out);
  f.close();
  NNC_USER_CHECK(f.good(), "{}: cannot write the model", out);
  return Error::success();
}

} // namespace nnc

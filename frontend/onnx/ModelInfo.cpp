// Cheap queries on an ONNX file that do not import it.
#include <fstream>
#include <set>
#include <sstream>

#include "nnc/frontend/OnnxImporter.h"
#include "onnx.pb.h"

namespace nnc {

Expected<std::vector<std::string>> onnxGraphInputNames(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  NNC_USER_CHECK(in.good(), "{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  NNC_USER_CHECK(!bytes.empty(), "{}: file is empty", path);
  onnx::ModelProto model;
  NNC_USER_CHECK(model.ParseFromString(bytes), "{}: not a valid ONNX model (protobuf parse failed)",
                 path);
  std::set<std::string> inits;
  for (const auto &t : model.graph().initializer())
    inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto &i : model.graph().input())
    if (!inits.count(i.name()))
      names.push_back(i.name());
  return names;
}

} // namespace nnc

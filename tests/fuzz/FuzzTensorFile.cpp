// libFuzzer target: the tensor file readers. Every input is read both as a serialized ONNX
// TensorProto (.pb, readTensorProtoFile) and as a NumPy .npy file (readNpyFile); each must
// give a tensor or an Error with a message, and a tensor read must write back and read again
// to the same bytes.
#include <cstring>

#include "FuzzUtil.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/NpyFile.h"

using namespace nnc;

namespace {

void check(bool ok) {
  if (!ok)
    std::abort();
}

void sameTensor(const Tensor &a, const Tensor &b) {
  check(a.dtype() == b.dtype() && a.extents() == b.extents());
  check(a.byteSize() == b.byteSize());
  check(a.byteSize() == 0 || std::memcmp(a.rawData(), b.rawData(), a.byteSize()) == 0);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::limitTensorBytes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string pb = fuzz::writeScratch(data, size, ".pb");
  std::string name;
  Expected<Tensor> t = readTensorProtoFile(pb, &name);
  if (!t) {
    check(!t.error().message().empty());
  } else if (Error e = writeTensorProtoFile(pb, *t, name)) {
    check(!e.message().empty());
  } else {
    Expected<Tensor> again = readTensorProtoFile(pb);
    check(static_cast<bool>(again));
    sameTensor(*t, *again);
  }
  std::remove(pb.c_str());

  std::string npy = fuzz::writeScratch(data, size, ".npy");
  Expected<Tensor> n = readNpyFile(npy);
  if (!n) {
    check(!n.error().message().empty());
  } else if (Error e = writeNpyFile(npy, *n)) {
    check(!e.message().empty());
  } else {
    Expected<Tensor> again = readNpyFile(npy);
    check(static_cast<bool>(again));
    sameTensor(*n, *again);
  }
  std::remove(npy.c_str());
  return 0;
}

// Checks a concrete tensor against a declared tensor type.
#include "nnc/ir/TensorCheck.h"

namespace nnc {

Error checkAgainstType(const Tensor &t, const TensorType &type,
                       std::map<std::string, int64_t> &symbols, const std::string &place) {
  if (t.isNull())
    return makeError("{}: expected {} but no tensor was given", place, type.str());
  auto mismatch = [&](const std::string &why) {
    return makeError("{}: expected {} but got {}{}{}", place, type.str(), dtypeName(t.dtype()),
                     extentsStr(t.extents()), why);
  };
  if (t.dtype() != type.dtype || t.rank() != type.rank())
    return mismatch("");
  for (int64_t i = 0; i < t.rank(); ++i) {
    const Dim &d = type.shape[i];
    int64_t e = t.dim(i);
    if (d.isStatic()) {
      if (d.value() != e)
        return mismatch("");
      continue;
    }
    auto [it, inserted] = symbols.emplace(d.symbolName(), e);
    if (!inserted && it->second != e)
      return mismatch(fmt::format(" ({} is {} elsewhere)", d.symbolName(), it->second));
  }
  return Error::success();
}

} // namespace nnc

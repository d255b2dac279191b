// CpuModel: a bounded cache of executables keyed by input extents (and, where shapes depend
// on them, the values of small inputs), compiled on first use.
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "nnc/runtime/Executable.h"

namespace nnc {

namespace {

class CpuModelImpl : public CpuModel {
public:
  static constexpr size_t kMaxExecutables = 16;

  CpuModelImpl(std::unique_ptr<Graph> g, const CpuOptions &opts, Specializer specialize)
      : graph_(std::move(g)), opts_(opts), specialize_(std::move(specialize)) {}

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override {
    std::vector<Extents> shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].isNull())
        return makeError("input {}: no tensor was given", i);
      shapes.push_back(inputs[i].extents());
    }
    NNC_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, get(shapes, &inputs));
    return exe->run(inputs);
  }

  Expected<Executable *> executableFor(const std::vector<Extents> &inputShapes) override {
    NNC_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, get(inputShapes, nullptr));
    return exe.get();
  }

private:
  /// The executable for these shapes (and, where a shape depends on the values of small
  /// inputs, those values), most recently used first; the least recently used one is
  /// dropped beyond kMaxExecutables (a run in flight keeps its own reference).
  Expected<std::shared_ptr<Executable>> get(const std::vector<Extents> &shapes,
                                            const std::vector<Tensor> *inputs) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string shapeKey;
    for (const Extents &e : shapes)
      shapeKey += extentsStr(e) + ";";
    std::set<int> &byValue = valueInputs_[shapeKey];
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::map<int, Tensor> values;
      std::string key = shapeKey;
      for (int i : byValue) {
        if (!inputs)
          return makeError("the shapes of graph '{}' depend on the value of input '{}': "
                           "run it to compile",
                           graph_->name(), graph_->inputs()[i]->name());
        if (i >= static_cast<int>(inputs->size()) || (*inputs)[i].isNull() ||
            (*inputs)[i].extents() != shapes[i])
          return makeError("input {}: does not match the given shapes", i);
        values[i] = (*inputs)[i];
        key += fmt::format("{}={};", i, dtypeName(values[i].dtype()));
        key.append(static_cast<const char *>(values[i].rawData()), values[i].byteSize());
      }
      auto it = index_.find(key);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
      std::set<int> wanted;
      Expected<std::unique_ptr<Graph>> g = specialize_(*graph_, shapes, values, &wanted);
      if (!g) {
        if (wanted.empty())
          return g.takeError();
        byValue.insert(wanted.begin(), wanted.end());
        continue;
      }
      NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                           opts_.compileWith ? opts_.compileWith(**g)
                                             : Executable::compile(**g, opts_));
      lru_.emplace_front(key, std::shared_ptr<Executable>(std::move(exe)));
      index_[key] = lru_.begin();
      if (lru_.size() > kMaxExecutables) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
      return lru_.front().second;
    }
    return makeError("graph '{}': shapes still unknown after specializing on input values",
                     graph_->name());
  }

  using Entry = std::pair<std::string, std::shared_ptr<Executable>>;
  std::unique_ptr<Graph> graph_;
  CpuOptions opts_;
  Specializer specialize_;
  std::mutex mutex_;
  std::list<Entry> lru_;
  std::map<std::string, std::list<Entry>::iterator> index_;
  /// Per input-shape signature: the inputs whose values the shapes depend on.
  std::map<std::string, std::set<int>> valueInputs_;
};

} // namespace

Expected<std::unique_ptr<CpuModel>> CpuModel::create(std::unique_ptr<Graph> g,
                                                     const CpuOptions &opts,
                                                     Specializer specialize) {
  NNC_USER_CHECK(g != nullptr, "no graph");
  NNC_ASSERT(specialize, "CpuModel needs a shape specializer");
  return std::unique_ptr<CpuModel>(
      std::make_unique<CpuModelImpl>(std::move(g), opts, std::move(specialize)));
}

} // namespace nnc

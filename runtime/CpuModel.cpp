// CpuModel: a bounded cache of compiled programs keyed by input extents (and, where shapes
// depend on them, the values of small inputs), compiled on first use. A graph whose later
// shapes depend on data it computes (NonZero's count, a Reshape to a computed shape) runs in
// stages: an executable up to the first such node, then a nested CpuModel for the rest,
// specialized on the first stage's results.
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "nnc/codegen/Lowering.h"
#include "nnc/ir/GraphSplit.h"
#include "nnc/runtime/Executable.h"
#include "nnc/support/Debug.h"

namespace nnc {

namespace {

class CpuModelImpl;

/// What runs for one input signature: one executable, or a first stage and the model of the
/// rest, whose inputs are the graph's inputs followed by the first stage's results.
struct Program {
  std::shared_ptr<Executable> exe;
  std::unique_ptr<CpuModelImpl> rest;
};

class CpuModelImpl : public CpuModel {
public:
  static constexpr size_t kMaxPrograms = 16;
  /// Programs kept by the model of a later stage (one per first-stage program).
  static constexpr size_t kMaxStagePrograms = 4;

  CpuModelImpl(std::unique_ptr<Graph> g, const CpuOptions &opts, Specializer specialize,
               size_t capacity)
      : graph_(std::move(g)), opts_(opts), specialize_(std::move(specialize)),
        capacity_(capacity) {}

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override {
    std::vector<Extents> shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].isNull())
        return makeError("input {}: no tensor was given", i);
      shapes.push_back(inputs[i].extents());
    }
    NNC_ASSIGN_OR_RETURN(std::shared_ptr<Program> prog, get(shapes, &inputs));
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outs, prog->exe->run(inputs));
    if (!prog->rest)
      return outs;
    std::vector<Tensor> restInputs = inputs;
    for (Tensor &t : outs)
      restInputs.push_back(std::move(t));
    return prog->rest->run(restInputs);
  }

  Expected<Executable *> executableFor(const std::vector<Extents> &inputShapes) override {
    NNC_ASSIGN_OR_RETURN(std::shared_ptr<Program> prog, get(inputShapes, nullptr));
    if (prog->rest)
      return makeError("graph '{}' runs in stages (later shapes depend on data it computes): "
                       "there is no single executable for it",
                       graph_->name());
    return prog->exe.get();
  }

private:
  /// The program for these shapes (and, where a shape depends on the values of small
  /// inputs, those values), most recently used first; the least recently used one is
  /// dropped beyond capacity_ (a run in flight keeps its own reference).
  Expected<std::shared_ptr<Program>> get(const std::vector<Extents> &shapes,
                                         const std::vector<Tensor> *inputs) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Repeated runs on the shapes of the last one skip building the key.
    if (last_ && shapes == lastShapes_)
      return last_;
    std::string shapeKey;
    for (const Extents &e : shapes)
      shapeKey += extentsStr(e) + ";";
    // Kept only for signatures whose shapes depend on input values: an entry per shape
    // signature ever seen would grow without bound under ever-changing shapes.
    auto known = valueInputs_.find(shapeKey);
    std::set<int> byValue = known == valueInputs_.end() ? std::set<int>() : known->second;
    // Remembered for the next call when no input value picks the program.
    auto remember = [&](const std::shared_ptr<Program> &prog) {
      if (byValue.empty()) {
        last_ = prog;
        lastShapes_ = shapes;
      }
      return prog;
    };
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
        return remember(it->second->prog);
      }
      std::set<int> wanted;
      PhaseTimer specializeTime("specialize shapes");
      NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g,
                           specialize_(*graph_, shapes, values, &wanted));
      specializeTime.stop();
      Expected<std::shared_ptr<Program>> prog = compile(std::move(g), wanted, values);
      if (!prog)
        return prog.takeError();
      if (!*prog) { // the shapes depend on more input values
        size_t before = byValue.size();
        byValue.insert(wanted.begin(), wanted.end());
        if (byValue.size() == before)
          break;
        valueInputs_[shapeKey] = byValue;
        continue;
      }
      std::string shapesText = shapeKey.substr(0, shapeKey.size() - 1); // no final ';'
      for (char &c : shapesText)
        c = c == ';' ? ' ' : c;
      lru_.push_front({key, std::move(shapesText), std::move(*prog)});
      index_[key] = lru_.begin();
      if (lru_.size() > capacity_) {
        if (opts_.verbose)
          std::fputs(fmt::format("nnc: graph '{}': specialization cache full ({} programs), "
                                 "dropped the least recently used, for input shapes {}\n",
                                 graph_->name(), capacity_, lru_.back().shapes)
                         .c_str(),
                     stderr);
        index_.erase(lru_.back().key);
        lru_.pop_back();
      }
      return remember(lru_.front().prog);
    }
    return makeError("graph '{}': shapes still unknown after specializing on input values",
                     graph_->name());
  }

  /// The program of a specialized graph; null when its first unknown shape depends on the
  /// values of small inputs not specialized on yet (`wanted`).
  Expected<std::shared_ptr<Program>> compile(std::unique_ptr<Graph> g,
                                             const std::set<int> &wanted,
                                             const std::map<int, Tensor> &values) {
    std::vector<Node *> nodes = g->nodes();
    size_t k = 0;
    for (; k < nodes.size(); ++k) {
      bool known = true;
      for (const Value *r : nodes[k]->results())
        known = known && isStatic(r->shape());
      if (!known)
        break;
    }
    // Node k's result shape depends on data. Generated code computes it when its lowering
    // writes data-dependent results (then it ends the first stage); otherwise the first
    // stage stops before it and the rest is specialized on the values it gets.
    size_t numFirst = k;
    if (k < nodes.size()) {
      const Node *n = nodes[k];
      bool inFirst = lowersDataDependentResults(*n);
      if (!inFirst) {
        for (int i : wanted)
          if (!values.count(i))
            return std::shared_ptr<Program>();
      }
      numFirst += inFirst ? 1 : 0;
      // A first stage of constants alone computes nothing the rest could specialize on: the
      // rest would start where this graph does, again and again.
      bool onlyConstants = true;
      for (size_t i = 0; i < numFirst; ++i)
        onlyConstants = onlyConstants && nodes[i]->kind() == OpKind::Constant;
      if (onlyConstants)
        return n->error("result %{} has shape {} that depends on data (operands too large to "
                        "specialize on, or a loop body's shapes that change from step to "
                        "step); the CPU target cannot compile it",
                        n->result()->name(), n->result()->type().str());
    }
    auto prog = std::make_shared<Program>();
    if (numFirst == nodes.size()) { // one stage: the whole graph
      NNC_ASSIGN_OR_RETURN(prog->exe, compileExe(*g));
      return prog;
    }
    GraphSplit split = splitGraph(*g, numFirst);
    NNC_ASSIGN_OR_RETURN(prog->exe, compileExe(*split.first));
    prog->rest = std::make_unique<CpuModelImpl>(std::move(split.rest), opts_, specialize_,
                                                kMaxStagePrograms);
    return prog;
  }

  /// The executable of one stage, for the CPU or the device opts_.compileWith targets.
  Expected<std::unique_ptr<Executable>> compileExe(const Graph &g) {
    return opts_.compileWith ? opts_.compileWith(g) : Executable::compile(g, opts_);
  }

  struct Entry {
    std::string key;
    std::string shapes; ///< The input shapes, as the verbose note shows them.
    std::shared_ptr<Program> prog;
  };
  std::unique_ptr<Graph> graph_;
  CpuOptions opts_;
  Specializer specialize_;
  size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> lru_;
  std::map<std::string, std::list<Entry>::iterator> index_;
  /// Per input-shape signature whose shapes depend on input values: those inputs.
  std::map<std::string, std::set<int>> valueInputs_;
  /// The last program returned for shapes alone (no input values), and those shapes.
  std::shared_ptr<Program> last_;
  std::vector<Extents> lastShapes_;
};

} // namespace

Expected<std::unique_ptr<CpuModel>> CpuModel::create(std::unique_ptr<Graph> g,
                                                     const CpuOptions &opts,
                                                     Specializer specialize) {
  NNC_USER_CHECK(g != nullptr, "no graph");
  NNC_ASSERT(specialize, "CpuModel needs a shape specializer");
  return std::unique_ptr<CpuModel>(std::make_unique<CpuModelImpl>(
      std::move(g), opts, std::move(specialize), CpuModelImpl::kMaxPrograms));
}

} // namespace nnc

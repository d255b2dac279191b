// Graph, Node and Value.
#include "nnc/ir/Graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace nnc {

// ---- Node -----------------------------------------------------------------------------------

const Attribute *Node::attr(const std::string &n) const {
  auto it = attrs_.find(n);
  return it == attrs_.end() ? nullptr : &it->second;
}

namespace {
template <typename T> const T &getAttrAs(const Node &node, const std::string &n) {
  const Attribute *a = node.attr(n);
  NNC_ASSERT(a, "{}: missing attribute '{}'", node.describe(), n);
  const T *v = std::get_if<T>(a);
  NNC_ASSERT(v, "{}: attribute '{}' has kind {}", node.describe(), n, attrKindName(attrKind(*a)));
  return *v;
}
template <typename T> const T *findAttrAs(const Node &node, const std::string &n) {
  const Attribute *a = node.attr(n);
  return a ? std::get_if<T>(a) : nullptr;
}
} // namespace

int64_t Node::getInt(const std::string &n) const { return getAttrAs<int64_t>(*this, n); }
int64_t Node::getInt(const std::string &n, int64_t dflt) const {
  const int64_t *v = findAttrAs<int64_t>(*this, n);
  return v ? *v : dflt;
}
double Node::getFloat(const std::string &n) const { return getAttrAs<double>(*this, n); }
double Node::getFloat(const std::string &n, double dflt) const {
  const double *v = findAttrAs<double>(*this, n);
  return v ? *v : dflt;
}
const std::string &Node::getString(const std::string &n) const {
  return getAttrAs<std::string>(*this, n);
}
std::string Node::getString(const std::string &n, const std::string &dflt) const {
  const std::string *v = findAttrAs<std::string>(*this, n);
  return v ? *v : dflt;
}
const std::vector<int64_t> &Node::getInts(const std::string &n) const {
  return getAttrAs<std::vector<int64_t>>(*this, n);
}
std::vector<int64_t> Node::getInts(const std::string &n,
                                   const std::vector<int64_t> &dflt) const {
  const std::vector<int64_t> *v = findAttrAs<std::vector<int64_t>>(*this, n);
  return v ? *v : dflt;
}
const std::vector<double> &Node::getFloats(const std::string &n) const {
  return getAttrAs<std::vector<double>>(*this, n);
}
const Tensor &Node::getTensor(const std::string &n) const { return getAttrAs<Tensor>(*this, n); }
DType Node::getDType(const std::string &n) const { return getAttrAs<DType>(*this, n); }
DType Node::getDType(const std::string &n, DType dflt) const {
  const DType *v = findAttrAs<DType>(*this, n);
  return v ? *v : dflt;
}

const Tensor *Node::constantOperand(size_t i) const {
  Value *v = operand(i);
  if (!v || !v->producer() || v->producer()->kind() != OpKind::Constant)
    return nullptr;
  return findAttrAs<Tensor>(*v->producer(), "value");
}

std::string Node::describe() const {
  if (!name_.empty())
    return fmt::format("node '{}' ({})", name_, opName());
  if (!results_.empty())
    return fmt::format("{} producing %{}", opName(), results_[0]->name());
  return std::string(opName());
}

// ---- Graph ----------------------------------------------------------------------------------

Graph::Graph(std::string name) : name_(std::move(name)) {}

std::unique_ptr<Value> Graph::newValue(const std::string &name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->name_ = uniqueValueName(name.empty() ? std::to_string(nextValueId_++) : name);
  v->type_ = std::move(type);
  for (const Dim &d : v->type_.shape)
    if (d.isSymbolic())
      symbols_.insert(d.symbolName());
  valuesByName_[v->name_] = v.get();
  return v;
}

std::string Graph::uniqueValueName(const std::string &hint) {
  if (!valuesByName_.count(hint))
    return hint;
  for (int64_t i = 1;; ++i) {
    std::string n = hint + "_" + std::to_string(i);
    if (!valuesByName_.count(n))
      return n;
  }
}

void Graph::renameValue(Value *v, const std::string &name) {
  if (v->name_ == name)
    return;
  valuesByName_.erase(v->name_);
  v->name_ = uniqueValueName(name);
  valuesByName_[v->name_] = v;
}

Value *Graph::findValue(const std::string &name) const {
  auto it = valuesByName_.find(name);
  return it == valuesByName_.end() ? nullptr : it->second;
}

Value *Graph::addInput(const std::string &name, TensorType type) {
  inputStorage_.push_back(newValue(name, std::move(type)));
  inputs_.push_back(inputStorage_.back().get());
  return inputs_.back();
}

void Graph::removeInput(Value *v) {
  NNC_ASSERT(!hasUses(v), "removing graph input %{} that is still used", v->name());
  inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), v), inputs_.end());
  valuesByName_.erase(v->name());
  for (auto it = inputStorage_.begin(); it != inputStorage_.end(); ++it)
    if (it->get() == v) {
      inputStorage_.erase(it);
      break;
    }
}

Value *Graph::addResult(Node &n, const std::string &name, TensorType type) {
  NNC_ASSERT(n.graph_ == this, "addResult: {} is not in this graph", n.describe());
  auto v = newValue(name, std::move(type));
  v->producer_ = &n;
  v->resultIndex_ = static_cast<int>(n.results_.size());
  n.results_.push_back(v.get());
  n.resultStorage_.push_back(std::move(v));
  return n.results_.back();
}

Node *Graph::createNode(OpKind kind, std::vector<Value *> operands,
                        std::vector<TensorType> resultTypes, AttrMap attrs, std::string name,
                        std::vector<std::string> resultNames, Node *before) {
  auto node = std::make_unique<Node>();
  Node *n = node.get();
  n->kind_ = kind;
  n->name_ = std::move(name);
  n->graph_ = this;
  n->operands_ = std::move(operands);
  n->attrs_ = std::move(attrs);
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    std::string rn = i < resultNames.size() ? resultNames[i] : std::string();
    auto v = newValue(rn, std::move(resultTypes[i]));
    v->producer_ = n;
    v->resultIndex_ = static_cast<int>(i);
    n->results_.push_back(v.get());
    n->resultStorage_.push_back(std::move(v));
  }
  if (before) {
    auto it = std::find_if(nodes_.begin(), nodes_.end(),
                           [&](const std::unique_ptr<Node> &p) { return p.get() == before; });
    NNC_ASSERT(it != nodes_.end(), "insertion point is not in this graph");
    nodes_.insert(it, std::move(node));
  } else {
    nodes_.push_back(std::move(node));
  }
  return n;
}

Expected<Node *> Graph::createInferred(OpKind kind, std::vector<Value *> operands, AttrMap attrs,
                                       std::string name, int numResults,
                                       std::vector<std::string> resultNames, Node *before) {
  const OpInfo &info = opInfo(kind);
  if (numResults < 0)
    numResults = info.minResults;
  std::vector<TensorType> placeholder(static_cast<size_t>(numResults));
  Node *n = createNode(kind, std::move(operands), std::move(placeholder), std::move(attrs),
                       std::move(name), std::move(resultNames), before);
  Expected<std::vector<TensorType>> types = info.infer(*n);
  if (!types) {
    eraseNode(n);
    return types.takeError();
  }
  NNC_ASSERT(types->size() >= n->numResults(), "{}: shape rule gave {} types for {} results",
             n->describe(), types->size(), n->numResults());
  for (size_t i = 0; i < n->numResults(); ++i)
    n->result(i)->setType((*types)[i]);
  return n;
}

std::vector<Node *> Graph::nodes() const {
  std::vector<Node *> r;
  r.reserve(nodes_.size());
  for (const auto &n : nodes_)
    r.push_back(n.get());
  return r;
}

void Graph::eraseNode(Node *n) {
  for (Value *r : n->results_) {
    NNC_ASSERT(!hasUses(r), "erasing {} whose result %{} is still used", n->describe(),
               r->name());
    valuesByName_.erase(r->name());
  }
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it)
    if (it->get() == n) {
      nodes_.erase(it);
      return;
    }
  NNC_ASSERT(false, "erasing a node that is not in this graph");
}

void Graph::moveBefore(Node *n, Node *pos) {
  std::unique_ptr<Node> owned;
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it)
    if (it->get() == n) {
      owned = std::move(*it);
      nodes_.erase(it);
      break;
    }
  NNC_ASSERT(owned, "moving a node that is not in this graph");
  if (!pos) {
    nodes_.push_back(std::move(owned));
    return;
  }
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it)
    if (it->get() == pos) {
      nodes_.insert(it, std::move(owned));
      return;
    }
  NNC_ASSERT(false, "moveBefore: position is not in this graph");
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  for (auto &n : nodes_)
    for (Value *&op : n->operands_)
      if (op == from)
        op = to;
  for (Value *&o : outputs_)
    if (o == from)
      o = to;
}

std::vector<Node *> Graph::users(const Value *v) const {
  std::vector<Node *> r;
  for (const auto &n : nodes_)
    if (std::find(n->operands_.begin(), n->operands_.end(), v) != n->operands_.end())
      r.push_back(n.get());
  return r;
}

bool Graph::isOutput(const Value *v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

bool Graph::hasUses(const Value *v) const {
  if (isOutput(v))
    return true;
  for (const auto &n : nodes_)
    if (std::find(n->operands_.begin(), n->operands_.end(), v) != n->operands_.end())
      return true;
  return false;
}

Error Graph::topologicalSort() {
  // Kahn's algorithm, stable: among ready nodes the earliest in the current order goes first.
  std::unordered_map<const Value *, Node *> def;
  std::unordered_set<const Value *> inputs(inputs_.begin(), inputs_.end());
  for (const auto &n : nodes_)
    for (Value *r : n->results_)
      def[r] = n.get();
  std::unordered_map<Node *, int> pending;
  std::unordered_map<Node *, std::vector<Node *>> consumers;
  for (const auto &n : nodes_) {
    std::unordered_set<Node *> deps;
    for (Value *op : n->operands_) {
      if (!op)
        continue;
      auto it = def.find(op);
      if (it == def.end()) {
        NNC_USER_CHECK(inputs.count(op), "{}: operand %{} is not defined in graph @{}",
                       n->describe(), op->name(), name_);
        continue;
      }
      deps.insert(it->second);
    }
    pending[n.get()] = static_cast<int>(deps.size());
    for (Node *d : deps)
      consumers[d].push_back(n.get());
  }
  std::vector<std::unique_ptr<Node>> order;
  std::list<std::unique_ptr<Node>> rest = std::move(nodes_);
  nodes_.clear();
  bool progress = true;
  while (!rest.empty() && progress) {
    progress = false;
    for (auto it = rest.begin(); it != rest.end();) {
      if (pending[it->get()] == 0) {
        for (Node *c : consumers[it->get()])
          --pending[c];
        nodes_.push_back(std::move(*it));
        it = rest.erase(it);
        progress = true;
        break; // restart from the earliest remaining node to keep the order stable
      }
      ++it;
    }
  }
  if (!rest.empty()) {
    std::string who = rest.front()->describe();
    for (auto &n : rest)
      nodes_.push_back(std::move(n));
    return makeError("graph @{} has a cycle through {}", name_, who);
  }
  return Error::success();
}

Dim Graph::freshDim() {
  for (;;) {
    std::string n = "_" + std::to_string(nextSymbol_++);
    if (!symbols_.count(n)) {
      symbols_.insert(n);
      return Dim::symbol(n);
    }
  }
}

void Graph::noteSymbol(const std::string &name) { symbols_.insert(name); }

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  g->symbols_ = symbols_;
  g->nextSymbol_ = nextSymbol_;
  std::unordered_map<const Value *, Value *> map;
  for (Value *in : inputs_)
    map[in] = g->addInput(in->name(), in->type());
  for (const auto &n : nodes_) {
    std::vector<Value *> ops;
    for (Value *op : n->operands_)
      ops.push_back(op ? map.at(op) : nullptr);
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (Value *r : n->results_) {
      types.push_back(r->type());
      names.push_back(r->name());
    }
    Node *c = g->createNode(n->kind_, ops, types, n->attrs_, n->name_, names);
    if (n->body_)
      c->body_ = std::shared_ptr<Graph>(n->body_->clone());
    for (size_t i = 0; i < n->results_.size(); ++i)
      map[n->results_[i]] = c->results_[i];
  }
  std::vector<Value *> outs;
  for (Value *o : outputs_)
    outs.push_back(map.at(o));
  g->outputs_ = outs;
  return g;
}

} // namespace nnc

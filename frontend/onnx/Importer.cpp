// OnnxModel (importOnnxFile, checkOnnxFile): reads an ONNX model and lowers its graph to nnc IR.
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Verifier.h"
#include "onnx/OnnxInternal.h"

namespace nnc {

using namespace onnxfe;
namespace fs = std::filesystem;

/// The model, its folder and opsets, read and checked.
struct OnnxModel::Loaded {
  onnx::ModelProto model;
  std::string path;
  std::string baseDir;
  std::map<std::string, int64_t> opsets;
  std::set<std::string> functions; ///< "domain:name" of model-local functions.
};

namespace {

using LoadedModel = OnnxModel::Loaded;

std::string normDomain(const std::string &d) { return d == "ai.onnx" ? std::string() : d; }

Expected<std::unique_ptr<LoadedModel>> loadModel(const std::string &path) {
  std::error_code ec;
  NNC_USER_CHECK(fs::exists(path, ec), "{}: no such file", path);
  NNC_USER_CHECK(!fs::is_directory(path, ec), "{}: is a directory, not a file", path);
  uintmax_t size = fs::file_size(path, ec);
  NNC_USER_CHECK(!ec, "{}: cannot read: {}", path, ec.message());
  NNC_USER_CHECK(size > 0, "{}: file is empty (expected an ONNX model)", path);
  std::ifstream file(path, std::ios::binary);
  NNC_USER_CHECK(file.good(), "{}: cannot open: {}", path, std::strerror(errno));
  auto lm = std::make_unique<LoadedModel>();
  // Parsed from the file in blocks: the whole file is never held beside the parsed model.
  google::protobuf::io::IstreamInputStream blocks(&file, 1 << 20);
  google::protobuf::io::CodedInputStream in(&blocks);
  in.SetTotalBytesLimit(INT_MAX);
  NNC_USER_CHECK(size < static_cast<uintmax_t>(INT_MAX) && lm->model.ParseFromCodedStream(&in) &&
                     in.ConsumedEntireMessage(),
                 "{}: not a valid ONNX model (the protobuf cannot be parsed: the file is "
                 "truncated, corrupt or not an ONNX file)",
                 path);
  const onnx::ModelProto &m = lm->model;
  NNC_USER_CHECK(m.has_graph(), "{}: not a valid ONNX model (it has no graph)", path);
  NNC_USER_CHECK(m.ir_version() > 0, "{}: not a valid ONNX model (ir_version is missing)", path);
  NNC_USER_CHECK(m.ir_version() >= 3,
                 "{}: ONNX IR version {} is too old (models need opset_import, IR version 3+)",
                 path, m.ir_version());
  NNC_USER_CHECK(m.opset_import_size() > 0, "{}: the model has no opset_import", path);
  for (const auto &o : m.opset_import()) {
    std::string d = normDomain(o.domain());
    NNC_USER_CHECK(o.version() > 0, "{}: opset_import of domain '{}' has invalid version {}",
                   path, o.domain(), o.version());
    NNC_USER_CHECK(!lm->opsets.count(d), "{}: opset_import lists domain '{}' twice", path,
                   o.domain());
    lm->opsets[d] = o.version();
  }
  for (const auto &f : m.functions())
    lm->functions.insert(normDomain(f.domain()) + ":" + f.name());
  std::string dir = fs::path(path).parent_path().string();
  lm->baseDir = dir.empty() ? "." : dir;
  lm->path = path;
  return lm;
}

/// Problems that make a node unlowerable regardless of its inputs: domain, op, attributes.
/// Each problem goes to `issue`; returns the lowering when there is one.
const OpLowering *checkNode(const LoadedModel &lm, const onnx::NodeProto &n, int64_t *opset,
                            const std::function<void(const std::string &)> &issue) {
  std::string d = normDomain(n.domain());
  std::string key = d.empty() ? n.op_type() : d + ":" + n.op_type();
  if (lm.functions.count(d + ":" + n.op_type())) {
    issue(fmt::format("model-local function '{}' is unsupported", key));
    return nullptr;
  }
  auto os = lm.opsets.find(d);
  if (os == lm.opsets.end()) {
    issue(fmt::format("domain '{}' is not declared in the model's opset_import", n.domain()));
    return nullptr;
  }
  *opset = os->second;
  const LoweringTable &table = loweringTable();
  auto it = table.find(key);
  if (it == table.end()) {
    issue(fmt::format("unsupported operator '{}' (opset {})", key, os->second));
    return nullptr;
  }
  const OpLowering &l = it->second;
  bool ok = true;
  for (const auto &a : n.attribute()) {
    if (!a.ref_attr_name().empty()) {
      issue(fmt::format("attribute '{}' refers to a function attribute ('{}'); attribute "
                        "references are unsupported",
                        a.name(), a.ref_attr_name()));
      ok = false;
    } else if ((a.type() == onnx::AttributeProto::GRAPH ||
                a.type() == onnx::AttributeProto::GRAPHS || a.has_g() || a.graphs_size()) &&
               std::find(l.attributes.begin(), l.attributes.end(), a.name()) ==
                   l.attributes.end()) {
      issue(fmt::format("subgraph attribute '{}' is unsupported (this operator takes no "
                        "subgraph of that name)",
                        a.name()));
      ok = false;
    } else if (std::find(l.attributes.begin(), l.attributes.end(), a.name()) ==
               l.attributes.end()) {
      issue(fmt::format("unsupported attribute '{}'", a.name()));
      ok = false;
    }
  }
  return ok ? &l : nullptr;
}

Expected<TensorType> inputType(const onnx::ValueInfoProto &vi, Graph &g,
                               const std::string &place) {
  NNC_USER_CHECK(vi.has_type(), "{}: graph input '{}' has no type", place, vi.name());
  NNC_USER_CHECK(vi.type().has_tensor_type(),
                 "{}: graph input '{}' is not a tensor, a sequence or an optional (map and "
                 "sparse inputs are unsupported)",
                 place, vi.name());
  const auto &tt = vi.type().tensor_type();
  std::optional<DType> dt = dtypeFromOnnx(tt.elem_type());
  NNC_USER_CHECK(dt.has_value(), "{}: graph input '{}' has unsupported element type {}", place,
                 vi.name(), tt.elem_type());
  NNC_USER_CHECK(tt.has_shape(),
                 "{}: graph input '{}' has no shape (its rank must be known)", place, vi.name());
  Shape s;
  Extents staticDims;
  for (const auto &d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      NNC_USER_CHECK(d.dim_value() >= 0, "{}: graph input '{}' has negative dimension {}", place,
                     vi.name(), d.dim_value());
      s.push_back(Dim(d.dim_value()));
      staticDims.push_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      s.push_back(Dim::symbol(d.dim_param()));
    } else {
      s.push_back(g.freshDim());
    }
  }
  std::optional<int64_t> n = checkedNumElements(staticDims);
  int64_t esize = static_cast<int64_t>(dtypeSize(*dt));
  NNC_USER_CHECK(n && *n <= maxTensorBytes() / esize,
                 "{}: graph input '{}' of type {} is too large to allocate (more than the "
                 "{}-byte limit, NNC_MAX_TENSOR_BYTES)",
                 place, vi.name(), TensorType(*dt, s).str(), maxTensorBytes());
  return TensorType(*dt, s);
}

/// The declared form of a graph input or output's type: its kind and element type.
Expected<ValueForm> declaredForm(const onnx::TypeProto &t, const std::string &what) {
  ValueForm f;
  const onnx::TypeProto *elem = &t;
  if (t.has_optional_type()) {
    f.kind = ValueForm::Kind::Optional;
    elem = &t.optional_type().elem_type();
  }
  if (elem->has_sequence_type()) {
    if (f.kind == ValueForm::Kind::Optional)
      f.ofSequence = true;
    else
      f.kind = ValueForm::Kind::Sequence;
    elem = &elem->sequence_type().elem_type();
  }
  if (f.kind == ValueForm::Kind::Tensor && !elem->has_sequence_type() &&
      !elem->has_tensor_type())
    return f; // no type, a map or a sparse tensor: the importer says what is wrong
  NNC_USER_CHECK(elem->has_tensor_type(),
                 "{} is not a tensor, a sequence of tensors or an optional of either (maps, "
                 "sparse tensors and nested sequences are unsupported)",
                 what);
  if (elem->tensor_type().elem_type() != 0) {
    std::optional<DType> dt = dtypeFromOnnx(elem->tensor_type().elem_type());
    NNC_USER_CHECK(dt.has_value(), "{} has unsupported element type {}", what,
                   elem->tensor_type().elem_type());
    f.dtype = *dt;
  }
  return f;
}

/// Graph inputs for a sequence or optional input `vi` of the form `given` (the caller's):
/// one per tensor it holds, named NAME.0, NAME.1, ... Checked against the declared type.
Expected<StaticValue> compositeInput(const onnx::ValueInfoProto &vi, const ValueForm &given,
                                     Graph &g, const std::string &place) {
  std::string what = fmt::format("{}: graph input '{}'", place, vi.name());
  NNC_ASSIGN_OR_RETURN(ValueForm declared, declaredForm(vi.type(), what));
  NNC_USER_CHECK(given.kind == declared.kind && given.holdsSequence() == declared.holdsSequence(),
                 "{} is declared {} but is given as {}", what,
                 declared.holdsSequence() ? (declared.kind == ValueForm::Kind::Optional
                                                 ? "an optional sequence"
                                                 : "a sequence")
                                          : "an optional tensor",
                 given.str());
  NNC_USER_CHECK(given.holdsSequence() || !given.present || given.elements.size() == 1,
                 "{} is an optional tensor but is given {} tensors", what, given.elements.size());
  NNC_USER_CHECK(given.present || given.elements.empty(), "{} is absent but is given {} tensors",
                 what, given.elements.size());
  StaticValue v;
  v.optional = declared.kind == ValueForm::Kind::Optional;
  v.present = given.present;
  v.ofSequence = declared.holdsSequence();
  v.dtype = declared.dtype;
  for (size_t i = 0; i < given.elements.size(); ++i) {
    const TensorType &t = given.elements[i];
    NNC_USER_CHECK(t.dtype == declared.dtype, "{}: tensor {} is {} but the model declares {}",
                   what, i, t.str(), dtypeName(declared.dtype));
    v.elements.push_back(
        g.addInput(v.ofSequence ? fmt::format("{}.{}", vi.name(), i) : vi.name(), t));
  }
  return v;
}

/// Lowers the nodes of `gp` into `st` in order; `prefix` starts each error ("FILE: " for the
/// main graph; a subgraph's errors get their place from the node that holds it).
Error lowerGraphNodes(const LoadedModel &lm, ImportState &st, const onnx::GraphProto &gp,
                      const std::string &prefix) {
  // Where each value is defined, to tell use-before-definition from a dangling name.
  std::map<std::string, size_t> definedAt;
  for (int i = 0; i < gp.node_size(); ++i)
    for (const std::string &o : gp.node(i).output())
      if (!o.empty())
        definedAt.emplace(o, static_cast<size_t>(i));

  for (int i = 0; i < gp.node_size(); ++i) {
    const onnx::NodeProto &n = gp.node(i);
    size_t idx = static_cast<size_t>(i);
    std::string place = prefix + nodePlace(n, idx);
    std::string firstIssue;
    int64_t opset = 0;
    const OpLowering *l = checkNode(lm, n, &opset, [&](const std::string &m) {
      if (firstIssue.empty())
        firstIssue = m;
    });
    if (!l)
      return Error(place + ": " + firstIssue);
    for (const std::string &in : n.input()) {
      if (in.empty() || st.defines(in))
        continue;
      auto it = definedAt.find(in);
      if (it != definedAt.end())
        return makeError("{}: input '{}' is used before it is defined by {} (the graph is not "
                         "topologically sorted or has a cycle)",
                         place, in, nodePlace(gp.node(static_cast<int>(it->second)), it->second));
      return makeError("{}: dangling input '{}': no graph input, initializer or node output has "
                       "this name{}",
                       place, in, st.parent ? " (in this graph or an enclosing one)" : "");
    }
    for (const std::string &o : n.output())
      NNC_USER_CHECK(o.empty() || (!st.values.count(o) && !st.composites.count(o)),
                     "{}: output '{}' is already defined (ONNX values are assigned once)", place,
                     o);
    if (Error e = lowerNode(st, n, idx, opset, *l))
      return prefix.empty() ? e : e.withContext(prefix.substr(0, prefix.size() - 2));
  }
  return Error::success();
}

} // namespace

OnnxModel::OnnxModel(std::unique_ptr<Loaded> m) : m_(std::move(m)) {}
OnnxModel::~OnnxModel() = default;

Expected<std::unique_ptr<OnnxModel>> OnnxModel::load(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Loaded> lm, loadModel(path));
  return std::unique_ptr<OnnxModel>(new OnnxModel(std::move(lm)));
}

Expected<std::unique_ptr<Graph>> importOnnxFile(const std::string &path,
                                                const ImportOptions &options,
                                                OnnxBoundary *boundary) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<OnnxModel> m, OnnxModel::load(path));
  return m->import(options, boundary);
}

Expected<std::unique_ptr<Graph>> OnnxModel::import(const ImportOptions &options,
                                                   OnnxBoundary *boundary) {
  if (boundary)
    *boundary = OnnxBoundary();
  LoadedModel *lm = m_.get();
  const std::string &path = lm->path;
  onnx::GraphProto &gp = *lm->model.mutable_graph();
  auto graph = std::make_unique<Graph>(gp.name().empty() ? "main" : gp.name());
  Graph &g = *graph;

  ImportState st;
  st.graph = &g;
  st.baseDir = lm->baseDir;
  st.knownInputs = &options.knownInputs;
  st.evaluate = &options.evaluate;
  st.forTraining = options.forTraining;
  st.opsets = lm->opsets;

  NNC_USER_CHECK(gp.sparse_initializer_size() == 0, "{}: sparse initializers are unsupported",
                 path);
  // Symbols first so that fresh dims never collide with a dim_param.
  for (const auto &vi : gp.input())
    if (vi.type().has_tensor_type())
      for (const auto &d : vi.type().tensor_type().shape().dim())
        if (d.has_dim_param() && !d.dim_param().empty())
          g.noteSymbol(d.dim_param());

  std::set<std::string> initNames;
  for (const auto &t : gp.initializer()) {
    NNC_USER_CHECK(!t.name().empty(), "{}: an initializer has no name", path);
    NNC_USER_CHECK(initNames.insert(t.name()).second, "{}: initializer '{}' is defined twice",
                   path, t.name());
  }
  for (const auto &vi : gp.input()) {
    NNC_USER_CHECK(!vi.name().empty(), "{}: a graph input has no name", path);
    if (initNames.count(vi.name()))
      continue; // An initializer-backed input (old models): a constant.
    NNC_USER_CHECK(!st.values.count(vi.name()) && !st.composites.count(vi.name()),
                   "{}: graph input '{}' is declared twice", path, vi.name());
    if (vi.has_type() && (vi.type().has_sequence_type() || vi.type().has_optional_type())) {
      auto form = options.inputForms.find(vi.name());
      NNC_USER_CHECK(form != options.inputForms.end(),
                     "{}: graph input '{}' is a {}: its length and element types must be given "
                     "when importing (nnc resolves sequences and optionals at import time)",
                     path, vi.name(), vi.type().has_sequence_type() ? "sequence" : "optional");
      NNC_ASSIGN_OR_RETURN(StaticValue v, compositeInput(vi, form->second, g, path));
      if (boundary) {
        boundary->inputNames.push_back(vi.name());
        boundary->inputs.push_back(form->second);
      }
      st.composites[vi.name()] = std::move(v);
      continue;
    }
    NNC_ASSIGN_OR_RETURN(TensorType type, inputType(vi, g, path));
    st.values[vi.name()] = g.addInput(vi.name(), type);
    if (boundary) {
      ValueForm f;
      f.dtype = type.dtype;
      f.elements = {type};
      boundary->inputNames.push_back(vi.name());
      boundary->inputs.push_back(std::move(f));
    }
  }
  for (onnx::TensorProto &t : *gp.mutable_initializer()) {
    NNC_ASSIGN_OR_RETURN(Tensor v,
                         tensorFromProto(t, lm->baseDir,
                                         fmt::format("{}: initializer '{}'", path, t.name())));
    // The tensor holds its own copy: drop the file's, so the weights are not held twice.
    std::string().swap(*t.mutable_raw_data());
    Node *n = g.createNode(OpKind::Constant, {}, {v.type()}, {{"value", Attribute(v)}}, "",
                           {t.name()});
    st.values[t.name()] = n->result();
  }

  st.lowerGraph = [lm](ImportState &sub, const onnx::GraphProto &body) {
    return lowerGraphNodes(*lm, sub, body, "");
  };
  NNC_TRY(lowerGraphNodes(*lm, st, gp, path + ": "));

  std::vector<Value *> outs;
  for (const auto &o : gp.output()) {
    ValueForm form;
    if (auto c = st.composites.find(o.name()); c != st.composites.end()) {
      const StaticValue &v = c->second;
      NNC_USER_CHECK(!v.rows,
                     "{}: graph output '{}' is a sequence whose length is known only at run "
                     "time (a loop appends to it): unsupported as an output; a tensor of it "
                     "(ConcatFromSequence) is",
                     path, o.name());
      form.kind = v.optional ? ValueForm::Kind::Optional : ValueForm::Kind::Sequence;
      form.present = v.present;
      form.ofSequence = v.optional && v.ofSequence;
      form.dtype = v.dtype;
      for (Value *e : v.elements) {
        form.elements.push_back(e->type());
        outs.push_back(e);
      }
    } else {
      auto it = st.values.find(o.name());
      NNC_USER_CHECK(it != st.values.end(),
                     "{}: graph output '{}' is not produced by any node, input or initializer",
                     path, o.name());
      if (o.has_type() && (o.type().has_sequence_type() || o.type().has_optional_type())) {
        // A tensor where the model declares an optional (of a tensor): a present one.
        NNC_USER_CHECK(o.type().has_optional_type() &&
                           !o.type().optional_type().elem_type().has_sequence_type(),
                       "{}: graph output '{}' is declared a sequence but is a tensor", path,
                       o.name());
        form.kind = ValueForm::Kind::Optional;
      }
      form.dtype = it->second->dtype();
      form.elements = {it->second->type()};
      outs.push_back(it->second);
    }
    if (boundary) {
      boundary->outputNames.push_back(o.name());
      boundary->outputs.push_back(std::move(form));
    }
  }
  NNC_USER_CHECK(!outs.empty(),
                 "{}: the graph has no outputs{}", path,
                 gp.output_size() ? " (its outputs are empty sequences or optionals)" : "");
  g.setOutputs(outs);
  if (Error e = verify(g))
    return e.withContext(fmt::format("{}: internal error: the imported graph does not verify",
                                     path));
  return graph;
}

Expected<std::vector<OnnxIssue>> checkOnnxFile(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<OnnxModel> m, OnnxModel::load(path));
  return m->check();
}

std::vector<std::string> OnnxModel::inputNames() const {
  const onnx::GraphProto &gp = m_->model.graph();
  std::set<std::string> inits;
  for (const auto &t : gp.initializer())
    inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto &i : gp.input())
    if (!inits.count(i.name()))
      names.push_back(i.name());
  return names;
}

Expected<std::vector<ValueForm>> OnnxModel::inputForms() const {
  const onnx::GraphProto &gp = m_->model.graph();
  std::set<std::string> inits;
  for (const auto &t : gp.initializer())
    inits.insert(t.name());
  std::vector<ValueForm> forms;
  for (const auto &i : gp.input())
    if (!inits.count(i.name())) {
      NNC_ASSIGN_OR_RETURN(
          ValueForm f, declaredForm(i.type(), fmt::format("{}: graph input '{}'", m_->path,
                                                          i.name())));
      forms.push_back(std::move(f));
    }
  return forms;
}

namespace {

/// The issues of the nodes of `gp` and, depth first, of the subgraphs in their attributes
/// (If's branches, Loop's and Scan's bodies). `scope` is where `gp` sits ("" for the main
/// graph). Protobuf's parser bounds how deeply subgraphs nest, so the recursion is bounded.
void checkGraph(const LoadedModel &lm, const onnx::GraphProto &gp, const std::string &scope,
                std::vector<OnnxIssue> &issues) {
  for (int i = 0; i < gp.node_size(); ++i) {
    const onnx::NodeProto &n = gp.node(i);
    std::string d = normDomain(n.domain());
    std::string op = d.empty() ? n.op_type() : d + ":" + n.op_type();
    std::string name = n.name().empty() ? fmt::format("#{}", i) : n.name();
    int64_t opset = 0;
    checkNode(lm, n, &opset,
              [&](const std::string &m) { issues.push_back({name, op, m, scope}); });
    std::string here = (scope.empty() ? "" : scope + " / ") + op + " '" + name + "'";
    for (const auto &a : n.attribute()) {
      if (a.has_g())
        checkGraph(lm, a.g(), here + " / " + a.name(), issues);
      for (int k = 0; k < a.graphs_size(); ++k)
        checkGraph(lm, a.graphs(k), fmt::format("{} / {}[{}]", here, a.name(), k), issues);
    }
  }
}

} // namespace

std::vector<OnnxIssue> OnnxModel::check() const {
  std::vector<OnnxIssue> issues;
  checkGraph(*m_, m_->model.graph(), "", issues);
  return issues;
}

} // namespace nnc

// Graphviz and JSON renderings of a graph for `nnc inspect`.
#include "Inspect.h"

#include <map>

#include <fmt/format.h>

#include "nnc/ir/FusionGroup.h"

namespace nnc::tools {

namespace {
std::string escape(const std::string &s, bool json) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\';
    if (json && static_cast<unsigned char>(c) < 0x20) {
      r += fmt::format("\\u{:04x}", c);
      continue;
    }
    r += c;
  }
  return r;
}
} // namespace

void printDot(const Graph &g, std::ostream &os) {
  os << "digraph \"" << escape(g.name(), false) << "\" {\n  rankdir=TB;\n"
     << "  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  std::map<const Value *, std::string> source;
  int k = 0;
  for (Value *in : g.inputs()) {
    std::string id = fmt::format("in{}", k++);
    os << fmt::format("  {} [shape=ellipse, label=\"%{}\\n{}\"];\n", id, escape(in->name(), false),
                      in->type().str());
    source[in] = id;
  }
  k = 0;
  std::map<int64_t, std::vector<std::string>> groups; // fusion group -> node ids
  for (Node *n : g.nodes()) {
    std::string id = fmt::format("n{}", k++);
    if (int64_t fg = fusionGroupOf(*n); fg >= 0)
      groups[fg].push_back(id);
    std::string label(n->opName());
    if (!n->name().empty())
      label += "\\n" + escape(n->name(), false);
    for (Value *r : n->results())
      label += "\\n" + r->type().str();
    os << fmt::format("  {} [label=\"{}\"{}];\n", id, label,
                      n->kind() == OpKind::Constant ? ", style=dashed" : "");
    for (Value *op : n->operands())
      if (op && source.count(op))
        os << fmt::format("  {} -> {};\n", source[op], id);
    for (Value *r : n->results())
      source[r] = id;
  }
  // Each fusion group is a filled cluster: its nodes run as one kernel.
  for (const auto &[fg, ids] : groups) {
    if (ids.size() < 2)
      continue;
    os << fmt::format("  subgraph cluster_fusion_group_{} {{\n    label=\"fusion_group {} "
                      "(one kernel)\";\n    style=filled;\n    color=lightblue;\n",
                      fg, fg);
    for (const std::string &id : ids)
      os << "    " << id << ";\n";
    os << "  }\n";
  }
  k = 0;
  for (Value *o : g.outputs()) {
    os << fmt::format("  out{} [shape=ellipse, label=\"output {}\\n{}\"];\n", k,
                      k, o->type().str());
    os << fmt::format("  {} -> out{};\n", source[o], k);
    ++k;
  }
  os << "}\n";
}

void printJson(const Graph &g, std::ostream &os) {
  auto valueJson = [](const Value *v) {
    return fmt::format("{{\"name\": \"{}\", \"type\": \"{}\"}}", escape(v->name(), true),
                       v->type().str());
  };
  os << "{\n  \"graph\": \"" << escape(g.name(), true) << "\",\n  \"inputs\": [";
  for (size_t i = 0; i < g.inputs().size(); ++i)
    os << (i ? ", " : "") << valueJson(g.inputs()[i]);
  os << "],\n  \"outputs\": [";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << (i ? ", " : "") << valueJson(g.outputs()[i]);
  os << "],\n  \"nodes\": [";
  bool first = true;
  for (Node *n : g.nodes()) {
    os << (first ? "\n" : ",\n") << "    {\"op\": \"" << n->opName() << "\", \"name\": \""
       << escape(n->name(), true) << "\", \"operands\": [";
    first = false;
    for (size_t i = 0; i < n->numOperands(); ++i)
      os << (i ? ", " : "")
         << (n->operand(i) ? "\"" + escape(n->operand(i)->name(), true) + "\"" : "null");
    os << "], \"results\": [";
    for (size_t i = 0; i < n->numResults(); ++i)
      os << (i ? ", " : "") << valueJson(n->result(i));
    os << "]}";
  }
  os << "\n  ],\n  \"node_count\": " << g.numNodes() << "\n}\n";
}

} // namespace nnc::tools

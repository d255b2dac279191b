// Pipelines: parsing, printing and running passes with verification and IR dumps.
#include "nnc/passes/PassManager.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/ranges.h>

#include "nnc/ir/Loop.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"

namespace nnc {

namespace {

std::string trimmed(std::string_view s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

/// "name{key=value,key=value}" -> name and options.
Expected<std::pair<std::string, std::map<std::string, std::string>>>
splitOptions(const std::string &entry) {
  size_t brace = entry.find('{');
  std::map<std::string, std::string> options;
  if (brace == std::string::npos)
    return std::make_pair(entry, options);
  if (entry.back() != '}')
    return makeError("pass '{}': options must end with '}}'", entry);
  std::string body = entry.substr(brace + 1, entry.size() - brace - 2);
  size_t pos = 0;
  while (pos < body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos)
      comma = body.size();
    std::string kv = trimmed(std::string_view(body).substr(pos, comma - pos));
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return makeError("pass '{}': option '{}' is not key=value", entry, kv);
    options[trimmed(kv.substr(0, eq))] = trimmed(kv.substr(eq + 1));
    pos = comma + 1;
  }
  return std::make_pair(trimmed(entry.substr(0, brace)), options);
}

/// Runs pass `name` on every loop body of `g` (and theirs), each body first brought in step
/// with its node's operands (syncScanBody: input types, constant invariants).
Error runOnBodies(Graph &g, const std::string &name, PassContext &ctx) {
  for (Node *n : g.nodes()) {
    if (!n->body())
      continue;
    if (n->kind() == OpKind::Scan)
      NNC_TRY(syncScanBody(*n));
    std::unique_ptr<Pass> pass = findPass(name)->create();
    Expected<bool> changed = pass->run(*n->body(), ctx);
    if (!changed)
      return changed.takeError().withContext(
          fmt::format("pass {} in the body of {}", name, n->describe()));
    NNC_TRY(runOnBodies(*n->body(), name, ctx));
  }
  return Error::success();
}

} // namespace

Tensor PackedWeightCache::get(const Tensor &source, const std::string &how,
                              const std::function<Tensor()> &make) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A reshaped() copy shares the buffer: the dtype and extents are part of the key.
  std::string key =
      fmt::format("{} {} {}", how, dtypeName(source.dtype()), extentsStr(source.extents()));
  auto [it, fresh] = entries_.try_emplace({source.rawData(), key});
  if (fresh)
    it->second = {source, make()};
  return it->second.second;
}

Expected<CpuTarget> PassContext::cpuFor(std::string_view pass) const {
  if (!cpu)
    return makeError("pass {}: needs the CPU target, and this pipeline was run without one", pass);
  return *cpu;
}

Error PassContext::checkOptionNames(std::string_view pass,
                                    const std::vector<std::string> &known) const {
  for (const auto &[key, value] : passOptions)
    if (std::find(known.begin(), known.end(), key) == known.end())
      return makeError("{}: unknown option '{}' (options: {})", pass, key, fmt::join(known, ", "));
  return Error::success();
}

Expected<int64_t> PassContext::intOption(std::string_view pass, const std::string &name,
                                         int64_t dflt, int64_t least) const {
  auto it = passOptions.find(name);
  if (it == passOptions.end())
    return dflt;
  int64_t v = least - 1;
  try {
    size_t used = 0;
    v = std::stoll(it->second, &used);
    if (used != it->second.size())
      v = least - 1;
  } catch (const std::exception &) {
  }
  if (v < least)
    return makeError("{}: option {}={} must be an integer >= {}", pass, name, it->second, least);
  return v;
}

Expected<PassPipeline> PassPipeline::parse(std::string_view text) {
  PassPipeline p;
  size_t pos = 0;
  while (pos <= text.size()) {
    // A comma inside an option list {..} does not end the entry.
    size_t comma = pos;
    int depth = 0;
    for (; comma < text.size() && (text[comma] != ',' || depth > 0); ++comma)
      depth += text[comma] == '{' ? 1 : text[comma] == '}' ? -1 : 0;
    std::string entry = trimmed(text.substr(pos, comma - pos));
    if (!entry.empty()) {
      NNC_ASSIGN_OR_RETURN(auto split, splitOptions(entry));
      if (!findPass(split.first)) {
        std::string known;
        for (const PassInfo &i : passRegistry())
          known += (known.empty() ? "" : ", ") + i.name;
        return makeError("unknown pass '{}' (known passes: {})", split.first, known);
      }
      p.names_.push_back(entry);
    }
    pos = comma + 1;
  }
  return p;
}

Expected<PassPipeline> PassPipeline::upTo(std::string_view pass) const {
  PassPipeline p;
  if (pass == "import")
    return p;
  auto it = std::find(names_.begin(), names_.end(), pass);
  if (it == names_.end())
    return makeError("pass '{}' is not in the pipeline '{}' (or use 'import')", pass, str());
  p.names_.assign(names_.begin(), it + 1);
  return p;
}

std::string PassPipeline::str() const {
  std::string s;
  for (const std::string &n : names_)
    s += (s.empty() ? "" : ",") + n;
  return s;
}

Error PassPipeline::run(Graph &g, PassContext &ctx) const {
  std::ostream &printOs = ctx.printStream ? *ctx.printStream : std::cout;
  std::ostream &statsOs = ctx.statsStream ? *ctx.statsStream : std::cerr;
  for (const std::string &entry : names_) {
    // parse() has checked every entry.
    auto [name, options] = *splitOptions(entry);
    std::unique_ptr<Pass> pass = findPass(name)->create();
    ctx.passOptions = options;
    auto start = std::chrono::steady_clock::now();
    Expected<bool> changed = pass->run(g, ctx);
    if (!changed)
      return changed.takeError().withContext("pass " + name);
    if (pass->runsOnBodies())
      if (Error e = runOnBodies(g, name, ctx))
        return e;
    if (ctx.verifyEach)
      if (Error e = verify(g))
        return e.withContext("verifier after pass " + name);
    if (ctx.printAfterAll || ctx.printAfter.count(name)) {
      printOs << "// ----- IR after " << name << " -----\n";
      printGraph(g, printOs, ctx.printOptions);
    }
    if (ctx.stats) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            start)
                      .count();
      statsOs << fmt::format("{:<22} {:8.3f} ms  nodes {}", name, ms, g.numNodes());
      for (const auto &[k, v] : pass->statistics())
        statsOs << fmt::format("  {} {}", k, v);
      statsOs << "\n";
    }
  }
  return Error::success();
}

} // namespace nnc

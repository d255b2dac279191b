// Pipelines: parsing, printing and running passes with verification and IR dumps.
#include "nnc/passes/PassManager.h"

#include <chrono>
#include <iostream>

#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"

namespace nnc {

Expected<PassPipeline> PassPipeline::parse(std::string_view text) {
  PassPipeline p;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos)
      comma = text.size();
    std::string name(text.substr(pos, comma - pos));
    while (!name.empty() && name.back() == ' ')
      name.pop_back();
    while (!name.empty() && name.front() == ' ')
      name.erase(name.begin());
    if (!name.empty()) {
      if (!findPass(name)) {
        std::string known;
        for (const PassInfo &i : passRegistry())
          known += (known.empty() ? "" : ", ") + i.name;
        return makeError("unknown pass '{}' (known passes: {})", name, known);
      }
      p.names_.push_back(name);
    }
    pos = comma + 1;
  }
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
  for (const std::string &name : names_) {
    std::unique_ptr<Pass> pass = findPass(name)->create();
    auto start = std::chrono::steady_clock::now();
    Expected<bool> changed = pass->run(g, ctx);
    if (!changed)
      return changed.takeError().withContext("pass " + name);
    if (ctx.verifyEach)
      if (Error e = verify(g))
        return e.withContext("verifier after pass " + name);
    if (ctx.printAfterAll || ctx.printAfter.count(name)) {
      printOs << "// ----- IR after " << name << " -----\n";
      printGraph(g, printOs);
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

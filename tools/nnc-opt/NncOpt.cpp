// nnc-opt: reads text IR, verifies it, runs a pass pipeline and prints the result as text IR.
//
//   nnc-opt FILE.nir [--passes=a,b] [--print-ir-after=PASS] [--print-ir-after-all]
//           [--verify-each=true|false] [--verify-input=true|false] [--stats] [-o OUT]
//
// FILE "-" (the default) reads stdin. Errors go to stderr as one line and exit with 1.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>

#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

namespace {

int fail(const std::string &message) {
  std::cerr << message << "\n";
  return 1;
}

std::string passList() {
  std::string out;
  for (const nnc::PassInfo &p : nnc::passRegistry())
    out += "\n  " + p.name + ": " + p.summary;
  return out.empty() ? "\n  (none)" : out;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"nnc-opt: reads text IR (.nir), verifies it, runs passes, prints text IR."};
  std::string input = "-";
  std::string output;
  std::string passes;
  std::string cpu;
  std::vector<std::string> printAfter;
  bool printAfterAll = false;
  bool verifyEach = true;
  bool verifyInput = true;
  bool stats = false;
  bool listPasses = false;
  int64_t maxInline = nnc::PrintOptions().maxInlineElements;
  app.add_option("input", input, "Input .nir file ('-' reads stdin)");
  app.add_option("-o,--output", output, "Write the IR here instead of stdout");
  app.add_option("--passes", passes, "Comma-separated pass pipeline, e.g. a,b,c");
  app.add_option("--cpu", cpu,
                 "The CPU the passes shape the graph for (channel block, panel width, "
                 "Winograd balance): native (default), x86-64-v4, x86-64-v3, x86-64; $NNC_CPU "
                 "sets the default");
  app.add_option("--print-ir-after", printAfter, "Print the IR (to stderr) after this pass")
      ->delimiter(',');
  app.add_flag("--print-ir-after-all", printAfterAll, "Print the IR (to stderr) after every pass");
  app.add_option("--verify-each", verifyEach, "Run the verifier after every pass (default true)");
  app.add_option("--verify-input", verifyInput,
                 "Verify the input before the passes (default true; false for tests of the "
                 "text form alone)");
  app.add_flag("--stats", stats, "Print per-pass statistics to stderr");
  app.add_flag("--list-passes", listPasses, "List the known passes and exit");
  app.add_option("--max-inline-elements", maxInline,
                 "Print constants with more elements than this as hex blobs");
  CLI11_PARSE(app, argc, argv);

  if (listPasses) {
    std::cout << "passes:" << passList() << "\n";
    return 0;
  }

  // Read and parse.
  nnc::Expected<std::unique_ptr<nnc::Graph>> graph = nnc::makeError("unreachable");
  if (input == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    graph = nnc::parseGraph(text, "<stdin>");
  } else {
    graph = nnc::parseGraphFile(input);
  }
  if (!graph)
    return fail(graph.error().message());
  nnc::Graph &g = **graph;
  if (verifyInput)
    if (nnc::Error e = nnc::verify(g))
      return fail(input + ": " + e.message());

  // Run the pipeline.
  for (const std::string &p : printAfter)
    if (!nnc::findPass(p))
      return fail(
          fmt::format("--print-ir-after: unknown pass '{}'; known passes:{}", p, passList()));
  if (!passes.empty()) {
    nnc::Expected<nnc::PassPipeline> pipeline = nnc::PassPipeline::parse(passes);
    if (!pipeline)
      return fail(pipeline.error().message());
    nnc::Expected<nnc::CpuTarget> target = cpu.empty()
                                               ? nnc::CpuTarget::fromEnvironment(false)
                                               : nnc::CpuTarget::parse(cpu, /*runsHere=*/false);
    if (!target)
      return fail((cpu.empty() ? "" : "--cpu: ") + target.error().message());
    nnc::PassContext ctx;
    ctx.cpu = *target;
    ctx.evaluate = [](const nnc::Node &n, const std::vector<nnc::Tensor> &operands) {
      return nnc::evaluateNode(n, operands);
    };
    ctx.verifyEach = verifyEach;
    ctx.printAfter.insert(printAfter.begin(), printAfter.end());
    ctx.printAfterAll = printAfterAll;
    ctx.printStream = &std::cerr;
    ctx.stats = stats;
    ctx.statsStream = &std::cerr;
    if (nnc::Error e = pipeline->run(g, ctx))
      return fail(e.message());
  }

  // Print.
  nnc::PrintOptions opts;
  opts.maxInlineElements = maxInline;
  if (output.empty() || output == "-") {
    nnc::printGraph(g, std::cout, opts);
    std::cout.flush();
    if (!std::cout)
      return fail("nnc-opt: error writing stdout");
    return 0;
  }
  std::ofstream out(output, std::ios::binary);
  if (!out)
    return fail(fmt::format("{}: cannot open for writing", output));
  nnc::printGraph(g, out, opts);
  out.close();
  if (!out)
    return fail(fmt::format("{}: write error", output));
  return 0;
}

// nnc-opt: reads text IR, verifies it, runs a pass pipeline and prints the result as text IR;
// or reads kernel IR, verifies it, applies schedules and expands composite ops.
//
//   nnc-opt FILE.nir [--passes=a,b] [--print-ir-after=PASS] [--print-ir-after-all]
//           [--verify-each=true|false] [--verify-input=true|false] [--stats] [-o OUT]
//   nnc-opt FILE.kir [--apply-schedule] [--expand-composites] [--verify-each=...]
//           [--verify-input=...] [-o OUT]
//
// FILE "-" (the default) reads stdin (kernel IR with --kir). Errors go to stderr as one line
// and exit with 1. nnc-opt links no code generator (tests/core/check_layering.sh): the LLVM IR
// and OpenCL C of a kernel file come from `nnc inspect FILE.kir --kernels --llvm|--opencl`.
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>

#include "nnc/ir/KernelParser.h"
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

/// Writes what `print` prints to OUT (stdout for "" or "-").
int writeOutput(const std::string &output, const std::function<void(std::ostream &)> &print) {
  if (output.empty() || output == "-") {
    print(std::cout);
    std::cout.flush();
    if (!std::cout)
      return fail("nnc-opt: error writing stdout");
    return 0;
  }
  std::ofstream out(output, std::ios::binary);
  if (!out)
    return fail(fmt::format("{}: cannot open for writing", output));
  print(out);
  out.close();
  if (!out)
    return fail(fmt::format("{}: write error", output));
  return 0;
}

struct KernelActions {
  bool applySchedule = false;
  bool expandComposites = false;
  bool verifyInput = true;
  bool verifyEach = true;
};

/// The kernel-IR mode: parse, verify, apply the schedules, expand composites (in the order
/// codegenBody has them), print.
int runKernels(const std::string &input, const std::string &output, const KernelActions &a) {
  nnc::Expected<std::vector<nnc::kir::Kernel>> kernels = nnc::makeError("unreachable");
  if (input == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    kernels = nnc::kir::parseKernels(text, "<stdin>");
  } else {
    kernels = nnc::kir::parseKernelFile(input);
  }
  if (!kernels)
    return fail(kernels.error().message());
  std::string text;
  for (nnc::kir::Kernel &k : *kernels) {
    if (a.verifyInput)
      if (nnc::Error e = nnc::kir::verifyKernel(k))
        return fail(input + ": " + e.message());
    if (a.applySchedule) {
      nnc::Expected<nnc::kir::Stmt> body = nnc::kir::applySchedule(k);
      if (!body)
        return fail(fmt::format("{}: kernel {}: {}", input, k.name, body.error().message()));
      k.body = *body;
      k.schedule = {};
      if (a.verifyEach)
        if (nnc::Error e = nnc::kir::verifyKernel(k))
          return fail(input + ": after --apply-schedule: " + e.message());
    }
    if (a.expandComposites) {
      k.body = nnc::kir::expandComposites(k.body);
      if (a.verifyEach)
        if (nnc::Error e = nnc::kir::verifyKernel(k))
          return fail(input + ": after --expand-composites: " + e.message());
    }
    text += (text.empty() ? "" : "\n") + nnc::kir::printKernel(k);
  }
  return writeOutput(output, [&](std::ostream &os) { os << text; });
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"nnc-opt: reads text IR (.nir), verifies it, runs passes, prints text IR; or "
               "reads kernel IR (.kir), verifies it, applies schedules, expands composite ops, "
               "prints kernel IR."};
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
  bool kirInput = false;
  KernelActions kernelActions;
  app.add_option("input", input, "Input .nir or .kir file ('-' reads stdin)");
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
  app.add_flag("--kir", kirInput, "The input is kernel IR (the default for a .kir file)");
  app.add_flag("--apply-schedule", kernelActions.applySchedule,
               "Kernel IR: rewrite each kernel's loop nest by its schedule (then dropped)");
  app.add_flag("--expand-composites", kernelActions.expandComposites,
               "Kernel IR: expand composite scalar ops (sigmoid, erf, pow, ...) into primitives");
  CLI11_PARSE(app, argc, argv);

  bool kernelMode =
      kirInput || (input.size() > 4 && input.compare(input.size() - 4, 4, ".kir") == 0);
  if (kernelMode) {
    if (!passes.empty() || !printAfter.empty() || printAfterAll || stats)
      return fail("--passes, --print-ir-after(-all) and --stats are for graph IR; kernel IR "
                  "takes --apply-schedule and --expand-composites");
    kernelActions.verifyInput = verifyInput;
    kernelActions.verifyEach = verifyEach;
    return runKernels(input, output, kernelActions);
  }
  if (kernelActions.applySchedule || kernelActions.expandComposites)
    return fail("--apply-schedule and --expand-composites are for kernel IR (a .kir file, or "
                "--kir)");

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
  return writeOutput(output, [&](std::ostream &os) { nnc::printGraph(g, os, opts); });
}

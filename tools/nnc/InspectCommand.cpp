// `nnc inspect MODEL`: the IR after any pass (text, dot, json), the buffer plan, the kernels.
#include "Command.h"
#include "CommandUtil.h"
#include "Inspect.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/Printer.h"
#include "nnc/passes/PassManager.h"

#include <algorithm>
#include <iostream>

namespace nnc::tools {

namespace {

struct InspectOptions {
  std::string model;
  std::string after;
  std::string format = "text";
  std::string passes;
  bool printAfterAll = false;
  bool stats = false;
  bool plan = false;
  bool json = false;
  bool kernels = false;
  bool llvm = false;
  bool assembly = false;
  std::vector<std::string> shapes; // NAME=D0xD1
  int threads = 0;
  std::string cpu; // --cpu
};

/// `nnc inspect --plan`: the buffer plan of the compiled model.
int inspectPlan(const InspectOptions &o) {
  Expected<CpuTarget> cpu = parseCpuOption(o.cpu, /*runsHere=*/false);
  if (!cpu)
    return fail(cpu.takeError());
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes, *cpu);
  if (!g)
    return fail(g.takeError());
  CpuOptions opts;
  opts.threads = o.threads;
  opts.codegen.cpu = *cpu;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**g, opts);
  if (!exe)
    return fail(exe.takeError());
  std::cout << (o.json ? (*exe)->plan().json() : (*exe)->plan().str());
  return 0;
}

/// `nnc inspect --kernels [--llvm|--asm]`: the generated kernels, their LLVM IR or assembly.
int inspectKernels(const InspectOptions &o) {
  Expected<CpuTarget> cpu = parseCpuOption(o.cpu, /*runsHere=*/false);
  if (!cpu)
    return fail(cpu.takeError());
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes, *cpu);
  if (!g)
    return fail(g.takeError());
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(**g, *cpu);
  if (!kernels)
    return fail(kernels.takeError());
  if (o.llvm || o.assembly) {
    Expected<std::string> text =
        o.llvm ? emitLLVMIR(*kernels, true, *cpu) : emitAssembly(*kernels, *cpu);
    if (!text)
      return fail(text.takeError());
    std::cout << *text;
    return 0;
  }
  for (const kir::Kernel &k : *kernels)
    std::cout << kir::printKernel(k) << "\n";
  return 0;
}

int inspectCommand(const InspectOptions &o) {
  if ((o.llvm || o.assembly) && !o.kernels)
    return fail("--llvm and --asm go with --kernels");
  if (o.llvm && o.assembly)
    return fail("give one of --llvm and --asm");
  if (o.plan)
    return inspectPlan(o);
  if (o.kernels)
    return inspectKernels(o);
  if (o.json)
    return fail("--json goes with --plan (for the graph, use --format=json)");
  if (o.format != "text" && o.format != "dot" && o.format != "json")
    return fail(fmt::format("--format must be text, dot or json, not '{}'", o.format));
  Expected<CpuTarget> cpu = parseCpuOption(o.cpu, /*runsHere=*/false);
  if (!cpu)
    return fail(cpu.takeError());
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model);
  if (!g)
    return fail(g.takeError());
  PassPipeline pipeline = PassPipeline::defaultPipeline();
  if (!o.passes.empty()) {
    Expected<PassPipeline> p = PassPipeline::parse(o.passes);
    if (!p)
      return fail(p.takeError());
    pipeline = *p;
  }
  if (o.after == "import") {
    pipeline = *PassPipeline::parse("");
  } else if (!o.after.empty()) {
    const auto &names = pipeline.passes();
    auto it = std::find(names.begin(), names.end(), o.after);
    if (it == names.end())
      return fail(fmt::format("--after={}: not in the pipeline '{}' (or use --after=import)",
                              o.after, pipeline.str()));
    std::string prefix;
    for (auto p = names.begin(); p != it + 1; ++p)
      prefix += (prefix.empty() ? "" : ",") + *p;
    pipeline = *PassPipeline::parse(prefix);
  }
  PassContext ctx;
  ctx.cpu = *cpu;
  ctx.evaluate = driver::interpreterEvaluator();
  ctx.printAfterAll = o.printAfterAll;
  ctx.stats = o.stats;
  if (Error e = pipeline.run(**g, ctx))
    return fail(e);
  if (o.format == "dot")
    tools::printDot(**g, std::cout);
  else if (o.format == "json")
    tools::printJson(**g, std::cout);
  else
    printGraph(**g, std::cout);
  return 0;
}

class InspectCommand : public Command {
public:
  explicit InspectCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("inspect", "Print a model's IR after the passes");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("--after", o_.after,
                     "Stop after this pass of the pipeline (`import`: before any pass)");
    cmd_->add_option("--format", o_.format, "text, dot or json");
    cmd_->add_option("--passes", o_.passes, "Pipeline to run (default: the standard one)");
    cmd_->add_flag("--print-ir-after-all", o_.printAfterAll, "Print the IR after each pass");
    cmd_->add_flag("--stats", o_.stats, "Per-pass statistics on stderr");
    cmd_->add_flag("--plan", o_.plan, "The CPU buffer plan (sizes, offsets, live ranges)");
    cmd_->add_flag("--json", o_.json, "With --plan: as JSON");
    cmd_->add_flag("--kernels", o_.kernels, "The generated CPU kernels and schedules");
    cmd_->add_flag("--llvm", o_.llvm, "With --kernels: their optimized LLVM IR");
    cmd_->add_flag("--asm", o_.assembly, "With --kernels: their host assembly");
    cmd_->add_option("--shape", o_.shapes, "NAME=D0xD1x... for a symbolic input");
    cmd_->add_option("--threads", o_.threads, "Threads of the executable (--plan)");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
  }
  int run() override { return inspectCommand(o_); }

private:
  InspectOptions o_;
};

} // namespace

std::unique_ptr<Command> addInspectCommand(CLI::App &app) {
  return std::make_unique<InspectCommand>(app);
}

} // namespace nnc::tools

// `nnc inspect MODEL`: the IR after any pass (text, dot, json), the buffer plan, the kernels;
// `nnc inspect KERNELS.kir --kernels`: a kernel file's LLVM IR, assembly or OpenCL C.
#include "Command.h"
#include "CommandUtil.h"
#include "Inspect.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/KernelParser.h"
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
  bool templates = false;
  bool printPipeline = false;
  bool fullConstants = false; // --full-constants: no elision of large constants
  std::string precision = "fp32";
  std::string target = "cpu"; // --target: whose pipeline and templates
  bool llvm = false;
  bool assembly = false;
  bool opencl = false;
  std::vector<std::string> shapes; // NAME=D0xD1
  int threads = 0;
  std::string cpu; // --cpu
};

/// `nnc inspect --plan`: the buffer plan of the compiled model.
int inspectPlan(const InspectOptions &o) {
  Expected<CpuTarget> cpu = parseCpuOption(o.cpu, /*runsHere=*/false);
  if (!cpu)
    return fail(cpu.takeError());
  driver::Target target(driver::Target::Cpu, *cpu);
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes, target);
  if (!g)
    return fail(g.takeError());
  CpuOptions opts(*cpu);
  opts.threads = o.threads;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**g, opts);
  if (!exe)
    return fail(exe.takeError());
  std::cout << (o.json ? (*exe)->plan().json() : (*exe)->plan().str());
  return 0;
}

/// One line per template choice: kernel prefix, template (or "generic"), op, configs, and
/// whether a Q/DQ anchor runs integer or fell back to fp32 (qdqNote).
std::string templateLine(const tuning::TemplateChoice &c, const std::string &note) {
  std::string line = fmt::format("{} {} {}", c.prefix, c.name.empty() ? "generic" : c.name, c.op);
  for (const auto &[p, cfg] : c.configs)
    line += fmt::format(" [{} {}]", p.kind, tuning::configStr(cfg));
  if (!note.empty())
    line += "  " + note;
  return line;
}

bool isKernelFile(const std::string &path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".kir") == 0;
}

/// The kernels' LLVM IR, assembly or OpenCL C (for `gpu`), or their text.
int printKernels(const InspectOptions &o, const std::vector<kir::Kernel> &kernels,
                 const CpuTarget &cpu, const GpuTarget &gpu) {
  if (o.llvm || o.assembly) {
    Expected<std::string> text =
        o.llvm ? emitLLVMIR(kernels, true, cpu) : emitAssembly(kernels, cpu);
    if (!text)
      return fail(text.takeError());
    std::cout << *text;
    return 0;
  }
  if (o.opencl) {
    Expected<OpenCLProgram> program = emitOpenCL(kernels, gpu);
    if (!program)
      return fail(program.takeError());
    std::cout << program->source;
    return 0;
  }
  for (const kir::Kernel &k : kernels)
    std::cout << kir::printKernel(k) << "\n";
  return 0;
}

/// `nnc inspect --kernels [--llvm|--asm|--opencl]`: the generated kernels, their LLVM IR,
/// assembly or OpenCL C; `--templates`: the kernel template each node or group was lowered
/// with. A .kir file gives the kernels itself (verified; OpenCL C for a generic device unless
/// --target names one).
int inspectKernels(const InspectOptions &o) {
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu, /*runsHere=*/false);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, o.precision))
    return fail(e);
  const CpuTarget *cpu = &target->cpu;
  if (isKernelFile(o.model)) {
    if (o.templates)
      return fail("--templates needs a model, not a kernel file");
    Expected<std::vector<kir::Kernel>> kernels = kir::parseKernelFile(o.model);
    if (!kernels)
      return fail(kernels.takeError());
    for (const kir::Kernel &k : *kernels)
      if (Error e = kir::verifyKernel(k))
        return fail(e.withContext(o.model));
    return printKernels(o, *kernels, *cpu, target->gpu ? *target->gpu : GpuTarget::generic());
  }
  // A flat list of kernels has no loops: a recurrent model's time loop is unrolled into it
  // (as for nnc compile's listings; its body's kernels repeat once per step); a while loop's
  // body is listed once.
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes, *target, LoopForm::ListSteps);
  if (!g)
    return fail(g.takeError());
  // OpenCL: the kernels as `run` writes them for the device (GpuTarget::generic() without one,
  // parseTargetOption).
  std::vector<std::string> choices;
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(
      **g, *target,
      [&](const tuning::TemplateChoice &c, const std::string &note) {
        choices.push_back(templateLine(c, note));
      },
      o.threads);
  if (!kernels)
    return fail(kernels.takeError());
  if (o.templates) {
    for (const std::string &line : choices)
      std::cout << line << "\n";
    return 0;
  }
  if (o.opencl && !target->gpu)
    return fail("--opencl needs --target opencl for a model (its kernels are lowered for it)");
  return printKernels(o, *kernels, *cpu, target->gpu ? *target->gpu : GpuTarget::generic());
}

int inspectCommand(const InspectOptions &o) {
  if ((o.llvm || o.assembly || o.opencl) && !o.kernels)
    return fail("--llvm, --asm and --opencl go with --kernels");
  if (o.llvm + o.assembly + o.opencl > 1)
    return fail("give one of --llvm, --asm and --opencl");
  if (isKernelFile(o.model) && !o.kernels)
    return fail(fmt::format("{} is a kernel file: inspect it with --kernels", o.model));
  if (o.templates && (o.kernels || o.plan))
    return fail("--templates lists the template choices alone (without --kernels or --plan)");
  if (o.target != "cpu" && o.target != "opencl" && o.target.rfind("opencl:", 0) != 0)
    return fail(fmt::format("--target must be cpu or opencl, not '{}'", o.target));
  if (o.plan)
    return inspectPlan(o);
  if (o.kernels || o.templates)
    return inspectKernels(o);
  if (o.json)
    return fail("--json goes with --plan (for the graph, use --format=json)");
  if (o.format != "text" && o.format != "dot" && o.format != "json")
    return fail(fmt::format("--format must be text, dot or json, not '{}'", o.format));
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu, /*runsHere=*/false);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, o.precision))
    return fail(e);
  Expected<PassPipeline> standard = PassPipeline::forTarget(driver::pipelineTarget(*target));
  if (!standard)
    return fail(standard.takeError());
  PassPipeline pipeline = *standard;
  if (!o.passes.empty()) {
    Expected<PassPipeline> p = PassPipeline::parse(o.passes);
    if (!p)
      return fail(p.takeError());
    pipeline = *p;
  }
  if (!o.after.empty()) {
    Expected<PassPipeline> prefix = pipeline.upTo(o.after);
    if (!prefix)
      return fail(fmt::format("--after={}: {}", o.after, prefix.takeError().message()));
    pipeline = *prefix;
  }
  if (o.printPipeline) {
    std::cout << pipeline.str() << "\n";
    return 0;
  }
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model);
  if (!g)
    return fail(g.takeError());
  // Constants over 16 elements are elided, as MLIR's printer does, unless asked for in full:
  // a model's weights as hex would make lines of hundreds of KB (LeNet's text IR had one of
  // 410 KB). The full text is the one that parses back (`nnc-opt`).
  PrintOptions print;
  if (!o.fullConstants)
    print.elideElementsOver = 16;
  PassContext ctx;
  ctx.cpu = target->cpu;
  ctx.evaluate = driver::interpreterEvaluator();
  ctx.printOptions = print;
  ctx.printAfterAll = o.printAfterAll;
  ctx.stats = o.stats;
  if (Error e = pipeline.run(**g, ctx))
    return fail(e);
  if (o.format == "dot")
    tools::printDot(**g, std::cout);
  else if (o.format == "json")
    tools::printJson(**g, std::cout);
  else
    printGraph(**g, std::cout, print);
  return 0;
}

class InspectCommand : public Command {
public:
  explicit InspectCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("inspect",
                              "Print a model's IR after any pass, its buffer plan or its kernels");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir), or kernels (.kir)")
        ->required();
    cmd_->add_option("--after", o_.after,
                     "Stop after this pass of the pipeline (`import`: before any pass)");
    cmd_->add_option("--format", o_.format, "text, dot or json");
    cmd_->add_option("--passes", o_.passes, "Pipeline to run (default: the standard one)");
    cmd_->add_flag("--print-ir-after-all", o_.printAfterAll, "Print the IR after each pass");
    cmd_->add_flag("--full-constants", o_.fullConstants,
                   "Print constants of more than 16 elements in full (as hex), not as "
                   "dense_resource<__elided__>; only the full text parses back (nnc-opt)");
    cmd_->add_flag("--stats", o_.stats, "Per-pass statistics on stderr");
    cmd_->add_flag("--plan", o_.plan, "The CPU buffer plan (sizes, offsets, live ranges)");
    cmd_->add_flag("--json", o_.json, "With --plan: as JSON");
    cmd_->add_flag("--kernels", o_.kernels, "The generated CPU kernels and schedules");
    cmd_->add_flag("--templates", o_.templates,
                   "The kernel template (or generic lowerer) and configs of each node or group");
    cmd_->add_flag("--print-pipeline", o_.printPipeline,
                   "Print the pipeline that would run (the target's, or --passes, up to "
                   "--after) as the text --passes takes, and stop");
    cmd_->add_option("--target", o_.target,
                     "cpu or opencl: whose pipeline and kernel templates (default cpu)");
    cmd_->add_flag("--llvm", o_.llvm, "With --kernels: their optimized LLVM IR");
    cmd_->add_flag("--asm", o_.assembly, "With --kernels: their host assembly");
    cmd_->add_flag("--opencl", o_.opencl, "With --kernels: their OpenCL C (--target opencl)");
    cmd_->add_option("--shape", o_.shapes, "NAME=D0xD1x... for a symbolic input");
    cmd_->add_option("--threads", o_.threads,
                     "Threads of the executable (--plan) and that the kernels' defaults are for "
                     "(--kernels, --templates; default: all cores)");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--precision", o_.precision, kPrecisionOptionHelp);
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

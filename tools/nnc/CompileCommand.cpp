// `nnc compile MODEL -o OUT`: write what the compiler produces (text IR, kernels, LLVM IR,
// assembly, an object file, or OpenCL C).
#include "Command.h"
#include "CommandUtil.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/Printer.h"
#include "nnc/runtime/OpenCLDevice.h"

#include <algorithm>
#include <fstream>
#include <optional>

namespace nnc::tools {

namespace {

struct CompileOptions {
  std::string model;
  std::string output;
  std::string emit;
  std::string target = "cpu";
  std::string cpu; // --cpu
  bool genericGpu = false; // --generic-gpu
  std::vector<std::string> shapes;
};

int compileCommand(const CompileOptions &opts) {
  CompileOptions o = opts;
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu, /*runsHere=*/false);
  if (!target)
    return fail(target.takeError());
  bool opencl = *target == driver::Target::OpenCL;
  if (o.emit.empty())
    o.emit = opencl ? "cl" : "obj";
  static const char *kinds[] = {"nir", "kernels", "ll", "asm", "obj", "cl"};
  if (std::find(std::begin(kinds), std::end(kinds), o.emit) == std::end(kinds))
    return fail(fmt::format("--emit must be nir, kernels, ll, asm, obj or cl, not '{}'", o.emit));
  if (opencl != (o.emit == "cl") && o.emit != "nir" && o.emit != "kernels")
    return fail(fmt::format("--emit {} does not go with --target {}", o.emit, o.target));
  Expected<std::unique_ptr<Graph>> g = loadStatic(o.model, o.shapes, *target);
  if (!g)
    return fail(g.takeError());
  auto writeText = [&](const std::string &text) -> int {
    std::ofstream f(o.output, std::ios::binary);
    if (!f)
      return fail(fmt::format("-o {}: cannot open for writing", o.output));
    f << text;
    f.close();
    if (!f)
      return fail(fmt::format("-o {}: write failed", o.output));
    return 0;
  };
  if (o.emit == "nir")
    return writeText(printGraph(**g));
  // OpenCL C is written for the device it will run on when there is one here (its limits
  // bound the work-groups), else for GpuTarget::generic().
  std::optional<GpuTarget> gpu;
  if (opencl)
    gpu = o.genericGpu ? GpuTarget::generic() : openclCodeTarget(*target);
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(**g, target->cpu, gpu ? &*gpu : nullptr);
  if (!kernels)
    return fail(kernels.takeError());
  if (o.emit == "kernels") {
    std::string text;
    for (const kir::Kernel &k : *kernels)
      text += kir::printKernel(k) + "\n";
    return writeText(text);
  }
  if (o.emit == "cl") {
    // Checked with libclang, so kernel errors come with line numbers without an OpenCL runtime.
    Expected<OpenCLProgram> prog = emitOpenCL(*kernels, *gpu);
    if (!prog)
      return fail(prog.takeError());
    if (int rc = writeText(prog->source))
      return rc;
    if (Error e = checkOpenCLSource(prog->source, o.output))
      return fail(e);
    return 0;
  }
  if (o.emit == "obj") {
    if (Error e = emitObjectFile(*kernels, o.output, target->cpu))
      return fail(e);
    return 0;
  }
  Expected<std::string> text = o.emit == "ll" ? emitLLVMIR(*kernels, true, target->cpu)
                                              : emitAssembly(*kernels, target->cpu);
  if (!text)
    return fail(text.takeError());
  return writeText(*text);
}

class CompileCommand : public Command {
public:
  explicit CompileCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("compile", "Write what the compiler produces");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("-o,--output", o_.output, "Output file")->required();
    cmd_->add_option("--emit", o_.emit,
                     "nir, kernels, ll, asm, obj (default for cpu) or cl (OpenCL C, checked "
                     "with libclang; default for opencl)");
    cmd_->add_option("--target", o_.target, "cpu (default) or opencl");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--shape", o_.shapes, "NAME=D0xD1x... for a symbolic input");
    cmd_->add_flag("--generic-gpu", o_.genericGpu,
                   "With --target opencl: write kernels for OpenCL 1.2's generic GPU (32K local "
                   "memory, work-groups of 256) instead of the device found here");
  }
  int run() override { return compileCommand(o_); }

private:
  CompileOptions o_;
};

} // namespace

std::unique_ptr<Command> addCompileCommand(CLI::App &app) {
  return std::make_unique<CompileCommand>(app);
}

} // namespace nnc::tools

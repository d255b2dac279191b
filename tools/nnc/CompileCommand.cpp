// `nnc compile MODEL -o OUT`: write what the compiler produces (text IR, kernels, LLVM IR,
// assembly, an object file, OpenCL C, or an ahead-of-time artifact: a shared library and its
// C header for libnnc_runtime).
#include "Command.h"
#include "CommandUtil.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/Printer.h"
#include "nnc/runtime/Artifact.h"
#include "nnc/runtime/OpenCLDevice.h"
#include "nnc/runtime/TuningCache.h"
#include "nnc/support/Warning.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
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
  std::string precision = "fp32";
  bool genericGpu = false; // --generic-gpu
  bool noDeviceBinary = false; // --no-device-binary (lib, opencl)
  std::vector<std::string> shapes;
  std::string name;        // --name (lib)
  std::string tuningCache; // --tuning-cache (lib)
  int tuneThreads = 1;     // --tune-threads (lib)
};

/// --emit=lib: lib<name>.so and <name>.h in the folder -o names.
int emitLib(const CompileOptions &o, const Graph &g, const driver::Target &target,
            const GpuTarget *gpu) {
  ArtifactOptions a(target.cpu);
  a.dir = o.output;
  a.name = o.name;
  if (a.name.empty()) {
    // model.onnx in a folder of its own (the shared models' layout) is named after the folder.
    std::filesystem::path p = std::filesystem::absolute(o.model).lexically_normal();
    a.name = p.stem() == "model" && p.has_parent_path() ? p.parent_path().filename().string()
                                                        : p.stem().string();
    for (char &c : a.name)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
  }
  a.gpu = gpu;
  a.openclBinary = !o.noDeviceBinary;
  a.openclPlatform = target.platform;
  a.openclDevice = target.device;
  a.source = "model " + o.model;
  // Tuned configs are measured on this CPU for a thread count: the cpu target only.
  std::shared_ptr<tuning::ConfigSource> tuned;
  if (!gpu) {
    std::string path = o.tuningCache.empty() ? TuningCache::defaultPath() : o.tuningCache;
    if (!o.tuningCache.empty() || std::filesystem::exists(path)) {
      // As for `nnc run`: an unusable cache is skipped, and said so.
      Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path);
      if (cache)
        tuned = std::make_shared<CachedConfigs>(std::shared_ptr<TuningCache>(std::move(*cache)),
                                                cpuDeviceFingerprint(o.tuneThreads, target.cpu));
      else
        warnOnce(fmt::format("{}; compiling without tuned configs", cache.error().message()));
    }
  }
  a.tuning = tuned.get();
  Expected<ArtifactInfo> info = writeArtifact(g, a);
  if (!info)
    return fail(info.takeError());
  fmt::print("nnc: wrote {} and {} ({})\n", info->library, info->header, info->notes);
  return 0;
}

int compileCommand(const CompileOptions &opts) {
  CompileOptions o = opts;
  // --generic-gpu: OpenCL C for GpuTarget::generic() (and a GPU's graph passes), whatever
  // device is here.
  const GpuTarget generic = GpuTarget::generic();
  Expected<driver::Target> target =
      parseTargetOption(o.target, o.cpu, /*runsHere=*/false, o.genericGpu ? &generic : nullptr);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, o.precision))
    return fail(e);
  bool opencl = *target == driver::Target::OpenCL;
  if (o.emit.empty())
    o.emit = opencl ? "cl" : "obj";
  static const char *kinds[] = {"nir", "kernels", "ll", "asm", "obj", "cl", "lib"};
  if (std::find(std::begin(kinds), std::end(kinds), o.emit) == std::end(kinds))
    return fail(
        fmt::format("--emit must be nir, kernels, ll, asm, obj, cl or lib, not '{}'", o.emit));
  if (opencl != (o.emit == "cl") && o.emit != "nir" && o.emit != "kernels" && o.emit != "lib")
    return fail(fmt::format("--emit {} does not go with --target {}", o.emit, o.target));
  // An artifact holds no loops (its format has none yet), nor do the kernel listings, the
  // LLVM IR, the object and the OpenCL C (a scan's body runs from the runtime's launch list):
  // a recurrent model's time loop is unrolled into them. Only the text IR keeps it.
  Expected<std::unique_ptr<Graph>> g =
      loadStatic(o.model, o.shapes, *target, o.emit != "nir" ? LoopForm::Unroll : LoopForm::Keep);
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
  // OpenCL C is written for the target's device description (parseTargetOption: the device
  // here, else GpuTarget::generic()).
  const GpuTarget *gpu = opencl ? &*target->gpu : nullptr;
  if (o.emit == "lib")
    return emitLib(o, **g, *target, gpu);
  Expected<std::vector<kir::Kernel>> kernels = lowerGraph(**g, *target);
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
    cmd_ = app.add_subcommand("compile", "Write a model's IR, kernels, LLVM IR, assembly, "
                                         "object, OpenCL C or a library to deploy");
    cmd_->add_option("model", o_.model, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("-o,--output", o_.output, "Output file (--emit=lib: folder)")->required();
    cmd_->add_option("--emit", o_.emit,
                     "nir, kernels, ll, asm, obj (default for cpu), cl (OpenCL C, checked "
                     "with libclang; default for opencl) or lib (lib<name>.so + <name>.h for "
                     "libnnc_runtime)");
    cmd_->add_option("--name", o_.name,
                     "lib: the artifact's name (default: the model file's, or its folder's for "
                     "model.onnx)");
    cmd_->add_option("--tuning-cache", o_.tuningCache,
                     "lib: tuning cache to take tuned configs from (default: nnc's, if present)");
    cmd_->add_option("--tune-threads", o_.tuneThreads,
                     "lib: the thread count whose tuned configs to use (default 1)");
    cmd_->add_option("--target", o_.target, "cpu (default) or opencl");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--precision", o_.precision, kPrecisionOptionHelp);
    cmd_->add_option("--shape", o_.shapes, "NAME=D0xD1x... for a symbolic input");
    cmd_->add_flag("--no-device-binary", o_.noDeviceBinary,
                   "With --emit=lib --target opencl: carry the OpenCL C source alone, not also "
                   "the program's binary for this machine's device");
    cmd_->add_flag("--generic-gpu", o_.genericGpu,
                   "With --target opencl: write kernels for OpenCL 1.2's generic GPU (32K local "
                   "memory, work-groups of 256), after a GPU's graph passes, instead of for the "
                   "device found here");
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

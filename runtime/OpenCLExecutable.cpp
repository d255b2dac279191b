// OpenCL executables: the launch plan (LaunchPlan.h) emitted as one OpenCL C program and run
// on one device by the runtime core's OpenCLLaunchList.
//
// Algorithm (compile):
//  0. The device is the one the target chose (OpenCLOptions::gpu): the next steps generate
//     code for its limits, and the host side for OpenCLOptions::cpu.
//  1. buildLaunchPlan(): kernels, slots, the buffer plan.
//  2. emitOpenCL(): one program and how each of its kernels is launched.
//  3. OpenCLLaunchList::create(): the program built for the device (or its cached binary),
//     the weights uploaded, every kernel argument set.
#include "nnc/runtime/OpenCL.h"

#include <chrono>

#include "LaunchPlan.h"
#include "OpenCLLaunchList.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {

namespace {

class ClExecutable : public OpenCLExecutable {
public:
  Error build(const Graph &g, const OpenCLOptions &opts);
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override {
    return launches_->run(inputs);
  }

  const BufferPlan &plan() const override { return p_.plan; }
  const std::vector<kir::Kernel> &kernels() const override { return p_.kernels; }
  double compileMs() const override { return compileMs_; }
  bool fromCache() const override { return launches_->fromCache(); }
  const TuningUse &tuningUse() const override { return p_.tuningUse; }
  const OpenCLDeviceInfo &device() const override { return launches_->device(); }
  const std::string &source() const override { return source_; }
  TransferStats loadTransfers() const override { return launches_->loadTransfers(); }
  TransferStats runTransfers() const override { return launches_->runTransfers(); }
  int64_t runs() const override { return launches_->runs(); }
  std::vector<KernelTime> kernelTimes() const override { return launches_->kernelTimes(); }
  double transferDeviceMs() const override { return launches_->transferDeviceMs(); }
  void resetRunCounters() override { launches_->resetRunCounters(); }
  Error keepResident(const std::vector<ResidentInput> &resident,
                     const std::vector<Tensor> &initial) override {
    return launches_->keepResident(resident, initial);
  }
  Expected<Tensor> readResident(size_t k) const override { return launches_->readResident(k); }

private:
  LaunchPlan p_;
  std::string source_;
  std::unique_ptr<OpenCLLaunchList> launches_;
  double compileMs_ = 0;
};

Error ClExecutable::build(const Graph &g, const OpenCLOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  const GpuTarget &gpu = opts.gpu;
  NNC_USER_CHECK(gpu.platform >= 0 && gpu.device >= 0,
                 "OpenCL executable: the target names no OpenCL device ({} describes code "
                 "written out without one)",
                 gpu.str());
  NNC_ASSIGN_OR_RETURN(p_, buildLaunchPlan(g, "OpenCL", opts.tuning.get(), opts.cpu, &gpu));
  NNC_ASSIGN_OR_RETURN(OpenCLProgram prog, emitOpenCL(p_.kernels, gpu));
  source_ = std::move(prog.source);
  OpenCLLaunchOptions lo;
  lo.platform = gpu.platform;
  lo.device = gpu.device;
  lo.cacheDir = opts.cacheDir;
  lo.profile = opts.profile;
  lo.optimize = opts.optimize;
  NNC_ASSIGN_OR_RETURN(launches_,
                       OpenCLLaunchList::create(p_, source_, std::move(prog.launches), lo));
  compileMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Error::success();
}

} // namespace

std::string OpenCLOptions::defaultCacheDir() {
  std::string d = CodegenOptions::defaultObjectCacheDir();
  return d.empty() ? d : d + "/opencl";
}

Expected<std::unique_ptr<OpenCLExecutable>> OpenCLExecutable::compile(const Graph &g,
                                                                      const OpenCLOptions &opts) {
  auto exe = std::make_unique<ClExecutable>();
  if (Error e = exe->build(g, opts))
    return e;
  return std::unique_ptr<OpenCLExecutable>(std::move(exe));
}

} // namespace nnc

// `nnc devices`: the CPU and every OpenCL platform and device.
#include "Command.h"
#include "CommandUtil.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/runtime/OpenCL.h"
#include "nnc/runtime/TuningCache.h"

#include <iostream>

namespace nnc::tools {

namespace {

int devicesCommand() {
  Expected<CpuTarget> chosen = CpuTarget::fromEnvironment();
  std::cout << fmt::format("cpu: {}, {} threads; code for {}\n", CpuTarget::hostModelName(),
                           effectiveThreads(0), CpuTarget::host().str());
  if (!chosen)
    std::cout << fmt::format("  {} (so every command fails until it is fixed)\n",
                             chosen.error().message());
  else if (!(*chosen == CpuTarget::host()))
    std::cout << fmt::format("  NNC_CPU: code for {}\n", chosen->str());
  std::cout << "  (decided from the CPU's features, never its model name; --cpu "
               "x86-64-v3|x86-64-v4 or NNC_CPU chooses a lower level)\n";
  Expected<std::vector<OpenCLDeviceInfo>> devs = listOpenCLDevices();
  if (!devs) {
    std::cout << "opencl: none (" << devs.error().message() << ")\n";
    return 0;
  }
  for (const OpenCLDeviceInfo &d : *devs)
    std::cout << fmt::format(
        "opencl:{}.{}: {} [{}] on {} ({}): {} compute units, {} MHz, {} MiB "
        "global, {} KiB local, work-group <= {} ({}x{}x{}), float "
        "vectors {}, fp64 {}, fp16 {}; {}, driver {}\n",
        d.platform, d.device, d.deviceName, d.type, d.platformName, d.vendor, d.computeUnits,
        d.maxClockMHz, d.globalMemBytes >> 20, d.localMemBytes >> 10, d.maxWorkGroupSize,
        d.maxWorkItemSizes[0], d.maxWorkItemSizes[1], d.maxWorkItemSizes[2], d.preferredFloatVector,
        d.fp64 ? "yes" : "no", d.fp16 ? "yes" : "no", d.version, d.driverVersion);
  Expected<OpenCLDeviceInfo> best = pickOpenCLDevice();
  if (best)
    std::cout << fmt::format("--target auto: {}\n",
                             best->type == "gpu"
                                 ? fmt::format("opencl:{}.{}", best->platform, best->device)
                                 : std::string("cpu (no OpenCL GPU)"));
  return 0;
}

class DevicesCommand : public Command {
public:
  explicit DevicesCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("devices", "List the CPU and every OpenCL device");
  }
  int run() override { return devicesCommand(); }
};

} // namespace

std::unique_ptr<Command> addDevicesCommand(CLI::App &app) {
  return std::make_unique<DevicesCommand>(app);
}

} // namespace nnc::tools

// `nnc check MODEL`: every unsupported operator and attribute of a model, all at once.
#include "Command.h"
#include "CommandUtil.h"
#include "nnc/runtime/OpenCL.h"

#include <iostream>

namespace nnc::tools {

namespace {

int checkCommand(const std::string &model, const std::string &targetName) {
  Expected<driver::Target> target = parseTargetOption(targetName, "");
  if (!target)
    return fail(target.takeError());
  if (*target == driver::Target::OpenCL) {
    // The device parseTargetOption chose, as `nnc devices` names it.
    Expected<OpenCLDeviceInfo> d = pickOpenCLDevice(target->gpu->platform, target->gpu->device);
    if (!d)
      return fail(d.takeError());
    std::cout << fmt::format("target opencl:{}.{}: {} ({})\n", d->platform, d->device,
                             d->deviceName, d->platformName);
  }
  if (!isOnnx(model)) {
    Expected<std::unique_ptr<Graph>> g = driver::loadModel(model);
    if (!g)
      return fail(g.takeError());
    std::cout << model << ": valid IR, " << (*g)->numNodes() << " nodes\n";
    return 0;
  }
  Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(model);
  if (!issues)
    return fail(issues.takeError());
  if (reportUnsupported(model, *issues))
    return 1;
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(model);
  if (!g)
    return fail(g.takeError());
  std::cout << model << ": every operator is supported (" << (*g)->numNodes() << " IR nodes)\n";
  return 0;
}

class CheckCommand : public Command {
public:
  explicit CheckCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("check", "List every unsupported operator and attribute of a model");
    cmd_->add_option("model", model_, "Model file")->required();
    cmd_->add_option("--target", target_,
                     "cpu (default), interp, opencl[:P.D] (also checks the device) or auto");
  }
  int run() override { return checkCommand(model_, target_); }

private:
  std::string model_, target_ = "cpu";
};

} // namespace

std::unique_ptr<Command> addCheckCommand(CLI::App &app) {
  return std::make_unique<CheckCommand>(app);
}

} // namespace nnc::tools

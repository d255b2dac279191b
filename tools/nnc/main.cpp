// nnc: the compiler's command-line interface. Each subcommand lives in its own file
// (RunCommand.cpp, BenchCommand.cpp, ...; see Command.h).
#include <iostream>

#include <CLI/CLI.hpp>

#include "Command.h"

int main(int argc, char **argv) {
  CLI::App app{"nnc: a tensor compiler for neural networks.\n"
               "Commands: run, bench, tune, cache, check, inspect, compile, train, devices, help. `nnc "
               "COMMAND --help` for details."};
  app.set_version_flag("--version", std::string("nnc ") + NNC_VERSION);
  app.require_subcommand(0, 1);

  using namespace nnc::tools;
  std::unique_ptr<Command> commands[] = {
      addRunCommand(app),   addBenchCommand(app),   addTuneCommand(app),    addCacheCommand(app),
      addCheckCommand(app), addDevicesCommand(app), addInspectCommand(app), addCompileCommand(app),
      addTrainCommand(app),
  };
  CLI::App *helpCmd = app.add_subcommand("help", "Show help");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  for (const std::unique_ptr<Command> &c : commands)
    if (c->parsed())
      return c->run();
  if (helpCmd->parsed() || argc == 1) {
    std::cout << app.help();
    return argc == 1 ? 1 : 0;
  }
  return 0;
}

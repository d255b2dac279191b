// One file per `nnc` subcommand: each registers its options on the CLI app and runs when parsed.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

namespace nnc::tools {

/// A subcommand of `nnc`. Its options are members, bound when it is added to the app.
class Command {
public:
  virtual ~Command() = default;
  /// True when this subcommand was given on the command line.
  bool parsed() const { return cmd_->parsed(); }
  /// Runs it and returns the process exit code.
  virtual int run() = 0;

protected:
  CLI::App *cmd_ = nullptr;
};

// Each adds its subcommand to `app` (in this order in `nnc --help`).
std::unique_ptr<Command> addRunCommand(CLI::App &app);     // RunCommand.cpp
std::unique_ptr<Command> addBenchCommand(CLI::App &app);   // BenchCommand.cpp
std::unique_ptr<Command> addTuneCommand(CLI::App &app);    // TuneCommand.cpp
std::unique_ptr<Command> addCacheCommand(CLI::App &app);   // CacheCommand.cpp
std::unique_ptr<Command> addCheckCommand(CLI::App &app);   // CheckCommand.cpp
std::unique_ptr<Command> addDevicesCommand(CLI::App &app); // DevicesCommand.cpp
std::unique_ptr<Command> addInspectCommand(CLI::App &app); // InspectCommand.cpp
std::unique_ptr<Command> addCompileCommand(CLI::App &app); // CompileCommand.cpp
std::unique_ptr<Command> addTrainCommand(CLI::App &app);   // TrainCommand.cpp

} // namespace nnc::tools

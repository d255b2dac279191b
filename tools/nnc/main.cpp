// nnc: the compiler's command-line interface. Each subcommand lives in its own file
// (RunCommand.cpp, BenchCommand.cpp, ...; see Command.h).
#include <iostream>

#include <CLI/CLI.hpp>

#include "Command.h"

namespace {

/// The top-level help: usage, options and every command with its one-line description.
/// App::help() cannot give it once a subcommand (`help` itself) has been parsed: it shows that
/// subcommand's help instead, so the formatter is asked for the app's directly.
std::string commandList(const CLI::App &app) {
  return app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
}

/// `nnc help COMMAND`: that command's options, as `nnc COMMAND --help` shows them.
int commandHelp(const CLI::App &app, const std::string &name) {
  for (const CLI::App *c : app.get_subcommands([](const CLI::App *) { return true; }))
    if (c->get_name() == name) {
      std::cout << c->get_formatter()->make_help(c, app.get_name() + " " + name,
                                                 CLI::AppFormatMode::Normal);
      return 0;
    }
  std::string names;
  for (const CLI::App *c : app.get_subcommands([](const CLI::App *) { return true; }))
    names += (names.empty() ? "" : ", ") + c->get_name();
  std::cerr << "nnc: error: help: unknown command '" << name << "' (the commands: " << names
            << ")\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"nnc: a tensor compiler for neural networks (ONNX models in, CPU or OpenCL "
               "kernels out).\n`nnc help COMMAND` or `nnc COMMAND --help` shows a command's "
               "options.",
               "nnc"};
  app.set_version_flag("--version", std::string("nnc ") + NNC_VERSION);
  app.require_subcommand(0, 1);

  using namespace nnc::tools;
  std::unique_ptr<Command> commands[] = {
      addRunCommand(app),   addBenchCommand(app),   addTuneCommand(app),    addCacheCommand(app),
      addCheckCommand(app), addDevicesCommand(app), addInspectCommand(app), addCompileCommand(app),
      addTrainCommand(app),
  };
  CLI::App *helpCmd =
      app.add_subcommand("help", "List the commands, or show one command's options");
  std::string helpTopic;
  helpCmd->add_option("command", helpTopic, "The command whose options to show");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  for (const std::unique_ptr<Command> &c : commands)
    if (c->parsed())
      return c->run();
  if (helpCmd->parsed() && !helpTopic.empty())
    return commandHelp(app, helpTopic);
  // `nnc` alone is a usage error (exit 1), `nnc help` a request (exit 0): both list the
  // commands.
  if (helpCmd->parsed() || argc == 1) {
    std::cout << commandList(app);
    return argc == 1 ? 1 : 0;
  }
  return 0;
}

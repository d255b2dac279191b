// nnc: the compiler's command-line interface (run, check, inspect).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "Inspect.h"
#include "driver/Driver.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Printer.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

namespace fs = std::filesystem;
using namespace nnc;

namespace {

int fail(const std::string &msg) {
  std::cerr << "nnc: error: " << msg << "\n";
  return 1;
}

int fail(const Error &e) { return fail(e.message()); }

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Prints every unsupported operator and attribute; returns true when there were any.
bool reportUnsupported(const std::string &model, const std::vector<OnnxIssue> &issues) {
  if (issues.empty())
    return false;
  std::cerr << "nnc: error: " << model << ": " << issues.size()
            << " unsupported operator(s) or attribute(s):\n";
  for (const OnnxIssue &i : issues)
    std::cerr << "  node '" << i.node << "' (" << i.opType << "): " << i.message << "\n";
  return true;
}

bool isOnnx(const std::string &path) { return fs::path(path).extension() == ".onnx"; }

// ---- run -------------------------------------------------------------------------------------

struct RunOptions {
  std::string model;
  std::string inputsDir;
  std::string outputDir;
  std::string expectedDir;
  std::vector<std::string> inputs; // NAME=FILE
  std::string target = "interp";
  std::string outputFormat = "pb";
  bool optimize = true;
  bool quiet = false;
};

std::string previewTensor(const Tensor &t) {
  std::string s;
  int64_t n = std::min<int64_t>(t.numElements(), 8);
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      s += ", ";
    if (isFloat(t.dtype()))
      s += fmt::format("{:.6g}", t.elementAsDouble(i));
    else if (isStorageOnly(t.dtype()))
      s += fmt::format("0x{:02x}", static_cast<const uint8_t *>(t.rawData())[i]);
    else
      s += std::to_string(t.elementAsInt(i));
  }
  if (t.numElements() > n)
    s += ", ...";
  return "[" + s + "]";
}

int runCommand(const RunOptions &o) {
  Expected<driver::Target> target = driver::parseTarget(o.target);
  if (!target)
    return fail(target.takeError());
  if (o.outputFormat != "pb" && o.outputFormat != "npy")
    return fail(fmt::format("--output-format must be pb or npy, not '{}'", o.outputFormat));
  if (isOnnx(o.model)) {
    Expected<std::vector<OnnxIssue>> issues = checkOnnxFile(o.model);
    if (!issues)
      return fail(issues.takeError());
    if (reportUnsupported(o.model, *issues))
      return 1;
  }
  Expected<std::vector<std::string>> names = driver::modelInputNames(o.model);
  if (!names)
    return fail(names.takeError());

  // Inputs: DIR/input_K.pb by position, then NAME=FILE overrides.
  std::map<std::string, Tensor> byName;
  if (!o.inputsDir.empty()) {
    if (!fs::is_directory(o.inputsDir))
      return fail(fmt::format("--inputs-dir {}: no such directory", o.inputsDir));
    for (size_t k = 0; k < names->size(); ++k) {
      fs::path p = fs::path(o.inputsDir) / fmt::format("input_{}.pb", k);
      if (!fs::exists(p))
        continue;
      Expected<Tensor> t = driver::readTensorFile(p.string());
      if (!t)
        return fail(t.takeError());
      byName[(*names)[k]] = *t;
    }
  }
  for (const std::string &spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return fail(fmt::format("--input '{}': expected NAME=FILE", spec));
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    if (std::find(names->begin(), names->end(), name) == names->end())
      return fail(fmt::format("--input '{}': the model has no input named '{}'", spec, name));
    Expected<Tensor> t = driver::readTensorFile(file);
    if (!t)
      return fail(t.takeError());
    byName[name] = *t;
  }
  std::vector<Tensor> inputs;
  for (const std::string &n : *names) {
    auto it = byName.find(n);
    if (it == byName.end())
      return fail(fmt::format("no value for model input '{}' (give --inputs-dir or --input "
                              "{}=FILE)",
                              n, n));
    inputs.push_back(it->second);
  }

  auto t0 = Clock::now();
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(o.model, byName);
  if (!g)
    return fail(g.takeError());
  if (o.optimize)
    if (Error e = driver::optimize(**g))
      return fail(e);
  double compileMs = msSince(t0);
  auto t1 = Clock::now();
  Expected<std::vector<Tensor>> outs = driver::execute(**g, inputs, *target);
  if (!outs)
    return fail(outs.takeError());
  double runMs = msSince(t1);

  if (!o.outputDir.empty()) {
    std::error_code ec;
    fs::create_directories(o.outputDir, ec);
    if (ec)
      return fail(fmt::format("--output-dir {}: {}", o.outputDir, ec.message()));
    for (size_t k = 0; k < outs->size(); ++k) {
      fs::path p = fs::path(o.outputDir) / fmt::format("output_{}.{}", k, o.outputFormat);
      if (Error e = driver::writeTensorFile(p.string(), (*outs)[k], (*g)->outputs()[k]->name()))
        return fail(e);
    }
  }
  if (!o.quiet) {
    for (size_t k = 0; k < outs->size(); ++k) {
      const Tensor &t = (*outs)[k];
      std::cout << fmt::format("output {} '{}': {}{} {}\n", k, (*g)->outputs()[k]->name(),
                               dtypeName(t.dtype()), extentsStr(t.extents()), previewTensor(t));
    }
    std::cout << fmt::format("target {}: compile {:.2f} ms, run {:.3f} ms\n",
                             driver::targetName(*target), compileMs, runMs);
  }
  if (!o.expectedDir.empty()) {
    int bad = 0;
    for (size_t k = 0; k < outs->size(); ++k) {
      fs::path p = fs::path(o.expectedDir) / fmt::format("output_{}.pb", k);
      Expected<Tensor> want = driver::readTensorFile(p.string());
      if (!want)
        return fail(want.takeError());
      std::string diff = driver::compareTensors(*want, (*outs)[k]);
      if (!diff.empty()) {
        std::cerr << fmt::format("nnc: output {} differs from {}: {}\n", k, p.string(), diff);
        ++bad;
      }
    }
    if (bad)
      return 1;
    std::cout << fmt::format("all {} outputs match {} (rtol 1e-3, atol 1e-7)\n", outs->size(),
                             o.expectedDir);
  }
  return 0;
}

// ---- check -----------------------------------------------------------------------------------

int checkCommand(const std::string &model) {
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
  std::cout << model << ": every operator is supported (" << (*g)->numNodes()
            << " IR nodes)\n";
  return 0;
}

// ---- inspect ---------------------------------------------------------------------------------

struct InspectOptions {
  std::string model;
  std::string after;
  std::string format = "text";
  std::string passes;
  bool printAfterAll = false;
  bool stats = false;
};

int inspectCommand(const InspectOptions &o) {
  if (o.format != "text" && o.format != "dot" && o.format != "json")
    return fail(fmt::format("--format must be text, dot or json, not '{}'", o.format));
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
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
    return evaluateNode(n, ops);
  };
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

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"nnc: a tensor compiler for neural networks.\n"
               "Commands: run, check, inspect, help. `nnc COMMAND --help` for details."};
  app.set_version_flag("--version", std::string("nnc ") + NNC_VERSION);
  app.require_subcommand(0, 1);

  RunOptions run;
  CLI::App *runCmd = app.add_subcommand("run", "Run a model on inputs and write its outputs");
  runCmd->add_option("model", run.model, "Model file (.onnx or .nir)")->required();
  runCmd->add_option("--inputs-dir", run.inputsDir, "Folder with input_K.pb (ONNX test layout)");
  runCmd->add_option("--input", run.inputs, "NAME=FILE (.pb or .npy); repeatable");
  runCmd->add_option("--output-dir", run.outputDir, "Write output_K.pb (or .npy) here");
  runCmd->add_option("--output-format", run.outputFormat, "pb or npy");
  runCmd->add_option("--expected-dir", run.expectedDir,
                     "Compare outputs with output_K.pb here (exit 1 when they differ)");
  runCmd->add_option("--target", run.target, "interp");
  runCmd->add_flag("!--no-optimize", run.optimize, "Skip the graph optimization pipeline");
  runCmd->add_flag("-q,--quiet", run.quiet, "Print nothing on success");

  std::string checkModel;
  CLI::App *checkCmd =
      app.add_subcommand("check", "List every unsupported operator and attribute of a model");
  checkCmd->add_option("model", checkModel, "Model file")->required();

  InspectOptions insp;
  CLI::App *inspCmd = app.add_subcommand("inspect", "Print a model's IR after the passes");
  inspCmd->add_option("model", insp.model, "Model file (.onnx or .nir)")->required();
  inspCmd->add_option("--after", insp.after,
                      "Stop after this pass of the pipeline (`import`: before any pass)");
  inspCmd->add_option("--format", insp.format, "text, dot or json");
  inspCmd->add_option("--passes", insp.passes, "Pipeline to run (default: the standard one)");
  inspCmd->add_flag("--print-ir-after-all", insp.printAfterAll, "Print the IR after each pass");
  inspCmd->add_flag("--stats", insp.stats, "Per-pass statistics on stderr");

  CLI::App *helpCmd = app.add_subcommand("help", "Show help");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  if (runCmd->parsed())
    return runCommand(run);
  if (checkCmd->parsed())
    return checkCommand(checkModel);
  if (inspCmd->parsed())
    return inspectCommand(insp);
  if (helpCmd->parsed() || argc == 1) {
    std::cout << app.help();
    return argc == 1 ? 1 : 0;
  }
  return 0;
}

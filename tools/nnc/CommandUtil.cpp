// What the `nnc` subcommands share (CommandUtil.h).
#include "CommandUtil.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Loop.h"
#include "nnc/ir/Quantize.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/OpenCLDevice.h"

namespace fs = std::filesystem;

namespace nnc::tools {

int fail(const std::string &msg) {
  std::cerr << "nnc: error: " << msg << "\n";
  return 1;
}

int fail(const Error &e) {
  return fail(e.message());
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool reportUnsupported(const std::string &model, const std::vector<OnnxIssue> &issues) {
  if (issues.empty())
    return false;
  std::cerr << "nnc: error: " << model << ": " << issues.size()
            << " unsupported operator(s) or attribute(s):\n";
  for (const OnnxIssue &i : issues)
    std::cerr << "  " << i.place() << " (" << i.opType << "): " << i.message << "\n";
  return true;
}

bool isOnnx(const std::string &path) {
  return fs::path(path).extension() == ".onnx";
}

std::string tunedKernelsLine(const TuningUse &u) {
  std::string line = fmt::format("tuned kernels: {}/{}", u.tuned, u.tunable);
  if (!u.missing.empty()) {
    line += " (missing: ";
    for (size_t i = 0; i < u.missing.size() && i < 3; ++i)
      line += (i ? "; " : "") + u.missing[i];
    if (u.missing.size() > 3)
      line += fmt::format("; {} more", u.missing.size() - 3);
    line += ")";
  }
  return line;
}

int reportTuning(const Executable &exe, bool requireTuned) {
  const TuningUse &u = exe.tuningUse();
  if (u.tunable == 0)
    return 0;
  std::cerr << "nnc: " << tools::tunedKernelsLine(u) << "\n";
  if (requireTuned && u.tuned < u.tunable)
    return fail(fmt::format("--require-tuned: {} of {} tunable kernels have no tuned config "
                            "for this device (run `nnc tune`)",
                            u.tunable - u.tuned, u.tunable));
  return 0;
}

int effectiveThreads(int requested) {
  if (requested > 0)
    return requested;
  return CpuTarget::hostCores();
}

Expected<std::map<std::string, OnnxValue>> readInputValues(const std::vector<std::string> &names,
                                                           const std::vector<ValueForm> &forms,
                                                           const std::string &inputsDir,
                                                           const std::vector<std::string> &specs) {
  std::map<std::string, OnnxValue> byName;
  auto kindOf = [&](size_t k) {
    return k < forms.size() ? forms[k].kind : ValueForm::Kind::Tensor;
  };
  if (!inputsDir.empty()) {
    if (!fs::is_directory(inputsDir))
      return makeError("--inputs-dir {}: no such directory", inputsDir);
    for (size_t k = 0; k < names.size(); ++k) {
      fs::path p = fs::path(inputsDir) / fmt::format("input_{}.pb", k);
      if (!fs::exists(p))
        continue;
      NNC_ASSIGN_OR_RETURN(byName[names[k]], driver::readValueFile(p.string(), kindOf(k)));
    }
  }
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return makeError("--input '{}': expected NAME=FILE", spec);
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      return makeError("--input '{}': the model has no input named '{}'", spec, name);
    NNC_ASSIGN_OR_RETURN(byName[name],
                         driver::readValueFile(file, kindOf(static_cast<size_t>(it - names.begin()))));
  }
  return byName;
}

Expected<std::map<std::string, Tensor>> readInputs(const std::vector<std::string> &names,
                                                   const std::string &inputsDir,
                                                   const std::vector<std::string> &specs) {
  // Every input a tensor: readInputValues with no forms reads each as one.
  NNC_ASSIGN_OR_RETURN(auto values, readInputValues(names, {}, inputsDir, specs));
  std::map<std::string, Tensor> byName;
  for (auto &[name, v] : values)
    byName[name] = std::move(v.tensors.front());
  return byName;
}

Expected<std::map<std::string, Extents>> parseShapeSpecs(const std::vector<std::string> &specs) {
  std::map<std::string, Extents> shapes;
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return makeError("--shape '{}': expected NAME=D0xD1x... (e.g. x=1x3x224x224)", spec);
    Extents e;
    std::string dims = spec.substr(eq + 1);
    size_t pos = 0;
    while (pos < dims.size()) {
      size_t x = dims.find('x', pos);
      std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char *end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        return makeError("--shape '{}': '{}' is not a dimension", spec, d);
      e.push_back(v);
      if (x == std::string::npos)
        break;
      pos = x + 1;
    }
    shapes[spec.substr(0, eq)] = e;
  }
  return shapes;
}

Extents defaultExtents(const Value &v) {
  Extents e;
  for (const Dim &d : v.shape())
    e.push_back(d.isStatic() ? d.value() : 1);
  if (!isStatic(v.shape()))
    std::cerr << fmt::format("nnc: note: input '{}' is {}; using {} (set it with --shape "
                             "{}=D0xD1x...)\n",
                             v.name(), v.type().str(), extentsStr(e), v.name());
  return e;
}

namespace {

/// The concrete extents of each graph input: from `given`, else its declared type.
Expected<std::vector<Extents>> inputExtents(const Graph &g,
                                            const std::map<std::string, Extents> &given) {
  std::vector<Extents> out;
  for (const Value *v : g.inputs()) {
    auto it = given.find(v->name());
    if (it != given.end()) {
      out.push_back(it->second);
      continue;
    }
    out.push_back(defaultExtents(*v));
  }
  for (const auto &[name, e] : given) {
    bool found = false;
    for (const Value *v : g.inputs())
      found |= v->name() == name;
    if (!found)
      return makeError("--shape {}: the model has no input named '{}'", name, name);
  }
  return out;
}

} // namespace

Expected<std::unique_ptr<Graph>> loadStatic(const std::string &model,
                                            const std::vector<std::string> &shapeSpecs,
                                            const driver::Target &target, LoopForm loops) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, driver::loadModel(model));
  if (loops != LoopForm::Keep)
    NNC_TRY(unrollScans(*g, /*keepWhileLoops=*/loops == LoopForm::ListSteps));
  NNC_TRY(driver::optimize(*g, target));
  NNC_ASSIGN_OR_RETURN(auto given, parseShapeSpecs(shapeSpecs));
  NNC_ASSIGN_OR_RETURN(std::vector<Extents> shapes, inputExtents(*g, given));
  Expected<std::unique_ptr<Graph>> s = driver::specializeAhead(*g, shapes, target);
  if (!s)
    return makeError("{}; `nnc run` and `nnc bench` compile such a graph in stages as the data "
                     "arrives, but inspect and compile need every shape ahead of time",
                     s.error().message());
  return s;
}

std::string qdqNote(const LoweringUnit &u) {
  const Node &n = u.anchor ? *u.anchor : *u.node;
  if (n.kind() == OpKind::MatMulInteger || n.kind() == OpKind::ConvInteger)
    return "integer";
  const Attribute *why = n.attr(kQdqFallbackAttr);
  if (why && std::holds_alternative<std::string>(*why))
    return fmt::format("fp32 between Q/DQ: {}", std::get<std::string>(*why));
  return "";
}

namespace {

Error lowerInto(
    const Graph &g, const driver::Target &target, const std::string &prefix,
    const std::function<void(const tuning::TemplateChoice &, const std::string &)> &onTemplate,
    int threads, std::vector<kir::Kernel> &kernels) {
  tuning::LowerOptions lo(target.cpu);
  lo.threads = threads;
  if (target == driver::Target::OpenCL) {
    NNC_ASSERT(target.gpu, "an OpenCL target without its device description");
    lo.gpu = *target.gpu;
  }
  std::vector<Node *> nodes = g.nodes();
  NNC_ASSIGN_OR_RETURN(std::vector<LoweringUnit> units, loweringUnits(g));
  for (const LoweringUnit &u : units) {
    if (onTemplate)
      lo.onTemplate = [&](const tuning::TemplateChoice &c) { onTemplate(c, qdqNote(u)); };
    size_t i = std::find(nodes.begin(), nodes.end(), u.node) - nodes.begin();
    if (u.node->kind() == OpKind::Scan) { // the body's kernels, as each step runs them
      NNC_TRY(lowerInto(*u.node->body(), target, fmt::format("{}n{}_loop_", prefix, i), onTemplate,
                        threads, kernels));
      continue;
    }
    std::string op((u.anchor ? u.anchor : u.node)->opName());
    std::replace_if(
        op.begin(), op.end(), [](char c) { return !std::isalnum(c); }, '_');
    NNC_ASSIGN_OR_RETURN(
        std::vector<kir::Kernel> ks,
        lowerUnit(u, fmt::format("{}n{}_{}{}", prefix, i, op, u.members.empty() ? "" : "_fused"),
                  lo));
    for (kir::Kernel &k : ks)
      kernels.push_back(std::move(k));
  }
  return Error::success();
}

} // namespace

Expected<std::vector<kir::Kernel>> lowerGraph(
    const Graph &g, const driver::Target &target,
    const std::function<void(const tuning::TemplateChoice &, const std::string &)> &onTemplate,
    int threads) {
  std::vector<kir::Kernel> kernels;
  NNC_TRY(lowerInto(g, target, "", onTemplate, threads, kernels));
  return kernels;
}

Tensor randomTensor(DType dtype, const Extents &extents, std::mt19937 &rng) {
  Tensor t = Tensor::zeros(dtype, extents);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  if (dtype == DType::F32) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = u(rng);
  } else if (dtype == DType::F64) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<double>()[i] = u(rng);
  }
  return t;
}

Expected<CpuTarget> parseCpuOption(const std::string &name, bool runsHere) {
  if (name.empty())
    return CpuTarget::fromEnvironment(runsHere);
  Expected<CpuTarget> c = CpuTarget::parse(name, runsHere);
  if (!c)
    return c.error().withContext("--cpu");
  return c;
}

Expected<driver::Target> parseTargetOption(const std::string &name, const std::string &cpuName,
                                           bool runsHere, const GpuTarget *gpu) {
  NNC_ASSIGN_OR_RETURN(CpuTarget cpu, parseCpuOption(cpuName, runsHere));
  std::string note;
  NNC_ASSIGN_OR_RETURN(driver::Target t, driver::parseTarget(name, cpu, &note));
  if (!note.empty())
    std::cerr << note << "\n";
  if (t == driver::Target::OpenCL && gpu) {
    t.gpu = *gpu;
    return t;
  }
  if (Error e = driver::chooseDevice(t)) {
    if (runsHere)
      return e;
    // Code that is only written out is for the device it will run on when there is one here
    // (its limits bound the work-groups), else for GpuTarget::generic().
    t.gpu = GpuTarget::generic();
    fmt::print(stderr, "nnc: no OpenCL device ({}); writing OpenCL kernels for {}\n", e.message(),
               t.gpu->str());
  }
  return t;
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

} // namespace nnc::tools

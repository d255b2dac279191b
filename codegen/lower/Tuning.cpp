// Tuning spaces (found through the kernel-template registry, Templates.cpp) and the config
// choice lowering makes (include/nnc/codegen/Tuning.h).
#include "nnc/codegen/Tuning.h"

#include <algorithm>
#include <cstdlib>

#include "Templates.h"

namespace nnc::tuning {

std::string configStr(const Config &c) {
  std::string s;
  for (const auto &[k, v] : c)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::optional<Config> parseConfig(const std::string &s) {
  Config c;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos)
      end = s.size();
    std::string item = s.substr(pos, end - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return std::nullopt;
    char *stop = nullptr;
    std::string num = item.substr(eq + 1);
    long long v = std::strtoll(num.c_str(), &stop, 10);
    if (*stop != '\0')
      return std::nullopt;
    c[item.substr(0, eq)] = v;
    pos = end + 1;
  }
  return c;
}

bool namesEveryKnob(const Space &s, const Config &c) {
  if (c.size() != s.knobs.size())
    return false;
  for (const Knob &kn : s.knobs) {
    auto it = c.find(kn.name);
    if (it == c.end() ||
        std::find(kn.values.begin(), kn.values.end(), it->second) == kn.values.end())
      return false;
  }
  return true;
}

std::vector<const Space *> allSpaces() {
  std::vector<const Space *> spaces;
  for (CodeTarget target : {CodeTarget::Cpu, CodeTarget::OpenCL})
    for (const lower::KernelTemplate &t : lower::templateRegistry(target))
      if (t.space && std::find(spaces.begin(), spaces.end(), t.space) == spaces.end())
        spaces.push_back(t.space);
  return spaces;
}

const Space *findSpace(const std::string &kind) {
  for (const Space *s : allSpaces())
    if (s->kind == kind)
      return s;
  return nullptr;
}

Config chooseConfig(Problem p, const LowerOptions *opts) {
  p.cpu = cpuOf(opts);
  p.threads = opts && opts->threads > 0 ? opts->threads : CpuTarget::hostCores();
  p.loopBody = opts && opts->loopBody;
  if (opts && opts->gpu)
    p.gpu = opts->gpu;
  const Space *space = findSpace(p.kind);
  NNC_ASSERT(space, "no tuning space for kind {}", p.kind);
  std::optional<Config> c;
  if (opts && opts->configs)
    c = opts->configs->lookup(p);
  bool tuned = c && space->valid(*c, p);
  if (opts && opts->onTunable)
    opts->onTunable(p, tuned);
  Config chosen = tuned ? *c : space->defaults(p);
  if (opts && opts->onConfig)
    opts->onConfig(p, chosen);
  return chosen;
}

} // namespace nnc::tuning

// writeArtifact: a compiled model as lib<name>.so + <name>.h (see nnc/runtime/Artifact.h).
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <spawn.h>
#include <sys/wait.h>

#include "LaunchPlan.h"
#include "OpenCLLaunchList.h"
#include "artifact/ArtifactFormat.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/runtime/Artifact.h"

extern char **environ;

namespace nnc {

namespace {

Error writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  NNC_USER_CHECK(f.good(), "{}: cannot write", path);
  return Error::success();
}

/// Runs argv[0] (found on PATH) and waits; an error unless it exits 0.
Error runTool(const std::vector<std::string> &args) {
  std::vector<char *> argv;
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  NNC_USER_CHECK(rc == 0, "cannot run {}: {}", args[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  NNC_USER_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "`{}` failed (status {})",
                 fmt::join(args, " "), status);
  return Error::success();
}

void writeType(artifact::Writer &w, DType dtype, const Extents &e) {
  w.i32(dtypeToOnnx(dtype));
  w.u32(static_cast<uint32_t>(dtypeSize(dtype)));
  w.u32(static_cast<uint32_t>(e.size()));
  for (int64_t d : e)
    w.i64(d);
}

/// The blob of ArtifactFormat.h.
Expected<std::string> serialize(const Graph &g, const LaunchPlan &p, const ArtifactOptions &o,
                                const std::string &clSource,
                                const std::vector<OpenCLLaunch> &launches,
                                const std::vector<std::string> &binaries,
                                const std::string &notes) {
  // The artifact format has no loops yet (RunPlan::loops): a recurrent model's time loop
  // is unrolled before it gets here (unrollScans; nnc compile --emit=lib does).
  NNC_USER_CHECK(p.loops.empty(),
                 "the model has a loop (scan node, e.g. an RNN, GRU or LSTM); artifacts do not "
                 "hold loops yet: unroll it first (unrollScans)");
  artifact::Writer w;
  w.raw(artifact::kMagic, sizeof artifact::kMagic);
  w.u32(artifact::kVersion);
  w.u32(static_cast<uint32_t>(o.gpu ? artifact::TargetKind::OpenCL : artifact::TargetKind::Cpu));
  w.u32(static_cast<uint32_t>(o.cpu.level));
  w.str(o.cpu.levelName());
  w.str(notes);
  w.u32(static_cast<uint32_t>(p.inputTypes.size()));
  for (size_t i = 0; i < p.inputTypes.size(); ++i) {
    std::optional<Extents> e = staticExtents(p.inputTypes[i].shape);
    NNC_USER_CHECK(e, "input '{}' has a symbolic shape; give it with --shape NAME=D0xD1x...",
                   p.inputNames[i]);
    w.str(p.inputNames[i]);
    writeType(w, p.inputTypes[i].dtype, *e);
  }
  w.u32(static_cast<uint32_t>(p.outputs.size()));
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const OutputSpec &s = p.outputs[i];
    NNC_USER_CHECK(s.kind != OutputSpec::Dynamic,
                   "output '{}' has a data-dependent shape; an artifact holds static shapes only",
                   g.outputs()[i]->name());
    w.str(g.outputs()[i]->name());
    writeType(w, s.dtype, s.extents);
    w.u8(static_cast<uint8_t>(s.kind));
    w.i32(s.index);
  }
  // Weight offsets are patched once the data's place is known.
  std::vector<size_t> offsetAt;
  w.u32(static_cast<uint32_t>(p.weights.size()));
  for (const Tensor &t : p.weights) {
    w.i32(dtypeToOnnx(t.dtype()));
    w.u32(static_cast<uint32_t>(t.rank()));
    for (int64_t d = 0; d < t.rank(); ++d)
      w.i64(t.dim(d));
    offsetAt.push_back(w.size());
    w.u64(0);
    w.u64(t.byteSize());
  }
  w.u32(static_cast<uint32_t>(p.kernels.size()));
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    w.str(p.kernels[k].name);
    w.u64(p.firstArg[k]);
    OpenCLLaunch l = k < launches.size() ? launches[k] : OpenCLLaunch{};
    w.u32(static_cast<uint32_t>(l.dims));
    for (int64_t v : l.globalSize)
      w.i64(v);
    for (int64_t v : l.localSize)
      w.i64(v);
  }
  w.u64(p.args.size());
  for (const Slot &s : p.args) {
    // Only an arena slot has an offset here (a part of the status area); the format keeps
    // it in the index. Inputs, outputs and weights move only in loops, which are refused.
    NNC_ASSERT(s.kind == SlotKind::Arena || s.offset == 0, "a kernel parameter's offset");
    w.u8(static_cast<uint8_t>(s.kind));
    w.i64(s.kind == SlotKind::Arena ? s.index + s.offset : s.index);
  }
  w.i64(p.arenaBytes);
  w.str(clSource);
  w.u32(static_cast<uint32_t>(binaries.size()));
  for (const std::string &b : binaries)
    w.str(b);
  w.i64(p.statusOffset);
  w.i64(p.statusBytes);
  w.u32(static_cast<uint32_t>(p.checks.size()));
  for (const RunCheck &c : p.checks) {
    w.i64(c.offset);
    w.str(c.before);
    w.str(c.after);
  }
  for (size_t i = 0; i < p.weights.size(); ++i) {
    w.align(artifact::kAlignment);
    w.patchU64(offsetAt[i], w.size());
    w.raw(p.weights[i].rawData(), p.weights[i].byteSize());
  }
  return w.bytes();
}

std::string macroName(const std::string &s) {
  std::string m;
  for (char c : s)
    m += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return m;
}

std::string cString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\{:03o}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + "\"";
}

std::string header(const Graph &g, const LaunchPlan &p, const ArtifactOptions &o,
                   const std::string &notes) {
  std::string m = "NNC_" + macroName(o.name);
  std::string h = fmt::format(
      "/* {}.h: the model in lib{}.so, written by `nnc compile --emit=lib`.\n * {}\n * Run it "
      "with libnnc_runtime (nnc_runtime.h); these are the only shapes it runs. */\n"
      "#ifndef {}_H\n#define {}_H\n\n#include <nnc/runtime/nnc_runtime.h>\n\n"
      "#define {}_LIBRARY \"lib{}.so\"\n#define {}_NUM_INPUTS {}\n#define {}_NUM_OUTPUTS {}\n",
      o.name, o.name, notes, m, m, m, o.name, m, p.inputTypes.size(), m, p.outputs.size());
  auto describe = [&](const std::string &kind, size_t i, const std::string &name, DType dtype,
                      const Extents &e) {
    std::string pre = fmt::format("{}_{}_{}", m, kind, i);
    int64_t n = 1;
    for (int64_t d : e)
      n *= d;
    h += fmt::format("\n/* {} {}: {} {} */\n", kind == "INPUT" ? "input" : "output", i, name,
                     dtypeName(dtype));
    h += fmt::format("#define {}_NAME {}\n#define {}_DTYPE {}\n#define {}_RANK {}\n", pre,
                     cString(name), pre, dtypeToOnnx(dtype), pre, e.size());
    h += fmt::format("#define {}_SHAPE {{{}}}\n#define {}_ELEMENTS {}\n#define {}_BYTES {}\n", pre,
                     e.empty() ? "1" : fmt::format("{}", fmt::join(e, ", ")), pre, n, pre,
                     n * int64_t(dtypeSize(dtype)));
  };
  for (size_t i = 0; i < p.inputTypes.size(); ++i)
    describe("INPUT", i, p.inputNames[i], p.inputTypes[i].dtype,
             staticExtents(p.inputTypes[i].shape).value_or(Extents{}));
  for (size_t i = 0; i < p.outputs.size(); ++i)
    describe("OUTPUT", i, g.outputs()[i]->name(), p.outputs[i].dtype, p.outputs[i].extents);
  h += fmt::format("\n#endif /* {}_H */\n", m);
  return h;
}

} // namespace

Expected<ArtifactInfo> writeArtifact(const Graph &g, const ArtifactOptions &o) {
  NNC_USER_CHECK(!o.name.empty() &&
                     std::all_of(o.name.begin(), o.name.end(),
                                 [](char c) {
                                   return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                                 }),
                 "artifact name '{}' must be letters, digits and _", o.name);
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  NNC_USER_CHECK(!ec, "{}: cannot create the folder: {}", o.dir, ec.message());

  // 1. The launch plan, as Executable::compile builds it.
  NNC_ASSIGN_OR_RETURN(LaunchPlan p,
                       buildLaunchPlan(g, o.gpu ? "OpenCL" : "CPU", o.tuning, o.cpu, o.gpu));
  std::set<std::string> names;
  for (const kir::Kernel &k : p.kernels)
    NNC_ASSERT(names.insert(k.name).second, "two kernels are named {}", k.name);

  std::string base = o.dir + "/" + o.name;
  std::string notes = o.source.empty() ? "" : o.source + "; ";
  std::vector<std::string> link = {"cc", "-shared", "-o", o.dir + "/lib" + o.name + ".so"};
  std::vector<std::string> temps;
  std::string clSource;
  std::vector<OpenCLLaunch> launches;
  std::vector<std::string> binaries;
  // 2. Code.
  if (o.gpu) {
    NNC_ASSIGN_OR_RETURN(OpenCLProgram prog, emitOpenCL(p.kernels, *o.gpu));
    clSource = std::move(prog.source);
    launches = std::move(prog.launches);
    notes += fmt::format("target opencl ({}), {} kernels", o.gpu->str(), p.kernels.size());
    if (o.openclBinary) {
      OpenCLLaunchOptions cl;
      cl.platform = o.openclPlatform;
      cl.device = o.openclDevice;
      if (Expected<OpenCLDeviceInfo> dev = pickOpenCLDevice(cl.platform, cl.device); !dev) {
        notes += fmt::format(", no device binary ({})", dev.takeError().message());
      } else if (Expected<std::string> bin = buildOpenCLProgramBinary(clSource, cl); !bin) {
        // The runtime builds the source at load (and says why it fails there, if it does).
        std::string why = bin.takeError().message();
        notes += fmt::format(", no device binary ({})", why.substr(0, why.find('\n')));
      } else {
        binaries.push_back(std::move(*bin));
        notes += fmt::format(", device binary for {} (driver {})", dev->deviceName,
                             dev->driverVersion);
      }
    }
  } else {
    std::string obj = base + ".kernels.o";
    if (!p.kernels.empty()) {
      NNC_TRY(emitObjectFile(p.kernels, obj, o.cpu));
      link.push_back(obj);
      temps.push_back(obj);
    }
    notes += fmt::format("target cpu {}{}{}, {} kernels, tuned configs for {} of {} tunable "
                         "kernels",
                         o.cpu.levelName(), o.cpu.native ? " (native)" : "",
                         o.cpu.precision == CpuTarget::Precision::BF16 ? " precision bf16" : "",
                         p.kernels.size(), p.tuningUse.tuned, p.tuningUse.tunable);
  }
  notes += fmt::format(", arena {} bytes", p.arenaBytes);
  // 3. The data, included by an assembler file.
  NNC_ASSIGN_OR_RETURN(std::string blob, serialize(g, p, o, clSource, launches, binaries, notes));
  std::string bin = base + ".data.bin", asmFile = base + ".data.s";
  NNC_TRY(writeFile(bin, blob));
  temps.push_back(bin);
  NNC_TRY(writeFile(
      asmFile,
      fmt::format("  .section .rodata.nnc_artifact,\"a\",@progbits\n  .balign 4096\n"
                  "  .globl {0}\n  .type {0},@object\n{0}:\n  .incbin \"{2}\"\n"
                  "  .size {0}, . - {0}\n  .balign 8\n  .globl {1}\n  .type {1},@object\n"
                  "{1}:\n  .quad {3}\n  .size {1}, 8\n  .section .note.GNU-stack,\"\",@progbits\n",
                  artifact::kDataSymbol, artifact::kSizeSymbol,
                  std::filesystem::absolute(bin).string(), blob.size())));
  temps.push_back(asmFile);
  link.push_back(asmFile);
  // 4. Link. Generated code may call libm and glibc's vector math (libmvec).
  for (const char *lib : {"-Wl,--as-needed", "-lmvec", "-lm"})
    link.push_back(lib);
  Error linked = runTool(link);
  for (const std::string &t : temps)
    std::filesystem::remove(t, ec);
  NNC_TRY(std::move(linked));
  // 5. The header.
  ArtifactInfo info;
  info.library = o.dir + "/lib" + o.name + ".so";
  info.header = base + ".h";
  info.notes = notes;
  NNC_TRY(writeFile(info.header, header(g, p, o, notes)));
  return info;
}

} // namespace nnc

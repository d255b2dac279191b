// Kernels -> optimized LLVM IR -> machine code for the host CPU, loaded through ORC LLJIT, with
// an on-disk object cache keyed by the unoptimized IR, the host CPU and the nnc version.
//
// The object cache has two kinds of entries in one folder:
//  - <key>.o: an object, keyed by its module's unoptimized bitcode (plus target, opt level and
//    versions), so a rebuilt nnc that emits the same IR still finds it;
//  - <index>.idx: the key of the object that the kernels of a part compiled to, keyed by the
//    kernels' text and the GNU build id of the nnc binary (a given build emits the same IR for
//    the same kernel IR). A warm compile reads the index and the object without emitting any
//    LLVM IR; a miss emits it, finds or compiles the object, and writes the index.
//
// Compilation is ours (new pass manager at O<optLevel>, then the target machine's object
// emitter), so a cache hit skips both the optimizer and code generation: the cached object is
// handed to LLJIT as is.
//
// compileKernels:
//  1. Kernels identical apart from their names (and their buffers' names and slots) are
//     compiled once, under the first one's name, and found under every name.
//  2. Each distinct kernel is a part: its own LLVMContext, module and TargetMachine, so the
//     parts compile on all cores at once (costliest first), and the object cache holds one
//     object per kernel (a kernel shared by two models is compiled once for both).
//  3. One LLJIT loads every part's object.
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>
#if defined(__linux__)
#include <elf.h>
#include <link.h>
#endif

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "nnc/support/Debug.h"
#include "nnc/support/Warning.h"
#include "llvm/Emitter.h"

namespace nnc {

std::string CodegenOptions::defaultObjectCacheDir() {
  if (const char *d = std::getenv("NNC_CACHE_DIR"))
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/nnc/objects";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/nnc/objects";
  return "";
}

std::string llvmcg::objectCacheKey(const std::string &irText, const std::string &cpu,
                                   int optLevel) {
  llvm::SHA1 sha;
  sha.update(irText);
  sha.update("\ncpu: " + cpu);
  sha.update(std::string("\nnnc: ") + NNC_VERSION + "\nllvm: " + LLVM_VERSION_STRING +
             "\nopt: " + std::to_string(optLevel) +
             // The entry's layout (object, SHA-1, magic): entries of older layouts are not read.
             "\nentry: 2");
  std::array<uint8_t, 20> h = sha.result();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(h.data(), h.size()), /*LowerCase=*/true);
}

std::pair<std::string, std::string> llvmCpuAndFeatures(const CpuTarget &cpu) {
  // The level's name fixes the ISA; a native target adds the extensions nnc detected. LLVM's
  // own host detection (its CPU model name and tuning) is never used. The levels are x86-64's:
  // elsewhere LLVM's generic CPU for the process's architecture.
  if (!llvm::Triple(llvm::sys::getProcessTriple()).isX86())
    return {"generic", std::string()};
  return {cpu.levelName(), cpu.llvmFeatures()};
}

namespace {

using namespace llvmcg;

void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string errorText(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

llvm::CodeGenOpt::Level codegenLevel(int optLevel) {
  switch (optLevel) {
  case 0:
    return llvm::CodeGenOpt::None;
  case 1:
    return llvm::CodeGenOpt::Less;
  case 2:
    return llvm::CodeGenOpt::Default;
  default:
    return llvm::CodeGenOpt::Aggressive;
  }
}

Expected<std::unique_ptr<llvm::TargetMachine>> targetMachine(const CpuTarget &cpuTarget,
                                                             int optLevel) {
  initializeLLVM();
  std::string triple = llvm::sys::getProcessTriple();
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return makeError("LLVM has no target for {}: {}", triple, err);
  auto [cpu, features] = llvmCpuAndFeatures(cpuTarget);
  llvm::TargetOptions to; // no fast-math: results must match the interpreter
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, cpu, features, to, llvm::Reloc::PIC_,
                                  llvm::CodeModel::Small, codegenLevel(optLevel)));
  if (!tm)
    return makeError("cannot create an LLVM target machine for {} ({})", triple, cpu);
  return tm;
}

/// True when glibc's vector math library (libmvec) is loaded into the process, so the loop
/// vectorizer may call its variants of exp, log, sin, tanh, erf, ... (at most 4 ulp from the
/// scalar libm, far inside the ONNX tolerances).
bool useLibmvec() {
  static const bool ok = [] {
    if (llvm::Triple(llvm::sys::getProcessTriple()).getArch() != llvm::Triple::x86_64)
      return false;
    if (std::getenv("NNC_NO_LIBMVEC"))
      return false;
    std::string err;
    return !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &err);
  }();
  return ok;
}

/// Part of the object cache key: changes whenever the vector-function table below does.
constexpr const char *kVecLibVersion = "libmvec-2";

/// The libmvec variants (glibc >= 2.35) of the math functions the emitter calls (libm names
/// and llvm.* intrinsics), for the vector ISAs of the target's level: SSE4 (b), AVX2 (d),
/// AVX-512 (e). LLVM 15's own LIBMVEC_X86 table has only exp/log/sin/cos/pow without AVX-512,
/// so loops of tanh or erf stayed scalar and width-16 loops of exp called expf 16 times.
const std::vector<llvm::VecDesc> &libmvecFunctions(CpuTarget::Level level) {
  struct Variant {
    std::string scalar, vector;
    unsigned factor;
  };
  auto makeVariants = [](CpuTarget::Level level) {
    bool avx2 = level >= CpuTarget::Level::V3;
    bool avx512 = level >= CpuTarget::Level::V4;
    const char *unary[] = {"exp",  "log",  "sin",  "cos",   "tan",   "asin",  "acos",
                           "atan", "sinh", "cosh", "tanh",  "asinh", "acosh", "atanh",
                           "erf",  "exp2", "log2", "log10", "expm1", "log1p", "cbrt"};
    const char *intrinsic[] = {"exp", "log", "sin", "cos", "exp2", "log2", "log10"};
    std::vector<Variant> out;
    auto add = [&](const std::string &scalar, const std::string &base, bool f32,
                   const std::string &params) {
      std::vector<std::pair<char, unsigned>> isas{{'b', f32 ? 4u : 2u}};
      if (avx2)
        isas.push_back({'d', f32 ? 8u : 4u});
      if (avx512)
        isas.push_back({'e', f32 ? 16u : 8u});
      for (auto [isa, vf] : isas)
        out.push_back(
            {scalar, fmt::format("_ZGV{}N{}{}_{}{}", isa, vf, params, base, f32 ? "f" : ""), vf});
    };
    for (const char *f : unary) {
      add(std::string(f) + "f", f, true, "v");
      add(f, f, false, "v");
    }
    for (const char *f : intrinsic) {
      add(fmt::format("llvm.{}.f32", f), f, true, "v");
      add(fmt::format("llvm.{}.f64", f), f, false, "v");
    }
    add("powf", "pow", true, "vv");
    add("pow", "pow", false, "vv");
    add("llvm.pow.f32", "pow", true, "vv");
    add("llvm.pow.f64", "pow", false, "vv");
    return out;
  };
  // VecDesc refers to its names: the variants stay alive with the descriptions.
  static const std::vector<Variant> variants[] = {makeVariants(CpuTarget::Level::X86_64),
                                                  makeVariants(CpuTarget::Level::V3),
                                                  makeVariants(CpuTarget::Level::V4)};
  static const std::array<std::vector<llvm::VecDesc>, 3> byLevel = [] {
    std::array<std::vector<llvm::VecDesc>, 3> all;
    for (int l = 0; l < 3; ++l)
      for (const Variant &v : variants[l])
        all[l].push_back({v.scalar, v.vector, llvm::ElementCount::getFixed(v.factor)});
    return all;
  }();
  return byLevel[static_cast<int>(level)];
}

llvm::TargetLibraryInfoImpl libraryInfo(const llvm::Module &m, const CpuTarget &cpu) {
  llvm::TargetLibraryInfoImpl tlii{llvm::Triple(m.getTargetTriple())};
  if (useLibmvec())
    tlii.addVectorizableFunctions(libmvecFunctions(cpu.level));
  return tlii;
}

void optimize(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu, int optLevel) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::TargetLibraryInfoImpl tlii = libraryInfo(m, cpu);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = optLevel >= 2;
  pto.SLPVectorization = optLevel >= 2;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel <= 0   ? llvm::OptimizationLevel::O0
                                  : optLevel == 1 ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
  if (optLevel >= 2)
    markStreamingStores(m);
}

Error emitFile(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu,
               llvm::CodeGenFileType type, llvm::SmallVectorImpl<char> &out) {
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  pm.add(new llvm::TargetLibraryInfoWrapperPass(libraryInfo(m, cpu)));
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    return makeError("the LLVM target cannot emit this file type");
  pm.run(m);
  return Error::success();
}

std::string moduleText(const llvm::Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return os.str();
}

/// Emits `kernels` into a module for `cpu`.
struct Built {
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> module;
};
Expected<Built> build(const std::vector<kir::Kernel> &kernels, const CpuTarget &cpu, int optLevel) {
  Built b;
  b.ctx = std::make_unique<llvm::LLVMContext>();
  // Missed-optimization remarks ("loop not vectorized" when a vectorize hint cannot be
  // honoured, e.g. around libm calls) are not errors; keep them off stderr.
  b.ctx->setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo &di, void *) {
        if (di.getSeverity() == llvm::DS_Error) {
          std::string s;
          llvm::raw_string_ostream os(s);
          llvm::DiagnosticPrinterRawOStream dp(os);
          di.print(dp);
          std::fprintf(stderr, "nnc: LLVM error: %s\n", os.str().c_str());
        }
      },
      nullptr);
  NNC_ASSIGN_OR_RETURN(b.tm, targetMachine(cpu, optLevel));
  NNC_ASSIGN_OR_RETURN(b.module, emitModule(*b.ctx, kernels, *b.tm, cpu));
  return b;
}

// ---- Object cache ----------------------------------------------------------------------------

/// A cache entry is the object followed by its SHA-1 and kCacheMagic, so that a corrupted
/// file (a flipped bit in the code would still load) is detected instead of run.
constexpr llvm::StringLiteral kCacheMagic("NNCOBJ2\n");
constexpr size_t kShaBytes = 20;

std::string sha1Of(llvm::StringRef data) {
  llvm::SHA1 sha;
  sha.update(data);
  std::array<uint8_t, 20> h = sha.result();
  return std::string(h.begin(), h.end());
}

/// The cached object at `path`, or null: a missing file is a plain miss; an unreadable,
/// truncated or corrupted one is a miss that says so on stderr (and is rewritten).
std::unique_ptr<llvm::MemoryBuffer> readCached(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) {
    // A missing file or folder is a plain miss (a folder that cannot be made is reported
    // when the object is written).
    if (buf.getError() != std::errc::no_such_file_or_directory &&
        buf.getError() != std::errc::not_a_directory)
      warnOnce(fmt::format("object cache: cannot read {} ({}); compiling the kernel again", path,
                           buf.getError().message()));
    return nullptr;
  }
  llvm::StringRef all = (*buf)->getBuffer();
  size_t trailer = kShaBytes + kCacheMagic.size();
  llvm::StringRef object = all.size() > trailer ? all.drop_back(trailer) : llvm::StringRef();
  bool valid = all.size() > trailer && all.endswith(kCacheMagic) &&
               all.substr(object.size(), kShaBytes) == sha1Of(object);
  if (valid) {
    auto obj = llvm::object::ObjectFile::createObjectFile(
        llvm::MemoryBufferRef(object, (*buf)->getBufferIdentifier()));
    if (!obj) {
      llvm::consumeError(obj.takeError());
      valid = false;
    }
  }
  if (!valid) {
    warnOnce(fmt::format("object cache: {} is truncated or corrupted; compiling the kernel again",
                         path));
    return nullptr;
  }
  return llvm::MemoryBuffer::getMemBufferCopy(object, path);
}

/// Writes atomically (temporary file, then rename), the object followed by its trailer, or
/// (withTrailer false: an index entry) the bytes alone; a failure (read-only or full disk) only
/// means no caching, and says so on stderr once per cache directory. True when written.
bool writeCached(const std::string &dir, const std::string &path, llvm::StringRef data,
                 bool withTrailer = true) {
  auto skipped = [&](const std::string &why) {
    warnOnce(fmt::format("object cache: cannot write to {} ({}); kernels are compiled but not "
                         "cached",
                         dir, why));
    return false;
  };
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return skipped(ec.message());
  static std::atomic<unsigned> counter{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f)
      return skipped(std::strerror(errno));
    std::string trailer = withTrailer ? sha1Of(data) + kCacheMagic.str() : std::string();
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.write(trailer.data(), static_cast<std::streamsize>(trailer.size()));
    f.flush();
    if (!f.good()) {
      int err = errno;
      f.close();
      std::remove(tmp.c_str());
      return skipped(err ? std::strerror(err) : "write error");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return skipped(std::strerror(err));
  }
  return true;
}

// ---- JIT -------------------------------------------------------------------------------------

class JitModule : public CompiledModule {
public:
  KernelFn lookup(const std::string &name) const override {
    auto it = fns_.find(name);
    return it == fns_.end() ? nullptr : it->second;
  }
  bool fromCache() const override { return fromCache_; }

  /// Loads `objects` into a fresh LLJIT and resolves every kernel: kernel i under the name of
  /// kernel compiledAs[i] (itself, or the identical kernel compiled in its place).
  static Expected<std::unique_ptr<JitModule>>
  load(std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects,
       const std::vector<kir::Kernel> &kernels, const std::vector<size_t> &compiledAs,
       bool fromCache, ParallelForFn parallelFor, const CpuTarget &target) {
    initializeLLVM();
    auto [cpu, features] = llvmCpuAndFeatures(target);
    llvm::orc::JITTargetMachineBuilder jtmb((llvm::Triple(llvm::sys::getProcessTriple())));
    jtmb.setCPU(cpu);
    llvm::SubtargetFeatures sf(features);
    jtmb.addFeatures(sf.getFeatures());
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
    if (!jit)
      return makeError("cannot create the LLVM JIT: {}", errorText(jit.takeError()));
    auto m = std::make_unique<JitModule>();
    m->fromCache_ = fromCache;
    m->jit_ = std::move(*jit);
    llvm::orc::LLJIT &j = *m->jit_;
    llvm::orc::JITDylib &jd = j.getMainJITDylib();
    llvm::orc::SymbolMap syms;
    for (auto &[name, addr] : processSymbols(parallelFor))
      syms[j.mangleAndIntern(name)] =
          llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(addr),
                                   llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
    if (llvm::Error e = jd.define(llvm::orc::absoluteSymbols(std::move(syms))))
      return makeError("cannot define JIT symbols: {}", errorText(std::move(e)));
    // libm (tanhf, erff, fmodf, ...) and memset/memcpy come from the process.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        j.getDataLayout().getGlobalPrefix());
    if (!gen)
      return makeError("cannot search the process for symbols: {}", errorText(gen.takeError()));
    jd.addGenerator(std::move(*gen));
    for (std::unique_ptr<llvm::MemoryBuffer> &object : objects)
      if (llvm::Error e = j.addObjectFile(jd, std::move(object)))
        return makeError("cannot load the kernels' object code: {}", errorText(std::move(e)));
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string &name = kernels[compiledAs[i]].name;
      auto addr = j.lookup(name);
      if (!addr)
        return makeError("kernel {}: JIT lookup failed: {}", name, errorText(addr.takeError()));
      m->fns_[kernels[i].name] = addr->toPtr<KernelFn>();
    }
    return m;
  }

private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::map<std::string, KernelFn> fns_;
  bool fromCache_ = false;
};

// ---- Parts -----------------------------------------------------------------------------------

/// What makes two kernels the same code: their text without the kernel's and the buffers'
/// names, the buffers' slot indices (which only say where the runtime finds the data) and what
/// only the launch plan and a profile read (in-place results, the work).
std::string dedupKey(const kir::Kernel &k) {
  kir::Kernel anon = k;
  anon.name = "_";
  anon.flops = 0;
  for (kir::BufferDecl &b : anon.buffers) {
    b.name.clear();
    b.index = 0;
    b.inPlaceOver.clear();
  }
  return anon.signature();
}

/// A rough compile cost of a kernel: the size of its loop nest.
int64_t compileCost(const kir::Stmt &s) {
  if (!s)
    return 0;
  int64_t n = 1;
  for (const kir::Stmt &c : s->body)
    n += compileCost(c);
  return n;
}

/// The hash input of a module: its bitcode (much cheaper to write than the IR text).
std::string moduleBitcode(const llvm::Module &m) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::WriteBitcodeToFile(m, os);
  return std::string(buf.data(), buf.size());
}

/// The GNU build id (hex) of the binary or shared library this code is linked into, or "" when
/// it has none (then every compile emits its IR to find its object).
const std::string &ownBuildId() {
  static const std::string id = [] {
    std::string hex;
#if defined(__linux__)
    struct Search {
      uintptr_t addr;
      std::string *out;
    } search{reinterpret_cast<uintptr_t>(&ownBuildId), &hex};
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) -> int {
          auto *sr = static_cast<Search *>(data);
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
            const ElfW(Phdr) &ph = info->dlpi_phdr[i];
            uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
            mine = ph.p_type == PT_LOAD && sr->addr >= lo && sr->addr < lo + ph.p_memsz;
          }
          if (!mine)
            return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr) &ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE)
              continue;
            const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
            const char *end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              const auto *nh = reinterpret_cast<const ElfW(Nhdr) *>(p);
              const char *name = p + sizeof(ElfW(Nhdr));
              const char *desc = name + ((nh->n_namesz + 3) & ~3u);
              if (desc + nh->n_descsz > end)
                break;
              if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                  std::memcmp(name, "GNU", 4) == 0) {
                *sr->out = llvm::toHex(
                    llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(desc), nh->n_descsz),
                    /*LowerCase=*/true);
                return 1;
              }
              p = desc + ((nh->n_descsz + 3) & ~3u);
            }
          }
          return 1;
        },
        &search);
#endif
    return hex;
  }();
  return id;
}

/// The index key of a part (see the file comment): its kernel's name and text without names
/// (`code`, the part's dedupKey: what its object depends on), the target, the optimization
/// level, the versions and the build id; "" without a build id.
std::string indexKey(const std::string &name, const std::string &code, const std::string &target,
                     int optLevel) {
  if (ownBuildId().empty())
    return "";
  llvm::SHA1 sha;
  sha.update("nnc object index 2\nbuild: " + ownBuildId() + "\nkernel: " + name + "\n");
  sha.update(code);
  return objectCacheKey(llvm::toHex(sha.result(), /*LowerCase=*/true), target, optLevel);
}

/// The object key an index entry holds, or "" (no entry, or not a key: then it is rewritten).
std::string readIndex(const std::string &path) {
  std::ifstream f(path);
  std::string key;
  if (!f || !std::getline(f, key) || key.size() != 2 * kShaBytes ||
      key.find_first_not_of("0123456789abcdef") != std::string::npos)
    return "";
  return key;
}

/// One unit of parallel compilation: kernels compiled into their own LLVM context, module
/// and target machine, into one object (from the object cache when it holds it).
struct Part {
  std::vector<kir::Kernel> kernels;
  std::string code; ///< dedupKey of its kernel (computed once, also keys the cache index)
  int64_t cost = 0;
  std::unique_ptr<llvm::MemoryBuffer> object;
  bool fromCache = false;
};

/// True when a kernel has a parallel loop (it calls the runtime's parallel-for).
bool hasParallelLoop(const kir::Kernel &k) {
  for (const kir::ScheduleStep &st : k.schedule.steps)
    if (st.kind == kir::ScheduleStep::Parallel)
      return true;
  return false;
}

Error compilePart(Part &part, const CodegenOptions &opts) {
  PhaseTimer time(fmt::format("codegen: part {} (cost {})", part.kernels.front().name, part.cost));
  std::string target, indexPath;
  if (!opts.cacheDir.empty()) {
    auto [cpu, features] = llvmCpuAndFeatures(opts.cpu);
    target = cpu + " " + features + " " + opts.cpu.str() +
             (useLibmvec() ? std::string(" ") + kVecLibVersion : "");
    // A warm compile: the index names the object, and no IR is emitted. Its key holds every
    // CpuTarget field the emitter reads: the level and vector width (in str()) and the
    // streaming-store threshold (which tests inject and str() does not show).
    std::string index = indexKey(
        part.kernels.front().name, part.code,
        target + fmt::format(" streaming {}", opts.cpu.streamingStoreBytes), opts.optLevel);
    bool parallel = std::any_of(part.kernels.begin(), part.kernels.end(), hasParallelLoop);
    if (!index.empty() && (opts.parallelFor || !parallel)) {
      indexPath = opts.cacheDir + "/" + index + ".idx";
      std::string key = readIndex(indexPath);
      if (!key.empty())
        if (auto cached = readCached(opts.cacheDir + "/" + key + ".o")) {
          part.object = std::move(cached);
          part.fromCache = true;
          return Error::success();
        }
    }
  }
  NNC_ASSIGN_OR_RETURN(Built b, build(part.kernels, opts.cpu, opts.optLevel));
  if (llvm::Function *pf = b.module->getFunction(kParallelFor); pf && !pf->use_empty()) {
    if (!opts.parallelFor)
      return makeError("kernels with parallel loops need a parallel-for "
                       "(CodegenOptions::parallelFor; the runtime's thread pool provides it)");
  }
  std::string path;
  if (!opts.cacheDir.empty()) {
    std::string key = objectCacheKey(moduleBitcode(*b.module), target, opts.optLevel);
    path = opts.cacheDir + "/" + key + ".o";
    auto remember = [&] {
      if (!indexPath.empty())
        writeCached(opts.cacheDir, indexPath, key + "\n", /*withTrailer=*/false);
    };
    if (auto cached = readCached(path)) {
      part.object = std::move(cached);
      part.fromCache = true;
      remember();
      return Error::success();
    }
    optimize(*b.module, *b.tm, opts.cpu, opts.optLevel);
    llvm::SmallVector<char, 0> obj;
    NNC_TRY(emitFile(*b.module, *b.tm, opts.cpu, llvm::CGFT_ObjectFile, obj));
    llvm::StringRef data(obj.data(), obj.size());
    if (writeCached(opts.cacheDir, path, data))
      remember();
    part.object = llvm::MemoryBuffer::getMemBufferCopy(data, "nnc-kernels");
    return Error::success();
  }
  optimize(*b.module, *b.tm, opts.cpu, opts.optLevel);
  llvm::SmallVector<char, 0> obj;
  NNC_TRY(emitFile(*b.module, *b.tm, opts.cpu, llvm::CGFT_ObjectFile, obj));
  part.object = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(obj.data(), obj.size()),
                                                     "nnc-kernels");
  return Error::success();
}

/// Runs fn(0 .. n-1) on up to `threads` threads (this one included), in index order per thread.
void runParallel(size_t n, unsigned threads, const std::function<void(size_t)> &fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;)
      fn(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads && t < n; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

} // namespace

Expected<std::unique_ptr<CompiledModule>> compileKernels(const std::vector<kir::Kernel> &kernels,
                                                         const CodegenOptions &opts) {
  initializeLLVM();
  // 1. Identical kernels (apart from names) are compiled once, under the first one's name.
  PhaseTimer partTime("codegen: split into parts");
  std::vector<size_t> compiledAs(kernels.size());
  std::vector<Part> parts;
  {
    std::map<std::string, size_t> firstOf;
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto [it, fresh] = firstOf.emplace(dedupKey(kernels[i]), i);
      compiledAs[i] = it->second;
      if (!fresh)
        continue;
      // 2. One part per distinct kernel: the cache then holds each kernel's object alone.
      Part p;
      p.kernels.push_back(kernels[i]);
      p.code = it->first;
      p.cost = compileCost(kernels[i].body);
      parts.push_back(std::move(p));
    }
  }
  partTime.stop();
  // 3. Compile the parts on the available cores, costliest first.
  PhaseTimer compileTime(
      fmt::format("codegen: {} parts of {} kernels", parts.size(), kernels.size()));
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return parts[a].cost > parts[b].cost; });
  unsigned threads = opts.compileThreads > 0 ? static_cast<unsigned>(opts.compileThreads)
                                             : static_cast<unsigned>(CpuTarget::hostCores());
  std::vector<Error> errors(parts.size(), Error::success());
  runParallel(parts.size(), threads,
              [&](size_t i) { errors[order[i]] = compilePart(parts[order[i]], opts); });
  for (Error &e : errors)
    if (e)
      return std::move(e);
  compileTime.stop();
  // 4. One JIT holds every part's object.
  PhaseTimer loadTime("codegen: JIT load");
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
  bool fromCache = true;
  for (Part &p : parts) {
    fromCache = fromCache && p.fromCache;
    objects.push_back(std::move(p.object));
  }
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<JitModule> m,
                       JitModule::load(std::move(objects), kernels, compiledAs, fromCache,
                                       opts.parallelFor, opts.cpu));
  return std::unique_ptr<CompiledModule>(std::move(m));
}

Expected<std::string> emitLLVMIR(const std::vector<kir::Kernel> &kernels, bool optimized,
                                 const CpuTarget &cpu) {
  NNC_ASSIGN_OR_RETURN(Built b, build(kernels, cpu, 3));
  if (optimized)
    optimize(*b.module, *b.tm, cpu, 3);
  return moduleText(*b.module);
}

Expected<std::string> emitAssembly(const std::vector<kir::Kernel> &kernels, const CpuTarget &cpu) {
  NNC_ASSIGN_OR_RETURN(Built b, build(kernels, cpu, 3));
  optimize(*b.module, *b.tm, cpu, 3);
  llvm::SmallVector<char, 0> out;
  NNC_TRY(emitFile(*b.module, *b.tm, cpu, llvm::CGFT_AssemblyFile, out));
  return std::string(out.data(), out.size());
}

Error emitObjectFile(const std::vector<kir::Kernel> &kernels, const std::string &path,
                     const CpuTarget &cpu) {
  NNC_ASSIGN_OR_RETURN(Built b, build(kernels, cpu, 3));
  optimize(*b.module, *b.tm, cpu, 3);
  llvm::SmallVector<char, 0> out;
  NNC_TRY(emitFile(*b.module, *b.tm, cpu, llvm::CGFT_ObjectFile, out));
  std::ofstream f(path, std::ios::binary);
  if (!f)
    return makeError("cannot write {}", path);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f.good())
    return makeError("cannot write {}", path);
  return Error::success();
}

} // namespace nnc

// The tuner: measures configs of a graph's distinct tunable kernels on this CPU or on an
// OpenCL device and keeps the best in the tuning cache.
//
// Algorithm (tuneGraph):
//  1. Lower every node (CPU) or lowering unit (OpenCL: a fusion group as the executables
//     lower it), collecting the tunable problems; problems with one signature are one kernel
//     to tune (their node or unit is the first that has it).
//  2. For each problem, the node's kernels are compiled alone with the default config (on
//     OpenCL: the unit as a graph of its own, built for the device), run on the node's
//     constants and random inputs, timed (warm-up, repeats, median; OpenCL: the kernels'
//     device time from profiling events; CPU: a constant larger than the L2, a weight a
//     model run streams from memory, is evicted from the caches before each timed call) and
//     their results kept as the reference. On
//     OpenCL, where every measurement is a program build, this happens when the problem's
//     search starts; the weights of step 3 come from one profiled run of the whole model.
//  3. The remaining budget is split: a third evenly, the rest by where the model spends its
//     time (default time x uses), largest first; what a kernel leaves unused passes on. An
//     OpenCL problem the budget does not reach gets a record of its default (unless an
//     earlier run left one).
//  4. Per kernel, an evolutionary search seeded with the default (and with the candidates a
//     previous, interrupted run measured): mutate one or two knobs of one of the best three,
//     now and then a random point; skip invalid and already measured points. Each candidate's
//     results must match the reference (else it is rejected); a candidate replaces the best
//     only when faster by more than the noise margin, and the final best is timed again
//     against the default.
//  5. Every measurement is written to the cache as it happens, the kernel's record when its
//     search ends; a stop request (SIGINT) ends the search after the current candidate.
#include <algorithm>
#include <chrono>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unistd.h>

#include "ThreadPool.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Tensor.h"
#include "nnc/runtime/OpenCL.h"
#include "nnc/runtime/TuningCache.h"

namespace nnc {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Returns `config` for the one problem being tuned.
class FixedConfig : public tuning::ConfigSource {
public:
  FixedConfig(std::string signature, tuning::Config c)
      : signature_(std::move(signature)), config_(std::move(c)) {}
  std::optional<tuning::Config> lookup(const tuning::Problem &p) const override {
    if (p.signature == signature_)
      return config_;
    return std::nullopt;
  }

private:
  std::string signature_;
  tuning::Config config_;
};

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

/// Random data for a non-constant operand: floats in [-1, 1], other types zero.
Tensor randomOperand(const Value &v, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor t = Tensor::zeros(v.dtype(), *staticExtents(v.shape()));
  if (t.dtype() == DType::F32)
    for (int64_t e = 0; e < t.numElements(); ++e)
      t.data<float>()[e] = static_cast<float>(dist(rng));
  else if (t.dtype() == DType::F64)
    for (int64_t e = 0; e < t.numElements(); ++e)
      t.data<double>()[e] = dist(rng);
  return t;
}

/// One tunable kernel's code compiled with one config, with data to run it on.
class KernelBench {
public:
  virtual ~KernelBench() = default;
  /// Lowers and compiles the kernels with `cfg` for `p`.
  virtual Error prepare(const tuning::Problem &p, const tuning::Config &cfg) = 0;
  /// Runs the kernels once (their results are then results()).
  virtual Error runOnce() = 0;
  /// Median ms over repeats (at least 5 and about `targetMs` of runs, at most 100).
  virtual Expected<double> time(double targetMs) = 0;
  /// The results' bytes (result order).
  virtual std::vector<std::vector<char>> results() const = 0;
  /// Float views of the results (for the corruption test hook).
  virtual void floatResults(std::vector<float *> &ptrs, std::vector<int64_t> &sizes) = 0;
  /// The dtype of the first result.
  virtual DType resultDtype() const = 0;
};

/// Writes back and evicts the cache lines of [data, data + bytes) from every cache level.
void evictFromCaches(const void *data, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const char *p = static_cast<const char *>(data);
  for (size_t off = 0; off < bytes; off += 64)
    _mm_clflush(p + off);
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

/// Median of the timings, with the repeat rule of KernelBench::time.
template <typename RunMs> Expected<double> medianMs(double targetMs, RunMs runMs) {
  for (int warm = 0; warm < 2; ++warm)
    NNC_TRY(runMs().takeError());
  std::vector<double> ms;
  double total = 0;
  while (ms.size() < 5 || (total < targetMs && ms.size() < 100)) {
    NNC_ASSIGN_OR_RETURN(double d, runMs());
    ms.push_back(d);
    total += d;
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

/// One node's CPU kernels, called directly on buffers of their own.
class CpuKernelBench : public KernelBench {
public:
  /// Operand data: constants as they are, other operands random in [-1, 1].
  CpuKernelBench(const Node &node, uint64_t seed) : node_(node) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < node.numOperands(); ++i) {
      const Value *v = node.operand(i);
      if (!v) {
        operands_.emplace_back();
        continue;
      }
      if (const Tensor *c = node.constantOperand(i)) {
        operands_.push_back(c->clone());
        constants_.push_back(i);
        continue;
      }
      operands_.push_back(randomOperand(*v, rng));
    }
  }

  Error prepare(const tuning::Problem &p, const tuning::Config &cfg) override {
    // A constant at least as large as the L2 (a weight) is evicted before each timed call: a
    // model run touches it once and the rest of the run evicts it before the next, so a
    // kernel that streams it cold is what the model runs (a candidate that prefetches its
    // next B panel wins there, and only there).
    cold_.clear();
    for (size_t i : constants_)
      if (operands_[i].byteSize() >= p.cpu.l2Bytes)
        cold_.push_back(i);
    FixedConfig src(p.signature, cfg);
    tuning::LowerOptions lo(p.cpu);
    lo.configs = &src;
    lo.threads = p.threads;
    NNC_ASSIGN_OR_RETURN(kernels_, lowerNode(node_, "tune", lo));
    CodegenOptions co(p.cpu);
    co.cacheDir = ""; // candidates are not worth keeping in the object cache
    co.parallelFor = &nnc_parallel_for;
    NNC_ASSIGN_OR_RETURN(module_, compileKernels(kernels_, co));
    fns_.clear();
    args_.clear();
    for (const kir::Kernel &k : kernels_) {
      fns_.push_back(module_->lookup(k.name));
      if (!fns_.back())
        return makeError("kernel '{}' is missing from the compiled module", k.name);
      std::vector<void *> a;
      for (const kir::BufferDecl &b : k.buffers) {
        if (b.role == kir::BufferRole::Operand) {
          a.push_back(operands_[b.index].rawData());
          continue;
        }
        auto key = std::make_pair(static_cast<int>(b.role), b.index);
        int64_t bytes = b.numElements * static_cast<int64_t>(dtypeSize(b.dtype));
        auto &slot = buffers_[key];
        if (slot.second < bytes) {
          size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64 + 64);
          slot.first.reset(static_cast<char *>(std::aligned_alloc(64, rounded)));
          std::memset(slot.first.get(), 0, rounded);
          slot.second = bytes;
        }
        a.push_back(slot.first.get());
        if (b.role == kir::BufferRole::Result)
          resultDtype_[b.index] = b.dtype;
      }
      args_.push_back(std::move(a));
    }
    return Error::success();
  }

  Error runOnce() override {
    for (size_t i = 0; i < fns_.size(); ++i)
      fns_[i](args_[i].data());
    return Error::success();
  }

  Expected<double> time(double targetMs) override {
    return medianMs(targetMs, [&]() -> Expected<double> {
      for (size_t i : cold_)
        evictFromCaches(operands_[i].rawData(), operands_[i].byteSize());
      auto t = Clock::now();
      NNC_TRY(runOnce());
      return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    });
  }

  std::vector<std::vector<char>> results() const override {
    std::vector<std::vector<char>> out;
    for (const auto &[key, slot] : buffers_)
      if (key.first == static_cast<int>(kir::BufferRole::Result))
        out.emplace_back(slot.first.get(), slot.first.get() + slot.second);
    return out;
  }
  void floatResults(std::vector<float *> &ptrs, std::vector<int64_t> &sizes) override {
    for (auto &[key, slot] : buffers_)
      if (key.first == static_cast<int>(kir::BufferRole::Result) &&
          resultDtype_[key.second] == DType::F32) {
        ptrs.push_back(reinterpret_cast<float *>(slot.first.get()));
        sizes.push_back(slot.second / 4);
      }
  }
  DType resultDtype() const override { return resultDtype_.at(0); }

private:
  const Node &node_;
  std::vector<Tensor> operands_;
  std::vector<size_t> constants_, cold_; ///< Constant operands; those timed cold.
  std::vector<kir::Kernel> kernels_;
  std::unique_ptr<CompiledModule> module_;
  std::vector<KernelFn> fns_;
  std::vector<std::vector<void *>> args_;
  std::map<std::pair<int, int>, std::pair<Buffer, int64_t>> buffers_;
  std::map<int, DType> resultDtype_;
};

/// One lowering unit's kernels on an OpenCL device: the unit's nodes as a graph of their own
/// (constants kept, the other operands graph inputs with random data), compiled as the
/// executables compile it (so a fusion group is lowered as it is in the model) and timed by
/// its kernels' device time (profiling events) per run.
class ClKernelBench : public KernelBench {
public:
  ClKernelBench(const LoweringUnit &u, OpenCLDeviceInfo device, CpuTarget cpu, uint64_t seed)
      : device_(std::move(device)), cpu_(std::move(cpu)) {
    std::mt19937_64 rng(seed);
    std::map<const Value *, Value *> mapped;
    auto operandOf = [&](Value *v) -> Value * {
      if (!v)
        return nullptr;
      auto it = mapped.find(v);
      if (it != mapped.end())
        return it->second;
      Value *nv;
      const Node *def = v->producer();
      if (def && def->kind() == OpKind::Constant) {
        nv = graph_
                 .createNode(OpKind::Constant, {}, {v->type()},
                             {{"value", Attribute(def->getTensor("value"))}}, def->name())
                 ->result();
      } else {
        nv = graph_.addInput(v->name(), v->type());
        inputs_.push_back(randomOperand(*v, rng));
      }
      return mapped[v] = nv;
    };
    std::vector<const Node *> members = u.members;
    if (members.empty())
      members.push_back(u.node);
    for (const Node *m : members) {
      std::vector<Value *> ops;
      for (Value *v : m->operands())
        ops.push_back(operandOf(v));
      std::vector<TensorType> types;
      for (const Value *r : m->results())
        types.push_back(r->type());
      Node *c = graph_.createNode(m->kind(), ops, types, m->attrs(), m->name());
      for (size_t r = 0; r < m->numResults(); ++r)
        mapped[m->result(r)] = c->result(r);
    }
    std::vector<Value *> outs;
    for (Value *r : u.node->results())
      outs.push_back(mapped.at(r));
    graph_.setOutputs(outs);
  }

  Error prepare(const tuning::Problem &p, const tuning::Config &cfg) override {
    exe_.reset();
    OpenCLOptions o(cpu_, device_.target());
    o.cacheDir = ""; // candidates are not worth keeping in the program cache
    o.profile = true;
    o.tuning = std::make_shared<FixedConfig>(p.signature, cfg);
    NNC_ASSIGN_OR_RETURN(exe_, OpenCLExecutable::compile(graph_, o));
    if (exe_->tuningUse().tuned == 0)
      return makeError("{}: the config was not applied", p.signature);
    return Error::success();
  }

  Error runOnce() override {
    NNC_ASSIGN_OR_RETURN(outputs_, exe_->run(inputs_));
    return Error::success();
  }

  Expected<double> time(double targetMs) override {
    return medianMs(targetMs, [&]() -> Expected<double> {
      exe_->resetRunCounters();
      NNC_TRY(runOnce());
      double ms = 0;
      for (const KernelTime &k : exe_->kernelTimes())
        ms += k.deviceMs;
      return ms;
    });
  }

  std::vector<std::vector<char>> results() const override {
    std::vector<std::vector<char>> out;
    for (const Tensor &t : outputs_) {
      const char *d = static_cast<const char *>(t.rawData());
      out.emplace_back(d, d + t.byteSize());
    }
    return out;
  }
  void floatResults(std::vector<float *> &ptrs, std::vector<int64_t> &sizes) override {
    for (Tensor &t : outputs_)
      if (t.dtype() == DType::F32) {
        ptrs.push_back(t.data<float>());
        sizes.push_back(t.numElements());
      }
  }
  DType resultDtype() const override { return graph_.outputs()[0]->dtype(); }

private:
  OpenCLDeviceInfo device_;
  CpuTarget cpu_; ///< The host side's CPU (the target's).
  Graph graph_{"tune"};
  std::vector<Tensor> inputs_, outputs_;
  std::unique_ptr<OpenCLExecutable> exe_;
};

/// Empty when `got` matches `ref` within float reassociation (rtol 1e-3 plus an absolute
/// margin scaled by the largest reference value), else what differs.
std::string compareResults(const std::vector<std::vector<char>> &ref,
                           const std::vector<std::vector<char>> &got, DType t) {
  if (ref.size() != got.size())
    return "a different number of results";
  for (size_t r = 0; r < ref.size(); ++r) {
    if (ref[r].size() != got[r].size())
      return "a result of another size";
    if (t != DType::F32 && t != DType::F64) {
      if (ref[r] != got[r])
        return fmt::format("result {} differs", r);
      continue;
    }
    auto at = [&](const std::vector<char> &v, size_t i) {
      if (t == DType::F32) {
        float f;
        std::memcpy(&f, v.data() + i * 4, 4);
        return double(f);
      }
      double d;
      std::memcpy(&d, v.data() + i * 8, 8);
      return d;
    };
    size_t n = ref[r].size() / dtypeSize(t);
    double scale = 0;
    for (size_t i = 0; i < n; ++i)
      scale = std::max(scale, std::fabs(at(ref[r], i)));
    for (size_t i = 0; i < n; ++i) {
      double e = at(ref[r], i), a = at(got[r], i);
      if (!(std::fabs(a - e) <= 1e-5 * scale + 1e-3 * std::fabs(e)) &&
          !(std::isnan(a) && std::isnan(e)))
        return fmt::format("result {} element {}: {} instead of {}", r, i, a, e);
    }
  }
  return "";
}

/// The progress line on stderr (redrawn in place on a terminal).
class Progress {
public:
  Progress(bool on, double budget) : on_(on), tty_(isatty(2)), budget_(budget) {}
  /// Redraws the line on a terminal; elsewhere prints it only when `final` (a kernel done).
  void update(double elapsed, size_t kernel, size_t kernels, const std::string &what, double best,
              double dflt, int trial, bool final = false) {
    if (!on_ || (!tty_ && !final))
      return;
    double frac = std::min(1.0, budget_ > 0 ? elapsed / budget_ : 1.0);
    int filled = static_cast<int>(frac * 24);
    std::string bar = std::string(filled, '#') + std::string(24 - filled, '.');
    std::string line =
        fmt::format("[{}] {:3.0f}% {:.0f}/{:.0f}s ETA {:.0f}s | kernel {}/{} {} | best {:.3f} ms "
                    "(default {:.3f}, {:.2f}x) trial {}",
                    bar, frac * 100, elapsed, budget_, std::max(0.0, budget_ - elapsed), kernel,
                    kernels, what, best, dflt, best > 0 ? dflt / best : 1.0, trial);
    if (tty_)
      std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
  void done() {
    if (on_ && tty_)
      std::fprintf(stderr, "\n");
  }

private:
  bool on_, tty_;
  double budget_;
};

/// A candidate near the good ones: one or two knobs of `parent` moved (mostly to a
/// neighbouring value), or a random point.
tuning::Config mutate(const tuning::Space &space, const tuning::Config &parent,
                      std::mt19937_64 &rng, bool randomPoint) {
  tuning::Config c = parent;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  if (randomPoint) {
    for (const tuning::Knob &k : space.knobs)
      c[k.name] = k.values[pick(k.values.size())];
    return c;
  }
  int changes = std::uniform_int_distribution<int>(1, 2)(rng);
  for (int i = 0; i < changes; ++i) {
    const tuning::Knob &k = space.knobs[pick(space.knobs.size())];
    auto it = std::find(k.values.begin(), k.values.end(), c[k.name]);
    size_t pos = it == k.values.end() ? 0 : static_cast<size_t>(it - k.values.begin());
    if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.7 && k.values.size() > 1) {
      bool up = pos == 0 || (pos + 1 < k.values.size() && pick(2) == 1);
      pos = up ? pos + 1 : pos - 1;
    } else {
      pos = pick(k.values.size());
    }
    c[k.name] = k.values[pos];
  }
  return c;
}

} // namespace

Expected<TuneSummary> tuneGraph(const Graph &g, TuningCache &cache, const TuneOptions &opts) {
  auto start = Clock::now();
  TuneSummary summary;
  bool opencl = opts.opencl.has_value();
  std::string device =
      opencl ? openclDeviceFingerprint(*opts.opencl) : cpuDeviceFingerprint(opts.threads, opts.cpu);
  summary.device = device;
  ThreadPool *pool = opts.threads == 1 || opencl ? nullptr : ThreadPool::shared(opts.threads);
  ThreadPool::Scope scope(pool);
  auto stopped = [&] { return opts.stop && opts.stop->load(); };

  // 1. Distinct tunable problems, with the first node (CPU) or unit (OpenCL) of each.
  std::map<std::string, size_t> index;
  std::vector<LoweringUnit> unitOf;
  auto collect = [&](const LoweringUnit &u, const std::vector<tuning::Problem> &found) {
    for (const tuning::Problem &p : found) {
      auto [it, inserted] = index.emplace(p.signature, summary.kernels.size());
      if (inserted) {
        summary.kernels.push_back({p, 0, 0, 0, "", 0, 0});
        unitOf.push_back(u);
      }
      ++summary.kernels[it->second].uses;
    }
  };
  // OpenCL: the tunable problems of the unit of each node position (LaunchPlan names a
  // unit's kernels "n<position>_...").
  std::map<int64_t, std::vector<size_t>> problemsAt;
  if (opencl) {
    // Lowered as OpenCLExecutable lowers them: for the device, with the target's CPU for the
    // CPU templates its registry also holds.
    // A loop's body units are probed too; their kernels are named after the loop node
    // ("n<position>_scan_..."), so their problems go to the loop's position.
    std::function<Error(const Graph &, int64_t)> probe = [&](const Graph &graph,
                                                             int64_t loopAt) -> Error {
      NNC_ASSIGN_OR_RETURN(std::vector<LoweringUnit> units, loweringUnits(graph));
      std::map<const Node *, int64_t> position;
      for (const Node *n : graph.nodes())
        position.emplace(n, static_cast<int64_t>(position.size()));
      for (const LoweringUnit &u : units) {
        int64_t at = loopAt >= 0 ? loopAt : position[u.node];
        if (u.node->body()) {
          NNC_TRY(probe(*u.node->body(), at));
          continue;
        }
        std::vector<tuning::Problem> found;
        tuning::LowerOptions lo(opts.cpu);
        lo.gpu = opts.opencl->target();
        lo.loopBody = loopAt >= 0;
        lo.onTunable = [&](const tuning::Problem &p, bool) { found.push_back(p); };
        NNC_TRY(lowerUnit(u, "probe", lo).takeError());
        collect(u, found);
        for (const tuning::Problem &p : found)
          problemsAt[at].push_back(index.at(p.signature));
      }
      return Error::success();
    };
    NNC_TRY(probe(g, -1));
  } else {
    // A loop's body holds the kernels that run in every iteration (a recurrent net's step):
    // its nodes are probed too, with the loop-body defaults the launch plan lowers them with.
    std::function<Error(const Graph &, bool)> probe = [&](const Graph &graph,
                                                          bool loopBody) -> Error {
      for (const Node *n : graph.nodes()) {
        if (n->kind() == OpKind::Constant)
          continue;
        if (n->body()) {
          NNC_TRY(probe(*n->body(), /*loopBody=*/true));
          continue;
        }
        std::vector<tuning::Problem> found;
        tuning::LowerOptions lo(opts.cpu);
        lo.threads = opts.threads;
        lo.loopBody = loopBody;
        lo.onTunable = [&](const tuning::Problem &p, bool) { found.push_back(p); };
        NNC_TRY(lowerNode(*n, "probe", lo).takeError());
        LoweringUnit u;
        u.node = n;
        collect(u, found);
      }
      return Error::success();
    };
    NNC_TRY(probe(g, /*loopBody=*/false));
  }
  Progress progress(opts.progress, opts.budgetSeconds);
  size_t total = summary.kernels.size();

  // 2. Defaults and references. On OpenCL, where each measurement is a program build, the
  // whole model runs once with its default configs (one build, usually from the program
  // cache) and its kernels' device times weigh the problems; each problem's own default is
  // measured when its search starts, so the budget goes to the heaviest kernels first.
  std::vector<std::unique_ptr<KernelBench>> benches(total);
  std::vector<std::vector<std::vector<char>>> refs(total);
  std::vector<tuning::Config> defaults(total);
  std::vector<bool> usable(total, false);
  auto measureDefault = [&](size_t i) -> Error {
    TuneSummary::Kernel &k = summary.kernels[i];
    if (opencl)
      benches[i] = std::make_unique<ClKernelBench>(unitOf[i], *opts.opencl, opts.cpu, 1234 + i);
    else
      benches[i] = std::make_unique<CpuKernelBench>(*unitOf[i].node, 1234 + i);
    NNC_TRY(benches[i]->prepare(k.problem, defaults[i]));
    NNC_ASSIGN_OR_RETURN(k.defaultMs, benches[i]->time(20));
    k.bestMs = k.defaultMs;
    refs[i] = benches[i]->results();
    return Error::success();
  };
  std::vector<double> modelMs; // OpenCL: per problem, its kernels' device time in the model
  if (opencl && total > 0) {
    OpenCLOptions o(opts.cpu, opts.opencl->target());
    o.profile = true;
    NNC_ASSIGN_OR_RETURN(std::unique_ptr<OpenCLExecutable> exe, OpenCLExecutable::compile(g, o));
    std::mt19937_64 rng(99);
    std::vector<Tensor> inputs;
    for (const Value *v : g.inputs())
      inputs.push_back(randomOperand(*v, rng));
    NNC_TRY(exe->run(inputs).takeError()); // the first launch may build the kernels
    exe->resetRunCounters();
    for (int r = 0; r < 3; ++r)
      NNC_TRY(exe->run(inputs).takeError());
    modelMs.assign(total, 0);
    for (const KernelTime &kt : exe->kernelTimes()) {
      size_t end = kt.name.find('_');
      if (kt.name.size() < 2 || kt.name[0] != 'n' || end == std::string::npos)
        continue;
      auto it = problemsAt.find(std::strtoll(kt.name.c_str() + 1, nullptr, 10));
      if (it != problemsAt.end())
        for (size_t i : it->second)
          modelMs[i] += kt.deviceMs / 3 / double(it->second.size());
    }
  }
  for (size_t i = 0; i < total && !stopped(); ++i) {
    TuneSummary::Kernel &k = summary.kernels[i];
    const tuning::Space *space = tuning::findSpace(k.problem.kind);
    if (!space)
      continue;
    defaults[i] = space->defaults(k.problem);
    k.bestConfig = tuning::configStr(defaults[i]);
    usable[i] = true;
    if (opencl) {
      // The model's time for it, per use, until its own measurement.
      k.defaultMs = k.bestMs = modelMs[i] / std::max(1, k.uses);
      continue;
    }
    NNC_TRY(measureDefault(i));
    progress.update(secondsSince(start), i + 1, total, "default " + k.problem.signature, k.bestMs,
                    k.defaultMs, 0);
  }

  // 3. Budget by time share, largest first.
  std::vector<size_t> order;
  for (size_t i = 0; i < total; ++i)
    if (usable[i])
      order.push_back(i);
  auto weight = [&](size_t i) { return summary.kernels[i].defaultMs * summary.kernels[i].uses; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight(a) > weight(b); });
  double weightTotal = 0;
  for (size_t i : order)
    weightTotal += weight(i);
  // A third of the budget is shared evenly (every kernel gets some trials), the rest by time
  // share; what a kernel leaves unused (or overspends) carries over to the next.
  double searchBudget = std::max(0.0, opts.budgetSeconds - secondsSince(start)), carry = 0;
  auto planned = [&](size_t i) {
    double even = searchBudget / 3 / double(order.size());
    return even + (weightTotal > 0 ? searchBudget * 2 / 3 * weight(i) / weightTotal : 0.0);
  };

  std::mt19937_64 rng(42);
  for (size_t oi = 0; oi < order.size(); ++oi) {
    size_t i = order[oi];
    TuneSummary::Kernel &k = summary.kernels[i];
    const tuning::Space &space = *tuning::findSpace(k.problem.kind);
    double share = planned(i) + carry;
    auto kernelStart = Clock::now();
    // OpenCL: the default measured now, where there is budget for it; past the budget the
    // default is recorded with the model's time for it and no candidates.
    bool budgetLeft = !stopped() && secondsSince(start) < opts.budgetSeconds;
    if (!benches[i] && budgetLeft) {
      NNC_TRY(measureDefault(i));
      progress.update(secondsSince(start), oi + 1, total, "default " + k.problem.signature,
                      k.bestMs, k.defaultMs, 0);
    }
    if (!benches[i]) {
      if (stopped())
        break;
      // Unmeasured here: a record of the default unless an earlier run left one.
      NNC_ASSIGN_OR_RETURN(auto earlier,
                           cache.find(k.problem.kind, k.problem.signature, device, space.version));
      if (!earlier)
        NNC_TRY(cache.put({k.problem.kind, k.problem.signature, device, space.version, k.bestConfig,
                           k.defaultMs, k.defaultMs, 0, ""}));
      else
        k.bestConfig = earlier->config;
      progress.update(secondsSince(start), oi + 1, total, k.problem.signature, k.bestMs,
                      k.defaultMs, 0, /*final=*/true);
      continue;
    }
    DType t = benches[i]->resultDtype();

    // 4. Evolutionary search.
    std::map<std::string, double> tried; // config -> ms (< 0: rejected or failed)
    std::vector<std::pair<double, tuning::Config>> population{{k.defaultMs, defaults[i]}};
    tried[k.bestConfig] = k.defaultMs;
    NNC_ASSIGN_OR_RETURN(auto previous, cache.trials(k.problem.signature, device, space.version));
    for (auto &[cs, ms] : previous) {
      tried[cs] = ms;
      std::optional<tuning::Config> c = tuning::parseConfig(cs);
      if (c && ms > 0 && space.valid(*c, k.problem))
        population.push_back({ms, *c});
    }
    std::sort(population.begin(), population.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    int measured = 0;
    while (!stopped() && secondsSince(kernelStart) < share &&
           secondsSince(start) < opts.budgetSeconds &&
           (opts.maxTrials <= 0 || measured < opts.maxTrials)) {
      std::optional<tuning::Config> cand;
      for (int attempt = 0; attempt < 300 && !cand; ++attempt) {
        bool randomPoint = std::uniform_real_distribution<double>(0, 1)(rng) < 0.2;
        size_t parent = std::uniform_int_distribution<size_t>(
            0, std::min<size_t>(population.size(), 3) - 1)(rng);
        tuning::Config c = mutate(space, population[parent].second, rng, randomPoint);
        if (space.valid(c, k.problem) && !tried.count(tuning::configStr(c)))
          cand = c;
      }
      if (!cand)
        break; // the reachable space is measured
      std::string cs = tuning::configStr(*cand);
      double ms = -1;
      if (!benches[i]->prepare(k.problem, *cand) && !benches[i]->runOnce()) {
        if (opts.corrupt) {
          std::vector<float *> ptrs;
          std::vector<int64_t> sizes;
          benches[i]->floatResults(ptrs, sizes);
          opts.corrupt(ptrs, sizes);
        }
        std::string diff = compareResults(refs[i], benches[i]->results(), t);
        if (!diff.empty())
          ++k.rejected;
        else if (Expected<double> t = benches[i]->time(std::max(10.0, k.defaultMs * 5)))
          ms = *t;
      }
      tried[cs] = ms;
      ++measured;
      NNC_TRY(cache.addTrial(k.problem.signature, device, space.version, cs, ms));
      if (ms > 0) {
        population.push_back({ms, *cand});
        std::sort(population.begin(), population.end(),
                  [](const auto &a, const auto &b) { return a.first < b.first; });
      }
      progress.update(secondsSince(start), oi + 1, total, k.problem.signature, population[0].first,
                      k.defaultMs, measured);
    }
    k.measured = measured;

    // The best against the default once more (noise margin 2%), then the record.
    tuning::Config best = population[0].second;
    double bestMs = population[0].first;
    if (tuning::configStr(best) != tuning::configStr(defaults[i]) && !stopped()) {
      NNC_TRY(benches[i]->prepare(k.problem, best));
      NNC_ASSIGN_OR_RETURN(bestMs, benches[i]->time(std::max(20.0, bestMs * 10)));
      NNC_TRY(benches[i]->prepare(k.problem, defaults[i]));
      NNC_ASSIGN_OR_RETURN(double again, benches[i]->time(std::max(20.0, k.defaultMs * 10)));
      k.defaultMs = std::min(k.defaultMs, again);
      if (bestMs > 0.98 * k.defaultMs) {
        best = defaults[i];
        bestMs = k.defaultMs;
      }
    } else if (tuning::configStr(best) == tuning::configStr(defaults[i])) {
      bestMs = k.defaultMs;
    }
    k.bestMs = bestMs;
    k.bestConfig = tuning::configStr(best);
    progress.update(secondsSince(start), oi + 1, total, k.problem.signature, bestMs, k.defaultMs,
                    measured, /*final=*/true);
    TuningRecord rec{k.problem.kind,
                     k.problem.signature,
                     device,
                     space.version,
                     k.bestConfig,
                     bestMs,
                     k.defaultMs,
                     measured,
                     ""};
    NNC_TRY(cache.put(rec));
    carry = share - secondsSince(kernelStart);
    if (stopped())
      break;
  }
  progress.done();
  summary.interrupted = stopped();
  summary.seconds = secondsSince(start);
  return summary;
}

} // namespace nnc

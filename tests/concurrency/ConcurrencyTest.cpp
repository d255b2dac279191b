// Concurrent use of compiled models: one model run from 8 threads at once, two models sharing
// the thread pool, compiles and runs racing on one object cache and one tuning cache. Short
// enough for the normal suite; scripts/sanitize.sh thread runs them under TSan.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nnc/driver/Driver.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/TuningCache.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

constexpr int kThreads = 8;

fs::path modelsDir() {
  return fs::path(NNC_SHARED_DIR) / "models";
}

/// The shared models (those with test data), by name.
std::vector<std::string> sharedModels() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry &d : fs::directory_iterator(modelsDir(), ec))
    if (fs::exists(d.path() / "model.onnx") && fs::exists(d.path() / "test_data_set_0"))
      names.push_back(d.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// A shared model after the CPU pipeline, with the inputs of its first test data set.
struct Model {
  std::string name;
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> inputs;
};

Model loadModel(const std::string &name) {
  Model m;
  m.name = name;
  fs::path dir = modelsDir() / name;
  Expected<std::unique_ptr<Graph>> g = driver::loadModel((dir / "model.onnx").string());
  EXPECT_TRUE(g) << name << ": " << g.error().message();
  if (!g)
    return m;
  Error e = driver::optimize(**g, CpuTarget::host());
  EXPECT_FALSE(e) << name << ": " << e.message();
  m.graph = std::move(*g);
  for (size_t k = 0;; ++k) {
    fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(p))
      break;
    Expected<Tensor> t = driver::readTensorFile(p.string());
    EXPECT_TRUE(t) << p << ": " << t.error().message();
    if (t)
      m.inputs.push_back(*t);
  }
  return m;
}

/// Empty when `actual` is bit for bit `expected` (the same executable on the same inputs).
std::string sameOutputs(const std::vector<Tensor> &expected, const std::vector<Tensor> &actual) {
  if (expected.size() != actual.size())
    return fmt::format("{} outputs, expected {}", actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor &e = expected[i], &a = actual[i];
    if (e.dtype() != a.dtype() || e.extents() != a.extents() ||
        std::memcmp(e.rawData(), a.rawData(), e.byteSize()) != 0)
      return fmt::format("output {} differs from the single run's", i);
  }
  return "";
}

/// Runs body(t) on kThreads threads started together; returns the first failure ("" if none).
std::string runTogether(int threads, const std::function<std::string(int)> &body) {
  std::atomic<int> ready{0};
  std::vector<std::string> failures(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads)
        std::this_thread::yield();
      failures[t] = body(t);
    });
  for (std::thread &th : pool)
    th.join();
  for (int t = 0; t < threads; ++t)
    if (!failures[t].empty())
      return fmt::format("thread {}: {}", t, failures[t]);
  return "";
}

/// Runs `runner` `runs` times on `inputs`, comparing each result with `expected`.
std::string runAndCompare(driver::Runner &runner, const std::vector<Tensor> &inputs,
                          const std::vector<Tensor> &expected, int runs) {
  for (int r = 0; r < runs; ++r) {
    Expected<std::vector<Tensor>> out = runner.run(inputs);
    if (!out)
      return out.error().message();
    if (std::string d = sameOutputs(expected, *out); !d.empty())
      return fmt::format("run {}: {}", r, d);
  }
  return "";
}

#define SKIP_WITHOUT_MODELS()                                                                      \
  if (sharedModels().empty())                                                                      \
  GTEST_SKIP() << "shared models not found at " << modelsDir()

// Executable::run may be called from several threads at once: each call takes its own arena.
TEST(Concurrency, EverySharedModelFromEightThreads) {
  SKIP_WITHOUT_MODELS();
  for (const std::string &name : sharedModels()) {
    Model m = loadModel(name);
    ASSERT_TRUE(m.graph) << name;
    driver::ExecOptions opts;
    opts.threads = 2; // the shared pool, with a worker: callers contend for it too
    opts.useTuningCache = false;
    Expected<std::unique_ptr<driver::Runner>> runner = driver::Runner::create(
        *m.graph, driver::Target(driver::Target::Cpu, CpuTarget::host()), opts);
    ASSERT_TRUE(runner) << name << ": " << runner.error().message();
    Expected<std::vector<Tensor>> single = (*runner)->run(m.inputs);
    ASSERT_TRUE(single) << name << ": " << single.error().message();
    std::string failure =
        runTogether(kThreads, [&](int) { return runAndCompare(**runner, m.inputs, *single, 2); });
    EXPECT_EQ(failure, "") << name;
  }
}

// Two models whose parallel loops go to the one process-wide pool, run at once.
TEST(Concurrency, TwoModelsShareThePool) {
  SKIP_WITHOUT_MODELS();
  std::vector<std::string> names = sharedModels();
  std::vector<std::string> picked;
  for (const char *n : {"lenet_b32", "mlp_b32"})
    if (std::find(names.begin(), names.end(), n) != names.end())
      picked.push_back(n);
  if (picked.size() < 2)
    GTEST_SKIP() << "lenet_b32 and mlp_b32 not found at " << modelsDir();
  std::vector<Model> models;
  std::vector<std::unique_ptr<driver::Runner>> runners;
  std::vector<std::vector<Tensor>> expected;
  for (const std::string &n : picked) {
    models.push_back(loadModel(n));
    ASSERT_TRUE(models.back().graph) << n;
    driver::ExecOptions opts;
    opts.threads = 2;
    opts.useTuningCache = false;
    Expected<std::unique_ptr<driver::Runner>> r = driver::Runner::create(
        *models.back().graph, driver::Target(driver::Target::Cpu, CpuTarget::host()), opts);
    ASSERT_TRUE(r) << n << ": " << r.error().message();
    Expected<std::vector<Tensor>> single = (*r)->run(models.back().inputs);
    ASSERT_TRUE(single) << n << ": " << single.error().message();
    runners.push_back(std::move(*r));
    expected.push_back(std::move(*single));
  }
  std::string failure = runTogether(kThreads, [&](int t) {
    size_t i = t % 2;
    return runAndCompare(*runners[i], models[i].inputs, expected[i], 3);
  });
  EXPECT_EQ(failure, "");
}

// Threads that each compile a model into one object cache and read configs from one tuning
// cache, while another thread tunes into that tuning cache: every run gives the outputs of a
// compile without either cache.
TEST(Concurrency, CompileAndRunRaceOnOneCache) {
  SKIP_WITHOUT_MODELS();
  std::vector<std::string> names = sharedModels();
  if (std::find(names.begin(), names.end(), "mlp_b32") == names.end())
    GTEST_SKIP() << "mlp_b32 not found at " << modelsDir();
  Model m = loadModel("mlp_b32");
  ASSERT_TRUE(m.graph);
  fs::path dir =
      fs::temp_directory_path() / fmt::format("nnc-concurrency-{}-{}", ::getpid(), std::rand());
  fs::create_directories(dir);
  std::string objects = (dir / "objects").string(), db = (dir / "tuning.db").string();

  // The outputs of a compile that uses neither cache.
  std::vector<Extents> shapes;
  for (const Tensor &t : m.inputs)
    shapes.push_back(t.extents());
  Expected<std::unique_ptr<Graph>> fixed =
      specializeShapes(*m.graph, shapes, driver::interpreterEvaluator());
  ASSERT_TRUE(fixed) << fixed.error().message();
  CpuOptions plain(CpuTarget::host());
  plain.threads = 2;
  plain.codegen.cacheDir = "";
  Expected<std::unique_ptr<Executable>> ref = Executable::compile(**fixed, plain);
  ASSERT_TRUE(ref) << ref.error().message();
  Expected<std::vector<Tensor>> expected = (*ref)->run(m.inputs);
  ASSERT_TRUE(expected) << expected.error().message();

  std::string failure = runTogether(kThreads, [&](int t) -> std::string {
    if (t == 0) { // the tuner: a few candidates per kernel, stored as it goes
      Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(db);
      if (!cache)
        return cache.error().message();
      TuneOptions to(CpuTarget::host());
      to.threads = 2;
      to.budgetSeconds = 2;
      to.maxTrials = 3;
      to.progress = false;
      Expected<TuneSummary> s = tuneGraph(**fixed, **cache, to);
      return s ? "" : s.error().message();
    }
    for (int round = 0; round < 3; ++round) {
      Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(db);
      if (!cache)
        return cache.error().message();
      CpuOptions opts(CpuTarget::host());
      opts.threads = 2;
      opts.codegen.cacheDir = objects;
      opts.tuning = std::make_shared<CachedConfigs>(std::shared_ptr<TuningCache>(std::move(*cache)),
                                                    cpuDeviceFingerprint(2, CpuTarget::host()));
      Expected<std::unique_ptr<CpuModel>> model =
          CpuModel::create(m.graph->clone(), opts, driver::shapeSpecializer());
      if (!model)
        return model.error().message();
      Expected<std::vector<Tensor>> out = (*model)->run(m.inputs);
      if (!out)
        return out.error().message();
      // A tuned config may sum in another order than the default one: ONNX's tolerance.
      for (size_t i = 0; i < out->size(); ++i)
        if (std::string d = driver::compareTensors((*expected)[i], (*out)[i], 1e-3, 1e-5);
            !d.empty())
          return fmt::format("round {}, output {}: {}", round, i, d);
    }
    return "";
  });
  EXPECT_EQ(failure, "");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

} // namespace

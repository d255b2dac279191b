// The tuning cache in SQLite: tuned configs keyed by (signature, device, space version), and
// the candidates measured so far (so an interrupted tuner resumes without re-measuring).
#include "nnc/runtime/TuningCache.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/support/Warning.h"

namespace nnc {

namespace {

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// A prepared statement, finalized on scope exit.
class Stmt {
public:
  Stmt(sqlite3 *db, const char *sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt &text(int i, const std::string &v) {
    sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT);
    return *this;
  }
  Stmt &integer(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt &real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(s_); }
  std::string col(int i) {
    const unsigned char *t = sqlite3_column_text(s_, i);
    return t ? reinterpret_cast<const char *>(t) : "";
  }
  int64_t colInt(int i) { return sqlite3_column_int64(s_, i); }
  double colReal(int i) { return sqlite3_column_double(s_, i); }

private:
  sqlite3_stmt *s_ = nullptr;
  int rc_;
};

TuningRecord recordFrom(Stmt &s) {
  TuningRecord r;
  r.kind = s.col(0);
  r.signature = s.col(1);
  r.device = s.col(2);
  r.spaceVersion = static_cast<int>(s.colInt(3));
  r.config = s.col(4);
  r.medianMs = s.colReal(5);
  r.defaultMs = s.colReal(6);
  r.trials = s.colInt(7);
  r.updated = s.col(8);
  return r;
}

constexpr const char *kColumns =
    "kind, signature, device, space_version, config, median_ms, default_ms, trials, updated";

} // namespace

std::string cpuDeviceFingerprint(int threads, const CpuTarget &cpu) {
  if (threads <= 0)
    threads = CpuTarget::hostCores();
  return fmt::format("cpu {} | {} | threads={}", CpuTarget::hostModelName(), cpu.str(), threads);
}

std::string openclDeviceFingerprint(const OpenCLDeviceInfo &d) {
  return fmt::format("opencl '{}' | platform '{}' | driver {} | {} CUs | nnc {}", d.deviceName,
                     d.platformName, d.driverVersion, d.computeUnits, NNC_VERSION);
}

std::string TuningCache::defaultPath() {
  if (const char *env = std::getenv("NNC_TUNING_CACHE"); env && *env)
    return env;
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/nnc/tuning.db";
}

TuningCache::~TuningCache() {
  if (db_)
    sqlite3_close(db_);
}

Error TuningCache::exec(const std::string &sql) {
  char *msg = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    return makeError("tuning cache {}: {}", path_, m);
  }
  return Error::success();
}

Expected<std::unique_ptr<TuningCache>> TuningCache::open(const std::string &path, bool readOnly) {
  std::unique_ptr<TuningCache> c(new TuningCache());
  c->path_ = path;
  if (!readOnly) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty())
      std::filesystem::create_directories(parent, ec);
  } else if (!std::filesystem::exists(path)) {
    return makeError("tuning cache {} does not exist", path);
  }
  int flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (sqlite3_open_v2(path.c_str(), &c->db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK)
    return makeError("cannot open the tuning cache {}: {}", path,
                     c->db_ ? sqlite3_errmsg(c->db_) : "out of memory");
  // Writers wait for each other instead of failing; WAL lets readers run beside a writer and
  // keeps the file valid when a process dies mid-transaction.
  sqlite3_busy_timeout(c->db_, 30000);
  if (!readOnly) {
    // Two processes opening a new cache at once race to switch it to WAL, and SQLite answers
    // the loser SQLITE_BUSY at once, without the busy handler: retry that for as long as the
    // busy timeout. The tables are created under a write lock taken up front (BEGIN
    // IMMEDIATE waits through the busy handler; a read lock upgraded later would not).
    NNC_TRY(c->execRetryingBusy("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
    NNC_TRY(c->execRetryingBusy(
        "BEGIN IMMEDIATE;"
        "CREATE TABLE IF NOT EXISTS tuning("
        " kind TEXT NOT NULL, signature TEXT NOT NULL, device TEXT NOT NULL,"
        " space_version INTEGER NOT NULL, config TEXT NOT NULL, median_ms REAL NOT NULL,"
        " default_ms REAL NOT NULL, trials INTEGER NOT NULL, updated TEXT NOT NULL,"
        " PRIMARY KEY(signature, device, space_version));"
        "CREATE TABLE IF NOT EXISTS trials("
        " signature TEXT NOT NULL, device TEXT NOT NULL, space_version INTEGER NOT NULL,"
        " config TEXT NOT NULL, ms REAL NOT NULL,"
        " PRIMARY KEY(signature, device, space_version, config));"
        "COMMIT;"));
  }
  return c;
}

Expected<std::optional<TuningRecord>> TuningCache::find(const std::string &kind,
                                                        const std::string &signature,
                                                        const std::string &device,
                                                        int spaceVersion) {
  Stmt s(db_, fmt::format("SELECT {} FROM tuning WHERE kind=?1 AND signature=?2 AND device=?3 "
                          "AND space_version=?4",
                          kColumns)
                  .c_str());
  if (!s.ok())
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  s.text(1, kind).text(2, signature).text(3, device).integer(4, spaceVersion);
  int rc = s.step();
  if (rc == SQLITE_ROW)
    return std::optional<TuningRecord>(recordFrom(s));
  if (rc != SQLITE_DONE)
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  return std::optional<TuningRecord>();
}

Error TuningCache::execRetryingBusy(const std::string &sql) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    char *msg = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg);
    if (rc == SQLITE_OK)
      return Error::success();
    std::string m = msg ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    if (!sqlite3_get_autocommit(db_))
      (void)exec("ROLLBACK");
    bool busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
    if (!busy || std::chrono::steady_clock::now() - start > std::chrono::seconds(30))
      return makeError("tuning cache {}: {}", path_, m);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Error TuningCache::put(const TuningRecord &r) {
  NNC_TRY(exec("BEGIN IMMEDIATE"));
  Stmt s(db_, "INSERT INTO tuning(kind, signature, device, space_version, config, median_ms,"
              " default_ms, trials, updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
              " ON CONFLICT(signature, device, space_version) DO UPDATE SET"
              " trials = tuning.trials + excluded.trials, updated = excluded.updated,"
              " config = CASE WHEN excluded.median_ms < tuning.median_ms"
              "   THEN excluded.config ELSE tuning.config END,"
              " default_ms = CASE WHEN excluded.median_ms < tuning.median_ms"
              "   THEN excluded.default_ms ELSE tuning.default_ms END,"
              " median_ms = MIN(tuning.median_ms, excluded.median_ms)");
  int rc = SQLITE_ERROR;
  if (s.ok()) {
    s.text(1, r.kind).text(2, r.signature).text(3, r.device).integer(4, r.spaceVersion);
    s.text(5, r.config).real(6, r.medianMs).real(7, r.defaultMs).integer(8, r.trials);
    s.text(9, r.updated.empty() ? utcNow() : r.updated);
    rc = s.step();
  }
  if (rc != SQLITE_DONE) {
    std::string m = sqlite3_errmsg(db_);
    (void)exec("ROLLBACK");
    return makeError("tuning cache {}: {}", path_, m);
  }
  return exec("COMMIT");
}

Expected<std::vector<TuningRecord>> TuningCache::all() {
  Stmt s(db_,
         fmt::format("SELECT {} FROM tuning ORDER BY kind, signature, device", kColumns).c_str());
  if (!s.ok())
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  std::vector<TuningRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW)
    out.push_back(recordFrom(s));
  if (rc != SQLITE_DONE)
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  return out;
}

Expected<int64_t> TuningCache::prune(const std::string &keepDevice) {
  return prune(keepDevice.empty() ? std::vector<std::string>{}
                                  : std::vector<std::string>{keepDevice});
}

Expected<int64_t> TuningCache::prune(const std::vector<std::string> &keepDevices) {
  NNC_ASSIGN_OR_RETURN(std::vector<TuningRecord> recs, all());
  NNC_TRY(exec("BEGIN IMMEDIATE"));
  int64_t removed = 0;
  for (const TuningRecord &r : recs) {
    const tuning::Space *space = tuning::findSpace(r.kind);
    bool here = std::any_of(keepDevices.begin(), keepDevices.end(), [&](const std::string &d) {
      return !d.empty() && r.device.rfind(d, 0) == 0;
    });
    bool keep = here && space && space->version == r.spaceVersion;
    if (keep)
      continue;
    for (const char *table : {"tuning", "trials"}) {
      Stmt s(db_, fmt::format("DELETE FROM {} WHERE signature=?1 AND device=?2 AND "
                              "space_version=?3",
                              table)
                      .c_str());
      s.text(1, r.signature).text(2, r.device).integer(3, r.spaceVersion);
      if (!s.ok() || s.step() != SQLITE_DONE) {
        std::string m = sqlite3_errmsg(db_);
        (void)exec("ROLLBACK");
        return makeError("tuning cache {}: {}", path_, m);
      }
    }
    ++removed;
  }
  NNC_TRY(exec("COMMIT"));
  return removed;
}

Expected<std::vector<std::pair<std::string, double>>>
TuningCache::trials(const std::string &signature, const std::string &device, int spaceVersion) {
  Stmt s(db_, "SELECT config, ms FROM trials WHERE signature=?1 AND device=?2 AND "
              "space_version=?3");
  if (!s.ok())
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  s.text(1, signature).text(2, device).integer(3, spaceVersion);
  std::vector<std::pair<std::string, double>> out;
  while (s.step() == SQLITE_ROW)
    out.push_back({s.col(0), s.colReal(1)});
  return out;
}

Error TuningCache::addTrial(const std::string &signature, const std::string &device,
                            int spaceVersion, const std::string &config, double ms) {
  Stmt s(db_, "INSERT OR REPLACE INTO trials(signature, device, space_version, config, ms)"
              " VALUES(?1, ?2, ?3, ?4, ?5)");
  if (!s.ok())
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  s.text(1, signature).text(2, device).integer(3, spaceVersion).text(4, config).real(5, ms);
  if (s.step() != SQLITE_DONE)
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  return Error::success();
}

Expected<std::string> TuningCache::integrityCheck() {
  Stmt s(db_, "PRAGMA integrity_check");
  if (!s.ok() || s.step() != SQLITE_ROW)
    return makeError("tuning cache {}: {}", path_, sqlite3_errmsg(db_));
  return s.col(0);
}

std::optional<tuning::Config> CachedConfigs::lookup(const tuning::Problem &p) const {
  const tuning::Space *space = tuning::findSpace(p.kind);
  if (!space)
    return std::nullopt;
  Expected<std::optional<TuningRecord>> r =
      cache_->find(p.kind, p.signature, device_, space->version);
  if (!r) {
    warnOnce(fmt::format("{}; using default schedules", r.error().message()));
    return std::nullopt;
  }
  if (!*r)
    return std::nullopt;
  return tuning::parseConfig((*r)->config);
}

} // namespace nnc

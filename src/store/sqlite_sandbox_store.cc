#include "store/sqlite_sandbox_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace sandcastle::store {

namespace {

using Clock = std::chrono::system_clock;

// Names the server sets (caller, tool, language, reason): bounded anyway.
constexpr std::size_t kMaxShortField = 256;
constexpr std::size_t kMaxFileName = 4096;
constexpr std::size_t kEntryOverhead = 128;
constexpr const char* kHistoryBytesKey = "history_bytes";  // the fixed columns and the row

const char* const kSchemaV1 = R"sql(
CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, owner TEXT NOT NULL, language TEXT NOT NULL,
  image TEXT NOT NULL, persistent INTEGER NOT NULL, created_at_us INTEGER NOT NULL,
  last_used_at_us INTEGER NOT NULL, ttl_s INTEGER NOT NULL, ttl_action TEXT NOT NULL,
  status TEXT NOT NULL, memory_saved INTEGER NOT NULL, spec_json TEXT NOT NULL);
CREATE TABLE sandbox_packages (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE, manager TEXT NOT NULL,
  name TEXT NOT NULL, version TEXT NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL,
  updated_at_us INTEGER NOT NULL, PRIMARY KEY (sandbox_id, manager, name));
CREATE TABLE sandbox_history (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL, at_us INTEGER NOT NULL,
  caller TEXT NOT NULL, tool TEXT NOT NULL, language TEXT NOT NULL, input BLOB NOT NULL,
  stdout BLOB NOT NULL, stderr BLOB NOT NULL, truncated INTEGER NOT NULL, exit_code INTEGER NOT NULL,
  reason TEXT NOT NULL, duration_us INTEGER NOT NULL, files_created TEXT NOT NULL,
  images INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE INDEX sandbox_history_by_sandbox ON sandbox_history(sandbox_id, seq);
CREATE INDEX sandbox_history_by_time ON sandbox_history(at_us, seq);
CREATE TABLE sandbox_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO sandbox_meta(key, value) VALUES ('history_bytes', 0), ('seq_reserved', 0);
)sql";

// Version 2: the server running each sandbox ("pid:start"), so a start
// removes only the ephemeral records of servers that are gone.
const char* const kSchemaV2 = "ALTER TABLE sandboxes ADD COLUMN server TEXT NOT NULL DEFAULT ''";

constexpr const char* kSql[SqliteSandboxStore::kStmtCount] = {
    // kPutRecord
    "INSERT INTO sandboxes(id, name, owner, language, image, persistent, created_at_us, "
    "last_used_at_us,"
    " ttl_s, ttl_action, status, memory_saved, spec_json, server) "
    "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)"
    " ON CONFLICT(id) DO UPDATE SET name=?2, owner=?3, language=?4, image=?5, persistent=?6,"
    " created_at_us=?7, last_used_at_us=?8, ttl_s=?9, ttl_action=?10, status=?11, memory_saved=?12,"
    " spec_json=?13, server=?14",
    // kGetRecord
    "SELECT id, name, owner, language, image, persistent, created_at_us, last_used_at_us, ttl_s, "
    "ttl_action,"
    " status, memory_saved, spec_json, server FROM sandboxes WHERE id = ?1",
    // kListRecords
    "SELECT id, name, owner, language, image, persistent, created_at_us, last_used_at_us, ttl_s, "
    "ttl_action,"
    " status, memory_saved, spec_json, server FROM sandboxes ORDER BY id",
    // kDeleteRecord
    "DELETE FROM sandboxes WHERE id = ?1",
    // kSetStatus
    "UPDATE sandboxes SET status = ?2, memory_saved = ?3 WHERE id = ?1",
    // kTouch
    "UPDATE sandboxes SET last_used_at_us = ?2 WHERE id = ?1",
    // kPutPackage
    "INSERT INTO sandbox_packages(sandbox_id, manager, name, version, state, error, updated_at_us)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7) ON CONFLICT(sandbox_id, manager, name) DO UPDATE SET version=?4,"
    " state=?5, error=?6, updated_at_us=?7",
    // kListPackages
    "SELECT name, manager, version, state, error, updated_at_us FROM sandbox_packages WHERE "
    "sandbox_id = ?1"
    " ORDER BY manager, name",
    // kDeletePackages
    "DELETE FROM sandbox_packages WHERE sandbox_id = ?1",
    // kAppendHistory
    "INSERT INTO sandbox_history(sandbox_id, at_us, caller, tool, language, input, stdout, stderr, "
    "truncated,"
    " exit_code, reason, duration_us, files_created, images, bytes, seq)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)",
    // kPageHistory
    "SELECT seq, sandbox_id, at_us, caller, tool, language, input, stdout, stderr, truncated, "
    "exit_code,"
    " reason, duration_us, files_created, images FROM sandbox_history WHERE sandbox_id = ?1"
    " ORDER BY seq DESC LIMIT ?2",
    // kPageHistoryBefore
    "SELECT seq, sandbox_id, at_us, caller, tool, language, input, stdout, stderr, truncated, "
    "exit_code,"
    " reason, duration_us, files_created, images FROM sandbox_history WHERE sandbox_id = ?1 AND "
    "seq < ?3"
    " ORDER BY seq DESC LIMIT ?2",
    // kOldestHistory
    // (by time: servers sharing the file hand out seqs from separate blocks)
    "SELECT seq, bytes, at_us FROM sandbox_history ORDER BY at_us, seq LIMIT 64",
    // kDeleteHistoryUpTo
    "DELETE FROM sandbox_history WHERE at_us < ?1 OR (at_us = ?1 AND seq <= ?2)",
    // kSandboxHistoryBytes
    "SELECT COALESCE(SUM(bytes), 0) FROM sandbox_history WHERE sandbox_id = ?1",
    // kDeleteSandboxHistory
    "DELETE FROM sandbox_history WHERE sandbox_id = ?1",
    // kSetHistoryBytes
    "INSERT INTO sandbox_meta(key, value) VALUES('history_bytes', ?1)"
    " ON CONFLICT(key) DO UPDATE SET value = ?1",
    // kGetMeta
    "SELECT value FROM sandbox_meta WHERE key = ?1",
    // kReserveSeqs: past every seq reserved or used, by any server on this file
    "UPDATE sandbox_meta SET value = MAX(value, (SELECT COALESCE(MAX(seq), 0) FROM "
    "sandbox_history)) + ?1"
    " WHERE key = 'seq_reserved' RETURNING value",
    // kBegin, kCommit, kRollback
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
};

std::int64_t to_us(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
Clock::time_point from_us(std::int64_t us) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(us)));
}

// Cuts `s` to at most `n` bytes without splitting a UTF-8 sequence.
bool cap(std::string& s, std::size_t n) {
  if (s.size() <= n) return false;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return true;
}

// Binds, steps and resets one cached statement.
class Use {
 public:
  explicit Use(sqlite3_stmt* st) : st_(st) {}
  ~Use() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  // Bound without a copy: the value must outlive the step (no temporaries).
  Use& text(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Use& text(int i, std::string&& v) = delete;
  // A string literal (sandbox_status_name).
  Use& text(int i, const char* literal) {
    sqlite3_bind_text(st_, i, literal, -1, SQLITE_STATIC);
    return *this;
  }
  Use& blob(int i, std::string&& v) = delete;
  Use& blob(int i, const std::string& v) {
    // A zero-length blob still needs a non-null pointer to be a blob, not NULL.
    sqlite3_bind_blob(st_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Use& num(int i, std::int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(st_); }
  std::string col_text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_blob(st_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c)))
             : std::string();
  }
  std::int64_t col_num(int c) const { return sqlite3_column_int64(st_, c); }

 private:
  sqlite3_stmt* st_;
};

SandboxRecord read_record(const Use& u) {
  SandboxRecord r;
  r.id = u.col_text(0);
  r.name = u.col_text(1);
  r.owner = u.col_text(2);
  r.language = u.col_text(3);
  r.image = u.col_text(4);
  r.persistent = u.col_num(5) != 0;
  r.created_at = from_us(u.col_num(6));
  r.last_used_at = from_us(u.col_num(7));
  r.ttl = std::chrono::seconds(u.col_num(8));
  r.ttl_action = u.col_text(9);
  r.status = parse_sandbox_status(u.col_text(10)).value_or(SandboxStatus::kStopped);
  r.memory_saved = u.col_num(11) != 0;
  r.spec_json = u.col_text(12);
  r.server = u.col_text(13);
  return r;
}

HistoryEntry read_entry(const Use& u) {
  HistoryEntry e;
  e.seq = u.col_num(0);
  e.sandbox_id = u.col_text(1);
  e.at = from_us(u.col_num(2));
  e.caller = u.col_text(3);
  e.tool = u.col_text(4);
  e.language = u.col_text(5);
  e.input = u.col_text(6);
  e.stdout_data = u.col_text(7);
  e.stderr_data = u.col_text(8);
  e.truncated = u.col_num(9) != 0;
  e.exit_code = static_cast<int>(u.col_num(10));
  e.reason = u.col_text(11);
  e.duration_us = u.col_num(12);
  // Written by append_history (a flat array of capped names), but read back
  // from a file: bounded like any other JSON from outside.
  auto files =
      parse_json(u.col_text(13), JsonLimits{.max_bytes = std::size_t{1} << 20, .max_depth = 2});
  if (files.ok() && files->is_array())
    for (const auto& f : *files)
      if (f.is_string()) e.files_created.push_back(f.get<std::string>());
  e.images = static_cast<int>(u.col_num(14));
  return e;
}

}  // namespace

const std::vector<Migration>& sandbox_migrations() {
  static const std::vector<Migration> kMigrations = {{1, kSchemaV1}, {2, kSchemaV2}};
  return kMigrations;
}

HistoryEntry cap_history_entry(HistoryEntry e, const HistoryLimits& limits) {
  bool cut = false;
  cut |= cap(e.input, limits.max_input_bytes);
  cut |= cap(e.stdout_data, limits.max_output_bytes);
  cut |= cap(e.stderr_data, limits.max_output_bytes);
  if (e.files_created.size() > limits.max_files) {
    e.files_created.resize(limits.max_files);
    cut = true;
  }
  // The names together are bounded too (1,000 paths of 4 KiB would be 4 MiB).
  std::size_t names = 0;
  for (std::size_t i = 0; i < e.files_created.size(); ++i) {
    cut |= cap(e.files_created[i], kMaxFileName);
    names += e.files_created[i].size();
    if (names > limits.max_output_bytes) {
      e.files_created.resize(i);
      cut = true;
      break;
    }
  }
  for (auto* s : {&e.sandbox_id, &e.caller, &e.tool, &e.language, &e.reason})
    (void)cap(*s, kMaxShortField);
  e.truncated = e.truncated || cut;
  return e;
}

std::uint64_t history_entry_bytes(const HistoryEntry& e) {
  std::uint64_t n = kEntryOverhead + e.sandbox_id.size() + e.caller.size() + e.tool.size() +
                    e.language.size() + e.input.size() + e.stdout_data.size() +
                    e.stderr_data.size() + e.reason.size();
  for (const auto& f : e.files_created) n += f.size() + 4;
  return n;
}

Result<std::unique_ptr<SqliteSandboxStore>> SqliteSandboxStore::open(std::shared_ptr<StateDb> db,
                                                                     HistoryLimits limits) {
  std::unique_ptr<SqliteSandboxStore> s(new SqliteSandboxStore(std::move(db), limits));
  if (auto p = s->prepare_all(); !p.ok()) return p.error();
  {
    std::lock_guard lock(s->mu_);
    // A budget lowered since the last start applies at once.
    if (auto b = s->step_done(kBegin, "begin"); !b.ok()) return b.error();
    auto t = s->read_total_locked();
    if (t.ok() && s->total_bytes_ > s->limits_.max_bytes) t = s->trim_locked();
    if (t.ok()) t = s->step_done(kCommit, "commit");
    if (!t.ok()) {
      (void)s->step_done(kRollback, "rollback");
      return t.error();
    }
  }
  if (s->limits_.max_bytes > 0) s->writer_ = std::thread([p = s.get()] { p->writer_loop(); });
  return s;
}

SqliteSandboxStore::~SqliteSandboxStore() {
  {
    std::lock_guard lock(q_mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (writer_.joinable()) writer_.join();  // writes what is still queued first
  for (auto* st : stmts_) sqlite3_finalize(st);
}

void SqliteSandboxStore::writer_loop() {
  std::unique_lock lock(q_mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is written
    // Gathers more: one transaction for many runs, and no wake-up per run.
    const std::size_t enough = std::max<std::size_t>(1, limits_.max_queued / 2);
    work_cv_.wait_for(lock, limits_.batch_window, [&] {
      return stop_ || flushing_ > 0 || queue_.size() >= enough ||
             unwritten_bytes_ >= limits_.max_queued_bytes / 2;
    });
    std::vector<HistoryEntry> batch(std::make_move_iterator(queue_.begin()),
                                    std::make_move_iterator(queue_.end()));
    queue_.clear();
    for (const auto& e : batch) inflight_ids_.push_back(e.sandbox_id);
    lock.unlock();
    Status s;
    {
      std::lock_guard db_lock(mu_);
      s = write_batch_locked(batch);
    }
    // A failed batch is lost (logged); the runs it recorded have answered.
    if (!s.ok())
      spdlog::warn("run history: {} entries not recorded: {}", batch.size(), s.error().message());
    lock.lock();
    inflight_ids_.clear();
    unwritten_ -= batch.size();
    for (const auto& e : batch) unwritten_bytes_ -= history_entry_bytes(e);
    written_count_ += batch.size();
    written_cv_.notify_all();
  }
}

void SqliteSandboxStore::flush() const {
  std::unique_lock lock(q_mu_);
  const std::uint64_t target = appended_count_;
  if (written_count_ >= target) return;
  ++flushing_;
  work_cv_.notify_one();
  written_cv_.wait(lock, [&] { return written_count_ >= target; });
  --flushing_;
}

bool SqliteSandboxStore::pending_for(const std::string& id) const {
  std::lock_guard lock(q_mu_);
  for (const auto& e : queue_)
    if (e.sandbox_id == id) return true;
  return std::find(inflight_ids_.begin(), inflight_ids_.end(), id) != inflight_ids_.end();
}

Status SqliteSandboxStore::read_total_locked() {
  Use u(stmt(kGetMeta));
  u.text(1, kHistoryBytesKey);
  int rc = u.step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_->error(rc, "read history size");
  total_bytes_ = rc == SQLITE_ROW ? static_cast<std::uint64_t>(u.col_num(0)) : 0;
  return ok_status();
}

Status SqliteSandboxStore::reserve_seqs_locked() {
  Use u(stmt(kReserveSeqs));
  u.num(1, kSeqBlock);
  int rc = u.step();
  if (rc != SQLITE_ROW)
    return db_->error(rc == SQLITE_DONE ? SQLITE_CORRUPT : rc, "reserve history seqs");
  seq_end_ = u.col_num(0);
  next_seq_ = seq_end_ - kSeqBlock + 1;
  return ok_status();
}

Status SqliteSandboxStore::prepare_all() {
  for (std::size_t i = 0; i < kStmtCount; ++i) {
    int rc = sqlite3_prepare_v3(db_->handle(), kSql[i], -1, SQLITE_PREPARE_PERSISTENT, &stmts_[i],
                                nullptr);
    if (rc != SQLITE_OK) return db_->error(rc, "prepare statement " + std::to_string(i));
  }
  return ok_status();
}

sqlite3_stmt* SqliteSandboxStore::stmt(StmtId id) const {
  return stmts_[id];
}

Status SqliteSandboxStore::step_done(StmtId id, const char* what) const {
  Use u(stmt(id));
  int rc = u.step();
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return ok_status();
  return db_->error(rc, what);
}

Status SqliteSandboxStore::put(const SandboxRecord& r) {
  std::lock_guard lock(mu_);
  Use u(stmt(kPutRecord));
  u.text(1, r.id).text(2, r.name).text(3, r.owner).text(4, r.language).text(5, r.image);
  u.num(6, r.persistent)
      .num(7, to_us(r.created_at))
      .num(8, to_us(r.last_used_at))
      .num(9, r.ttl.count());
  u.text(10, r.ttl_action)
      .text(11, sandbox_status_name(r.status))
      .num(12, r.memory_saved)
      .text(13, r.spec_json)
      .text(14, r.server);
  int rc = u.step();
  return rc == SQLITE_DONE ? ok_status() : Status(db_->error(rc, "store sandbox " + r.id));
}

Status SqliteSandboxStore::remove(const std::string& id) {
  if (pending_for(id)) flush();  // its runs still queued go with it
  std::lock_guard lock(mu_);
  std::uint64_t freed = 0;
  if (auto s = step_done(kBegin, "begin"); !s.ok()) return s;
  auto run = [&]() -> Status {
    {
      Use u(stmt(kSandboxHistoryBytes));
      u.text(1, id);
      int rc = u.step();
      if (rc != SQLITE_ROW) return db_->error(rc, "size history of " + id);
      freed = static_cast<std::uint64_t>(u.col_num(0));
    }
    for (StmtId del : {kDeleteSandboxHistory, kDeletePackages, kDeleteRecord}) {
      Use u(stmt(del));
      u.text(1, id);
      if (int rc = u.step(); rc != SQLITE_DONE) return db_->error(rc, "remove sandbox " + id);
    }
    if (freed == 0) return ok_status();
    if (auto t = read_total_locked(); !t.ok()) return t;
    total_bytes_ -= std::min(freed, total_bytes_);
    return set_total_locked(total_bytes_);
  };
  auto s = run();
  if (s.ok()) s = step_done(kCommit, "commit");
  if (!s.ok()) (void)step_done(kRollback, "rollback");
  return s;
}

std::optional<SandboxRecord> SqliteSandboxStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  Use u(stmt(kGetRecord));
  u.text(1, id);
  if (u.step() != SQLITE_ROW) return std::nullopt;
  return read_record(u);
}

Result<std::vector<SandboxRecord>> SqliteSandboxStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<SandboxRecord> out;
  Use u(stmt(kListRecords));
  int rc;
  while ((rc = u.step()) == SQLITE_ROW) out.push_back(read_record(u));
  if (rc != SQLITE_DONE) return db_->error(rc, "list sandbox records");
  return out;
}

Status SqliteSandboxStore::set_status(const std::string& id, SandboxStatus status,
                                      bool memory_saved) {
  std::lock_guard lock(mu_);
  Use u(stmt(kSetStatus));
  u.text(1, id).text(2, sandbox_status_name(status)).num(3, memory_saved);
  if (int rc = u.step(); rc != SQLITE_DONE) return db_->error(rc, "set status of " + id);
  if (sqlite3_changes(db_->handle()) == 0)
    return Error::make(ErrorCode::kNotFound, "no sandbox record " + id);
  return ok_status();
}

Status SqliteSandboxStore::touch(const std::string& id, Clock::time_point at) {
  std::lock_guard lock(mu_);
  Use u(stmt(kTouch));
  u.text(1, id).num(2, to_us(at));
  if (int rc = u.step(); rc != SQLITE_DONE) return db_->error(rc, "touch " + id);
  return ok_status();
}

Status SqliteSandboxStore::put_package(const std::string& id, const PackageEntry& p) {
  std::lock_guard lock(mu_);
  Use u(stmt(kPutPackage));
  u.text(1, id)
      .text(2, p.manager)
      .text(3, p.name)
      .text(4, p.version)
      .text(5, p.state)
      .text(6, p.error);
  u.num(7, to_us(p.updated));
  int rc = u.step();
  if (rc == SQLITE_DONE) return ok_status();
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
    return Error::make(ErrorCode::kNotFound, "no sandbox record " + id);
  return db_->error(rc, "store package " + p.name + " of " + id);
}

std::vector<PackageEntry> SqliteSandboxStore::packages(const std::string& id) const {
  std::lock_guard lock(mu_);
  std::vector<PackageEntry> out;
  Use u(stmt(kListPackages));
  u.text(1, id);
  while (u.step() == SQLITE_ROW) {
    PackageEntry p;
    p.name = u.col_text(0);
    p.manager = u.col_text(1);
    p.version = u.col_text(2);
    p.state = u.col_text(3);
    p.error = u.col_text(4);
    p.updated = from_us(u.col_num(5));
    out.push_back(std::move(p));
  }
  return out;
}

Status SqliteSandboxStore::set_total_locked(std::uint64_t total) {
  Use u(stmt(kSetHistoryBytes));
  u.num(1, static_cast<std::int64_t>(total));
  if (int rc = u.step(); rc != SQLITE_DONE) return db_->error(rc, "update history size");
  return ok_status();
}

Status SqliteSandboxStore::trim_locked() {
  std::uint64_t total = total_bytes_;
  while (total > limits_.max_bytes) {
    std::int64_t upto = 0, upto_at = 0;
    std::uint64_t freed = 0;
    {
      Use u(stmt(kOldestHistory));
      while (freed < total && total - freed > limits_.max_bytes && u.step() == SQLITE_ROW) {
        upto = u.col_num(0);
        freed += static_cast<std::uint64_t>(u.col_num(1));
        upto_at = u.col_num(2);
      }
    }
    if (upto == 0) {  // nothing left to drop: the total was stale
      total = 0;
      break;
    }
    Use d(stmt(kDeleteHistoryUpTo));
    d.num(1, upto_at).num(2, upto);
    if (int rc = d.step(); rc != SQLITE_DONE) return db_->error(rc, "drop old history");
    total -= std::min(freed, total);
  }
  if (auto s = set_total_locked(total); !s.ok()) return s;
  total_bytes_ = total;
  return ok_status();
}

Result<std::int64_t> SqliteSandboxStore::append_history(const HistoryEntry& in) {
  if (limits_.max_bytes == 0) return std::int64_t{0};
  HistoryEntry e = cap_history_entry(in, limits_);
  std::unique_lock lock(q_mu_);
  // Bounded: a writer that falls behind (a slow disk) slows the runs down
  // rather than holding ever more entries that a crash would lose.
  const std::uint64_t bytes = history_entry_bytes(e);
  written_cv_.wait(lock, [&] {
    return stop_ || unwritten_ == 0 ||
           (unwritten_ < limits_.max_queued &&
            unwritten_bytes_ + bytes <= limits_.max_queued_bytes);
  });
  if (next_seq_ > seq_end_) {  // once every kSeqBlock appends: a write now
    std::lock_guard db_lock(mu_);
    if (auto s = reserve_seqs_locked(); !s.ok()) return s.error();
  }
  e.seq = next_seq_++;
  const std::int64_t seq = e.seq;
  queue_.push_back(std::move(e));
  ++unwritten_;
  unwritten_bytes_ += bytes;
  ++appended_count_;
  // The writer needs a wake-up for the first entry of a batch and when the
  // batch is full; in between it is gathering on a timer.
  const bool wake = queue_.size() == 1 ||
                    queue_.size() >= std::max<std::size_t>(1, limits_.max_queued / 2) ||
                    unwritten_bytes_ >= limits_.max_queued_bytes / 2;
  lock.unlock();
  if (wake) work_cv_.notify_one();
  return seq;
}

Status SqliteSandboxStore::write_batch_locked(const std::vector<HistoryEntry>& batch) {
  if (auto s = step_done(kBegin, "begin"); !s.ok()) return s;
  auto run = [&]() -> Status {
    if (auto t = read_total_locked(); !t.ok()) return t;
    std::uint64_t total = total_bytes_;
    for (const auto& e : batch) {
      const std::uint64_t bytes = history_entry_bytes(e);
      const std::string files = nlohmann::json(e.files_created)
                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      Use u(stmt(kAppendHistory));
      u.text(1, e.sandbox_id)
          .num(2, to_us(e.at))
          .text(3, e.caller)
          .text(4, e.tool)
          .text(5, e.language);
      u.blob(6, e.input).blob(7, e.stdout_data).blob(8, e.stderr_data).num(9, e.truncated);
      u.num(10, e.exit_code)
          .text(11, e.reason)
          .num(12, e.duration_us)
          .text(13, files)
          .num(14, e.images);
      u.num(15, static_cast<std::int64_t>(bytes)).num(16, e.seq);
      if (int rc = u.step(); rc != SQLITE_DONE) return db_->error(rc, "record history");
      total += bytes;
    }
    total_bytes_ = total;
    if (total_bytes_ > limits_.max_bytes) return trim_locked();
    return set_total_locked(total_bytes_);
  };
  auto s = run();
  if (s.ok()) s = step_done(kCommit, "commit");
  if (!s.ok()) (void)step_done(kRollback, "rollback");
  return s;
}

HistoryPage SqliteSandboxStore::history(const std::string& id, std::size_t limit,
                                        std::optional<std::int64_t> before) const {
  HistoryPage page;
  if (limit == 0) return page;
  flush();
  std::lock_guard lock(mu_);
  Use u(stmt(before ? kPageHistoryBefore : kPageHistory));
  u.text(1, id).num(2, static_cast<std::int64_t>(limit) + 1);
  if (before) u.num(3, *before);
  while (u.step() == SQLITE_ROW) {
    if (page.entries.size() == limit) {
      page.next_before = page.entries.back().seq;
      break;
    }
    page.entries.push_back(read_entry(u));
  }
  return page;
}

std::uint64_t SqliteSandboxStore::history_bytes() const {
  flush();
  std::lock_guard lock(mu_);
  Use u(stmt(kGetMeta));
  u.text(1, kHistoryBytesKey);
  return u.step() == SQLITE_ROW ? static_cast<std::uint64_t>(u.col_num(0)) : 0;
}

}  // namespace sandcastle::store

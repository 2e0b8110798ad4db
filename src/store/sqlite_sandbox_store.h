// SandboxStore in the state database (state_db.h): the sandbox records,
// their packages and the run history, so persistent sandboxes and their
// history survive a restart. One connection, guarded by a mutex, with its
// statements prepared once.
//
// The history is bounded by a byte budget: after each append, while the
// stored bytes are over it, the oldest entries of any sandbox go. The total
// is kept in a meta row updated in the same transaction, so an append costs
// the same however long the history is.
//
// Appends are written by one writer thread in batches (one transaction
// each, gathered for up to HistoryLimits::batch_window or half the queue),
// so a run does not wait for SQLite: append_history assigns the seq and
// queues the entry. At most HistoryLimits::max_queued entries (and
// max_queued_bytes) are unwritten at any time; an append waits for room
// beyond that. A kill -9 loses those, the runs of the last batch window,
// nothing else. Reads (history, history_bytes) and remove wait for the
// entries queued before them, so they see every append.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "store/sandbox_store.h"
#include "store/state_db.h"

namespace sandcastle::store {

struct HistoryLimits {
  std::uint64_t max_bytes = 256ull << 20;   // --history-max-mb; 0: nothing is recorded
  std::size_t max_input_bytes = 64 << 10;   // the code or command
  std::size_t max_output_bytes = 64 << 10;  // stdout and stderr, each
  std::size_t max_files = 1000;             // names in files_created
  std::size_t max_queued = 256;  // appended but not yet written (what a kill -9 can lose)
  std::uint64_t max_queued_bytes = 16 << 20;    // and their bytes (the server's memory)
  std::chrono::milliseconds batch_window{200};  // how long the writer gathers a batch
};

// `e` with every field cut to `limits` (UTF-8 sequences kept whole);
// truncated is set when anything was cut.
HistoryEntry cap_history_entry(HistoryEntry e, const HistoryLimits& limits);
// The bytes an entry counts against the budget.
std::uint64_t history_entry_bytes(const HistoryEntry& e);

class SqliteSandboxStore : public SandboxStore {
 public:
  // `db` has been migrated (StateDb::open). Trims the history to the
  // budget at once (a budget lowered since the last start).
  static Result<std::unique_ptr<SqliteSandboxStore>> open(std::shared_ptr<StateDb> db,
                                                          HistoryLimits limits = {});
  ~SqliteSandboxStore() override;

  Status put(const SandboxRecord& record) override;
  Status remove(const std::string& id) override;
  std::optional<SandboxRecord> get(const std::string& id) const override;
  Result<std::vector<SandboxRecord>> list() const override;
  Status set_status(const std::string& id, SandboxStatus status, bool memory_saved) override;
  Status touch(const std::string& id, std::chrono::system_clock::time_point at) override;
  Status put_package(const std::string& id, const PackageEntry& p) override;
  std::vector<PackageEntry> packages(const std::string& id) const override;
  // Returns 0 without writing when the budget is 0.
  Result<std::int64_t> append_history(const HistoryEntry& e) override;
  HistoryPage history(const std::string& id, std::size_t limit,
                      std::optional<std::int64_t> before) const override;

  // The bytes the history holds now (the running total).
  std::uint64_t history_bytes() const;
  // Waits until every entry appended so far is written (or failed to be).
  void flush() const;
  const HistoryLimits& limits() const { return limits_; }

  enum StmtId : std::size_t {
    kPutRecord,
    kGetRecord,
    kListRecords,
    kDeleteRecord,
    kSetStatus,
    kTouch,
    kPutPackage,
    kListPackages,
    kDeletePackages,
    kAppendHistory,
    kPageHistory,
    kPageHistoryBefore,
    kOldestHistory,
    kDeleteHistoryUpTo,
    kSandboxHistoryBytes,
    kDeleteSandboxHistory,
    kSetHistoryBytes,
    kGetMeta,
    kReserveSeqs,
    kBegin,
    kCommit,
    kRollback,
    kStmtCount
  };

 private:
  SqliteSandboxStore(std::shared_ptr<StateDb> db, HistoryLimits limits)
      : db_(std::move(db)), limits_(limits) {}
  Status prepare_all();
  sqlite3_stmt* stmt(StmtId id) const;
  Status step_done(StmtId id, const char* what) const;
  // Drops the oldest entries while over budget (mu_ held, in a transaction).
  Status trim_locked();
  Status set_total_locked(std::uint64_t total);
  void writer_loop();
  // Whether entries of `id` are queued or being written.
  bool pending_for(const std::string& id) const;
  // The running total as the database has it: other servers sharing the
  // state dir append too (mu_ held, in a transaction).
  Status read_total_locked();
  // Takes the next kSeqBlock seqs for this server (mu_ held).
  Status reserve_seqs_locked();
  // Writes `batch` in one transaction (mu_ held).
  Status write_batch_locked(const std::vector<HistoryEntry>& batch);

  std::shared_ptr<StateDb> db_;
  HistoryLimits limits_;
  mutable std::mutex mu_;
  std::array<sqlite3_stmt*, kStmtCount> stmts_{};
  std::uint64_t total_bytes_ = 0;

  // The writer's queue. The writer takes mu_ without holding q_mu_.
  mutable std::mutex q_mu_;
  mutable std::condition_variable work_cv_;     // the writer waits for entries (or a flush)
  mutable std::condition_variable written_cv_;  // appenders and readers wait for the writer
  std::deque<HistoryEntry> queue_;
  std::uint64_t unwritten_bytes_ = 0;
  std::size_t unwritten_ = 0;              // queued plus the batch being written
  mutable std::size_t flushing_ = 0;       // readers waiting for the writer: no gathering
  std::uint64_t appended_count_ = 0;       // entries queued since open
  std::uint64_t written_count_ = 0;        // of which written (or failed)
  std::vector<std::string> inflight_ids_;  // sandboxes of the batch being written
  // Seqs come in blocks reserved in the database, so servers sharing the
  // file never hand out the same one (append assigns them without a write).
  static constexpr std::int64_t kSeqBlock = 1024;
  std::int64_t next_seq_ = 1;
  std::int64_t seq_end_ = 0;  // the last seq of the block reserved
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace sandcastle::store

// SqliteSandboxStore on a real SQLite file in a temporary directory.
#include "store/sqlite_sandbox_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

namespace sandcastle::store {
namespace {

using Clock = std::chrono::system_clock;

class SqliteSandboxStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sc-sbstore-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void reopen(HistoryLimits limits = {}) {
    store_.reset();
    auto db = StateDb::open(dir_.string());
    ASSERT_TRUE(db.ok()) << db.error().message();
    auto st = SqliteSandboxStore::open(std::shared_ptr<StateDb>(std::move(db).value()), limits);
    ASSERT_TRUE(st.ok()) << st.error().message();
    store_ = std::move(st).value();
  }
  static SandboxRecord record(const std::string& id) {
    SandboxRecord r;
    r.id = id;
    r.name = "name-" + id;
    r.owner = "key-1";
    r.language = "python";
    r.image = "debian:12";
    r.persistent = true;
    r.created_at = Clock::time_point(std::chrono::microseconds(1'700'000'000'123'456));
    r.last_used_at = Clock::time_point(std::chrono::microseconds(1'700'000'100'000'001));
    r.ttl = std::chrono::seconds(3600);
    r.ttl_action = "pause";
    r.status = SandboxStatus::kPaused;
    r.memory_saved = true;
    r.spec_json = R"({"image":"debian:12","limits":{"memory_mb":512}})";
    return r;
  }
  static HistoryEntry entry(const std::string& sandbox, const std::string& input,
                            std::size_t out_bytes = 10) {
    HistoryEntry e;
    e.sandbox_id = sandbox;
    // Each entry a microsecond after the last: the budget drops the oldest.
    static std::atomic<std::int64_t> tick{0};
    e.at = Clock::time_point(std::chrono::microseconds(1'700'000'200'000'000 + tick++));
    e.caller = "key-1";
    e.tool = "execute_code";
    e.language = "python";
    e.input = input;
    e.stdout_data = std::string(out_bytes, 'o');
    e.stderr_data = "warn\n";
    e.exit_code = 3;
    e.reason = "exited";
    e.duration_us = 1234;
    e.files_created = {"a.txt", "dir/b.png"};
    e.images = 2;
    return e;
  }
  std::filesystem::path dir_;
  std::unique_ptr<SqliteSandboxStore> store_;
};

void expect_same(const SandboxRecord& a, const SandboxRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.language, b.language);
  EXPECT_EQ(a.image, b.image);
  EXPECT_EQ(a.persistent, b.persistent);
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.last_used_at, b.last_used_at);
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(a.ttl_action, b.ttl_action);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.memory_saved, b.memory_saved);
  EXPECT_EQ(a.spec_json, b.spec_json);
}

TEST_F(SqliteSandboxStoreTest, RecordsRoundTripEveryField) {
  auto r = record("sb-000000000001");
  ASSERT_TRUE(store_->put(r).ok());
  auto got = store_->get(r.id);
  ASSERT_TRUE(got);
  expect_same(*got, r);
  EXPECT_FALSE(store_->get("sb-missing"));

  r.name = "renamed";
  r.status = SandboxStatus::kRunning;
  ASSERT_TRUE(store_->put(r).ok());  // put replaces
  ASSERT_TRUE(store_->put(record("sb-000000000002")).ok());
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  auto& all = *listed;
  ASSERT_EQ(all.size(), 2u);
  expect_same(all[0], r);

  ASSERT_TRUE(store_->set_status(r.id, SandboxStatus::kStopped, false).ok());
  EXPECT_EQ(store_->get(r.id)->status, SandboxStatus::kStopped);
  EXPECT_FALSE(store_->get(r.id)->memory_saved);
  auto missing = store_->set_status("sb-missing", SandboxStatus::kPaused, true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  const auto later = Clock::time_point(std::chrono::microseconds(1'800'000'000'000'000));
  ASSERT_TRUE(store_->touch(r.id, later).ok());
  EXPECT_EQ(store_->get(r.id)->last_used_at, later);
}

TEST_F(SqliteSandboxStoreTest, PackagesAreUniquePerNameAndManager) {
  ASSERT_TRUE(store_->put(record("sb-1")).ok());
  PackageEntry p{"requests",   "pip", "",
                 "installing", "",    Clock::time_point(std::chrono::seconds(5))};
  ASSERT_TRUE(store_->put_package("sb-1", p).ok());
  p.version = "2.31.0";
  p.state = "success";
  ASSERT_TRUE(store_->put_package("sb-1", p).ok());
  ASSERT_TRUE(store_->put_package("sb-1", {"requests", "npm", "1.0.0", "success", "", {}}).ok());
  auto ps = store_->packages("sb-1");
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].manager, "npm");
  EXPECT_EQ(ps[1].manager, "pip");
  EXPECT_EQ(ps[1].version, "2.31.0");
  EXPECT_EQ(ps[1].state, "success");
  EXPECT_EQ(ps[1].updated, p.updated);
  // Packages belong to a sandbox record.
  auto orphan = store_->put_package("sb-none", p);
  ASSERT_FALSE(orphan.ok());
  EXPECT_EQ(orphan.error().code, ErrorCode::kNotFound);
}

TEST_F(SqliteSandboxStoreTest, HistoryRoundTripsAndPagesNewestFirst) {
  std::vector<std::int64_t> seqs;
  std::vector<HistoryEntry> sent;
  for (int i = 0; i < 5; ++i) {
    sent.push_back(entry("sb-a", "x = " + std::to_string(i)));
    auto s = store_->append_history(sent.back());
    ASSERT_TRUE(s.ok()) << s.error().message();
    seqs.push_back(*s);
    ASSERT_TRUE(store_->append_history(entry("sb-b", "other")).ok());
  }
  EXPECT_LT(seqs[0], seqs[1]);
  auto p1 = store_->history("sb-a", 2, std::nullopt);
  ASSERT_EQ(p1.entries.size(), 2u);
  EXPECT_EQ(p1.entries[0].input, "x = 4");
  EXPECT_EQ(p1.entries[1].input, "x = 3");
  ASSERT_TRUE(p1.next_before);
  EXPECT_EQ(*p1.next_before, seqs[3]);
  auto p2 = store_->history("sb-a", 2, p1.next_before);
  ASSERT_EQ(p2.entries.size(), 2u);
  EXPECT_EQ(p2.entries[0].input, "x = 2");
  auto p3 = store_->history("sb-a", 2, p2.next_before);
  ASSERT_EQ(p3.entries.size(), 1u);
  EXPECT_EQ(p3.entries[0].input, "x = 0");
  EXPECT_FALSE(p3.next_before);
  EXPECT_TRUE(store_->history("sb-a", 0, std::nullopt).entries.empty());
  EXPECT_TRUE(store_->history("sb-none", 10, std::nullopt).entries.empty());

  const auto& e = p3.entries[0];
  const auto& want = sent[0];
  EXPECT_EQ(e.seq, seqs[0]);
  EXPECT_EQ(e.sandbox_id, "sb-a");
  EXPECT_EQ(e.at, want.at);
  EXPECT_EQ(e.caller, "key-1");
  EXPECT_EQ(e.tool, "execute_code");
  EXPECT_EQ(e.language, "python");
  EXPECT_EQ(e.stdout_data, want.stdout_data);
  EXPECT_EQ(e.stderr_data, "warn\n");
  EXPECT_FALSE(e.truncated);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.reason, "exited");
  EXPECT_EQ(e.duration_us, 1234);
  EXPECT_EQ(e.files_created, want.files_created);
  EXPECT_EQ(e.images, 2);
}

TEST_F(SqliteSandboxStoreTest, FieldsAreCappedAndMarkedTruncated) {
  auto e = entry("sb-a", std::string(70 << 10, 'c'), 100 << 10);
  e.stderr_data = std::string(65535, 'e') + "\xC3\xA9";  // a 2-byte character across the cap
  for (int i = 0; i < 1500; ++i) e.files_created.push_back(std::to_string(i) + ".txt");
  ASSERT_TRUE(store_->append_history(e).ok());
  auto got = store_->history("sb-a", 1, std::nullopt).entries.at(0);
  EXPECT_EQ(got.input.size(), 64u << 10);
  EXPECT_EQ(got.stdout_data.size(), 64u << 10);
  EXPECT_EQ(got.stderr_data.size(), 65535u);  // the character is not split
  EXPECT_EQ(got.files_created.size(), 1000u);
  EXPECT_TRUE(got.truncated);

  // Long names: their total is held to 64 KiB as well.
  auto longer = entry("sb-b", "x");
  longer.files_created.assign(100, std::string(4000, 'n'));
  ASSERT_TRUE(store_->append_history(longer).ok());
  auto kept = store_->history("sb-b", 1, std::nullopt).entries.at(0);
  EXPECT_EQ(kept.files_created.size(), 16u);  // 16 x 4000 <= 65536 < 17 x 4000
  EXPECT_TRUE(kept.truncated);
}

TEST_F(SqliteSandboxStoreTest, BudgetDropsOldestEntriesOfAnySandboxFirst) {
  HistoryLimits limits;
  limits.max_bytes = 1 << 20;
  reopen(limits);
  const auto one = history_entry_bytes(entry("sb-a", "x = 000", 10'000));
  std::vector<std::int64_t> seqs;
  for (int i = 0; i < 300; ++i) {
    auto s = store_->append_history(
        entry(i % 2 ? "sb-a" : "sb-b", "x = " + std::to_string(100 + i), 10'000));
    ASSERT_TRUE(s.ok());
    seqs.push_back(*s);
    ASSERT_LE(store_->history_bytes(), limits.max_bytes);
  }
  const std::size_t fit = limits.max_bytes / one;
  auto a = store_->history("sb-a", 300, std::nullopt).entries;
  auto b = store_->history("sb-b", 300, std::nullopt).entries;
  EXPECT_EQ(a.size() + b.size(), fit);
  EXPECT_EQ(store_->history_bytes(), fit * one);
  // What is left is the newest: the oldest seq kept is the first after those dropped.
  std::int64_t oldest = std::min(a.back().seq, b.back().seq);
  EXPECT_EQ(oldest, seqs[300 - fit]);
  EXPECT_EQ(a.front().seq, seqs[299]);

  // The running total survives a reopen; a smaller budget trims at once.
  limits.max_bytes = 100'000;
  reopen(limits);
  EXPECT_LE(store_->history_bytes(), 100'000u);
  EXPECT_EQ(store_->history("sb-a", 300, std::nullopt).entries.size() +
                store_->history("sb-b", 300, std::nullopt).entries.size(),
            100'000 / one);
}

TEST_F(SqliteSandboxStoreTest, ZeroBudgetRecordsNothing) {
  HistoryLimits limits;
  limits.max_bytes = 0;
  reopen(limits);
  auto s = store_->append_history(entry("sb-a", "x"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, 0);
  EXPECT_TRUE(store_->history("sb-a", 10, std::nullopt).entries.empty());
  EXPECT_EQ(store_->history_bytes(), 0u);
}

TEST_F(SqliteSandboxStoreTest, RemoveTakesPackagesAndHistoryWithIt) {
  ASSERT_TRUE(store_->put(record("sb-a")).ok());
  ASSERT_TRUE(store_->put(record("sb-b")).ok());
  ASSERT_TRUE(store_->put_package("sb-a", {"numpy", "pip", "1", "success", "", {}}).ok());
  ASSERT_TRUE(store_->append_history(entry("sb-a", "1")).ok());
  ASSERT_TRUE(store_->append_history(entry("sb-b", "2")).ok());
  const auto both = store_->history_bytes();
  ASSERT_TRUE(store_->remove("sb-a").ok());
  EXPECT_FALSE(store_->get("sb-a"));
  EXPECT_TRUE(store_->packages("sb-a").empty());
  EXPECT_TRUE(store_->history("sb-a", 10, std::nullopt).entries.empty());
  EXPECT_EQ(store_->history("sb-b", 10, std::nullopt).entries.size(), 1u);
  EXPECT_EQ(store_->history_bytes(), both - history_entry_bytes(entry("sb-a", "1")));
  EXPECT_TRUE(store_->remove("sb-none").ok());
}

TEST_F(SqliteSandboxStoreTest, ReopenKeepsEverything) {
  auto r = record("sb-a");
  ASSERT_TRUE(store_->put(r).ok());
  ASSERT_TRUE(store_->put_package("sb-a", {"left-pad", "npm", "1.3.0", "success", "", {}}).ok());
  auto seq = store_->append_history(entry("sb-a", "print(1)"));
  ASSERT_TRUE(seq.ok());
  const auto bytes = store_->history_bytes();
  reopen();
  ASSERT_TRUE(store_->get("sb-a"));
  expect_same(*store_->get("sb-a"), r);
  ASSERT_EQ(store_->packages("sb-a").size(), 1u);
  EXPECT_EQ(store_->packages("sb-a")[0].version, "1.3.0");
  auto h = store_->history("sb-a", 10, std::nullopt).entries;
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].seq, *seq);
  EXPECT_EQ(store_->history_bytes(), bytes);
  // Sequence numbers keep increasing across a restart.
  auto next = store_->append_history(entry("sb-a", "print(2)"));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, *seq);
}

TEST_F(SqliteSandboxStoreTest, ConcurrentAppendsAreAllWrittenWithUniqueSeqs) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::int64_t> seqs;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        auto s = store_->append_history(entry("sb-" + std::to_string(t), std::to_string(i)));
        ASSERT_TRUE(s.ok());
        std::lock_guard lock(mu);
        seqs.insert(*s);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(seqs.size(), 1200u);
  for (int t = 0; t < 4; ++t) {
    auto h = store_->history("sb-" + std::to_string(t), 1000, std::nullopt).entries;
    ASSERT_EQ(h.size(), 300u);
    EXPECT_EQ(h.front().input, "299");  // each thread's newest first
    EXPECT_EQ(h.back().input, "0");
  }
}

TEST_F(SqliteSandboxStoreTest, ClosingWritesWhatIsStillQueued) {
  HistoryLimits limits;
  limits.max_queued = 1000;
  reopen(limits);
  for (int i = 0; i < 500; ++i)
    ASSERT_TRUE(store_->append_history(entry("sb-a", std::to_string(i))).ok());
  reopen();  // destroys the store right after the appends
  auto h = store_->history("sb-a", 1000, std::nullopt).entries;
  ASSERT_EQ(h.size(), 500u);
  EXPECT_EQ(h.front().input, "499");
}

// Two servers on one state dir (two connections to the file): seqs never
// collide and the budget counts both servers' entries.
TEST_F(SqliteSandboxStoreTest, TwoServersOnOneFileShareSeqsAndTheBudget) {
  HistoryLimits limits;
  limits.max_bytes = 1 << 20;
  reopen(limits);
  auto db2 = StateDb::open(dir_.string());
  ASSERT_TRUE(db2.ok());
  auto other = SqliteSandboxStore::open(std::shared_ptr<StateDb>(std::move(db2).value()), limits);
  ASSERT_TRUE(other.ok());
  std::set<std::int64_t> seqs;
  for (int i = 0; i < 150; ++i) {
    auto a = store_->append_history(entry("sb-a", std::to_string(i), 10'000));
    auto b = (*other)->append_history(entry("sb-b", std::to_string(i), 10'000));
    ASSERT_TRUE(a.ok() && b.ok());
    seqs.insert(*a);
    seqs.insert(*b);
  }
  EXPECT_EQ(seqs.size(), 300u);
  (*other)->flush();
  store_->flush();
  const auto one = history_entry_bytes(entry("sb-a", "100", 10'000));
  auto a = store_->history("sb-a", 300, std::nullopt).entries;
  auto b = store_->history("sb-b", 300, std::nullopt).entries;
  EXPECT_LE(store_->history_bytes(), limits.max_bytes);
  EXPECT_LE((a.size() + b.size()) * one, limits.max_bytes);
  EXPECT_GT((a.size() + b.size() + 2) * one, limits.max_bytes);  // entries of ~10 KB: little slack
  EXPECT_EQ(store_->history_bytes(), (*other)->history_bytes());
  // Each sandbox's newest entries are kept.
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(a.front().input, "149");
  EXPECT_EQ(b.front().input, "149");
}

}  // namespace
// A database made by the first release of the schema (no server column)
// is migrated in place: its records stay, and gain an empty server.
TEST_F(SqliteSandboxStoreTest, VersionOneDatabaseIsMigratedKeepingItsRecords) {
  store_.reset();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  {
    auto v1 = StateDb::open(dir_.string(), {sandbox_migrations().front()});
    ASSERT_TRUE(v1.ok()) << v1.error().message();
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "sandcastle.db").c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "INSERT INTO sandboxes VALUES('sb-old','n','o','python','host',1,1,1,60,"
                           "'destroy','stopped',0,'{}')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  reopen();
  auto old = store_->get("sb-old");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->server, "");
  SandboxRecord r = record("sb-new");
  r.server = "123:456";
  ASSERT_TRUE(store_->put(r).ok());
  EXPECT_EQ(store_->get("sb-new")->server, "123:456");
}

}  // namespace sandcastle::store

// StateDb::open on real files: migrations, and the three ways a state
// database cannot be used (corrupt, read-only, disk full), each failing with
// a message that names the path.
#include "store/state_db.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "store/sqlite_sandbox_store.h"

namespace sandcastle::store {
namespace {

namespace fs = std::filesystem;

class StateDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sc-statedb-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  std::string db_path() const { return (dir_ / "sandcastle.db").string(); }
  fs::path dir_;
};

// Runs `fn` in a forked child (for a mount namespace or another uid) and
// returns the message it reports ("OK" when the open succeeded).
std::string in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    std::string msg = fn();
    (void)!write(p[1], msg.data(), msg.size());
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

std::string open_message(const std::string& dir) {
  auto db = StateDb::open(dir);
  return db.ok() ? "OK" : db.error().message();
}

TEST_F(StateDbTest, MigratesAnEmptyDatabaseAndKeepsTheOtherTables) {
  // The API keys' table is in the same file and stays.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE api_keys(id TEXT); INSERT INTO api_keys VALUES('k1')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = StateDb::open(dir_.string());
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ((*db)->schema_version(), sandbox_migrations().back().version);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2((*db)->handle(),
                         "SELECT (SELECT COUNT(*) FROM api_keys), (SELECT COUNT(*) FROM sandboxes),"
                         " (SELECT value FROM sandbox_meta WHERE key='history_bytes')",
                         -1, &st, nullptr),
      SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 1);
  EXPECT_EQ(sqlite3_column_int(st, 1), 0);
  EXPECT_EQ(sqlite3_column_int(st, 2), 0);
  sqlite3_finalize(st);
  // WAL, NORMAL sync and foreign keys on this connection.
  ASSERT_EQ(sqlite3_prepare_v2((*db)->handle(), "PRAGMA journal_mode", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  for (auto [pragma, want] : {std::pair{"PRAGMA synchronous", 1}, {"PRAGMA foreign_keys", 1}}) {
    ASSERT_EQ(sqlite3_prepare_v2((*db)->handle(), pragma, -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), want) << pragma;
    sqlite3_finalize(st);
  }
}

TEST_F(StateDbTest, RunsOnlyTheMigrationsNotYetApplied) {
  std::vector<Migration> v1 = {{1, "CREATE TABLE t1(a)"}};
  ASSERT_TRUE(StateDb::open(dir_.string(), v1).ok());
  std::vector<Migration> v2 = {{1, "CREATE TABLE t1(a)"}, {2, "CREATE TABLE t2(b)"}};
  auto db = StateDb::open(dir_.string(), v2);  // t1 again would fail: "already exists"
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ((*db)->schema_version(), 2);
}

TEST_F(StateDbTest, AFailedMigrationLeavesThePreviousVersion) {
  std::vector<Migration> bad = {{1, "CREATE TABLE t1(a)"},
                                {2, "CREATE TABLE t2(b); SELECT * FROM nowhere"}};
  auto db = StateDb::open(dir_.string(), bad);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message().find("migration to version 2"), std::string::npos)
      << db.error().message();
  auto again = StateDb::open(dir_.string(), {{1, "CREATE TABLE t1(a)"}});
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ((*again)->schema_version(), 1);
  // t2 was rolled back with the version bump.
  EXPECT_EQ(sqlite3_exec((*again)->handle(), "SELECT * FROM t2", nullptr, nullptr, nullptr),
            SQLITE_ERROR);
}

// Several servers starting at once on a new state dir: one migrates, the
// others find it done (no "table already exists").
TEST_F(StateDbTest, ServersStartingTogetherOnANewFileAllOpenIt) {
  for (int round = 0; round < 5; ++round) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::atomic<int> ready{0};
    std::vector<std::string> errors(6);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < errors.size(); ++i)
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < static_cast<int>(errors.size())) {
        }
        errors[i] = open_message(dir_.string());
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_EQ(e, "OK");
  }
}

TEST_F(StateDbTest, RefusesADatabaseFromANewerSandcastle) {
  ASSERT_TRUE(
      StateDb::open(dir_.string(), {{1, "CREATE TABLE t1(a)"}, {2, "CREATE TABLE t2(b)"}}).ok());
  auto db = StateDb::open(dir_.string(), {{1, "CREATE TABLE t1(a)"}});
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code, ErrorCode::kFailedPrecondition);
  const auto msg = db.error().message();
  EXPECT_NE(msg.find(db_path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("schema version 2, newer than this sandcastle understands (1)"),
            std::string::npos)
      << msg;
}

TEST_F(StateDbTest, GarbageFileIsReportedCorruptAndLeftAlone) {
  const std::string garbage(8192, '\x5a');
  std::ofstream(db_path(), std::ios::binary) << garbage;
  auto db = StateDb::open(dir_.string());
  ASSERT_FALSE(db.ok());
  const auto msg = db.error().message();
  EXPECT_NE(msg.find("state database " + db_path() + " is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mv " + db_path() + " " + db_path() + ".corrupt"), std::string::npos) << msg;
  std::ifstream in(db_path(), std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(after, garbage);  // never reset silently
}

TEST_F(StateDbTest, TruncatedDatabaseIsReportedCorrupt) {
  {
    auto db = StateDb::open(dir_.string());
    ASSERT_TRUE(db.ok());
    auto st = SqliteSandboxStore::open(std::shared_ptr<StateDb>(std::move(db).value()));
    ASSERT_TRUE(st.ok());
    HistoryEntry e;
    e.sandbox_id = "sb-a";
    e.stdout_data = std::string(200'000, 'x');
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*st)->append_history(e).ok());
  }  // closing checkpoints the WAL into the file
  const auto size = fs::file_size(db_path());
  ASSERT_GT(size, 1'000'000u);
  fs::resize_file(db_path(), size / 2);
  auto db = StateDb::open(dir_.string());
  ASSERT_FALSE(db.ok());
  const auto msg = db.error().message();
  EXPECT_NE(msg.find("state database " + db_path() + " is corrupt"), std::string::npos) << msg;
}

TEST_F(StateDbTest, ReadOnlyDirectoryForAnUnprivilegedUser) {
  ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);  // 0500
  auto msg = in_child([&] {
    if (setgid(65534) != 0 || setuid(65534) != 0) return std::string("setuid failed");
    return open_message(dir_.string());
  });
  EXPECT_NE(msg.find("state database " + db_path() + " is read-only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Permission denied"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(db_path()));
}

TEST_F(StateDbTest, ReadOnlyFileForAnUnprivilegedUser) {
  ASSERT_TRUE(StateDb::open(dir_.string()).ok());
  ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chown(db_path().c_str(), 65534, 65534), 0);
  fs::permissions(db_path(), fs::perms::owner_read);  // 0400
  auto msg = in_child([&] {
    if (setgid(65534) != 0 || setuid(65534) != 0) return std::string("setuid failed");
    return open_message(dir_.string());
  });
  EXPECT_NE(msg.find("state database " + db_path() + " is read-only"), std::string::npos) << msg;
}

TEST_F(StateDbTest, ReadOnlyBindMount) {
  ASSERT_TRUE(StateDb::open(dir_.string()).ok());
  auto msg = in_child([&] {
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      return std::string("mount failed: ") + strerror(errno);
    return open_message(dir_.string());
  });
  EXPECT_NE(msg.find("state database " + db_path() + " is read-only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Read-only file system"), std::string::npos) << msg;
}

// A tiny tmpfs, filled up, in a private mount namespace.
std::string on_full_tmpfs(const fs::path& dir, bool make_db_first) {
  return in_child([&] {
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0)
      return std::string("mount failed: ") + strerror(errno);
    if (make_db_first) {
      auto db = StateDb::open(dir.string());
      if (!db.ok()) return "first open: " + db.error().message();
    }
    int fd = open((dir / "filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    std::string block(4096, 'f');
    while (write(fd, block.data(), block.size()) > 0) {
    }
    close(fd);
    return open_message(dir.string());
  });
}

TEST_F(StateDbTest, FullDiskWhenCreating) {
  auto msg = on_full_tmpfs(dir_, false);
  EXPECT_NE(msg.find("state database " + db_path() + ": the disk is full"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("free space on the filesystem holding " + dir_.string()), std::string::npos)
      << msg;
}

TEST_F(StateDbTest, FullDiskWithAnExistingDatabase) {
  auto msg = on_full_tmpfs(dir_, true);
  EXPECT_NE(msg.find("state database " + db_path() + ": the disk is full"), std::string::npos)
      << msg;
}

// The database as a server leaves it when killed: opened, never closed (a
// forked child that exits without running destructors).
void open_and_die(const std::string& dir) {
  in_child([&] {
    auto db = StateDb::open(dir);
    if (!db.ok()) return db.error().message();
    (void)std::move(db).value().release();  // no destructor: no clean stop
    return std::string("OK");
  });
}

bool checked_at_open(const std::string& dir,
                     IntegrityCheck check = IntegrityCheck::kAfterUncleanStop) {
  auto db = StateDb::open(dir, sandbox_migrations(), check);
  EXPECT_TRUE(db.ok()) << db.error().message();
  return db.ok() && (*db)->integrity_checked();
}

// Overwrites page `page` (1-based) of the file with garbage from byte `from`
// of the page on.
void spoil_page(const std::string& path, std::uint64_t page, std::uint64_t from = 0) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char hdr[18];
  f.read(reinterpret_cast<char*>(hdr), sizeof hdr);
  const std::uint64_t size = hdr[16] << 8 | hdr[17];
  ASSERT_GE(size, 512u);
  f.seekp(static_cast<std::streamoff>((page - 1) * size + from));
  const std::string junk(size - from, '\xa5');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  ASSERT_TRUE(f.good());
}

// A database with ~2 MiB in a table of its own, closed cleanly; returns
// its page count.
std::uint64_t fill_and_close(const std::string& dir, const std::string& path) {
  {
    auto db = StateDb::open(dir);
    EXPECT_TRUE(db.ok());
    if (!db.ok()) return 0;
    EXPECT_TRUE((*db)
                    ->exec("CREATE TABLE bulk(a); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
                           "SELECT i + 1 FROM c WHERE i < 2000) INSERT INTO bulk SELECT "
                           "randomblob(1000) FROM c",
                           "fill")
                    .ok());
  }  // a clean close checkpoints the WAL into the file
  return fs::file_size(path) / 4096;
}

TEST_F(StateDbTest, QuickCheckRunsOnlyAfterAnUncleanStopOrWhenAsked) {
  EXPECT_FALSE(checked_at_open(dir_.string())) << "a new file";
  EXPECT_FALSE(checked_at_open(dir_.string())) << "after a clean stop";
  EXPECT_TRUE(checked_at_open(dir_.string(), IntegrityCheck::kAlways)) << "--check-db";
  open_and_die(dir_.string());
  EXPECT_TRUE(checked_at_open(dir_.string())) << "after a run that never closed the file";
  EXPECT_FALSE(checked_at_open(dir_.string())) << "checked once: that run is forgotten";
  {
    // A run still going is no unclean stop (servers may share the file).
    auto running = StateDb::open(dir_.string());
    ASSERT_TRUE(running.ok());
    EXPECT_FALSE(checked_at_open(dir_.string()));
    // A run that met a corrupt page keeps its row at close: the next
    // start checks.
    (void)(*running)->error(SQLITE_CORRUPT, "read history");
  }
  EXPECT_TRUE(checked_at_open(dir_.string()));
}

TEST_F(StateDbTest, AFileFromBeforeRunsWereRecordedIsCheckedOnce) {
  {
    auto db = StateDb::open(dir_.string());
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec("DROP TABLE server_runs", "drop").ok());
  }
  EXPECT_TRUE(checked_at_open(dir_.string()));
  EXPECT_FALSE(checked_at_open(dir_.string()));
}

// What the cheap start still catches after a clean stop: the header, the
// schema, a file cut short (SQLite's own checks when it first reads one). A damaged data page is
// found by --check-db, or by the start after a run that met it or did not stop cleanly.
TEST_F(StateDbTest, CorruptionAfterACleanStop) {
  const auto pages = fill_and_close(dir_.string(), db_path());
  ASSERT_GT(pages, 400u);
  const auto saved = dir_ / "saved.db";
  fs::copy_file(db_path(), saved);
  auto restore = [&] { fs::copy_file(saved, db_path(), fs::copy_options::overwrite_existing); };
  auto corrupt = [&](IntegrityCheck check) {
    auto db = StateDb::open(dir_.string(), sandbox_migrations(), check);
    if (db.ok()) return std::string("OK");
    return db.error().message();
  };
  const std::string is_corrupt = "state database " + db_path() + " is corrupt";

  spoil_page(db_path(), 1, 100);  // the schema (page 1 after its 100-byte header)
  EXPECT_NE(corrupt(IntegrityCheck::kAfterUncleanStop).find(is_corrupt), std::string::npos);
  restore();
  // Cut short: SQLite compares the page count in the header with the
  // file's length when it first reads it.
  fs::resize_file(db_path(), (pages - 50) * 4096);
  EXPECT_NE(corrupt(IntegrityCheck::kAfterUncleanStop).find(is_corrupt), std::string::npos);
  restore();
  spoil_page(db_path(), pages - 10);  // a page of `bulk`
  EXPECT_EQ(corrupt(IntegrityCheck::kAfterUncleanStop), "OK") << "not read by the cheap start";
  auto full = corrupt(IntegrityCheck::kAlways);
  EXPECT_NE(full.find(is_corrupt + " (quick_check:"), std::string::npos) << full;
  open_and_die(dir_.string());
  auto unclean = corrupt(IntegrityCheck::kAfterUncleanStop);
  EXPECT_NE(unclean.find(is_corrupt + " (quick_check:"), std::string::npos) << unclean;
}

}  // namespace
}  // namespace sandcastle::store

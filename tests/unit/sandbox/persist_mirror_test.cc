// mirror_tree (persist_mirror.h) on real directories: what a sync copies,
// keeps and removes, links never followed, holes kept, whiteouts and opaque
// marks, the bound; and the wire messages' decoders refusing bad input.
#include "sandbox/native/persist_mirror.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "sandbox/native/fs_util.h"
#include "sandbox/native/persist_mirror_store.h"

namespace sandcastle::sandbox::native {
namespace {

void put(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::close(fd);
}

class MirrorTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/sc-mirror-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    for (const char* d : {"/from", "/to", "/host"})
      ASSERT_EQ(::mkdir((base_ + d).c_str(), 0700), 0);
    from_ = ::open((base_ + "/from").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    to_ = ::open((base_ + "/to").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    put(base_ + "/host/secret", "host\n");
  }
  void TearDown() override {
    ::close(from_);
    ::close(to_);
    (void)remove_tree(base_);
  }
  MirrorStats sync(std::uint64_t max_bytes = 64 << 20) {
    return mirror_tree(from_, to_, MirrorLimits{max_bytes, 10'000});
  }
  std::string f(const std::string& rel) const { return base_ + "/from/" + rel; }
  std::string t(const std::string& rel) const { return base_ + "/to/" + rel; }

  std::string base_;
  int from_ = -1, to_ = -1;
};

TEST_F(MirrorTreeTest, CopiesChangedFilesOnlyAndRemovesWhatIsGone) {
  ASSERT_EQ(::mkdir(f("d").c_str(), 0750), 0);
  put(f("d/a"), "a");
  put(f("b"), "bb");
  ::chmod(f("b").c_str(), 0600);
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_files, 2u);
  EXPECT_EQ(read_small_file(t("d/a")), "a");
  struct stat st {};
  ASSERT_EQ(::stat(t("b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(t("d").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  // Unchanged: nothing copied.
  s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_files, 0u);
  EXPECT_EQ(s.entries, 3u);
  // One changed, one gone.
  put(f("b"), "changed");
  ASSERT_EQ(::unlink(f("d/a").c_str()), 0);
  s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_files, 1u);
  EXPECT_EQ(s.removed, 1u);
  EXPECT_EQ(read_small_file(t("b")), "changed");
  EXPECT_NE(::access(t("d/a").c_str(), F_OK), 0);
}

TEST_F(MirrorTreeTest, LinksAreCopiedAsLinksAndNeverFollowed) {
  ASSERT_EQ(::symlink((base_ + "/host/secret").c_str(), f("evil").c_str()), 0);
  ASSERT_EQ(::symlink((base_ + "/host").c_str(), f("evildir").c_str()), 0);
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  struct stat st {};
  ASSERT_EQ(::lstat(t("evil").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // The copy had a directory where the source now has a link to the host:
  // the copy's directory goes, the host's stays whole.
  ASSERT_EQ(::unlink(f("evildir").c_str()), 0);
  ASSERT_EQ(::mkdir(f("evildir").c_str(), 0700), 0);
  put(f("evildir/secret"), "sandbox");
  ASSERT_EQ(sync().err, 0);
  EXPECT_EQ(read_small_file(t("evildir/secret")), "sandbox");
  ASSERT_TRUE(remove_tree(f("evildir")).ok());
  ASSERT_EQ(::symlink((base_ + "/host").c_str(), f("evildir").c_str()), 0);
  ASSERT_EQ(sync().err, 0);
  ASSERT_EQ(::lstat(t("evildir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(read_small_file(base_ + "/host/secret"), "host\n");
  // clear_tree unlinks links, never what they name.
  EXPECT_EQ(clear_tree(to_), 0);
  EXPECT_TRUE(list_dir(base_ + "/to").empty());
  EXPECT_EQ(read_small_file(base_ + "/host/secret"), "host\n");
}

TEST_F(MirrorTreeTest, HolesStayHolesAndFifosAreSkipped) {
  int fd = ::open(f("sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "end", 3, 512 << 20), 3);
  ::close(fd);
  ASSERT_EQ(::mkfifo(f("fifo").c_str(), 0600), 0);
  auto s = sync(1 << 20);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.skipped, 1u);
  struct stat st {};
  ASSERT_EQ(::stat(t("sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, (512 << 20) + 3);
  EXPECT_LE(st.st_blocks * 512, 64 * 1024);
  EXPECT_NE(::access(t("fifo").c_str(), F_OK), 0);
}

TEST_F(MirrorTreeTest, TheBoundIsNeverPassed) {
  put(f("a"), std::string(300 * 1024, 'a'));
  put(f("b"), std::string(300 * 1024, 'b'));
  auto s = sync(512 * 1024);
  EXPECT_EQ(s.err, ENOSPC);
  EXPECT_NE(s.message.find("disk limit"), std::string::npos) << s.message;
  EXPECT_LE(s.total_bytes, 512u * 1024);
  // No temporary left behind.
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
  // A file replaced by a bigger one near the bound: the old copy goes first.
  ASSERT_EQ(::unlink(f("b").c_str()), 0);
  ASSERT_EQ(sync(512 * 1024).err, 0);
  put(f("a"), std::string(400 * 1024, 'A'));
  s = sync(512 * 1024);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(read_small_file(t("a")).size(), 400u * 1024);
}

// Names of one file stay names of one file, and count once.
TEST_F(MirrorTreeTest, HardlinksAreKeptAndCountOnce) {
  ASSERT_EQ(::mkdir(f("d").c_str(), 0755), 0);
  put(f("a"), std::string(400 * 1024, 'a'));
  for (const char* name : {"d/b", "d/c", "e"})
    ASSERT_EQ(::link(f("a").c_str(), f(name).c_str()), 0);
  auto s = sync(512 * 1024);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_bytes, 400u * 1024);
  struct stat a {
  }, c{};
  ASSERT_EQ(::stat(t("a").c_str(), &a), 0);
  ASSERT_EQ(::stat(t("d/c").c_str(), &c), 0);
  EXPECT_EQ(a.st_ino, c.st_ino);
  EXPECT_EQ(a.st_nlink, 4u);
  // Unchanged, and a new name of it: within the bound, nothing copied.
  ASSERT_EQ(::link(f("a").c_str(), f("d/new").c_str()), 0);
  s = sync(512 * 1024);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_bytes, 0u);
  EXPECT_LE(s.total_bytes, 512u * 1024);
  ASSERT_EQ(::stat(t("d/new").c_str(), &c), 0);
  EXPECT_EQ(a.st_ino, c.st_ino);
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
  EXPECT_NE(::access(t("d/.sc-mirror").c_str(), F_OK), 0);
}

TEST_F(MirrorTreeTest, WhiteoutsAndOpaqueDirectoriesAreKept) {
  if (::mknod(f("gone").c_str(), S_IFCHR | 0600, makedev(0, 0)) != 0)
    GTEST_SKIP() << "cannot make a whiteout here: " << errno;
  ASSERT_EQ(::mkdir(f("opq").c_str(), 0755), 0);
  if (::setxattr(f("opq").c_str(), "user.overlay.opaque", "y", 1, 0) != 0)
    GTEST_SKIP() << "no user xattrs here: " << errno;
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  struct stat st {};
  ASSERT_EQ(::lstat(t("gone").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  char v[4] = {};
  EXPECT_EQ(::getxattr(t("opq").c_str(), "user.overlay.opaque", v, sizeof v), 1);
  ASSERT_EQ(::removexattr(f("opq").c_str(), "user.overlay.opaque"), 0);
  ASSERT_EQ(sync().err, 0);
  EXPECT_LT(::getxattr(t("opq").c_str(), "user.overlay.opaque", v, sizeof v), 0);
}

// A kill mid-sync after `mv data data2`: every file is still there under
// its old name or its new one (the old set aside, put back by recovery),
// never under neither; the next sync completes the move.
TEST_F(MirrorTreeTest, AKillMidSyncLeavesEveryEntryOldOrNew) {
  constexpr int kFiles = 2000;
  ASSERT_EQ(::mkdir(f("data").c_str(), 0755), 0);
  for (int i = 0; i < kFiles; ++i)
    put(f(std::string("data/").append(std::to_string(i))), std::string(4096, 'x'));
  ASSERT_EQ(sync().err, 0);
  ASSERT_EQ(::rename(f("data").c_str(), f("data2").c_str()), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(mirror_tree(from_, to_, MirrorLimits{64 << 20, 10'000}).err);
  // The old name leaves the copy's tree (pass 1): killed right then.
  while (::access(t("data").c_str(), F_OK) == 0) {
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(recover_staging(to_), 0);
  int old_name = 0, new_name = 0;
  for (int i = 0; i < kFiles; ++i) {
    const std::string n = std::to_string(i);
    if (read_small_file(t(std::string("data/").append(n))).size() == 4096)
      ++old_name;
    else if (read_small_file(t(std::string("data2/").append(n))).size() == 4096)
      ++new_name;
    else
      ADD_FAILURE() << n << " under neither name";
  }
  std::printf("killed %s: %d under the old name, %d under the new\n",
              WIFSIGNALED(status) ? "mid-sync" : "after the sync", old_name, new_name);
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_NE(::access(t("data").c_str(), F_OK), 0);
  EXPECT_EQ(read_small_file(t("data2/1999")).size(), 4096u);
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
}

// A move near the bound: the old place (set aside, still counted) is given
// up for the new one rather than the sync failing.
TEST_F(MirrorTreeTest, AMoveNearTheBoundStillSyncs) {
  ASSERT_EQ(::mkdir(f("d").c_str(), 0755), 0);
  put(f("d/big"), std::string(400 * 1024, 'b'));
  ASSERT_EQ(sync(512 * 1024).err, 0);
  ASSERT_EQ(::rename(f("d").c_str(), f("e").c_str()), 0);
  auto s = sync(512 * 1024);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_LE(s.total_bytes, 512u * 1024);
  EXPECT_EQ(read_small_file(t("e/big")).size(), 400u * 1024);
  EXPECT_NE(::access(t("d").c_str(), F_OK), 0);
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
}

// The copy's own name: a source entry named .sc-mirror.tmp (once the
// temporary's name) is copied like any other, .sc-mirror at the root (the
// staging's) skipped, and neither makes a sync fail.
TEST_F(MirrorTreeTest, EntriesNamedLikeTheCopysOwnDoNotBreakSyncs) {
  ASSERT_EQ(::mkdir(f(".sc-mirror.tmp").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(f(".sc-mirror").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(f("d").c_str(), 0755), 0);
  put(f(".sc-mirror/x"), "x");
  put(f("d/.sc-mirror"), "inner");
  put(f("a"), "a");
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.skipped, 1u);
  EXPECT_EQ(read_small_file(t("a")), "a");
  EXPECT_EQ(read_small_file(t("d/.sc-mirror")), "inner");
  struct stat st {};
  ASSERT_EQ(::stat(t(".sc-mirror.tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_NE(::access(t(".sc-mirror").c_str(), F_OK), 0);
  put(f("a"), "changed");
  s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(read_small_file(t("a")), "changed");
}

// Directories, symlinks and whiteouts cost a block each on the copy's disk
// (nothing on tmpfs): they count, so 300 empty ones pass a 1 MiB bound.
TEST_F(MirrorTreeTest, EmptyDirectoriesAndSymlinksCountAgainstTheBound) {
  for (int i = 0; i < 150; ++i) {
    ASSERT_EQ(::mkdir(f(std::string("d").append(std::to_string(i))).c_str(), 0755), 0);
    ASSERT_EQ(::symlink("x", f(std::string("l").append(std::to_string(i))).c_str()), 0);
  }
  auto s = sync(1 << 20);
  EXPECT_EQ(s.err, ENOSPC) << s.message;
  EXPECT_LE(s.total_bytes, 1u << 20);
  s = sync(2 << 20);
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.total_bytes, 300u * 4096);
}

// Paths longer than PATH_MAX (depth x long names): every file reached, and
// each directory's path is not kept per entry.
TEST_F(MirrorTreeTest, PathsLongerThanPathMaxAreCopied) {
  const std::string name(250, 'n');
  // (The host's path calls stop at PATH_MAX: made one level at a time.)
  int dir = ::dup(from_);
  for (int i = 0; i < 24; ++i) {
    (void)::mkdirat(dir, name.c_str(), 0755);
    int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(sub, 0);
    ::close(dir);
    dir = sub;
  }
  int fd = ::openat(dir, "deep", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "deep", 4), 4);
  ::close(fd);
  ASSERT_EQ(::linkat(dir, "deep", dir, "again", 0), 0);
  ::close(dir);
  auto s = sync();
  ASSERT_EQ(s.err, 0) << s.message;
  EXPECT_EQ(s.copied_bytes, 4u);
  dir = ::dup(to_);
  for (int i = 0; i < 24; ++i) {
    int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(sub, 0) << i;
    ::close(dir);
    dir = sub;
  }
  struct stat a {
  }, b{};
  EXPECT_EQ(::fstatat(dir, "deep", &a, 0), 0);
  EXPECT_EQ(::fstatat(dir, "again", &b, 0), 0);
  EXPECT_EQ(a.st_size, 4);
  EXPECT_EQ(a.st_ino, b.st_ino);
  ::close(dir);
  EXPECT_EQ(clear_tree(from_), 0);
  EXPECT_EQ(clear_tree(to_), 0);
}

// While a storage is removed (its walk, here held at a latch) the store's
// lock is free: other storages attach, the one removed is refused, and a
// last owner dropped meanwhile ends without the lock (no self-deadlock).
TEST(MirrorStoreTest, RemoveWalksWithoutHoldingTheStore) {
  char tmpl[] = "/var/tmp/sc-mirror-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  MirrorStore store(dir + "/storage");
  {
    auto a = store.attach("gone-1");
    ASSERT_TRUE(a.ok()) << a.error().message();
  }
  std::promise<void> walking, finish;
  auto finish_f = finish.get_future().share();
  auto removed = std::async(std::launch::async, [&] {
    return store.remove("gone-1", [&](const PersistMirrorWire& w, int store_fd, int) -> Status {
      EXPECT_EQ(w.direction, MirrorDirection::kClear);
      walking.set_value();
      finish_f.wait();
      return clear_tree(store_fd) == 0 ? Status{} : Error::make(ErrorCode::kIo, "clear");
    });
  });
  walking.get_future().wait();
  auto other = std::async(std::launch::async, [&] { return store.attach("other-1"); });
  // (On a failed assertion the walk still ends, so the futures can.)
  struct Finish {
    std::promise<void>& p;
    bool done = false;
    ~Finish() {
      if (!done) p.set_value();
    }
  } guard{finish};
  ASSERT_EQ(other.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "attach waited for another storage's removal";
  auto got = other.get();
  EXPECT_TRUE(got.ok()) << got.error().message();
  auto again = store.attach("gone-1");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition);
  got->reset();  // the last owner, while nothing holds the store's lock
  guard.done = true;
  finish.set_value();
  auto st = removed.get();
  EXPECT_TRUE(st.ok()) << st.error().message();
  EXPECT_NE(::access((dir + "/storage/gone-1").c_str(), F_OK), 0);
  EXPECT_TRUE(store.attach("other-1").ok());
  (void)remove_tree(dir);
}

// A copy whose walk fails leaves no half-made storage behind; while it
// runs, the source (not running) cannot be attached.
TEST(MirrorStoreTest, AFailedCopyLeavesNoStorage) {
  char tmpl[] = "/var/tmp/sc-mirror-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  MirrorStore store(dir + "/storage");
  {
    auto a = store.attach("src-1");
    ASSERT_TRUE(a.ok()) << a.error().message();
    put((*a)->path() + "/f", "data");
  }
  auto st = store.copy(
      "src-1", "dst-1", [&](const PersistMirrorWire& w, int store_fd, int to_fd) -> Status {
        if (w.direction == MirrorDirection::kClear)
          return clear_tree(store_fd) == 0 ? Status{} : Error::make(ErrorCode::kIo, "clear");
        EXPECT_EQ(w.direction, MirrorDirection::kCopy);
        auto busy = store.attach("src-1");
        EXPECT_FALSE(busy.ok());
        // Half done, then failed.
        EXPECT_EQ(mirror_tree(store_fd, to_fd, MirrorLimits{1 << 20, 100}).err, 0);
        return Error::make(ErrorCode::kResourceExhausted, "walk failed");
      });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(::access((dir + "/storage/dst-1").c_str(), F_OK), 0);
  auto list = store.list();
  EXPECT_EQ(list, std::vector<std::string>{"src-1"});
  EXPECT_TRUE(store.attach("src-1").ok());
  (void)remove_tree(dir);
}

TEST(PersistMirrorWire, DecodersRefuseBadInput) {
  PersistMirrorWire w{MirrorDirection::kRestore, 5, 6};
  auto d = decode_persist_mirror(encode(w));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->direction, MirrorDirection::kRestore);
  EXPECT_EQ(d->max_bytes, 5u);
  std::string bad = encode(w);
  bad[0] = 9;  // no such direction
  EXPECT_FALSE(decode_persist_mirror(bad));
  EXPECT_FALSE(decode_persist_mirror(encode(w) + "x"));
  MirrorStats s;
  s.err = ENOSPC;
  s.message = "m";
  s.copied_files = 3;
  auto back = decode_mirror_stats(encode(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->copied_files, 3u);
  EXPECT_EQ(back->message, "m");
  EXPECT_FALSE(decode_mirror_stats(encode(s).substr(0, 10)));
}

}  // namespace
}  // namespace sandcastle::sandbox::native

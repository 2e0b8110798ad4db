// Persistent sandboxes without root (issue 16, persist_mirror.h): the
// sandbox's /workspace is copied to <storage>/<id>/mirror/workspace after
// every call that can write, and back at the next start. Symlinks stay
// links (a host file they name is never read, written or removed), the
// copy never passes its bound even while the sandbox races it, and a root
// server's storage is refused.
//
// They need an unprivileged backend with a storage directory of its own:
// they run in a child process (PersistMirror.TestsRunInAProcessOfTheirOwn),
// which, when this binary runs as root, first becomes the test user.
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "fixture.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/persist_mirror_store.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using native::NativeBackend;
using native::NativeBackendOptions;

constexpr const char* kChildEnv = "SANDCASTLE_MIRROR_CHILD";
constexpr const char* kStorageEnv = "SANDCASTLE_MIRROR_STORAGE";
constexpr const char* kHostEnv = "SANDCASTLE_MIRROR_HOST";

std::string g_storage;  // the backend's storage dir
std::string g_host;     // a host directory the sandboxes' links name
std::string g_layer;    // a busybox image layer

void put(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0) << path << ": " << errno;
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::fchmod(fd, mode);
  ::close(fd);
}

NativeBackend* backend() {
  static std::unique_ptr<NativeBackend> b;
  static std::once_flag once;
  std::call_once(once, [] {
    NativeBackendOptions o;
    o.pool.min = 0;
    o.storage_dir = g_storage;
    o.images = [](const std::string& ref) -> Result<native::ImageRoot> {
      if (ref != "bb-mirror") return Error::make(ErrorCode::kNotFound, "no image '" + ref + "'");
      native::ImageRoot r;
      r.name = ref;
      r.id = "sha256:test-bb-mirror";
      r.layers = {g_layer};
      return r;
    };
    auto made = NativeBackend::create(std::move(o));
    EXPECT_TRUE(made.ok()) << made.error().message();
    if (made) b = std::move(*made);
  });
  return b.get();
}

SandboxSpec spec(const std::string& storage_id, std::uint64_t disk = 64 * kMiB,
                 const std::string& image = "host") {
  SpecOptions o;
  o.image = image;
  o.limits.disk_bytes = disk;
  o.persistence = Persistence::kPersistent;
  o.storage_id = storage_id;
  auto s = SandboxSpec::create(std::move(o));
  EXPECT_TRUE(s.ok()) << s.error().message();
  return s ? *s : SandboxSpec::defaults();
}

std::unique_ptr<Sandbox> make(const SandboxSpec& s) {
  auto sb = backend()->create(s);
  EXPECT_TRUE(sb.ok()) << sb.error().message();
  return sb ? std::move(*sb) : nullptr;
}

std::string sh(Sandbox& sb, const std::string& script) {
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", script};
  auto r = sb.exec(req);
  EXPECT_TRUE(r.ok()) << r.error().message();
  if (!r) return {};
  EXPECT_EQ(r->exit_code, 0) << script << "\n" << r->stderr_data;
  return r->stdout_data;
}

std::string slurp(const std::string& path) {
  return native::read_small_file(path);
}

std::string copy_of(const std::string& id, const std::string& rel = "") {
  return g_storage + "/" + id + "/mirror/workspace" + (rel.empty() ? "" : "/" + rel);
}

// The file data on disk beneath `dir`, as the filesystem allocated it.
// Each inode once: a file the sync moves (aside, into its staging) while
// the walk runs can be met at both places.
std::uint64_t g_du = 0;
std::set<std::pair<dev_t, ino_t>> g_seen;
std::uint64_t allocated(const std::string& dir) {
  g_du = 0;
  g_seen.clear();
  ::nftw(
      dir.c_str(),
      [](const char*, const struct stat* st, int type, struct FTW*) {
        if (type == FTW_F && S_ISREG(st->st_mode) && g_seen.insert({st->st_dev, st->st_ino}).second)
          g_du += std::uint64_t(st->st_blocks) * 512;
        return 0;
      },
      16, FTW_PHYS);
  return g_du;
}

class PersistMirrorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv(kChildEnv)) return;
    g_storage = std::getenv(kStorageEnv) ? std::getenv(kStorageEnv) : "";
    g_host = std::getenv(kHostEnv) ? std::getenv(kHostEnv) : "";
    if (::geteuid() == 0) {
      // The unprivileged server's case: become the test user (the parent
      // made the directories theirs).
      struct passwd* pw = ::getpwnam("sandcastle-test");
      const uid_t uid = pw ? pw->pw_uid : 65534;
      const gid_t gid = pw ? pw->pw_gid : 65534;
      ASSERT_EQ(::setgroups(0, nullptr), 0);
      ASSERT_EQ(::setresgid(gid, gid, gid), 0);
      ASSERT_EQ(::setresuid(uid, uid, uid), 0);
      // (A uid change clears it; the server must write its children's id maps.)
      ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
    }
    char tmpl[] = "/var/tmp/sc-mirror-layer-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    g_layer = tmpl;
    ::chmod(g_layer.c_str(), 0755);
    for (const char* d : {"/bin", "/etc"}) ASSERT_EQ(::mkdir((g_layer + d).c_str(), 0755), 0);
    put(g_layer + "/bin/busybox", native::read_small_file("/bin/busybox"), 0755);
    for (const char* applet : {"sh", "cat", "echo", "ls", "rm", "mkdir", "stat"})
      ASSERT_EQ(::symlink("busybox", (g_layer + "/bin/" + applet).c_str()), 0);
    put(g_layer + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
    put(g_layer + "/etc/motd", "from the image\n");
  }
  static void TearDownTestSuite() {
    if (!g_layer.empty()) (void)native::remove_tree(g_layer);
  }
  void SetUp() override {
    if (!std::getenv(kChildEnv))
      GTEST_SKIP() << "runs in a process of its own, started by PersistMirror.*";
    ASSERT_NE(::geteuid(), 0u);
    ASSERT_NE(backend(), nullptr);
  }
};

TEST_F(PersistMirrorTest, FilesSurviveReleaseAndAreRemovedWithTheSandbox) {
  auto sb = make(spec("mf-1"));
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sh(*sb,
               "mkdir -p /workspace/d/e && echo hello > /workspace/d/f && chmod 640 /workspace/d/f "
               "&& ln -s d/f /workspace/link && truncate -s 100M /workspace/sparse && "
               "echo tail >> /workspace/sparse && ls -A /workspace"),
            "d\nlink\nsparse\n");
  ASSERT_TRUE(sb->write_file("/workspace/api.txt", "by the api\n").ok());
  // On disk as soon as the calls returned (no release needed).
  EXPECT_EQ(slurp(copy_of("mf-1", "d/f")), "hello\n");
  EXPECT_EQ(slurp(copy_of("mf-1", "api.txt")), "by the api\n");
  struct stat st {};
  ASSERT_EQ(::lstat(copy_of("mf-1", "link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::stat(copy_of("mf-1", "sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 100 * kMiB + 5);
  EXPECT_LT(std::uint64_t(st.st_blocks) * 512, 1 * kMiB);  // holes stay holes
  ASSERT_TRUE(sb->release().ok());
  auto listed = backend()->list_storage();
  EXPECT_NE(std::find(listed.begin(), listed.end(), "mf-1"), listed.end());

  auto again = make(spec("mf-1"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again,
               "stat -c '%a' /workspace/d/f && cat /workspace/d/f /workspace/api.txt && "
               "readlink /workspace/link && ls -d /workspace/d/e && tail -c 5 /workspace/sparse"),
            "640\nhello\nby the api\nd/f\n/workspace/d/e\ntail\n");
  // A removal inside is a removal on disk.
  ASSERT_TRUE(again->remove("/workspace/api.txt").ok());
  EXPECT_NE(::access(copy_of("mf-1", "api.txt").c_str(), F_OK), 0);
  // destroy(): the storage goes.
  ASSERT_TRUE(again->destroy().ok());
  EXPECT_NE(::access((g_storage + "/mf-1").c_str(), F_OK), 0);
}

// A start whose copy back fails (a disk limit lowered below what the copy
// holds) is refused, and leaves the copy on disk whole.
TEST_F(PersistMirrorTest, AFailedRestoreLeavesTheCopyWhole) {
  auto sb = make(spec("mx-1", 64 * kMiB));
  ASSERT_NE(sb, nullptr);
  sh(*sb,
     "echo small > /workspace/a && head -c 20971520 /dev/zero > /workspace/big && echo z > "
     "/workspace/z");
  ASSERT_TRUE(sb->release().ok());
  auto small = backend()->create(spec("mx-1", 8 * kMiB));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code, ErrorCode::kResourceExhausted) << small.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(copy_of("mx-1", "big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 20 * kMiB);
  auto again = make(spec("mx-1", 64 * kMiB));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again, "cat /workspace/a /workspace/z && stat -c %s /workspace/big"),
            "small\nz\n20971520\n");
  ASSERT_TRUE(again->destroy().ok());
}

// An unchanged file is not copied again (its copy keeps its inode); a
// changed one is.
TEST_F(PersistMirrorTest, OnlyChangedFilesAreCopied) {
  auto sb = make(spec("mc-1"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "for i in 1 2 3; do echo $i > /workspace/f$i; done");
  struct stat a1 {
  }, a2{};
  ASSERT_EQ(::stat(copy_of("mc-1", "f1").c_str(), &a1), 0);
  ASSERT_EQ(::stat(copy_of("mc-1", "f2").c_str(), &a2), 0);
  sh(*sb, "echo changed > /workspace/f2");
  struct stat b1 {
  }, b2{};
  ASSERT_EQ(::stat(copy_of("mc-1", "f1").c_str(), &b1), 0);
  ASSERT_EQ(::stat(copy_of("mc-1", "f2").c_str(), &b2), 0);
  EXPECT_EQ(a1.st_ino, b1.st_ino);
  EXPECT_NE(a2.st_ino, b2.st_ino);
  EXPECT_EQ(slurp(copy_of("mc-1", "f2")), "changed\n");
  ASSERT_TRUE(sb->destroy().ok());
}

// Links the sandbox plants naming host paths: kept as links by the sync,
// the restore and the removal; the host files are never read, written or
// removed.
TEST_F(PersistMirrorTest, PlantedSymlinksAreCopiedAsLinksAndNeverFollowed) {
  const std::string secret = g_host + "/secret";
  const std::string hostdir = g_host + "/dir";
  ASSERT_EQ(slurp(secret), "host\n");
  auto sb = make(spec("ms-1"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "ln -s " + secret + " /workspace/evil && mkdir /workspace/d && echo in > /workspace/d/f");
  struct stat st {};
  ASSERT_EQ(::lstat(copy_of("ms-1", "evil").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  char target[512] = {};
  ASSERT_GT(::readlink(copy_of("ms-1", "evil").c_str(), target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target), secret);
  // A directory the copy has becomes a link to a host directory, then a
  // directory again: the host directory's file stays where it is.
  sh(*sb, "rm -r /workspace/d && ln -s " + hostdir + " /workspace/d");
  ASSERT_EQ(::lstat(copy_of("ms-1", "d").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  sh(*sb, "rm /workspace/d && mkdir /workspace/d && echo again > /workspace/d/keep");
  EXPECT_EQ(slurp(hostdir + "/keep"), "host dir\n");
  // The link replaced by a file of the same name: the host file is unchanged.
  sh(*sb, "rm /workspace/evil && echo sandbox > /workspace/evil && ln -s " + hostdir +
              "/keep /workspace/evil2");
  EXPECT_EQ(slurp(copy_of("ms-1", "evil")), "sandbox\n");
  ASSERT_TRUE(sb->release().ok());
  // Restored as links.
  auto again = make(spec("ms-1"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again, "readlink /workspace/evil2 && cat /workspace/evil /workspace/d/keep"),
            hostdir + "/keep\nsandbox\nagain\n");
  // Removal of the storage unlinks the links only.
  ASSERT_TRUE(again->destroy().ok());
  EXPECT_NE(::access((g_storage + "/ms-1").c_str(), F_OK), 0);
  EXPECT_EQ(slurp(secret), "host\n");
  EXPECT_EQ(slurp(hostdir + "/keep"), "host dir\n");
}

// A command that keeps replacing 10 MiB files while calls sync: the copy
// on disk never holds more than the bound (disk limit + 1/8 + 1 MiB);
// a sync that would pass it fails with kResourceExhausted instead.
TEST_F(PersistMirrorTest, RacingWritesCannotPushTheCopyPastTheBound) {
  constexpr std::uint64_t kDisk = 24 * kMiB;
  auto sb = make(spec("mr-1", kDisk));
  ASSERT_NE(sb, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> peak{0};
  std::thread watch([&] {
    while (!stop) {
      peak = std::max<std::uint64_t>(peak, allocated(copy_of("mr-1")));
      std::this_thread::sleep_for(1ms);
    }
  });
  CancelToken cancel;
  std::thread writer([&] {
    ExecRequest req;
    // Empty files first, filled later (a pass sees them small, then copies
    // them big), and all removed and made again: the sandbox's tmpfs never
    // holds more than the limit, but files seen at different moments do.
    req.argv = {"/bin/sh", "-c",
                "cd /workspace; o='a b c d e'; while :; do for f in a b c d e; do : > $f; done; "
                "for f in $o; do head -c 8388608 /dev/zero | tr '\\0' x > $f 2>/dev/null; "
                "done; rm -f a b c d e; o=$(echo $o | tr ' ' '\\n' | tac | tr '\\n' ' '); done"};
    req.timeout = 60s;
    (void)sb->exec(req, {}, &cancel);
  });
  int ok = 0, refused = 0;
  for (int i = 0; i < 300 && refused < 3; ++i) {
    // (A command: a file write could fail first, on the sandbox's full disk.)
    ExecRequest tick;
    tick.argv = {"/bin/true"};
    auto st = sb->exec(tick);
    if (st.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted) << st.error().message();
      EXPECT_NE(st.error().message().find("disk limit"), std::string::npos) << st.error().message();
      ++refused;
    }
  }
  cancel.cancel();
  writer.join();
  stop = true;
  watch.join();
  // ext4 may add an extent block per large file.
  EXPECT_LE(peak.load(), native::mirror_bound(kDisk) + 64 * 1024)
      << ok << " ok, " << refused << " refused";
  EXPECT_GT(peak.load(), 0u);
  std::printf("race: %d syncs ok, %d refused, peak %llu bytes on disk\n", ok, refused,
              static_cast<unsigned long long>(peak.load()));
  // Quiet again: the next sync succeeds.
  sh(*sb, "rm -f /workspace/?");
  ASSERT_TRUE(sb->write_file("/workspace/tick", "last").ok());
  EXPECT_EQ(slurp(copy_of("mr-1", "tick")), "last");
  ASSERT_TRUE(sb->destroy().ok());
}

// The host pids of the persist workers (sc-persist, children of init) of
// the sandbox whose init is `init`, but not those that exited already (a
// zombie can be "signalled" too).
std::vector<pid_t> persist_workers(pid_t init) {
  const std::string pid = std::to_string(init);
  std::vector<pid_t> out;
  std::istringstream children(slurp("/proc/" + pid + "/task/" + pid + "/children"));
  for (pid_t child; children >> child;) {
    const std::string dir = "/proc/" + std::to_string(child);
    if (slurp(dir + "/comm") != "sc-persist\n") continue;
    const std::string stat = slurp(dir + "/stat");
    const auto close_paren = stat.rfind(')');
    if (close_paren != std::string::npos && stat.size() > close_paren + 2 &&
        stat[close_paren + 2] != 'Z' && stat[close_paren + 2] != 'X')
      out.push_back(child);
  }
  return out;
}

// A persist worker that stops (SIGSTOP: here from the host, as the
// sandbox's own commands cannot reach it: each runs in a PID namespace of
// its own, nested below the worker's): the call's sync gives up at its
// timeout and fails with kTimeout, and the worker is killed rather than left
// to write the storage beside a later one. The next sync completes the copy.
TEST_F(PersistMirrorTest, AStoppedWorkerIsKilledAndTheCallFails) {
  auto sb = make(spec("ms-1"));
  ASSERT_NE(sb, nullptr);
  auto* native_sb = dynamic_cast<native::NativeSandbox*>(sb.get());
  ASSERT_NE(native_sb, nullptr);
  native_sb->set_persist_timeout(2s);
  const pid_t init = native_sb->init_pid();
  // The sandbox's own try first: a command that keeps stopping every
  // sc-persist it sees in /proc, while calls sync.
  CancelToken cancel;
  std::thread stopper([&] {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c",
                "while :; do for p in /proc/[0-9]*; do read c < $p/comm 2>/dev/null && "
                "[ \"$c\" = sc-persist ] && kill -STOP ${p#/proc/} 2>/dev/null; done; done"};
    req.timeout = 60s;
    (void)sb->exec(req, {}, &cancel);
  });
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(sb->write_file("/workspace/t" + std::to_string(i), "x").ok()) << i;
  cancel.cancel();
  stopper.join();
  // Now stopped from outside, while it copies 48 MiB (again if it got
  // past its reply before the stop: the machine may be slow to schedule us).
  ExecRequest big;
  big.argv = {"/bin/sh", "-c", "head -c 50331648 /dev/zero > /workspace/big"};
  Result<ExecResult> r = ExecResult{};
  auto took = std::chrono::steady_clock::duration{};
  for (int attempt = 0; attempt < 10 && r.ok(); ++attempt) {
    std::atomic<bool> done{false};
    std::thread host([&] {
      while (!done)
        for (pid_t p : persist_workers(init))
          if (::kill(p, SIGSTOP) == 0) done = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    r = sb->exec(big);
    took = std::chrono::steady_clock::now() - t0;
    done = true;
    host.join();
  }
  if (r.ok()) GTEST_SKIP() << "each sync ended before it could be stopped";
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout) << r.error().message();
  EXPECT_LT(took, 30s);
  // Killed by its init on the server's word, before any next request.
  for (int i = 0; i < 500 && !persist_workers(init).empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(persist_workers(init).empty());
  // The next sync: the whole file, no temporary or staging left.
  ASSERT_TRUE(sb->write_file("/workspace/after", "2").ok());
  struct stat st {};
  ASSERT_EQ(::stat(copy_of("ms-1", "big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 48 * kMiB);
  EXPECT_NE(::access(copy_of("ms-1", ".sc-mirror").c_str(), F_OK), 0);
  EXPECT_TRUE(sb->release().ok());
  EXPECT_EQ(slurp(copy_of("ms-1", "after")), "2");
  EXPECT_TRUE(backend()->remove_storage("ms-1").ok());
}

// A file the sandbox made unreadable to itself (chmod 000) is kept, with
// its mode, and comes back on the next start; its mode in the sandbox is
// as it was.
TEST_F(PersistMirrorTest, AFileWithoutReadPermissionIsKept) {
  auto sb = make(spec("mu-1"));
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sh(*sb,
               "echo locked > /workspace/locked && chmod 000 /workspace/locked && "
               "stat -c %a /workspace/locked"),
            "0\n");
  struct stat st {};
  ASSERT_EQ(::stat(copy_of("mu-1", "locked").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0u);
  EXPECT_EQ(st.st_size, 7);
  EXPECT_EQ(sh(*sb, "stat -c %a /workspace/locked"), "0\n");
  ASSERT_TRUE(sb->release().ok());
  auto again = make(spec("mu-1"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again,
               "stat -c %a /workspace/locked && chmod 600 /workspace/locked && "
               "cat /workspace/locked"),
            "0\nlocked\n");
  ASSERT_TRUE(again->destroy().ok());
}

// A store image's sandbox: its overlay's upper dir is kept (writes to /,
// deletions of image files as whiteouts, a directory made anew as opaque),
// copied back by its init before the overlay is mounted.
TEST_F(PersistMirrorTest, ImageSandboxKeepsItsUpperDir) {
  auto sb = make(spec("mi-1", 32 * kMiB, "bb-mirror"));
  ASSERT_NE(sb, nullptr);
  sh(*sb,
     "echo root-change > /etc/added && rm /etc/motd && mkdir -p /workspace && echo ws > "
     "/workspace/w && rm -r /bin/../etc/../opt 2>/dev/null; mkdir -p /srv/a && echo s > /srv/a/f");
  ASSERT_TRUE(sb->release().ok());
  auto again = make(spec("mi-1", 32 * kMiB, "bb-mirror"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again, "cat /etc/added /workspace/w /srv/a/f; ls /etc"),
            "root-change\nws\ns\nadded\npasswd\n");
  // A directory of the image removed and made again: the image's files in
  // it stay hidden after a restart.
  sh(*again, "rm -r /etc && mkdir /etc && echo only > /etc/only");
  ASSERT_TRUE(again->release().ok());
  auto third = make(spec("mi-1", 32 * kMiB, "bb-mirror"));
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(sh(*third, "ls /etc && cat /workspace/w"), "only\nws\n");
  ASSERT_TRUE(third->destroy().ok());
  EXPECT_NE(::access((g_storage + "/mi-1").c_str(), F_OK), 0);
}

TEST_F(PersistMirrorTest, ForkCopiesTheStorageOfARunningSandbox) {
  auto sb = make(spec("mk-1"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "mkdir /workspace/p && echo parent > /workspace/p/f");
  ASSERT_TRUE(backend()->copy_storage("mk-1", "mk-2").ok());
  auto child = make(spec("mk-2"));
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(sh(*child, "cat /workspace/p/f && echo child > /workspace/p/f"), "parent\n");
  EXPECT_EQ(sh(*sb, "cat /workspace/p/f"), "parent\n");
  // In use: neither removable nor a copy target while running.
  auto busy = backend()->remove_storage("mk-1");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(sb->destroy().ok());
  ASSERT_TRUE(child->destroy().ok());
}

// A root server's storage (an ext4 image) is refused, not misread.
TEST_F(PersistMirrorTest, ARootServersStorageIsRefused) {
  ASSERT_EQ(::mkdir((g_storage + "/mroot-1").c_str(), 0700), 0);
  int fd = ::open((g_storage + "/mroot-1/disk.img").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto sb = backend()->create(spec("mroot-1"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("was made by a server running as root"), std::string::npos)
      << sb.error().message();
  EXPECT_FALSE(backend()->remove_storage("mroot-1").ok());
  ASSERT_TRUE(native::remove_tree(g_storage + "/mroot-1").ok());
}

constexpr const char* kRootChildEnv = "SANDCASTLE_MIRROR_ROOT_CHILD";

// The reverse: a root server (a backend of its own, in a child) refuses a
// storage an unprivileged server made, for a start and for a fork.
TEST(PersistMirrorRoot, Child) {
  if (!std::getenv(kRootChildEnv)) GTEST_SKIP() << "started by PersistMirror.RootServerRefuses*";
  const std::string storage = std::getenv(kStorageEnv);
  ASSERT_EQ(::mkdir((storage + "/unpriv-1").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((storage + "/unpriv-1/mirror").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((storage + "/unpriv-1/mirror/workspace").c_str(), 0700), 0);
  NativeBackendOptions o;
  o.pool.min = 0;
  o.storage_dir = storage;
  auto b = NativeBackend::create(std::move(o));
  ASSERT_TRUE(b.ok()) << b.error().message();
  auto sb = (*b)->create(spec("unpriv-1"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("was made by a server running without root"),
            std::string::npos)
      << sb.error().message();
  auto copy = (*b)->copy_storage("unpriv-1", "unpriv-2");
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(::access((storage + "/unpriv-2").c_str(), F_OK), 0);
}

TEST(PersistMirror, RootServerRefusesAStorageMadeWithoutRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "a root server's side";
  if (std::getenv(kRootChildEnv)) GTEST_SKIP() << "the child itself";
  char tmpl[] = "/var/tmp/sc-mirror-root-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  ::setenv(kStorageEnv, tmpl, 1);
  auto child = run_tests_in_child("PersistMirrorRoot.Child", kRootChildEnv);
  ::unsetenv(kStorageEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test."), std::string::npos) << child.out;
  (void)native::remove_tree(tmpl);
}

TEST(PersistMirror, TestsRunInAProcessOfTheirOwn) {
  if (std::getenv(kChildEnv)) GTEST_SKIP() << "the child itself";
  char tmpl[] = "/var/tmp/sc-mirror-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  const std::string storage = base + "/storage", host = base + "/host";
  ASSERT_EQ(::mkdir(storage.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(host.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((host + "/dir").c_str(), 0700), 0);
  for (auto [path, text] :
       {std::pair{host + "/secret", "host\n"}, {host + "/dir/keep", "host dir\n"}}) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, text, std::strlen(text)), static_cast<ssize_t>(std::strlen(text)));
    ::close(fd);
  }
  if (::geteuid() == 0) {
    struct passwd* pw = ::getpwnam("sandcastle-test");
    const uid_t uid = pw ? pw->pw_uid : 65534;
    const gid_t gid = pw ? pw->pw_gid : 65534;
    for (const auto& p : {base, storage, host, host + "/dir", host + "/secret", host + "/dir/keep"})
      ASSERT_EQ(::chown(p.c_str(), uid, gid), 0) << p;
  }
  ::setenv(kStorageEnv, storage.c_str(), 1);
  ::setenv(kHostEnv, host.c_str(), 1);
  auto child = run_tests_in_child("PersistMirrorTest.*", kChildEnv);
  ::unsetenv(kStorageEnv);
  ::unsetenv(kHostEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 10 tests."), std::string::npos) << child.out;
  // Every test removed its storage.
  EXPECT_TRUE(native::list_dir(storage).empty());
  (void)native::remove_tree(base);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

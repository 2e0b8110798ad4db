// Persistent sandboxes (issue 16, persist_disk.h): files in an ext4 image
// per storage id, kept across release() and server restarts, with the disk
// limit, the sandbox's own ids on disk, copies taken while the source runs,
// and a crashed server's mounts swept. Also freeze/thaw and why there are no
// checkpoints on this kernel.
//
// These need a backend with a storage directory; a backend's runtime
// directory is named after its process, so they run in a child process
// without the fixture's shared backend (Persist.TestsRunInAProcessOfTheirOwn).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/persist_disk.h"
#include "sandbox/native/sweep.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using native::NativeBackend;
using native::NativeBackendOptions;
using native::PoolStats;

constexpr const char* kChildEnv = "SANDCASTLE_PERSIST_CHILD";
constexpr const char* kDoomedEnv = "SANDCASTLE_PERSIST_DOOMED";
constexpr const char* kStorageEnv = "SANDCASTLE_PERSIST_STORAGE";

std::string g_storage;  // this process's storage dir
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
    // One warm sandbox: a persistent start on the host image takes it and
    // gets its storage over /workspace (when one is ready: the start path
    // is covered either way).
    o.pool.min = 1;
    o.pool.max = 1;
    o.storage_dir = g_storage;
    o.images = [](const std::string& ref) -> Result<native::ImageRoot> {
      if (ref != "bb-persist") return Error::make(ErrorCode::kNotFound, "no image '" + ref + "'");
      native::ImageRoot r;
      r.name = ref;
      r.id = "sha256:test-bb-persist";
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
  if (!storage_id.empty()) {
    o.persistence = Persistence::kPersistent;
    o.storage_id = storage_id;
  }
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

pid_t init_pid(Sandbox& sb) {
  return dynamic_cast<native::NativeSandbox&>(sb).init_pid();
}

// A field of /proc/<pid>/status ("Uid" -> "1500000007\t...").
std::string status_field(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 2);
  return {};
}

std::string loop_backed_by(const std::string& path) {
  for (const auto& name : native::list_dir("/sys/block")) {
    std::string f = native::read_small_file("/sys/block/" + name + "/loop/backing_file");
    while (!f.empty() && f.back() == '\n') f.pop_back();
    if (!f.empty() && f == path) return name;
  }
  return {};
}

// The superblock options of the mount whose mount point ends in `suffix`
// ("" when there is none).
std::string super_options(const std::string& suffix) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    if (point.size() < suffix.size() ||
        point.compare(point.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string field;
    while (f >> field && field != "-") {
    }
    std::string type, source, options;
    f >> type >> source >> options;
    return options;
  }
  return {};
}

bool mounted_at(const std::string& prefix) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.find(" " + prefix) != std::string::npos) return true;
  return false;
}

// Waits (polling a condition the kernel changes on its own time) up to `limit`.
template <typename F>
bool eventually(F cond, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (auto d = 1ms; std::chrono::steady_clock::now() < end; d = std::min(d * 2, 50ms)) {
    if (cond()) return true;
    std::this_thread::sleep_for(d);
  }
  return cond();
}

// A command running on its own thread, ended (and the thread joined) when
// the test leaves, whichever way.
struct CancelOnExit {
  CancelToken& cancel;
  std::thread& thread;
  ~CancelOnExit() {
    cancel.cancel();
    if (thread.joinable()) thread.join();
  }
};

int run_cmd(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

class PersistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv(kChildEnv) || ::geteuid() != 0) return;
    const char* dir = std::getenv(kStorageEnv);
    g_storage = dir ? dir : "";
    if (std::getenv(kDoomedEnv)) return;  // dies by SIGKILL: nothing to clean up after
    char tmpl[] = "/tmp/sc-persist-layer-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    g_layer = tmpl;
    ::chmod(g_layer.c_str(), 0755);
    for (const char* d : {"/bin", "/etc"}) ASSERT_EQ(::mkdir((g_layer + d).c_str(), 0755), 0);
    put(g_layer + "/bin/busybox", native::read_small_file("/bin/busybox"), 0755);
    for (const char* applet : {"sh", "cat", "echo", "stat", "id", "dd", "mkdir", "chmod", "ls"})
      ASSERT_EQ(::symlink("busybox", (g_layer + "/bin/" + applet).c_str()), 0);
    put(g_layer + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
  }
  static void TearDownTestSuite() {
    if (!g_layer.empty()) (void)native::remove_tree(g_layer);
  }
  void SetUp() override {
    if (!std::getenv(kChildEnv))
      GTEST_SKIP() << "runs in a process of its own, started by Persist.*";
    if (::geteuid() != 0) GTEST_SKIP() << "persistent storage needs root (loop mounts)";
    ASSERT_NE(backend(), nullptr);
  }
  std::string img(const std::string& id) const { return g_storage + "/" + id + "/disk.img"; }
};

TEST_F(PersistTest, FilesSurviveReleaseWithTheirOwnerModeAndIdsOnDisk) {
  auto sb = make(spec("files-1"));
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sh(*sb,
               "mkdir -p /workspace/d && echo hello > /workspace/d/f && chmod 640 /workspace/d/f "
               "&& ls -A /workspace && id -u"),
            "d\n1000\n");
  const std::string first_host_uid = status_field(init_pid(*sb), "Uid");
  ASSERT_TRUE(sb->release().ok());
  auto listed = backend()->list_storage();
  EXPECT_NE(std::find(listed.begin(), listed.end(), "files-1"), listed.end());

  // A new start maps another host id; the files still belong to 1000 inside.
  auto again = make(spec("files-1"));
  ASSERT_NE(again, nullptr);
  EXPECT_NE(status_field(init_pid(*again), "Uid"), first_host_uid);
  EXPECT_EQ(sh(*again, "stat -c '%u %g %a' /workspace/d/f && cat /workspace/d/f"),
            "1000 1000 640\nhello\n");
  auto read = again->read_file("/workspace/d/f");
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->data, "hello\n");
  ASSERT_TRUE(again->release().ok());
  // On disk: the sandbox's own ids, not a host id of either start.
  ASSERT_EQ(run_cmd("debugfs -R 'stat /d/f' " + img("files-1") +
                    " | grep -q 'User:  1000   Group:  1000'"),
            0);

  // destroy() removes the storage.
  auto last = make(spec("files-1"));
  ASSERT_NE(last, nullptr);
  ASSERT_TRUE(last->destroy().ok());
  EXPECT_NE(::access((g_storage + "/files-1").c_str(), F_OK), 0);
  listed = backend()->list_storage();
  EXPECT_EQ(std::find(listed.begin(), listed.end(), "files-1"), listed.end());
}

// The workdir watch (change_watches.h) on storage mounted over /workspace
// after the sandbox was made: it watches the disk, not the tmpfs below it.
TEST_F(PersistTest, AWatchedListingOfTheStorageSeesItsChanges) {
  auto sb = make(spec("watch-1"));
  ASSERT_NE(sb, nullptr);
  ListOptions o;
  o.recursive = true;
  o.watch = true;
  auto listed = sb->list("/workspace", o);
  ASSERT_TRUE(listed.ok()) << listed.error().message();
  ASSERT_NE(listed->watch, 0u);
  EXPECT_EQ(sh(*sb, "cat /workspace/* 2>/dev/null; echo read"), "read\n");
  EXPECT_EQ(sb->changed_since(listed->watch), false);
  EXPECT_EQ(sh(*sb, "echo x > /workspace/f && echo wrote"), "wrote\n");
  EXPECT_EQ(sb->changed_since(listed->watch), true);
  ASSERT_TRUE(sb->destroy().ok());
}

TEST_F(PersistTest, WritesPastTheDiskLimitGetEnospcInside) {
  auto sb = make(spec("limit-1", 16 * kMiB));
  ASSERT_NE(sb, nullptr);
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=64"};
  auto r = sb->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->stderr_data.find("No space left on device"), std::string::npos) << r->stderr_data;
  struct stat st {};
  ASSERT_EQ(::stat(img("limit-1").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), 16 * kMiB);
  EXPECT_LE(static_cast<std::uint64_t>(st.st_blocks) * 512, 16 * kMiB);
  ASSERT_TRUE(sb->destroy().ok());
}

// A restart with a larger disk_bytes grows the filesystem (files kept); a
// smaller one keeps the size it has.
TEST_F(PersistTest, ALargerLimitGrowsTheStorage) {
  auto df = [](Sandbox& sb) { return sh(sb, "df -k /workspace | tail -1 | awk '{print $2}'"); };
  auto sb = make(spec("grow-1", 16 * kMiB));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "echo small > /workspace/f");
  const std::string small = df(*sb);
  ASSERT_TRUE(sb->release().ok());
  auto big = make(spec("grow-1", 64 * kMiB));
  ASSERT_NE(big, nullptr);
  const std::string grown = df(*big);
  EXPECT_GT(std::stoll(grown), 3 * std::stoll(small)) << small << " -> " << grown;
  EXPECT_EQ(sh(*big,
               "cat /workspace/f; dd if=/dev/zero of=/workspace/g bs=1M count=32 2>/dev/null && "
               "echo fits"),
            "small\nfits\n");
  ASSERT_TRUE(big->release().ok());
  struct stat st {};
  ASSERT_EQ(::stat(img("grow-1").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), 64 * kMiB);
  auto again = make(spec("grow-1", 16 * kMiB));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(df(*again), grown);
  ASSERT_TRUE(again->destroy().ok());
  EXPECT_NE(::access(img("grow-1").c_str(), F_OK), 0);
}

TEST_F(PersistTest, StorageIsRemovableOnlyWhileNoSandboxRunsOnIt) {
  auto sb = make(spec("rm-1"));
  ASSERT_NE(sb, nullptr);
  auto busy = backend()->remove_storage("rm-1");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kFailedPrecondition);
  // And no second sandbox on the same storage.
  auto twice = backend()->create(spec("rm-1"));
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(sb->release().ok());
  EXPECT_EQ(::access(img("rm-1").c_str(), F_OK), 0);
  ASSERT_TRUE(backend()->remove_storage("rm-1").ok());
  EXPECT_NE(::access((g_storage + "/rm-1").c_str(), F_OK), 0);
  EXPECT_TRUE(backend()->remove_storage("rm-1").ok());  // a missing one is ok
}

TEST_F(PersistTest, CopyTakenWhileTheSourceRunsIsIndependentAndClean) {
  auto src = make(spec("copy-src"));
  ASSERT_NE(src, nullptr);
  sh(*src, "echo before > /workspace/a && mkdir /workspace/pkgs && echo lib > /workspace/pkgs/x");
  // A writer keeps going in the source while the copy is taken.
  std::atomic<bool> stop{false};
  CancelToken cancel;
  std::thread writer([&] {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i >> /workspace/spin; done"};
    req.timeout = 60s;
    (void)src->exec(req, {}, &cancel);
  });
  CancelOnExit join{cancel, writer};
  ASSERT_TRUE(
      eventually([&] { return sh(*src, "test -s /workspace/spin && echo y; true") == "y\n"; }));
  auto copied = backend()->copy_storage("copy-src", "copy-dst");
  ASSERT_TRUE(copied.ok()) << copied.error().message();
  cancel.cancel();
  writer.join();
  auto exists = backend()->copy_storage("copy-src", "copy-dst");
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(exists.error().code, ErrorCode::kAlreadyExists);
  // A whole filesystem: e2fsck finds nothing to fix.
  EXPECT_EQ(run_cmd("e2fsck -fn " + img("copy-dst")), 0);

  sh(*src, "echo after > /workspace/a");
  auto dst = make(spec("copy-dst"));
  ASSERT_NE(dst, nullptr);
  EXPECT_EQ(sh(*dst, "cat /workspace/a /workspace/pkgs/x; stat -c %u /workspace/a"),
            "before\nlib\n1000\n");
  // A point in time of the writer's file too: whole lines 1..n, in order
  // (the bytes copied while it still wrote were copied again once frozen).
  EXPECT_EQ(sh(*dst,
               "i=0; while read l; do i=$((i+1)); [ \"$l\" = \"$i\" ] || { echo \"torn at $i: "
               "$l\"; exit; }; done < /workspace/spin; [ $i -gt 0 ] && echo whole"),
            "whole\n");
  sh(*dst, "echo only-in-copy > /workspace/b");
  EXPECT_EQ(sh(*src, "cat /workspace/a; ls /workspace/b 2>/dev/null; echo end"), "after\nend\n");
  ASSERT_TRUE(dst->destroy().ok());
  // A copy a killed server left half-made (no disk.img yet) is made again.
  ASSERT_EQ(::mkdir((g_storage + "/copy-half").c_str(), 0700), 0);
  put(g_storage + "/copy-half/disk.img.new", "partial");
  auto redone = backend()->copy_storage("copy-src", "copy-half");
  ASSERT_TRUE(redone.ok()) << redone.error().message();
  EXPECT_EQ(run_cmd("e2fsck -fn " + img("copy-half")), 0);
  EXPECT_TRUE(backend()->remove_storage("copy-half").ok());
  ASSERT_TRUE(src->destroy().ok());
  auto missing = backend()->copy_storage("copy-src", "copy-x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

// A source still backed by a loop device this server does not hold (as a
// just-released sandbox's filesystem is until the kernel lets it go) is
// not copied: it would be a live, dirty ext4. Here the device stays.
TEST_F(PersistTest, CopyRefusesASourceStillAttachedElsewhere) {
  auto sb = make(spec("held-src"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "echo x > /workspace/x");
  ASSERT_TRUE(sb->release().ok());
  ASSERT_TRUE(eventually([&] { return loop_backed_by(img("held-src")).empty(); }));
  std::string dev;
  {
    FILE* p = ::popen(("losetup -f --show " + img("held-src")).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[64] = {};
    if (::fgets(buf, sizeof buf, p)) dev = buf;
    ::pclose(p);
    while (!dev.empty() && dev.back() == '\n') dev.pop_back();
  }
  ASSERT_EQ(dev.rfind("/dev/loop", 0), 0u) << dev;
  auto held = backend()->copy_storage("held-src", "held-dst");
  EXPECT_EQ(run_cmd("losetup -d " + dev), 0);
  ASSERT_FALSE(held.ok());
  EXPECT_EQ(held.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(held.error().message().find("still attached to " + dev), std::string::npos)
      << held.error().message();
  EXPECT_NE(held.error().message().find("/proc/*/mountinfo"), std::string::npos);
  EXPECT_NE(::access(img("held-dst").c_str(), F_OK), 0);
  // Once it is gone, the copy is made.
  ASSERT_TRUE(eventually([&] { return loop_backed_by(img("held-src")).empty(); }));
  auto copied = backend()->copy_storage("held-src", "held-dst");
  ASSERT_TRUE(copied.ok()) << copied.error().message();
  EXPECT_EQ(run_cmd("e2fsck -fn " + img("held-dst")), 0);
  EXPECT_TRUE(backend()->remove_storage("held-dst").ok());
  EXPECT_TRUE(backend()->remove_storage("held-src").ok());
}

// What a kill -9 leaves mid-mkfs, mid-copy or mid-remove (an image under
// its temporary name, or an empty directory) is listed, so the server can
// remove it (ids are random: nothing would ever reuse it).
TEST_F(PersistTest, HalfMadeStorageIsListedAndRemovable) {
  ASSERT_EQ(::mkdir((g_storage + "/half-empty").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((g_storage + "/half-new").c_str(), 0700), 0);
  put(g_storage + "/half-new/disk.img.new", "partial");
  put(g_storage + "/half-file", "not a storage");
  ASSERT_EQ(::mkdir((g_storage + "/Not_An_Id").c_str(), 0700), 0);
  auto listed = backend()->list_storage();
  auto has = [&](const char* id) {
    return std::find(listed.begin(), listed.end(), id) != listed.end();
  };
  EXPECT_TRUE(has("half-empty"));
  EXPECT_TRUE(has("half-new"));
  EXPECT_FALSE(has("half-file"));
  EXPECT_FALSE(has("Not_An_Id"));
  EXPECT_TRUE(backend()->remove_storage("half-empty").ok());
  EXPECT_TRUE(backend()->remove_storage("half-new").ok());
  EXPECT_NE(::access((g_storage + "/half-empty").c_str(), F_OK), 0);
  EXPECT_NE(::access((g_storage + "/half-new").c_str(), F_OK), 0);
  ::unlink((g_storage + "/half-file").c_str());
  ::rmdir((g_storage + "/Not_An_Id").c_str());
}

// A persistent start on the host image takes the warm sandbox made for the
// same spec (but its /workspace) and mounts its storage over that tmpfs:
// the files, the ids on disk and the disk limit are the storage's.
TEST_F(PersistTest, AStartTakesAWarmSandboxWithItsStorageAsWorkspace) {
  ASSERT_TRUE(backend()->wait_pool([](const PoolStats& s) { return s.ready >= 1; }, 20s));
  const auto taken = backend()->pool_stats().taken;
  auto sb = make(spec("warm-1", 16 * kMiB));
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(backend()->pool_stats().taken, taken + 1);
  EXPECT_EQ(sh(*sb,
               "stat -f -c %T /workspace; echo w > /workspace/f; id -u; stat -c %u "
               "/workspace/f; ulimit -n"),
            "ext2/ext3\n1000\n1000\n1024\n");
  // The disk limit is the storage's 16 MiB, not the warm sandbox's tmpfs.
  ExecRequest dd;
  dd.argv = {"/bin/sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=32"};
  auto full = sb->exec(dd);
  ASSERT_TRUE(full.ok()) << full.error().message();
  EXPECT_NE(full->exit_code, 0);
  EXPECT_NE(full->stderr_data.find("No space left on device"), std::string::npos)
      << full->stderr_data;
  ASSERT_TRUE(sb->release().ok());
  // On disk: the sandbox's own id, through the idmapped mount.
  EXPECT_EQ(
      run_cmd("debugfs -R 'stat /f' " + img("warm-1") + " | grep -q 'User:  1000   Group:  1000'"),
      0);

  // A spec the pool was not made for (another memory limit) starts anew.
  ASSERT_TRUE(backend()->wait_pool([](const PoolStats& s) { return s.ready >= 1; }, 20s));
  SpecOptions o = spec("warm-1", 16 * kMiB).options();
  o.limits.memory_bytes = 200 * kMiB;
  auto other_spec = SandboxSpec::create(o);
  ASSERT_TRUE(other_spec.ok());
  const auto taken_before = backend()->pool_stats().taken;
  auto other = make(*other_spec);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(backend()->pool_stats().taken, taken_before);
  EXPECT_EQ(sh(*other, "cat /workspace/f"), "w\n");
  ASSERT_TRUE(other->destroy().ok());
}

// A copy's loop device is attached before its bytes are written (so the
// attach does not write them all out on the fork's path); its first start
// mounts it, without barriers until a thread has written it out. A copy
// nobody starts lets its device go with remove_storage.
TEST_F(PersistTest, ACopysDeviceIsAttachedAheadAndBarriersComeBackOnceWrittenOut) {
  auto src = make(spec("pre-src"));
  ASSERT_NE(src, nullptr);
  sh(*src, "echo a > /workspace/a");
  ASSERT_TRUE(backend()->copy_storage("pre-src", "pre-dst").ok());
  EXPECT_FALSE(loop_backed_by(img("pre-dst")).empty());
  EXPECT_EQ(run_cmd("e2fsck -fn " + img("pre-dst")), 0);
  // A copy of a copy nobody started yet: its device is ours (no wait for
  // it to go, no refusal).
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(backend()->copy_storage("pre-dst", "pre-dst2").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(run_cmd("e2fsck -fn " + img("pre-dst2")), 0);

  auto dst = make(spec("pre-dst"));
  ASSERT_NE(dst, nullptr);
  EXPECT_EQ(sh(*dst, "cat /workspace/a"), "a\n");
  EXPECT_TRUE(eventually([] {
    const std::string opts = super_options("/pst/pre-dst");
    return !opts.empty() && opts.find("nobarrier") == std::string::npos;
  })) << super_options("/pst/pre-dst");
  sh(*dst, "echo b > /workspace/b");
  ASSERT_TRUE(dst->destroy().ok());
  // Destroyed at once, while its copy may still be being written out:
  // removed all the same.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(backend()->copy_storage("pre-src", "pre-now").ok());
    auto now = make(spec("pre-now"));
    ASSERT_NE(now, nullptr);
    auto gone = now->destroy();
    ASSERT_TRUE(gone.ok()) << gone.error().message();
    EXPECT_NE(::access((g_storage + "/pre-now").c_str(), F_OK), 0);
  }

  const std::string dev = loop_backed_by(img("pre-dst2"));
  EXPECT_FALSE(dev.empty());
  ASSERT_TRUE(backend()->remove_storage("pre-dst2").ok());
  // (Detached, or another file's by now; the removed image shows as
  // "... (deleted)" while it is still attached.)
  EXPECT_TRUE(eventually([&] {
    return native::read_small_file("/sys/block/" + dev + "/loop/backing_file").find("/pre-dst2/") ==
           std::string::npos;
  }));
  EXPECT_NE(::access((g_storage + "/pre-dst2").c_str(), F_OK), 0);
  ASSERT_TRUE(src->destroy().ok());
}

// Forks nobody starts (a caller at its quota) keep no more than 8 devices
// ready; one that gave its device back still starts, with its files.
TEST_F(PersistTest, CopiesNobodyStartsHoldAtMostEightDevices) {
  auto src = make(spec("cap-src"));
  ASSERT_NE(src, nullptr);
  sh(*src, "echo kept > /workspace/k");
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(backend()->copy_storage("cap-src", "cap-" + std::to_string(i)).ok());
  int attached = 0;
  for (int i = 0; i < 10; ++i)
    if (!loop_backed_by(img("cap-" + std::to_string(i))).empty()) ++attached;
  EXPECT_EQ(attached, 8);
  EXPECT_TRUE(eventually([&] { return loop_backed_by(img("cap-0")).empty(); }));
  auto first = make(spec("cap-0"));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(sh(*first, "cat /workspace/k"), "kept\n");
  ASSERT_TRUE(first->destroy().ok());
  for (int i = 1; i < 10; ++i)
    ASSERT_TRUE(backend()->remove_storage("cap-" + std::to_string(i)).ok());
  ASSERT_TRUE(src->destroy().ok());
}

TEST_F(PersistTest, ImageSandboxKeepsItsRootAndWorkspace) {
  auto sb = make(spec("img-1", 64 * kMiB, "bb-persist"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "echo root-change > /etc/added && mkdir -p /workspace && echo ws > /workspace/w");
  ASSERT_TRUE(sb->release().ok());
  auto again = make(spec("img-1", 64 * kMiB, "bb-persist"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again, "cat /etc/added /workspace/w; stat -c %u /etc/added"),
            "root-change\nws\n1000\n");
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "dd if=/dev/zero of=/big bs=1M count=100"};
  auto r = again->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->stderr_data.find("No space left on device"), std::string::npos) << r->stderr_data;
  ASSERT_TRUE(again->destroy().ok());
}

TEST_F(PersistTest, FreezeStopsEveryProcessAndThawLetsThemGoOn) {
  auto sb = make(spec(""));
  ASSERT_NE(sb, nullptr);
  CancelToken cancel;
  std::thread counter([&] {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c",
                "i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; done"};
    req.timeout = 60s;
    (void)sb->exec(req, {}, &cancel);
  });
  CancelOnExit join{cancel, counter};
  // Read through the sandbox's root as the test (root) sees it: the
  // sandbox's own file worker is frozen too.
  const std::string c = "/proc/" + std::to_string(init_pid(*sb)) + "/root/tmp/c";
  auto value = [&] { return native::read_small_file(c); };
  ASSERT_TRUE(eventually([&] { return !value().empty(); }));
  auto frozen = sb->freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message();
  ASSERT_TRUE(sb->freeze().ok());  // idempotent
  const std::string at_freeze = value();
  std::this_thread::sleep_for(300ms);  // a window in which a running loop writes hundreds
  EXPECT_EQ(value(), at_freeze);
  ASSERT_TRUE(sb->thaw().ok());
  EXPECT_TRUE(eventually([&] { return value() != at_freeze; }));
  cancel.cancel();
  counter.join();
  // Frozen again, destroy still ends it (thawed first).
  auto again = sb->freeze();
  ASSERT_TRUE(again.ok()) << again.error().message();
  ASSERT_TRUE(sb->destroy().ok());
  auto after = sb->freeze();
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, ErrorCode::kUnavailable);
}

TEST_F(PersistTest, CheckpointsAreRefusedWithCriusReason) {
  auto support = backend()->checkpoint_support();
  if (support.ok()) GTEST_SKIP() << "criu check passes here";
  EXPECT_EQ(support.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(support.error().message().rfind("criu", 0), 0u) << support.error().message();
  auto sb = make(spec(""));
  ASSERT_NE(sb, nullptr);
  auto cp = sb->checkpoint("/tmp/sc-persist-never");
  ASSERT_FALSE(cp.ok());
  EXPECT_EQ(cp.error().message(), support.error().message());
  auto restored = backend()->restore(spec(""), "/tmp/sc-persist-never");
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().code, ErrorCode::kUnavailable);
}

TEST_F(PersistTest, ZygoteKilledTheBackendGoesOnAndCompletedWritesStay) {
  auto sb = make(spec("zyg-1"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "echo kept > /workspace/k");
  const pid_t init = init_pid(*sb);
  const pid_t zygote = static_cast<pid_t>(std::stol(status_field(init, "PPid")));
  ASSERT_EQ(status_field(zygote, "Name"), "sc-zygote");
  UniqueFd init_fd(static_cast<int>(::syscall(SYS_pidfd_open, init, 0)));
  ASSERT_TRUE(init_fd);
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  struct pollfd p {
    init_fd.get(), POLLIN, 0
  };
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);  // the sandbox died with its zygote
  ASSERT_TRUE(sb->release().ok());
  auto again = make(spec("zyg-1"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(sh(*again, "cat /workspace/k"), "kept\n");
  ASSERT_TRUE(again->destroy().ok());
}

// The doomed server: sets up storage with a completed write, then dies by
// SIGKILL with its mounts in place (run by the next test, alone).
TEST_F(PersistTest, DoomedServerDiesHoldingItsStorage) {
  if (!std::getenv(kDoomedEnv)) GTEST_SKIP() << "the child of StaleMountsOfAKilledServerAreSwept";
  auto sb = make(spec("stale-1"));
  ASSERT_NE(sb, nullptr);
  sh(*sb, "echo survived > /workspace/s");
  // And a sandbox frozen when the server dies (a v1 freezer keeps its
  // processes, SIGKILLed or not, until thawed).
  auto frozen = make(spec(""));
  ASSERT_NE(frozen, nullptr);
  ASSERT_TRUE(frozen->freeze().ok());
  ::kill(::getpid(), SIGKILL);
}

TEST_F(PersistTest, StaleMountsOfAKilledServerAreSwept) {
  if (std::getenv(kDoomedEnv)) GTEST_SKIP();
  auto child = run_tests_in_child("PersistTest.DoomedServerDiesHoldingItsStorage", kDoomedEnv);
  ASSERT_TRUE(WIFSIGNALED(child.status) && WTERMSIG(child.status) == SIGKILL) << child.out;
  const std::string base = native::runtime_parent() + "/sandcastle-" + std::to_string(child.pid);
  EXPECT_TRUE(mounted_at(base + "/pst/stale-1")) << "the killed server's mount is gone already";
  EXPECT_FALSE(loop_backed_by(img("stale-1")).empty());
  // Its frozen sandbox's processes (on a v1 freezer), still there.
  std::vector<pid_t> frozen;
  std::string freezer_group;
  for (const auto& line : {native::read_small_file("/proc/self/cgroup")}) {
    auto at = line.find(":freezer:");
    if (at == std::string::npos) break;
    std::string rel = line.substr(at + 9, line.find('\n', at) - at - 9);
    if (rel == "/") rel.clear();
    const std::string home = "/sys/fs/cgroup/freezer" + rel;
    for (const auto& name : native::list_dir(home))
      if (name.rfind("sandcastle-save-sandcastle-" + std::to_string(child.pid) + "-", 0) == 0)
        freezer_group = home + "/" + name;
  }
  if (!freezer_group.empty()) {
    std::istringstream procs(native::read_small_file(freezer_group + "/cgroup.procs"));
    for (pid_t p; procs >> p;) frozen.push_back(p);
    EXPECT_FALSE(frozen.empty());
  }
  auto rep = native::sweep_leftovers();
  std::string failed;
  for (const auto& f : rep.failed) failed += f + "\n";
  EXPECT_NE(std::find(rep.removed.begin(), rep.removed.end(), base), rep.removed.end()) << failed;
  EXPECT_FALSE(mounted_at(base + "/"));
  EXPECT_NE(::access(base.c_str(), F_OK), 0);
  EXPECT_TRUE(eventually([&] { return loop_backed_by(img("stale-1")).empty(); }))
      << "loop device still attached: " << loop_backed_by(img("stale-1"));
  if (!freezer_group.empty()) {
    EXPECT_NE(::access(freezer_group.c_str(), F_OK), 0);
    for (pid_t p : frozen)
      EXPECT_TRUE(eventually([p] { return ::kill(p, 0) != 0 && errno == ESRCH; })) << p;
  }
  // Never deleted: the storage and its completed write are there.
  auto sb = make(spec("stale-1"));
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sh(*sb, "cat /workspace/s"), "survived\n");
  ASSERT_TRUE(sb->destroy().ok());
}

TEST(Persist, RefusedWithoutAStorageDirectory) {
  std::string why;
  auto* b = shared_backend(&why);
  ASSERT_NE(b, nullptr) << why;
  auto sb = b->create(spec("no-dir"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("no storage directory"), std::string::npos)
      << sb.error().message();
}

constexpr const char* kUnprivilegedEnv = "SANDCASTLE_PERSIST_UNPRIVILEGED";

// The check a backend makes of a persistent spec (check_supported), in a
// process of its own that gave up root first.
TEST(Persist, UnprivilegedChild) {
  if (!std::getenv(kUnprivilegedEnv)) GTEST_SKIP() << "started by Persist.RefusedWithoutRoot";
  ASSERT_EQ(::setgroups(0, nullptr), 0);
  ASSERT_EQ(::setresgid(65534, 65534, 65534), 0);
  ASSERT_EQ(::setresuid(65534, 65534, 65534), 0);
  native::PersistStore store("/var/tmp/sc-persist-unprivileged", native::RuntimeDirs{});
  auto st = store.usable();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message().find("need the server to run as root"), std::string::npos)
      << st.error().message();
  auto attached = store.attach("any-1", 16 * kMiB, 1000, 1000);
  ASSERT_FALSE(attached.ok());
  EXPECT_EQ(attached.error().message(), st.error().message());
  EXPECT_NE(::access("/var/tmp/sc-persist-unprivileged", F_OK), 0);  // nothing made
}

TEST(Persist, RefusedWithoutRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "drops root in a child: needs it first";
  auto child = run_tests_in_child("Persist.UnprivilegedChild", kUnprivilegedEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test."), std::string::npos) << child.out;
}

constexpr const char* kNoToolEnv = "SANDCASTLE_PERSIST_NO_TOOL";

// resize2fs hidden (in a mount namespace of this process only): refused
// up front, naming it, rather than failing later as "run : No such file".
TEST(Persist, NoToolChild) {
  if (!std::getenv(kNoToolEnv)) GTEST_SKIP() << "started by Persist.RefusedWithoutE2fsprogsTools";
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << errno;
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << errno;
  for (const char* p : {"/usr/sbin/resize2fs", "/sbin/resize2fs"}) {
    if (::access(p, F_OK) != 0) continue;
    ASSERT_EQ(::mount("/dev/null", p, nullptr, MS_BIND, nullptr), 0) << p << ": " << errno;
  }
  native::PersistStore store("/var/tmp/sc-persist-no-tool", native::RuntimeDirs{});
  auto st = store.usable();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message(),
            "persistent sandboxes need resize2fs, which is not installed (Debian's e2fsprogs "
            "package)");
  EXPECT_NE(::access("/var/tmp/sc-persist-no-tool", F_OK), 0);  // nothing made
}

TEST(Persist, RefusedWithoutE2fsprogsTools) {
  if (::geteuid() != 0) GTEST_SKIP() << "hides a tool with a bind mount: needs root";
  auto child = run_tests_in_child("Persist.NoToolChild", kNoToolEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test."), std::string::npos) << child.out;
}

TEST(Persist, TestsRunInAProcessOfTheirOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "persistent storage needs root (loop mounts)";
  char tmpl[] = "/var/tmp/sc-persist-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string storage = tmpl;
  ::setenv(kStorageEnv, storage.c_str(), 1);
  auto child = run_tests_in_child("PersistTest.*", kChildEnv);
  ::unsetenv(kStorageEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 16 tests."), std::string::npos) << child.out;
  // Every test removed its storage.
  EXPECT_TRUE(native::list_dir(storage).empty());
  (void)native::remove_tree(storage);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

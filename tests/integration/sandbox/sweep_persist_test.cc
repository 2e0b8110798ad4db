// The start-up sweep (sweep.h) as root, against what another user may have
// planted (a runtime dir of a dead pid whose pst/pmap/img are symlinks: a
// followed one would unmount the host's own mounts), and against a dead
// server's storage left frozen (FIFREEZE) with a writer stuck on it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "fixture.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/sweep.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSymlinkChildEnv = "SANDCASTLE_SWEEP_SYMLINK_CHILD";
constexpr uid_t kOtherUser = 65534;

pid_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) _exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

bool mount_root(const std::string& path) {
  struct statx sx {};
  return ::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, 0, &sx) == 0 &&
         (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
         (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

template <typename F>
bool eventually(F cond, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (auto d = 1ms; std::chrono::steady_clock::now() < end; d = std::min(d * 2, 50ms)) {
    if (cond()) return true;
    std::this_thread::sleep_for(d);
  }
  return cond();
}

// In a mount namespace of its own (private): were the sweep to follow the
// planted symlinks, it would unmount only this process's copies of /proc
// and the rest, never the host's.
TEST(Sweep, SymlinkChild) {
  if (!std::getenv(kSymlinkChildEnv))
    GTEST_SKIP() << "started by Sweep.NeverFollowsPlantedSymlinks";
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << errno;
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << errno;
  const std::vector<std::string> host_mounts = {"/proc", "/sys", "/dev"};
  for (const auto& m : host_mounts) ASSERT_TRUE(mount_root(m)) << m;

  // What a followed symlink would reach: a tmpfs holding a tmpfs, made here.
  char tmpl[] = "/run/sc-sweep-target-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string target = tmpl;
  const std::string x = target + "/x", xd = target + "/x/d";
  ASSERT_EQ(::mkdir(x.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", x.c_str(), "tmpfs", 0, "size=1m"), 0) << errno;
  ASSERT_EQ(::mkdir(xd.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", xd.c_str(), "tmpfs", 0, "size=1m"), 0) << errno;
  ASSERT_EQ(::mkdir((xd + "/keep").c_str(), 0755), 0);

  auto dir = [](const std::string& path, uid_t owner = 0) {
    ASSERT_EQ(::mkdir(path.c_str(), 0755), 0) << path << ": " << errno;
    ASSERT_EQ(::chown(path.c_str(), owner, owner), 0);
  };
  auto link = [](const std::string& to, const std::string& path, uid_t owner = 0) {
    ASSERT_EQ(::symlink(to.c_str(), path.c_str()), 0) << path << ": " << errno;
    ASSERT_EQ(::lchown(path.c_str(), owner, owner), 0);
  };
  // The reported attack: a local user's /tmp/sandcastle-<dead pid>/pst -> /.
  const std::string in_tmp = "/tmp/sandcastle-" + std::to_string(dead_pid());
  dir(in_tmp, kOtherUser);
  link("/", in_tmp + "/pst", kOtherUser);
  link(target, in_tmp + "/pmap", kOtherUser);
  link(target, in_tmp + "/img", kOtherUser);
  // Root's runtime dirs (as a dead server's would be) whose subdirs are
  // symlinks, or whose entries are.
  const std::string parent = native::runtime_parent();
  const std::string linked = parent + "/sandcastle-" + std::to_string(dead_pid());
  dir(linked);
  for (const char* sub : {"/pst", "/pmap", "/img"}) link(target, linked + sub);
  const std::string entries = parent + "/sandcastle-" + std::to_string(dead_pid());
  dir(entries);
  for (const char* sub : {"/pst", "/pmap", "/img"}) dir(entries + sub);
  link(x, entries + "/pst/y");   // pst/y: the tmpfs itself
  link(x, entries + "/pmap/z");  // pmap/z/d: the inner tmpfs
  link(x, entries + "/img/z");   // img/z/d and img/z
  // Another user's runtime dir where ours go: not ours to sweep at all.
  const std::string foreign = parent + "/sandcastle-" + std::to_string(dead_pid());
  dir(foreign, kOtherUser);
  link(target, foreign + "/pst", kOtherUser);

  native::SweepReport rep = native::sweep_leftovers();

  for (const auto& m : host_mounts) EXPECT_TRUE(mount_root(m)) << m << " was unmounted";
  EXPECT_TRUE(mount_root(x)) << "the sweep followed a symlink to " << x;
  EXPECT_TRUE(mount_root(xd)) << "the sweep followed a symlink to " << xd;
  EXPECT_TRUE(exists(xd + "/keep"));
  // Root's are removed (their symlinks, not what they lead to); the other
  // user's are left alone.
  EXPECT_TRUE(contains(rep.removed, linked)) << joined(rep.removed) << joined(rep.failed);
  EXPECT_TRUE(contains(rep.removed, entries)) << joined(rep.removed) << joined(rep.failed);
  EXPECT_FALSE(exists(linked));
  EXPECT_FALSE(exists(entries));
  EXPECT_TRUE(exists(foreign + "/pst"));
  EXPECT_TRUE(exists(in_tmp + "/pst"));
  for (const auto& f : rep.failed)
    for (const auto& d : {in_tmp, linked, entries, foreign})
      EXPECT_EQ(f.rfind(d, 0), std::string::npos) << f;

  (void)native::remove_tree(in_tmp);
  (void)native::remove_tree(foreign);
  ::umount2(xd.c_str(), MNT_DETACH);
  ::umount2(x.c_str(), MNT_DETACH);
  (void)native::remove_tree(target);
}

TEST(Sweep, NeverFollowsPlantedSymlinks) {
  if (::geteuid() != 0) GTEST_SKIP() << "the sweep unmounts only as root";
  auto child = run_tests_in_child("Sweep.SymlinkChild", kSymlinkChildEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test."), std::string::npos) << child.out;
}

// A server killed while copying a running sandbox's storage leaves that
// ext4 frozen, and the sandbox's writers stuck on it (D state: SIGKILL waits
// for the thaw), so their cgroups cannot go until it is thawed.
TEST(Sweep, ThawsADeadServersFrozenStorageBeforeItsCgroups) {
  if (::geteuid() != 0) GTEST_SKIP() << "loop mounts and cgroups need root";
  native::CgroupSupport cg = native::detect_cgroups();
  if (cg.version != native::CgroupVersion::kV1 || cg.v1_parents.empty())
    GTEST_SKIP() << "written for this host's v1 hierarchies";
  const pid_t dead = dead_pid();
  const std::string base = native::runtime_parent() + "/sandcastle-" + std::to_string(dead);
  const std::string mnt = base + "/pst/t";
  const std::string group =
      cg.v1_parents.begin()->second + "/sandcastle-" + std::to_string(dead) + "-0";
  char tmpl[] = "/var/tmp/sc-sweep-frozen-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string img = std::string(tmpl) + "/disk.img";
  pid_t writer = -1;
  // Whatever happens, nothing stays frozen, mounted or stuck.
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[&] {
    if (UniqueFd root{::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)})
      ::ioctl(root.get(), FITHAW, 0);
    if (writer > 0 && ::kill(writer, SIGKILL) == 0) ::waitpid(writer, nullptr, 0);
    ::umount2(mnt.c_str(), MNT_DETACH);
    ::rmdir(group.c_str());
    (void)native::remove_tree(base);
    ::unlink(img.c_str());
    ::rmdir(tmpl);
  }};
  for (const auto& d : {base, base + "/pst", mnt}) ASSERT_EQ(::mkdir(d.c_str(), 0700), 0) << d;
  ASSERT_EQ(std::system(("truncate -s 16M " + img + " && mkfs.ext4 -q -F " + img +
                         " && mount -o loop " + img + " " + mnt)
                            .c_str()),
            0);
  {
    UniqueFd root(::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root);
    ASSERT_EQ(::ioctl(root.get(), FIFREEZE, 0), 0) << errno;
  }
  // The dead server's sandbox: a writer in a group of its, stuck on the freeze.
  ASSERT_EQ(::mkdir(group.c_str(), 0755), 0) << group << ": " << errno;
  const std::string procs = group + "/cgroup.procs";
  const std::string file = mnt + "/f";
  writer = ::fork();
  if (writer == 0) {
    int g = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (g < 0 || ::write(g, "0", 1) != 1) _exit(2);
    ::close(g);
    int f = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f >= 0) (void)!::write(f, "x", 1);
    _exit(0);
  }
  ASSERT_GT(writer, 0);
  auto state = [writer] {
    std::string s = native::read_small_file("/proc/" + std::to_string(writer) + "/stat");
    auto at = s.rfind(") ");
    return at == std::string::npos ? '?' : s[at + 2];
  };
  // In the group first (joining can itself block a moment), then stuck.
  ASSERT_TRUE(
      eventually([&] { return native::read_small_file(procs) == std::to_string(writer) + "\n"; }));
  ASSERT_TRUE(eventually([&] { return state() == 'D'; })) << state();

  native::SweepReport rep = native::sweep_leftovers();

  EXPECT_TRUE(contains(rep.removed, group)) << joined(rep.failed);
  EXPECT_TRUE(contains(rep.removed, base)) << joined(rep.failed);
  int status = 0;
  EXPECT_EQ(::waitpid(writer, &status, 0), writer);
  writer = -1;
  // Thawed, it went on: finished its write, or took the sweep's SIGKILL.
  EXPECT_TRUE((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
              (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
      << status;
  EXPECT_FALSE(exists(group));
  EXPECT_FALSE(exists(base));
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

// doctor reports this host truthfully; sweep removes a dead server's leftovers
// and nothing of a live one.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "sandbox/native/doctor.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/sweep.h"

namespace sandcastle::sandbox::native {
namespace {

TEST(Doctor, ReportsAdequateIsolationHere) {
  std::ostringstream out;
  EXPECT_EQ(run_doctor(out), 0) << out.str();
  EXPECT_NE(out.str().find("user namespaces       yes"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("isolation: adequate"), std::string::npos);
  // This kernel mounts overlay in a user namespace (sandboxes from images).
  EXPECT_NE(out.str().find("overlay in userns     yes"), std::string::npos) << out.str();
  IsolationReport r = check_isolation();
  EXPECT_TRUE(r.adequate);
  EXPECT_TRUE(r.overlay_in_userns);
  EXPECT_EQ(r.cgroup_version, ::geteuid() == 0 ? "v1" : "none");
}

TEST(Sweep, RemovesDeadServersLeftoversOnly) {
  pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  std::string stale = runtime_parent() + "/sandcastle-" + std::to_string(dead);
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((stale + "/etc").c_str(), 0755), 0);
  std::string live = runtime_parent() + "/sandcastle-" + std::to_string(::getppid()) + "-keep";
  ::mkdir(live.c_str(), 0755);
  SweepReport rep = sweep_leftovers();
  struct stat st {};
  EXPECT_NE(::stat(stale.c_str(), &st), 0) << "stale runtime dir survived";
  EXPECT_EQ(::stat(live.c_str(), &st), 0) << "a live server's dir was removed";
  ::rmdir(live.c_str());
  EXPECT_TRUE(rep.failed.empty());
}

// As root, a server that died while making an image sandbox leaves its
// idmapped layer binds mounted (image_root.h): sweep unmounts them first.
TEST(Sweep, UnmountsADeadServersLayerBinds) {
  if (::geteuid() != 0) GTEST_SKIP() << "layer binds are made as root only";
  pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = runtime_parent() + "/sandcastle-" + std::to_string(dead);
  const std::string bind = stale + "/img/sandcastle-" + std::to_string(dead) + "-0/0";
  const std::string sbdir = stale + "/img/sandcastle-" + std::to_string(dead) + "-0";
  for (const std::string& d : {stale, stale + "/img", sbdir})
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
  // As LayerMounts leaves them: the sandbox's directory bound onto itself
  // (private), the layers' bind inside it.
  ASSERT_EQ(::mount(sbdir.c_str(), sbdir.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_EQ(::mount(nullptr, sbdir.c_str(), nullptr, MS_PRIVATE, nullptr), 0);
  ASSERT_EQ(::mkdir(bind.c_str(), 0755), 0);
  ASSERT_EQ(::mount("/usr", bind.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_EQ(::mount(nullptr, bind.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0);
  SweepReport rep = sweep_leftovers();
  struct stat st {};
  EXPECT_NE(::stat(stale.c_str(), &st), 0) << "stale runtime dir survived";
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0];
  EXPECT_EQ(::stat("/usr/bin", &st), 0) << "the bound tree itself was touched";
}

// A number that overflows pid_t names no server: sscanf's %d used to wrap
// 2^32 + pid to pid, and a dead pid made sweep remove a stranger's directory.
TEST(Sweep, KeepsNamesWhosePidOverflows) {
  pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  std::string odd = runtime_parent() + "/sandcastle-" + std::to_string((1LL << 32) + dead);
  ASSERT_EQ(::mkdir(odd.c_str(), 0755), 0);
  SweepReport rep = sweep_leftovers();
  struct stat st {};
  EXPECT_EQ(::stat(odd.c_str(), &st), 0) << "a directory with an overflowing pid was removed";
  ::rmdir(odd.c_str());
  EXPECT_TRUE(rep.failed.empty());
}

}  // namespace
}  // namespace sandcastle::sandbox::native

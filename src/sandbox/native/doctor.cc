#include "sandbox/native/doctor.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/seccomp.h"
#include "sandbox/native/userns.h"

namespace sandcastle::sandbox::native {
namespace {

// A child cloned straight into new namespaces (as the zygote clones inits)
// that exits at once. Not fork + unshare: unshare(CLONE_NEWUSER) fails with
// EINVAL in a process with more than one thread, and a forked copy of the
// server may have one more than its caller (ThreadSanitizer's runtime starts
// a thread in it).
bool can_create_namespaces() {
  struct clone_args ca {};
  ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
             CLONE_NEWUTS | CLONE_NEWCGROUP;
  ca.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) syscall(SYS_exit_group, 0);
  if (pid < 0) return false;
  int st = 0;
  while (::waitpid(static_cast<pid_t>(pid), &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// What an image sandbox's init does (image_root.h): in a new user and mount
// namespace mapped to our own id, an overlay with userxattr, over a tmpfs of
// its own, written to. The child waits for its maps, then makes only raw
// syscalls.
bool can_mount_overlay_in_userns() {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return false;
  struct clone_args ca {};
  ca.flags = CLONE_NEWUSER | CLONE_NEWNS;
  ca.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) {
    char c;
    ::close(go[1]);
    if (::read(go[0], &c, 1) != 1) syscall(SYS_exit_group, 2);
    bool ok = ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
              ::mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") == 0 && ::mkdir("/tmp/l", 0755) == 0 &&
              ::mkdir("/tmp/u", 0755) == 0 && ::mkdir("/tmp/w", 0755) == 0 && ::mkdir("/tmp/m", 0755) == 0 &&
              ::mount("overlay", "/tmp/m", "overlay", 0, "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr") == 0;
    int fd = ok ? ::open("/tmp/m/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
    syscall(SYS_exit_group, fd >= 0 ? 0 : 1);
  }
  ::close(go[0]);
  if (pid < 0) {
    ::close(go[1]);
    return false;
  }
  IdMapping m;
  m.inside_uid = m.inside_gid = 0;
  m.host_uid = ::geteuid();
  m.host_gid = ::getegid();
  m.deny_setgroups = true;
  const bool mapped = write_id_maps(static_cast<pid_t>(pid), m).ok();
  if (mapped) (void)!::write(go[1], "g", 1);
  ::close(go[1]);
  int st = 0;
  while (::waitpid(static_cast<pid_t>(pid), &st, 0) < 0 && errno == EINTR) {
  }
  return mapped && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

}  // namespace

IsolationReport check_isolation() {
  IsolationReport r;
  r.user_namespaces = can_create_namespaces();
  r.seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 && compile_seccomp_bpf().ok();
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, ::getpid(), 0));
  r.pidfd = pfd >= 0;
  if (pfd >= 0) ::close(pfd);
  r.overlayfs = read_small_file("/proc/filesystems").find("overlay") != std::string::npos;
  r.overlay_in_userns = r.overlayfs && r.user_namespaces && can_mount_overlay_in_userns();
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  r.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
  CgroupSupport cg = detect_cgroups();
  r.cgroup_version = cgroup_version_name(cg.version);
  if (cg.version == CgroupVersion::kV1)
    for (const auto& [c, dir] : cg.v1_parents) r.controllers.push_back(c);
  if (cg.version == CgroupVersion::kV2) {
    std::string ctl = read_small_file(cg.v2_parent + "/cgroup.subtree_control");
    for (const char* c : {"memory", "pids", "cpu"})
      if (ctl.find(c) != std::string::npos) r.controllers.push_back(c);
  }
  std::string helper = find_init_helper();
  if (::access(helper.c_str(), X_OK) == 0) r.init_helper = helper;

  if (!r.user_namespaces)
    r.problems.push_back("user namespaces unavailable: set kernel.unprivileged_userns_clone=1 / "
                         "user.max_user_namespaces>0, or allow unshare in your container's seccomp/AppArmor");
  if (!r.seccomp) r.problems.push_back("seccomp filters unavailable: kernel needs CONFIG_SECCOMP_FILTER");
  if (!r.pidfd) r.problems.push_back("pidfd_open unavailable: kernel 5.3+ required");
  if (r.init_helper.empty())
    r.problems.push_back("init helper '" + helper + "' missing: install sandcastle-init next to sandcastle");
  if (cg.version == CgroupVersion::kNone)
    r.weaknesses.push_back(cg.why_not + "; memory is fenced per process (RLIMIT_DATA), processes by "
                           "RLIMIT_NPROC, no CPU quota. Run as root or with a delegated cgroup v2 subtree.");
  if (!r.overlayfs) r.weaknesses.push_back("overlayfs unavailable (not needed by the host image)");
  if (r.overlayfs && !r.overlay_in_userns)
    r.weaknesses.push_back("overlayfs cannot be mounted in a user namespace (kernel 5.11+ with userxattr): "
                           "sandboxes from images cannot start; image \"host\" works");
  r.adequate = r.problems.empty();
  return r;
}

int run_doctor(std::ostream& out) {
  IsolationReport r = check_isolation();
  auto yn = [](bool b) { return b ? "yes" : "NO"; };
  out << "sandcastle doctor\n";
  out << "  running as            " << (::geteuid() == 0 ? "root (sandboxes map to unprivileged host uids)"
                                                        : "unprivileged user (rootless)")
      << "\n";
  out << "  user namespaces       " << yn(r.user_namespaces) << "\n";
  out << "  seccomp-bpf           " << yn(r.seccomp) << "\n";
  out << "  pidfd                 " << yn(r.pidfd) << "\n";
  out << "  overlayfs             " << yn(r.overlayfs) << "\n";
  out << "  overlay in userns     " << yn(r.overlay_in_userns) << " (sandboxes from images)\n";
  out << "  landlock              " << (r.landlock_abi ? "ABI " + std::to_string(r.landlock_abi) : "NO") << "\n";
  out << "  cgroups               " << r.cgroup_version;
  for (const auto& c : r.controllers) out << " " << c;
  out << "\n";
  out << "  init helper           " << (r.init_helper.empty() ? "MISSING" : r.init_helper) << "\n";
  out << "isolation used: user, mount, pid, net (loopback only), ipc, uts, cgroup namespaces; "
         "pivot_root into a read-only host /usr; all capabilities dropped; no_new_privs; seccomp; ";
  out << (r.cgroup_version == "none" ? "rlimits (no cgroups)" : "cgroup " + r.cgroup_version + " limits + rlimits")
      << "\n";
  for (const auto& p : r.problems) out << "PROBLEM: " << p << "\n";
  for (const auto& w : r.weaknesses) out << "weaker:  " << w << "\n";
  out << (r.adequate ? "isolation: adequate\n" : "isolation: INADEQUATE — refusing to run code unless --allow-weak-isolation\n");
  return r.adequate ? 0 : 1;
}

}  // namespace sandcastle::sandbox::native

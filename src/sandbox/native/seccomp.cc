#include "sandbox/native/seccomp.h"

#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>

#include "common/unique_fd.h"

namespace sandcastle::sandbox::native {
namespace {

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(static_cast<scmp_filter_ctx>(ctx)); }
};

constexpr const char* kDenied[] = {
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr", "ptrace", "process_vm_readv",
    "process_vm_writev", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "userfaultfd", "unshare", "setns", "open_by_handle_at",
    "name_to_handle_at", "init_module", "finit_module", "delete_module", "create_module",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "lookup_dcookie", "nfsservctl", "uselib", "ustat", "sysfs",
    "_sysctl", "vhangup", "iopl", "ioperm", "kcmp", "pidfd_getfd", "move_pages",
    "get_kernel_syms", "query_module", "vm86", "vm86old",
};


}  // namespace

Result<std::string> compile_seccomp_bpf() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Error::make(ErrorCode::kInternal, "seccomp_init");
  auto* c = static_cast<scmp_filter_ctx>(ctx.get());
  // Foreign architectures get EPERM too: the native-only filter treats any
  // other arch token (i386 via int 0x80, x32) as "bad arch".
  if (int rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)); rc < 0)
    return Error::from_errno("seccomp badarch action", -rc);
  // A binary search over syscall numbers instead of a linear chain: the
  // kernel evaluates the filter once per syscall number and architecture
  // when it is loaded (to build its allow cache), and on every syscall.
  if (int rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0)
    return Error::from_errno("seccomp binary-tree optimization", -rc);
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 0); rc < 0 && rc != -EEXIST)
      return Error::from_errno(std::string("seccomp rule ") + name, -rc);
  }
  // Deny clone when any namespace bit is set: one masked compare per bit,
  // because a single rule can only test "all masked bits equal a value".
  int rc = 0;
  // CLONE_NEWTIME (0x80) is not tested: for clone() that bit is part of the
  // exit-signal field, and clone() cannot create time namespaces anyway.
  for (scmp_datum_t bit : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                           CLONE_NEWNET, CLONE_NEWCGROUP}) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
    if (rc < 0) return Error::from_errno("seccomp rule clone", -rc);
  }
  // clone3 passes flags in memory seccomp cannot read: ENOSYS makes glibc
  // fall back to clone, which the rules above can inspect.
  rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return Error::from_errno("seccomp rule clone3", -rc);
  for (scmp_datum_t req : {static_cast<scmp_datum_t>(TIOCSTI), static_cast<scmp_datum_t>(TIOCLINUX)}) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, req));
    if (rc < 0) return Error::from_errno("seccomp rule ioctl", -rc);
  }

  UniqueFd mem(memfd_create("sandcastle-seccomp", MFD_CLOEXEC));
  if (!mem) return Error::from_errno("memfd_create for seccomp");
  if (rc = seccomp_export_bpf(c, mem.get()); rc < 0) return Error::from_errno("seccomp_export_bpf", -rc);
  off_t size = lseek(mem.get(), 0, SEEK_END);
  if (size <= 0) return Error::from_errno("seccomp bpf size");
  std::string bpf(static_cast<std::size_t>(size), '\0');
  if (pread(mem.get(), bpf.data(), bpf.size(), 0) != size) return Error::from_errno("read seccomp bpf");
  return bpf;
}

}  // namespace sandcastle::sandbox::native

#include "sandbox/native/seccomp.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "common/unique_fd.h"

namespace sandcastle::sandbox::native {
namespace {

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(static_cast<scmp_filter_ctx>(ctx)); }
};

// Every call a command may make without conditions: Docker's default profile
// for a container without added capabilities (x86_64, kernel >= 4.8), minus
// these, which we deny as well (EPERM, the default):
//
//   call                       why Docker allows it; why we do not
//   ptrace, process_vm_readv,  debuggers; commands must not read or steer one
//   process_vm_writev          another (the init, a kernel driver's state)
//   modify_ldt                 16-bit code (wine, dosemu); a long CVE history,
//                              nothing we run uses it
//   name_to_handle_at          harmless alone; its partner open_by_handle_at is
//                              denied, and nothing we run uses it
//   adjtimex, clock_adjtime    reading the clock discipline; nothing we run
//                              needs it (writing needs CAP_SYS_TIME anyway)
//   fanotify_mark              useless without fanotify_init, which is denied
//
// and these, allowed only with argument filters below: clone, personality,
// socket, socketpair (and ioctl, allowed but for three requests, in the
// prologue). No call Docker denies is allowed here, so no rationale is owed;
// tests/unit/sandbox/seccomp_policy_test.cc holds Docker's denied calls and
// checks each against the compiled program.
// clang-format off
constexpr const char* kAllowed[] = {
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep",
    "close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
    "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit",
    "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir", "fchmod",
    "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr",
    "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex",
    "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "get_robust_list",
    "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid",
    "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid",
    "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid",
    "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr", "getxattrat",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit", "ioctl", "ioprio_get",
    "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
    "lchown", "lgetxattr", "link", "linkat", "listen", "listmount", "listxattr", "listxattrat",
    "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack",
    "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat",
    "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv",
    "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open",
    "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2",
    "prlimit64", "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read",
    "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
    "remap_file_pages", "removexattr", "removexattrat", "rename", "renameat", "renameat2",
    "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select",
    "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto",
    "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid", "setfsuid", "setgid",
    "setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid",
    "setreuid", "setrlimit", "setsid", "setsockopt", "setuid", "setxattr", "setxattrat", "shmat",
    "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "splice",
    "stat", "statfs", "statmount", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
    "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
    "timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat",
    "uretprobe", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid", "write",
    "writev",
};
// clang-format on

// Calls numbered after the libseccomp this may be built with (2.5.x knows
// the table up to 450 or 456): the same number on every architecture since
// the tables were unified at 424, except uretprobe (x86_64 only).
struct NamedNumber {
  const char* name;
  int nr;
};
constexpr NamedNumber kNewerCalls[] = {
    {"cachestat", 451},     {"fchmodat2", 452},     {"map_shadow_stack", 453}, {"futex_wake", 454},
    {"futex_wait", 455},    {"futex_requeue", 456}, {"statmount", 457},        {"listmount", 458},
    {"mseal", 462},         {"setxattrat", 463},    {"getxattrat", 464},       {"listxattrat", 465},
    {"removexattrat", 466},
#if defined(__x86_64__)
    {"uretprobe", 335},
#endif
};

int resolve(const char* name) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr >= 0) return nr;
  for (const auto& n : kNewerCalls)
    if (std::strcmp(n.name, name) == 0) return n.nr;
  return -1;  // not a call of this architecture
}

Status add(scmp_filter_ctx c, std::uint32_t action, const char* name,
           std::initializer_list<scmp_arg_cmp> args) {
  int nr = resolve(name);
  if (nr < 0) return {};
  int rc = seccomp_rule_add_array(c, action, nr, static_cast<unsigned>(args.size()), args.begin());
  if (rc < 0 && rc != -EEXIST) return Error::from_errno(std::string("seccomp rule ") + name, -rc);
  return {};
}

constexpr sock_filter stmt(std::uint16_t code, std::uint32_t k) {
  return {code, 0, 0, k};
}
constexpr sock_filter jump(std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
  return {code, jt, jf, k};
}

// Checks libseccomp cannot express next to a default of EPERM, run before
// its program (which starts over by loading the architecture):
//   - a native call numbered above kSeccompLastKnownSyscall gets ENOSYS;
//   - ioctl TIOCSTI (type into the terminal), TIOCLINUX (the same on a
//     console) and TIOCSETD (attach a line discipline: a module autoload and a
//     long CVE history) get EPERM, compared on the low 32 bits, as the kernel
//     reads the request.
// Everything else falls through. x32 numbers (bit 30 set) go on to
// libseccomp's program, which denies them as a foreign architecture.
std::vector<sock_filter> prologue() {
  const std::uint32_t native = seccomp_arch_native();
  constexpr std::uint32_t kNr = offsetof(seccomp_data, nr);
  constexpr std::uint32_t kArch = offsetof(seccomp_data, arch);
  constexpr std::uint32_t kArg1Low =
      offsetof(seccomp_data, args[1]) + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 4 : 0);
  constexpr std::uint32_t kEnosys = SECCOMP_RET_ERRNO | ENOSYS;
  constexpr std::uint32_t kEperm = SECCOMP_RET_ERRNO | EPERM;
  std::vector<sock_filter> p;
  // Jumps are filled in at the end: to "body" (the first instruction after
  // the prologue).
  std::vector<std::size_t> to_body_false, to_body_true;
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kArch));
  to_body_false.push_back(p.size());
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, native, 0, 0));
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kNr));
#if defined(__x86_64__)
  to_body_true.push_back(p.size());
  p.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 0));  // __X32_SYSCALL_BIT
#endif
  p.push_back(jump(BPF_JMP | BPF_JGT | BPF_K, kSeccompLastKnownSyscall, 0, 1));
  p.push_back(stmt(BPF_RET | BPF_K, kEnosys));
  to_body_false.push_back(p.size());
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 0));
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kArg1Low));
  for (std::uint32_t req :
       {static_cast<std::uint32_t>(TIOCSTI), static_cast<std::uint32_t>(TIOCLINUX),
        static_cast<std::uint32_t>(TIOCSETD)}) {
    p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, req, 0, 1));
    p.push_back(stmt(BPF_RET | BPF_K, kEperm));
  }
  for (std::size_t i : to_body_false) p[i].jf = static_cast<std::uint8_t>(p.size() - i - 1);
  for (std::size_t i : to_body_true) p[i].jt = static_cast<std::uint8_t>(p.size() - i - 1);
  return p;
}

}  // namespace

Result<std::string> compile_seccomp_bpf() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
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
  for (const char* name : kAllowed)
    if (auto st = add(c, SCMP_ACT_ALLOW, name, {}); !st) return st.take_error();

  // Argument filters. Each allows exact values, compared on all 64 bits: a
  // value with stray upper bits (which the kernel would drop, reading an
  // int) matches none of them and is denied, never let through.
  // clone without any CLONE_NEW* flag (Docker's mask; clone reads only the
  // low 32 bits of its flags); with one: EPERM.
  constexpr scmp_datum_t kNewNamespaces = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                                          CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                          CLONE_NEWCGROUP;
  if (auto st = add(c, SCMP_ACT_ALLOW, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, kNewNamespaces, 0)});
      !st)
    return st.take_error();
  // clone3 passes flags in memory seccomp cannot read: ENOSYS makes glibc
  // fall back to clone, which the rule above inspects.
  if (auto st = add(c, SCMP_ACT_ERRNO(ENOSYS), "clone3", {}); !st) return st.take_error();
  // personality: Docker's values. READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and
  // the other flags that weaken a process's own hardening are EPERM.
  for (scmp_datum_t v :
       {scmp_datum_t{0}, scmp_datum_t{PER_LINUX32}, scmp_datum_t{UNAME26},
        scmp_datum_t{PER_LINUX32} | scmp_datum_t{UNAME26}, scmp_datum_t{0xffffffffu}})
    if (auto st = add(c, SCMP_ACT_ALLOW, "personality", {SCMP_A0(SCMP_CMP_EQ, v)}); !st)
      return st.take_error();
  // Socket families: those a sandbox's own network namespace scopes. Docker
  // allows every family but AF_VSOCK (an address space shared with the host
  // and its VMs) and AF_ALG (the kernel's crypto API); we allow only these,
  // so the rarely used families (AF_TIPC, AF_RDS, AF_CAN, AF_BLUETOOTH, ...,
  // each a module autoload away) are out of reach too. Netlink: route
  // (getaddrinfo, getifaddrs) and sock_diag (ss), both per network
  // namespace; not audit, uevents, netfilter, xfrm or generic netlink.
  for (scmp_datum_t family : {AF_UNIX, AF_INET, AF_INET6})
    if (auto st = add(c, SCMP_ACT_ALLOW, "socket", {SCMP_A0(SCMP_CMP_EQ, family)}); !st)
      return st.take_error();
  for (scmp_datum_t proto : {NETLINK_ROUTE, NETLINK_SOCK_DIAG})
    if (auto st = add(c, SCMP_ACT_ALLOW, "socket",
                      {SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, proto)});
        !st)
      return st.take_error();
  if (auto st = add(c, SCMP_ACT_ALLOW, "socketpair", {SCMP_A0(SCMP_CMP_EQ, AF_UNIX)}); !st)
    return st.take_error();

  UniqueFd mem(memfd_create("sandcastle-seccomp", MFD_CLOEXEC));
  if (!mem) return Error::from_errno("memfd_create for seccomp");
  if (int rc = seccomp_export_bpf(c, mem.get()); rc < 0)
    return Error::from_errno("seccomp_export_bpf", -rc);
  off_t size = lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) return Error::from_errno("seccomp bpf size");
  std::vector<sock_filter> program = prologue();
  const std::size_t head = program.size();
  program.resize(head + static_cast<std::size_t>(size) / sizeof(sock_filter));
  if (pread(mem.get(), program.data() + head, static_cast<std::size_t>(size), 0) != size)
    return Error::from_errno("read seccomp bpf");
  // The prologue falls through into libseccomp's program, which must begin
  // by loading the architecture (it does not trust the accumulator).
  const sock_filter& first = program[head];
  if (first.code != (BPF_LD | BPF_W | BPF_ABS) || first.k != offsetof(seccomp_data, arch))
    return Error::make(ErrorCode::kInternal, "unexpected start of libseccomp's program");
  if (program.size() > BPF_MAXINSNS)
    return Error::make(ErrorCode::kInternal, "seccomp program too long");
  return std::string(reinterpret_cast<const char*>(program.data()),
                     program.size() * sizeof(sock_filter));
}

}  // namespace sandcastle::sandbox::native

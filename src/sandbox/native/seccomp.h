// The seccomp policy every command runs under, compiled once per backend with
// libseccomp and shipped to the init helper as raw BPF (the helper itself does
// not link libseccomp; each exec child just loads the program).
#pragma once

#include <string>

#include "common/result.h"

namespace sandcastle::sandbox::native {

// Denies (EPERM unless noted): mount family and new mount API, pivot_root,
// chroot, ptrace, process_vm_*, kexec, bpf, perf_event_open, key management,
// userfaultfd, unshare, setns, clone with CLONE_NEW* flags, clone3 (ENOSYS so
// libc falls back to clone, whose flags we can inspect), open_by_handle_at,
// module loading, swapon/off, reboot, ioctl TIOCSTI/TIOCLINUX, clock and
// time setting, io_uring, acct, quotactl, syslog, and every syscall of a
// foreign architecture (x32, i386).
Result<std::string> compile_seccomp_bpf();

}  // namespace sandcastle::sandbox::native

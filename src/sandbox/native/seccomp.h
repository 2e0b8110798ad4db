// The seccomp policy every command runs under, compiled once per backend with
// libseccomp and shipped to the init helper as raw BPF (the helper itself does
// not link libseccomp; each exec child just loads the program).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace sandcastle::sandbox::native {

// The highest syscall number the policy knows (file_setattr, Linux 6.17).
// Anything above it on the native architecture gets ENOSYS, as runc answers
// for calls newer than its profile: a program probing a future call falls
// back to an older one, which the policy does cover.
constexpr std::uint32_t kSeccompLastKnownSyscall = 469;

// An allowlist: what Docker's default profile allows a container without
// added capabilities (moby profiles/seccomp/default.json), minus a few calls
// we deny as well (see seccomp.cc). Everything else is EPERM, with these
// argument filters:
//   - clone with any CLONE_NEW* flag: EPERM; clone3: ENOSYS (its flags are in
//     memory seccomp cannot read, so libc falls back to clone);
//   - personality: only 0, PER_LINUX32, UNAME26, both, and 0xffffffff (query);
//   - socket: AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK with NETLINK_ROUTE or
//     NETLINK_SOCK_DIAG; socketpair: AF_UNIX;
//   - ioctl TIOCSTI, TIOCLINUX, TIOCSETD: EPERM;
// numbers above kSeccompLastKnownSyscall: ENOSYS; every syscall of a foreign
// architecture (x32, i386): EPERM.
Result<std::string> compile_seccomp_bpf();

}  // namespace sandcastle::sandbox::native

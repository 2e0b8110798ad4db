#include "sandbox/engine/agent/terminal.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace sandcastle::sandbox::engine::agent {

AgentPty open_pty(std::uint16_t cols, std::uint16_t rows) {
  AgentPty p;
  auto failed = [&](const char* step) {
    p.err = errno;
    p.step = step;
    p.master.reset();
    p.slave.reset();
    return std::move(p);
  };
  p.master.reset(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!p.master) return failed("open /dev/ptmx");
  int unlock = 0;
  if (::ioctl(p.master.get(), TIOCSPTLCK, &unlock) != 0) return failed("unlock pty");
  if (!resize_pty(p.master.get(), cols, rows)) return failed("size pty");
  // Through the master, not by a /dev/pts path.
  p.slave.reset(::ioctl(p.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.slave) return failed("open pty slave");
  return p;
}

namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_X86_64;
// ioctl as a 32-bit process (int 0x80) and as an x32 one calls it.
constexpr std::uint32_t kCompatArch = AUDIT_ARCH_I386;
constexpr std::uint32_t kCompatIoctl = 54;
constexpr std::uint32_t kX32Ioctl = 0x40000000u | 514u;
#elif defined(__aarch64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
constexpr std::uint32_t kCompatArch = AUDIT_ARCH_ARM;
constexpr std::uint32_t kCompatIoctl = 54;
constexpr std::uint32_t kX32Ioctl = SYS_ioctl;  // none: the native number again
#else
#error "deny_terminal_injection: unknown architecture"
#endif

constexpr std::uint32_t kArch = offsetof(struct seccomp_data, arch);
constexpr std::uint32_t kNr = offsetof(struct seccomp_data, nr);
// The kernel reads the request as 32 bits: the low half (little-endian).
constexpr std::uint32_t kRequest = offsetof(struct seccomp_data, args[1]);

// Offsets of a jump count from the next instruction. An arch that is
// neither ours nor its compat one gets EPERM for every call (fail closed).
constexpr struct sock_filter kFilter[] = {
    /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArch),
    /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kNativeArch, 1, 0),   // -> 3
    /* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompatArch, 3, 10),  // -> 6, else 13
    /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),                  // native
    /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 3, 0),     // -> 8
    /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kX32Ioctl, 2, 6),     // -> 8, else 12
    /* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),                  // compat
    /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompatIoctl, 0, 4),  // -> 8, else 12
    /* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kRequest),
    /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 3, 0),     // -> 13
    /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 2, 0),  // -> 13
    /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSETD, 1, 0),   // -> 13
    /* 12 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
};

}  // namespace

bool deny_terminal_injection() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  struct sock_fprog prog {};
  prog.len = sizeof kFilter / sizeof kFilter[0];
  prog.filter = const_cast<struct sock_filter*>(kFilter);
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

bool resize_pty(int master, std::uint16_t cols, std::uint16_t rows) {
  struct winsize ws {};
  ws.ws_col = cols;
  ws.ws_row = rows;
  return ::ioctl(master, TIOCSWINSZ, &ws) == 0;
}

}  // namespace sandcastle::sandbox::engine::agent

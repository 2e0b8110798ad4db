// The hostile programs' table, shared by the integration suite
// (escape_test.cc, mode none) and net_tests (tests/net/hostile_net_test.cc,
// allowlist; hostile_full_test.cc, full): each program, the one exact answer
// it must print in mode none, the arguments only the host knows, and how to
// build and run it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::testing::escape {

struct Case {
  const char* program;  // file in programs/, .c or .py
  const char* expected;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string program_dir() {
  return std::string(SANDCASTLE_SOURCE_DIR) + "/tests/integration/escape/programs";
}

// runc's default masked and read-only paths under /proc (the OCI runtime
// spec's defaults, as Docker applies them); a sandbox has no /sys at all.
inline const std::vector<std::string>& runc_masked() {
  static const std::vector<std::string> paths = {
      "/proc/acpi",        "/proc/asound",        "/proc/interrupts", "/proc/kcore",
      "/proc/keys",        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
      "/proc/sched_debug", "/proc/scsi"};
  return paths;
}
inline const std::vector<std::string>& runc_read_only() {
  static const std::vector<std::string> paths = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                                 "/proc/sysrq-trigger"};
  return paths;
}

// What the sandbox's procfs has, told by the host's: the same kernel.
enum class HostEntry { kAbsent, kFile, kDir };
inline HostEntry host_entry(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return HostEntry::kAbsent;
  return S_ISDIR(st.st_mode) ? HostEntry::kDir : HostEntry::kFile;
}

// escape.h and every file INDEX names.
inline std::vector<std::string> list_programs() {
  std::vector<std::string> out{"escape.h"};
  std::ifstream idx(program_dir() + "/INDEX");
  std::string line;
  while (std::getline(idx, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

// Builds every C program in `dir` inside the sandbox with the host's gcc.
inline std::string build_script(const std::string& dir, bool static_link) {
  return "cd " + dir + " && ls *.c | sed 's/\\.c$//' | xargs -P 2 -I{} gcc " +
         (static_link ? "-static " : "") + "-O0 -w -o {} {}.c";
}

// Facts only the host knows, which some programs take as arguments.
struct HostFacts {
  int loopback_port = 0;      // a host listener on 127.0.0.1 that must accept nothing
  std::string abstract_name;  // a host abstract unix listener, likewise
  std::string allowed_host = "allowed.test";  // a name the networked modes allow, port 80
  std::string ipv6_target = "fd00:5c::2";     // an IPv6 address the sandbox has no route to
  // Addresses outside the sandbox (TCP :80, UDP :53); net_tests names ones
  // its server can reach, so only the sandbox's lack of a route stops them.
  std::string tcp_target = "1.1.1.1";
  std::string udp_target = "8.8.8.8";
  int flood_connections = 300;
};

inline std::vector<std::string> args_for(const std::string& program, const HostFacts& f) {
  if (program == "kill_host" || program == "proc_host") return {std::to_string(::getpid())};
  if (program == "tcp_host_loopback" || program == "proxy_to_host")
    return {std::to_string(f.loopback_port)};
  if (program == "abstract_unix") return {f.abstract_name};
  if (program == "read_host_tree") return {SANDCASTLE_SOURCE_DIR};
  if (program == "proc_masked") return runc_masked();
  if (program == "proc_readonly") return runc_read_only();
  if (program == "ipv6_external") return {f.ipv6_target};
  if (program == "tcp_external") return {f.tcp_target};
  if (program == "udp_external") return {f.udp_target};
  if (program == "proxy_garbage" || program == "dns_flood") return {f.allowed_host};
  if (program == "proxy_flood") return {f.allowed_host, std::to_string(f.flood_connections)};
  return {};
}

// The command for program (a file name in programs/) copied into `dir`.
inline ExecRequest program_request(const std::string& program, const std::string& dir,
                                   const HostFacts& facts) {
  const std::string base = program.substr(0, program.rfind('.'));
  ExecRequest req;
  if (program.ends_with(".py"))
    req.argv = {"/usr/bin/python3", dir + "/" + program};
  else
    req.argv = {dir + "/" + base};
  for (const auto& a : args_for(base, facts)) req.argv.push_back(a);
  req.timeout = std::chrono::seconds(20);
  return req;
}

// The exact answer, where it depends on which /proc entries this kernel
// has: a masked entry reads empty (a directory lists nothing), a read-only
// one is a read-only mount, a missing one is ENOENT.
inline std::string expected_for(const std::string& program, const char* fixed) {
  std::string out;
  if (program == "proc_masked") {
    for (const auto& p : runc_masked()) {
      HostEntry e = host_entry(p);
      out += p +
             (e == HostEntry::kAbsent ? " ENOENT"
              : e == HostEntry::kDir  ? " dir 0"
                                      : " 0") +
             "\n";
    }
    return out;
  }
  const bool sysrq = host_entry("/proc/sysrq-trigger") != HostEntry::kAbsent;
  if (program == "proc_readonly") {
    for (const auto& p : runc_read_only())
      out += p + (host_entry(p) == HostEntry::kAbsent ? " ENOENT" : " ro") + "\n";
    // open(O_WRONLY | O_CREAT | O_TRUNC) asks the mount for write access
    // before the file's permissions: EROFS (EACCES before the binds).
    out += "/proc/sys/kernel/hostname EROFS\n/proc/sys/net/ipv4/ping_group_range EROFS\n";
    return out + "/proc/sysrq-trigger " + (sysrq ? "EROFS" : "ENOENT") + "\n";
  }
  if (program == "proc_sysrq") return std::string(sysrq ? "EROFS" : "ENOENT") + "\n";
  return std::string(fixed) + "\n";
}

// The answer in a network mode: the mode's own for the program (keyed by
// its name without the extension), else mode none's.
inline std::string expected_in_mode(const Case& c,
                                    const std::map<std::string, std::string>& mode_answers) {
  const std::string program = c.program;
  const std::string base = program.substr(0, program.rfind('.'));
  const auto it = mode_answers.find(base);
  return it != mode_answers.end() ? it->second : expected_for(base, c.expected);
}

// The gtest name of a case: its file name with '.' as '_'.
inline std::string case_name(const Case& c) {
  std::string n = c.program;
  for (auto& ch : n)
    if (ch == '.') ch = '_';
  return n;
}

// Every program with its answer in mode none (no network at all: only lo,
// where nothing listens).
inline const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"mount_tmpfs.c", "EPERM"},
      {"umount_usr.c", "EPERM"},
      {"pivot_root.c", "EPERM"},
      {"chroot.c", "EPERM"},
      {"unshare_user.c", "EPERM"},
      {"unshare_mount.c", "EPERM"},
      {"clone_newnet.c", "EPERM"},
      {"clone3.c", "ENOSYS"},
      {"setns.c", "EPERM"},
      {"ptrace_attach.c", "EPERM"},
      {"ptrace_traceme.c", "EPERM"},
      {"ptrace_init.c", "EPERM"},
      {"process_vm_readv.c", "EPERM"},
      {"keyctl.c", "EPERM"},
      {"add_key.c", "EPERM"},
      {"request_key.c", "EPERM"},
      {"bpf.c", "EPERM"},
      {"userfaultfd.c", "EPERM"},
      {"perf_event_open.c", "EPERM"},
      {"tiocsti.c", "EPERM"},
      {"tioclinux.c", "EPERM"},
      {"open_by_handle_at.c", "EPERM"},
      {"finit_module.c", "EPERM"},
      {"kexec_load.c", "EPERM"},
      {"swapon.c", "EPERM"},
      {"reboot.c", "EPERM"},
      {"raw_socket.c", "EPERM"},
      {"packet_socket.c", "EPERM"},
      // uid 0 does not exist in the sandbox's user namespace at all.
      {"setuid_root.c", "EINVAL"},
      {"mknod_device.c", "EPERM"},
      {"sethostname.c", "EPERM"},
      {"settime.c", "EPERM"},
      {"io_uring.c", "EPERM"},
      {"x32_syscall.c", "EPERM"},
      {"i386_syscall.c", "EPERM"},
      // Signals from inside a PID namespace to its init are dropped: the
      // supervisor survives and the command still gets its result.
      {"kill_supervisor.c", "alive OK 0"},
      {"kill_host.c", "ESRCH"},
      {"fd_exhaustion.c", "EMFILE 1"},
      {"fork_bomb.c", "EAGAIN 1"},
      {"zombie_storm.c", "zombies 1"},
      {"read_shadow.py", "ENOENT"},
      {"read_host_tree.py", "ENOENT\nENOENT\nENOENT\nENOENT\nENOENT"},
      {"write_usr.py", "EROFS"},
      // Creating a file in the read-only /etc template.
      {"write_etc.py", "EROFS"},
      {"tcp_host_loopback.py", "ECONNREFUSED"},
      {"tcp_external.py", "ENETUNREACH"},
      {"udp_external.py", "ENETUNREACH"},
      {"abstract_unix.py", "ECONNREFUSED"},
      {"proc_host.py", "sc-supervisor False"},  // PID 1 of the exec's own namespace
      {"setuid_binary.py", "True True True True"},
      {"dev_and_sys.py", "ENOENT\nENOENT\nENOENT\nENOENT"},
      // Absent where the kernel has no magic SysRq; elsewhere root's only,
      // on a read-only bind (expected_for).
      {"proc_sysrq.py", ""},
      // Parity with Docker's defaults, and beyond (seccomp.cc, host_image.cc).
      {"socket_vsock.c", "EPERM"},
      {"socket_alg.c", "EPERM"},
      {"socket_family_hibits.c", "EPERM"},
      {"netlink.c", "OK\nEPERM\nEPERM\nEPERM"},
      // Route, address and link changes need CAP_NET_ADMIN in the sandbox's
      // network namespace, which no program holds (the kernel's ack says
      // EPERM); the netfilter socket that would flush full mode's firewall is
      // refused by seccomp.
      {"net_admin.c", "route EPERM\nunroute EPERM\naddr EPERM\nlink EPERM\nnft EPERM"},
      {"modify_ldt.c", "EPERM"},
      {"fanotify_init.c", "EPERM"},
      {"personality.c", "EPERM\nEPERM\nOK 0"},
      {"tiocsetd.c", "EPERM"},
      {"set_mempolicy.c", "EPERM"},
      {"unmask_proc.c", "EPERM\nEPERM\nEPERM"},
      {"proc_masked.py", ""},
      {"proc_readonly.py", ""},
      // The networked modes' programs (issue 19). In mode none no proxy or
      // DNS stub listens on the sandbox's loopback, and there is no route.
      {"proxy_to_host.py",
       "127.0.0.1 ECONNREFUSED\n[::1] ECONNREFUSED\nlocalhost ECONNREFUSED\n0.0.0.0 ECONNREFUSED\n"
       "169.254.169.254 ECONNREFUSED\n2130706433 ECONNREFUSED\nsocks5 ECONNREFUSED"},
      {"metadata.py", "direct ENETUNREACH\nconnect ECONNREFUSED\nget ECONNREFUSED"},
      {"ipv6_external.py", "ENETUNREACH"},
      {"proxy_garbage.py",
       "3128 garbage ECONNREFUSED\n3128 next ECONNREFUSED\n3128 long ECONNREFUSED\n"
       "3128 next ECONNREFUSED\n1080 garbage ECONNREFUSED\n1080 next ECONNREFUSED\n"
       "1080 long ECONNREFUSED\n1080 next ECONNREFUSED"},
      {"proxy_flood.py", "ECONNREFUSED 300"},
      {"dns_flood.py", "probe ECONNREFUSED"},
  };
  return all;
}

}  // namespace sandcastle::sandbox::testing::escape

// Hostile programs: each tries one escape and must get one exact denial.
// C programs are compiled inside the sandbox with the host's gcc (bound
// read-only at /usr); Python ones run with /usr/bin/python3. After each, a
// neighbour sandbox and the host-side listeners prove nothing leaked.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "../sandbox/fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

struct Case {
  const char* program;  // file in programs/, .c or .py
  const char* expected;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kProgramDir = std::string(SANDCASTLE_SOURCE_DIR) + "/tests/integration/escape/programs";

// runc's default masked and read-only paths under /proc (the OCI runtime
// spec's defaults, as Docker applies them); a sandbox has no /sys at all.
const std::vector<std::string> kRuncMasked = {"/proc/acpi",       "/proc/asound",        "/proc/interrupts",
                                              "/proc/kcore",      "/proc/keys",          "/proc/latency_stats",
                                              "/proc/timer_list", "/proc/timer_stats",   "/proc/sched_debug",
                                              "/proc/scsi"};
const std::vector<std::string> kRuncReadOnly = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                                "/proc/sysrq-trigger"};

// What the sandbox's procfs has, told by the host's: the same kernel.
enum class HostEntry { kAbsent, kFile, kDir };
HostEntry host_entry(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return HostEntry::kAbsent;
  return S_ISDIR(st.st_mode) ? HostEntry::kDir : HostEntry::kFile;
}

class EscapeTest : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    std::string why;
    auto* backend = shared_backend(&why);
    ASSERT_NE(backend, nullptr) << why;
    auto spec = SandboxSpec::create({});
    auto h = backend->create(*spec);
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = std::move(*h).release();
    auto n = backend->create(*spec);
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = std::move(*n).release();
    ASSERT_TRUE(neighbour_->write_file("/workspace/canary", "intact").ok());

    ASSERT_TRUE(hostile_->mkdir("/workspace/esc").ok());
    int copied = 0;
    for (const auto& e : list_programs()) {
      ASSERT_TRUE(hostile_->write_file("/workspace/esc/" + e, slurp(kProgramDir + "/" + e)).ok());
      ++copied;
    }
    ASSERT_GE(copied, 40);
    ExecRequest req;
    req.argv = {"/bin/sh", "-c",
                "cd /workspace/esc && ls *.c | sed 's/\\.c$//' | "
                "xargs -P 2 -I{} gcc -O0 -w -o {} {}.c"};
    req.timeout = std::chrono::seconds(90);
    auto r = hostile_->exec(req);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_EQ(r->exit_code, 0) << r->stderr_data;

    open_listeners();
  }

  static void open_listeners() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);

    abstract_ = "sandcastle-escape-" + std::to_string(::getpid());
    unix_listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    std::memcpy(u.sun_path + 1, abstract_.data(), abstract_.size());
    ASSERT_EQ(::bind(unix_listener_, reinterpret_cast<sockaddr*>(&u),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_.size())),
              0);
    ASSERT_EQ(::listen(unix_listener_, 8), 0);
  }

  static void TearDownTestSuite() {
    if (hostile_) (void)hostile_->destroy();
    if (neighbour_) (void)neighbour_->destroy();
    delete hostile_;
    delete neighbour_;
    hostile_ = neighbour_ = nullptr;
    ::close(listener_);
    ::close(unix_listener_);
  }

  static std::vector<std::string> list_programs() {
    std::vector<std::string> out;
    for (const char* f : {"escape.h"}) out.push_back(f);
    std::ifstream idx(kProgramDir + "/INDEX");
    std::string line;
    while (std::getline(idx, line))
      if (!line.empty()) out.push_back(line);
    return out;
  }

  // Arguments some programs need: facts only the host knows.
  static std::vector<std::string> args_for(const std::string& program) {
    if (program == "kill_host" || program == "proc_host") return {std::to_string(::getpid())};
    if (program == "tcp_host_loopback") return {std::to_string(port_)};
    if (program == "abstract_unix") return {abstract_};
    if (program == "read_host_tree") return {SANDCASTLE_SOURCE_DIR};
    if (program == "proc_masked") return kRuncMasked;
    if (program == "proc_readonly") return kRuncReadOnly;
    return {};
  }

  // The exact answer, where it depends on which /proc entries this kernel
  // has: a masked entry reads empty (a directory lists nothing), a read-only
  // one is a read-only mount, a missing one is ENOENT.
  static std::string expected_for(const std::string& program, const char* fixed) {
    std::string out;
    if (program == "proc_masked") {
      for (const auto& p : kRuncMasked) {
        HostEntry e = host_entry(p);
        out += p + (e == HostEntry::kAbsent ? " ENOENT" : e == HostEntry::kDir ? " dir 0" : " 0") + "\n";
      }
      return out;
    }
    const bool sysrq = host_entry("/proc/sysrq-trigger") != HostEntry::kAbsent;
    if (program == "proc_readonly") {
      for (const auto& p : kRuncReadOnly)
        out += p + (host_entry(p) == HostEntry::kAbsent ? " ENOENT" : " ro") + "\n";
      // open(O_WRONLY | O_CREAT | O_TRUNC) asks the mount for write access
      // before the file's permissions: EROFS (EACCES before the binds).
      out += "/proc/sys/kernel/hostname EROFS\n/proc/sys/net/ipv4/ping_group_range EROFS\n";
      return out + "/proc/sysrq-trigger " + (sysrq ? "EROFS" : "ENOENT") + "\n";
    }
    if (program == "proc_sysrq") return std::string(sysrq ? "EROFS" : "ENOENT") + "\n";
    return std::string(fixed) + "\n";
  }

  static void expect_nothing_leaked() {
    EXPECT_EQ(::accept(listener_, nullptr, nullptr), -1) << "a sandbox reached the host's loopback";
    EXPECT_EQ(::accept(unix_listener_, nullptr, nullptr), -1) << "a sandbox reached a host unix socket";
    auto canary = neighbour_->read_file("/workspace/canary");
    ASSERT_TRUE(canary.ok());
    EXPECT_EQ(canary->data, "intact");
    ExecRequest req;
    req.argv = {"/bin/echo", "ok"};
    auto r = neighbour_->exec(req);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->stdout_data, "ok\n");
  }

  static Sandbox* hostile_;
  static Sandbox* neighbour_;
  static int listener_;
  static int unix_listener_;
  static int port_;
  static std::string abstract_;
};

Sandbox* EscapeTest::hostile_ = nullptr;
Sandbox* EscapeTest::neighbour_ = nullptr;
int EscapeTest::listener_ = -1;
int EscapeTest::unix_listener_ = -1;
int EscapeTest::port_ = 0;
std::string EscapeTest::abstract_;

// One hostile program in hostile_; `image`: the sandboxes are rooted in an
// image (image_root.h), where / is the sandbox's own copy-on-write layer.
void run_case(const Case& c, bool image) {
  ASSERT_NE(EscapeTest::hostile_, nullptr);
  std::string program = c.program;
  std::string base = program.substr(0, program.rfind('.'));
  ExecRequest req;
  if (program.ends_with(".py")) req.argv = {"/usr/bin/python3", "/workspace/esc/" + program};
  else req.argv = {"/workspace/esc/" + base};
  for (const auto& a : EscapeTest::args_for(base)) req.argv.push_back(a);
  req.timeout = std::chrono::seconds(20);
  auto r = EscapeTest::hostile_->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kExited) << r->stderr_data;
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  std::string expected = EscapeTest::expected_for(base, c.expected);
  // On an image, /usr and /etc are the sandbox's own layer: a write there
  // succeeds and stays in its upper dir (ImageSandboxTest proves the image
  // on disk unchanged); it is no escape.
  if (image && (base == "write_usr" || base == "write_etc")) expected = "OK\n";
  EXPECT_EQ(r->stdout_data, expected) << "stderr: " << r->stderr_data;
  EscapeTest::expect_nothing_leaked();
}

TEST_P(EscapeTest, IsDenied) { run_case(GetParam(), false); }

const Case kCases[] = {
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
    {"proc_host.py", "sandcastle-init False"},
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
    {"modify_ldt.c", "EPERM"},
    {"fanotify_init.c", "EPERM"},
    {"personality.c", "EPERM\nEPERM\nOK 0"},
    {"tiocsetd.c", "EPERM"},
    {"set_mempolicy.c", "EPERM"},
    {"unmask_proc.c", "EPERM\nEPERM\nEPERM"},
    {"proc_masked.py", ""},
    {"proc_readonly.py", ""},
};

// The same programs in sandboxes rooted in an image: one made from the
// host's files (python3, busybox, su marked setuid), the C programs built
// static in a host sandbox and copied in.
class EscapeImageTest : public EscapeTest {
 public:
  static void SetUpTestSuite() {
    std::string why;
    auto* backend = shared_backend(&why);
    ASSERT_NE(backend, nullptr) << why;
    const native::ImageRoot* py = host_python_image(&why);
    ASSERT_NE(py, nullptr) << why;
    auto host_spec = SandboxSpec::create({});
    auto builder = backend->create(*host_spec);
    ASSERT_TRUE(builder.ok()) << builder.error().message();
    auto& b = **builder;
    ASSERT_TRUE(b.mkdir("/workspace/esc").ok());
    const auto programs = list_programs();
    for (const auto& e : programs)
      ASSERT_TRUE(b.write_file("/workspace/esc/" + e, slurp(kProgramDir + "/" + e)).ok());
    ExecRequest req;
    req.argv = {"/bin/sh", "-c",
                "cd /workspace/esc && ls *.c | sed 's/\\.c$//' | "
                "xargs -P 2 -I{} gcc -static -O0 -w -o {} {}.c"};
    req.timeout = std::chrono::seconds(120);
    auto built = b.exec(req);
    ASSERT_TRUE(built.ok()) << built.error().message();
    ASSERT_EQ(built->exit_code, 0) << built->stderr_data;

    SpecOptions o;
    o.image = py->name;
    auto spec = SandboxSpec::create(o);
    auto h = backend->create(*spec);
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = std::move(*h).release();
    auto n = backend->create(*spec);
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = std::move(*n).release();
    ASSERT_TRUE(neighbour_->write_file("/workspace/canary", "intact").ok());
    ASSERT_TRUE(hostile_->mkdir("/workspace/esc").ok());
    for (const auto& e : programs) {
      if (e.ends_with(".c")) {
        const std::string bin = e.substr(0, e.size() - 2);
        auto data = b.read_file("/workspace/esc/" + bin, ReadRange{0, 64 << 20, true});
        ASSERT_TRUE(data.ok()) << bin << ": " << data.error().message();
        ASSERT_TRUE(hostile_->write_file("/workspace/esc/" + bin, data->data, 0755).ok()) << bin;
      } else {
        ASSERT_TRUE(hostile_->write_file("/workspace/esc/" + e, slurp(kProgramDir + "/" + e)).ok());
      }
    }
    (void)b.destroy();
    open_listeners();
  }
};

TEST_P(EscapeImageTest, IsDenied) { run_case(GetParam(), true); }

INSTANTIATE_TEST_SUITE_P(HostileOnImage, EscapeImageTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string n = param_info.param.program;
                           for (auto& c : n)
                             if (c == '.') c = '_';
                           return n;
                         });

INSTANTIATE_TEST_SUITE_P(Hostile, EscapeTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string n = param_info.param.program;
                           for (auto& c : n)
                             if (c == '.') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace sandcastle::sandbox::testing

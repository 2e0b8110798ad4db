// A tenant who only has a sandbox attacks the server through its file API:
// symlinks into the sandbox's /proc (whose files act for whoever opens them),
// special files, a path swapped between a file and a symlink while the server
// works on it, trees and sparse files too large to hold. The file work runs
// inside the sandbox as the sandbox user (file_wire.h), so none of it may
// reach the host or make the server hold more than it asked for.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "fixture.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::testing {
namespace {

std::string host_domainname() {
  std::ifstream f("/proc/sys/kernel/domainname");
  std::string s;
  std::getline(f, s);
  return s;
}

std::string host_hostname() {
  struct utsname u {};
  ::uname(&u);
  return u.nodename;
}

// Peak resident memory of this (the server's) process, in KiB.
long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  return -1;
}

class HostileTenantTest : public SandboxTest {};

// The finding: the server followed a sandbox symlink into the sandbox's
// procfs and wrote a host kernel setting (domainname is per UTS namespace
// of the *opener*; core_pattern would have been a host root shell).
TEST_F(HostileTenantTest, SymlinkIntoProcCannotWriteHostSettings) {
  const std::string before = host_domainname();
  ASSERT_EQ(
      sh("ln -s /proc/sys/kernel/domainname dom && ln -s /proc/sys/kernel/core_pattern core && "
         "mkdir d && ln -s /proc/sys/kernel d/k")
          .exit_code,
      0);
  for (const char* p : {"dom", "core", "d/k/domainname", "/workspace/d/k/hostname"}) {
    auto w = sb_->write_file(p, "sandcastle-pwned");
    ASSERT_FALSE(w.ok()) << p;
    // The sandbox user may not write sysctls: the same answer its programs get.
    EXPECT_EQ(w.error().sys_errno, EACCES) << p << ": " << w.error().message();
  }
  EXPECT_EQ(host_domainname(), before);
  EXPECT_NE(host_domainname(), "sandcastle-pwned");
}

// Reading through the same kind of link gave host-namespace data (the
// server's UTS namespace); now it is what the sandbox itself sees.
TEST_F(HostileTenantTest, SymlinkIntoProcReadsTheSandboxsOwnView) {
  ASSERT_EQ(sh("ln -s /proc/sys/kernel/hostname h && ln -s /proc/1/environ initenv && "
               "ln -s /proc/self/root selfroot")
                .exit_code,
            0);
  auto h = sb_->read_file("h");
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->data, "sandbox\n");
  EXPECT_EQ(h->data.find(host_hostname()), host_hostname() == "sandbox" ? 0u : std::string::npos);
  // init is not dumpable: its /proc files are closed to the sandbox user.
  auto env = sb_->read_file("initenv");
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().sys_errno, EACCES) << env.error().message();
  // Magic links stay refused.
  auto root = sb_->read_file("selfroot/etc/passwd");
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.error().sys_errno, ELOOP);
}

TEST_F(HostileTenantTest, SymlinksToSysDevAndOutsideStayInside) {
  ASSERT_EQ(sh("ln -s /sys/kernel/notes sysnotes && ln -s /dev/null devnull && "
               "ln -s ../../../../../../../../etc/shadow out && ln -s /dev/zero devzero")
                .exit_code,
            0);
  auto sys = sb_->read_file("sysnotes");
  ASSERT_FALSE(sys.ok());
  EXPECT_EQ(sys.error().sys_errno, ENOENT);  // no /sys in a sandbox
  auto out = sb_->read_file("out");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().sys_errno, ENOENT);  // the sandbox has no shadow file
  for (const char* p : {"devnull", "devzero"}) {
    auto r = sb_->read_file(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition) << r.error().message();
    EXPECT_NE(r.error().context.find("character device"), std::string::npos) << r.error().context;
    auto w = sb_->write_file(p, "x");
    ASSERT_FALSE(w.ok()) << p;
    EXPECT_EQ(w.error().code, ErrorCode::kFailedPrecondition) << w.error().message();
  }
}

// A FIFO (or socket) given to a file tool hung the call; now it is refused
// unopened for I/O, at once.
TEST_F(HostileTenantTest, SpecialFilesAreRefusedNotOpened) {
  ASSERT_EQ(py("import os, socket\nos.mkfifo('fifo')\ns = "
               "socket.socket(socket.AF_UNIX)\ns.bind('sock')\n")
                .exit_code,
            0);
  for (const char* p : {"fifo", "sock"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = sb_->read_file(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition) << r.error().message();
    // Opening a socket, or a FIFO without a reader for writing, fails at
    // once (ENXIO, never a wait): the type is named all the same.
    auto w = sb_->write_file(p, "data");
    ASSERT_FALSE(w.ok()) << p;
    EXPECT_EQ(w.error().code, ErrorCode::kFailedPrecondition) << w.error().message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  EXPECT_NE(sb_->read_file("fifo").error().context.find("is a FIFO"), std::string::npos);
  EXPECT_NE(sb_->read_file("sock").error().context.find("is a socket"), std::string::npos);
  // With a reader holding the FIFO open, a write would not block: it is
  // still refused, before any byte goes in.
  ExecRequest reader;
  reader.argv = {"/bin/sh", "-c", "exec 3<>fifo; echo ready; sleep 30"};
  reader.timeout = std::chrono::seconds(40);
  CancelToken stop;
  std::promise<void> ready;
  ExecCallbacks cb;
  bool once = false;
  cb.on_stdout = [&](std::string_view) {
    if (!std::exchange(once, true)) ready.set_value();
  };
  std::thread holder([&] { (void)sb_->exec(reader, cb, &stop); });
  ready.get_future().wait();
  auto held = sb_->write_file("fifo", "data");
  EXPECT_EQ(held.error().code, ErrorCode::kFailedPrecondition) << held.error().message();
  stop.cancel();
  holder.join();
  auto ls = sb_->list(".");
  ASSERT_TRUE(ls.ok());
  int others = 0;
  for (const auto& e : ls->entries) others += e.type == FileType::kOther;
  EXPECT_EQ(others, 2);
}

// A path swapped between a regular file and a symlink into /proc while the
// server reads and writes it: whichever it meets, it never writes a host
// setting nor returns host data.
TEST_F(HostileTenantTest, SwapRaceNeverReachesTheHost) {
  const std::string before = host_domainname();
  ExecRequest loop;
  loop.argv = {"/bin/sh", "-c",
               "while :; do echo file > t && mv -f t race; ln -sfn /proc/sys/kernel/hostname race; "
               "ln -sfn /proc/sys/kernel/domainname race; done"};
  loop.timeout = std::chrono::seconds(60);
  CancelToken stop;
  std::thread racer([&] { (void)sb_->exec(loop, {}, &stop); });
  int reads = 0, writes = 0;
  for (int i = 0; i < 300; ++i) {
    auto r = sb_->read_file("race");
    if (r.ok()) {
      ++reads;
      // The racer's file, our own write, or the sandbox's own names.
      EXPECT_TRUE(r->data == "file\n" || r->data == "sandcastle-race" || r->data == "sandbox\n" ||
                  r->data == "(none)\n" || r->data.empty())
          << r->data;
    }
    if (sb_->write_file("race", "sandcastle-race").ok()) ++writes;
  }
  stop.cancel();
  racer.join();
  EXPECT_GT(reads, 0);
  EXPECT_EQ(host_domainname(), before);
}

// Large trees and sparse files: the server holds what it asked for, never
// what the sandbox has.
TEST_F(HostileTenantTest, ListingsAndReadsAreBounded) {
  // As large as the sandbox's file size limit allows (256 MiB by default).
  const std::uint64_t sparse = sb_->spec().limits().file_size_bytes;
  ASSERT_EQ(
      py("import os\nos.mkdir('many')\nfor i in range(30000): open(f'many/f{i}', 'w').close()\n"
         "with open('sparse', 'wb') as f: f.truncate(" +
             std::to_string(sparse) + ")\n",
         std::chrono::seconds(60))
          .exit_code,
      0);
  const long peak_before = peak_rss_kib();
  ListOptions opts;
  opts.recursive = true;
  opts.max_entries = 1000;
  auto ls = sb_->list(".", opts);
  ASSERT_TRUE(ls.ok()) << ls.error().message();
  EXPECT_EQ(ls->entries.size(), 1000u);
  EXPECT_TRUE(ls->truncated);
  // A whole-file read of a large sparse file is refused unread...
  auto whole = sb_->read_file("sparse", ReadRange{0, 1 * kMiB, true});
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  EXPECT_TRUE(whole->too_large);
  EXPECT_EQ(whole->size, sparse);
  EXPECT_TRUE(whole->data.empty());
  // ...and a range returns exactly the range, from anywhere in it.
  auto part = sb_->read_file("sparse", ReadRange{sparse - 100, 1 * kMiB, false});
  ASSERT_TRUE(part.ok()) << part.error().message();
  EXPECT_EQ(part->data, std::string(100, '\0'));
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&] {
      for (int j = 0; j < 5; ++j) (void)sb_->read_file("sparse", ReadRange{0, 8 * kMiB, false});
    });
  for (auto& t : readers) t.join();
  // Four readers of 8 MiB ranges, serialized per sandbox: far below what
  // four whole reads would have held.
  EXPECT_LT(peak_rss_kib() - peak_before, 64 * 1024) << "KiB";
}

// The worker has the sandbox's file size limit: a write cannot make a file
// larger than a sandbox program could.
TEST_F(HostileTenantTest, WritesKeepTheFileSizeLimit) {
  SpecOptions o;
  o.limits.file_size_bytes = 1 * kMiB;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  auto w = small->write_file("big", std::string(2 * kMiB, 'x'));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().sys_errno, EFBIG);
  EXPECT_TRUE(small->write_file("ok", std::string(kMiB / 2, 'x')).ok());
  EXPECT_TRUE(small->destroy().ok());
}

// File work runs as the sandbox user with no capabilities: what it writes
// belongs to that user, and a directory closed to that user stays closed.
TEST_F(HostileTenantTest, FileWorkHasTheSandboxUsersIdentity) {
  ASSERT_TRUE(sb_->write_file("probe", "x").ok());
  EXPECT_EQ(sh("stat -c %U probe").stdout_data, "sandbox\n");
  ASSERT_EQ(sh("mkdir closed && echo secret > closed/f && chmod 000 closed").exit_code, 0);
  auto r = sb_->read_file("closed/f");
  ASSERT_FALSE(r.ok());
  // No CAP_DAC_OVERRIDE in the worker, whoever runs the server.
  EXPECT_EQ(r.error().sys_errno, EACCES) << r.error().message();
}

// A worker that has gone (killed, or idle) is replaced on the next call.
TEST_F(HostileTenantTest, AKilledWorkerIsReplaced) {
  ASSERT_TRUE(sb_->write_file("a", "1").ok());
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  // The worker is a child of the sandbox's init, named sc-files.
  std::ifstream children("/proc/" + std::to_string(native->init_pid()) + "/task/" +
                         std::to_string(native->init_pid()) + "/children");
  pid_t worker = 0;
  for (pid_t p; children >> p;) {
    std::ifstream comm("/proc/" + std::to_string(p) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "sc-files") worker = p;
  }
  ASSERT_GT(worker, 0) << "no file worker under the sandbox's init";
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  auto again = sb_->read_file("a");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->data, "1");
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

// The zygote clones every init: a killed zygote takes its sandboxes with it
// (none outlives its parent chain), and the next create starts a new one.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "common/unique_fd.h"
#include "fixture.h"
#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::testing {
namespace {

// Our children named sc-zygote.
std::vector<pid_t> zygotes() {
  std::vector<pid_t> out;
  for (pid_t pid : proc_pids()) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos || line.find("(sc-zygote)") == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() && state != "Z") out.push_back(pid);
  }
  return out;
}

class ZygoteTest : public SandboxTest {};

TEST_F(ZygoteTest, OneZygoteServesEveryCreate) {
  auto a = make();
  auto b = make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(zygotes().size(), 1u);
  EXPECT_TRUE(a->destroy().ok());
  EXPECT_TRUE(b->destroy().ok());
}

TEST_F(ZygoteTest, KilledZygoteTakesItsSandboxesAndIsReplaced) {
  auto before = zygotes();
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(::kill(before[0], SIGKILL), 0);
  // Its inits die with it (PDEATHSIG): once every process of the sandbox
  // made before is gone, its init's control socket refuses the request.
  std::uint32_t left = 1;
  // (The dead init is reaped by the host's PID 1, which may take a while.)
  for (int i = 0; i < 1000 && left > 0; ++i) {
    auto u = sb_->usage();
    ASSERT_TRUE(u.ok()) << u.error().message();
    left = u->processes;
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(left, 0u) << "a sandbox outlived the zygote that cloned its init";
  ExecRequest probe;
  probe.argv = {"/bin/true"};
  auto dead = sb_->exec(probe);
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.error().sys_errno, EPIPE) << dead.error().message();
  EXPECT_NE(dead.error().context.find("send exec request to sandbox init"), std::string::npos);
  // A new zygote serves the next create (the backend's pool may hand out a
  // sandbox that died with the old one: creates retry through the cold path).
  auto fresh = make(SpecOptions{.hostname = "after-zygote"});
  ASSERT_NE(fresh, nullptr);
  ExecRequest req;
  req.argv = {"/bin/hostname"};
  auto out = fresh->exec(req);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->stdout_data, "after-zygote\n");
  auto after = zygotes();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], before[0]);
  EXPECT_TRUE(fresh->destroy().ok());
  sb_.reset();  // died with the old zygote; nothing to destroy
}

// The moment the killed zygote has exited, its children were sent SIGKILL
// (PDEATHSIG) but the pool's inits may still be running: a create then must
// not be handed one of them (its first exec would fail with EPIPE).
TEST_F(ZygoteTest, ACreateTheMomentTheZygoteHasDiedGetsALiveSandbox) {
  sb_.reset();  // dies with the first zygote
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto before = zygotes();
    ASSERT_EQ(before.size(), 1u);
    UniqueFd zygote(static_cast<int>(::syscall(SYS_pidfd_open, before[0], 0)));
    ASSERT_TRUE(zygote) << std::strerror(errno);
    ASSERT_EQ(::kill(before[0], SIGKILL), 0);
    struct pollfd p {
      zygote.get(), POLLIN, 0
    };
    ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "the zygote did not exit";
    auto fresh = make();
    ASSERT_NE(fresh, nullptr);
    ExecRequest req;
    req.argv = {"/bin/true"};
    auto out = fresh->exec(req);
    ASSERT_TRUE(out.ok()) << out.error().message();
    EXPECT_EQ(out->exit_code, 0);
    EXPECT_TRUE(fresh->destroy().ok());
  }
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

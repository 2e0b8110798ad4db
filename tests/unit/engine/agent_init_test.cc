// sandcastle-agent init as a container's PID 1: run in a PID namespace of its
// own, it reaps the orphans that come to it and leaves on SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace sandcastle::sandbox::engine {
namespace {

using namespace std::chrono_literals;

// Forks a child that unshares a PID namespace and forks the agent as its
// PID 1; returns the agent's pid as seen here (the middle process waits).
pid_t start_init(pid_t* middle, uid_t uid = 0) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  *middle = ::fork();
  if (*middle == 0) {
    ::close(p[0]);
    if (::unshare(CLONE_NEWPID) != 0) _exit(3);
    pid_t init = ::fork();
    if (init == 0) {
      if (uid != 0 && (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0))
        _exit(126);
      const char* argv[] = {SANDCASTLE_AGENT_PATH, "init", nullptr};
      ::execv(argv[0], const_cast<char**>(argv));
      _exit(127);
    }
    (void)!::write(p[1], &init, sizeof init);
    int st = 0;
    ::waitpid(init, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
  }
  ::close(p[1]);
  pid_t init = -1;
  if (::read(p[0], &init, sizeof init) != sizeof init) init = -1;
  ::close(p[0]);
  return init;
}

char state_of(pid_t pid) {
  // (<< rdbuf(): a process gone between open and read reads as empty, where
  // an istreambuf_iterator throws on the read's ESRCH.)
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::stringstream text;
  text << f.rdbuf();
  const std::string all = text.str();
  auto close = all.rfind(')');
  return close == std::string::npos || close + 2 >= all.size() ? '\0' : all[close + 2];
}

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    ::usleep(2000);
  }
  return true;
}

TEST(AgentInit, ReapsOrphansAndLeavesOnSigterm) {
  if (::geteuid() != 0) GTEST_SKIP() << "a PID namespace needs root here";
  pid_t middle = -1;
  pid_t init = start_init(&middle);
  ASSERT_GT(init, 0);
  // Whatever fails below, nothing started here is left running.
  struct Cleanup {
    pid_t init, middle;
    ~Cleanup() {
      if (middle <= 0) return;  // reaped: init is gone with it
      ::kill(init, SIGKILL);
      ::waitpid(middle, nullptr, 0);
    }
  } cleanup{init, middle};
  // Wait until the agent runs (execve replaced the forked test).
  ASSERT_TRUE(wait_for([&] {
    char exe[4096];
    ssize_t n = ::readlink(("/proc/" + std::to_string(init) + "/exe").c_str(), exe, sizeof exe - 1);
    return n > 0 && std::string(exe, static_cast<std::size_t>(n)) == SANDCASTLE_AGENT_PATH;
  }));
  // An orphan in its namespace: a process that enters it, forks a child
  // that exits at once, and exits itself, so the child comes to PID 1.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t helper = ::fork();
  if (helper == 0) {
    int ns = ::open(("/proc/" + std::to_string(init) + "/ns/pid").c_str(), O_RDONLY);
    if (ns < 0 || ::setns(ns, CLONE_NEWPID) != 0) _exit(1);
    pid_t inner = ::fork();
    if (inner == 0) {
      pid_t orphan = ::fork();
      if (orphan == 0) {
        ::usleep(300'000);  // exits once it has come to PID 1
        _exit(0);
      }
      (void)!::write(p[1], &orphan, sizeof orphan);
      _exit(0);
    }
    int st;
    ::waitpid(inner, &st, 0);
    _exit(0);
  }
  ::close(p[1]);
  pid_t in_ns = -1;  // the orphan's pid in the namespace; ours is read below
  ASSERT_EQ(::read(p[0], &in_ns, sizeof in_ns), static_cast<ssize_t>(sizeof in_ns));
  ::close(p[0]);
  int st = 0;
  ::waitpid(helper, &st, 0);
  pid_t orphan = -1;
  ASSERT_TRUE(wait_for([&] {
    std::ifstream f("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) +
                    "/children");
    return static_cast<bool>(f >> orphan);
  }));
  // Reaped, not left a zombie: its /proc entry goes away.
  EXPECT_TRUE(wait_for([&] { return state_of(orphan) == '\0'; })) << state_of(orphan);
  // SIGTERM from outside the namespace reaches a PID 1 only through a
  // handler: the agent has one, and leaves with 0.
  ASSERT_EQ(::kill(init, SIGTERM), 0);
  ASSERT_TRUE(wait_for([&] { return ::waitpid(middle, &st, WNOHANG) == middle; }));
  cleanup.middle = -1;  // reaped
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// Run as another uid, init is not dumpable (its /proc entries are root's, so
// no process of its uid can open its fds) and its stdio is /dev/null: no
// one writes into the container's log through it.
TEST(AgentInit, IsNotDumpableAndHoldsNoStdio) {
  if (::geteuid() != 0) GTEST_SKIP() << "a PID namespace needs root here";
  pid_t middle = -1;
  pid_t init = start_init(&middle, 65534);
  ASSERT_GT(init, 0);
  struct Cleanup {
    pid_t init, middle;
    ~Cleanup() {
      ::kill(init, SIGKILL);
      ::waitpid(middle, nullptr, 0);
    }
  } cleanup{init, middle};
  const std::string proc = "/proc/" + std::to_string(init);
  ASSERT_TRUE(wait_for([&] {
    char exe[4096];
    ssize_t n = ::readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
    return n > 0 && std::string(exe, static_cast<std::size_t>(n)) == SANDCASTLE_AGENT_PATH;
  }));
  auto link = [&](int fd) {
    char target[4096];
    ssize_t n = ::readlink((proc + "/fd/" + std::to_string(fd)).c_str(), target, sizeof target - 1);
    return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
  };
  EXPECT_TRUE(wait_for(
      [&] {
        struct stat st {};
        return ::stat((proc + "/fd").c_str(), &st) == 0 && st.st_uid == 0;
      },
      2s));
  EXPECT_TRUE(wait_for(
      [&] { return link(0) == "/dev/null" && link(1) == "/dev/null" && link(2) == "/dev/null"; },
      2s))
      << link(0) << " " << link(1) << " " << link(2);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine

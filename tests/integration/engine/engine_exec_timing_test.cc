// Not a speed target (those live in bench/): prints the exec round trip of
// `true` through EngineClient next to the engines' own CLIs (`podman exec`,
// `docker exec`), interleaved in one run, medians. Disabled by default; run
// with --gtest_also_run_disabled_tests --gtest_filter='*ExecRoundTrip*'.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "engine_fixture.h"

extern char** environ;

namespace sandcastle::sandbox::engine::testing {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The CLI run directly (no shell), output discarded.
int run_cli(const std::string& command_line) {
  std::istringstream in(command_line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(EngineExecTiming, DISABLED_ExecRoundTripVsCli) {
  for (const char* name : {"podman", "docker"}) {
    std::string why;
    const TestEngine* e = test_engine(name, &why);
    if (!e) {
      std::printf("%s: skipped: %s\n", name, why.c_str());
      continue;
    }
    auto c = client_for(*e);
    ASSERT_TRUE(c);
    auto id = c->container_create(locked_down_config(e->image));
    ASSERT_TRUE(id.ok()) << id.error().message();
    ASSERT_TRUE(c->container_start(*id).ok());
    const std::string cli = e->cli_prefix + " exec " + *id + " true";
    auto discard = [](StreamId, std::string_view) { return ok_status(); };
    // Warm both paths once.
    ASSERT_TRUE(c->exec_run(*id, {"true"}, nullptr, discard).ok());
    ASSERT_EQ(run_cli(cli), 0) << cli;
    std::vector<double> api, cmd;
    for (int i = 0; i < 25; ++i) {
      auto t0 = Clock::now();
      auto r = c->exec_run(*id, {"true"}, nullptr, discard);
      api.push_back(ms_since(t0));
      ASSERT_TRUE(r.ok() && r->exit_code == 0);
      t0 = Clock::now();
      ASSERT_EQ(run_cli(cli), 0);
      cmd.push_back(ms_since(t0));
    }
    std::printf("%s: exec `true` median: EngineClient %.1f ms, CLI %.1f ms, ratio %.2f (n=25)\n",
                name, median(api), median(cmd), median(api) / median(cmd));
    // Where the client's time goes: create, start (to the stream's end),
    // inspect; and a bare GET /_ping for the HTTP floor.
    std::vector<double> create, start, inspect, ping;
    for (int i = 0; i < 15; ++i) {
      auto t0 = Clock::now();
      auto ex =
          c->exec_create(*id, {{"Cmd", {"true"}}, {"AttachStdout", true}, {"AttachStderr", true}});
      create.push_back(ms_since(t0));
      ASSERT_TRUE(ex.ok());
      t0 = Clock::now();
      ASSERT_TRUE(c->exec_start(*ex, nullptr, discard).ok());
      start.push_back(ms_since(t0));
      t0 = Clock::now();
      ASSERT_TRUE(c->exec_inspect(*ex).ok());
      inspect.push_back(ms_since(t0));
      t0 = Clock::now();
      ASSERT_TRUE(c->ping().ok());
      ping.push_back(ms_since(t0));
    }
    std::printf("%s: medians: exec create %.2f ms, start %.1f ms, inspect %.2f ms, ping %.2f ms\n",
                name, median(create), median(start), median(inspect), median(ping));
    (void)c->container_remove(*id, true, true);
  }
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing

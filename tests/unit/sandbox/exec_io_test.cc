// The exec request checks and environment layering both backends share
// (exec_io.h), and the pump that reads a command's output.
#include "sandbox/exec_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace sandcastle::sandbox {
namespace {

using namespace std::chrono_literals;

SandboxSpec spec_with_env() {
  SpecOptions o;
  o.env = {{"FROM_SPEC", "spec"}, {"LANG", "spec-lang"}};
  o.workdir = "/workspace";
  o.limits.exec_timeout = 7s;
  return *SandboxSpec::create(o);
}

bool has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

TEST(ExecCommand, LayersBaseThenSpecThenRequest) {
  ExecRequest req;
  req.argv = {"env"};
  req.env = {{"LANG", "req-lang"}, {"ONLY_REQ", "r"}};
  auto c = exec_command(req, spec_with_env());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->argv, std::vector<std::string>{"env"});
  EXPECT_TRUE(has(c->env, "PATH=/usr/local/bin:/usr/bin:/bin"));
  EXPECT_TRUE(has(c->env, "FROM_SPEC=spec"));
  EXPECT_TRUE(has(c->env, "LANG=req-lang"));
  EXPECT_TRUE(has(c->env, "ONLY_REQ=r"));
  EXPECT_EQ(std::count_if(c->env.begin(), c->env.end(),
                          [](const std::string& kv) { return kv.rfind("LANG=", 0) == 0; }),
            1);
  EXPECT_EQ(c->cwd, "/workspace");
  EXPECT_EQ(c->timeout_ms, 7000u);
}

TEST(ExecCommand, LeavesTheSpecsEnvOutWhenAsked) {
  ExecRequest req;
  req.argv = {"pip"};
  req.spec_env = false;
  req.cwd = "sub/dir";
  req.timeout = 250ms;
  auto c = exec_command(req, spec_with_env());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(has(c->env, "FROM_SPEC=spec"));
  EXPECT_TRUE(has(c->env, "LANG=C.UTF-8"));
  EXPECT_EQ(c->cwd, "/workspace/sub/dir");
  EXPECT_EQ(c->timeout_ms, 250u);
}

TEST(ExecCommand, RefusesWhatCannotBeExeced) {
  const auto refused = [](const ExecRequest& req) {
    auto c = exec_command(req, spec_with_env());
    if (c.ok()) return std::string("accepted");
    if (c.error().code != ErrorCode::kInvalidArgument)
      return "not kInvalidArgument: " + c.error().message();
    return c.error().message();
  };
  ExecRequest none;
  none.timeout = 1s;
  EXPECT_EQ(refused(none), "exec: argv must not be empty");
  ExecRequest nul;
  nul.argv = {"echo", std::string("a\0b", 3)};
  EXPECT_EQ(refused(nul), "exec: argument contains NUL");
  ExecRequest bad_name;
  bad_name.argv = {"env"};
  bad_name.env = {{"A=B", "x"}};
  EXPECT_EQ(refused(bad_name), "exec: invalid env name 'A=B'");
  ExecRequest nul_value;
  nul_value.argv = {"env"};
  nul_value.env = {{"A", std::string("x\0y", 3)}};
  EXPECT_EQ(refused(nul_value), "exec: env A contains NUL");
  ExecRequest zero;
  zero.argv = {"true"};
  zero.timeout = 0ms;
  EXPECT_EQ(refused(zero), "exec: timeout must be positive");
}

TEST(OutputPump, KeepsTheCappedOutputCallsBackWithAllAndClosesAtEof) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd w(p[1]);
  std::string seen;
  std::function<void(std::string_view)> cb = [&](std::string_view v) { seen.append(v); };
  OutputStream s{UniqueFd(p[0]), OutputBuffer(8), &cb};
  ASSERT_EQ(::write(w.get(), "0123456789abcdef", 16), 16);
  EXPECT_TRUE(pump(s));  // EAGAIN: more may come
  EXPECT_TRUE(s.fd);
  w.reset();
  EXPECT_FALSE(pump(s));  // EOF
  EXPECT_FALSE(s.fd);
  EXPECT_EQ(seen, "0123456789abcdef");
  ExecResult res;
  OutputStream none{UniqueFd(), OutputBuffer(8), nullptr};
  fill_result(res, s, none, 3 << 8, std::chrono::steady_clock::now());
  EXPECT_EQ(res.exit_code, 3);
  EXPECT_EQ(res.signal, 0);
  EXPECT_TRUE(res.stdout_truncated);
  EXPECT_EQ(res.stdout_total, 16u);
  EXPECT_EQ(res.stdout_data, "0123\n[... 8 bytes truncated ...]\ncdef");
  EXPECT_EQ(res.stderr_data, "");
}

}  // namespace
}  // namespace sandcastle::sandbox

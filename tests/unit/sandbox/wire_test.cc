#include "sandbox/native/wire.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox::native {
namespace {

TEST(Wire, ExecRoundTrip) {
  ExecWire e;
  e.argv = {"/bin/sh", "-c", std::string("a\0b", 3)};
  e.env = {"A=1", "B="};
  e.cwd = "/workspace";
  e.timeout_ms = 1234;
  e.rlimit_nproc = 7;
  e.listen_port = 3128;
  auto d = decode_exec(encode(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->argv, e.argv);
  EXPECT_EQ(d->env, e.env);
  EXPECT_EQ(d->cwd, e.cwd);
  EXPECT_EQ(d->timeout_ms, 1234u);
  EXPECT_EQ(d->rlimit_nproc, 7u);
  EXPECT_EQ(d->listen_port, 3128);
}

TEST(Wire, ExecListenPortMustBeAPort) {
  ExecWire e;
  e.argv = {"x"};
  std::string bytes = encode(e);
  const std::uint32_t not_a_port = 70000;
  // The port is the last field but one (the flags follow it).
  bytes.replace(bytes.size() - 2 * sizeof not_a_port, sizeof not_a_port,
                reinterpret_cast<const char*>(&not_a_port), sizeof not_a_port);
  EXPECT_FALSE(decode_exec(bytes));
}

TEST(Wire, ExecShellEnvIsAFlag) {
  ExecWire e;
  e.argv = {"env"};
  e.shell_env = true;
  auto d = decode_exec(encode(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->shell_env);
  e.shell_env = false;
  std::string bytes = encode(e);
  EXPECT_FALSE(decode_exec(bytes)->shell_env);
  // An unknown flag bit is refused.
  const std::uint32_t four = 4;
  bytes.replace(bytes.size() - sizeof four, sizeof four, reinterpret_cast<const char*>(&four),
                sizeof four);
  EXPECT_FALSE(decode_exec(bytes));
}

TEST(Wire, ExecLastIsAFlagBesideShellEnv) {
  ExecWire e;
  e.argv = {"true"};
  e.last = true;
  auto d = decode_exec(encode(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->last);
  EXPECT_FALSE(d->shell_env);
  e.shell_env = true;
  d = decode_exec(encode(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->last && d->shell_env);
  e.last = false;
  EXPECT_FALSE(decode_exec(encode(e))->last);
}

TEST(Wire, RejectsTruncatedAndTrailingBytes) {
  ExecWire e;
  e.argv = {"x"};
  std::string bytes = encode(e);
  for (std::size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode_exec(bytes.substr(0, n))) << n;
  EXPECT_FALSE(decode_exec(bytes + "z"));
  ExecWire empty;
  EXPECT_FALSE(decode_exec(encode(empty)));  // argv must not be empty
}

TEST(Wire, RejectsAbsurdCounts) {
  WireWriter w;
  w.u32(0xffffffff);  // argv count with no data behind it
  EXPECT_FALSE(decode_exec(w.bytes()));
}

TEST(Wire, InitConfigRoundTrip) {
  MountOp op;
  op.kind = MountKind::kTmpfs;
  op.dst = "tmp";
  op.size = 1 << 20;
  op.mode = 01777;
  InitConfig c;
  c.new_root = std::string("/run/x/root");
  c.mounts.push_back(op);
  c.seccomp_bpf = std::string(16, '\x01');
  auto d = decode_init_config(encode(c));
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->mounts.size(), 1u);
  EXPECT_EQ(d->mounts[0].kind, MountKind::kTmpfs);
  EXPECT_EQ(d->mounts[0].mode, 01777u);
  EXPECT_EQ(d->mounts[0].describe(), "mount tmpfs /tmp");
  EXPECT_EQ(d->seccomp_bpf, c.seccomp_bpf);
}

TEST(Wire, FinishConfigRoundTrip) {
  FinishConfig c;
  c.mounts.push_back(MountOp{MountKind::kReadOnly, "", "", 0, 0, false, ""});
  c.hostname = "h";
  auto d = decode_finish_config(encode(c));
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->mounts.size(), 1u);
  EXPECT_EQ(d->mounts[0].kind, MountKind::kReadOnly);
  EXPECT_EQ(d->hostname, "h");
  EXPECT_FALSE(decode_finish_config(encode(c) + "x"));
}

TEST(Wire, ReportRoundTripAndValidation) {
  ExecReport r;
  r.kind = ReportKind::kSetupError;
  r.err = 2;
  r.step = "execve /x";
  auto d = decode_report(encode(r));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->step, "execve /x");
  std::string bad = encode(r);
  bad[0] = 9;  // unknown kind
  EXPECT_FALSE(decode_report(bad));
  ExecReport l;
  l.kind = ReportKind::kListener;
  auto dl = decode_report(encode(l));
  ASSERT_TRUE(dl.has_value());
  EXPECT_EQ(dl->kind, ReportKind::kListener);
}

TEST(Wire, ControlMessagesCarryTheirKind) {
  ExecWire e;
  e.argv = {"x"};
  std::string bytes = encode_control(ControlKind::kExec, encode(e));
  auto m = decode_control(bytes);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->kind, ControlKind::kExec);
  ASSERT_TRUE(decode_exec(m->payload).has_value());
  bytes[0] = 2;  // the retired kListen: init opens no listener in the shared namespace
  EXPECT_FALSE(decode_control(bytes));
  bytes[0] = 8;  // unknown kind
  EXPECT_FALSE(decode_control(bytes));
  EXPECT_FALSE(decode_control("ab"));
}

}  // namespace
}  // namespace sandcastle::sandbox::native

namespace sandcastle::sandbox::native {

// Issue 18: a terminal's size travels with its exec; both or neither.
TEST(Wire, ExecPtySizeRoundTripsAndComesInPairs) {
  ExecWire e;
  e.argv = {"sh"};
  e.pty_cols = 132;
  e.pty_rows = 43;
  auto d = decode_exec(encode(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->pty_cols, 132);
  EXPECT_EQ(d->pty_rows, 43);
  e.pty_rows = 0;
  EXPECT_FALSE(decode_exec(encode(e)));
  e.pty_cols = 0;
  EXPECT_TRUE(decode_exec(encode(e)).has_value());
  ExecReport t;
  t.kind = ReportKind::kTerminal;
  auto dt = decode_report(encode(t));
  ASSERT_TRUE(dt.has_value());
  EXPECT_EQ(dt->kind, ReportKind::kTerminal);
}

}  // namespace sandcastle::sandbox::native

namespace sandcastle::sandbox::native {
namespace {

AheadWire python_ahead() {
  AheadWire a;
  a.command.argv = {"/usr/bin/python3", "-u", "-c", "loader"};
  a.command.env = {"A=1", "PATH=/usr/bin"};
  a.command.cwd = "/workspace";
  a.command.rlimit_nproc = 64;
  a.shared_words = 2;
  return a;
}

ExecWire its_exec(const AheadWire& a) {
  ExecWire e = a.command;
  e.argv = {"/usr/bin/python3", "-u", "/tmp/.sandcastle/run-1/main.py"};
  e.timeout_ms = 30'000;  // a request's own
  e.last = true;          // likewise
  return e;
}

}  // namespace

TEST(Wire, AheadRoundTripsAndRefusesWhatNoStartedCommandHas) {
  const AheadWire a = python_ahead();
  auto d = decode_ahead(encode(a));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->shared_words, 2u);
  EXPECT_EQ(d->command.argv, a.command.argv);
  EXPECT_EQ(d->command.env, a.command.env);
  auto with = [&](auto change) {
    AheadWire b = a;
    change(b);
    return decode_ahead(encode(b)).has_value();
  };
  EXPECT_FALSE(with([](AheadWire& b) { b.shared_words = 0; }));
  EXPECT_FALSE(with([](AheadWire& b) { b.shared_words = 4; }));  // no loader word left
  EXPECT_FALSE(with([](AheadWire& b) { b.command.listen_port = 8080; }));
  EXPECT_FALSE(with([](AheadWire& b) { b.command.pty_cols = b.command.pty_rows = 24; }));
  EXPECT_FALSE(with([](AheadWire& b) { b.command.last = true; }));
  const std::string bytes = encode(a);
  EXPECT_FALSE(decode_ahead(bytes + "z"));
  EXPECT_FALSE(decode_ahead(bytes.substr(0, bytes.size() - 1)));
  auto msg = decode_control(encode_control(ControlKind::kAhead, bytes));
  ASSERT_TRUE(msg.has_value());
  EXPECT_EQ(msg->kind, ControlKind::kAhead);
}

TEST(Wire, AheadMatchesOnlyItsOwnExec) {
  const AheadWire a = python_ahead();
  EXPECT_TRUE(ahead_matches(a, its_exec(a)));
  auto with = [&](auto change) {
    ExecWire e = its_exec(a);
    change(e);
    return ahead_matches(a, e);
  };
  EXPECT_FALSE(with([](ExecWire& e) { e.last = false; }));  // a sandbox kept for more
  EXPECT_FALSE(with([](ExecWire& e) { e.argv = {"/usr/bin/python3", "-u"}; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.argv.push_back("arg"); }));
  EXPECT_FALSE(with([](ExecWire& e) { e.argv[0] = "/usr/bin/python3.11"; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.argv[1] = "-I"; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.env.push_back("PYTHONHASHSEED=0"); }));
  EXPECT_FALSE(with([](ExecWire& e) { e.cwd = "/tmp"; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.rlimit_nproc = 65; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.rlimit_nofile = 1; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.rlimit_fsize = 1; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.rlimit_data = 1; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.shell_env = true; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.listen_port = 8080; }));
  EXPECT_FALSE(with([](ExecWire& e) { e.pty_cols = e.pty_rows = 24; }));
}

}  // namespace sandcastle::sandbox::native

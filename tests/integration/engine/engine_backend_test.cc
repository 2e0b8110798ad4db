// The engine backend against real engines (Podman's compat service and
// dockerd, started by the fixture): sandboxes as containers, every call
// through the in-container agent. Nothing is mocked.
#include "sandbox/engine/engine_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "backend_fixture.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using namespace std::chrono_literals;

ExecRequest true_request() {
  ExecRequest req;
  req.argv = {"true"};
  return req;
}

class EngineBackendTest : public BackendTest<EngineBackend, ::testing::TestWithParam<std::string>> {
 protected:
  void SetUp() override {
    std::string why;
    engine_ = test_engine(GetParam(), &why);
    if (!engine_) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
    use(EngineBackend::create(backend_options(engine_->url)));
  }
  // A backend with a warm pool of one for test_spec().
  void use_warm_pool() {
    auto o = backend_options(engine_->url);
    o.pool_size = 1;
    o.pool_spec = test_spec();
    use(EngineBackend::create(o));
  }
  const TestEngine* engine_ = nullptr;
};

TEST_P(EngineBackendTest, RunsCommandsAsTheSandboxUserWithoutCapabilities) {
  auto sb = make();
  ASSERT_TRUE(sb);
  auto r = run(*sb, {"sh", "-c", "id -u; grep CapEff /proc/self/status; echo err >&2; exit 3"});
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, "1000\nCapEff:\t0000000000000000\n");
  EXPECT_EQ(r.stderr_data, "err\n");
  // The host's interpreters, as on the native "host" image.
  auto py = run(*sb, {"python3", "-c", "import sys; print(sys.version_info[0])"});
  EXPECT_EQ(py.stdout_data, "3\n") << py.stderr_data;
}

TEST_P(EngineBackendTest, PassesLargeStdinThroughAndBack) {
  auto sb = make();
  ASSERT_TRUE(sb);
  std::string big(3 * 1024 * 1024 + 7, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
  ExecRequest req;
  req.argv = {"cat"};
  req.stdin_data = big;
  req.output.max_bytes = big.size() + 1;
  auto r = sb->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_total, big.size());
  EXPECT_TRUE(r->stdout_data == big);
}

TEST_P(EngineBackendTest, TimeoutKillsTheCommandAndItsChildren) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ExecRequest req;
  req.argv = {"sh", "-c", "sleep 300 & sleep 300"};
  req.timeout = 300ms;
  auto r = sb->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kTimeout);
  auto ps = run(*sb, {"sh", "-c", "ps -eo comm | grep -c '^sleep' || true"});
  EXPECT_EQ(ps.stdout_data, "0\n");
}

TEST_P(EngineBackendTest, CancelEndsARunningCommand) {
  auto sb = make();
  ASSERT_TRUE(sb);
  sandbox::CancelToken token;
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);  // the cancel must find the command running
    token.cancel();
  });
  ExecRequest req;
  req.argv = {"sleep", "60"};
  auto r = sb->exec(req, {}, &token);
  t.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kCancelled);
  EXPECT_EQ(r->signal, SIGKILL);
}

TEST_P(EngineBackendTest, MissingProgramIsASetupError) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ExecRequest req;
  req.argv = {"/no/such/program"};
  auto r = sb->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().sys_errno, ENOENT);
}

TEST_P(EngineBackendTest, FilesGoThroughTheAgentAsTheSandboxUser) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->write_file("dir/a.txt", "hello", 0644, true).ok());
  auto data = sb->read_file("/workspace/dir/a.txt");
  ASSERT_TRUE(data.ok()) << data.error().message();
  EXPECT_EQ(data->data, "hello");
  auto owner = run(*sb, {"stat", "-c", "%u", "/workspace/dir/a.txt"});
  EXPECT_EQ(owner.stdout_data, "1000\n");
  auto listing = sb->list("/workspace", [] {
    ListOptions lo;
    lo.recursive = true;
    return lo;
  }());
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->entries.size(), 2u);
  // The root is read-only, and /etc is the host's template bound read-only.
  auto ro = sb->write_file("/usr/x", "no");
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.error().sys_errno, EROFS);
  ASSERT_TRUE(sb->remove("dir", true).ok());
  auto gone = sb->stat("dir");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().sys_errno, ENOENT);
}

// The agent's file worker renames as the native one does: a file replaced,
// a directory never (EISDIR), a symlinked parent resolved in the container.
TEST_P(EngineBackendTest, RenameReplacesFilesOnly) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->write_file("a", "old").ok());
  ASSERT_TRUE(sb->write_file(".a.upload-1", "new").ok());
  auto r = sb->rename(".a.upload-1", "a");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(sb->read_file("a")->data, "new");
  ASSERT_TRUE(sb->mkdir("d").ok());
  auto onto_dir = sb->rename("a", "d");
  ASSERT_FALSE(onto_dir.ok());
  EXPECT_EQ(onto_dir.error().code, ErrorCode::kSystem);
  EXPECT_EQ(onto_dir.error().sys_errno, EISDIR);
  EXPECT_EQ(sb->read_file("a")->data, "new");
  // A directory only the container has: resolved on the host, the link
  // would lead nowhere.
  const std::string dir = "/workspace/sc-target-" + std::to_string(::getpid());
  ASSERT_NE(::access(dir.c_str(), F_OK), 0);
  auto link = run(*sb, {"sh", "-c", "mkdir " + dir + " && ln -s " + dir + " /workspace/out"});
  ASSERT_EQ(link.exit_code, 0);
  auto moved = sb->rename("a", "out/moved");
  ASSERT_TRUE(moved.ok()) << moved.error().message();
  EXPECT_EQ(sb->read_file(dir + "/moved")->data, "new");
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << "reached the host's tree";
}

TEST_P(EngineBackendTest, DiskLimitIsTheWorkspaceSize) {
  auto sb = make();
  ASSERT_TRUE(sb);
  auto r = run(*sb, {"sh", "-c", "head -c 20000000 /dev/zero > big; echo $?"});
  EXPECT_NE(r.stdout_data, "0\n");
  EXPECT_NE(r.stderr_data.find("No space left"), std::string::npos) << r.stderr_data;
}

TEST_P(EngineBackendTest, Fd3IsTheCallersSocket) {
  auto sb = make();
  ASSERT_TRUE(sb);
  int sp[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  UniqueFd ours(sp[0]), theirs(sp[1]);
  ASSERT_EQ(::write(ours.get(), "ping\n", 5), 5);
  ExecRequest req;
  req.argv = {"sh", "-c", "read line <&3; echo \"got $line\" >&3"};
  req.pass_fd = theirs.get();
  auto r = sb->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  theirs.reset();
  char buf[64] = {};
  ssize_t n = ::read(ours.get(), buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "got ping\n");
}

TEST_P(EngineBackendTest, DestroyRemovesTheContainer) {
  auto sb = make();
  ASSERT_TRUE(sb);
  const std::string cid = static_cast<EngineSandbox&>(*sb).container_id();
  ASSERT_TRUE(sb->destroy().ok());
  // The container goes off the request path: wait for the engine to say so.
  auto c = client_for(*engine_);
  int status = 0;
  for (int i = 0; i < 200 && status != 404; ++i) {
    auto info = c->container_inspect(cid);
    status = info.ok() ? 200 : engine_http_status(info.error());
    if (status != 404) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(status, 404);
  auto r = sb->exec(true_request());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

TEST_P(EngineBackendTest, AContainerRemovedBehindOurBackIsReportedGone) {
  auto sb = make();
  ASSERT_TRUE(sb);
  auto c = client_for(*engine_);
  ASSERT_TRUE(
      c->container_remove(static_cast<EngineSandbox&>(*sb).container_id(), true, true).ok());
  // The link notices the stream's end on its own thread.
  for (int i = 0; i < 250 && sb->alive(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(sb->alive());
  auto r = sb->exec(true_request());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

TEST_P(EngineBackendTest, AMissingImageSaysWhereToGetIt) {
  SpecOptions o;
  o.image = "sandcastle-test/no-such-image:1";
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto sb = backend_->create(*spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kNotFound);
  EXPECT_NE(sb.error().context.find("pull or load it"), std::string::npos) << sb.error().context;
}

// This backend was made without allowlist support; full is native only.
TEST_P(EngineBackendTest, NetworkModesItDoesNotRunAreRefusedSayingWhy) {
  for (NetworkMode mode : {NetworkMode::kAllowList, NetworkMode::kFull}) {
    SpecOptions o = test_spec().options();
    o.network = mode;
    auto spec = SandboxSpec::create(o);
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    auto sb = backend_->create(*spec);
    ASSERT_FALSE(sb.ok()) << network_mode_name(mode);
    EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(sb.error().context,
              mode == NetworkMode::kFull
                  ? "engine backend: network mode \"full\" runs on the native backend only (its "
                    "firewall is loaded inside the sandbox's network namespace); use "
                    "\"allowlist\" with the hosts the sandbox needs"
                  : "engine backend: network mode \"allowlist\" is not offered by this server "
                    "(add it to [network] modes; with several engines, only \"none\")");
  }
}

TEST_P(EngineBackendTest, RunsOnTheEnginesOwnImage) {
  SpecOptions o;
  o.image = engine_->image;  // the fixture's busybox image
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto sb = make(*spec);
  ASSERT_TRUE(sb);
  auto r = run(*sb, {"sh", "-c", "echo $((6*7))"});
  EXPECT_EQ(r.stdout_data, "42\n");
}

TEST_P(EngineBackendTest, WarmPoolHandsOutStartedContainers) {
  ASSERT_NO_FATAL_FAILURE(use_warm_pool());
  for (int i = 0; i < 600 && backend_->warm_ready() == 0; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_EQ(backend_->warm_ready(), 1u);
  auto sb = make();
  ASSERT_TRUE(sb);
  EXPECT_EQ(run(*sb, {"echo", "warm"}).stdout_data, "warm\n");
}

TEST_P(EngineBackendTest, WarmPoolsLearnTheSpecsCreatesAskFor) {
  ASSERT_NO_FATAL_FAILURE(use_warm_pool());
  SpecOptions other;
  other.image = engine_->image;  // busybox, other limits: not the configured pool's
  other.limits.memory_bytes = 128 * kMiB;
  auto spec = SandboxSpec::create(other);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(backend_->warm_ready_for(*spec), 0u);
  {
    auto first = make(*spec);  // started on the request path; the spec is learned
    ASSERT_TRUE(first);
  }
  for (int i = 0; i < 600 && backend_->warm_ready_for(*spec) == 0; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(backend_->warm_ready_for(*spec), 1u);
  auto second = make(*spec);  // from the learned pool
  ASSERT_TRUE(second);
  EXPECT_EQ(backend_->warm_ready_for(*spec), 0u);
  EXPECT_EQ(run(*second, {"sh", "-c", "echo $((2+2))"}).stdout_data, "4\n");
  // At most kMaxPools pools: more specs push the least recently used out.
  for (std::uint64_t mb = 64; mb < 64 + 8 * EngineBackend::kMaxPools; mb += 8) {
    SpecOptions more = other;
    more.limits.memory_bytes = mb * kMiB;
    auto s2 = SandboxSpec::create(more);
    ASSERT_TRUE(s2.ok());
    auto sb = make(*s2);
    ASSERT_TRUE(sb);
  }
  EXPECT_LE(backend_->warm_ready(), EngineBackend::kMaxPools);
}

TEST_P(EngineBackendTest, UsageComesFromTheEngineAndTheWorkspace) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->write_file("f", std::string(1 << 20, 'z')).ok());
  auto u = sb->usage();
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_GT(u->memory_bytes, 0u);
  EXPECT_GE(u->processes, 1u);
  EXPECT_GE(u->disk_bytes, std::uint64_t{1} << 20);
}

TEST_P(EngineBackendTest, SaveMakesAnEngineImageThatStartsWithTheWorkspace) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->saves_own_images());
  ASSERT_TRUE(sb->write_file("notes/a.txt", "kept", 0640, true).ok());
  auto saved = sb->save_image("sandcastle-test/saved:1", "");
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  EXPECT_EQ(saved->base, "host");
  EXPECT_FALSE(saved->id.empty());
  SpecOptions o;
  o.image = "sandcastle-test/saved:1";
  o.limits.exec_timeout = 20s;
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto again = make(*spec);
  ASSERT_TRUE(again);
  auto data = again->read_file("notes/a.txt");
  ASSERT_TRUE(data.ok()) << data.error().message();
  EXPECT_EQ(data->data, "kept");
  // Owned by the sandbox user, mode kept, and the host's /usr still bound
  // (the label says the image is a "host" one).
  auto st = run(*again, {"sh", "-c", "stat -c '%u %a' notes/a.txt; python3 -c 'print(7)'"});
  EXPECT_EQ(st.stdout_data, "1000 640\n7\n") << st.stderr_data;
}

// Engine images are shared by every tenant's create_sandbox: a save moves
// only a name its own owner made.
TEST_P(EngineBackendTest, SaveRefusesANameAnotherOwnerMade) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->save_image("sandcastle-test/owned:op", "").ok());
  auto taken = sb->save_image("sandcastle-test/owned:op", "key:A");
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(taken.error().message(),
            "image name 'sandcastle-test/owned:op' is taken (made by the operator): save under "
            "another name");
  auto a = sb->save_image("sandcastle-test/owned:a", "key:A");
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto b = sb->save_image("sandcastle-test/owned:a", "key:B");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(b.error().message(),
            "image name 'sandcastle-test/owned:a' is taken (made by another key): save under "
            "another name");
  auto again = sb->save_image("sandcastle-test/owned:a", "key:A");
  ASSERT_TRUE(again.ok()) << again.error().message();
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineBackendTest, ::testing::Values("podman", "docker"),
                         [](const auto& param_info) { return param_info.param; });

TEST(EngineBackendDown, AnEngineThatDoesNotAnswerIsAClearError) {
  auto b = EngineBackend::create(backend_options("unix:///nonexistent/engine.sock"));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("/nonexistent/engine.sock"), std::string::npos)
      << b.error().message();
}

// A socket the server's user may not use: the start names the engine and
// the cause. As root the check runs in a child that drops to nobody (root
// passes any file mode).
TEST(EngineBackendDown, ASocketWithoutPermissionIsAClearError) {
  char dir[] = "/tmp/sc-eng-perm-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/engine.sock";
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  struct sockaddr_un a {};
  a.sun_family = AF_UNIX;
  std::copy(path.begin(), path.end(), a.sun_path);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<struct sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    auto b = EngineBackend::create(backend_options("unix://" + path));
    const std::string msg = b.ok() ? std::string("started") : b.error().message();
    (void)!::write(wr.get(), msg.data(), msg.size());
    ::_exit(0);
  }
  wr.reset();
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(rd.get(), buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
  int st = 0;
  ::waitpid(pid, &st, 0);
  ::unlink(path.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("Permission denied"), std::string::npos) << msg;
  EXPECT_NE(msg.find("may not use the engine's socket"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing

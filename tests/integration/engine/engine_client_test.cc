// EngineClient against real engines: Podman's compat service and dockerd,
// both started by the fixture. Nothing here is mocked.
#include "sandbox/engine/engine_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "engine_fixture.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

ByteSource string_source(const std::string& s) {
  auto pos = std::make_shared<std::size_t>(0);
  return [&s, pos](char* buf, std::size_t cap) -> Result<std::size_t> {
    const std::size_t n = std::min(cap, s.size() - *pos);
    std::copy_n(s.data() + *pos, n, buf);
    *pos += n;
    return n;
  };
}

struct Output {
  std::string out, err;
  StreamDemuxer::Sink sink() {
    return [this](StreamId id, std::string_view b) -> Status {
      (id == StreamId::kStderr ? err : out).append(b);
      return ok_status();
    };
  }
};

class EngineClientTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    engine_ = test_engine(GetParam(), &why);
    if (!engine_) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
    client_ = client_for(*engine_);
    ASSERT_TRUE(client_);
  }
  void TearDown() override {
    for (const auto& id : containers_) (void)client_->container_remove(id, true, true);
  }

  // A started container with locked_down_config.
  std::string started() {
    auto id = client_->container_create(locked_down_config(engine_->image));
    EXPECT_TRUE(id.ok()) << id.error().message();
    if (!id.ok()) return {};
    containers_.push_back(*id);
    auto st = client_->container_start(*id);
    EXPECT_TRUE(st.ok()) << st.error().message();
    return *id;
  }

  const TestEngine* engine_ = nullptr;
  std::unique_ptr<EngineClient> client_;
  std::vector<std::string> containers_;
};

TEST_P(EngineClientTest, VersionIsNegotiated) {
  auto v = client_->version();
  ASSERT_TRUE(v.ok()) << v.error().message();
  const std::string server = (*v)["ApiVersion"].get<std::string>();
  // Both engines here speak 1.41, under sandcastle's 1.47.
  EXPECT_EQ(server, "1.41");
  EXPECT_EQ(client_->api_version(), "1.41");
  EXPECT_TRUE(client_->ping().ok());
  auto images = client_->image_list();
  ASSERT_TRUE(images.ok()) << images.error().message();
  ASSERT_TRUE(images->is_array());
  auto img = client_->image_inspect(engine_->image);
  ASSERT_TRUE(img.ok()) << img.error().message();
  EXPECT_EQ((*img)["Id"], engine_->image);
}

TEST_P(EngineClientTest, LockedDownContainerExecSeparatesStreamsAndExitCode) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  auto info = client_->container_inspect(id);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_TRUE((*info)["State"]["Running"].get<bool>());
  EXPECT_TRUE((*info)["HostConfig"]["ReadonlyRootfs"].get<bool>());
  EXPECT_EQ((*info)["HostConfig"]["NetworkMode"], "none");

  const std::string input = "line one\nline two\n";
  auto src = string_source(input);
  Output o;
  auto run = client_->exec_run(id, {"sh", "-c", "cat; echo err >&2; exit 3"}, &src, o.sink());
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_EQ(o.out, input);
  EXPECT_EQ(o.err, "err\n");

  // What the config promised, seen from inside.
  Output p;
  auto r2 = client_->exec_run(
      id,
      {"sh", "-c",
       "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /sys/class/net; "
       "echo x > /etc/probe 2>/dev/null || echo ro; echo y > /tmp/probe && echo tmp-ok"},
      nullptr, p.sink());
  ASSERT_TRUE(r2.ok()) << r2.error().message();
  EXPECT_EQ(r2->exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("1000\n"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("CapEff:\t0000000000000000"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("NoNewPrivs:\t1"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("\nro\n"), std::string::npos) << p.out;  // read-only root
  EXPECT_NE(p.out.find("tmp-ok"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("eth0"), std::string::npos) << p.out;  // only lo
}

TEST_P(EngineClientTest, LargeStdinAndOutputFlowBothWays) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  // 4 MiB through cat: more than any socket buffer, so reading and writing
  // must overlap.
  std::string input(4 << 20, '\0');
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>('a' + i % 26);
  auto src = string_source(input);
  Output o;
  auto run = client_->exec_run(id, {"cat"}, &src, o.sink());
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->exit_code, 0);
  EXPECT_EQ(o.out.size(), input.size());
  EXPECT_TRUE(o.out == input);
}

TEST_P(EngineClientTest, ArchivePutThenGetGivesTheFileBack) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  const std::string content = "hello from the archive\n" + std::string(70000, 'z');
  const std::string tar = tar_of_file("note.txt", content);
  auto src = string_source(tar);
  auto put = client_->archive_put(id, "/workspace", src);
  ASSERT_TRUE(put.ok()) << put.error().message();

  std::string got;
  auto get = client_->archive_get(
      id, "/workspace/note.txt",
      [&](std::string_view b) {
        got.append(b);
        return ok_status();
      },
      1 << 20);
  ASSERT_TRUE(get.ok()) << get.error().message();
  std::string name;
  bool ok = false;
  EXPECT_EQ(first_file_in_tar(got, &name, &ok), content);
  EXPECT_TRUE(ok);
  EXPECT_EQ(name, "note.txt");

  // The process in the container sees the same file.
  Output o;
  auto run = client_->exec_run(id, {"head", "-c", "22", "/workspace/note.txt"}, nullptr, o.sink());
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(o.out, "hello from the archive");

  // Past the caller's byte limit: refused, not buffered.
  auto small = client_->archive_get(
      id, "/workspace/note.txt", [](std::string_view) { return ok_status(); }, 4096);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code, ErrorCode::kResourceExhausted);

  // A path that is not there: the engine's 404.
  auto missing = client_->archive_get(
      id, "/workspace/nope", [](std::string_view) { return ok_status(); }, 4096);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(engine_http_status(missing.error()), 404) << missing.error().message();
}

TEST_P(EngineClientTest, StatsPauseCommit) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  auto stats = client_->container_stats(id);
  ASSERT_TRUE(stats.ok()) << stats.error().message();
  ASSERT_TRUE(stats->is_object());
  ASSERT_TRUE(stats->contains("memory_stats")) << stats->dump().substr(0, 500);
  ASSERT_TRUE((*stats)["memory_stats"].contains("usage")) << stats->dump().substr(0, 500);
  EXPECT_GT((*stats)["memory_stats"]["usage"].get<std::int64_t>(), 0);
  EXPECT_TRUE((*stats)["pids_stats"].contains("current")) << stats->dump().substr(0, 500);

  ASSERT_TRUE(client_->container_pause(id).ok());
  auto paused = client_->container_inspect(id);
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE((*paused)["State"]["Paused"].get<bool>());
  // Pausing a paused container: the engine's 409... (Podman says 500).
  auto again = client_->container_pause(id);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(engine_http_status(again.error()), 0) << again.error().message();
  ASSERT_TRUE(client_->container_unpause(id).ok());

  auto image = client_->commit(id, "sandcastle-engine-test-commit", "t1", json::object());
  ASSERT_TRUE(image.ok()) << image.error().message();
  auto img = client_->image_inspect(*image);
  ASSERT_TRUE(img.ok()) << img.error().message();
  EXPECT_TRUE(client_->image_remove(*image, true).ok());
}

TEST_P(EngineClientTest, KillAndRemoveLeaveNothing) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(client_->container_kill(id, "KILL").ok());
  ASSERT_TRUE(client_->container_remove(id, true, true).ok());
  containers_.clear();
  auto list = client_->container_list(true);
  ASSERT_TRUE(list.ok()) << list.error().message();
  EXPECT_TRUE(list->is_array() && list->empty()) << list->dump();
  auto volumes = client_->call_json("GET", "/volumes", nullptr);
  ASSERT_TRUE(volumes.ok()) << volumes.error().message();
  const auto& v = (*volumes)["Volumes"];
  EXPECT_TRUE(v.is_null() || v.empty()) << volumes->dump();
  auto gone = client_->container_inspect(id);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(engine_http_status(gone.error()), 404);
}

TEST_P(EngineClientTest, MissingImageGivesTheEnginesMessage) {
  auto id = client_->container_create(locked_down_config("sandcastle-no-such-image:nope"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(engine_http_status(id.error()), 404) << id.error().message();
  EXPECT_NE(lower(id.error().message()).find("no such image"), std::string::npos)
      << id.error().message();
  EXPECT_NE(id.error().message().find(engine_->url), std::string::npos) << id.error().message();

  auto img = client_->image_inspect("sandcastle-no-such-image:nope");
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(engine_http_status(img.error()), 404) << img.error().message();

  // Ids that would leave the URL path never reach the engine.
  auto bad = client_->container_inspect("../images/json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST_P(EngineClientTest, TimeoutAndCancelEndAnExec) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  Output o;
  CallOptions quick;
  quick.timeout = 500ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto run = client_->exec_run(id, {"sleep", "30"}, nullptr, o.sink(), quick);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().code, ErrorCode::kTimeout) << run.error().message();
  EXPECT_LT(took, 5s);

  CancelToken token;
  CallOptions cancellable;
  cancellable.cancel = &token;
  std::atomic<bool> started_output{false};
  std::thread canceller([&] {
    while (!started_output) std::this_thread::sleep_for(1ms);
    token.cancel();
  });
  auto run2 = client_->exec_run(
      id, {"sh", "-c", "echo go; sleep 30"}, nullptr,
      [&](StreamId, std::string_view) {
        started_output = true;
        return ok_status();
      },
      cancellable);
  canceller.join();
  ASSERT_FALSE(run2.ok());
  EXPECT_EQ(run2.error().code, ErrorCode::kCancelled) << run2.error().message();

  // A token cancelled before the call: the call does not start.
  auto v = client_->version(cancellable);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kCancelled);
}

TEST_P(EngineClientTest, ExecSessionKeepsTheStreamOpen) {
  const std::string id = started();
  ASSERT_FALSE(id.empty());
  auto ex = client_->exec_create(
      id, {{"Cmd", {"sh", "-c", "while read l; do echo \"got $l\"; done; echo bye >&2; exit 4"}},
           {"AttachStdin", true},
           {"AttachStdout", true},
           {"AttachStderr", true}});
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  auto session = client_->exec_attach(*ex);
  ASSERT_TRUE(session.ok()) << session.error().message();
  ExecSession& s = **session;
  Output o;
  // Nothing to read yet: kTimeout, and the session goes on.
  auto idle = s.read(o.sink(), 200ms);
  ASSERT_FALSE(idle.ok());
  EXPECT_EQ(idle.error().code, ErrorCode::kTimeout) << idle.error().message();

  std::vector<double> rtt;
  for (int i = 0; i < 30; ++i) {
    const std::string want = "got line " + std::to_string(i) + "\n";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(s.write("line " + std::to_string(i) + "\n").ok());
    while (o.out.size() < want.size() ||
           o.out.compare(o.out.size() - want.size(), want.size(), want) != 0) {
      auto r = s.read(o.sink(), 10s);
      ASSERT_TRUE(r.ok()) << r.error().message();
      ASSERT_TRUE(*r) << "the stream ended early: " << o.out;
    }
    rtt.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  ASSERT_TRUE(s.close_stdin().ok());
  for (;;) {
    auto r = s.read(o.sink(), 10s);
    ASSERT_TRUE(r.ok()) << r.error().message();
    if (!*r) break;
  }
  EXPECT_EQ(o.err, "bye\n");
  EXPECT_EQ(o.out.substr(0, 11), "got line 0\n");
  // The exit code, once the engine has recorded it.
  int code = -1;
  for (int i = 0; i < 500 && code < 0; ++i) {
    auto j = client_->exec_inspect(*ex);
    ASSERT_TRUE(j.ok()) << j.error().message();
    if (!(*j)["Running"].get<bool>())
      code = (*j)["ExitCode"].get<int>();
    else
      std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(code, 4);
  std::sort(rtt.begin(), rtt.end());
  std::printf("%s: exec session round trip (write a line, read the answer): median %.2f ms\n",
              GetParam().c_str(), rtt[rtt.size() / 2]);
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineClientTest, ::testing::Values("podman", "docker"),
                         [](const auto& param_info) { return param_info.param; });

TEST(EngineClientNoEngine, SocketWithNothingBehindIt) {
  EngineOptions o;
  o.url = "unix:///tmp/sandcastle-no-engine-here.sock";
  auto c = EngineClient::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(c.error().message().find("unix:///tmp/sandcastle-no-engine-here.sock"),
            std::string::npos)
      << c.error().message();
  EXPECT_NE(c.error().message().find("is the engine running?"), std::string::npos)
      << c.error().message();

  EngineOptions t;
  t.url = "tcp://127.0.0.1:1";
  auto c2 = EngineClient::connect(t);
  ASSERT_FALSE(c2.ok());
  EXPECT_EQ(c2.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(c2.error().message().find("tcp://127.0.0.1:1"), std::string::npos);
}

TEST(EngineClientTls, DockerOverTlsWithClientCertificates) {
  std::string why;
  const TestEngine* e = test_engine("docker", &why);
  if (!e) GTEST_SKIP() << "docker cannot run here: " << why;
  EngineOptions o;
  o.url = e->tls_url;
  o.tls_dir = e->tls_dir;
  auto c = EngineClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ((*c)->api_version(), "1.41");

  // exec with stdin over TLS: stdin's EOF reaches the process.
  auto id = (*c)->container_create(locked_down_config(e->image));
  ASSERT_TRUE(id.ok()) << id.error().message();
  ASSERT_TRUE((*c)->container_start(*id).ok());
  const std::string input = "through tls\n";
  auto src = string_source(input);
  Output out;
  auto run = (*c)->exec_run(*id, {"sh", "-c", "cat; exit 5"}, &src, out.sink());
  (void)(*c)->container_remove(*id, true, true);
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->exit_code, 5);
  EXPECT_EQ(out.out, input);

  // Without a client certificate the TLS port refuses us.
  EngineOptions plain;
  plain.url = e->tls_url;
  auto p = EngineClient::connect(plain);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(engine_http_status(p.error()), 400) << p.error().message();

  // A TLS directory without the files: named.
  EngineOptions missing;
  missing.url = e->tls_url;
  missing.tls_dir = e->root;
  auto m = EngineClient::connect(missing);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message().find("cert.pem"), std::string::npos) << m.error().message();
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing

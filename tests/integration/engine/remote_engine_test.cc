// The engine backend on an engine it must treat as on another host: the
// fixture's dockerd over tcp:// with TLS client certificates. The agent's
// stream is a TLS exec stream pumped to a socketpair (ExecSession::
// take_stream), and nothing of this host is bound into the containers: the
// agent and the shared files are put into a volume through the archive API.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "backend_fixture.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kBusybox = "sandcastle-engine-test:busybox";

class RemoteEngineTest : public BackendTest<EngineBackend> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "dockerd needs root";
    std::string why;
    engine_ = test_engine("docker", &why);
    if (!engine_) GTEST_SKIP() << "docker cannot run here: " << why;
    ASSERT_FALSE(engine_->tls_url.empty());
    spec_ = test_spec(kBusybox);
  }
  EngineBackendOptions options() const {
    return backend_options(engine_->tls_url, engine_->tls_dir);
  }
  void start() {
    use(EngineBackend::create(options()));
    ASSERT_TRUE(backend_);
    ASSERT_TRUE(backend_->client().endpoint().tls);
  }
  // Whether `container_id` has a bind mount of this host's (there must be
  // none): its mounts as the engine reports them.
  std::vector<std::string> mount_types(const std::string& container_id) {
    auto j = client_for(*engine_)->container_inspect(container_id);
    EXPECT_TRUE(j.ok());
    std::vector<std::string> out;
    if (!j.ok()) return out;
    for (const auto& m : (*j)["Mounts"])
      out.push_back(m.value("Type", "") + ":" + m.value("Destination", ""));
    return out;
  }
  const TestEngine* engine_ = nullptr;
};

// Everything `fd` gives until its EOF (10 s at most per wait); false on a
// timeout or an error.
bool read_to_eof(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<std::size_t>(n));
  }
}

// An attached exec over TLS taken as a descriptor: `argv` running in a
// fresh busybox container of `client`'s.
struct TakenExec {
  std::string container;
  std::string exec_id;
  ExecSession::RawStream raw;
};
TakenExec take_exec(EngineClient& client, const TestEngine& engine,
                    const std::vector<std::string>& argv) {
  TakenExec t;
  auto id = client.container_create(locked_down_config(engine.image));
  EXPECT_TRUE(id.ok()) << id.error().message();
  if (!id.ok()) return t;
  t.container = *id;
  EXPECT_TRUE(client.container_start(t.container).ok());
  auto ex = client.exec_create(
      t.container,
      {{"Cmd", argv}, {"AttachStdin", true}, {"AttachStdout", true}, {"AttachStderr", true}});
  EXPECT_TRUE(ex.ok());
  if (!ex.ok()) return t;
  t.exec_id = *ex;
  auto session = client.exec_attach(*ex);
  EXPECT_TRUE(session.ok()) << session.error().message();
  if (!session.ok()) return t;
  auto raw = (*session)->take_stream();
  EXPECT_TRUE(raw.ok()) << raw.error().message();
  if (raw.ok()) t.raw = std::move(*raw);
  return t;
}

TEST_F(RemoteEngineTest, TlsExecStreamIsPumpedToADescriptorBothWays) {
  EngineOptions eo;
  eo.url = engine_->tls_url;
  eo.tls_dir = engine_->tls_dir;
  auto client = EngineClient::connect(eo);
  ASSERT_TRUE(client.ok()) << client.error().message();
  auto t = take_exec(**client, *engine_, {"sh", "-c", "cat; echo done >&2; exit 5"});
  ASSERT_TRUE(t.raw.fd);
  std::string in(1024 * 1024, 'q');
  std::thread writer([&] {
    std::string_view rest = in;
    while (!rest.empty()) {
      const ssize_t n = ::send(t.raw.fd.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    // Our EOF becomes cat's: the pump half-closes the TLS connection.
    ::shutdown(t.raw.fd.get(), SHUT_WR);
  });
  std::string framed = t.raw.buffered;
  const bool eof = read_to_eof(t.raw.fd.get(), &framed);
  writer.join();
  ASSERT_TRUE(eof) << "the stream did not end";
  std::string out, err;
  StreamDemuxer demux([&](StreamId id, std::string_view b) -> Status {
    (id == StreamId::kStderr ? err : out).append(b);
    return ok_status();
  });
  ASSERT_TRUE(demux.feed(framed).ok());
  EXPECT_TRUE(out == in) << out.size();
  EXPECT_EQ(err, "done\n");
  // The process ended of our EOF, with its own exit code.
  json info;
  for (int i = 0; i < 200; ++i) {
    auto j = (*client)->exec_inspect(t.exec_id);
    ASSERT_TRUE(j.ok());
    info = *j;
    if (!info.value("Running", true)) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(info.value("ExitCode", -1), 5);
  (void)(*client)->container_remove(t.container, true, true);
}

TEST_F(RemoteEngineTest, ClosingTheClientEndsItsPumps) {
  EngineOptions eo;
  eo.url = engine_->tls_url;
  eo.tls_dir = engine_->tls_dir;
  auto client = EngineClient::connect(eo);
  ASSERT_TRUE(client.ok()) << client.error().message();
  auto t = take_exec(**client, *engine_, {"cat"});
  ASSERT_TRUE(t.raw.fd);
  client->reset();  // stops and joins the pump: our end sees EOF
  std::string rest;
  EXPECT_TRUE(read_to_eof(t.raw.fd.get(), &rest));
  (void)client_for(*engine_)->container_remove(t.container, true, true);
}

TEST_F(RemoteEngineTest, RunsCommandsOverTheTlsAgentStream) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto sb = make();
  ASSERT_TRUE(sb);
  auto r = run(*sb, {"sh", "-c", "echo hello; id -u; echo err >&2; exit 3"});
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, "hello\n1000\n");
  EXPECT_EQ(r.stderr_data, "err\n");
  // Nothing of this host is mounted: /opt/sandcastle is the container's
  // own volume, and the rest are the tmpfs mounts.
  auto* es = dynamic_cast<EngineSandbox*>(sb.get());
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(mount_types(es->container_id()), std::vector<std::string>{"volume:/opt/sandcastle"});
}

TEST_F(RemoteEngineTest, MovesMegabytesBothWaysThroughThePump) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto sb = make();
  ASSERT_TRUE(sb);
  std::string big(3 * 1024 * 1024 + 7, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
  auto r = run(*sb, {"cat"}, big);
  EXPECT_EQ(r.stdout_total, big.size());
  EXPECT_TRUE(r.stdout_data == big);
  ASSERT_TRUE(sb->write_file("dir/big.bin", big, 0644, true).ok());
  auto back = sb->read_file("/workspace/dir/big.bin");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(back->data == big);
  auto owner = run(*sb, {"ls", "-ln", "/workspace/dir/big.bin"});
  EXPECT_NE(owner.stdout_data.find(" 1000 "), std::string::npos) << owner.stdout_data;
}

TEST_F(RemoteEngineTest, SandboxesEachHaveTheirOwnLink) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto a = make();
  auto b = make();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->write_file("who", "a").ok());
  ASSERT_TRUE(b->write_file("who", "b").ok());
  EXPECT_EQ(run(*a, {"cat", "who"}).stdout_data, "a");
  EXPECT_EQ(run(*b, {"cat", "who"}).stdout_data, "b");
  ASSERT_TRUE(a->destroy().ok());
  EXPECT_FALSE(a->alive());
  // The other's pumped stream is untouched by the first's end.
  EXPECT_EQ(run(*b, {"echo", "still"}).stdout_data, "still\n");
}

TEST_F(RemoteEngineTest, PublishedFilesGoIntoEachContainersVolume) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto first = make();
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->has_shared("note.txt"));
  ASSERT_TRUE(first->publish_shared("note.txt", "shared bytes\n").ok());
  EXPECT_TRUE(first->has_shared("note.txt"));
  EXPECT_EQ(run(*first, {"cat", "/opt/sandcastle/note.txt"}).stdout_data, "shared bytes\n");
  // Root's, read-only to the sandbox user; the agent too.
  auto ls = run(*first, {"ls", "-ln", "/opt/sandcastle/note.txt", "/opt/sandcastle/.agent"});
  EXPECT_NE(ls.stdout_data.find("-r--r--r--    1 0        0"), std::string::npos) << ls.stdout_data;
  EXPECT_NE(ls.stdout_data.find("-rwxr-xr-x    1 0        0"), std::string::npos) << ls.stdout_data;
  auto write = run(*first, {"sh", "-c", "echo x > /opt/sandcastle/mine"});
  EXPECT_NE(write.exit_code, 0);
  EXPECT_NE(write.stderr_data.find("Permission denied"), std::string::npos) << write.stderr_data;
  // A sandbox started later has it from its start.
  auto second = make();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->has_shared("note.txt"));
  EXPECT_EQ(run(*second, {"cat", "/opt/sandcastle/note.txt"}).stdout_data, "shared bytes\n");
  // Names are checked as on the native backend.
  auto bad = first->publish_shared(".agent", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(run(*first, {"sh", "-c", "head -c 4 /opt/sandcastle/.agent | tail -c 3"}).stdout_data,
            "ELF");
}

TEST_F(RemoteEngineTest, HostImageIsRefused) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto sb = backend_->create(test_spec("host"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("image \"host\" runs this host's /usr"), std::string::npos)
      << sb.error().message();
  EXPECT_NE(sb.error().message().find(engine_->tls_url), std::string::npos);
}

TEST_F(RemoteEngineTest, AnImageSavedFromHostIsRefused) {
  // An image labelled as save_sandbox labels one made from "host".
  auto local = client_for(*engine_);
  auto id = local->container_create(locked_down_config(engine_->image));
  ASSERT_TRUE(id.ok()) << id.error().message();
  auto img = local->commit(*id, "sandcastle-engine-test/saved-host", "1",
                           {{"Labels", {{kLabelHostRoot, "1"}}}});
  (void)local->container_remove(*id, true, true);
  ASSERT_TRUE(img.ok()) << img.error().message();
  ASSERT_NO_FATAL_FAILURE(start());
  auto sb = backend_->create(test_spec("sandcastle-engine-test/saved-host:1"));
  (void)local->image_remove(*img, true);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("was saved from the \"host\" image"), std::string::npos)
      << sb.error().message();
}

TEST_F(RemoteEngineTest, MissingTlsFilesAreAClearStartError) {
  char tmpl[] = "/tmp/sandcastle-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::copy_file(engine_->tls_dir + "/ca.pem", dir + "/ca.pem");
  std::filesystem::copy_file(engine_->tls_dir + "/cert.pem", dir + "/cert.pem");
  auto o = options();
  o.engine.tls_dir = dir;
  auto b = EngineBackend::create(o);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(b.error().message(), "engine " + engine_->tls_url + ": TLS directory " + dir +
                                     " has no key.pem (it needs ca.pem, cert.pem and key.pem)");
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing

// Several engines as one backend, against two real engines at once (Podman's
// compat service and dockerd, from the fixture): placement by free capacity
// and by image, an engine that stops answering (its process stopped) and
// comes back. Nothing is mocked.
#include "sandbox/engine/multi_engine.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "backend_fixture.h"
#include "service/sandbox_manager.h"
#include "tools/tool_env.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using namespace std::chrono_literals;

std::string echo(Sandbox& sb, const std::string& text) {
  ExecRequest req;
  req.argv = {"echo", text};
  auto r = sb.exec(req);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? r->stdout_data : std::string();
}

class MultiEngineTest : public BackendTest<MultiEngineBackend> {
 protected:
  void SetUp() override {
    std::string why;
    podman_ = test_engine("podman", &why);
    if (!podman_) GTEST_SKIP() << "podman cannot run here: " << why;
    docker_ = test_engine("docker", &why);
    if (!docker_) GTEST_SKIP() << "dockerd cannot run here: " << why;
  }
  void start(std::size_t capacity) {
    MultiEngineOptions o;
    o.engines = {{"podman", podman_->url, "", capacity}, {"docker", docker_->url, "", capacity}};
    o.agent_path = find_agent();
    o.health_interval = 200ms;
    use(MultiEngineBackend::create(o));
    ASSERT_TRUE(backend_);
    ASSERT_TRUE(backend_->wait_for("podman", true, 30s));
    ASSERT_TRUE(backend_->wait_for("docker", true, 30s));
  }
  const TestEngine* podman_ = nullptr;
  const TestEngine* docker_ = nullptr;
};

TEST_F(MultiEngineTest, SpreadsByFreeCapacityAndNamesEveryFullEngine) {
  ASSERT_NO_FATAL_FAILURE(start(1));
  auto a = make();
  auto b = make();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->location(), b->location());
  EXPECT_TRUE(a->location() == "podman" || a->location() == "docker") << a->location();
  EXPECT_EQ(echo(*a, "a"), "a\n");
  EXPECT_EQ(echo(*b, "b"), "b\n");

  auto c = backend_->create(test_spec());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(c.error().context.find("podman: full (1 of 1 sandboxes)"), std::string::npos)
      << c.error().context;
  EXPECT_NE(c.error().context.find("docker: full (1 of 1 sandboxes)"), std::string::npos)
      << c.error().context;

  // A closed sandbox frees its engine's place.
  const std::string freed = b->location();
  ASSERT_TRUE(b->destroy().ok());
  auto d = make();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->location(), freed);
}

TEST_F(MultiEngineTest, AnImageOnlyOneEngineHasGoesThere) {
  // The fixture's busybox rootfs, under a tag only dockerd gets.
  const std::string tag = "sandcastle-multi-test:docker-only";
  {
    auto client = client_for(*docker_);
    ASSERT_TRUE(client);
    std::ifstream in(docker_->root + "/busybox.tar", std::ios::binary);
    ASSERT_TRUE(in.good());
    ByteSource src = [&in](char* buf, std::size_t cap) -> Result<std::size_t> {
      in.read(buf, static_cast<std::streamsize>(cap));
      return static_cast<std::size_t>(in.gcount());
    };
    auto id = client->image_import(src, tag);
    ASSERT_TRUE(id.ok()) << id.error().message();
  }
  ASSERT_NO_FATAL_FAILURE(start(0));
  // Listed once, from the engine that has it.
  auto images = backend_->list_images();
  ASSERT_TRUE(images.ok()) << images.error().message();
  int listed = 0;
  for (const auto& i : *images) listed += i.name == tag ? 1 : 0;
  EXPECT_EQ(listed, 1);
  // podman is emptier after this one, yet the next goes where the image is.
  auto first = make();
  ASSERT_TRUE(first);
  for (int i = 0; i < 2; ++i) {
    auto sb = make(test_spec(tag));
    ASSERT_TRUE(sb);
    EXPECT_EQ(sb->location(), "docker");
    EXPECT_EQ(echo(*sb, "busybox"), "busybox\n");
  }
  auto none = backend_->create(test_spec("sandcastle-multi-test:nowhere"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_NE(none.error().context.find("podman: has no image 'sandcastle-multi-test:nowhere'"),
            std::string::npos)
      << none.error().context;
  EXPECT_NE(none.error().context.find("docker: has no image"), std::string::npos)
      << none.error().context;
  (void)client_for(*docker_)->image_remove(tag, true);
}

TEST_F(MultiEngineTest, AStoppedEngineLosesItsSandboxesAndRejoinsWhenItAnswers) {
  ASSERT_NO_FATAL_FAILURE(start(2));
  auto on_podman = make();
  auto on_docker = make();
  ASSERT_TRUE(on_podman && on_docker);
  ASSERT_EQ(on_podman->location(), "podman");  // a tie goes to the first
  ASSERT_EQ(on_docker->location(), "docker");  // then the freer one

  ASSERT_TRUE(stop_test_engine("podman"));
  ASSERT_TRUE(backend_->wait_for("podman", false, 10s));
  EXPECT_FALSE(on_podman->alive());
  // What the manager tells the sandbox's caller once it buries it.
  EXPECT_NE(on_podman->lost_reason().find("engine podman does not answer"), std::string::npos)
      << on_podman->lost_reason();
  EXPECT_EQ(on_docker->lost_reason(), "");
  ExecRequest req;
  req.argv = {"true"};
  auto r = on_podman->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().context.find("engine podman does not answer"), std::string::npos)
      << r.error().context;
  auto f = on_podman->read_file("x");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::kUnavailable);
  // The other engine's sandbox goes on; creates go there.
  EXPECT_TRUE(on_docker->alive());
  EXPECT_EQ(echo(*on_docker, "still"), "still\n");
  auto next = make();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->location(), "docker");
  auto refused = backend_->create(test_spec());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().context.find("podman: does not answer"), std::string::npos)
      << refused.error().context;
  EXPECT_NE(refused.error().context.find("docker: full (2 of 2 sandboxes)"), std::string::npos)
      << refused.error().context;

  std::string why;
  ASSERT_TRUE(restart_test_engine("podman", &why)) << why;
  ASSERT_TRUE(backend_->wait_for("podman", true, 30s));
  // Its lost sandbox's container was removed before it took creates again;
  // the lost sandbox stays lost.
  auto client = client_for(*podman_);
  ASSERT_TRUE(client);
  auto list = client->container_list(true);
  ASSERT_TRUE(list.ok()) << list.error().message();
  for (const auto& c : *list)
    EXPECT_NE(c.value("Labels", nlohmann::json::object()).value("sandcastle.sandbox", ""),
              on_podman->id())
        << c.dump();
  EXPECT_FALSE(on_podman->alive());
  auto back = make();
  ASSERT_TRUE(back);
  EXPECT_EQ(back->location(), "podman");
  EXPECT_EQ(echo(*back, "back"), "back\n");
  EXPECT_TRUE(on_podman->destroy().ok());
}

TEST_F(MultiEngineTest, TheManagerListsEachSandboxWithItsEngine) {
  ASSERT_NO_FATAL_FAILURE(start(1));
  tools::ManagerOptions mo;
  mo.max_sandboxes = 4;
  tools::SandboxManager m(*backend_, mo);
  tools::CreateRequest req;
  req.language = "python";
  std::set<std::string> engines;
  for (int i = 0; i < 2; ++i) {
    auto e = m.create(req);
    ASSERT_TRUE(e.ok()) << e.error().message();
    engines.insert(tools::sandbox_json(**e).value("engine", ""));
  }
  EXPECT_EQ(engines, (std::set<std::string>{"podman", "docker"}));
}

TEST(MultiEngineDown, StartsWithNoEngineAnsweringAndSaysWhyPerEngine) {
  MultiEngineOptions o;
  o.engines = {{"one", "unix:///nonexistent/one.sock", "", 0},
               {"two", "unix:///nonexistent/two.sock", "", 0}};
  o.agent_path = find_agent();
  auto b = MultiEngineBackend::create(o);
  ASSERT_TRUE(b.ok()) << b.error().message();
  auto sb = (*b)->create(test_spec());
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(sb.error().context.find("one: does not answer"), std::string::npos)
      << sb.error().context;
  EXPECT_NE(sb.error().context.find("/nonexistent/two.sock"), std::string::npos)
      << sb.error().context;
  (*b)->shutdown();
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing

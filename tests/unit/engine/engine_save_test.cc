// The Dockerfile save_sandbox builds on an engine (engine_save.h): the
// sandbox's image goes into a FROM line, so it must stay one word on it.
#include "sandbox/engine/engine_save.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sandbox/engine/container_config.h"

namespace sandcastle::sandbox::engine {
namespace {

TEST(EngineSaveDockerfile, BuildsFromTheImageWithTheWorkspaceSeed) {
  auto d = save_dockerfile("python:3.12-slim", "operator");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(*d, std::string("FROM python:3.12-slim\nADD workspace.tar ") + kWorkspaceSeedDir +
                    "/\nLABEL " + kLabelWorkspaceSeed + "=" + kWorkspaceSeedDir + "\nLABEL " +
                    kLabelOwner + "=operator\n");
}

TEST(EngineSaveDockerfile, HostImageBuildsFromTheBaseAndKeepsTheHostRootLabel) {
  auto d = save_dockerfile("host", "operator");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->rfind(std::string("FROM ") + kHostBaseImage + "\n", 0), 0u) << *d;
  EXPECT_NE(d->find(std::string("LABEL ") + kLabelHostRoot + "=1\n"), std::string::npos) << *d;
}

// Without the refusal, "alpine\nRUN ..." would add an instruction of the
// sandbox's choosing to a build the engine runs.
TEST(EngineSaveDockerfile, RefusesAnImageThatWouldAddAnInstruction) {
  for (const std::string& bad : std::vector<std::string>{
           "alpine\nRUN touch /x", "alpine\rRUN touch /x", "alpine\tAS x", "alpine AS x",
           std::string("alpine\0x", 8), "alpine\x1b[0m", "alpine\x7f", ""}) {
    auto d = save_dockerfile(bad, "operator");
    ASSERT_FALSE(d.ok()) << "accepted: " << *d;
    EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  }
}

// The owner label names the kind of owner, never the owner itself.
TEST(EngineSaveDockerfile, OwnerLabelIsTheOperatorOrAHashOfTheOwner) {
  EXPECT_EQ(save_owner_label(""), "operator");
  const std::string key = save_owner_label("key:alice");
  EXPECT_EQ(key.rfind("key:", 0), 0u) << key;
  EXPECT_EQ(key.size(), 4u + 32u);
  EXPECT_EQ(key.find("alice"), std::string::npos);
  EXPECT_NE(save_owner_label("key:bob"), key);
  EXPECT_EQ(save_owner_label("session:s1").rfind("session:", 0), 0u);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine

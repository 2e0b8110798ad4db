// `image pull` end to end through the store: pull, import, and the store
// unchanged when the pull fails. Compiled where the image store is in the
// tree (it arrives with image_cli.h); skipped otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "images/pull_cli.h"
#include "pull_harness.h"

#if __has_include("images/image_cli.h")
#define SANDCASTLE_HAVE_IMAGE_STORE 1
#endif

namespace sandcastle::images {
namespace {

#ifndef SANDCASTLE_HAVE_IMAGE_STORE
TEST(PullImportTest, NeedsTheImageStore) {
  GTEST_SKIP() << "the image store is not in this tree";
}
#else

using testing::TempDir;

class PullImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = &testing::pull_env();
    if (!env_->error.empty()) {
      if (env_->error.rfind("missing tools", 0) == 0) GTEST_SKIP() << env_->error;
      FAIL() << env_->error;
    }
    auto s = ImageStore::open(state_.path);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
  }

  int pull(PullArgs args, const std::string& stdin_text = {}) {
    args.state_dir = state_.path;
    std::istringstream in(stdin_text);
    out_.str("");
    err_.str("");
    return run_image_pull(args, *store_, in, out_, err_);
  }
  bool no_temporaries() const {
    return !std::filesystem::exists(state_.path + "/tmp") ||
           std::filesystem::is_empty(state_.path + "/tmp");
  }

  const testing::PullEnv* env_ = nullptr;
  TempDir state_;
  std::unique_ptr<ImageStore> store_;
  std::ostringstream out_, err_;
};

TEST_F(PullImportTest, PullsWithPasswordFromStdinAndImports) {
  PullArgs a;
  a.reference = "127.0.0.1:" + std::to_string(env_->auth_port) + "/private/img:v1";
  a.username = "alice";
  a.password_stdin = true;
  ASSERT_EQ(pull(a, "secret\n"), 0) << err_.str();
  auto rec = store_->find(a.reference);
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  EXPECT_EQ(rec->name, a.reference);
  EXPECT_EQ(rec->source, "pull:" + a.reference);
  EXPECT_EQ(rec->layers.size(), 1u);
  EXPECT_EQ(rec->config.cmd, std::vector<std::string>{"/bin/busybox"});
  EXPECT_NE(out_.str().find("pulled " + a.reference + " (" + env_->amd_manifest +
                            ", linux/amd64) as " + a.reference),
            std::string::npos)
      << out_.str();
  auto dirs = store_->layer_dirs(*rec);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(testing::read_file(dirs->at(0) + "/hello.txt"), "hello amd64\n");
  EXPECT_TRUE(no_temporaries());
}

TEST_F(PullImportTest, ThroughAnIndexUnderTheNameGiven) {
  PullArgs a;
  a.reference = "127.0.0.1:" + std::to_string(env_->port) + "/test/multi:v1";
  a.name = "multi-amd";
  a.json = true;
  ASSERT_EQ(pull(a), 0) << err_.str();
  auto rec = store_->find("multi-amd");
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  auto dirs = store_->layer_dirs(*rec);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(testing::read_file(dirs->back() + "/hello.txt"), "hello amd64\n");
  auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["name"], "multi-amd");
  EXPECT_EQ(j["id"], rec->id);
  EXPECT_EQ(j["manifest_digest"], env_->amd_manifest);
  EXPECT_EQ(j["index_digest"], env_->multi_index);
}

TEST_F(PullImportTest, FailedPullLeavesTheStoreUnchanged) {
  std::string why;
  auto fake = testing::Server::start(
      {"node", testing::fixtures_dir() + "/fake_registry.mjs", env_->layout, "amd", "corrupt"},
      "listening ", std::chrono::seconds(20), &why);
  ASSERT_TRUE(fake) << why;
  PullArgs a;
  a.reference = "127.0.0.1:" + std::to_string(fake->listening_port()) + "/test/img:v1";
  EXPECT_EQ(pull(a), 1);
  EXPECT_NE(err_.str().find("digest mismatch: blob sha256:"), std::string::npos) << err_.str();
  EXPECT_TRUE(store_->list().empty());
  EXPECT_TRUE(no_temporaries());
}

TEST_F(PullImportTest, LayoutsOfKilledPullsAreRemoved) {
  // A pull killed midway leaves pull-<pid>-*; the next pull removes it once
  // that process is gone, and leaves a live process's alone.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = state_.path + "/tmp/pull-" + std::to_string(dead) + "-abcdef";
  const std::string live = state_.path + "/tmp/pull-" + std::to_string(::getpid()) + "-ghijkl";
  std::filesystem::create_directories(stale + "/layout/blobs");
  std::filesystem::create_directories(live);
  PullArgs a;
  a.reference = "127.0.0.1:" + std::to_string(env_->port) + "/test/img:v1";
  ASSERT_EQ(pull(a), 0) << err_.str();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
}

TEST_F(PullImportTest, UsageErrorsExitTwo) {
  PullArgs a;
  a.reference = "127.0.0.1:" + std::to_string(env_->auth_port) + "/private/img:v1";
  a.password_stdin = true;
  EXPECT_EQ(pull(a, "secret\n"), 2);
  EXPECT_NE(err_.str().find("--password-stdin needs --username"), std::string::npos) << err_.str();
  a.reference = "Not/A/Ref";
  a.password_stdin = false;
  EXPECT_EQ(pull(a), 2);
  EXPECT_NE(err_.str().find("bad repository name"), std::string::npos) << err_.str();
  a.reference = "127.0.0.1:" + std::to_string(env_->port) + "/test/img:v1";
  a.platform = "amd64";
  EXPECT_EQ(pull(a), 2);
  EXPECT_NE(err_.str().find("bad platform 'amd64'"), std::string::npos) << err_.str();
  EXPECT_TRUE(store_->list().empty());
}

#endif  // SANDCASTLE_HAVE_IMAGE_STORE

}  // namespace
}  // namespace sandcastle::images

// image pull from registries that lie or misbehave (pull_fixtures/fake_registry.mjs):
// every refusal is asserted by its error, and nothing is left that an import
// could take (no index.json, no blob under the wrong digest).
#include <gtest/gtest.h>

#include <filesystem>

#include "images/image_pull.h"
#include "pull_harness.h"

namespace sandcastle::images {
namespace {

using testing::TempDir;

class PullHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& env = testing::pull_env();
    if (!env.error.empty()) {
      if (env.error.rfind("missing tools", 0) == 0) GTEST_SKIP() << env.error;
      FAIL() << env.error;
    }
    env_layout_ = env.layout;
  }

  // A fake registry in `mode`, serving the layout's amd64 image.
  int serve(const std::string& mode) {
    std::string why;
    server_ = testing::Server::start(
        {"node", testing::fixtures_dir() + "/fake_registry.mjs", env_layout_, "amd", mode},
        "listening ", std::chrono::seconds(20), &why);
    EXPECT_TRUE(server_) << why;
    return server_ ? server_->listening_port() : 0;
  }

  Result<PullResult> pull(int port, PullOptions opts = {}) {
    auto r = parse_reference("127.0.0.1:" + std::to_string(port) + "/test/img:v1");
    if (!r.ok()) return r.take_error();
    return pull_to_layout(*r, opts, layout());
  }
  std::string layout() const { return dir_.path + "/layout"; }
  bool complete() const { return std::filesystem::exists(layout() + "/index.json"); }

  std::string env_layout_;
  std::unique_ptr<testing::Server> server_;
  TempDir dir_;
};

TEST_F(PullHostileTest, CorruptLayerIsADigestMismatch) {
  const int port = serve("corrupt");
  auto r = pull(port);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context.rfind("digest mismatch: blob sha256:", 0), 0u) << r.error().context;
  EXPECT_NE(r.error().context.find(" has content with digest sha256:"), std::string::npos);
  EXPECT_FALSE(complete());
  // Neither the bad bytes under the promised name nor a leftover temporary file.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(layout() + "/blobs"))
    if (e.is_regular_file()) ++files;
  EXPECT_EQ(files, 1u);  // the config only
}

TEST_F(PullHostileTest, RedirectedBlobsDoNotCarryTheRegistrysToken) {
  // The registry wants a bearer token; its blobs live at localhost:PORT
  // (another host:port by name), which refuses any Authorization header.
  const int port = serve("redirect");
  auto r = pull(port);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(complete());
  EXPECT_EQ(r->layers.size(), 1u);
}

TEST_F(PullHostileTest, RedirectLoopStopsAfterFive) {
  const int port = serve("redirect-loop");
  auto r = pull(port);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().context.find("more than 5 redirects"), std::string::npos)
      << r.error().context;
  EXPECT_FALSE(complete());
}

TEST_F(PullHostileTest, ManifestOver4MiBIsRefused) {
  const int port = serve("bigmanifest");
  auto r = pull(port);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().context, "manifest v1 is larger than 4194304 bytes");
}

TEST_F(PullHostileTest, Schema1IsRefusedClearly) {
  const int port = serve("schema1");
  auto r = pull(port);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().context.find("Docker schema 1 manifest, which is refused"), std::string::npos)
      << r.error().context;
}

TEST_F(PullHostileTest, StalledBodyTimesOut) {
  const int port = serve("stall");
  PullOptions o;
  o.registry.read_timeout = std::chrono::milliseconds(500);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = pull(port, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_FALSE(complete());
}

}  // namespace
}  // namespace sandcastle::images

// image pull against Debian's docker-registry on loopback: by tag, by
// digest, through a multi-platform index, Docker schema 2, token auth, TLS.
// The layouts written are checked with tools of their own (umoci unpacks
// them, which verifies every blob's digest again).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "images/image_pull.h"
#include "pull_harness.h"

namespace sandcastle::images {
namespace {

using testing::PullEnv;
using testing::TempDir;

class PullRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = &testing::pull_env();
    if (!env_->error.empty()) {
      if (env_->error.rfind("missing tools", 0) == 0) GTEST_SKIP() << env_->error;
      FAIL() << env_->error;
    }
  }

  std::string reg(int port) const { return "127.0.0.1:" + std::to_string(port); }

  Result<PullResult> pull(const std::string& ref, PullOptions opts = {}) {
    auto r = parse_reference(ref);
    if (!r.ok()) return r.take_error();
    return pull_to_layout(*r, opts, layout());
  }
  std::string layout() const { return dir_.path + "/layout"; }

  // The pulled image unpacked by umoci: its /hello.txt.
  std::string unpacked_hello(const std::string& tag) {
    const std::string bundle = dir_.path + "/bundle";
    auto r = testing::run_command(
        {"umoci", "unpack", "--rootless", "--image", layout() + ":" + tag, bundle});
    EXPECT_EQ(r.status, 0) << r.out;
    return testing::read_file(bundle + "/rootfs/hello.txt");
  }

  const PullEnv* env_ = nullptr;
  TempDir dir_;
};

TEST_F(PullRegistryTest, ByTagWritesALayoutUmociUnpacks) {
  auto r = pull(reg(env_->port) + "/test/img:v1");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
  EXPECT_TRUE(r->index_digest.empty());
  EXPECT_EQ(r->platform.str(), "linux/amd64");
  EXPECT_EQ(r->layers.size(), 1u);
  EXPECT_GT(r->bytes, 500'000u);  // busybox, streamed in many reads
  EXPECT_EQ(testing::read_file(layout() + "/oci-layout"), R"({"imageLayoutVersion":"1.0.0"})");
  auto index = nlohmann::json::parse(testing::read_file(layout() + "/index.json"));
  ASSERT_EQ(index["manifests"].size(), 1u);
  EXPECT_EQ(index["manifests"][0]["digest"], env_->amd_manifest);
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "v1");
  EXPECT_EQ(unpacked_hello("v1"), "hello amd64\n");
}

TEST_F(PullRegistryTest, ByDigest) {
  auto r = pull(reg(env_->port) + "/test/img@" + env_->amd_manifest);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
  auto inspect = testing::run_command({"skopeo", "inspect", "oci:" + layout()});
  EXPECT_EQ(inspect.status, 0) << inspect.out;
  EXPECT_NE(inspect.out.find("\"Architecture\": \"amd64\""), std::string::npos) << inspect.out;
}

TEST_F(PullRegistryTest, UnknownDigestAndTagAreNotFound) {
  auto r = pull(reg(env_->port) + "/test/img@sha256:" + std::string(64, '0'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().context.find("manifest unknown"), std::string::npos) << r.error().context;
  auto t = pull_to_layout(*parse_reference(reg(env_->port) + "/test/img:nope"), {},
                          dir_.path + "/second");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(layout() + "/index.json"));
}

TEST_F(PullRegistryTest, IndexPicksLinuxAmd64ByDefault) {
  auto r = pull(reg(env_->port) + "/test/multi:v1");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->index_digest, env_->multi_index);
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
  EXPECT_EQ(r->platform.str(), "linux/amd64");
  EXPECT_EQ(unpacked_hello("v1"), "hello amd64\n");
}

TEST_F(PullRegistryTest, IndexPicksThePlatformAsked) {
  PullOptions o;
  o.platform = *parse_platform("linux/arm64");
  auto r = pull(reg(env_->port) + "/test/multi:v1", o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->arm_manifest);
  EXPECT_EQ(r->platform.str(), "linux/arm64");
}

TEST_F(PullRegistryTest, IndexWithoutThePlatformSaysWhatItHas) {
  PullOptions o;
  o.platform = *parse_platform("linux/s390x");
  auto r = pull(reg(env_->port) + "/test/multi:v1", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().context,
            "no linux/s390x image in the index (it has: linux/arm64, linux/amd64); see --platform");
}

TEST_F(PullRegistryTest, SinglePlatformImageForAnotherMachineIsRefused) {
  auto r = pull(reg(env_->port) + "/test/arm:v1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(r.error().context, "the image is for linux/arm64, not linux/amd64 (see --platform)");
  EXPECT_FALSE(std::filesystem::exists(layout() + "/index.json"));
  PullOptions o;
  o.platform = *parse_platform("linux/arm64");
  auto ok =
      pull_to_layout(*parse_reference(reg(env_->port) + "/test/arm:v1"), o, dir_.path + "/second");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->manifest_digest, env_->arm_manifest);
}

TEST_F(PullRegistryTest, DockerSchema2Manifest) {
  auto r = pull(reg(env_->port) + "/test/docker:v1");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_media_type, "application/vnd.docker.distribution.manifest.v2+json");
  EXPECT_NE(r->manifest_digest, env_->amd_manifest);  // same image, other format
  // Written in OCI form (OCI layout readers skip Docker media types), with
  // the same config and layers: the amd64 image's manifest byte for byte.
  EXPECT_NE(r->layout_manifest_digest, r->manifest_digest);
  auto index = nlohmann::json::parse(testing::read_file(layout() + "/index.json"));
  EXPECT_EQ(index["manifests"][0]["mediaType"], "application/vnd.oci.image.manifest.v1+json");
  EXPECT_EQ(unpacked_hello("v1"), "hello amd64\n");
}

TEST_F(PullRegistryTest, ImageOverMaxBytesIsRefusedBeforeAnyLayer) {
  PullOptions o;
  o.max_image_bytes = 100'000;
  auto r = pull(reg(env_->port) + "/test/img:v1", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().context.find("more than --max-image-bytes 100000"), std::string::npos)
      << r.error().context;
  EXPECT_TRUE(std::filesystem::is_empty(layout() + "/blobs/sha256"));
}

TEST_F(PullRegistryTest, TokenAuthPrivateRepoWithoutCredentialsIs401) {
  auto r = pull(reg(env_->auth_port) + "/private/img:v1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().context,
            "HTTP 401 Unauthorized from " + reg(env_->auth_port) +
                " for private/img (UNAUTHORIZED: authentication required): no credentials were "
                "given (--username, --password-stdin)");
}

TEST_F(PullRegistryTest, TokenAuthPrivateRepoWithCredentials) {
  PullOptions o;
  o.registry.username = "alice";
  o.registry.password = "secret";
  auto r = pull(reg(env_->auth_port) + "/private/img:v1", o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
  EXPECT_EQ(unpacked_hello("v1"), "hello amd64\n");
}

TEST_F(PullRegistryTest, TokenAuthWrongPasswordIsRefusedByTheTokenServer) {
  PullOptions o;
  o.registry.username = "alice";
  o.registry.password = "wrong";
  auto r = pull(reg(env_->auth_port) + "/private/img:v1", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().context.find("refused user 'alice' (HTTP 401)"), std::string::npos)
      << r.error().context;
}

TEST_F(PullRegistryTest, TokenAuthPublicRepoWithAnAnonymousToken) {
  auto r = pull(reg(env_->auth_port) + "/public/img:v1");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
}

TEST_F(PullRegistryTest, TlsUntrustedCertificateIsRefusedNotDowngraded) {
  auto r = pull(reg(env_->tls_port) + "/test/img:v1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().context.find("certificate verification failed: self-signed certificate"),
            std::string::npos)
      << r.error().context;
}

TEST_F(PullRegistryTest, TlsWithTheCaFile) {
  PullOptions o;
  o.registry.ca_file = env_->tls_ca;
  auto r = pull(reg(env_->tls_port) + "/test/img:v1", o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->manifest_digest, env_->amd_manifest);
}

TEST_F(PullRegistryTest, TlsCertificateForAnotherNameIsRefused) {
  // The certificate names IP 127.0.0.1 only; "localhost" reaches the same server.
  PullOptions o;
  o.registry.ca_file = env_->tls_ca;
  auto r = pull("localhost:" + std::to_string(env_->tls_port) + "/test/img:v1", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().context.find("certificate verification failed"), std::string::npos)
      << r.error().context;
}

}  // namespace
}  // namespace sandcastle::images

// Image references, platforms and URLs as `image pull` reads them.
#include <gtest/gtest.h>

#include "images/oci_layout_writer.h"
#include "images/registry_client.h"

namespace sandcastle::images {
namespace {

ImageReference ok_ref(const std::string& text) {
  auto r = parse_reference(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.error().context;
  return r.ok() ? *r : ImageReference{};
}

TEST(PullReference, DockerHubDefaults) {
  auto r = ok_ref("debian");
  EXPECT_EQ(r.registry, "docker.io");
  EXPECT_EQ(r.endpoint(), "registry-1.docker.io");
  EXPECT_EQ(r.repository, "library/debian");
  EXPECT_EQ(r.tag, "latest");
  EXPECT_EQ(r.str(), "docker.io/library/debian:latest");
  EXPECT_EQ(ok_ref("bitnami/redis:7.2").str(), "docker.io/bitnami/redis:7.2");
  EXPECT_EQ(ok_ref("docker.io/debian:12").str(), "docker.io/library/debian:12");
  EXPECT_EQ(ok_ref("index.docker.io/library/debian").str(), "docker.io/library/debian:latest");
}

TEST(PullReference, RegistryIsTheFirstComponentWithADotOrColonOrLocalhost) {
  auto r = ok_ref("127.0.0.1:5000/test/img:v1");
  EXPECT_EQ(r.registry, "127.0.0.1:5000");
  EXPECT_EQ(r.endpoint(), "127.0.0.1:5000");
  EXPECT_EQ(r.repository, "test/img");
  EXPECT_EQ(r.tag, "v1");
  EXPECT_EQ(ok_ref("ghcr.io/org/app").str(), "ghcr.io/org/app:latest");
  EXPECT_EQ(ok_ref("localhost/app:1").registry, "localhost");
  EXPECT_EQ(ok_ref("[::1]:5000/app").registry, "[::1]:5000");
  // "team/app": no dot, colon or localhost, so a Docker Hub repository.
  EXPECT_EQ(ok_ref("team/app").str(), "docker.io/team/app:latest");
  // A colon after the last slash is the tag, not a port.
  EXPECT_EQ(ok_ref("reg.example:443/a/b:c").tag, "c");
}

TEST(PullReference, Digests) {
  const std::string d = "sha256:" + std::string(64, 'a');
  auto r = ok_ref("127.0.0.1:5000/test/img@" + d);
  EXPECT_EQ(r.digest, d);
  EXPECT_TRUE(r.tag.empty());
  EXPECT_EQ(r.str(), "127.0.0.1:5000/test/img@" + d);
  auto both = ok_ref("debian:12@" + d);
  EXPECT_EQ(both.tag, "12");
  EXPECT_EQ(both.digest, d);
}

TEST(PullReference, RefusedWithTheRuleBroken) {
  auto err = [](const std::string& text) {
    auto r = parse_reference(text);
    EXPECT_FALSE(r.ok()) << text;
    if (r.ok()) return std::string();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    return r.error().context;
  };
  EXPECT_EQ(err(""), "empty image reference");
  EXPECT_NE(err("Debian").find("bad repository name 'library/Debian'"), std::string::npos);
  EXPECT_NE(err("a/../b").find("bad repository name"), std::string::npos);
  EXPECT_NE(err("a//b").find("bad repository name"), std::string::npos);
  EXPECT_NE(err("a--/b").find("bad repository name"), std::string::npos);
  EXPECT_NE(err("img:-bad").find("bad tag '-bad'"), std::string::npos);
  EXPECT_NE(err("img:" + std::string(129, 'a')).find("bad tag"), std::string::npos);
  EXPECT_NE(err("img@sha512:" + std::string(128, 'a')).find("only sha256 digests are supported"),
            std::string::npos);
  EXPECT_NE(err("img@sha256:ABC").find("bad digest"), std::string::npos);
  EXPECT_NE(err("img@sha256:" + std::string(64, 'A')).find("bad digest"), std::string::npos);
  EXPECT_NE(err("reg.example:99999/a").find("bad registry"), std::string::npos);
  // Found by fuzz_image_reference: a '?' made the rest of the host a query.
  EXPECT_NE(err("127.?.07.0.0:5000/test:v1").find("bad registry"), std::string::npos);
  EXPECT_NE(err("user@reg.example/a").find("digest"), std::string::npos);
  EXPECT_NE(err("a b").find("space"), std::string::npos);
  EXPECT_NE(err(std::string(600, 'a')).find("longer than 512"), std::string::npos);
}

TEST(PullReference, Platforms) {
  auto p = parse_platform("linux/arm64/v8");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->os, "linux");
  EXPECT_EQ(p->architecture, "arm64");
  EXPECT_EQ(p->variant, "v8");
  EXPECT_EQ(p->str(), "linux/arm64/v8");
  EXPECT_EQ(parse_platform("linux/amd64")->str(), "linux/amd64");
  for (const char* bad :
       {"linux", "linux/", "/amd64", "linux/amd64/v1/x", "Linux/amd64", "linux/amd 64"})
    EXPECT_FALSE(parse_platform(bad).ok()) << bad;
}

TEST(PullReference, Urls) {
  auto u = http::parse_url("https://auth.example.com/token?service=x");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "auth.example.com");
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->target, "/token?service=x");
  auto v6 = http::parse_url("http://[::1]:5000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->authority(), "[::1]:5000");
  EXPECT_EQ(v6->target, "/");
  EXPECT_FALSE(http::parse_url("ftp://x/").ok());
  EXPECT_FALSE(http::parse_url("https://user:pw@x/").ok());
  EXPECT_FALSE(http::parse_url("https://x:0/").ok());
  EXPECT_FALSE(http::parse_url("https://x/a b").ok());
  EXPECT_FALSE(http::parse_url("https://x/a\r\nHost: y").ok());

  // Location headers: absolute, or a path on the same origin.
  auto base = *http::parse_url("http://127.0.0.1:5000/v2/a/blobs/sha256:x");
  auto rel = http::resolve_url(base, "/store/1");
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->str(), "http://127.0.0.1:5000/store/1");
  EXPECT_EQ(http::resolve_url(base, "https://cdn.example/b")->str(), "https://cdn.example:443/b");
  EXPECT_FALSE(http::resolve_url(base, "//evil.example/x").ok());
  EXPECT_FALSE(http::resolve_url(base, "relative/x").ok());
  EXPECT_FALSE(http::resolve_url(base, "").ok());
}

TEST(PullReference, Loopback) {
  for (const char* h : {"127.0.0.1", "127.5.6.7", "::1", "localhost"})
    EXPECT_TRUE(http::is_loopback_host(h)) << h;
  for (const char* h : {"10.0.0.1", "example.com", "localhost.example.com", "::"})
    EXPECT_FALSE(http::is_loopback_host(h)) << h;
}

TEST(PullReference, Sha256Digests) {
  EXPECT_TRUE(is_sha256_digest("sha256:" + std::string(64, 'f')));
  EXPECT_FALSE(is_sha256_digest("sha256:" + std::string(63, 'f')));
  EXPECT_FALSE(is_sha256_digest("sha256:" + std::string(64, 'g')));
  EXPECT_FALSE(is_sha256_digest("sha256:../" + std::string(61, 'f')));
  EXPECT_EQ(sha256_digest(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace sandcastle::images

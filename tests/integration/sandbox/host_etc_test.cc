// What toolchains read from /etc at start is in a sandbox's /etc (a copy of
// the host's package configuration), read-only, and nothing else of the
// host's /etc is.
#include <gtest/gtest.h>
#include <unistd.h>

#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class HostEtcTest : public SandboxTest {};

TEST_F(HostEtcTest, JdkConfigurationIsThereAndJavaStarts) {
  if (::access("/usr/bin/java", X_OK) != 0) GTEST_SKIP() << "no JDK on this host";
  auto r = sh("cat /etc/java-*-openjdk/security/java.security | grep -c '^securerandom.source='");
  EXPECT_EQ(r.status(), 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "1\n");
  // The JDK's conf/ links into /etc: the JVM reads java.security at start.
  r = sh("java -XX:-UsePerfData -XshowSettings:properties -version 2>&1 | grep -c 'java.home'",
         std::chrono::seconds(60));
  EXPECT_EQ(r.status(), 0) << r.stdout_data << r.stderr_data;
  r =
      sh("echo 'class M { public static void main(String[] a) { "
         "System.out.println(java.security.Security"
         ".getProviders().length > 0); } }' > /tmp/M.java && java -XX:-UsePerfData /tmp/M.java",
         std::chrono::seconds(60));
  EXPECT_EQ(r.status(), 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "true\n");
}

// fontconfig finds its configuration and the host's prebuilt cache with no
// writable cache directory at all: no scan, no warning.
TEST_F(HostEtcTest, FontconfigUsesThePrebuiltCacheQuietly) {
  if (::access("/usr/bin/fc-match", X_OK) != 0 || ::access("/var/cache/fontconfig", R_OK) != 0)
    GTEST_SKIP() << "no fontconfig or no font cache on this host";
  auto r = sh("XDG_CACHE_HOME=/nonexistent HOME=/nonexistent fc-match sans");
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(r.stderr_data, "");
  EXPECT_NE(r.stdout_data.find(".ttf"), std::string::npos) << r.stdout_data;
}

TEST_F(HostEtcTest, CopiesAreReadOnlyAndSecretsAbsent) {
  auto r =
      sh("ls /etc/shadow /etc/gshadow /etc/ssh /etc/sudoers /etc/machine-id 2>&1 | grep -c 'No "
         "such file'");
  EXPECT_EQ(r.stdout_data, "5\n") << r.stdout_data;
  r = sh("echo x > /etc/mime.types || echo x > /etc/fonts/fonts.conf");
  EXPECT_NE(r.status(), 0);
  EXPECT_NE(r.stderr_data.find("Read-only file system"), std::string::npos) << r.stderr_data;
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

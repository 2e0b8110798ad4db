// The parts of the host's /etc a sandbox gets a copy of: only the allow-listed
// package configuration, and of that only what every host user may read.
#include <fcntl.h>
#include <fnmatch.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>

#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"

namespace sandcastle::sandbox::native {
namespace {

class HostEtcCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sc-host-etc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    src_ = root_ + "/src";
    dst_ = root_ + "/dst";
    ASSERT_EQ(::mkdir(src_.c_str(), 0755), 0);
  }
  void TearDown() override { (void)remove_tree(root_); }

  void put(const std::string& rel, const std::string& content, mode_t mode) {
    const std::string p = src_ + "/" + rel;
    std::ofstream(p) << content;
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
  }
  bool exists(const std::string& rel) const {
    struct stat st {};
    return ::lstat((dst_ + "/" + rel).c_str(), &st) == 0;
  }

  std::string root_, src_, dst_;
};

TEST_F(HostEtcCopy, CopiesWorldReadableFilesSymlinksAndDirectories) {
  ASSERT_EQ(::mkdir((src_ + "/security").c_str(), 0755), 0);
  put("security/java.security", "securerandom.source=file:/dev/random\n", 0644);
  ASSERT_EQ(::symlink("/usr/share/fontconfig/conf.avail/10-hinting-slight.conf",
                      (src_ + "/hint.conf").c_str()),
            0);
  std::uint64_t budget = 1 << 20;
  ASSERT_TRUE(copy_public_tree(src_, dst_, budget).ok());
  EXPECT_EQ(read_small_file(dst_ + "/security/java.security"),
            "securerandom.source=file:/dev/random\n");
  char target[PATH_MAX] = {};
  ASSERT_GT(::readlink((dst_ + "/hint.conf").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "/usr/share/fontconfig/conf.avail/10-hinting-slight.conf");
  EXPECT_EQ(budget, (1u << 20) - 37);
}

// Root reads a 0600 file anyway: the mode, not access(2), decides.
TEST_F(HostEtcCopy, SkipsWhatOnlyItsOwnerOrGroupMayRead) {
  put("public.conf", "ok\n", 0644);
  put("secret.key", "hunter2\n", 0600);
  put("group.conf", "staff only\n", 0640);
  ASSERT_EQ(::mkdir((src_ + "/private").c_str(), 0700), 0);
  put("private/inner.conf", "x\n", 0644);
  ASSERT_EQ(::mkfifo((src_ + "/fifo").c_str(), 0644), 0);
  std::uint64_t budget = 1 << 20;
  ASSERT_TRUE(copy_public_tree(src_, dst_, budget).ok());
  EXPECT_TRUE(exists("public.conf"));
  EXPECT_FALSE(exists("secret.key"));
  EXPECT_FALSE(exists("group.conf"));
  EXPECT_FALSE(exists("private"));
  EXPECT_FALSE(exists("fifo"));
}

TEST_F(HostEtcCopy, BoundsFileSizeAndTotal) {
  put("big", std::string((1 << 20) + 1, 'x'), 0644);  // over the 1 MiB per file
  put("a", std::string(600, 'a'), 0644);
  put("b", std::string(600, 'b'), 0644);
  std::uint64_t budget = 1000;  // room for one of a and b
  ASSERT_TRUE(copy_public_tree(src_, dst_, budget).ok());
  EXPECT_FALSE(exists("big"));
  EXPECT_NE(exists("a"), exists("b"));
  EXPECT_EQ(budget, 400u);
}

TEST(HostEtcAllowList, NamesNothingThatHoldsSecretsOrTheHostsIdentity) {
  for (const char* name :
       {"shadow",     "gshadow", "passwd",   "group",       "sudoers",    "sudoers.d",
        "ssh",        "ssl",     "hosts",    "hostname",    "machine-id", "environment",
        "gitconfig",  "maven",   "netrc",    "krb5.keytab", "pki",        "docker",
        "containers", "cron.d",  "security", "pam.d"})
    for (const char* pattern : kHostEtcCopied)
      EXPECT_NE(::fnmatch(pattern, name, 0), 0) << pattern << " matches " << name;
}

}  // namespace
}  // namespace sandcastle::sandbox::native

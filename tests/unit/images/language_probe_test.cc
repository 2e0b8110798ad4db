#include "images/language_probe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>

#include "images/layer_unpack.h"
#include "tar_builder.h"

namespace sandcastle::images {
namespace {

namespace fs = std::filesystem;
using testing::write_bytes;

class LanguageProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sc-probe-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    (void)remove_tree(dir_.string());
    fs::create_directories(dir_);
  }
  void TearDown() override { (void)remove_tree(dir_.string()); }

  std::string layer(const std::string& name) {
    std::string p = (dir_ / name).string();
    fs::create_directories(p);
    layers_.push_back(p);
    return p;
  }
  static void exe(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    write_bytes(path, "#!elf");
    ::chmod(path.c_str(), 0755);
  }
  static void link(const std::string& path, const std::string& target) {
    fs::create_directories(fs::path(path).parent_path());
    fs::create_symlink(target, path);
  }

  fs::path dir_;
  std::vector<std::string> layers_;
};

TEST_F(LanguageProbeTest, FollowsSymlinksAcrossLayersInsideTheImage) {
  auto l0 = layer("l0");
  link(l0 + "/bin", "usr/bin");  // merged /usr
  exe(l0 + "/usr/bin/python3.11");
  link(l0 + "/usr/bin/python3", "/etc/alternatives/python3");  // absolute: the image's /etc
  link(l0 + "/etc/alternatives/python3", "../../usr/bin/python3.11");
  exe(l0 + "/usr/bin/dash");
  link(l0 + "/usr/bin/sh", "dash");
  auto l1 = layer("l1");
  exe(l1 + "/usr/bin/bash");  // /bin/bash through the lower layer's /bin symlink
  EXPECT_EQ(probe_languages(layers_), (std::vector<std::string>{"python", "bash", "sh"}));
  MergedTree tree(layers_);
  EXPECT_EQ(tree.resolve_file("/bin/bash"), l1 + "/usr/bin/bash");
  EXPECT_EQ(tree.resolve_file("/usr/bin/python3"), l0 + "/usr/bin/python3.11");
}

TEST_F(LanguageProbeTest, SymlinksNeverReachTheHost) {
  auto l0 = layer("l0");
  // The host has /usr/bin/perl and ../../.. from here would leave the layer:
  // both resolve inside the image, where there is nothing.
  link(l0 + "/usr/bin/perl", "../../../../../../../../usr/bin/perl");
  link(l0 + "/usr/bin/node", (dir_ / "host-node").string());
  exe((dir_ / "host-node").string());
  link(l0 + "/usr/bin/ruby", "ruby");  // a loop
  EXPECT_TRUE(probe_languages(layers_).empty());
  MergedTree tree(layers_);
  EXPECT_EQ(tree.resolve_file("/usr/bin/node"), std::nullopt);
}

TEST_F(LanguageProbeTest, WhiteoutsAndOpaqueDirectoriesHideLowerLayers) {
  auto l0 = layer("l0");
  exe(l0 + "/usr/bin/python3");
  exe(l0 + "/usr/bin/node");
  exe(l0 + "/usr/bin/perl");
  auto l1 = layer("l1");
  fs::create_directories(l1 + "/usr/bin");
  ASSERT_EQ(::mknod((l1 + "/usr/bin/python3").c_str(), S_IFCHR | 0, makedev(0, 0)), 0);
  EXPECT_EQ(probe_languages(layers_), (std::vector<std::string>{"javascript", "perl"}));
  auto l2 = layer("l2");
  fs::create_directories(l2 + "/usr/bin");
  exe(l2 + "/usr/bin/perl");
  ASSERT_EQ(::setxattr((l2 + "/usr/bin").c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  EXPECT_EQ(probe_languages(layers_), (std::vector<std::string>{"perl"}));
}

TEST_F(LanguageProbeTest, NonExecutablesAndDirectoriesDoNotCount) {
  auto l0 = layer("l0");
  fs::create_directories(l0 + "/usr/bin/python3");
  write_bytes(l0 + "/usr/bin/node", "x");
  ::chmod((l0 + "/usr/bin/node").c_str(), 0644);
  EXPECT_TRUE(probe_languages(layers_).empty());
}

}  // namespace
}  // namespace sandcastle::images

#include "images/layer_unpack.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>

#include "common/unique_fd.h"
#include "tar_builder.h"

namespace sandcastle::images {
namespace {

using namespace testing;  // NOLINT: the tar builders
namespace fs = std::filesystem;

class LayerUnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sc-unpack-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    (void)remove_tree(dir_.string());
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { (void)remove_tree(dir_.string()); }

  Result<LayerResult> unpack(const std::string& bytes,
                             UnpackBudget budget = {1ull << 30, 100000, 256}) {
    write_bytes((dir_ / "layer").string(), bytes);
    UniqueFd fd(::open((dir_ / "layer").c_str(), O_RDONLY | O_CLOEXEC));
    FdSource src(fd.get());
    budget_ = budget;
    return unpack_layer(src, out(), budget_);
  }
  std::string out() const { return (dir_ / "out").string(); }
  struct stat lstat_of(const std::string& rel) const {
    struct stat st {};
    EXPECT_EQ(::lstat((dir_ / "out" / rel).c_str(), &st), 0) << rel;
    return st;
  }

  fs::path dir_;
  UnpackBudget budget_;
};

TEST_F(LayerUnpackTest, UnpacksFilesDirectoriesLinksAndModes) {
  auto tar =
      make_tar({dir("usr/", 0755), dir("usr/bin/", 0555), file("usr/bin/tool", "#!/bin/sh\n", 0755),
                file("etc/motd", "hello\n", 0600), symlink("bin", "usr/bin"),
                hardlink("usr/bin/tool2", "usr/bin/tool"), dir("tmp", 01777)});
  auto r = unpack(tar);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(read_bytes(out() + "/usr/bin/tool"), "#!/bin/sh\n");
  EXPECT_EQ(lstat_of("usr/bin/tool").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of("usr/bin").st_mode & 07777, 0555u);  // set after its children were made
  EXPECT_EQ(lstat_of("etc/motd").st_mode & 07777, 0600u);
  EXPECT_EQ(lstat_of("etc").st_mode & 07777, 0755u);   // implied by etc/motd
  EXPECT_EQ(lstat_of("tmp").st_mode & 07777, 01777u);  // sticky directories keep the bit
  EXPECT_TRUE(S_ISLNK(lstat_of("bin").st_mode));
  EXPECT_EQ(fs::read_symlink(out() + "/bin"), "usr/bin");
  EXPECT_EQ(lstat_of("usr/bin/tool2").st_ino, lstat_of("usr/bin/tool").st_ino);
  EXPECT_EQ(lstat_of("usr/bin/tool").st_uid,
            ::geteuid());  // owned by the server, whatever the tar said
  EXPECT_EQ(r->size_bytes, 16u);
  EXPECT_EQ(r->entries, 7u);
  EXPECT_EQ(r->diff_id, digest(tar));
  EXPECT_EQ(r->blob_digest, digest(tar));
}

TEST_F(LayerUnpackTest, CompressedLayersHashToTheirUncompressedTar) {
  std::vector<TarEntry> entries = {file("a", std::string(100000, 'x')), file("b/c", "c")};
  const std::string plain = make_tar(entries);
  for (const char* filter : {"gzip", "zstd"}) {
    (void)remove_tree(out());
    fs::create_directories(out());
    const std::string packed = make_tar(entries, filter);
    ASSERT_NE(packed, plain);
    auto r = unpack(packed);
    ASSERT_TRUE(r.ok()) << filter << ": " << r.error().message();
    EXPECT_EQ(r->diff_id, digest(plain)) << filter;
    EXPECT_EQ(r->blob_digest, digest(packed)) << filter;
    EXPECT_EQ(read_bytes(out() + "/b/c"), "c");
  }
}

TEST_F(LayerUnpackTest, WhiteoutsBecomeOverlayCharacterDevices) {
  auto r = unpack(make_tar({dir("etc"), file("etc/.wh.passwd", ""), file(".wh.gone", "")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (const char* p : {"etc/passwd", "gone"}) {
    auto st = lstat_of(p);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << p;
    EXPECT_EQ(st.st_rdev, makedev(0, 0)) << p;
  }
  EXPECT_FALSE(fs::exists(out() + "/etc/.wh.passwd"));
}

TEST_F(LayerUnpackTest, AFileOfTheSameLayerWinsOverItsWhiteout) {
  auto r = unpack(
      make_tar({file(".wh.a", ""), file("a", "kept"), file("b", "kept"), file(".wh.b", "")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(read_bytes(out() + "/a"), "kept");
  EXPECT_EQ(read_bytes(out() + "/b"), "kept");
}

TEST_F(LayerUnpackTest, OpaqueMarkerSetsTheOverlayXattrs) {
  auto r = unpack(
      make_tar({dir("var/lib"), file("var/lib/.wh..wh..opq", ""), file("var/lib/new", "n")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  char v[4] = {};
  ASSERT_EQ(::lgetxattr((out() + "/var/lib").c_str(), "user.overlay.opaque", v, sizeof v), 1);
  EXPECT_EQ(v[0], 'y');
  if (::geteuid() == 0) {
    ASSERT_EQ(::lgetxattr((out() + "/var/lib").c_str(), "trusted.overlay.opaque", v, sizeof v), 1);
    EXPECT_EQ(v[0], 'y');
  }
  EXPECT_FALSE(fs::exists(out() + "/var/lib/.wh..wh..opq"));
  EXPECT_EQ(read_bytes(out() + "/var/lib/new"), "n");
}

TEST_F(LayerUnpackTest, SetuidAndSetgidBitsAreStrippedAndCounted) {
  auto r = unpack(make_tar({file("su", "x", 04755), file("wall", "x", 02755), dir("shared", 02775),
                            file("sticky", "x", 01755)}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(lstat_of("su").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of("wall").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of("shared").st_mode & 07777, 0775u);
  EXPECT_EQ(lstat_of("sticky").st_mode & 07777, 0755u);  // sticky means nothing on a file
  EXPECT_EQ(r->setid_stripped, 3u);
}

TEST_F(LayerUnpackTest, DeviceNodesAreSkippedAndCounted) {
  auto r = unpack(make_tar({dir("dev"), device("dev/null", AE_IFCHR, 1, 3),
                            device("dev/sda", AE_IFBLK, 8, 0), file("ok", "1")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->devices_skipped, 2u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(out() + "/dev/null")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(out() + "/dev/sda")));
  EXPECT_EQ(read_bytes(out() + "/ok"), "1");
}

TEST_F(LayerUnpackTest, DotDotComponentsAreRefused) {
  auto r = unpack(make_tar({file("a/../../escape", "x")}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context, "entry 'a/../../escape': '..' component (refused)");
  EXPECT_FALSE(fs::exists(dir_ / "escape"));
}

TEST_F(LayerUnpackTest, AbsolutePathsAreRefused) {
  auto r = unpack(make_tar({file("/etc/evil", "x")}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "entry '/etc/evil': absolute path (refused)");
}

// umoci writes the root directory as "/": the root, not an absolute path.
TEST_F(LayerUnpackTest, ASlashAloneIsTheLayersRoot) {
  auto r = unpack(make_tar({dir("/", 0755), file("a", "x")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(fs::is_regular_file(out() + "/a"));
}

TEST_F(LayerUnpackTest, HardlinksMustPointInsideTheLayer) {
  auto outside = unpack(make_tar({hardlink("passwd", "../../../etc/passwd")}));
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(
      outside.error().context,
      "entry 'passwd': hardlink target: entry '../../../etc/passwd': '..' component (refused)");
  (void)remove_tree(out());
  fs::create_directories(out());
  auto absolute = unpack(make_tar({hardlink("passwd", "/etc/passwd")}));
  ASSERT_FALSE(absolute.ok());
  EXPECT_EQ(absolute.error().context,
            "entry 'passwd': hardlink target: entry '/etc/passwd': absolute path (refused)");
  (void)remove_tree(out());
  fs::create_directories(out());
  // Through a symlink the layer planted: resolved beneath the layer without symlinks, so refused.
  auto via_link = unpack(make_tar({symlink("etc", "/etc"), hardlink("passwd", "etc/passwd")}));
  ASSERT_FALSE(via_link.ok());
  EXPECT_EQ(via_link.error().context,
            "entry 'passwd': hardlink target 'etc/passwd' is not in this layer");
  EXPECT_FALSE(fs::exists(out() + "/passwd"));
}

TEST_F(LayerUnpackTest, NothingIsWrittenThroughASymlinkTheLayerPlanted) {
  fs::create_directories(dir_ / "victim");
  auto r = unpack(make_tar({symlink("a", (dir_ / "victim").string()), file("a/passwd", "owned")}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      r.error().context,
      "entry 'a/passwd': its parent 'a' is a symlink (refused: nothing is written through one)");
  EXPECT_FALSE(fs::exists(dir_ / "victim" / "passwd"));
}

TEST_F(LayerUnpackTest, SymlinksThatPointOutsideAreKeptAsSymlinks) {
  auto r = unpack(make_tar({symlink("shadow", "/etc/shadow"), symlink("up", "../../../../")}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(fs::read_symlink(out() + "/shadow"), "/etc/shadow");
  EXPECT_EQ(fs::read_symlink(out() + "/up"), "../../../../");
}

TEST_F(LayerUnpackTest, ATarBombPastTheByteLimitIsRefused) {
  TarEntry big = file("zeros", "");
  big.size = 3 << 20;
  auto r = unpack(make_tar({big}, "gzip"), UnpackBudget{2 << 20, 1000, 256});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().context, "entry 'zeros': the image is larger than its limit");
}

TEST_F(LayerUnpackTest, ZerosAfterTheTarCountAgainstTheLimitToo) {
  // 64 MiB of zeros after a tiny tar compress to ~64 KiB: inflating them is
  // bounded by the same limit as the files.
  std::string tar = make_tar({file("a", "a")});
  tar.append(64 << 20, '\0');
  struct archive* a = archive_write_new();
  archive_write_set_format_raw(a);
  archive_write_add_filter_gzip(a);
  std::string gz;
  archive_write_open(
      a, &gz, nullptr,
      [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_filetype(e, AE_IFREG);
  archive_write_header(a, e);
  archive_write_data(a, tar.data(), tar.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  ASSERT_LT(gz.size(), 1u << 20);
  auto r = unpack(gz, UnpackBudget{1 << 20, 10, 256});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().context, "the layer's tar stream is larger than its limit");
}

TEST_F(LayerUnpackTest, TooManyEntriesAreRefused) {
  std::vector<TarEntry> many;
  for (int i = 0; i < 11; ++i) {
    std::string name = std::to_string(i);
    many.push_back(file(name.append(".f"), ""));
  }
  auto r = unpack(make_tar(many), UnpackBudget{1 << 20, 10, 256});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().context, "the image has more tar entries than its limit");
}

TEST_F(LayerUnpackTest, PathsDeeperThanTheLimitAreRefused) {
  std::string deep;
  for (int i = 0; i < 9; ++i) deep += "d/";
  auto r = unpack(make_tar({file(deep + "f", "x")}), UnpackBudget{1 << 20, 1000, 8});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "entry '" + deep + "f': deeper than 8 directories (refused)");
}

TEST_F(LayerUnpackTest, ATruncatedTarIsRefused) {
  auto tar = make_tar({file("a", std::string(10000, 'a')), file("b", std::string(10000, 'b'))});
  auto r = unpack(tar.substr(0, 6000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context, "entry 'a': Truncated tar archive");
}

TEST_F(LayerUnpackTest, CorruptGzipIsRefused) {
  auto gz = make_tar({file("a", std::string(100000, 'a'))}, "gzip");
  for (size_t i = 40; i < 60; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  auto r = unpack(gz);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context, "corrupt layer: gzip decompression failed");
}

}  // namespace
}  // namespace sandcastle::images

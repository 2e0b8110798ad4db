#include "images/image_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "image_archives.h"
#include "images/layer_unpack.h"

namespace sandcastle::images {
namespace {

using namespace testing;  // NOLINT: the archive builders
namespace fs = std::filesystem;

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sc-images-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    (void)remove_tree(dir_.string());
    fs::create_directories(dir_);
    reopen();
  }
  void TearDown() override {
    store_.reset();
    (void)remove_tree(dir_.string());
  }
  void reopen(StoreLimits limits = {}) {
    store_.reset();
    auto s = ImageStore::open(state(), limits);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(s).value();
  }
  std::string state() const { return (dir_ / "state").string(); }
  std::string layers_dir() const { return state() + "/images/layers/sha256"; }
  std::string put(const std::string& name, const std::string& bytes) {
    std::string p = (dir_ / name).string();
    write_bytes(p, bytes);
    return p;
  }

  // Everything the store holds: image rows and files under images/.
  std::vector<std::string> snapshot() const {
    std::vector<std::string> out;
    for (const auto& r : store_->list()) out.push_back("image " + r.id + " " + r.name);
    for (auto it = fs::recursive_directory_iterator(state() + "/images");
         it != fs::recursive_directory_iterator(); ++it)
      if (it->path().filename() != "lock") out.push_back(it->path().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  void expect_unchanged(const std::vector<std::string>& before) {
    EXPECT_EQ(snapshot(), before);
    EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
  }

  fs::path dir_;
  std::unique_ptr<ImageStore> store_;
};

// A small userland: python3 through merged-/usr symlinks.
std::string base_layer() {
  return make_tar({dir("usr"), dir("usr/bin"), file("usr/bin/python3.11", "#!elf", 0755),
                   symlink("usr/bin/python3", "python3.11"), symlink("bin", "usr/bin"),
                   file("usr/bin/busybox", "#!elf", 0755), symlink("usr/bin/sh", "busybox"),
                   dir("etc"), file("etc/os-release", "ID=test\n"), dir("var/cache"),
                   file("var/cache/old", "old")});
}

TEST_F(ImageStoreTest, ImportsARootfsTar) {
  const std::string tar = base_layer();
  auto r = store_->import(put("debian-mini.tar", tar), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "debian-mini");
  EXPECT_EQ(r->source, "import:rootfs");
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_EQ(r->layers[0], digest(tar));
  EXPECT_EQ(r->languages, (std::vector<std::string>{"python", "sh"}));
  EXPECT_EQ(r->size_bytes, 21u);
  auto dirs = store_->layer_dirs(*r);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ((*dirs)[0], layers_dir() + "/" + hex_of(digest(tar)));
  EXPECT_EQ(read_bytes((*dirs)[0] + "/etc/os-release"), "ID=test\n");
  auto found = store_->find("debian-mini");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, r->id);
  EXPECT_EQ(store_->find(r->id.substr(7, 12))->id, r->id);  // an id prefix
  EXPECT_EQ(store_->find(r->id)->id, r->id);
  EXPECT_EQ(store_->find("debian-min").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->find(r->id.substr(7, 11)).error().code,
            ErrorCode::kNotFound);  // too short a prefix
}

TEST_F(ImageStoreTest, ImportsADockerArchiveWithWhiteoutsAndConfig) {
  const std::string base = base_layer();
  const std::string top =
      make_tar({dir("var/cache"), file("var/cache/.wh..wh..opq", ""), file("var/cache/new", "new"),
                file("etc/.wh.os-release", ""), file("usr/bin/node", "#!elf", 0755)});
  nlohmann::json cfg = {{"Env", {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}},
                        {"WorkingDir", "/srv"},
                        {"User", "1000:1000"},
                        {"Cmd", {"python3"}}};
  auto r = store_->import(
      put("img.tar", pack(docker_archive({base, top}, "localhost/app:1.0", cfg))), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "localhost/app:1.0");
  EXPECT_EQ(r->source, "import:docker-archive");
  EXPECT_EQ(r->id, digest(image_config({base, top}, cfg)));
  EXPECT_EQ(r->layers, (std::vector<std::string>{digest(base), digest(top)}));
  EXPECT_EQ(r->config.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(r->config.working_dir, "/srv");
  EXPECT_EQ(r->config.user, "1000:1000");
  EXPECT_EQ(r->config.cmd, (std::vector<std::string>{"python3"}));
  EXPECT_EQ(r->languages, (std::vector<std::string>{"python", "javascript", "sh"}));
  auto dirs = store_->layer_dirs(*r);
  ASSERT_TRUE(dirs.ok());
  struct stat st {};
  ASSERT_EQ(::lstat(((*dirs)[1] + "/etc/os-release").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  // Docker-style short names find it too.
  EXPECT_EQ(store_->find("app:1.0")->id, r->id);
}

TEST_F(ImageStoreTest, ImportsAnOciLayoutAsDirectoryAndAsTar) {
  const std::string base = base_layer();
  Files layout = oci_layout({base}, "mini", "gzip", nlohmann::json{{"Env", {"A=1"}}});
  write_dir((dir_ / "layout").string(), layout);
  auto from_dir = store_->import((dir_ / "layout").string(), {});
  ASSERT_TRUE(from_dir.ok()) << from_dir.error().message();
  EXPECT_EQ(from_dir->name, "mini");
  EXPECT_EQ(from_dir->source, "import:oci");
  EXPECT_EQ(from_dir->layers, (std::vector<std::string>{digest(base)}));
  EXPECT_EQ(from_dir->config.env, (std::vector<std::string>{"A=1"}));
  Files zstd = oci_layout({base}, "mini-zstd", "zstd", nlohmann::json{{"Env", {"A=1"}}});
  auto from_tar = store_->import(put("mini.oci.tar", pack(zstd)), {ImportOptions{"other", ""}});
  ASSERT_TRUE(from_tar.ok()) << from_tar.error().message();
  // Same config, same image: the second import only adds its name.
  EXPECT_EQ(from_tar->id, from_dir->id);
  EXPECT_EQ(from_tar->tags, (std::vector<std::string>{"other"}));
  EXPECT_EQ(store_->list().size(), 1u);
}

// Docker 25+ `docker save`: an OCI layout whose manifest.json names blobs.
TEST_F(ImageStoreTest, ImportsADockerArchiveWithBlobPaths) {
  const std::string layer = make_tar({file("etc/hostname", "d25\n")});
  Files f = oci_layout({layer}, "d25", "");
  const std::string cfg = image_config({layer});
  f["manifest.json"] =
      nlohmann::json::array({{{"Config", "blobs/sha256/" + hex_of(digest(cfg))},
                              {"RepoTags", {"d25:1"}},
                              {"Layers", {"blobs/sha256/" + hex_of(digest(layer))}}}})
          .dump();
  auto r = store_->import(put("d25.tar", pack(f)), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "d25:1");
  EXPECT_EQ(r->source, "import:docker-archive");
  EXPECT_EQ(r->id, digest(cfg));
  // Other bytes under the layer's blob name: refused by the name (in a store
  // without that layer: one that has it does not read it again).
  ASSERT_TRUE(store_->remove(r->id, nullptr).ok());
  const std::string other = make_tar({file("etc/hostname", "evil\n")});
  f["blobs/sha256/" + hex_of(digest(layer))] = other;
  auto bad = store_->import(put("d25-bad.tar", pack(f)), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().context, "layer blobs/sha256/" + hex_of(digest(layer)) +
                                     ": digest mismatch: its sha256 is " + digest(other) +
                                     ", its name says " + digest(layer));
}

// An index of several platforms: the linux/amd64 manifest is the one read.
TEST_F(ImageStoreTest, AnIndexOfPlatformsImportsLinuxAmd64) {
  const std::string layer = make_tar({file("arch", "amd64")});
  Files f = oci_layout({layer}, "multi");
  auto index = nlohmann::json::parse(f["index.json"]);
  auto amd64 = index["manifests"][0];
  amd64["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  nlohmann::json arm64 = {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                          {"digest", "sha256:" + std::string(64, 'a')},  // not in the layout
                          {"size", 10},
                          {"platform", {{"os", "linux"}, {"architecture", "arm64"}}}};
  index["manifests"] = {arm64, amd64};
  f["index.json"] = index.dump();
  write_dir((dir_ / "multi").string(), f);
  auto r = store_->import((dir_ / "multi").string(), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->layers, (std::vector<std::string>{digest(layer)}));
  index["manifests"] =
      nlohmann::json::array({arm64});  // not {arm64}: clang makes that the object itself
  f["index.json"] = index.dump();
  write_dir((dir_ / "arm").string(), f);
  auto none = store_->import((dir_ / "arm").string(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().context, "index: no manifest for linux/amd64");
}

TEST_F(ImageStoreTest, SharedLayersAreUnpackedOnceAndDeletedWithTheirLastImage) {
  const std::string base = base_layer();
  const std::string a = make_tar({file("a", "a")});
  const std::string b = make_tar({file("b", "b")});
  auto ia = store_->import(put("a.tar", pack(docker_archive({base, a}, "a:1"))), {});
  ASSERT_TRUE(ia.ok()) << ia.error().message();
  const std::string base_dir = layers_dir() + "/" + hex_of(digest(base));
  struct stat before {};
  ASSERT_EQ(::stat((base_dir + "/etc/os-release").c_str(), &before), 0);
  auto ib = store_->import(put("b.tar", pack(docker_archive({base, b}, "b:1"))), {});
  ASSERT_TRUE(ib.ok()) << ib.error().message();
  struct stat after {};
  ASSERT_EQ(::stat((base_dir + "/etc/os-release").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // not unpacked again
  EXPECT_EQ(std::distance(fs::directory_iterator(layers_dir()), fs::directory_iterator()), 3);

  ASSERT_TRUE(store_->remove("a:1", nullptr).ok());
  EXPECT_TRUE(fs::exists(base_dir));
  EXPECT_FALSE(fs::exists(layers_dir() + "/" + hex_of(digest(a))));
  EXPECT_EQ(store_->find("a:1").error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store_->remove("b:1", nullptr).ok());
  EXPECT_TRUE(fs::is_empty(layers_dir()));
  EXPECT_TRUE(store_->list().empty());
  EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
}

TEST_F(ImageStoreTest, ABlobWhoseDigestIsNotItsNameLeavesTheStoreUnchanged) {
  ASSERT_TRUE(store_->import(put("keep.tar", base_layer()), {}).ok());
  const auto before = snapshot();
  const std::string layer = make_tar({file("x", "x")});
  Files layout = oci_layout({layer}, "bad");
  // Another valid layer put in the blob's place: it unpacks, but its name lies.
  const std::string other = make_tar({file("x", "y")});
  std::string gz_name;
  for (auto& [path, data] : layout)
    if (path.rfind("blobs/", 0) == 0 && data.size() > 2 &&
        static_cast<unsigned char>(data[0]) == 0x1f)
      gz_name = path;
  ASSERT_FALSE(gz_name.empty());
  layout[gz_name] = other;
  write_dir((dir_ / "bad").string(), layout);
  auto r = store_->import((dir_ / "bad").string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context, "layer " + gz_name + ": digest mismatch: its sha256 is " +
                                   digest(other) + ", its name says sha256:" + gz_name.substr(13));
  expect_unchanged(before);
}

TEST_F(ImageStoreTest, AManifestOrConfigWhoseDigestIsWrongIsRefused) {
  const auto before = snapshot();
  Files layout = oci_layout({make_tar({file("x", "x")})}, "bad");
  nlohmann::json index = nlohmann::json::parse(layout["index.json"]);
  std::string md = index["manifests"][0]["digest"];
  layout["blobs/sha256/" + md.substr(7)] += " ";
  auto r = store_->import(put("bad.tar", pack(layout)), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "manifest blobs/sha256/" + md.substr(7) +
                                   ": digest mismatch: its sha256 is " +
                                   digest(layout["blobs/sha256/" + md.substr(7)]));
  expect_unchanged(before);
}

TEST_F(ImageStoreTest, ALayerThatIsNotWhatTheConfigSaysIsRefused) {
  const auto before = snapshot();
  const std::string real = make_tar({file("x", "x")});
  Files f = docker_archive({real}, "liar:1");
  const std::string other = make_tar({file("x", "evil")});
  f[hex_of(digest(real)) + ".tar"] = other;
  auto r = store_->import(put("liar.tar", pack(f)), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "layer " + hex_of(digest(real)) +
                                   ".tar: digest mismatch: its content's sha256 is " +
                                   digest(other) + ", the config says " + digest(real));
  expect_unchanged(before);
}

TEST_F(ImageStoreTest, ATruncatedArchiveLeavesTheStoreUnchanged) {
  const auto before = snapshot();
  const std::string whole =
      pack(docker_archive({base_layer(), make_tar({file("big", std::string(50000, 'z'))})}, "t:1"));
  auto r = store_->import(put("cut.tar", whole.substr(0, whole.size() * 2 / 3)), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context.rfind("corrupt archive: ", 0), 0u) << r.error().context;
  expect_unchanged(before);
}

TEST_F(ImageStoreTest, NotAnArchiveAtAllIsRefused) {
  const auto before = snapshot();
  auto r = store_->import(put("junk.tar", std::string(4096, '\x07')), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context.rfind("not an image archive or rootfs tar: ", 0), 0u)
      << r.error().context;
  expect_unchanged(before);
}

TEST_F(ImageStoreTest, AHostileLayerInAnImageLeavesTheStoreUnchanged) {
  const auto before = snapshot();
  const std::string good = base_layer();
  const std::string evil = make_tar({file("ok", "1"), file("../../../../tmp/pwned", "x")});
  auto r = store_->import(put("evil.tar", pack(docker_archive({good, evil}, "evil:1"))), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "layer " + hex_of(digest(evil)) +
                                   ".tar: entry '../../../../tmp/pwned': '..' component (refused)");
  expect_unchanged(before);  // the good layer unpacked first is gone too
}

TEST_F(ImageStoreTest, TheImageSizeLimitCoversAllLayers) {
  reopen(StoreLimits{1 << 20, 1000, 64});
  const auto before = snapshot();
  const std::string l1 = make_tar({file("a", std::string(600 << 10, 'a'))});
  const std::string l2 = make_tar({file("b", std::string(600 << 10, 'b'))});
  auto r = store_->import(put("big.tar", pack(docker_archive({l1, l2}, "big:1"))), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().context,
            "layer " + hex_of(digest(l2)) +
                ".tar: the image is larger than its limit (--max-image-bytes 1048576)");
  expect_unchanged(before);
}

// Each hostile layer, imported as a rootfs into a store that already holds
// an image: the exact error, and nothing of it left behind.
TEST_F(ImageStoreTest, EveryHostileLayerGetsItsErrorAndLeavesTheStoreUnchanged) {
  reopen(StoreLimits{1 << 20, 50, 16});
  ASSERT_TRUE(store_->import(put("keep.tar", make_tar({file("k", "k")})), {}).ok());
  const auto before = snapshot();
  std::string corrupt_gz = make_tar({file("a", std::string(100000, 'a'))}, "gzip");
  for (size_t i = 40; i < 60; ++i) corrupt_gz[i] = static_cast<char>(corrupt_gz[i] ^ 0x5a);
  const std::string whole = make_tar({file("a", std::string(10000, 'a')), file("b", "b")});
  TarEntry bomb = file("zeros", "");
  bomb.size = 2 << 20;
  std::vector<TarEntry> many;
  for (int i = 0; i < 60; ++i) many.push_back(file(std::to_string(i), ""));
  std::string deep;
  for (int i = 0; i < 17; ++i) deep += "d/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {corrupt_gz, "corrupt archive: gzip decompression failed"},
      {whole.substr(0, 6000), "rootfs: entry 'a': Truncated tar archive"},
      {make_tar({file("ok", "1"), file("x/../../y", "y")}),
       "rootfs: entry 'x/../../y': '..' component (refused)"},
      {make_tar({file("ok", "1"), file("/etc/passwd", "y")}),
       "rootfs: entry '/etc/passwd': absolute path (refused)"},
      {make_tar({file("ok", "1"), hardlink("h", "../../etc/shadow")}),
       "rootfs: entry 'h': hardlink target: entry '../../etc/shadow': '..' component (refused)"},
      {make_tar({symlink("etc", "/etc"), file("etc/cron.d/x", "y")}),
       "rootfs: entry 'etc/cron.d/x': its parent 'etc' is a symlink (refused: nothing is written "
       "through one)"},
      {make_tar({bomb}, "gzip"),
       "rootfs: the image is larger than its limit (--max-image-bytes 1048576)"},
      {make_tar(many), "rootfs: the image has more tar entries than its limit"},
      {make_tar({file(deep + "f", "x")}),
       "rootfs: entry '" + deep + "f': deeper than 16 directories (refused)"},
  };
  int n = 0;
  for (const auto& [bytes, error] : cases) {
    auto r = store_->import(put("hostile" + std::to_string(n++) + ".tar", bytes), {});
    ASSERT_FALSE(r.ok()) << error;
    EXPECT_EQ(r.error().context, error);
    expect_unchanged(before);
  }
}

TEST_F(ImageStoreTest, SetuidFilesAndDevicesAreReportedInTheResult) {
  auto r = store_->import(
      put("s.tar", make_tar({file("usr/bin/sudo", "x", 04755), file("usr/bin/wall", "x", 02755),
                             device("dev/null", AE_IFCHR, 1, 3)})),
      {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->warnings,
            (std::vector<std::string>{"stripped setuid/setgid bits from 2 files",
                                      "skipped 1 device node (a sandbox has its own /dev)"}));
}

TEST_F(ImageStoreTest, RemoveIsRefusedWhileASandboxUsesTheImage) {
  auto r = store_->import(put("busy.tar", base_layer()), {});
  ASSERT_TRUE(r.ok());
  auto busy = store_->remove("busy", [](const std::string&) {
    return std::vector<std::string>{"sb-1", "sb-2"};
  });
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(busy.error().context, "image 'busy' is in use by sandboxes sb-1, sb-2");
  // Recorded use, as another process (the CLI) sees it.
  ASSERT_TRUE(store_->mark_in_use(r->id, "sb-9").ok());
  reopen();
  auto recorded = store_->remove("busy", nullptr);
  ASSERT_FALSE(recorded.ok());
  EXPECT_EQ(recorded.error().context, "image 'busy' is in use by sandbox sb-9");
  ASSERT_TRUE(store_->find("busy").ok());
  ASSERT_TRUE(store_->release(r->id, "sb-9").ok());
  EXPECT_TRUE(store_->remove("busy", nullptr).ok());
}

TEST_F(ImageStoreTest, OpenRemovesWhatACrashedImportLeft) {
  auto r = store_->import(put("keep.tar", base_layer()), {});
  ASSERT_TRUE(r.ok());
  fs::create_directories(state() + "/images/tmp/abc/0/usr");
  write_bytes(state() + "/images/tmp/abc/0/usr/half", "x");
  const std::string orphan = layers_dir() + "/" + std::string(64, 'e');
  fs::create_directories(orphan + "/etc");  // renamed into place, row never written
  ::chmod((orphan + "/etc").c_str(), 0555);
  reopen();
  EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(store_->layer_dirs(*r).ok());
}

TEST_F(ImageStoreTest, OpenLeavesTmpAloneWhileAnotherImportRuns) {
  // An import in another process holds the store's lock shared.
  int fd = ::open((state() + "/images/lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  fs::create_directories(state() + "/images/tmp/running/0");
  reopen();
  EXPECT_TRUE(fs::exists(state() + "/images/tmp/running/0"));
  ::close(fd);
  reopen();
  EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
}

TEST_F(ImageStoreTest, ConcurrentImportsSharingALayerUnpackItOnce) {
  const std::string base = base_layer();
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    std::string name = std::to_string(i);
    paths.push_back(
        put(name + ".tar", pack(docker_archive({base, make_tar({file(name, name)})}, "c" + name))));
  }
  std::vector<std::thread> threads;
  std::vector<Result<ImageRecord>> results(paths.size(),
                                           Error::make(ErrorCode::kInternal, "not run"));
  for (size_t i = 0; i < paths.size(); ++i)
    threads.emplace_back([&, i] { results[i] = store_->import(paths[i], {}); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(store_->list().size(), 4u);
  EXPECT_EQ(std::distance(fs::directory_iterator(layers_dir()), fs::directory_iterator()), 5);
  EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
  for (const auto& r : results) EXPECT_TRUE(store_->layer_dirs(*r).ok());
}

TEST_F(ImageStoreTest, AddLayerMakesAnImageOnTopOfItsBase) {
  auto base = store_->import(put("base.tar", base_layer()), {});
  ASSERT_TRUE(base.ok());
  const std::string layer =
      make_tar({file("workspace/main.py", "print(1)\n"), file("etc/.wh.os-release", "")});
  ImageConfig cfg;
  cfg.env = {"X=1"};
  cfg.working_dir = "/workspace";
  auto r = store_->add_layer(*base, put("upper.tar", layer), "saved", cfg, "save:sb-1", "");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "saved");
  EXPECT_EQ(r->source, "save:sb-1");
  EXPECT_EQ(r->layers, (std::vector<std::string>{base->layers[0], digest(layer)}));
  EXPECT_EQ(r->config.working_dir, "/workspace");
  EXPECT_NE(r->id, base->id);
  auto dirs = store_->layer_dirs(*r);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(read_bytes((*dirs)[1] + "/workspace/main.py"), "print(1)\n");
  // The base cannot go while the saved image needs its layer; rm of the base keeps it.
  ASSERT_TRUE(store_->remove("base", nullptr).ok());
  EXPECT_TRUE(store_->layer_dirs(*r).ok());
}

// Names are global: a tenant's save_sandbox must never move a name another
// tenant or the operator made (everyone's create_sandbox of it would start on
// the tenant's files).
TEST_F(ImageStoreTest, ASavedNameMovesOnlyForTheOwnerWhoMadeIt) {
  auto base = store_->import(put("base.tar", base_layer()), {});
  ASSERT_TRUE(base.ok()) << base.error().message();
  auto layer = [&](const std::string& text) {
    return put(text + ".tar", make_tar({file("workspace/who", text)}));
  };
  auto a = store_->add_layer(*base, layer("a1"), "base-x", {}, "save:sb-a", "key:A");
  ASSERT_TRUE(a.ok()) << a.error().message();

  auto b = store_->add_layer(*base, layer("b1"), "base-x", {}, "save:sb-b", "key:B");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(b.error().message(),
            "image name 'base-x' is taken (made by another key): save under another name");
  EXPECT_EQ(store_->find("base-x")->id, a->id);
  EXPECT_EQ(store_->check_name("base-x", "session:s1").error().message(),
            "image name 'base-x' is taken (made by another key): save under another name");

  auto a2 = store_->add_layer(*base, layer("a2"), "base-x", {}, "save:sb-a", "key:A");
  ASSERT_TRUE(a2.ok()) << a2.error().message();
  EXPECT_NE(a2->id, a->id);
  EXPECT_EQ(store_->find("base-x")->id, a2->id);

  // The operator's names (import, pull, build) are the operator's.
  auto op = store_->add_layer(*base, layer("a3"), "base", {}, "save:sb-a", "key:A");
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(op.error().message(),
            "image name 'base' is taken (made by the operator): save under another name");
  EXPECT_EQ(store_->find("base")->id, base->id);
  // The local user is the operator: it may move them, not a key's.
  EXPECT_TRUE(store_->check_name("base", "").ok());
  EXPECT_EQ(store_->check_name("base-x", "").error().code, ErrorCode::kAlreadyExists);
  // A refused save left nothing behind.
  EXPECT_TRUE(fs::is_empty(state() + "/images/tmp"));
  EXPECT_EQ(store_->list().size(), 3u);
}

// A new name a lookup reaches first would hide another owner's just as well.
TEST_F(ImageStoreTest, ASavedNameMayNotHideAnotherOwnersNameOrAnId) {
  auto base = store_->import(put("base.tar", base_layer()), {.name = "py:latest", .source = ""});
  ASSERT_TRUE(base.ok()) << base.error().message();
  for (const std::string name : {"py", "localhost/py"}) {
    auto st = store_->check_name(name, "key:A");
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists) << name;
    EXPECT_EQ(st.error().message(), "image name '" + name +
                                        "' is taken (made by the operator as 'py:latest'): "
                                        "save under another name");
  }
  // Names the lookup of "py" reaches after "py:latest" hide nothing.
  EXPECT_TRUE(store_->check_name("localhost/py:latest", "key:A").ok());
  EXPECT_TRUE(store_->check_name("py:3", "key:A").ok());
  // Names are looked up before ids: a hex name would hide an image's id.
  for (const std::string& name : {base->id.substr(7, 12), "localhost/" + base->id.substr(7)}) {
    auto st = store_->check_name(name, "key:A");
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument) << name;
  }
}

// A store made before names had owners: its names are the operator's.
TEST_F(ImageStoreTest, NamesOfAnOlderStoreAreTheOperators) {
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((state() + "/sandcastle.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "DROP TABLE image_tags;"
                           "CREATE TABLE image_tags (tag TEXT PRIMARY KEY, image_id TEXT NOT NULL);"
                           "INSERT INTO image_tags VALUES('old', 'sha256:gone')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  reopen();
  reopen();  // the migration runs once
  EXPECT_EQ(store_->check_name("old", "key:A").error().message(),
            "image name 'old' is taken (made by the operator): save under another name");
  EXPECT_TRUE(store_->check_name("old", "").ok());
}

TEST_F(ImageStoreTest, RemovingOneNameOfSeveralKeepsTheImage) {
  auto r = store_->import(put("a.tar", base_layer()), ImportOptions{"first", ""});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(store_->import(put("b.tar", base_layer()), ImportOptions{"second", ""}).ok());
  ASSERT_TRUE(store_->remove("first", nullptr).ok());
  auto left = store_->find("second");
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->id, r->id);
  EXPECT_EQ(left->name, "second");
  EXPECT_TRUE(left->tags.empty());
  EXPECT_EQ(store_->find("first").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store_->layer_dirs(*left).ok());
  // The last name, or the id, removes the image.
  ASSERT_TRUE(store_->remove(r->id, nullptr).ok());
  EXPECT_TRUE(store_->list().empty());
  EXPECT_TRUE(fs::is_empty(layers_dir()));
}

TEST_F(ImageStoreTest, NamesComeFromTheFileWhenTheArchiveHasNone) {
  auto r = store_->import(put("my image (v2).tar.gz", make_tar({file("a", "a")}, "gzip")), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "my-image--v2-");
}

TEST_F(ImageStoreTest, BadNamesAreRefused) {
  auto r = store_->import(put("x.tar", base_layer()), ImportOptions{"../etc", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      store_->import(put("y.tar", base_layer()), ImportOptions{"sha256:abc", ""}).error().code,
      ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandcastle::images

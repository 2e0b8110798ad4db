// `sandcastle image ...` as a user runs it (the real binary), and the round
// trip through podman and skopeo: one busybox rootfs saved as a docker
// archive, an OCI archive and an OCI layout imports to the same image.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../../unit/images/image_archives.h"
#include "images/image_store.h"
#include "images/layer_unpack.h"

extern char** environ;

namespace sandcastle::images {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the tar builders

struct CmdRun {
  int code = -1;
  std::string out, err;
};

CmdRun run(const std::vector<std::string>& argv, const std::string& scratch) {
  CmdRun r;
  const std::string out = scratch + "/cmd.out", err = scratch + "/cmd.err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = "spawn " + argv[0] + ": " + std::to_string(rc);
    return r;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

bool on_path(const std::string& tool) {
  for (const char* d : {"/usr/bin/", "/usr/local/bin/", "/bin/"})
    if (::access((std::string(d) + tool).c_str(), X_OK) == 0) return true;
  return false;
}

class ImageCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sc-image-cli-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    (void)remove_tree(dir_.string());
    fs::create_directories(dir_);
  }
  void TearDown() override { (void)remove_tree(dir_.string()); }

  CmdRun sc(std::vector<std::string> args, const std::string& state = "state") {
    args.insert(args.begin(), {SANDCASTLE_BINARY, "--state-dir", (dir_ / state).string()});
    return run(args, dir_.string());
  }
  std::string put(const std::string& name, const std::string& bytes) {
    std::string p = (dir_ / name).string();
    write_bytes(p, bytes);
    return p;
  }

  fs::path dir_;
};

TEST_F(ImageCliTest, ImportListInspectRm) {
  const std::string tar = make_tar({dir("usr/bin"), file("usr/bin/python3", "#!elf", 0755),
                                    symlink("bin", "usr/bin"), file("usr/bin/sh", "#!elf", 0755),
                                    file("etc/.wh.gone", ""), file("usr/bin/su", "x", 04755)});
  auto imp = sc({"image", "import", put("mini.tar", tar), "--name", "mini"});
  ASSERT_EQ(imp.code, 0) << imp.err;
  auto ls = sc({"image", "list", "--json"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  auto list = nlohmann::json::parse(ls.out);
  ASSERT_EQ(list.size(), 1u);
  const std::string image_id = list[0]["id"];
  EXPECT_EQ(imp.out, "imported mini (" + image_id.substr(7, 12) +
                         "): 1 layer, 11 B, languages: python, sh\n");
  EXPECT_EQ(imp.err, "warning: stripped setuid/setgid bits from 1 file\n");
  EXPECT_EQ(list[0]["name"], "mini");
  EXPECT_EQ(list[0]["source"], "import:rootfs");
  EXPECT_EQ(list[0]["layers"][0], digest(tar));
  EXPECT_EQ(list[0]["languages"], nlohmann::json({"python", "sh"}));

  // The whiteout is an overlay 0:0 device, made without CAP_MKNOD in the
  // unprivileged run.
  struct stat st {};
  const std::string layer = (dir_ / "state/images/layers/sha256" / hex_of(digest(tar))).string();
  ASSERT_EQ(::lstat((layer + "/etc/gone").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  ASSERT_EQ(::lstat((layer + "/usr/bin/su").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, ::geteuid());

  auto table = sc({"image", "list"});
  ASSERT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("mini"), std::string::npos);
  EXPECT_NE(table.out.find(image_id.substr(7, 12)), std::string::npos);

  auto insp = sc({"image", "inspect", image_id.substr(7, 12), "--json"});
  ASSERT_EQ(insp.code, 0) << insp.err;
  EXPECT_EQ(nlohmann::json::parse(insp.out)["name"], "mini");

  // In use by a sandbox of a live process (this one): refused, the image stays.
  {
    auto store = ImageStore::open((dir_ / "state").string());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->mark_in_use(image_id, "sb-42").ok());
    auto busy = sc({"image", "rm", "mini"});
    EXPECT_EQ(busy.code, 1);
    EXPECT_EQ(busy.err, "sandcastle image: image 'mini' is in use by sandbox sb-42\n");
    ASSERT_TRUE((*store)->release(image_id, "sb-42").ok());
  }
  // A second name: rm of one name keeps the image.
  ASSERT_EQ(sc({"image", "import", (dir_ / "mini.tar").string(), "--name", "mini2"}).code, 0);
  auto untag = sc({"image", "--json", "rm", "mini2"});
  ASSERT_EQ(untag.code, 0) << untag.err;
  EXPECT_EQ(untag.out, "{\"untagged\":\"mini2\"}\n");
  auto rm = sc({"image", "rm", "mini"});
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_EQ(rm.out, "removed mini (" + image_id.substr(7, 12) + ")\n");
  EXPECT_FALSE(fs::exists(layer));
  auto gone = sc({"image", "inspect", "mini"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_EQ(gone.err, "sandcastle image: no image 'mini' (see `sandcastle image list`)\n");
}

TEST_F(ImageCliTest, HostileArchivesGetAClearErrorAndChangeNothing) {
  auto evil =
      sc({"image", "import", put("evil.tar", make_tar({file("ok", "1"), file("a/../../x", "x")}))});
  EXPECT_EQ(evil.code, 1);
  EXPECT_EQ(evil.err, "sandcastle image: rootfs: entry 'a/../../x': '..' component (refused)\n");
  auto abs = sc({"image", "import", put("abs.tar", make_tar({file("/etc/cron.d/x", "x")}))});
  EXPECT_EQ(abs.code, 1);
  EXPECT_EQ(abs.err, "sandcastle image: rootfs: entry '/etc/cron.d/x': absolute path (refused)\n");
  TarEntry bomb = file("zeros", "");
  bomb.size = 3 << 20;
  auto big = run({SANDCASTLE_BINARY, "--state-dir", (dir_ / "state").string(), "--max-image-bytes",
                  "2097152", "image", "import", put("bomb.tar.gz", make_tar({bomb}, "gzip"))},
                 dir_.string());
  EXPECT_EQ(big.code, 1);
  EXPECT_EQ(
      big.err,
      "sandcastle image: rootfs: the image is larger than its limit (--max-image-bytes 2097152)\n");
  auto ls = sc({"image", "list", "--json"});
  ASSERT_EQ(ls.code, 0);
  EXPECT_EQ(nlohmann::json::parse(ls.out), nlohmann::json::array());
  EXPECT_TRUE(fs::is_empty(dir_ / "state/images/tmp"));
  EXPECT_TRUE(fs::is_empty(dir_ / "state/images/layers/sha256"));
}

// The layers as the store unpacked them are what overlayfs wants: mounted
// as lower dirs, a whiteout hides a lower file and an opaque directory the
// lower directory's entries; both as real root (trusted.* xattrs) and in a
// user namespace (userxattr), which is how an unprivileged server mounts.
TEST_F(ImageCliTest, LayersMountAsAnOverlayWithWhiteoutsAndOpaqueDirectories) {
  const std::string l0 = make_tar({dir("etc"), file("etc/a", "A"), file("etc/b", "B"), dir("var"),
                                   file("var/x", "X"), file("var/y", "Y")});
  const std::string l1 = make_tar({dir("etc"), file("etc/.wh.a", ""), dir("var"),
                                   file("var/.wh..wh..opq", ""), file("var/z", "Z")});
  auto store = ImageStore::open((dir_ / "state").string());
  ASSERT_TRUE(store.ok());
  auto img = (*store)->import(put("ov.tar", pack(docker_archive({l0, l1}, "ov:1"))), {});
  ASSERT_TRUE(img.ok()) << img.error().message();
  auto dirs = (*store)->layer_dirs(*img);
  ASSERT_TRUE(dirs.ok());
  const std::string lower = (*dirs)[1] + ":" + (*dirs)[0];  // top first
  const std::string mnt = (dir_ / "mnt").string();
  fs::create_directories(mnt);
  std::vector<std::pair<std::string, std::vector<std::string>>> modes = {
      {"user namespace, userxattr",
       {"unshare", "-Urm", "sh", "-c",
        "mount -t overlay -o userxattr,lowerdir=" + lower + " overlay " + mnt + " && cd " + mnt +
            " && find . | sort | tr '\n' ' '"}}};
  if (::geteuid() == 0)
    modes.push_back({"root",
                     {"unshare", "-m", "sh", "-c",
                      "mount -t overlay -o lowerdir=" + lower + " overlay " + mnt + " && cd " +
                          mnt + " && find . | sort | tr '\n' ' '"}});
  for (const auto& [what, argv] : modes) {
    auto r = run(argv, dir_.string());
    ASSERT_EQ(r.code, 0) << what << ": " << r.err;
    EXPECT_EQ(r.out, ". ./etc ./etc/b ./var ./var/z ") << what;
  }
}

// podman import of a busybox rootfs, then each of the three ways podman and
// skopeo write it: sandcastle imports the same image with the same layer.
TEST_F(ImageCliTest, PodmanAndSkopeoArchivesImportToTheSameImage) {
  if (::geteuid() != 0) GTEST_SKIP() << "podman's own storage is set up as root only";
  if (!on_path("podman") || !on_path("skopeo") || ::access("/bin/busybox", X_OK) != 0)
    GTEST_SKIP() << "podman, skopeo or busybox-static missing";
  const fs::path rootfs = dir_ / "rootfs";
  fs::create_directories(rootfs / "bin");
  fs::create_directories(rootfs / "etc");
  fs::copy_file("/bin/busybox", rootfs / "bin/busybox");
  for (const char* applet : {"sh", "ls", "cat", "echo"})
    fs::create_symlink("busybox", rootfs / "bin" / applet);
  write_bytes((rootfs / "etc/passwd").string(), "root:x:0:0:root:/root:/bin/sh\n");
  const std::string rootfs_tar = (dir_ / "rootfs.tar").string();
  auto t =
      run({"tar", "-C", rootfs.string(), "--numeric-owner", "-cf", rootfs_tar, "."}, dir_.string());
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string layer_digest = digest(read_bytes(rootfs_tar));

  // podman wants a runroot of at most 50 characters.
  char short_dir[] = "/tmp/scp-XXXXXX";
  ASSERT_NE(::mkdtemp(short_dir), nullptr);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)remove_tree(dir); }
  } cleanup{short_dir};
  const std::string root = cleanup.dir + "/root", runroot = cleanup.dir + "/run";
  std::vector<std::string> podman = {"podman", "--root",           root, "--runroot",
                                     runroot,  "--storage-driver", "vfs"};
  auto with = [&](std::vector<std::string> base, std::vector<std::string> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  auto p = run(with(podman, {"import", rootfs_tar, "localhost/bb:latest"}), dir_.string());
  ASSERT_EQ(p.code, 0) << p.err;
  const std::string docker_tar = (dir_ / "bb-docker.tar").string(),
                    oci_tar = (dir_ / "bb-oci.tar").string();
  const std::string oci_dir = (dir_ / "bb-oci").string();
  ASSERT_EQ(run(with(podman, {"save", "--format", "docker-archive", "-o", docker_tar,
                              "localhost/bb:latest"}),
                dir_.string())
                .code,
            0);
  ASSERT_EQ(
      run(with(podman, {"save", "--format", "oci-archive", "-o", oci_tar, "localhost/bb:latest"}),
          dir_.string())
          .code,
      0);
  auto sk = run(
      {"skopeo", "copy", "containers-storage:[vfs@" + root + "+" + runroot + "]localhost/bb:latest",
       "oci:" + oci_dir + ":bb"},
      dir_.string());
  ASSERT_EQ(sk.code, 0) << sk.err;
  auto podman_id =
      run(with(podman, {"image", "inspect", "--format", "{{.Id}}", "localhost/bb:latest"}),
          dir_.string());
  ASSERT_EQ(podman_id.code, 0);
  podman_id.out.erase(podman_id.out.find_last_not_of('\n') + 1);

  int n = 0;
  for (const auto& [path, source] :
       std::vector<std::pair<std::string, std::string>>{{docker_tar, "import:docker-archive"},
                                                        {oci_tar, "import:oci"},
                                                        {oci_dir, "import:oci"}}) {
    // Each into a store of its own, so each unpacks its layer.
    const std::string state = "state" + std::to_string(n++);
    auto imp = sc({"image", "import", path, "--json"}, state);
    ASSERT_EQ(imp.code, 0) << path << ": " << imp.err;
    auto j = nlohmann::json::parse(imp.out);
    EXPECT_EQ(j["id"], "sha256:" + podman_id.out) << path;
    EXPECT_EQ(j["source"], source) << path;
    EXPECT_EQ(j["layers"], nlohmann::json({layer_digest})) << path;
    EXPECT_EQ(j["languages"], nlohmann::json({"sh"})) << path;
    const fs::path layer = dir_ / state / "images/layers/sha256" / hex_of(layer_digest);
    EXPECT_EQ(read_bytes((layer / "bin/busybox").string()), read_bytes("/bin/busybox")) << path;
    EXPECT_EQ(fs::read_symlink(layer / "bin/sh"), "busybox") << path;
    EXPECT_EQ(read_bytes((layer / "etc/passwd").string()), "root:x:0:0:root:/root:/bin/sh\n")
        << path;
    if (path == oci_dir)
      EXPECT_EQ(j["name"], "bb");
    else
      EXPECT_EQ(j["name"], "localhost/bb:latest") << path;
  }
}

}  // namespace
}  // namespace sandcastle::images

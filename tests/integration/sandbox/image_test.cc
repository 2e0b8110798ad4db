// Sandboxes rooted in an image (image_root.h): layers built here the way the
// image store keeps them (plain trees owned by the server's uid, whiteouts
// as 0:0 character devices, opaque dirs marked with user.overlay.opaque),
// with busybox as the userland.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "fixture.h"
#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::testing {
namespace {

void put(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0) << path << ": " << errno;
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::fchmod(fd, mode);
  ::close(fd);
}

void dir(const std::string& path, mode_t mode = 0755) {
  ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path << ": " << errno;
  ::chmod(path.c_str(), mode);
}

// Every entry of a tree (path -> type, mode, size, content of files): what
// "unchanged" means for a layer.
std::map<std::string, std::string> snapshot(const std::string& root, const std::string& rel = "") {
  std::map<std::string, std::string> out;
  for (const auto& name : native::list_dir(root + rel)) {
    const std::string p = rel + "/" + name;
    struct stat st {};
    if (::lstat((root + p).c_str(), &st) != 0) continue;
    std::string v = std::to_string(st.st_mode) + " " + std::to_string(st.st_uid) + " " +
                    std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                    std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode) && st.st_size < 4096) v += " " + native::read_small_file(root + p);
    out[p] = v;
    if (S_ISDIR(st.st_mode)) out.merge(snapshot(root, p));
  }
  return out;
}

// Layer 0: busybox and its applets, an /etc of the image's own.
// Layer 1: a whiteout over /etc/hidden, /etc/shadowed opaque, a new file.
std::string g_base;
std::vector<std::string> g_layers;

void build_layers() {
  char tmpl[] = "/tmp/sc-image-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  g_base = tmpl;
  ::chmod(g_base.c_str(), 0755);
  const std::string l0 = g_base + "/l0", l1 = g_base + "/l1";
  dir(l0);
  for (const char* d : {"bin", "etc", "etc/shadowed", "usr", "usr/bin", "srv", "home", "home/app"})
    dir(l0 + "/" + d);
  put(l0 + "/bin/busybox", native::read_small_file("/bin/busybox"), 0755);
  for (const char* applet : {"sh", "ls", "cat", "echo", "rm", "mkdir", "id", "dd", "stat", "touch",
                             "test", "pwd", "chmod", "wc", "head", "df", "true", "mount"})
    ASSERT_EQ(::symlink("busybox", (l0 + "/bin/" + applet).c_str()), 0);
  put(l0 + "/etc/os-release", "ID=sandcastle-test\nNAME=\"sandcastle test image\"\n");
  put(l0 + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1235:app:/home/app:/bin/sh\n");
  put(l0 + "/etc/group", "root:x:0:\napp:x:1235:\nstaff:x:50:\n");
  put(l0 + "/etc/hidden", "lower\n");
  put(l0 + "/etc/shadowed/old", "lower\n");
  put(l0 + "/srv/data", "served\n");
  dir(l1);
  dir(l1 + "/etc");
  ASSERT_EQ(::mknod((l1 + "/etc/hidden").c_str(), S_IFCHR | 0, makedev(0, 0)), 0) << errno;
  dir(l1 + "/etc/shadowed");
  ASSERT_EQ(::setxattr((l1 + "/etc/shadowed").c_str(), "user.overlay.opaque", "y", 1, 0), 0)
      << errno;
  put(l1 + "/etc/shadowed/new", "upper\n");
  put(l1 + "/etc/added", "added\n");
  g_layers = {l0, l1};
  // A hostile top layer: symlinks (and a file) where the sandbox's mount
  // points go, aimed at a host directory the sandbox must never touch.
  const std::string evil = g_base + "/evil", victim = g_base + "/victim";
  dir(victim, 0700);
  put(victim + "/keep", "host file\n");
  dir(evil);
  for (const char* name : {"opt", "tmp", "dev"}) ASSERT_EQ(::symlink(victim.c_str(), (evil + "/" + name).c_str()), 0);
  ASSERT_EQ(::symlink("etc", (evil + "/proc").c_str()), 0);
  put(evil + "/workspace", "not a directory\n");
}

native::ImageRoot image(const std::string& name) {
  native::ImageRoot r;
  r.name = name;
  r.id = "sha256:test-" + name;
  r.layers = g_layers;
  r.languages = {"shell"};
  return r;
}

class ImageSandboxTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    build_layers();
    add_test_image(image("bb"));
    auto cfg = image("bb-config");
    cfg.env = {"FOO=image", "BAR=image", "PATH=/bin:/usr/bin"};
    cfg.working_dir = "/srv";
    cfg.user = "app";
    add_test_image(cfg);
    auto rooted = image("bb-root");
    rooted.user = "root";
    add_test_image(rooted);
    auto numeric = image("bb-numeric");
    numeric.user = "2000:staff";
    add_test_image(numeric);
    auto unknown = image("bb-unknown-user");
    unknown.user = "nosuchuser";
    add_test_image(unknown);
  }
  static void TearDownTestSuite() { (void)native::remove_tree(g_base); }

 protected:
  void SetUp() override {
    std::string why;
    backend_ = shared_backend(&why);
    ASSERT_NE(backend_, nullptr) << why;
  }
  std::unique_ptr<Sandbox> make(const std::string& name, SpecOptions o = {}) {
    o.image = name;
    auto spec = SandboxSpec::create(std::move(o));
    EXPECT_TRUE(spec.ok());
    auto sb = backend_->create(*spec);
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    return sb ? std::move(*sb) : nullptr;
  }
  static ExecResult sh(Sandbox& sb, const std::string& script) {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", script};
    req.timeout = std::chrono::seconds(20);
    auto r = sb.exec(req);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r ? *r : ExecResult{};
  }
  native::NativeBackend* backend_ = nullptr;
};

TEST_F(ImageSandboxTest, RootIsTheImage) {
  auto sb = make("bb");
  ASSERT_NE(sb, nullptr);
  auto r =
      sh(*sb,
         "cat /etc/os-release; test -e /usr/bin/python3 || echo no-python; "
         "test -e /usr/lib/x86_64-linux-gnu || echo no-host-usr; id -u; id -g; "
         "stat -c '%u %a' / /bin/busybox; pwd; ls -d /opt/sandcastle /workspace /tmp /dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(
      r.stdout_data,
      "ID=sandcastle-test\nNAME=\"sandcastle test image\"\nno-python\nno-host-usr\n1000\n1000\n"
      "1000 755\n1000 755\n/workspace\n/dev/null\n/opt/sandcastle\n/tmp\n/workspace\n");
  // The same isolation as the host image: /proc/sys, /dev and the drivers
  // are read-only, mount is denied.
  r = sh(*sb,
         "echo x > /proc/sys/kernel/hostname; touch /dev/x; touch /opt/sandcastle/x; "
         "mount -t tmpfs none /tmp; true");
  EXPECT_NE(r.stderr_data.find("/proc/sys/kernel/hostname: Read-only file system"),
            std::string::npos)
      << r.stderr_data;
  EXPECT_NE(r.stderr_data.find("/dev/x: Read-only file system"), std::string::npos)
      << r.stderr_data;
  EXPECT_NE(r.stderr_data.find("/opt/sandcastle/x: Read-only file system"), std::string::npos)
      << r.stderr_data;
  EXPECT_NE(r.stderr_data.find("mount: permission denied"), std::string::npos) << r.stderr_data;
}

// Mount points are made real directories inside the image, never followed
// out of it: the host directory the image's symlinks name stays untouched.
TEST_F(ImageSandboxTest, SymlinksAtMountPointsAreNotFollowed) {
  const std::string victim = g_base + "/victim";
  const auto before = snapshot(victim);
  auto evil = image("bb-evil");
  evil.layers.push_back(g_base + "/evil");
  add_test_image(evil);
  auto sb = make("bb-evil");
  // The host directory first: whatever the create did, it must not be here.
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(snapshot(victim), before);
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "stat -c '%F %a' /opt /opt/sandcastle /tmp /dev /proc /workspace; test -e /dev/null && "
                   "test -e /proc/self/status && echo proc-ok; touch /tmp/x /workspace/y && echo writable; "
                   "cat /etc/os-release | head -n1");
  EXPECT_EQ(r.stdout_data,
            "directory 755\ndirectory 755\ndirectory 1777\ndirectory 755\ndirectory 555\ndirectory 755\n"
            "proc-ok\nwritable\nID=sandcastle-test\n")
      << r.stderr_data;
}

TEST_F(ImageSandboxTest, WhiteoutsAndOpaqueDirsApply) {
  auto sb = make("bb");
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "test -e /etc/hidden || echo hidden-gone; ls /etc/shadowed; cat /etc/added");
  EXPECT_EQ(r.stdout_data, "hidden-gone\nnew\nadded\n") << r.stderr_data;
}

TEST_F(ImageSandboxTest, WritesStayInTheSandboxAndEndWithIt) {
  const auto before = snapshot(g_base);
  auto a = make("bb");
  ASSERT_NE(a, nullptr);
  auto r = sh(*a,
              "echo new > /etc/newfile && echo more >> /etc/os-release && rm /bin/ls && "
              "mkdir -p /usr/local/lib && echo lib > /usr/local/lib/x && chmod 700 /srv && "
              "cat /etc/newfile /usr/local/lib/x && test ! -e /bin/ls && tail -n1 /etc/os-release");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "new\nlib\nmore\n");
  // A neighbour on the same image sees none of it, nor does the next one.
  auto b = make("bb");
  ASSERT_NE(b, nullptr);
  const std::string check =
      "test -e /etc/newfile && echo leaked-file; test -e /bin/ls || echo leaked-rm; "
      "test -e /usr/local || echo clean; stat -c %a /srv; cat /etc/os-release | wc -l";
  EXPECT_EQ(sh(*b, check).stdout_data, "clean\n755\n2\n");
  EXPECT_TRUE(a->destroy().ok());
  auto c = make("bb");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(sh(*c, check).stdout_data, "clean\n755\n2\n");
  EXPECT_EQ(snapshot(g_base), before);
}

TEST_F(ImageSandboxTest, TheImageCannotBeModified) {
  const auto before = snapshot(g_base);
  ASSERT_GT(before.size(), 20u);
  auto sb = make("bb");
  ASSERT_NE(sb, nullptr);
  // Everything the sandbox can reach, removed or changed in its view.
  auto r = sh(*sb,
              "/bin/busybox chmod -R 777 / 2>/dev/null; /bin/busybox rm -rf / 2>/dev/null; "
              "/bin/busybox ls /bin /etc 2>&1; echo done");
  EXPECT_NE(r.stdout_data.find("done"), std::string::npos) << r.stdout_data << r.stderr_data;
  EXPECT_EQ(r.stdout_data.find("os-release"), std::string::npos) << r.stdout_data;
  EXPECT_TRUE(sb->destroy().ok());
  EXPECT_EQ(snapshot(g_base), before);
  auto next = make("bb");
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(sh(*next, "cat /etc/os-release | head -n1").stdout_data, "ID=sandcastle-test\n");
}

TEST_F(ImageSandboxTest, DiskLimitHoldsForRootAndWorkspace) {
  SpecOptions o;
  o.limits.disk_bytes = 8 * kMiB;
  auto sb = make("bb", o);
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "dd if=/dev/zero of=/big bs=1M count=20 2>&1; echo rc=$?");
  EXPECT_NE(r.stdout_data.find("No space left on device"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("rc=1"), std::string::npos) << r.stdout_data;
  r = sh(*sb, "dd if=/dev/zero of=/workspace/big bs=1M count=20 2>&1; echo rc=$?");
  EXPECT_NE(r.stdout_data.find("No space left on device"), std::string::npos) << r.stdout_data;
  // One limit for both: / and /workspace share it.
  r = sh(*sb,
         "rm -f /big /workspace/big; dd if=/dev/zero of=/usr/a bs=1M count=5 2>/dev/null && "
         "dd if=/dev/zero of=/workspace/b bs=1M count=5 2>&1; echo rc=$?");
  EXPECT_NE(r.stdout_data.find("No space left on device"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("rc=1"), std::string::npos) << r.stdout_data;
}

TEST_F(ImageSandboxTest, FileOperationsGoThroughTheWorker) {
  auto sb = make("bb");
  ASSERT_NE(sb, nullptr);
  ASSERT_TRUE(sb->write_file("notes.txt", "hello").ok());
  ASSERT_TRUE(sb->write_file("/etc/app.conf", "k=v\n").ok());
  auto back = sb->read_file("/etc/os-release");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->data, "ID=sandcastle-test\nNAME=\"sandcastle test image\"\n");
  auto hidden = sb->read_file("/etc/hidden");
  ASSERT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.error().sys_errno, ENOENT);
  EXPECT_EQ(sh(*sb, "cat /workspace/notes.txt /etc/app.conf").stdout_data, "hellok=v\n");
  auto ls = sb->list("/etc/shadowed");
  ASSERT_TRUE(ls.ok()) << ls.error().message();
  ASSERT_EQ(ls->entries.size(), 1u);
  EXPECT_EQ(ls->entries[0].name, "new");
}

TEST_F(ImageSandboxTest, ImageConfigApplies) {
  SpecOptions o;
  o.env = {{"FOO", "spec"}};
  auto sb = make("bb-config", o);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->spec().workdir(), "/srv");
  auto r = sh(
      *sb, "echo $FOO $BAR $PATH; pwd; id -u; id -g; cat data; touch /home/app/x && echo home-ok");
  EXPECT_EQ(r.stdout_data, "spec image /bin:/usr/bin\n/srv\n1234\n1235\nserved\nhome-ok\n")
      << r.stderr_data;
  // A spec's own workdir wins over the image's.
  SpecOptions w;
  w.workdir = "/workspace/sub";
  auto sb2 = make("bb-config", w);
  ASSERT_NE(sb2, nullptr);
  EXPECT_EQ(sb2->spec().workdir(), "/workspace/sub");

  auto rooted = make("bb-root");
  ASSERT_NE(rooted, nullptr);
  EXPECT_EQ(sh(*rooted, "id -u; id -g").stdout_data, "1000\n1000\n");
  auto numeric = make("bb-numeric");
  ASSERT_NE(numeric, nullptr);
  EXPECT_EQ(sh(*numeric, "id -u; id -g").stdout_data, "2000\n50\n");
}

TEST_F(ImageSandboxTest, BadImagesAreRefused) {
  SpecOptions o;
  o.image = "no-such-image";
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto sb = backend_->create(*spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kNotFound);
  o.image = "bb-unknown-user";
  sb = backend_->create(*SandboxSpec::create(o));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message().find("not in the image's /etc/passwd"), std::string::npos);
  auto bad = image("bb-bad-path");
  bad.layers.push_back("/tmp/a,upperdir=/etc");
  add_test_image(bad);
  o.image = "bb-bad-path";
  sb = backend_->create(*SandboxSpec::create(o));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
}

// Creates at once on one image (as root each makes an idmap namespace and
// binds: two once hung on each other's pipe).
TEST_F(ImageSandboxTest, ConcurrentCreatesAllSucceed) {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<Sandbox>> made(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      SpecOptions o;
      o.image = "bb";
      auto sb = backend_->create(*SandboxSpec::create(o));
      if (sb) made[i] = std::move(*sb);
      else errors[i] = sb.error().message();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_NE(made[i], nullptr) << errors[i];
    EXPECT_EQ(sh(*made[i], "head -n1 /etc/os-release").stdout_data, "ID=sandcastle-test\n");
  }
}

constexpr const char* kPoolChildEnv = "SANDCASTLE_IMAGE_POOL_CHILD";

// A backend whose pool spec names an image keeps sandboxes on it ready, with
// the image's config; once the store's image has another id, a pooled one
// made from the old is not handed out.
TEST(ImagePoolTest, ThePoolServesTheCurrentImage) {
  if (!std::getenv(kPoolChildEnv)) GTEST_SKIP() << "runs in a process of its own, started by ImagePool.*";
  build_layers();
  std::mutex mu;
  auto current = image("pooled");
  current.env = {"FOO=image"};
  current.working_dir = "/srv";
  current.user = "app";
  native::NativeBackendOptions o;
  o.pool.min = o.pool.max = 1;
  o.images = [&](const std::string& ref) -> Result<native::ImageRoot> {
    std::lock_guard lock(mu);
    if (ref != current.name) return Error::make(ErrorCode::kNotFound, ref);
    return current;
  };
  SpecOptions so;
  so.image = "pooled";
  o.pool_spec = *SandboxSpec::create(so);
  auto b = native::NativeBackend::create(o);
  ASSERT_TRUE(b.ok()) << b.error().message();
  auto& backend = **b;
  auto ready = [&] {
    return backend.wait_pool([](const native::PoolStats& st) { return st.ready == 1; }, std::chrono::seconds(30));
  };
  ASSERT_TRUE(ready());
  auto sb = backend.create(o.pool_spec);
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  EXPECT_EQ(backend.pool_stats().taken, 1u);
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo $FOO; pwd; id -u; head -n1 /etc/os-release; cat /etc/marker"};
  auto r = (*sb)->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "image\n/srv\n1234\nID=sandcastle-test\n");
  // The image is replaced (another id, one more layer) while one waits.
  ASSERT_TRUE(ready());
  const std::string marker = g_base + "/marker";
  dir(marker);
  dir(marker + "/etc");
  put(marker + "/etc/marker", "new image\n");
  {
    std::lock_guard lock(mu);
    current.id = "sha256:test-pooled-2";
    current.layers.push_back(marker);
  }
  auto sb2 = backend.create(o.pool_spec);
  ASSERT_TRUE(sb2.ok()) << sb2.error().message();
  r = (*sb2)->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "image\n/srv\n1234\nID=sandcastle-test\nnew image\n");
  // The image leaves the store: no sandbox on it, pooled or new.
  {
    std::lock_guard lock(mu);
    current.name = "renamed";
  }
  auto gone = backend.create(o.pool_spec);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  (void)(*sb)->destroy();
  (void)(*sb2)->destroy();
  backend.shutdown();
  (void)native::remove_tree(g_base);
}

TEST(ImagePool, TestsRunInAProcessOfTheirOwn) {
  auto child = run_tests_in_child("ImagePoolTest.*", kPoolChildEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test."), std::string::npos) << child.out;
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

// save_sandbox's layer (layer_export.h): made inside the sandbox, streamed
// to the server, unpacked the way the image store does (unpack_layer) and
// used as the top layer of a new image a sandbox then starts from.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "images/layer_unpack.h"
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

std::string g_base;

native::ImageRoot base_image() {
  native::ImageRoot r;
  r.name = "save-base";
  r.id = "sha256:test-save-base";
  r.layers = {g_base + "/l0"};
  r.languages = {"shell"};
  return r;
}

class SaveLayerTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sc-save-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    g_base = tmpl;
    ::chmod(g_base.c_str(), 0755);
    const std::string l0 = g_base + "/l0";
    dir(l0);
    for (const char* d : {"bin", "etc", "srv", "srv/tree", "usr"}) dir(l0 + "/" + d);
    put(l0 + "/bin/busybox", native::read_small_file("/bin/busybox"), 0755);
    for (const char* applet :
         {"sh", "ls", "cat", "echo", "rm", "mkdir", "ln", "mkfifo", "dd", "stat", "touch", "test",
          "readlink", "sleep", "true", "wc", "truncate"})
      ASSERT_EQ(::symlink("busybox", (l0 + "/bin/" + applet).c_str()), 0);
    put(l0 + "/etc/os-release", "ID=sandcastle-save-test\n");
    put(l0 + "/srv/data", "base data\n");
    put(l0 + "/srv/tree/old", "old\n");
    add_test_image(base_image());
  }
  static void TearDownTestSuite() { (void)images::remove_tree(g_base); }

 protected:
  void SetUp() override {
    std::string why;
    backend_ = shared_backend(&why);
    ASSERT_NE(backend_, nullptr) << why;
  }
  std::unique_ptr<Sandbox> make(const std::string& image) {
    SpecOptions o;
    o.image = image;
    auto spec = SandboxSpec::create(std::move(o));
    EXPECT_TRUE(spec.ok());
    auto sb = backend_->create(*spec);
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    return sb ? std::move(*sb) : nullptr;
  }
  static ExecResult sh(Sandbox& sb, const std::string& script) {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", script};
    req.timeout = std::chrono::seconds(30);
    auto r = sb.exec(req);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r ? *r : ExecResult{};
  }
  // Saves sb's layer and unpacks it as the store would; returns the layer dir.
  std::string save_and_unpack(Sandbox& sb, SavedLayer* out, const std::string& tag) {
    const std::string tar = g_base + "/" + tag + ".tar";
    auto saved = sb.save_layer(tar, SaveLimits{});
    EXPECT_TRUE(saved.ok()) << saved.error().message();
    if (!saved.ok()) return {};
    *out = *saved;
    const std::string layer = g_base + "/" + tag;
    EXPECT_EQ(::mkdir(layer.c_str(), 0755), 0);
    int fd = ::open(tar.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    images::FdSource src(fd);
    images::UnpackBudget budget{1ull << 30, 100000, 256};
    auto r = images::unpack_layer(src, layer, budget);
    ::close(fd);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return layer;
  }
  native::NativeBackend* backend_ = nullptr;
};

TEST_F(SaveLayerTest, SavedChangesComeBackInANewSandbox) {
  auto sb = make("save-base");
  ASSERT_NE(sb, nullptr);
  auto r = sh(
      *sb,
      "echo root-write > /etc/added && mkdir -p /usr/local/lib && echo lib > /usr/local/lib/x && "
      "echo ws > /workspace/w.txt && mkdir /workspace/d && echo deep > /workspace/d/f && "
      "ln /workspace/w.txt /workspace/hard && rm /srv/data && rm -r /srv/tree && mkdir /srv/tree "
      "&& "
      "echo new > /srv/tree/new && ln -s /etc/shadow /workspace/shadow && "
      "ln -s /proc/1/root /workspace/procroot && ln -s ../../etc /usr/local/up && "
      "mkfifo /workspace/fifo && echo ok");
  ASSERT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
  SavedLayer saved;
  const std::string layer = save_and_unpack(*sb, &saved, "round");
  ASSERT_FALSE(layer.empty());
  EXPECT_TRUE(saved.whole_root);
  EXPECT_EQ(saved.skipped, 1u);
  ASSERT_EQ(saved.skipped_paths.size(), 1u);
  EXPECT_EQ(saved.skipped_paths[0], "/workspace/fifo");
  // The links are links in the layer, with the sandbox's targets: nothing of
  // the host's /etc/shadow or /proc was read.
  struct stat st {};
  ASSERT_EQ(::lstat((layer + "/workspace/shadow").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  char target[256] = {};
  ASSERT_GT(::readlink((layer + "/workspace/procroot").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "/proc/1/root");
  EXPECT_NE(::lstat((layer + "/workspace/fifo").c_str(), &st), 0);

  auto img = base_image();
  img.name = "save-round";
  img.id = "sha256:test-save-round";
  img.layers.push_back(layer);
  add_test_image(img);
  auto again = make("save-round");
  ASSERT_NE(again, nullptr);
  r = sh(*again,
         "cat /etc/added /usr/local/lib/x /workspace/w.txt /workspace/d/f /srv/tree/new; "
         "test -e /srv/data || echo data-gone; ls /srv/tree; readlink /workspace/shadow; "
         "readlink /workspace/procroot; readlink /usr/local/up; stat -c %h /workspace/hard; "
         "test -e /workspace/fifo || echo no-fifo; cat /etc/os-release");
  EXPECT_EQ(
      r.stdout_data,
      "root-write\nlib\nws\ndeep\nnew\ndata-gone\nnew\n/etc/shadow\n/proc/1/root\n../../etc\n2\n"
      "no-fifo\nID=sandcastle-save-test\n")
      << r.stderr_data;
}

TEST_F(SaveLayerTest, ProcessesKeepRunningThroughASave) {
  auto sb = make("save-base");
  ASSERT_NE(sb, nullptr);
  ExecResult bg;
  std::thread t([&] {
    bg = sh(*sb,
            "touch /workspace/started; while [ ! -e /workspace/stop ]; do sleep 0.05; done; echo "
            "alive");
  });
  // Wait for the command to be running (an event, not a guess).
  for (int i = 0; i < 400 && !sb->stat("/workspace/started").ok(); ++i) ::usleep(25'000);
  SavedLayer saved;
  auto layer = save_and_unpack(*sb, &saved, "running");
  // As root on this host (a writable v1 freezer) the others were frozen for
  // the walk; where there is no freezer the result says so.
  if (::geteuid() == 0) {
    EXPECT_TRUE(saved.consistent) << saved.note;
  }
  EXPECT_EQ(saved.note.empty(), saved.consistent) << saved.note;
  ASSERT_TRUE(sb->write_file("/workspace/stop", "", 0644, false).ok());
  t.join();
  EXPECT_EQ(bg.exit_code, 0);
  EXPECT_EQ(bg.stdout_data, "alive\n");
}

// The freezer: while the worker walks, the sandbox's other processes stand
// still (root on a cgroup v1 host: a freezer group beside the server's).
// A busy loop's CPU time does not move while the group says FROZEN.
TEST_F(SaveLayerTest, OtherProcessesStandStillWhileTheLayerIsWalked) {
  std::string home;
  {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line))
      if (line.find(":freezer:") != std::string::npos)
        home = "/sys/fs/cgroup/freezer" + line.substr(line.rfind(':') + 1);
  }
  if (::geteuid() != 0 || home.empty() || ::access(home.c_str(), W_OK) != 0)
    GTEST_SKIP() << "needs root and a writable cgroup v1 freezer";
  auto sb = make("save-base");
  ASSERT_NE(sb, nullptr);
  // A big file, so the walk lasts long enough to look at the frozen group.
  auto r = sh(*sb, "dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && echo ok");
  ASSERT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
  ExecResult bg;
  std::thread spin([&] {
    bg = sh(*sb,
            "touch /workspace/started; while [ ! -e /workspace/stop ]; do :; done; echo thawed");
  });
  for (int i = 0; i < 400 && !sb->stat("/workspace/started").ok(); ++i) ::usleep(25'000);
  const std::string group = home + "/sandcastle-save-" + sb->id();
  // CPU time per process of the group: the freezer moves the processes
  // back out while still frozen, so the group's members change at the end;
  // only a process seen in both looks can have run in between.
  auto cpu_of = [](const std::string& procs) {
    std::map<long, std::uint64_t> total;
    std::ifstream in(procs);
    long pid = 0;
    while (in >> pid) {
      std::string stat = native::read_small_file("/proc/" + std::to_string(pid) + "/stat");
      auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream f(stat.substr(close + 2));
      std::string field;
      std::uint64_t utime = 0, stime = 0;
      for (int i = 3; i <= 15 && f >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
      }
      total[pid] = utime + stime;
    }
    return total;
  };
  std::atomic<bool> done{false};
  int looked = 0, moved = 0;
  std::thread watch([&] {
    while (!done) {
      if (native::read_small_file(group + "/freezer.state").rfind("FROZEN", 0) == 0) {
        const auto a = cpu_of(group + "/cgroup.procs");
        ::usleep(60'000);
        const auto b = cpu_of(group + "/cgroup.procs");
        if (native::read_small_file(group + "/freezer.state").rfind("FROZEN", 0) == 0) {
          ++looked;
          for (const auto& [pid, cpu] : b)
            if (auto it = a.find(pid); it != a.end() && it->second != cpu) ++moved;
        }
      }
      ::usleep(1000);
    }
  });
  SavedLayer saved;
  const std::string tar = g_base + "/frozen.tar";
  auto res = sb->save_layer(tar, SaveLimits{});
  done = true;
  watch.join();
  ASSERT_TRUE(res.ok()) << res.error().message();
  EXPECT_TRUE(res->consistent) << res->note;
  EXPECT_GT(looked, 0) << "the walk ended before the frozen group could be looked at";
  EXPECT_EQ(moved, 0);
  // Thawed and back where they were: the loop ends when told to.
  EXPECT_NE(::access(group.c_str(), F_OK), 0);
  ASSERT_TRUE(sb->write_file("/workspace/stop", "", 0644, false).ok());
  spin.join();
  EXPECT_EQ(bg.stdout_data, "thawed\n") << bg.stderr_data;
}

TEST_F(SaveLayerTest, AHugeSparseFileIsRefusedPastTheLimit) {
  auto sb = make("save-base");
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "truncate -s 200M /workspace/big && echo ok");
  ASSERT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
  const std::string tar = g_base + "/big.tar";
  auto saved = sb->save_layer(tar, SaveLimits{64ull << 20, 100000});
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(saved.error().message().find("/workspace/big (209715200 bytes) would make the layer "
                                         "larger than the limit of 67108864 bytes"),
            std::string::npos)
      << saved.error().message();
  // What reached the file is bounded by the limit, never the file's size.
  struct stat st {};
  ASSERT_EQ(::stat(tar.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 1 << 20);
  // The sandbox still works, and another save succeeds once the file is gone.
  r = sh(*sb, "rm /workspace/big && echo gone");
  EXPECT_EQ(r.stdout_data, "gone\n");
  SavedLayer ok;
  EXPECT_FALSE(save_and_unpack(*sb, &ok, "after-big").empty());
}

TEST_F(SaveLayerTest, EntryCapIsEnforcedInsideTheSandbox) {
  auto sb = make("save-base");
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "for i in 1 2 3 4 5 6 7 8 9 10; do touch /workspace/f$i; done; echo ok");
  ASSERT_EQ(r.stdout_data, "ok\n");
  auto saved = sb->save_layer(g_base + "/cap.tar", SaveLimits{1ull << 30, 5});
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(saved.error().message().find("more than 5 entries"), std::string::npos)
      << saved.error().message();
}

TEST_F(SaveLayerTest, HostImageSandboxSavesItsWorkspaceOnly) {
  auto sb = make("host");
  ASSERT_NE(sb, nullptr);
  auto r = sh(*sb, "echo hi > /workspace/h.txt && echo ok");
  ASSERT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
  SavedLayer saved;
  auto layer = save_and_unpack(*sb, &saved, "host");
  ASSERT_FALSE(layer.empty());
  EXPECT_FALSE(saved.whole_root);
  EXPECT_EQ(native::read_small_file(layer + "/workspace/h.txt"), "hi\n");
  auto names = native::list_dir(layer);
  EXPECT_EQ(names, std::vector<std::string>{"workspace"});
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

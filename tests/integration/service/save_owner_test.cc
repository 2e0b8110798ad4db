// save_sandbox's names against the real store and native backend: image
// names are global (every tenant's create_sandbox {image} reads them), so a
// save moves only a name its own owner made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "../sandbox/fixture.h"
#include "images/image_store.h"
#include "images/layer_unpack.h"
#include "sandbox/native/fs_util.h"
#include "service/sandboxes.h"
#include "tools/tool_env.h"

namespace sandcastle::service {
namespace {

void put(const std::string& path, const std::string& content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0) << path << ": " << errno;
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::fchmod(fd, mode);
  ::close(fd);
}

class SaveOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
    char tmpl[] = "/tmp/sc-save-owner-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The operator's image: busybox as /bin/sh, imported as a rootfs tar.
    const std::string root = dir_ + "/root";
    for (const std::string& d : {root, root + "/bin", root + "/etc", root + "/workspace"})
      ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
    put(root + "/bin/busybox", sandbox::native::read_small_file("/bin/busybox"), 0755);
    for (const char* applet : {"sh", "echo", "cat"})
      ASSERT_EQ(::symlink("busybox", (root + "/bin/" + applet).c_str()), 0);
    const std::string tar = dir_ + "/base.tar";
    ASSERT_EQ(std::system(("tar -cf " + tar + " -C " + root + " .").c_str()), 0);
    auto store = images::ImageStore::open(dir_ + "/state");
    ASSERT_TRUE(store.ok()) << store.error().message();
    store_ = std::move(*store);
    auto base = store_->import(tar, {.name = "owner-base", .source = ""});
    ASSERT_TRUE(base.ok()) << base.error().message();
    base_id_ = base->id;
    add_to_backend(*base);
    manager_ = std::make_unique<SandboxManager>(*backend_, ManagerOptions{});
    env_ = std::make_unique<tools::ToolEnv>(
        tools::ToolEnv{*manager_, tools::ToolConfig{}, store_.get()});
    svc_ = std::make_unique<Sandboxes>(*env_);
    manager_->start();
  }
  void TearDown() override {
    svc_.reset();
    if (manager_) manager_->shutdown();
    manager_.reset();
    store_.reset();
    if (!dir_.empty()) (void)images::remove_tree(dir_);
  }
  // The backend of the fixture takes its images from add_test_image.
  void add_to_backend(const images::ImageRecord& rec) {
    auto dirs = store_->layer_dirs(rec);
    ASSERT_TRUE(dirs.ok()) << dirs.error().message();
    sandbox::native::ImageRoot r;
    r.name = rec.name;
    r.id = rec.id;
    r.layers = *dirs;
    r.languages = rec.languages;
    sandbox::testing::add_test_image(r);
  }
  std::string create(const Caller& c, const std::string& image) {
    auto r = svc_->create(c, {{"image", image}, {"language", "sh"}});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? (*r)["sandbox_id"].get<std::string>() : std::string();
  }
  Result<json> save(const Caller& c, const std::string& id, const std::string& name) {
    return svc_->save(c, id, {{"name", name}});
  }

  sandbox::Backend* backend_ = nullptr;
  std::string dir_;
  std::unique_ptr<images::ImageStore> store_;
  std::string base_id_;
  std::unique_ptr<SandboxManager> manager_;
  std::unique_ptr<tools::ToolEnv> env_;
  std::unique_ptr<Sandboxes> svc_;
  const Caller alice_{"key:alice", "k-alice"};
  const Caller bob_{"key:bob", "k-bob"};
};

TEST_F(SaveOwnerTest, ANameMovesOnlyForTheKeyThatMadeIt) {
  const std::string a = create(alice_, "owner-base");
  const std::string b = create(bob_, "owner-base");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  auto first = save(alice_, a, "base-x");
  ASSERT_TRUE(first.ok()) << first.error().message();
  const std::string alice_id = (*first)["image"]["id"];

  auto taken = save(bob_, b, "base-x");
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(taken.error().message(),
            "image name 'base-x' is taken (made by another key): save under another name");
  EXPECT_EQ(store_->find("base-x")->id, alice_id);

  // Alice's own name moves to her newer image.
  ASSERT_TRUE(svc_->write_file(alice_, a, "/workspace/f", "again").ok());
  auto again = save(alice_, a, "base-x");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_NE((*again)["image"]["id"], alice_id);
  EXPECT_EQ(store_->find("base-x")->id, (*again)["image"]["id"].get<std::string>());

  // The operator's image name is not a key's to take.
  auto op = save(bob_, b, "owner-base");
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(op.error().message(),
            "image name 'owner-base' is taken (made by the operator): save under another name");
  EXPECT_EQ(store_->find("owner-base")->id, base_id_);
}

}  // namespace
}  // namespace sandcastle::service

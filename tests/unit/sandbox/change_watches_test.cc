// The server's workdir watches: an inotify instance is told apart from any
// other fd a sandbox could pass instead, a quiet watch says "unchanged" and
// a queued event "changed", and at most `capacity` are held, the least
// recently used dropped first.
#include "sandbox/native/change_watches.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace sandcastle::sandbox::native {
namespace {

class Dir {
 public:
  Dir() {
    char tmpl[] = "/tmp/sc-watch-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~Dir() { (void)std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }
  // An inotify instance watching the directory, as the file worker makes it.
  UniqueFd watch() const {
    UniqueFd fd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    EXPECT_TRUE(fd);
    EXPECT_GE(::inotify_add_watch(fd.get(), path_.c_str(), IN_CREATE | IN_MODIFY), 0);
    return fd;
  }
  void touch(const std::string& name) const {
    UniqueFd f(::open((path_ + "/" + name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ASSERT_TRUE(f);
  }

 private:
  std::string path_;
};

TEST(ChangeWatches, OnlyAnInotifyInstanceIsOne) {
  UniqueFd ino(::inotify_init1(IN_CLOEXEC));
  EXPECT_TRUE(is_inotify_fd(ino.get()));
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  EXPECT_FALSE(is_inotify_fd(r.get()));
  // Other anonymous inodes share the filesystem, not the name.
  UniqueFd ev(::eventfd(0, EFD_CLOEXEC));
  EXPECT_FALSE(is_inotify_fd(ev.get()));
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  EXPECT_FALSE(is_inotify_fd(ep.get()));
  UniqueFd file(::open("/proc/self/stat", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(is_inotify_fd(file.get()));
  EXPECT_FALSE(is_inotify_fd(-1));
}

TEST(ChangeWatches, QuietUntilAnEventIsQueued) {
  Dir d;
  ChangeWatches w(4);
  int owner = 0;
  const auto id = w.keep(&owner, d.watch());
  EXPECT_NE(id, 0u);
  EXPECT_EQ(w.changed(&owner, id), false);
  EXPECT_EQ(w.changed(&owner, id), false);  // asking consumes nothing
  d.touch("f");
  EXPECT_EQ(w.changed(&owner, id), true);
  EXPECT_EQ(w.changed(&owner, id), true);  // and stays changed
  // Another owner, or an id it was never given, learns nothing.
  int other = 0;
  EXPECT_EQ(w.changed(&other, id), std::nullopt);
  EXPECT_EQ(w.changed(&owner, id + 1), std::nullopt);
}

TEST(ChangeWatches, ANewWatchReplacesTheOwnersLast) {
  Dir d;
  ChangeWatches w(4);
  int owner = 0;
  const auto first = w.keep(&owner, d.watch());
  const auto second = w.keep(&owner, d.watch());
  EXPECT_NE(first, second);
  EXPECT_EQ(w.changed(&owner, first), std::nullopt);
  EXPECT_EQ(w.changed(&owner, second), false);
  EXPECT_EQ(w.held(), 1u);
  w.forget(&owner);
  EXPECT_EQ(w.changed(&owner, second), std::nullopt);
  EXPECT_EQ(w.held(), 0u);
}

TEST(ChangeWatches, TheLeastRecentlyUsedIsDroppedAtCapacity) {
  Dir d;
  ChangeWatches w(2);
  int a = 0, b = 0, c = 0;
  const auto ia = w.keep(&a, d.watch());
  const auto ib = w.keep(&b, d.watch());
  EXPECT_EQ(w.changed(&a, ia), false);  // a is now the most recently used
  const auto ic = w.keep(&c, d.watch());
  EXPECT_EQ(w.held(), 2u);
  EXPECT_EQ(w.changed(&b, ib), std::nullopt);
  EXPECT_EQ(w.changed(&a, ia), false);
  EXPECT_EQ(w.changed(&c, ic), false);
}

TEST(ChangeWatches, NoCapacityHoldsNothing) {
  Dir d;
  ChangeWatches w(0);
  int a = 0;
  const auto id = w.keep(&a, d.watch());
  EXPECT_EQ(w.changed(&a, id), std::nullopt);
  EXPECT_EQ(w.held(), 0u);
}

}  // namespace
}  // namespace sandcastle::sandbox::native

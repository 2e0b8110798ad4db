// A watched listing of the workdir (ListOptions::watch): the file worker's
// inotify instance, held by the server, tells every kind of change below
// the listed tree from none, so a run that changed nothing needs no
// listing after it. What it cannot cover (too many directories, a cut-short
// listing) gets no watch, and the caller lists as before.
#include <gtest/gtest.h>

#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class ChangeWatchTest : public SandboxTest {
 protected:
  Listing listing(bool watch = true, std::size_t max_entries = 10'000) {
    ListOptions o;
    o.recursive = true;
    o.watch = watch;
    o.max_entries = max_entries;
    o.skip = ".sandcastle";
    auto l = sb_->list("/workspace", o);
    EXPECT_TRUE(l.ok()) << l.error().message();
    return l.ok() ? std::move(*l) : Listing{};
  }
  // A fresh watch that has seen nothing yet.
  std::uint64_t watch() {
    const auto id = listing().watch;
    EXPECT_NE(id, 0u);
    EXPECT_EQ(sb_->changed_since(id), false);
    return id;
  }
  void ok(const ExecResult& r) { ASSERT_EQ(r.status(), 0) << r.stderr_data; }
};

TEST_F(ChangeWatchTest, EveryKindOfChangeBelowTheWorkdirIsSeen) {
  ok(sh("mkdir -p a/b && echo 1 > a/b/f && echo 1 > top && ln -s top link"));
  const char* changes[] = {
      "echo x > new",       // a new file
      "echo 2 >> a/b/f",    // a nested one appended to
      "touch -d @7 a/b/f",  // only its times
      "chmod 600 top",      // only its mode
      "mv a/b/f a/b/g",     // renamed in place
      "mv a/b/g g",         // moved up two directories
      "rm g",               // removed
      "mkdir -p a/b/c",     // a new directory
      "rmdir a/b/c",        // and gone again
      "ln -sfn a link",     // a symlink pointed elsewhere
      "truncate -s 0 new",  // cut to nothing
  };
  for (const char* change : changes) {
    const auto id = watch();
    ok(sh(change));
    EXPECT_EQ(sb_->changed_since(id), true) << change;
  }
  // Written through a mapping: the open for writing and its close are seen.
  const auto id = watch();
  ok(
      py("import mmap\n"
         "f = open('top', 'r+b')\n"
         "m = mmap.mmap(f.fileno(), 0)\n"
         "m[0:1] = b'z'\n"
         "m.flush()\n"));
  EXPECT_EQ(sb_->changed_since(id), true);
}

TEST_F(ChangeWatchTest, ReadingChangesNothing) {
  ok(sh("mkdir -p a/b && echo 1 > a/b/f"));
  const auto id = watch();
  ok(sh("cat a/b/f >/dev/null && ls -laR >/dev/null && stat a/b/f >/dev/null && true"));
  EXPECT_EQ(sb_->changed_since(id), false);
  // Outside the workdir, and in the state directory the listing leaves out.
  ok(sh("echo x > /tmp/elsewhere && mkdir -p .sandcastle && echo y > .sandcastle/x"));
  EXPECT_EQ(sb_->changed_since(id), true) << "creating .sandcastle itself is a change";
  const auto again = watch();
  ok(sh("echo z >> .sandcastle/x && echo w > /tmp/elsewhere"));
  EXPECT_EQ(sb_->changed_since(again), false);
}

// One watch covers at most kMaxWatchedDirs directories (the workdir
// itself included); a larger tree is listed after every run.
TEST_F(ChangeWatchTest, ATreeOfMoreDirectoriesThanTheCapGetsNoWatch) {
  ok(py("import os\nfor i in range(1023): os.mkdir(f'd{i}')\n"));
  EXPECT_NE(listing().watch, 0u) << "1,024 directories are watched";
  ok(sh("mkdir d1023"));
  EXPECT_EQ(listing().watch, 0u) << "1,025 are not";
}

TEST_F(ChangeWatchTest, OnlyAWatchedCompleteListingHasOne) {
  ok(sh("echo > a && echo > b && echo > c"));
  EXPECT_EQ(listing(/*watch=*/false).watch, 0u);
  const auto cut = listing(true, 2);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.watch, 0u);
  EXPECT_EQ(sb_->changed_since(0), std::nullopt);
}

TEST_F(ChangeWatchTest, AWatchEndsWithTheNextListingAndWithItsSandbox) {
  const auto first = watch();
  const auto second = watch();
  EXPECT_EQ(sb_->changed_since(first), std::nullopt);
  EXPECT_EQ(sb_->changed_since(second), false);
  ASSERT_TRUE(sb_->destroy().ok());
  EXPECT_EQ(sb_->changed_since(second), std::nullopt);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

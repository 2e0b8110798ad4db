// Two ways the server gives a sandbox something without a network path:
// ExecRequest::pass_fd (a descriptor of the server's that the command gets
// as its fd 3: the kernel's private channel) and publish_shared (files every
// sandbox sees read-only at kSharedDir: the kernel drivers).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class ChannelAndShareTest : public SandboxTest {};

ExecRequest cmd(std::vector<std::string> argv) {
  ExecRequest r;
  r.argv = std::move(argv);
  return r;
}

// The fds open in the command (a shell listing /proc/self/fd), one per line.
std::string open_fds(Sandbox& sb, int pass_fd) {
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "cd /proc/self/fd && for f in *; do echo $f; done"};
  req.pass_fd = pass_fd;
  auto r = sb.exec(req);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? r->stdout_data : "";
}

TEST_F(ChannelAndShareTest, PassedFdIsTheCommandsFd3AndNothingElseLeaks) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  ExecRequest req;
  // Reads a line from fd 3 and writes it back changed: both directions work.
  req.argv = {"/bin/sh", "-c", "read line <&3; echo \"got $line\" >&3"};
  req.pass_fd = theirs.get();
  std::thread peer([&] { (void)!::write(ours.get(), "hello\n", 6); });
  auto r = sb_->exec(req);
  peer.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  theirs.reset();  // the command has exited: with our copy gone, EOF follows its words
  std::string back;
  char buf[64];
  ssize_t n;
  while ((n = ::read(ours.get(), buf, sizeof buf)) > 0) back.append(buf, static_cast<std::size_t>(n));
  EXPECT_EQ(back, "got hello\n");

  // The shell lists 0, 1, 2 and the directory it reads (3 without a passed
  // fd; 4 with one, which is 3): nothing of the server's or the supervisor's.
  int sv2[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv2), 0);
  UniqueFd a(sv2[0]), b(sv2[1]);
  EXPECT_EQ(open_fds(*sb_, b.get()), "0\n1\n2\n3\n4\n");
  EXPECT_EQ(open_fds(*sb_, -1), "0\n1\n2\n3\n");
}

TEST_F(ChannelAndShareTest, PassedFdIsASocketNotAPipeOrFile) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  ExecRequest req;
  req.argv = {"/usr/bin/python3", "-c",
              "import os, stat, socket\n"
              "st = os.fstat(3)\n"
              "s = socket.socket(fileno=3)\n"
              "print(stat.S_ISSOCK(st.st_mode), s.family == socket.AF_UNIX, os.get_inheritable(3))\n"};
  req.pass_fd = theirs.get();
  auto r = sb_->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  // Inheritable as passed (the command decides whether its children get it).
  EXPECT_EQ(r->stdout_data, "True True True\n") << r->stderr_data;
}

TEST_F(ChannelAndShareTest, PublishedFileIsReadOnlyInEverySandboxIncludingEarlierOnes) {
  auto other = make();  // exists before the file does
  ASSERT_TRUE(other);
  const std::string name = "share-test-" + std::to_string(::getpid());
  ASSERT_TRUE(sb_->publish_shared(name, "first\n").ok());
  const std::string path = std::string(kSharedDir) + "/" + name;
  auto cat = sb_->exec(cmd({"/bin/cat", path}));
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(cat->stdout_data, "first\n");
  auto seen = other->exec(cmd({"/bin/cat", path}));
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->stdout_data, "first\n");

  // Replaced whole: a reader never sees a mix.
  ASSERT_TRUE(sb_->publish_shared(name, "second\n").ok());
  seen = other->exec(cmd({"/bin/cat", path}));
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->stdout_data, "second\n");

  // No sandbox can change it, add to it or remove it: the mount is
  // read-only (and the file 0444: opening it to write is refused first).
  for (const std::string& code : {"import os; os.open('" + std::string(kSharedDir) + "/new', os.O_WRONLY | os.O_CREAT)",
                                 "import os; os.unlink('" + path + "')",
                                 "import os; os.chmod('" + path + "', 0o666)"}) {
    auto r = sb_->exec(cmd({"/usr/bin/python3", "-c", "import errno\ntry:\n    " + code +
                                                                  "\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"}));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stdout_data, "EROFS\n") << code << ": " << r->stderr_data;
  }
  auto open_w = sb_->exec(cmd({"/usr/bin/python3", "-c",
                               "import errno, os\ntry:\n    os.open('" + path +
                                   "', os.O_WRONLY)\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"}));
  ASSERT_TRUE(open_w.ok());
  EXPECT_EQ(open_w->stdout_data, "EACCES\n") << open_w->stderr_data;
  seen = other->exec(cmd({"/bin/cat", path}));
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->stdout_data, "second\n");
  // Nor through the server's file API, which works on the sandbox's view.
  auto api = sb_->write_file(path, "x");
  EXPECT_FALSE(api.ok());
}

TEST_F(ChannelAndShareTest, PublishRefusesNamesThatLeaveTheDirectory) {
  for (const char* bad : {"", "a/b", "../x", ".hidden"}) {
    auto st = sb_->publish_shared(bad, "x");
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace sandcastle::sandbox::testing

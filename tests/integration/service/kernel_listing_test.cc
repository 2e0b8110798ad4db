// The workdir listing a Python kernel takes after each cell
// (CellRequest::list): the same files the file channel lists, so a call's
// files_created needs no second round trip; and a listing the cell forged
// (it can write to the driver's fd 3) ends the kernel like any bad frame.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "../sandbox/fixture.h"
#include "service/kernel.h"
#include "service/workspace_diff.h"

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

class KernelListingTest : public sandbox::testing::SandboxTest {
 protected:
  CellRequest cell(std::string code, std::size_t max_entries = 10'000) {
    CellRequest r;
    r.code = std::move(code);
    r.timeout = 20s;
    r.list = CellListRequest{sb_->spec().workdir(), max_entries, kSandcastleStateDir};
    return r;
  }

  // After a cell that made the test tree: the kernel's listing is the file
  // channel's, with the tree's files and none it must leave out.
  void expect_tree_listed(const Result<CellResult>& r) {
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_EQ(r->end, CellEnd::kCompleted) << r->stderr_data;
    ASSERT_TRUE(r->listing.has_value()) << "the driver sent no listing";
    EXPECT_FALSE(r->listing_truncated);
    bool truncated = true;
    const WorkspaceSnapshot channel = snapshot_workspace(*sb_, 10'000, &truncated).files;
    EXPECT_FALSE(truncated);
    EXPECT_EQ(*r->listing, channel);
    EXPECT_TRUE(channel.count("a/b/c/deep.txt"));
    EXPECT_TRUE(channel.count("z/d/shallow.txt"));
    EXPECT_EQ(channel.at("top.png").size, 10u);
    for (const auto& [name, sig] : *r->listing) {
      EXPECT_NE(name.rfind(".sandcastle", 0), 0u) << name;
      EXPECT_EQ(name.find("outside"), std::string::npos) << name;
      EXPECT_EQ(name.find("too_deep"), std::string::npos) << name;
      EXPECT_EQ(name.find("hidden"), std::string::npos) << name;
    }
  }
};

// A tree with what a listing must get right: nesting, the state directory
// left out, a symlink to a directory (listed, not followed), a FIFO, an
// unreadable directory, files deeper than the walk goes. The kernel's
// listing names the same regular files with the same sizes and times as the
// file channel's.
TEST_F(KernelListingTest, TheKernelListsWhatTheFileChannelLists) {
  Kernel k(*sb_, KernelLanguage::kPython);
  auto r =
      k.execute(cell("import os\n"
                     "os.makedirs('a/b/c', exist_ok=True)\n"
                     "open('a/b/c/deep.txt', 'w').write('deep')\n"
                     "open('top.png', 'wb').write(b'x' * 10)\n"
                     "os.makedirs('.sandcastle/python', exist_ok=True)\n"
                     "open('.sandcastle/python/m.py', 'w').write('')\n"
                     "os.makedirs('/tmp/elsewhere', exist_ok=True)\n"
                     "open('/tmp/elsewhere/outside.txt', 'w').write('no')\n"
                     "os.symlink('/tmp/elsewhere', 'link')\n"
                     "os.mkfifo('pipe')\n"
                     "os.makedirs('locked', exist_ok=True)\n"
                     "open('locked/hidden.txt', 'w').write('h')\n"
                     "os.chmod('locked', 0)\n"
                     "p = 'z'\n"
                     "for i in range(70):\n"
                     "    p += '/d'\n"
                     "os.makedirs(p)\n"
                     "open(p + '/too_deep.txt', 'w').write('')\n"
                     "open('z/d/shallow.txt', 'w').write('s')\n"));
  expect_tree_listed(r);
}

// The JavaScript driver's walk (through /proc/self/fd, as Node reads no
// directory by its fd) gives the same.
TEST_F(KernelListingTest, TheJavaScriptKernelListsWhatTheFileChannelLists) {
  Kernel k(*sb_, KernelLanguage::kJavaScript);
  auto r =
      k.execute(cell("const fs = require('fs');\n"
                     "fs.mkdirSync('a/b/c', { recursive: true });\n"
                     "fs.writeFileSync('a/b/c/deep.txt', 'deep');\n"
                     "fs.writeFileSync('top.png', 'x'.repeat(10));\n"
                     "fs.mkdirSync('.sandcastle/node', { recursive: true });\n"
                     "fs.writeFileSync('.sandcastle/node/m.js', '');\n"
                     "fs.mkdirSync('/tmp/elsewhere', { recursive: true });\n"
                     "fs.writeFileSync('/tmp/elsewhere/outside.txt', 'no');\n"
                     "fs.symlinkSync('/tmp/elsewhere', 'link');\n"
                     "fs.mkdirSync('locked');\n"
                     "fs.writeFileSync('locked/hidden.txt', 'h');\n"
                     "fs.chmodSync('locked', 0);\n"
                     "let p = 'z';\n"
                     "for (let i = 0; i < 70; i++) p += '/d';\n"
                     "fs.mkdirSync(p, { recursive: true });\n"
                     "fs.writeFileSync(p + '/too_deep.txt', '');\n"
                     "fs.writeFileSync('z/d/shallow.txt', 's');\n"
                     "fs.writeFileSync(Buffer.from('caf\\xe9.txt', 'latin1'), 'x');\n"
                     "fs.unlinkSync(Buffer.from('caf\\xe9.txt', 'latin1'));\n"));
  expect_tree_listed(r);

  auto capped = k.execute(cell("1", 3));
  ASSERT_TRUE(capped.ok()) << capped.error().message();
  ASSERT_TRUE(capped->listing.has_value());
  EXPECT_TRUE(capped->listing_truncated);
  EXPECT_LE(capped->listing->size(), 3u);

  auto odd =
      k.execute(cell("require('fs').writeFileSync(Buffer.from('caf\\xe9.txt', 'latin1'), 'x')"));
  ASSERT_TRUE(odd.ok()) << odd.error().message();
  EXPECT_FALSE(odd->listing.has_value()) << "a name that is not UTF-8 leaves it to the server";
}

// At the cap both stop at the same count and say so.
TEST_F(KernelListingTest, ACappedListingIsTruncatedLikeTheChannels) {
  Kernel k(*sb_, KernelLanguage::kPython);
  auto r = k.execute(cell("for i in range(8):\n    open('f%d' % i, 'w').write('x')\n", 5));
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_TRUE(r->listing.has_value());
  EXPECT_TRUE(r->listing_truncated);
  EXPECT_EQ(r->listing->size(), 5u);
  bool truncated = false;
  EXPECT_EQ(snapshot_workspace(*sb_, 5, &truncated).files.size(), 5u);
  EXPECT_TRUE(truncated);
}

// A name that is not UTF-8 cannot travel as JSON text: the driver sends no
// listing and the server lists through the file channel.
TEST_F(KernelListingTest, ANameThatIsNotUtf8LeavesTheListingToTheServer) {
  Kernel k(*sb_, KernelLanguage::kPython);
  auto r = k.execute(cell("open(b'caf\\xe9.txt', 'w').write('x')\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->end, CellEnd::kCompleted) << r->stderr_data;
  EXPECT_FALSE(r->listing.has_value());
  auto next = k.execute(cell("1"));
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->listing.has_value());
}

// The cell writes its own result frame with a forged listing on fd 3. A
// listing is checked against what was asked: no more entries, nothing from
// the skipped state directory; its names must be clean relative paths. Each
// ends the kernel with the malformed-frame error.
TEST_F(KernelListingTest, AForgedListingEndsTheKernel) {
  Kernel k(*sb_, KernelLanguage::kPython);
  const std::pair<std::string, std::string> cases[] = {
      {R"([["a",1,2,3],["b",1,2,3],["c",1,2,3]])",
       "a listing of 3 files, more than the 2 asked for"},
      {R"([[".sandcastle/python/m.py",1,2,3]])", "a listing holds \".sandcastle\""},
      {R"([["../../etc/passwd",1,2,3]])", "not a relative path"},
      {R"([["/etc/shadow",1,2,3]])", "not a relative path"},
  };
  for (const auto& [files, why] : cases) {
    SCOPED_TRACE(files);
    ASSERT_EQ(k.execute(cell("marker = 7"))->end, CellEnd::kCompleted);
    const std::string code =
        "import os, sys\n"
        "cid = sys.stdout.kernel.cell_id\n"
        "body = ('{\"type\":\"result\",\"id\":\"%s\",\"execution_count\":1,\"status\":\"ok\","
        "\"listing\":{\"files\":" +
        files +
        ",\"truncated\":false}}' % cid).encode()\n"
        "data = len(body).to_bytes(4, 'big') + body\n"
        "while data:\n"
        "    data = data[os.write(3, data):]\n"
        "import time\n"
        "time.sleep(5)\n";
    auto r = k.execute(cell(code, 2));
    ASSERT_FALSE(r.ok()) << "the forged listing was taken";
    EXPECT_NE(r.error().message().find("the python kernel sent a malformed frame: "),
              std::string::npos)
        << r.error().message();
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
    auto next = k.execute(cell("'marker' in globals()"));
    ASSERT_TRUE(next.ok()) << next.error().message();
    EXPECT_TRUE(next->fresh_kernel);
  }
}

}  // namespace
}  // namespace sandcastle::service

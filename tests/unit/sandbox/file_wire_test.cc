// The file channel's messages: what the server accepts from a sandbox's
// worker is exactly what the worker can mean, nothing that could lead a
// caller out of the listed directory or past what it asked for.
#include "sandbox/native/file_wire.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox::native {
namespace {

TEST(FileWire, RequestRoundTripsAndRefusesBadPaths) {
  FileRequest r;
  r.op = FileOp::kRead;
  r.path = "/workspace/a";
  r.offset = 5;
  r.length = 7;
  r.flags = kFileWhole;
  auto back = decode_file_request(encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->path, "/workspace/a");
  EXPECT_EQ(back->length, 7u);
  for (const std::string& bad : {std::string("relative"), std::string(), std::string("/a\0b", 4),
                                "/" + std::string(kMaxFilePath, 'x')}) {
    r.path = bad;
    EXPECT_FALSE(decode_file_request(encode(r))) << bad.size();
  }
  r.path = "/ok";
  r.mode = 010000;  // beyond permission bits
  EXPECT_FALSE(decode_file_request(encode(r)));
  r.mode = 0644;
  std::string bytes = encode(r);
  bytes[0] = 9;  // no such op
  EXPECT_FALSE(decode_file_request(bytes));
  EXPECT_FALSE(decode_file_request(encode(r) + "x"));  // trailing bytes
}

// A rename's second path is checked exactly as the first; no other op may
// carry one (a worker must never act on a path the server did not mean).
TEST(FileWire, RenameTargetIsCheckedAsAPath) {
  FileRequest r;
  r.op = FileOp::kRename;
  r.path = "/workspace/.a.upload-1f";
  r.to = "/workspace/a";
  auto back = decode_file_request(encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->op, FileOp::kRename);
  EXPECT_EQ(back->to, "/workspace/a");
  for (const std::string& bad : {std::string("relative"), std::string(), std::string("/a\0b", 4),
                                 "/" + std::string(kMaxFilePath, 'x')}) {
    r.to = bad;
    EXPECT_FALSE(decode_file_request(encode(r))) << bad.size();
  }
  r.to = "/" + std::string(kMaxFilePath - 1, 'x');  // exactly PATH_MAX
  EXPECT_TRUE(decode_file_request(encode(r)));
  r.to = "/workspace/a";
  r.path = "relative";
  EXPECT_FALSE(decode_file_request(encode(r)));
  for (FileOp op : {FileOp::kWrite, FileOp::kRemove, FileOp::kStat}) {
    FileRequest other;
    other.op = op;
    other.path = "/workspace/a";
    other.to = "/workspace/b";
    EXPECT_FALSE(decode_file_request(encode(other))) << static_cast<int>(op);
    other.to.clear();
    EXPECT_TRUE(decode_file_request(encode(other))) << static_cast<int>(op);
  }
}

TEST(FileWire, EntryNamesStayBelowTheListedDirectory) {
  FileEntryWire e;
  e.name = "sub/file";
  e.mtime_nsec = 5;
  ASSERT_TRUE(decode_file_entry(encode(e)));
  for (const char* bad : {"", "/etc", "..", "a/../b", "a//b", "./a", "a/", "a/."}) {
    e.name = bad;
    EXPECT_FALSE(decode_file_entry(encode(e))) << bad;
  }
  e.name = std::string(256, 'n');  // one component above NAME_MAX
  EXPECT_FALSE(decode_file_entry(encode(e)));
  e.name = "ok";
  e.type = 4;
  EXPECT_FALSE(decode_file_entry(encode(e)));
  e.type = 0;
  e.mtime_nsec = 1'000'000'000;
  EXPECT_FALSE(decode_file_entry(encode(e)));
}

TEST(FileWire, ReplyFieldsAreChecked) {
  FileReply r;
  r.status = FileStatus::kErrno;
  r.err = EACCES;
  r.step = "open /x";
  auto back = decode_file_reply(encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->err, EACCES);
  EXPECT_FALSE(back->watching);
  r.watching = true;
  back = decode_file_reply(encode(r));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->watching);
  std::string flagged = encode(r);
  flagged[flagged.size() - 4] = 2;  // watching is 0 or 1
  EXPECT_FALSE(decode_file_reply(flagged));
  r.watching = false;
  r.err = -1;
  EXPECT_FALSE(decode_file_reply(encode(r)));
  r.err = 0;
  std::string bytes = encode(r);
  bytes[0] = 4;  // no such status
  EXPECT_FALSE(decode_file_reply(bytes));
  EXPECT_FALSE(decode_file_reply(bytes.substr(0, 3)));
}

}  // namespace
}  // namespace sandcastle::sandbox::native

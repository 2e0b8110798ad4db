// The kernel channel's decoder and framing (service/kernel_frame.h): each
// frame type decodes with every field checked, each wrong field is named,
// and the reader never holds more than one frame.
#include "service/kernel_frame.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace sandcastle::service {
namespace {

constexpr std::size_t kMax = 1 << 20;

std::string error_of(const std::string& body) {
  auto f = decode_kernel_frame(body, kMax);
  return f.ok() ? std::string("decoded as ") + frame_type_name(*f) : f.error().message();
}

TEST(KernelFrameTest, DecodesEachFrameType) {
  auto hello = decode_kernel_frame(R"({"type":"hello","pid":42,"version":"3.11.2"})", kMax);
  ASSERT_TRUE(hello.ok()) << hello.error().message();
  EXPECT_EQ(std::get<HelloFrame>(*hello).pid, 42);

  auto stream =
      decode_kernel_frame(R"({"type":"stream","id":"7","name":"stderr","text":"x\n"})", kMax);
  ASSERT_TRUE(stream.ok()) << stream.error().message();
  EXPECT_TRUE(std::get<StreamFrame>(*stream).is_stderr);
  EXPECT_EQ(std::get<StreamFrame>(*stream).text, "x\n");

  const std::string display =
      R"({"type":"display","id":"7","data":{"text/plain":"p","application/json":[1,{"a":null}]}})";
  auto d = decode_kernel_frame(display, kMax);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(std::get<DisplayFrame>(*d).bytes, display.size());
  EXPECT_EQ(std::get<DisplayFrame>(*d).values, 8u);  // 4 arrays/objects + 4 commas
  EXPECT_EQ(std::get<DisplayFrame>(*d).data["text/plain"], "p");

  auto ok = decode_kernel_frame(
      R"({"type":"result","id":"7","execution_count":3,"status":"ok","value":{"text/plain":"42"},"exit_code":-2})",
      kMax);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  const auto& r = std::get<ResultFrame>(*ok);
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.value["text/plain"], "42");
  EXPECT_EQ(r.exit_code, -2);
  EXPECT_TRUE(r.error.is_null());

  auto err = decode_kernel_frame(
      R"({"type":"result","id":"7","execution_count":4,"status":"error","error":{"name":"E","value":"v","traceback":["a\n"]}})",
      kMax);
  ASSERT_TRUE(err.ok()) << err.error().message();
  EXPECT_TRUE(std::get<ResultFrame>(*err).failed);
  EXPECT_FALSE(std::get<ResultFrame>(*err).exit_code);
}

TEST(KernelFrameTest, EveryWrongFieldIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"stream","id":5})", R"("id" is a number, expected a string)"},
      {R"({"type":"stream","id":null,"name":"stdout","text":"x"})",
       R"("id" is null, expected a string)"},
      {R"({"type":"stream","id":"1","name":7,"text":"x"})",
       R"("name" is a number, expected a string)"},
      {R"({"type":"stream","id":"1","name":"stdin","text":"x"})", R"("name" is "stdin")"},
      {R"({"type":"stream","id":"1","name":"stdout","text":{}})",
       R"("text" is an object, expected a string)"},
      {R"({"type":"stream","id":"1","name":"stdout"})", R"(a stream frame without "text")"},
      {R"({"type":"stream","id":"1","name":"stdout","text":"x","extra":1})",
       R"(unexpected field "extra")"},
      {R"({"type":"hello","pid":0,"version":"x"})", R"("pid" is 0, outside 1..)"},
      {R"({"type":"hello","pid":"1","version":"x"})", R"("pid" is a string, expected an integer)"},
      {R"({"type":"display","id":"1","data":[1]})", R"("data" is an array, expected an object)"},
      {R"({"type":"result","id":"1","execution_count":1.5,"status":"ok"})",
       R"("execution_count" is a number, expected an integer)"},
      {R"({"type":"result","id":"1","execution_count":-1,"status":"ok"})",
       R"("execution_count" is -1, outside)"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"maybe"})",
       R"("status" is "maybe")"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"ok","value":"42"})",
       R"("value" is a string)"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"error"})",
       R"(status "error" but no "error")"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"ok","error":{}})",
       R"("error" is an object, expected no error)"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"error","error":{"name":1,"value":"v","traceback":[]}})",
       R"("error.name" is a number)"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"error","error":{"name":"n","value":"v","traceback":[1]}})",
       R"("error.traceback[]" is a number)"},
      {R"({"type":"result","id":"1","execution_count":1,"status":"ok","exit_code":4294967296})",
       R"("exit_code" is 4294967296, outside)"},
      {R"({"type":7})", R"("type" is a number, expected a string)"},
      {R"({"type":"nonsense"})",
       R"("type" is "nonsense", expected hello, stream, display or result)"},
      {R"({"id":"1"})", R"(a frame without "type")"},
      {R"([1,2])", "the frame is an array, not a JSON object"},
      {R"("s")", "the frame is a string, not a JSON object"},
      {"{\"type\":\"stream\",\"id\":\"1\",\"name\":\"stdout\",\"text\":\"\xff\"}",
       "not valid JSON (UTF-8)"},
  };
  for (const auto& [body, why] : cases) {
    const std::string got = error_of(body);
    EXPECT_NE(got.find(why), std::string::npos) << body << " -> " << got;
  }
  EXPECT_NE(error_of("{\"type\":\"display\",\"id\":\"1\",\"data\":{\"a\":" + std::string(200, '[') +
                     std::string(200, ']') + "}}")
                .find("deeper than the limit of 128 levels"),
            std::string::npos);
  std::string wide = R"({"type":"display","id":"1","data":{"a":[)";
  for (int i = 0; i < 70000; ++i) wide += "0,";
  wide += "0]}}";
  EXPECT_NE(error_of(wide).find("more than the limit of 65536 values"), std::string::npos);
}

// The workdir listing a driver sends with its result (CellRequest::list):
// each name a clean relative path, each figure in range, or the frame fails.
TEST(KernelFrameTest, ListingDecodesWithEveryEntryChecked) {
  const std::string head = R"({"type":"result","id":"1","execution_count":1,"status":"ok",)";
  auto ok = decode_kernel_frame(
      head +
          R"("listing":{"files":[["a.png",3,1700000000,5],["d/e/f.txt",0,-2,999999999]],"truncated":true}})",
      kMax);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  const auto& l = std::get<ResultFrame>(*ok).listing;
  ASSERT_TRUE(l.has_value());
  EXPECT_TRUE(l->truncated);
  EXPECT_EQ(l->count, 2u);
  ASSERT_EQ(l->files.size(), 2u);
  EXPECT_EQ(l->files.at("a.png"), (FileSig{3, 1700000000, 5}));
  EXPECT_EQ(l->files.at("d/e/f.txt"), (FileSig{0, -2, 999999999}));

  for (const char* none : {R"("listing":null})", R"("exit_code":0})"}) {
    auto n = decode_kernel_frame(head + none, kMax);
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_FALSE(std::get<ResultFrame>(*n).listing.has_value()) << none;
  }

  const std::pair<std::string, const char*> cases[] = {
      {R"("listing":[]})", R"("listing" is an array, expected an object or null)"},
      {R"("listing":{"files":[]}})", R"(a listing without "truncated")"},
      {R"("listing":{"truncated":false}})", R"(a listing without "files")"},
      {R"("listing":{"files":{},"truncated":false}})", R"("listing.files" is an object)"},
      {R"("listing":{"files":[],"truncated":0}})", R"("listing.truncated" is a number)"},
      {R"("listing":{"files":[],"truncated":false,"more":1}})", R"(unexpected field "more")"},
      {R"("listing":{"files":[["a",1,2]],"truncated":false}})", "not [path, size, mtime_sec"},
      {R"("listing":{"files":[["a",-1,2,3]],"truncated":false}})", "not [path, size, mtime_sec"},
      {R"("listing":{"files":[[1,1,2,3]],"truncated":false}})", "not [path, size, mtime_sec"},
      {R"("listing":{"files":[["a",1,2.5,3]],"truncated":false}})", "not [path, size, mtime_sec"},
      {R"("listing":{"files":[["a",1,2,1000000000]],"truncated":false}})",
       "mtime_nsec is 1000000000"},
      {R"("listing":{"files":[["a",1,2,-1]],"truncated":false}})", "mtime_nsec is -1"},
      {R"("listing":{"files":[["a",1,18446744073709551615,0]],"truncated":false}})",
       "mtime is out of range"},
  };
  for (const auto& [tail, why] : cases) {
    const std::string got = error_of(head + tail);
    EXPECT_NE(got.find(why), std::string::npos) << tail << " -> " << got;
  }
  // A name that would lead out of the workdir, or is no name at all.
  for (const char* name :
       {"/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "", "a/", "a\\u0000b"}) {
    const std::string got =
        error_of(head + R"("listing":{"files":[[")" + name + R"(",1,2,3]],"truncated":false}})");
    EXPECT_NE(got.find("not a relative path"), std::string::npos) << name << " -> " << got;
  }
  const std::string long_component(256, 'x');
  EXPECT_NE(error_of(head + R"("listing":{"files":[[")" + long_component +
                     R"(",1,2,3]],"truncated":false}})")
                .find("not a relative path"),
            std::string::npos);
  std::string many = head + R"("listing":{"files":[)";
  for (std::size_t i = 0; i <= kMaxKernelListing; ++i) {
    many.append(i ? R"(,["f)" : R"(["f)");
    many.append(std::to_string(i));
    many.append(R"(",1,2,3])");
  }
  many.append(R"(],"truncated":false}})");
  EXPECT_NE(error_of(many).find("a listing of 10001 files, over 10000"), std::string::npos);
}

TEST(KernelFrameTest, FrameCapFollowsTheOutputCap) {
  EXPECT_EQ(max_frame_bytes(1 << 20), (8u << 20) + (4u << 20));
  EXPECT_EQ(max_frame_bytes(0), kMaxDisplayBytes);
}

class FrameReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv_), 0); }
  void TearDown() override {
    ::close(sv_[0]);
    ::close(sv_[1]);
  }
  void put(const std::string& bytes) {
    ASSERT_EQ(::send(sv_[1], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  static std::string framed(const std::string& body) {
    const auto n = static_cast<std::uint32_t>(body.size());
    std::string out{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                    static_cast<char>(n >> 8), static_cast<char>(n)};
    return out + body;
  }
  int sv_[2];
};

TEST_F(FrameReaderTest, FramesSplitAcrossReadsComeOutWhole) {
  FrameReader r;
  const std::string all = framed("{\"a\":1}") + framed("[2]") + framed("\"three\"");
  std::vector<std::string> got;
  for (char c : all) {
    put(std::string(1, c));
    ASSERT_GT(r.fill(sv_[0], MSG_DONTWAIT), 0);
    for (;;) {
      auto body = r.next(64);
      ASSERT_TRUE(body.ok());
      if (!*body) break;
      got.emplace_back(**body);
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "[2]", "\"three\""}));
  EXPECT_EQ(r.buffered(), 0u);
}

TEST_F(FrameReaderTest, OversizedLengthIsRefusedBeforeAnyBodyIsRead) {
  FrameReader r;
  put("\xff\xff\xff\xff{}");
  ASSERT_GT(r.fill(sv_[0], MSG_DONTWAIT), 0);
  auto body = r.next(1 << 20);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.error().message(), "a frame of 4294967295 bytes, over the limit of 1048576 bytes");
  EXPECT_LT(r.capacity(), 2 * FrameReader::kReadBytes);
}

// A large frame is held in one buffer sized for it, which goes back once the
// frame is taken.
TEST_F(FrameReaderTest, BufferHoldsOneFrameAndShrinksAfter) {
  FrameReader r;
  std::string text((1 << 20) + 2, 'x');  // a JSON string
  text.front() = text.back() = '"';
  const std::string big = framed(text);
  std::thread writer([&] { put(big); });
  std::size_t peak = 0;
  std::optional<std::string> got;
  while (!got) {
    ASSERT_GT(r.fill(sv_[0], 0), 0);
    peak = std::max(peak, r.capacity());
    auto body = r.next(2 << 20);
    ASSERT_TRUE(body.ok());
    if (*body) got.emplace(**body);
  }
  writer.join();
  EXPECT_EQ(got->size(), (1u << 20) + 2);
  EXPECT_LE(peak, big.size() + 2 * FrameReader::kReadBytes);
  auto none = r.next(2 << 20);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  EXPECT_LE(r.capacity(), 4 * FrameReader::kReadBytes);
}

// Every live kernel has a reader: once its frames are taken it keeps no
// read-sized buffer (it used to keep 64 KiB each, zero-filled per read).
TEST_F(FrameReaderTest, IdleReaderKeepsNoReadBuffer) {
  FrameReader r;
  for (const std::size_t size : {std::size_t{60}, std::size_t{100} << 10}) {
    std::string text(size + 2, 'r');  // a JSON string
    text.front() = text.back() = '"';
    const std::string frame = framed(text);
    std::thread writer([&] { put(frame); });
    std::optional<std::string> got;
    while (!got) {
      ASSERT_GT(r.fill(sv_[0], 0), 0);
      auto body = r.next(1 << 20);
      ASSERT_TRUE(body.ok());
      if (*body) got.emplace(**body);
    }
    writer.join();
    EXPECT_EQ(got->size(), size + 2);
    auto none = r.next(1 << 20);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(*none);
    EXPECT_LE(r.capacity(), FrameReader::kIdleBytes) << "after a frame of " << size << " bytes";
  }
}

}  // namespace
}  // namespace sandcastle::service

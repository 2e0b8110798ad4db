// The Engine API's multiplexed-stream demuxer: frames, every split point,
// bad headers, the frame limit.
#include "sandbox/engine/stream_demuxer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sandcastle::sandbox::engine {
namespace {

std::string frame(unsigned char stream, const std::string& payload) {
  std::string h(8, '\0');
  h[0] = static_cast<char>(stream);
  const auto n = static_cast<std::uint32_t>(payload.size());
  h[4] = static_cast<char>(n >> 24);
  h[5] = static_cast<char>((n >> 16) & 0xff);
  h[6] = static_cast<char>((n >> 8) & 0xff);
  h[7] = static_cast<char>(n & 0xff);
  return h + payload;
}

struct Collected {
  std::string out, err, in;
  StreamDemuxer::Sink sink() {
    return [this](StreamId id, std::string_view b) -> Status {
      EXPECT_FALSE(b.empty());
      (id == StreamId::kStdout ? out : id == StreamId::kStderr ? err : in).append(b);
      return ok_status();
    };
  }
};

TEST(StreamDemuxer, EveryTwoWaySplitGivesTheSameStreams) {
  const std::string payload_big(300, 'x');
  const std::string stream = frame(1, "hello ") + frame(2, "oops") + frame(1, "") +
                             frame(1, "world") + frame(2, payload_big) + frame(0, "in");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    Collected c;
    StreamDemuxer d(c.sink());
    ASSERT_TRUE(d.feed(std::string_view(stream).substr(0, cut)).ok()) << cut;
    ASSERT_TRUE(d.feed(std::string_view(stream).substr(cut)).ok()) << cut;
    ASSERT_TRUE(d.finish().ok()) << cut;
    EXPECT_EQ(c.out, "hello world") << cut;
    EXPECT_EQ(c.err, "oops" + payload_big) << cut;
    EXPECT_EQ(c.in, "in") << cut;
  }
}

TEST(StreamDemuxer, OneByteAtATime) {
  const std::string stream = frame(1, "abc") + frame(2, "de") + frame(1, "f");
  Collected c;
  StreamDemuxer d(c.sink());
  for (char ch : stream) ASSERT_TRUE(d.feed(std::string_view(&ch, 1)).ok());
  ASSERT_TRUE(d.finish().ok());
  EXPECT_EQ(c.out, "abcf");
  EXPECT_EQ(c.err, "de");
}

TEST(StreamDemuxer, BadStreamByteEndsTheStream) {
  for (unsigned char bad : {3, 4, 0x7f, 0xff}) {
    Collected c;
    StreamDemuxer d(c.sink());
    ASSERT_TRUE(d.feed(frame(1, "ok")).ok());
    auto st = d.feed(frame(bad, "no"));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().context.find("bad stream byte " + std::to_string(bad)), std::string::npos);
    // Sticky: nothing after the bad header is delivered.
    EXPECT_FALSE(d.feed(frame(1, "later")).ok());
    EXPECT_FALSE(d.finish().ok());
    EXPECT_EQ(c.out, "ok");
  }
}

TEST(StreamDemuxer, NonZeroPaddingEndsTheStream) {
  for (int i = 1; i <= 3; ++i) {
    std::string f = frame(1, "x");
    f[i] = 1;
    Collected c;
    StreamDemuxer d(c.sink());
    auto st = d.feed(f);
    ASSERT_FALSE(st.ok()) << i;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(c.out, "");
  }
}

TEST(StreamDemuxer, FrameLengthPastTheLimitEndsTheStream) {
  Collected c;
  StreamDemuxer d(c.sink(), 16);
  ASSERT_TRUE(d.feed(frame(1, std::string(16, 'a'))).ok());  // at the limit: fine
  // Refused from the header alone, before any payload byte is buffered.
  auto st = d.feed(frame(2, std::string(17, 'b')).substr(0, 8));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(st.error().context.find("17 bytes"), std::string::npos);
  EXPECT_EQ(c.out, std::string(16, 'a'));
  EXPECT_EQ(c.err, "");

  StreamDemuxer big([](StreamId, std::string_view) { return ok_status(); });
  std::string h(8, '\0');
  h[0] = 1;
  h[4] = static_cast<char>(0xff);  // 4 GiB - ...: past the 1 MiB default
  auto st2 = big.feed(h);
  ASSERT_FALSE(st2.ok());
  EXPECT_EQ(st2.error().code, ErrorCode::kResourceExhausted);
}

TEST(StreamDemuxer, EndInsideAFrameIsAnError) {
  const std::string f = frame(1, "abcdef");
  for (std::size_t cut = 1; cut < f.size(); ++cut) {
    Collected c;
    StreamDemuxer d(c.sink());
    ASSERT_TRUE(d.feed(std::string_view(f).substr(0, cut)).ok());
    auto st = d.finish();
    ASSERT_FALSE(st.ok()) << cut;
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
  }
}

TEST(StreamDemuxer, SinkErrorStopsTheStream) {
  int calls = 0;
  StreamDemuxer d([&](StreamId, std::string_view) -> Status {
    ++calls;
    return Error::make(ErrorCode::kResourceExhausted, "output limit");
  });
  auto st = d.feed(frame(1, "a") + frame(1, "b"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().context, "output limit");
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine

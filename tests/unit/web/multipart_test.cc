#include <gtest/gtest.h>

#include <vector>

#include "web/rest_multipart.h"

namespace sandcastle::web {
namespace {

struct Part {
  PartHead head;
  std::string data;
};

struct ParseRun {
  std::vector<Part> parts;
  Status status;
  size_t data_calls = 0;
};

// Parses `body`, fed in pieces of `piece` bytes (every split point is tried
// by the callers that loop over it).
ParseRun parse(const std::string& body, size_t piece, MultipartLimits limits = {},
          std::string boundary = "XyZ") {
  ParseRun run;
  MultipartSink sink;
  sink.begin = [&](const PartHead& h) {
    run.parts.push_back({h, {}});
    return ok_status();
  };
  sink.data = [&](std::string_view d) {
    ++run.data_calls;
    run.parts.back().data.append(d);
    return ok_status();
  };
  sink.end = [] { return ok_status(); };
  MultipartParser p(boundary, limits, sink);
  for (size_t i = 0; i < body.size(); i += piece) {
    run.status = p.feed(std::string_view(body).substr(i, piece));
    if (!run.status.ok()) return run;
  }
  run.status = p.finish();
  return run;
}

const std::string kBody =
    "preamble\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"path\"\r\n"
    "\r\n"
    "/workspace/up\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"a \\\"q\\\".txt\"\r\n"
    "Content-Type: text/plain\r\n"
    "\r\n"
    "line1--XyZ\r\n--Xy\r\n-\r\nend\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"empty.bin\"\r\n"
    "\r\n"
    "\r\n"
    "--XyZ--\r\n"
    "epilogue";

TEST(Multipart, PartsAtEverySplit) {
  for (size_t piece = 1; piece <= kBody.size(); ++piece) {
    ParseRun r = parse(kBody, piece);
    ASSERT_TRUE(r.status.ok()) << piece << ": " << r.status.error().message();
    ASSERT_EQ(r.parts.size(), 3u) << piece;
    EXPECT_EQ(r.parts[0].head.name, "path");
    EXPECT_FALSE(r.parts[0].head.has_filename);
    EXPECT_EQ(r.parts[0].data, "/workspace/up");
    EXPECT_EQ(r.parts[1].head.filename, "a \"q\".txt");
    EXPECT_EQ(r.parts[1].head.content_type, "text/plain");
    EXPECT_EQ(r.parts[1].data, "line1--XyZ\r\n--Xy\r\n-\r\nend") << piece;
    EXPECT_EQ(r.parts[2].head.filename, "empty.bin");
    EXPECT_EQ(r.parts[2].data, "");
  }
}

TEST(Multipart, BodyStartingWithTheDelimiter) {
  ParseRun r = parse("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--", 3);
  ASSERT_TRUE(r.status.ok()) << r.status.error().message();
  ASSERT_EQ(r.parts.size(), 1u);
  EXPECT_EQ(r.parts[0].data, "v");
}

TEST(Multipart, BigPartsStreamWithoutBeingHeldWhole) {
  std::string big(1 << 20, 'x');
  std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n\r\n" + big +
      "\r\n--XyZ--\r\n";
  ParseRun r = parse(body, 64 * 1024);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.parts[0].data.size(), big.size());
  EXPECT_GE(r.data_calls, 16u);  // handed on piece by piece
}

TEST(Multipart, LimitsAreEnforced) {
  MultipartLimits l;
  l.max_parts = 2;
  ParseRun r = parse(kBody, 7, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);

  l = {};
  l.max_part_bytes = 10;
  r = parse(kBody, 5, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);

  l = {};
  l.max_total_bytes = 100;
  r = parse(kBody, 1000, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);

  l = {};
  l.max_header_bytes = 64;
  std::string hdr = "--XyZ\r\nContent-Disposition: form-data; name=\"" + std::string(200, 'n') +
                    "\"\r\n\r\nv\r\n--XyZ--";
  r = parse(hdr, 4, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);

  l = {};
  l.max_name_bytes = 8;
  r = parse(kBody, 4096, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);

  // Endless headers with no blank line end at the header bound, not at memory's.
  l = {};
  std::string endless = "--XyZ\r\n" + std::string(1 << 20, 'h');
  r = parse(endless, 4096, l);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.error().code, ErrorCode::kResourceExhausted);
}

TEST(Multipart, HostileOrMalformedBodiesAreRefused) {
  for (const std::string& body : {
           std::string(""),                                                              // nothing
           std::string("no boundary at all"),                                            //
           std::string("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv"),  // no close
           std::string("--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--"),  // no disposition
           std::string("--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nv\r\n--XyZ--"),
           std::string("--XyZ\r\nContent-Disposition: form-data\r\n\r\nv\r\n--XyZ--"),  // no name
           std::string(
               "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--XyZ--"),  // open
                                                                                          // quote
           std::string("--XyZ\r\nContent-Disposition: form-data; name=\"a\"; "
                       "name=\"b\"\r\n\r\nv\r\n--XyZ--"),
           std::string("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n "
                       "folded\r\n\r\nv\r\n--XyZ--"),
           std::string(
               "--XyZ\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\nv\r\n--XyZ--"),
           std::string(
               "--XyZjunk\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--"),
       }) {
    ParseRun r = parse(body, 3);
    EXPECT_FALSE(r.status.ok()) << body;
    if (!r.status.ok()) {
      EXPECT_EQ(r.status.error().code, ErrorCode::kInvalidArgument) << body;
    }
  }
  // A preamble longer than any header block with no delimiter in it.
  ParseRun r = parse(std::string(1 << 16, 'p'), 1000);
  EXPECT_FALSE(r.status.ok());
}

TEST(Multipart, AnErrorFromTheSinkStopsTheParse) {
  MultipartSink sink;
  int begins = 0;
  sink.begin = [&](const PartHead&) -> Status {
    ++begins;
    return Error::make(ErrorCode::kPermissionDenied, "no");
  };
  MultipartParser p("XyZ", {}, sink);
  auto s = p.feed(kBody);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(begins, 1);
  EXPECT_FALSE(p.feed("more").ok());
}

TEST(Multipart, BoundaryFromContentType) {
  EXPECT_EQ(*multipart_boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(*multipart_boundary("Multipart/Form-Data; charset=x; boundary=\"a b:c\""), "a b:c");
  EXPECT_FALSE(multipart_boundary("multipart/form-data").ok());
  EXPECT_FALSE(multipart_boundary("multipart/mixed; boundary=abc").ok());
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=").ok());
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'a')).ok());
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=\"a\r\nb\"").ok());
  EXPECT_FALSE(multipart_boundary("application/json").ok());
}

}  // namespace
}  // namespace sandcastle::web

#include <gtest/gtest.h>

#include <chrono>

#include "transport/http/file_links.h"
#include "transport/http/mcp_http.h"

namespace sandcastle::transport::http {
namespace {

TEST(HttpHelpers, HostAllowedIgnoresPortAndCase) {
  std::vector<std::string> loop = {"localhost", "127.0.0.1", "[::1]"};
  EXPECT_TRUE(host_allowed("127.0.0.1:8181", loop));
  EXPECT_TRUE(host_allowed("LOCALHOST", loop));
  EXPECT_TRUE(host_allowed("[::1]:80", loop));
  EXPECT_FALSE(host_allowed("evil.example.com", loop));
  EXPECT_FALSE(host_allowed("127.0.0.1.evil.com:8181", loop));
  EXPECT_FALSE(host_allowed("", loop));
  EXPECT_TRUE(host_allowed("anything", {}));
}

TEST(HttpHelpers, LoopbackOrigins) {
  EXPECT_TRUE(is_loopback_origin("http://localhost:3000"));
  EXPECT_TRUE(is_loopback_origin("https://127.0.0.1"));
  EXPECT_TRUE(is_loopback_origin("http://[::1]:6274"));
  EXPECT_FALSE(is_loopback_origin("http://localhost.evil.com"));
  EXPECT_FALSE(is_loopback_origin("http://evil.example.com"));
  EXPECT_FALSE(is_loopback_origin("null"));
}

TEST(HttpHelpers, PresentedKeyFromEachPlace) {
  Request r;
  r.headers["authorization"] = "Bearer  sc_a_b";
  EXPECT_EQ(presented_key(r), "sc_a_b");
  r.headers.clear();
  r.headers["x-api-key"] = "k2";
  EXPECT_EQ(presented_key(r), "k2");
  r.headers.clear();
  r.query["api_key"] = "k3";
  EXPECT_EQ(presented_key(r), "k3");
  r.query.clear();
  r.headers["authorization"] = "Basic abc";
  EXPECT_EQ(presented_key(r), "");
}

TEST(HttpHelpers, HeaderValueDecoding) {
  EXPECT_EQ(decode_header_value("tools/call"), "tools/call");
  EXPECT_EQ(decode_header_value("=?base64?w6ljaG8=?="), "\xc3\xa9" "cho");
  EXPECT_EQ(decode_header_value("=?base64?***?="), "=?base64?***?=");
  EXPECT_EQ(url_decode("a%20b+c"), "a b+c");
  EXPECT_EQ(url_decode("a+b", true), "a b");
  EXPECT_EQ(url_decode("%zz%4"), "%zz%4");
  EXPECT_EQ(url_encode("a b/c.png"), "a%20b/c.png");
}

TEST(FileLinks, RangeParsing) {
  bool bad = false;
  EXPECT_EQ(parse_range("bytes=0-3", 10, &bad), std::make_pair(uint64_t{0}, uint64_t{3}));
  EXPECT_EQ(parse_range("bytes=5-", 10, &bad), std::make_pair(uint64_t{5}, uint64_t{9}));
  EXPECT_EQ(parse_range("bytes=-4", 10, &bad), std::make_pair(uint64_t{6}, uint64_t{9}));
  EXPECT_EQ(parse_range("bytes=8-100", 10, &bad), std::make_pair(uint64_t{8}, uint64_t{9}));
  EXPECT_FALSE(parse_range("bytes=10-", 10, &bad));
  EXPECT_TRUE(bad);
  EXPECT_FALSE(parse_range("bytes=0-1,3-4", 10, &bad));
  EXPECT_FALSE(bad);
  EXPECT_FALSE(parse_range("items=0-1", 10, &bad));
  EXPECT_FALSE(parse_range("bytes=5-2", 10, &bad));
  EXPECT_FALSE(parse_range("bytes=a-b", 10, &bad));
}

TEST(FileLinks, ContentTypes) {
  EXPECT_EQ(content_type_for("plots/a.PNG"), "image/png");
  EXPECT_EQ(content_type_for("data.csv"), "text/csv; charset=utf-8");
  EXPECT_EQ(content_type_for("dir.d/noext"), "application/octet-stream");
  EXPECT_EQ(content_type_for("x.unknownext"), "application/octet-stream");
}

TEST(FileLinks, SignedExpiringLinks) {
  FileLinks links("http://127.0.0.1:1", std::chrono::seconds(60), nullptr, "secret");
  std::string url = links.link_for("sbx1", "owner", "/out dir/a.txt", std::chrono::system_clock::now() + std::chrono::minutes(1));
  ASSERT_EQ(url.rfind("http://127.0.0.1:1/files/sbx1/out%20dir/a.txt?exp=", 0), 0u) << url;
  auto exp = url.substr(url.find("exp=") + 4, url.find("&sig=") - url.find("exp=") - 4);
  auto sig = url.substr(url.find("&sig=") + 5);
  EXPECT_TRUE(links.verify("sbx1", "out dir/a.txt", exp, sig));
  EXPECT_FALSE(links.verify("sbx2", "out dir/a.txt", exp, sig));
  EXPECT_FALSE(links.verify("sbx1", "out dir/b.txt", exp, sig));
  EXPECT_FALSE(links.verify("sbx1", "out dir/a.txt", std::to_string(std::stoll(exp) + 1), sig));
  std::string old = links.link_for("sbx1", "owner", "a.txt", std::chrono::system_clock::now() - std::chrono::seconds(5));
  auto oexp = old.substr(old.find("exp=") + 4, old.find("&sig=") - old.find("exp=") - 4);
  EXPECT_FALSE(links.verify("sbx1", "a.txt", oexp, old.substr(old.find("&sig=") + 5)));
  FileLinks other("http://x", std::chrono::seconds(60), nullptr, "another secret");
  EXPECT_FALSE(other.verify("sbx1", "out dir/a.txt", exp, sig));
}

TEST(FileLinks, ContentDisposition) {
  EXPECT_EQ(content_disposition("out dir/report.html", false),
            "attachment; filename=\"report.html\"");
  EXPECT_EQ(content_disposition("a.png", true), "inline; filename=\"a.png\"");
  EXPECT_EQ(content_disposition("dir/", false), "attachment");
  // Quotes, backslashes, percent signs and control characters never reach
  // the quoted string; the exact name travels in filename*.
  EXPECT_EQ(content_disposition("x\"; filename=evil.exe", false),
            "attachment; filename=\"x_; filename=evil.exe\"; "
            "filename*=UTF-8''x%22%3B%20filename%3Devil.exe");
  EXPECT_EQ(content_disposition("a\\b%41\r\n.txt", false),
            "attachment; filename=\"a_b_41__.txt\"; filename*=UTF-8''a%5Cb%2541%0D%0A.txt");
  EXPECT_EQ(content_disposition("r\xc3\xa9sum\xc3\xa9.pdf", false),
            "attachment; filename=\"r__sum__.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf");
  EXPECT_EQ(content_disposition("bad\xff.bin", false),
            "attachment; filename=\"bad_.bin\"");  // not UTF-8
  EXPECT_EQ(content_disposition(std::string_view("a\0b", 3), false),
            "attachment; filename=\"a_b\"; filename*=UTF-8''a%00b");
}

TEST(FileLinks, RequestPaths) {
  EXPECT_TRUE(valid_file_request_path("sb-0123456789ab", "out dir/a.txt"));
  EXPECT_FALSE(valid_file_request_path("sb-1\nx", "a.txt"));
  EXPECT_FALSE(valid_file_request_path("", "a.txt"));
  for (const char* bad : {"../etc/passwd", "a/../../b", "./a", "a//b", "a/", "a/.", ""})
    EXPECT_FALSE(valid_file_request_path("sb-1", bad)) << bad;
  EXPECT_FALSE(valid_file_request_path("sb-1", std::string_view("a\0b", 3)));
  EXPECT_TRUE(valid_file_request_path("sb-1", "..a/b.."));
}

}  // namespace
}  // namespace sandcastle::transport::http

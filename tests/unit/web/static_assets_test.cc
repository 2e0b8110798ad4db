// The console's static assets as the binary serves them: index for browsers
// only, versioned asset URLs, ETag revalidation, gzip negotiation, cache and
// security headers.
#include "web/static_assets.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "web/embedded_assets.h"

namespace sandcastle::web {
namespace {

using transport::http::Request;
using transport::http::Response;

Request get(const std::string& path, std::map<std::string, std::string> headers = {}) {
  Request r;
  r.method = "GET";
  r.path = path;
  r.target = path;
  r.headers = std::move(headers);
  return r;
}

std::string header(const Response& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

std::string gunzip(const std::string& in) {
  std::string out(1 << 22, '\0');
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

std::string asset_path(const std::string& name) {
  return "/assets/" + std::string(asset_version()) + "/" + name;
}

TEST(StaticAssets, IndexForBrowsersOnly) {
  auto html = answer(
      get("/", {{"accept", "text/html,application/xhtml+xml"}, {"accept-encoding", "gzip"}}));
  ASSERT_TRUE(html);
  EXPECT_EQ(html->status, 200);
  EXPECT_EQ(header(*html, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(header(*html, "Cache-Control"), "no-cache");
  EXPECT_EQ(header(*html, "Content-Encoding"), "gzip");
  EXPECT_EQ(header(*html, "Vary"), "Accept, Accept-Encoding");
  const std::string body = gunzip(html->body);
  // The index names the current asset version, never the placeholder.
  EXPECT_NE(body.find("/assets/" + std::string(asset_version()) + "/app.js"), std::string::npos);
  EXPECT_EQ(body.find("__ASSET_BASE__"), std::string::npos);
  // No inline script: every <script> has a src.
  for (size_t at = body.find("<script"); at != std::string::npos; at = body.find("<script", at + 1))
    EXPECT_NE(body.substr(at, body.find('>', at) - at).find("src="), std::string::npos);
  // JSON readers and other methods keep the landing answer.
  EXPECT_FALSE(answer(get("/", {{"accept", "application/json"}})));
  EXPECT_FALSE(answer(get("/")));
  Request post = get("/", {{"accept", "text/html"}});
  post.method = "POST";
  EXPECT_FALSE(answer(post));
  EXPECT_FALSE(answer(get("/mcp", {{"accept", "text/html"}})));
}

TEST(StaticAssets, SecurityHeaders) {
  for (const auto& r :
       {*answer(get("/", {{"accept", "text/html"}})), *answer(get(asset_path("app.js")))}) {
    const std::string csp = header(r, "Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'self'"), std::string::npos);
    EXPECT_NE(csp.find("script-src 'self';"), std::string::npos);
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos);
    EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos);
    EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(header(r, "X-Frame-Options"), "DENY");
  }
}

TEST(StaticAssets, VersionedAssetsAreImmutable) {
  auto r = answer(get(asset_path("app.js"), {{"accept-encoding", "gzip, deflate, br"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(*r, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(header(*r, "Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(header(*r, "Content-Encoding"), "gzip");
  // The terminal emulator from npm is embedded too, without its source-map line.
  auto x = answer(get(asset_path("xterm.mjs"), {{"accept-encoding", "gzip"}}));
  ASSERT_TRUE(x);
  EXPECT_EQ(x->status, 200);
  const std::string xterm = gunzip(x->body);
  EXPECT_NE(xterm.find("Terminal"), std::string::npos);
  EXPECT_EQ(xterm.find("sourceMappingURL"), std::string::npos);
  // Another version's URL, unknown names, the index and the MCP App view
  // (offered as a resource, not here) are 404.
  EXPECT_EQ(answer(get("/assets/000000000000/app.js"))->status, 404);
  EXPECT_EQ(answer(get("/assets/app.js"))->status, 404);
  EXPECT_EQ(answer(get(asset_path("nope.js")))->status, 404);
  EXPECT_EQ(answer(get(asset_path("index.html")))->status, 404);
  EXPECT_EQ(answer(get(asset_path("run_result.html")))->status, 404);
  EXPECT_EQ(answer(get(asset_path("../index.html")))->status, 404);
  Request put = get(asset_path("app.js"));
  put.method = "PUT";
  auto refused = answer(put);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 405);
  EXPECT_EQ(header(*refused, "Allow"), "GET, HEAD");
}

TEST(StaticAssets, PlainBodyWithoutGzip) {
  for (const char* ae : {"", "identity", "gzip;q=0", "br, gzip;q=0.000"}) {
    auto r = answer(get(asset_path("app.js"), {{"accept-encoding", ae}}));
    ASSERT_TRUE(r);
    EXPECT_EQ(header(*r, "Content-Encoding"), "") << ae;
    auto gz = answer(get(asset_path("app.js"), {{"accept-encoding", "gzip"}}));
    EXPECT_EQ(r->body, gunzip(gz->body)) << ae;
    EXPECT_NE(header(*r, "ETag"), header(*gz, "ETag"));
  }
  EXPECT_TRUE(accepts_gzip("GZIP"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("deflate, gzip;q=0.5"));
  EXPECT_FALSE(accepts_gzip("gzipx"));
  EXPECT_FALSE(accepts_gzip("*;q=0"));
}

TEST(StaticAssets, ETagRevalidation) {
  auto first = answer(get(asset_path("app.js"), {{"accept-encoding", "gzip"}}));
  const std::string etag = header(*first, "ETag");
  ASSERT_EQ(etag.front(), '"');
  for (const std::string& inm : {etag, "\"x\", " + etag, "W/" + etag, std::string("*")}) {
    auto again =
        answer(get(asset_path("app.js"), {{"accept-encoding", "gzip"}, {"if-none-match", inm}}));
    EXPECT_EQ(again->status, 304) << inm;
    EXPECT_TRUE(again->body.empty());
    EXPECT_EQ(header(*again, "ETag"), etag);
  }
  auto changed = answer(
      get(asset_path("app.js"), {{"accept-encoding", "gzip"}, {"if-none-match", "\"other\""}}));
  EXPECT_EQ(changed->status, 200);
  auto index = answer(
      get("/", {{"accept", "text/html"},
                {"if-none-match", header(*answer(get("/", {{"accept", "text/html"}})), "ETag")}}));
  EXPECT_EQ(index->status, 304);
}

TEST(StaticAssets, HeadHasLengthNoBody) {
  Request head = get(asset_path("app.js"), {{"accept-encoding", "gzip"}});
  head.method = "HEAD";
  auto r = answer(head);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(header(*r, "Content-Length"),
            std::to_string(
                answer(get(asset_path("app.js"), {{"accept-encoding", "gzip"}}))->body.size()));
}

TEST(StaticAssets, McpAppViewBytes) {
  auto html = asset_bytes("run_result.html");
  ASSERT_TRUE(html);
  EXPECT_NE(html->find("ui/initialize"), std::string::npos);
  EXPECT_NE(html->find("ui/notifications/tool-result"), std::string::npos);
  EXPECT_FALSE(asset_bytes("missing.html"));
}

TEST(StaticAssets, FirstLoadBudget) {
  // index.html and what it loads before the terminal is opened: at most
  // 150 KiB compressed (xterm is loaded on demand).
  size_t total = 0;
  for (const auto& a : embedded_assets()) {
    EXPECT_GT(a.gzip_size, 0u);
    if (!a.served || a.name.starts_with("xterm") || a.name.starts_with("addon-")) continue;
    total += a.gzip_size;
  }
  EXPECT_LE(total, size_t{150} * 1024);
}

}  // namespace
}  // namespace sandcastle::web

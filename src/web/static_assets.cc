#include "web/static_assets.h"

#include <zlib.h>

#include <algorithm>

#include "common/text.h"
#include "web/embedded_assets.h"

namespace sandcastle::web {

using transport::http::Headers;
using transport::http::Request;
using transport::http::Response;

namespace {

constexpr std::string_view kAssetPrefix = "/assets/";

const EmbeddedAsset* find_asset(std::string_view name) {
  for (const auto& a : embedded_assets())
    if (a.name == name) return &a;
  return nullptr;
}

std::string inflate_asset(const EmbeddedAsset& a) {
  std::string out(a.size, '\0');
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return {};
  z.next_in = const_cast<Bytef*>(a.gzip);
  z.avail_in = static_cast<uInt>(a.gzip_size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&z, Z_FINISH);
  const bool whole = rc == Z_STREAM_END && z.total_out == a.size;
  inflateEnd(&z);
  return whole ? out : std::string{};
}

// "q=0", "q=0.0", "q=0.000" refuse a coding; anything else admits it.
bool q_is_zero(std::string_view params) {
  while (!params.empty()) {
    auto semi = params.find(';');
    std::string_view p = trim_blanks(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view{} : params.substr(semi + 1);
    if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
    std::string_view v = p.substr(2);
    if (v.empty() || v[0] != '0') return false;
    return std::all_of(v.begin() + 1, v.end(), [](char c) { return c == '.' || c == '0'; });
  }
  return false;
}

// If-None-Match (RFC 9110 §13.1.2): "*" or a list of entity tags, compared
// weakly (a W/ prefix is ignored).
bool etag_matches(std::string_view header, std::string_view etag) {
  if (trim_blanks(header) == "*") return true;
  while (!header.empty()) {
    auto comma = header.find(',');
    std::string_view t = trim_blanks(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    if (t.rfind("W/", 0) == 0) t.remove_prefix(2);
    if (t == etag) return true;
  }
  return false;
}

void add_security_headers(Headers& h) {
  h.emplace_back("Content-Security-Policy", kConsoleCsp);
  h.emplace_back("X-Content-Type-Options", "nosniff");
  h.emplace_back("X-Frame-Options", "DENY");
  h.emplace_back("Referrer-Policy", "no-referrer");
  h.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
  h.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
}

Response not_found() {
  Response r = Response::text(404, "Not Found\n");
  add_security_headers(r.headers);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// A strong tag per representation: the gzip bytes and the plain bytes differ.
std::string entity_tag(const EmbeddedAsset& a, bool gz) {
  std::string t;
  t.reserve(a.hash.size() + 5);
  t.push_back('"');
  t.append(a.hash);
  if (gz) t.append("-gz");
  t.push_back('"');
  return t;
}

Response serve(const Request& req, const EmbeddedAsset& a, bool immutable, bool vary_accept) {
  const bool gz = accepts_gzip(req.header("accept-encoding"));
  const std::string etag = entity_tag(a, gz);
  Response r;
  add_security_headers(r.headers);
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control",
                         immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.emplace_back("Vary", vary_accept ? "Accept, Accept-Encoding" : "Accept-Encoding");
  if (req.has_header("if-none-match") &&
      (etag_matches(req.header("if-none-match"), etag) ||
       etag_matches(req.header("if-none-match"), entity_tag(a, !gz)))) {
    r.status = 304;
    return r;
  }
  r.status = 200;
  r.headers.emplace_back("Content-Type", std::string(a.content_type));
  if (gz) {
    r.headers.emplace_back("Content-Encoding", "gzip");
    r.body.assign(reinterpret_cast<const char*>(a.gzip), a.gzip_size);
  } else {
    r.body = inflate_asset(a);
    if (r.body.size() != a.size) return Response::text(500, "Internal Server Error\n");
  }
  if (req.method == "HEAD") {
    r.headers.emplace_back("Content-Length", std::to_string(r.body.size()));
    r.body.clear();
  }
  return r;
}

}  // namespace

bool accepts_gzip(std::string_view v) {
  while (!v.empty()) {
    auto comma = v.find(',');
    std::string_view item = trim_blanks(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    auto semi = item.find(';');
    std::string_view coding = trim_blanks(item.substr(0, semi));
    if ((ascii_iequals(coding, "gzip") || ascii_iequals(coding, "x-gzip") || coding == "*") &&
        !q_is_zero(semi == std::string_view::npos ? std::string_view{} : item.substr(semi + 1)))
      return true;
  }
  return false;
}

std::optional<Response> answer(const Request& req) {
  const std::string& p = req.path;
  const bool read = req.method == "GET" || req.method == "HEAD";
  if (p == "/") {
    // Programs (and the MCP landing's JSON readers) keep the landing answer.
    if (!read || req.header("accept").find("text/html") == std::string::npos) return std::nullopt;
    const EmbeddedAsset* index = find_asset("index.html");
    if (index == nullptr) return std::nullopt;
    return serve(req, *index, false, true);
  }
  if (p.compare(0, kAssetPrefix.size(), kAssetPrefix) != 0) return std::nullopt;
  if (!read) {
    Response r = Response::text(405, "Method Not Allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  // /assets/<version>/<name>: an old version's URL (a page loaded before the
  // binary changed) is a 404 rather than new bytes under an immutable name.
  std::string_view rest = std::string_view(p).substr(kAssetPrefix.size());
  auto slash = rest.find('/');
  if (slash == std::string_view::npos || rest.substr(0, slash) != asset_version())
    return not_found();
  const EmbeddedAsset* a = find_asset(rest.substr(slash + 1));
  if (a == nullptr || !a->served || a->name == "index.html") return not_found();
  return serve(req, *a, true, false);
}

std::optional<std::string> asset_bytes(std::string_view name) {
  const EmbeddedAsset* a = find_asset(name);
  if (a == nullptr) return std::nullopt;
  std::string s = inflate_asset(*a);
  if (s.size() != a->size) return std::nullopt;
  return s;
}

}  // namespace sandcastle::web

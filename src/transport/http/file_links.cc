#include "transport/http/file_links.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <cstring>
#include <thread>

#include "common/crypto.h"
#include "common/utf8.h"

namespace sandcastle::transport::http {

std::string content_type_for(const std::string& path) {
  static const std::map<std::string, std::string> kTypes = {
      {"png", "image/png"},        {"jpg", "image/jpeg"},       {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},        {"svg", "image/svg+xml"},    {"webp", "image/webp"},
      {"pdf", "application/pdf"},  {"json", "application/json"}, {"csv", "text/csv; charset=utf-8"},
      {"txt", "text/plain; charset=utf-8"}, {"md", "text/markdown; charset=utf-8"},
      {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
      {"py", "text/x-python; charset=utf-8"}, {"js", "text/javascript; charset=utf-8"},
      {"log", "text/plain; charset=utf-8"}, {"xml", "application/xml"},
      {"zip", "application/zip"},  {"gz", "application/gzip"},  {"tar", "application/x-tar"},
      {"wav", "audio/wav"},        {"mp3", "audio/mpeg"},       {"mp4", "video/mp4"},
      {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
      {"parquet", "application/vnd.apache.parquet"}};
  auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "application/octet-stream";
  std::string ext = path.substr(dot + 1);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

std::optional<std::pair<uint64_t, uint64_t>> parse_range(const std::string& header, uint64_t size,
                                                         bool* unsatisfiable) {
  *unsatisfiable = false;
  if (header.rfind("bytes=", 0) != 0) return std::nullopt;
  std::string spec = header.substr(6);
  if (spec.find(',') != std::string::npos) return std::nullopt;  // multi-range: send it all
  auto dash = spec.find('-');
  if (dash == std::string::npos) return std::nullopt;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto digits = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  try {
    if (a.empty()) {  // suffix: the last b bytes
      if (!digits(b)) return std::nullopt;
      uint64_t n = std::stoull(b);
      if (n == 0 || size == 0) {
        *unsatisfiable = true;
        return std::nullopt;
      }
      n = std::min(n, size);
      return std::make_pair(size - n, size - 1);
    }
    if (!digits(a) || (!b.empty() && !digits(b))) return std::nullopt;
    uint64_t first = std::stoull(a);
    uint64_t last = b.empty() ? size - 1 : std::stoull(b);
    if (first >= size) {
      *unsatisfiable = true;
      return std::nullopt;
    }
    if (last < first) return std::nullopt;
    return std::make_pair(first, std::min(last, size - 1));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

// What every answer under /files/ carries. A sandbox's file is hostile
// content served from the server's own origin: it must never render as a
// page of that origin (scripts reaching /mcp with a loopback Origin), so
// the browser gets no sniffing, a CSP sandbox (an opaque origin, no scripts,
// forms, plugins or popups) that also loads nothing from any network, no
// Referer carrying the signed URL, and no copy kept in any cache.
void add_file_security_headers(Headers& h) {
  h.emplace_back("X-Content-Type-Options", "nosniff");
  h.emplace_back("Content-Security-Policy", std::string(kFileCsp));
  h.emplace_back("Referrer-Policy", "no-referrer");
  h.emplace_back("Cache-Control", "private, no-store");
}

Response file_error(int status, std::string body) {
  Response r = Response::text(status, std::move(body));
  add_file_security_headers(r.headers);
  return r;
}

}  // namespace

std::string content_disposition(std::string_view path, bool as_inline) {
  std::string d = as_inline ? "inline" : "attachment";
  std::string_view name =
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  if (name.empty()) return d;
  // filename="...": printable ASCII only, with '"', '\' and '%' replaced
  // too, since user agents disagree on backslash and percent escapes
  // (RFC 6266 appendix D); the exact name then goes in filename* (RFC 8187).
  std::string fallback;
  bool exact = true;
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '%') {
      fallback.push_back('_');
      exact = false;
    } else {
      fallback.push_back(ch);
    }
  }
  d += "; filename=\"" + fallback + "\"";
  if (!exact && valid_utf8(name)) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    d += "; filename*=UTF-8''";
    for (char ch : name) {
      auto c = static_cast<unsigned char>(ch);
      // attr-char (RFC 8187 §3.2.1): everything else is percent-encoded.
      if (std::isalnum(c) || (c != 0 && std::strchr("!#$&+-.^_`|~", c) != nullptr)) {
        d.push_back(ch);
      } else {
        d.push_back('%');
        d.push_back(kHex[c >> 4]);
        d.push_back(kHex[c & 15]);
      }
    }
  }
  return d;
}

bool valid_file_request_path(std::string_view sandbox_id, std::string_view path) {
  if (sandbox_id.empty() || sandbox_id.size() > 64) return false;
  for (char c : sandbox_id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  if (path.empty() || path.find('\0') != std::string_view::npos) return false;
  // Links name files below the sandbox's workdir by a plain relative path:
  // no empty, "." or ".." segment ever appears in one.
  while (true) {
    auto slash = path.find('/');
    auto seg = path.substr(0, slash);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

FileLinks::FileLinks(std::string base_url, std::chrono::seconds ttl, Reader reader, std::string secret)
    : base_url_(std::move(base_url)),
      ttl_(ttl),
      reader_(std::move(reader)),
      secret_(secret.empty() ? crypto::random_bytes(32) : std::move(secret)) {}

std::string FileLinks::sign(const std::string& sandbox_id, const std::string& path, const std::string& exp) const {
  return crypto::base64url(crypto::hmac_sha256(secret_, sandbox_id + '\n' + path + '\n' + exp));
}

std::string FileLinks::link(const std::string& sandbox_id, const std::string& owner,
                            const std::string& path) {
  return link_for(sandbox_id, owner, path, std::chrono::system_clock::now() + ttl_);
}

std::string FileLinks::link_for(const std::string& sandbox_id, const std::string& owner, const std::string& path,
                                std::chrono::system_clock::time_point expires) {
  {
    std::lock_guard lock(mu_);
    owners_[sandbox_id] = owner;
  }
  std::string clean = path;
  while (!clean.empty() && clean.front() == '/') clean.erase(clean.begin());
  std::string exp = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count());
  return base_url_ + "/files/" + url_encode(sandbox_id) + "/" + url_encode(clean) + "?exp=" + exp +
         "&sig=" + sign(sandbox_id, clean, exp);
}

bool FileLinks::verify(const std::string& sandbox_id, const std::string& path, const std::string& exp,
                       const std::string& sig) const {
  if (exp.empty() || exp.size() > 12 || exp.find_first_not_of("0123456789") != std::string::npos) return false;
  if (!crypto::constant_time_equal(sign(sandbox_id, path, exp), sig)) return false;
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  return std::stoll(exp) >= now.count();
}

void FileLinks::serve(const Request& req, std::shared_ptr<Exchange> ex) {
  if (req.method != "GET" && req.method != "HEAD") {
    Response r = Response::text(405, "Method Not Allowed");
    r.headers.emplace_back("Allow", "GET, HEAD");
    ex->respond(std::move(r));
    return;
  }
  std::string rest = req.path.substr(std::string("/files/").size());
  auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= rest.size()) {
    ex->respond(file_error(404, "Not Found: /files/<sandbox_id>/<path>"));
    return;
  }
  std::string sandbox_id = rest.substr(0, slash), path = rest.substr(slash + 1);
  if (!valid_file_request_path(sandbox_id, path)) {
    ex->respond(file_error(404, "Not Found: not a file link"));
    return;
  }
  auto q = [&](const char* k) {
    auto it = req.query.find(k);
    return it == req.query.end() ? std::string() : it->second;
  };
  if (!verify(sandbox_id, path, q("exp"), q("sig"))) {
    ex->respond(file_error(403, "Forbidden: the link's signature is invalid or it has expired"));
    return;
  }
  std::string owner;
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(sandbox_id);
    if (it == owners_.end()) {
      ex->respond(file_error(404, "Not Found: sandbox " + sandbox_id + " is gone"));
      return;
    }
    owner = it->second;
  }
  bool head = req.method == "HEAD";
  std::string range = req.header("range");
  // Inline display is the link holder's choice (not signed): with the
  // headers above even HTML or SVG shown inline runs nothing and reaches
  // nothing.
  const bool as_inline = q("inline") == "1";
  // Sandbox file reads can block: off the I/O thread, a bounded number at
  // once (a flood of link requests must not become a flood of threads).
  if (active_.fetch_add(1) >= kMaxConcurrentReads) {
    active_.fetch_sub(1);
    Response busy = file_error(503, "Service Unavailable: too many file downloads at once; retry shortly");
    busy.headers.emplace_back("Retry-After", "1");
    ex->respond(std::move(busy));
    return;
  }
  std::thread([this, ex, sandbox_id, owner, path, head, range, as_inline] {
    struct Done {
      std::atomic<int>& n;
      ~Done() { n.fetch_sub(1); }
    } done{active_};
    auto data = reader_(sandbox_id, owner, path);
    if (!data.ok()) {
      // A FIFO, device or too large a file: 409; the transfer budget busy: 503.
      const ErrorCode code = data.error().code;
      int status = code == ErrorCode::kNotFound             ? 404
                   : code == ErrorCode::kFailedPrecondition ? 409
                   : code == ErrorCode::kResourceExhausted  ? 503
                                                            : 500;
      if (data.error().code == ErrorCode::kNotFound && data.error().context.find("sandbox") != std::string::npos) {
        std::lock_guard lock(mu_);
        owners_.erase(sandbox_id);
      }
      ex->respond(file_error(status, data.error().message()));
      return;
    }
    const std::string& body = *data;
    Response r;
    r.headers.emplace_back("Content-Type", content_type_for(path));
    r.headers.emplace_back("Content-Disposition", content_disposition(path, as_inline));
    r.headers.emplace_back("Accept-Ranges", "bytes");
    add_file_security_headers(r.headers);
    bool bad = false;
    auto rg = range.empty() ? std::nullopt : parse_range(range, body.size(), &bad);
    if (bad) {
      r.status = 416;
      r.headers.emplace_back("Content-Range", "bytes */" + std::to_string(body.size()));
    } else if (rg) {
      r.status = 206;
      r.headers.emplace_back("Content-Range", "bytes " + std::to_string(rg->first) + "-" +
                                                  std::to_string(rg->second) + "/" + std::to_string(body.size()));
      r.body = body.substr(rg->first, rg->second - rg->first + 1);
    } else {
      r.body = body;
    }
    if (head) {
      r.headers.emplace_back("Content-Length", std::to_string(r.body.size()));
      r.body.clear();
    }
    ex->respond(std::move(r));
  }).detach();
}

}  // namespace sandcastle::transport::http

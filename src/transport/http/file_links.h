// Signed, expiring download links for files in sandboxes:
//   <base>/files/<sandbox_id>/<path>?exp=<unix seconds>&sig=<HMAC-SHA256>
// The signature covers sandbox id, path and expiry with a per-process secret;
// no API key ever appears in a link. Range requests are honoured. Files are
// served as attachments (inline with ?inline=1), never sniffed, and under a
// CSP sandbox, so a sandbox's HTML never runs as the server's origin.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

class FileLinks {
 public:
  // Reads the file at `path` (relative to the sandbox's workdir) of the
  // sandbox `sandbox_id` owned by `owner`.
  using Reader = std::function<Result<std::string>(const std::string& sandbox_id, const std::string& owner,
                                                   const std::string& path)>;

  FileLinks(std::string base_url, std::chrono::seconds ttl, Reader reader, std::string secret = {});

  // A link for the file; remembers the sandbox's owner so the download can
  // find it.
  std::string link(const std::string& sandbox_id, const std::string& owner,
                   const std::string& path);
  std::string link_for(const std::string& sandbox_id, const std::string& owner, const std::string& path,
                       std::chrono::system_clock::time_point expires);
  // True when the signature matches and the link has not expired.
  bool verify(const std::string& sandbox_id, const std::string& path, const std::string& exp,
              const std::string& sig) const;

  // Serves GET/HEAD /files/<sandbox_id>/<path> (reads on a worker thread).
  void serve(const Request& req, std::shared_ptr<Exchange> ex);

  void set_base_url(std::string url) { base_url_ = std::move(url); }

 private:
  std::string sign(const std::string& sandbox_id, const std::string& path, const std::string& exp) const;

  std::string base_url_;
  std::chrono::seconds ttl_;
  Reader reader_;
  std::string secret_;
  std::mutex mu_;
  std::map<std::string, std::string> owners_;  // sandbox id → owner
  // Downloads being read from sandboxes now (each on a thread of its own).
  static constexpr int kMaxConcurrentReads = 32;
  std::atomic<int> active_{0};
};

// The Content-Security-Policy of every /files/ answer: an opaque-origin
// sandbox with no allow-* token, and no network loads from the document.
inline constexpr const char* kFileCsp =
    "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'";

// attachment (or inline); filename="<ASCII fallback>" and, when the name is
// not plain printable ASCII, filename*=UTF-8''<percent-encoded> (RFC 6266).
std::string content_disposition(std::string_view path, bool as_inline);

// A /files/ request's sandbox id and path could be a link's: a plain id, and
// a relative path without NUL or empty, "." or ".." segments.
bool valid_file_request_path(std::string_view sandbox_id, std::string_view path);

// "image/png" for "a/b.png"; application/octet-stream when unknown.
std::string content_type_for(const std::string& path);

// Parses a single "bytes=" range against `size`: [first, last] inclusive.
// nullopt when absent or not a single bytes range (the whole file is sent);
// sets *unsatisfiable when it lies beyond the file (416).
std::optional<std::pair<uint64_t, uint64_t>> parse_range(const std::string& header, uint64_t size,
                                                         bool* unsatisfiable);

}  // namespace sandcastle::transport::http

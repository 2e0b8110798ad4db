// A minimal HTTP/1.1 GET client for the registry client (image pull): one
// connection per request over Boost.Beast, TLS through OpenSSL with the
// peer's certificate and host name verified, deadlines on connect and on
// every read, bodies either collected up to a stated limit or streamed to a
// sink. Only what the OCI distribution API needs: no cookies, no proxies.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace sandcastle::images::http {

struct Url {
  bool tls = true;
  std::string host;          // without brackets for IPv6
  std::string port;          // always set ("443", "80" when the URL has none)
  std::string target = "/";  // path and query

  // "host:port" as registries and --insecure-registry name it (brackets for IPv6).
  std::string authority() const;
  std::string str() const;
};

// An absolute http(s) URL, or `ref` resolved against `base` when it is a
// path ("/v2/...", as in a Location header).
Result<Url> parse_url(std::string_view text);
Result<Url> resolve_url(const Url& base, std::string_view ref);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

// Settings shared by every request of one pull.
struct ClientSettings {
  std::chrono::milliseconds connect_timeout{15'000};
  std::chrono::milliseconds read_timeout{60'000};  // any one read, not the whole body
  std::string ca_file;  // extra trusted CAs (PEM); the system's are always trusted
  std::string user_agent = "sandcastle";
};

struct Response {
  int status = 0;
  std::map<std::string, std::string>
      headers;       // lower-case names; a repeated header keeps its first value
  std::string body;  // when collected (no sink, or an error status)

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Receives a 2xx body piece by piece; an error stops the transfer.
using BodySink = std::function<Status(std::string_view)>;

class Client {
 public:
  explicit Client(ClientSettings settings);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One GET. A 2xx body goes to `sink` when given, else is collected up to
  // `body_limit` bytes (more is kResourceExhausted); other statuses keep at
  // most 64 KiB of their body (for the error message). Redirects are not
  // followed here (the caller decides what an Authorization header may go to).
  // A TLS failure says whether the certificate was the cause (kPermissionDenied).
  Result<Response> get(const Url& url,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       std::size_t body_limit, const BodySink& sink = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandcastle::images::http

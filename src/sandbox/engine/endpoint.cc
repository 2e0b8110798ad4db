#include "sandbox/engine/endpoint.h"

#include <sys/un.h>

#include <algorithm>
#include <cctype>

namespace sandcastle::sandbox::engine {

namespace {

Error bad(std::string_view url, const std::string& why) {
  // The URL is shown bounded: it comes from a flag or a config file.
  return Error::make(ErrorCode::kInvalidArgument,
                     "engine endpoint '" + std::string(url.substr(0, 200)) + "': " + why);
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string Endpoint::str() const {
  if (kind == Kind::kUnix) return "unix://" + path;
  const bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + port;
}

Result<Endpoint> parse_endpoint(std::string_view url, std::string_view tls_dir) {
  Endpoint ep;
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kTcp = "tcp://";
  if (url.substr(0, kUnix.size()) == kUnix) {
    if (!tls_dir.empty()) return bad(url, "TLS applies to tcp:// endpoints only");
    ep.kind = Endpoint::Kind::kUnix;
    ep.path = std::string(url.substr(kUnix.size()));
    if (ep.path.empty() || ep.path[0] != '/')
      return bad(url, "the socket path must be absolute (unix:///path/to.sock)");
    // sun_path holds the path and its terminating NUL.
    if (ep.path.size() >= sizeof(sockaddr_un{}.sun_path))
      return bad(url, "the socket path is longer than " +
                          std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
    if (ep.path.find('\0') != std::string::npos) return bad(url, "NUL in the socket path");
    return ep;
  }
  if (url.substr(0, kTcp.size()) != kTcp)
    return bad(url, "expected unix:///path or tcp://host:port");
  ep.kind = Endpoint::Kind::kTcp;
  std::string_view auth = url.substr(kTcp.size());
  if (!auth.empty() && auth.back() == '/') auth.remove_suffix(1);
  if (auth.find_first_of("/?#@") != std::string_view::npos)
    return bad(url, "a tcp:// endpoint is host:port only (no path, query or user)");
  std::string_view port;
  if (!auth.empty() && auth[0] == '[') {
    const auto close = auth.find(']');
    if (close == std::string_view::npos) return bad(url, "unclosed '[' in an IPv6 host");
    ep.host = std::string(auth.substr(1, close - 1));
    std::string_view rest = auth.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad(url, "junk after the IPv6 host");
      port = rest.substr(1);
      if (port.empty()) return bad(url, "empty port");
    }
  } else {
    const auto colon = auth.find(':');
    ep.host = std::string(auth.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = auth.substr(colon + 1);
      if (port.empty()) return bad(url, "empty port");
    }
  }
  if (ep.host.empty() || ep.host.size() > 253) return bad(url, "missing or overlong host");
  const bool v6 = auth[0] == '[';
  for (char c : ep.host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                    c == '_' || (v6 && c == ':');
    if (!ok) return bad(url, "bad character in the host");
  }
  ep.tls = !tls_dir.empty();
  ep.tls_dir = std::string(tls_dir);
  if (port.empty()) {
    ep.port = ep.tls ? "2376" : "2375";
  } else {
    if (!is_digits(port) || port.size() > 5) return bad(url, "the port is not a number");
    const unsigned long n = std::stoul(std::string(port));
    if (n == 0 || n > 65535) return bad(url, "the port is outside 1..65535");
    ep.port = std::to_string(n);
  }
  std::transform(ep.host.begin(), ep.host.end(), ep.host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ep;
}

}  // namespace sandcastle::sandbox::engine

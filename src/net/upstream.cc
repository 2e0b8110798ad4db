#include "net/upstream.h"

#include <tuple>

#include "common/base64.h"
#include "net/http_head.h"

namespace sandcastle::net {

Result<HostPort> rule_from_url(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return Error::make(ErrorCode::kInvalidArgument, "not a URL (no scheme): " + url);
  std::string scheme = ascii_lower(url.substr(0, scheme_end));
  std::uint16_t def = scheme == "https" ? 443 : scheme == "http" ? 80 : 0;
  if (def == 0)
    return Error::make(ErrorCode::kInvalidArgument,
                       "only http and https URLs are supported: " + url);
  std::string rest = url.substr(scheme_end + 3);
  std::string auth = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = auth.rfind('@'); at != std::string::npos) auth = auth.substr(at + 1);
  HostPort rule;
  if (!split_host_port(auth, def, rule.host, rule.port))
    return Error::make(ErrorCode::kInvalidArgument, "cannot read host and port from URL: " + url);
  return rule;
}

Result<UpstreamProxy> upstream_from_url(const std::string& raw) {
  std::string url = raw.find("://") == std::string::npos ? "http://" + raw : raw;
  if (ascii_lower(url.substr(0, 7)) != "http://")
    return Error::make(ErrorCode::kInvalidArgument, "only http:// proxies are supported");
  std::string rest = url.substr(7);
  std::string auth_part = rest.substr(0, rest.find_first_of("/?#"));
  UpstreamProxy p;
  if (auto at = auth_part.rfind('@'); at != std::string::npos) {
    p.authorization = "Basic " + base64_encode(percent_decode(auth_part.substr(0, at)));
    auth_part = auth_part.substr(at + 1);
  }
  if (!split_host_port(auth_part, 80, p.host, p.port))
    return Error::make(ErrorCode::kInvalidArgument, "cannot read host and port from the proxy URL");
  return p;
}

UpstreamProxies UpstreamProxies::from_env(const std::function<const char*(const char*)>& getenv,
                                          std::vector<std::string>* warnings) {
  auto get = [&](const char* lower_name, const char* upper_name) {
    const char* v = getenv(lower_name);
    if (!v || !*v) v = getenv(upper_name);
    return std::string(v ? v : "");
  };
  UpstreamProxies out;
  for (auto [slot, lo, up] : {std::tuple{&out.https, "https_proxy", "HTTPS_PROXY"},
                              std::tuple{&out.http, "http_proxy", "HTTP_PROXY"}}) {
    std::string v = get(lo, up);
    if (v.empty()) continue;
    auto p = upstream_from_url(v);
    if (p.ok()) {
      *slot = *p;
    } else if (warnings) {
      // The value may hold credentials: only the variable is named.
      warnings->push_back(std::string(up) + " is not used: " + p.error().message());
    }
  }
  std::string list = get("no_proxy", "NO_PROXY");
  for (std::size_t start = 0; start <= list.size();) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = ascii_lower(list.substr(start, comma - start));
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.no_proxy.push_back(item);
    start = comma + 1;
  }
  return out;
}

const UpstreamProxy* UpstreamProxies::route(bool tunnel, const std::string& host) const {
  const std::optional<UpstreamProxy>& p = tunnel ? https : http;
  if (!p) return nullptr;
  const std::string h = ascii_lower(host);
  for (std::string entry : no_proxy) {
    if (entry == "*") return nullptr;
    // "host:port" entries: the host part decides (the port is the index's own).
    if (auto colon = entry.rfind(':'); colon != std::string::npos && entry.find(':') == colon)
      entry = entry.substr(0, colon);
    if (!entry.empty() && entry[0] == '.') entry = entry.substr(1);
    if (entry.size() >= 2 && entry.front() == '[' && entry.back() == ']')
      entry = entry.substr(1, entry.size() - 2);
    if (h == entry ||
        (h.size() > entry.size() && h.compare(h.size() - entry.size(), entry.size(), entry) == 0 &&
         h[h.size() - entry.size() - 1] == '.'))
      return nullptr;
  }
  return &*p;
}

}  // namespace sandcastle::net

#include "images/registry_client.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "common/base64.h"
#include "common/json_parse.h"
#include "images/oci_layout_writer.h"

namespace sandcastle::images {

namespace {

constexpr int kMaxRedirects = 5;
constexpr std::size_t kTokenResponseLimit = 1u << 20;
constexpr std::size_t kMaxTokenBytes = std::size_t{64} * 1024;
constexpr const char* kDockerHub = "docker.io";

constexpr const char* kManifestAccept =
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

Error invalid_reply(std::string msg) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(msg));
}

bool lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// A repository path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
bool valid_component(std::string_view c) {
  if (c.empty() || !lower_alnum(c.front()) || !lower_alnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (lower_alnum(c[i])) continue;
    if (c[i] == '.') {
      if (!lower_alnum(c[i + 1])) return false;
    } else if (c[i] == '_') {
      if (c[i + 1] == '_') ++i;
      if (!lower_alnum(c[i + 1])) return false;
    } else if (c[i] == '-') {
      while (c[i + 1] == '-') ++i;
      if (!lower_alnum(c[i + 1])) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(t[0])) return false;
  return std::all_of(t.begin(), t.end(), [&](char c) { return word(c) || c == '.' || c == '-'; });
}

// host[:port] or [v6]:port, nothing else (a '?' or '@' would change what the URL means).
bool valid_registry(std::string_view r) {
  if (r.empty() || r.size() > 255) return false;
  for (char c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
          c == ':' || c == '[' || c == ']'))
      return false;
  auto parsed = http::parse_url("https://" + std::string(r) + "/");
  return parsed.ok() && parsed->target == "/";
}

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// WWW-Authenticate: <scheme> key="value", key=value, ...
struct Challenge {
  std::string scheme;  // lower case
  std::map<std::string, std::string> params;
};

Challenge parse_challenge(std::string_view h) {
  Challenge c;
  std::size_t i = 0;
  while (i < h.size() && h[i] == ' ') ++i;
  while (i < h.size() && h[i] != ' ')
    c.scheme.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(h[i++]))));
  while (i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    std::string key;
    while (i < h.size() && h[i] != '=' && h[i] != ',')
      key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(h[i++]))));
    if (i >= h.size() || h[i] != '=') continue;
    ++i;
    std::string value;
    if (i < h.size() && h[i] == '"') {
      ++i;
      while (i < h.size() && h[i] != '"') {
        if (h[i] == '\\' && i + 1 < h.size()) ++i;
        value.push_back(h[i++]);
      }
      ++i;
    } else {
      while (i < h.size() && h[i] != ',') value.push_back(h[i++]);
    }
    while (!key.empty() && key.back() == ' ') key.pop_back();
    c.params.emplace(key, value);
  }
  return c;
}

// The registry's own explanation from an error body ({"errors":[{"code","message"}]}).
std::string registry_message(const std::string& body) {
  auto j = parse_json(body, JsonLimits{.max_bytes = std::size_t{64} * 1024});
  if (!j.ok() || !j->is_object()) return {};
  const auto it = j->find("errors");
  if (it == j->end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) return {};
  const auto& e = (*it)[0];
  std::string out;
  if (auto c = e.find("code"); c != e.end() && c->is_string()) out = c->get<std::string>();
  if (auto m = e.find("message"); m != e.end() && m->is_string())
    out += (out.empty() ? "" : ": ") + m->get<std::string>();
  if (out.size() > 300) out.resize(300);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  return out;
}

bool safe_header_value(std::string_view v) {
  return std::none_of(v.begin(), v.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

}  // namespace

// ---------------------------------------------------------------- references

std::string ImageReference::endpoint() const {
  return registry == kDockerHub ? "registry-1.docker.io" : registry;
}

std::string ImageReference::str() const {
  std::string s = registry + "/" + repository;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

Result<ImageReference> parse_reference(std::string_view text) {
  if (text.empty()) return invalid_reply("empty image reference");
  if (text.size() > 512) return invalid_reply("image reference longer than 512 characters");
  for (char c : text)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return invalid_reply("image reference with a space or non-ASCII character");
  ImageReference ref;
  std::string_view name = text;
  if (const auto at = text.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(text.substr(at + 1));
    name = text.substr(0, at);
    if (ref.digest.rfind("sha256:", 0) != 0)
      return invalid_reply("unsupported digest '" + ref.digest +
                           "': only sha256 digests are supported");
    if (!is_sha256_digest(ref.digest))
      return invalid_reply("bad digest '" + ref.digest +
                           "': want sha256: and 64 lower-case hex digits");
  }
  const auto last_slash = name.rfind('/');
  if (const auto colon = name.rfind(':');
      colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || colon > last_slash)) {
    ref.tag = std::string(name.substr(colon + 1));
    name = name.substr(0, colon);
    if (!valid_tag(ref.tag))
      return invalid_reply("bad tag '" + ref.tag +
                           "': want letters, digits, '_', '.', '-' (not first), at most 128");
  }
  std::string repo(name);
  if (const auto slash = name.find('/'); slash != std::string_view::npos) {
    std::string_view first = name.substr(0, slash);
    if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
        first == "localhost") {
      ref.registry = std::string(first);
      repo = std::string(name.substr(slash + 1));
      if (!valid_registry(ref.registry))
        return invalid_reply("bad registry '" + ref.registry + "' in image reference");
    }
  }
  if (ref.registry.empty() || ref.registry == "index.docker.io" ||
      ref.registry == "registry-1.docker.io")
    ref.registry = kDockerHub;
  if (ref.registry == kDockerHub && repo.find('/') == std::string::npos) repo = "library/" + repo;
  if (repo.empty() || repo.size() > 255)
    return invalid_reply("bad repository name in '" + std::string(text) + "'");
  std::size_t start = 0;
  while (true) {
    const auto end = repo.find('/', start);
    if (!valid_component(std::string_view(repo).substr(
            start, end == std::string::npos ? std::string::npos : end - start)))
      return invalid_reply(
          "bad repository name '" + repo +
          "': components are lower-case letters and digits, separated by '.', '_', '__' or '-'");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  ref.repository = repo;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

Result<Platform> parse_platform(std::string_view text) {
  Platform p;
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto slash = text.find('/', start);
    parts.emplace_back(text.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() < 2 || parts.size() > 3)
    return invalid_reply("bad platform '" + std::string(text) + "': want os/arch[/variant]");
  for (const auto& s : parts)
    if (s.empty() || s.size() > 32 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '_'; }))
      return invalid_reply("bad platform '" + std::string(text) + "': want os/arch[/variant]");
  p.os = parts[0];
  p.architecture = parts[1];
  if (parts.size() == 3) p.variant = parts[2];
  return p;
}

// ------------------------------------------------------------------- client

RegistryClient::RegistryClient(ImageReference ref, RegistryOptions opts)
    : ref_(std::move(ref)),
      opts_(std::move(opts)),
      http_(http::ClientSettings{.connect_timeout = opts_.connect_timeout,
                                 .read_timeout = opts_.read_timeout,
                                 .ca_file = opts_.ca_file}) {}

RegistryClient::~RegistryClient() = default;

bool RegistryClient::plain_http_listed(const std::string& name,
                                       const std::string& authority) const {
  const auto& l = opts_.insecure_registries;
  return std::find(l.begin(), l.end(), name) != l.end() ||
         std::find(l.begin(), l.end(), authority) != l.end();
}

bool RegistryClient::plain_http_allowed(const std::string& authority,
                                        const std::string& host) const {
  return http::is_loopback_host(host) || plain_http_listed(host, authority);
}

Status RegistryClient::ping() {
  auto base = http::parse_url("https://" + ref_.endpoint() + "/v2/");
  if (!base.ok()) return base.take_error();
  const bool listed = plain_http_listed(ref_.registry, base->authority());
  tls_ = !listed;
  // A registry named without a port is reached on 443, or 80 over plain HTTP.
  if (listed && ref_.endpoint().find(':') == std::string::npos) base->port = "80";
  base->tls = tls_;
  auto r = http_.get(*base, {}, std::size_t{64} * 1024);
  if (!r.ok() && tls_ && http::is_loopback_host(base->host) &&
      r.error().code != ErrorCode::kPermissionDenied && r.error().code != ErrorCode::kTimeout) {
    // A loopback registry that does not speak TLS: plain HTTP (a bad certificate is not a reason).
    tls_ = false;
    base->tls = false;
    r = http_.get(*base, {}, std::size_t{64} * 1024);
  }
  if (!r.ok())
    return Error::make(r.error().code, "registry " + ref_.registry + ": " + r.error().context);
  if (r->status == 200 || r->status == 401) {
    pinged_ = true;
    if (r->status == 401) last_challenge_ = r->header("www-authenticate");
    return ok_status();
  }
  if (r->status == 404)
    return Error::make(
        ErrorCode::kNotFound,
        "registry " + ref_.registry + " has no /v2/ API (HTTP 404): not an OCI registry");
  return Error::make(
      ErrorCode::kUnavailable,
      "registry " + ref_.registry + ": GET /v2/ answered HTTP " + std::to_string(r->status));
}

Status RegistryClient::authenticate(const std::string& challenge_text) {
  const Challenge ch = parse_challenge(challenge_text);
  const bool have_creds = !opts_.username.empty();
  const std::string who = have_creds ? "user '" + opts_.username + "'" : "anonymous access";
  if (ch.scheme == "basic") {
    if (!have_creds)
      return Error::make(ErrorCode::kPermissionDenied,
                         "registry " + ref_.registry +
                             " requires credentials (HTTP 401, Basic): give --username "
                             "and --password-stdin");
    authorization_ = "Basic " + base64_encode(opts_.username + ":" + opts_.password);
    return ok_status();
  }
  if (ch.scheme != "bearer")
    return Error::make(ErrorCode::kPermissionDenied, "registry " + ref_.registry +
                                                         " asks for unsupported authentication '" +
                                                         ch.scheme.substr(0, 40) + "'");
  const auto realm_it = ch.params.find("realm");
  if (realm_it == ch.params.end())
    return invalid_reply("registry " + ref_.registry + ": bearer challenge without a realm");
  auto realm = http::parse_url(realm_it->second);
  if (!realm.ok())
    return invalid_reply("registry " + ref_.registry + ": token realm: " + realm.error().context);
  if (!realm->tls && !plain_http_allowed(realm->authority(), realm->host))
    return Error::make(ErrorCode::kPermissionDenied,
                       "token server " + realm->str() +
                           " is plain HTTP: refused (use --insecure-registry " +
                           realm->authority() + " to allow it)");
  std::string query;
  if (auto s = ch.params.find("service"); s != ch.params.end())
    query += "service=" + url_encode(s->second);
  std::string scope = "repository:" + ref_.repository + ":pull";
  if (auto s = ch.params.find("scope"); s != ch.params.end() && !s->second.empty())
    scope = s->second;
  query += std::string(query.empty() ? "" : "&") + "scope=" + url_encode(scope);
  realm->target += (realm->target.find('?') == std::string::npos ? "?" : "&") + query;
  std::vector<std::pair<std::string, std::string>> headers;
  if (have_creds)
    headers.emplace_back("Authorization",
                         "Basic " + base64_encode(opts_.username + ":" + opts_.password));
  auto r = http_.get(*realm, headers, kTokenResponseLimit);
  if (!r.ok()) return Error::make(r.error().code, "token server: " + r.error().context);
  if (r->status == 401 || r->status == 403)
    return Error::make(ErrorCode::kPermissionDenied, "token server " + realm->authority() +
                                                         " refused " + who + " (HTTP " +
                                                         std::to_string(r->status) + ")");
  if (r->status != 200)
    return Error::make(ErrorCode::kUnavailable, "token server " + realm->authority() +
                                                    " answered HTTP " + std::to_string(r->status));
  auto j = parse_json(
      r->body, JsonLimits{.max_bytes = kTokenResponseLimit, .max_depth = 8, .max_values = 1024});
  if (!j.ok())
    return invalid_reply("token server " + realm->authority() + ": " + j.error().context);
  std::string token;
  for (const char* k : {"token", "access_token"})
    if (j->is_object())
      if (auto it = j->find(k);
          it != j->end() && it->is_string() && !it->get<std::string>().empty()) {
        token = it->get<std::string>();
        break;
      }
  if (token.empty() || token.size() > kMaxTokenBytes || !safe_header_value(token))
    return invalid_reply("token server " + realm->authority() + " sent no usable token");
  authorization_ = "Bearer " + token;
  return ok_status();
}

std::string RegistryClient::describe_denial(const http::Response& r) const {
  std::string msg = "HTTP " + std::to_string(r.status) +
                    (r.status == 401 ? " Unauthorized" : " Forbidden") + " from " + ref_.registry +
                    " for " + ref_.repository;
  if (auto m = registry_message(r.body); !m.empty()) msg += " (" + m + ")";
  msg += opts_.username.empty()
             ? ": no credentials were given (--username, --password-stdin)"
             : ": the credentials of user '" + opts_.username + "' do not allow pulling it";
  return msg;
}

Result<http::Response> RegistryClient::request(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra,
    std::size_t body_limit, const http::BodySink& sink) {
  if (!pinged_)
    if (auto st = ping(); !st.ok()) return st.take_error();
  auto origin = http::parse_url(std::string(tls_ ? "https://" : "http://") + ref_.endpoint() + "/");
  if (!origin.ok()) return origin.take_error();
  if (!tls_ && ref_.endpoint().find(':') == std::string::npos) origin->port = "80";
  auto url = http::resolve_url(*origin, path);
  if (!url.ok()) return url.take_error();
  bool retried_auth = false;
  for (int hop = 0;;) {
    auto headers = extra;
    // The registry's credentials go to the registry only (same scheme, host and port).
    const bool same_origin = url->tls == origin->tls && url->authority() == origin->authority();
    if (same_origin && !authorization_.empty())
      headers.emplace_back("Authorization", authorization_);
    auto r = http_.get(*url, headers, body_limit, sink);
    if (!r.ok()) return r.take_error();
    if (r->status == 401 && same_origin && !retried_auth) {
      retried_auth = true;
      const std::string challenge = r->header("www-authenticate");
      if (challenge.empty()) return Error::make(ErrorCode::kPermissionDenied, describe_denial(*r));
      if (auto st = authenticate(challenge); !st.ok()) return st.take_error();
      continue;
    }
    if (r->status == 401 || r->status == 403)
      return Error::make(ErrorCode::kPermissionDenied, describe_denial(*r));
    if (r->status == 301 || r->status == 302 || r->status == 303 || r->status == 307 ||
        r->status == 308) {
      if (++hop > kMaxRedirects)
        return Error::make(ErrorCode::kUnavailable,
                           "more than " + std::to_string(kMaxRedirects) + " redirects for " + path);
      auto next = http::resolve_url(*url, r->header("location"));
      if (!next.ok())
        return Error::make(ErrorCode::kInvalidArgument,
                           "redirect for " + path + ": " + next.error().context);
      if (!next->tls && !plain_http_allowed(next->authority(), next->host))
        return Error::make(ErrorCode::kPermissionDenied,
                           "redirect to plain HTTP " + next->authority() +
                               " refused (use --insecure-registry to allow it)");
      url = std::move(next);
      continue;
    }
    return r;
  }
}

Result<FetchedManifest> RegistryClient::get_manifest(const std::string& tag_or_digest) {
  auto r = request("/v2/" + ref_.repository + "/manifests/" + tag_or_digest,
                   {{"Accept", kManifestAccept}}, opts_.max_manifest_bytes, nullptr);
  if (!r.ok()) {
    if (r.error().code == ErrorCode::kResourceExhausted)
      return Error::make(ErrorCode::kResourceExhausted,
                         "manifest " + tag_or_digest + " is larger than " +
                             std::to_string(opts_.max_manifest_bytes) + " bytes");
    return r.take_error();
  }
  if (r->status == 404)
    return Error::make(ErrorCode::kNotFound, "manifest unknown: " + ref_.registry + "/" +
                                                 ref_.repository + " has no " + tag_or_digest);
  if (r->status != 200) {
    std::string m = registry_message(r->body);
    return Error::make(ErrorCode::kUnavailable, "GET manifest " + tag_or_digest + ": HTTP " +
                                                    std::to_string(r->status) +
                                                    (m.empty() ? "" : " (" + m + ")"));
  }
  FetchedManifest out;
  out.media_type = r->header("content-type");
  if (auto semi = out.media_type.find(';'); semi != std::string::npos) out.media_type.resize(semi);
  while (!out.media_type.empty() && out.media_type.back() == ' ') out.media_type.pop_back();
  out.digest = sha256_digest(r->body);
  out.body = std::move(r->body);
  if (tag_or_digest.rfind("sha256:", 0) == 0 && out.digest != tag_or_digest)
    return invalid_reply("digest mismatch: manifest " + tag_or_digest +
                         " has content with digest " + out.digest);
  return out;
}

Status RegistryClient::get_blob(const std::string& digest, const http::BodySink& sink) {
  auto r = request("/v2/" + ref_.repository + "/blobs/" + digest, {}, 0, sink);
  if (!r.ok()) return r.take_error();
  if (r->status == 404)
    return Error::make(ErrorCode::kNotFound, "blob unknown: " + ref_.registry + "/" +
                                                 ref_.repository + " has no " + digest);
  if (r->status != 200) {
    std::string m = registry_message(r->body);
    return Error::make(ErrorCode::kUnavailable, "GET blob " + digest + ": HTTP " +
                                                    std::to_string(r->status) +
                                                    (m.empty() ? "" : " (" + m + ")"));
  }
  return ok_status();
}

}  // namespace sandcastle::images

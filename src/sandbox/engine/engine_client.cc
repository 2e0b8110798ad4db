#include "sandbox/engine/engine_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/beast/http/verb.hpp>
#include <cctype>
#include <filesystem>
#include <thread>

#include "common/json_parse.h"
#include "sandbox/engine/engine_http.h"

namespace sandcastle::sandbox::engine {

namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMessageLimit = 1024;  // of an engine's error message we keep

Error invalid(std::string what) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(what));
}

// Container, exec and volume ids or names: what docker accepts for names
// ([a-zA-Z0-9][a-zA-Z0-9_.-]*), so nothing can step out of the URL path.
Status check_id(std::string_view id, const char* what) {
  if (id.empty() || id.size() > 256) return invalid(std::string("bad ") + what + " id (length)");
  if (!std::isalnum(static_cast<unsigned char>(id[0])))
    return invalid(std::string("bad ") + what + " id '" + std::string(id.substr(0, 64)) + "'");
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return invalid(std::string("bad ") + what + " id '" + std::string(id.substr(0, 64)) + "'");
  return ok_status();
}

// Image references: [registry[:port]/]name[:tag][@sha256:hex] or an id.
// docker routes /images/{name:.*}/json, so '/' stays as it is; '..', '?',
// '%', spaces and the like are refused.
Status check_image(std::string_view ref) {
  if (ref.empty() || ref.size() > 512) return invalid("bad image reference (length)");
  if (ref.find("..") != std::string_view::npos || ref[0] == '/' || ref.back() == '/')
    return invalid("bad image reference '" + std::string(ref.substr(0, 64)) + "'");
  for (char c : ref)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          c == '/' || c == ':' || c == '@'))
      return invalid("bad image reference '" + std::string(ref.substr(0, 64)) + "'");
  return ok_status();
}

std::string printable(std::string_view s, std::size_t limit) {
  std::string out;
  for (char c : s.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (s.size() > limit) out += "...";
  return out;
}

// {"message": "..."} (dockerd and Podman both), else the text itself.
std::string engine_message(std::string_view body) {
  auto parsed = parse_json(body, JsonLimits{EngineClient::kErrorBodyLimit});
  if (parsed.ok() && parsed->is_object()) {
    auto it = parsed->find("message");
    if (it != parsed->end() && it->is_string())
      return printable(it->get<std::string>(), kMessageLimit);
  }
  return printable(body, kMessageLimit);
}

ErrorCode code_for_status(int status) {
  switch (status) {
    case 400: return ErrorCode::kInvalidArgument;
    case 401:
    case 403: return ErrorCode::kPermissionDenied;
    case 404: return ErrorCode::kNotFound;
    case 409:  // a conflict: in use, not running, already paused
    case 501:  // not implemented by this engine
      return ErrorCode::kFailedPrecondition;
    case 503: return ErrorCode::kUnavailable;
    default: return status >= 500 ? ErrorCode::kInternal : ErrorCode::kIo;
  }
}

Result<json> parse_body(const std::string& body, const std::string& what) {
  auto parsed = parse_json(body, JsonLimits{EngineClient::kJsonBodyLimit});
  if (!parsed.ok()) {
    Error e = parsed.take_error();
    e.context = what + ": the engine's answer: " + e.context;
    return e;
  }
  return parsed;
}

Result<std::string> string_field(const json& j, const char* key, const std::string& what) {
  if (!j.is_object()) return Error::make(ErrorCode::kIo, what + ": the answer is not an object");
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().empty() ||
      it->get_ref<const std::string&>().size() > 256)
    return Error::make(ErrorCode::kIo, what + ": the answer has no " + key);
  return it->get<std::string>();
}

// The progress stream /build and /images/create answer with: JSON objects,
// one a line; a failure arrives as one with "error" after a 200. Returns the
// last image id ("sha256:...") an "id" or "status" named, or "" if none did.
Result<std::string> read_progress(std::string_view body, const std::string& what) {
  std::string id;
  std::string_view rest = body;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    auto j = parse_body(std::string(line), what);
    if (!j.ok()) return j.take_error();
    if (!j->is_object()) continue;
    if (auto e = j->find("error"); e != j->end() && e->is_string())
      return Error::make(ErrorCode::kIo,
                         what + ": " + printable(e->get<std::string>(), kMessageLimit));
    for (const char* key : {"id", "status"}) {
      auto it = j->find(key);
      if (it != j->end() && it->is_string() &&
          it->get_ref<const std::string&>().rfind("sha256:", 0) == 0)
        id = printable(it->get<std::string>(), 128);
    }
  }
  return id;
}

// "1.41" -> 41 (major must be 1, as for every Engine API so far).
int api_minor(const json& j, const char* key, int absent) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return absent;
  const std::string& v = it->get_ref<const std::string&>();
  if (v.size() < 3 || v.size() > 8 || v.compare(0, 2, "1.") != 0) return -1;
  int minor = 0;
  for (std::size_t i = 2; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return -1;
    minor = minor * 10 + (v[i] - '0');
  }
  return minor;
}

}  // namespace

int engine_http_status(const Error& error) {
  const std::string& c = error.context;
  const auto pos = c.find(": HTTP ");
  if (pos == std::string::npos || pos + 10 > c.size()) return 0;
  int status = 0;
  for (std::size_t i = pos + 7; i < pos + 10; ++i) {
    if (c[i] < '0' || c[i] > '9') return 0;
    status = status * 10 + (c[i] - '0');
  }
  return status;
}

std::string query_escape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

// One TLS exec stream relayed to a socketpair end (ExecSession::take_stream):
// its own thread, running the HttpCall's relay on the call's io_context.
class StreamPump {
 public:
  StreamPump(std::unique_ptr<HttpCall> http, UniqueFd local) : http_(std::move(http)) {
    thread_ = std::thread([this, fd = std::move(local)]() mutable {
      (void)http_->relay(std::move(fd));
      done_.store(true, std::memory_order_release);
    });
  }
  ~StreamPump() {
    http_->stop();
    thread_.join();
  }
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;
  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  std::unique_ptr<HttpCall> http_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

EngineClient::~EngineClient() {
  std::vector<std::unique_ptr<StreamPump>> pumps;
  {
    std::lock_guard l(pumps_mu_);
    pumps.swap(pumps_);
  }
  pumps.clear();  // each stopped and joined
}

void EngineClient::start_pump(std::unique_ptr<HttpCall> http, UniqueFd local) {
  std::vector<std::unique_ptr<StreamPump>> finished;
  std::lock_guard l(pumps_mu_);
  // Ended pumps are joined here (their threads are done), not one by one.
  for (auto& p : pumps_)
    if (p->done()) finished.push_back(std::move(p));
  std::erase(pumps_, nullptr);
  pumps_.push_back(std::make_unique<StreamPump>(std::move(http), std::move(local)));
}

std::chrono::milliseconds EngineClient::timeout_of(const CallOptions& call) const {
  return call.timeout.count() > 0 ? call.timeout : options_.timeout;
}

Result<std::unique_ptr<EngineClient>> EngineClient::connect(const EngineOptions& options,
                                                            const CallOptions& call) {
  auto ep = parse_endpoint(options.url, options.tls_dir);
  if (!ep.ok()) return ep.take_error();
  std::unique_ptr<EngineClient> c(new EngineClient());
  c->endpoint_ = std::move(*ep);
  c->options_ = options;
  if (c->endpoint_.tls) {
    namespace fs = std::filesystem;
    const fs::path dir(options.tls_dir);
    for (const char* f : {"ca.pem", "cert.pem", "key.pem"}) {
      std::error_code ec;
      if (!fs::is_regular_file(dir / f, ec))
        return invalid("engine " + c->endpoint_.str() + ": TLS directory " + options.tls_dir +
                       " has no " + f + " (it needs ca.pem, cert.pem and key.pem)");
    }
    c->tls_ = std::make_unique<ssl::context>(ssl::context::tls_client);
    boost::system::error_code ec;
    auto& ctx = *c->tls_;
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    ctx.set_verify_mode(ssl::verify_peer, ec);
    if (!ec) ctx.load_verify_file((dir / "ca.pem").string(), ec);
    if (ec) return invalid("engine " + c->endpoint_.str() + ": loading ca.pem: " + ec.message());
    ctx.use_certificate_chain_file((dir / "cert.pem").string(), ec);
    if (ec) return invalid("engine " + c->endpoint_.str() + ": loading cert.pem: " + ec.message());
    ctx.use_private_key_file((dir / "key.pem").string(), ssl::context::pem, ec);
    if (ec) return invalid("engine " + c->endpoint_.str() + ": loading key.pem: " + ec.message());
  }

  // Negotiation: the unversioned /version answers on every engine.
  auto v = c->exchange("GET", "/version", nullptr, nullptr, {}, call);
  if (!v.ok()) return v.take_error();
  auto j = parse_body(v->body, "engine " + c->endpoint_.str() + ": GET /version");
  if (!j.ok()) return j.take_error();
  if (!j->is_object())
    return Error::make(ErrorCode::kIo,
                       "engine " + c->endpoint_.str() + ": /version is not an object");
  const int server_max = api_minor(*j, "ApiVersion", -1);
  const int server_min = api_minor(*j, "MinAPIVersion", 12);
  if (server_max < 0 || server_min < 0)
    return Error::make(ErrorCode::kIo, "engine " + c->endpoint_.str() +
                                           ": /version has no valid ApiVersion/MinAPIVersion");
  const int use = std::min(server_max, kMaxApiMinor);
  if (use < kMinApiMinor || use < server_min)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "engine " + c->endpoint_.str() + " speaks API 1." +
                           std::to_string(server_min) + " to 1." + std::to_string(server_max) +
                           "; sandcastle speaks 1." + std::to_string(kMinApiMinor) + " to 1." +
                           std::to_string(kMaxApiMinor));
  c->api_version_ = "1." + std::to_string(use);
  return c;
}

Result<EngineClient::Answer> EngineClient::exchange(
    std::string_view method, const std::string& target, const std::string* body,
    const ByteSource* source, std::string_view content_type, const CallOptions& call,
    std::size_t body_limit, int also_ok) {
  HttpCall http(endpoint_, tls_.get(), timeout_of(call), options_.connect_timeout, call.cancel);
  if (auto st = http.open(); !st.ok()) return st.take_error();
  HttpRequest req;
  req.verb = bhttp::string_to_verb(method);
  req.target = target;
  req.content_type = std::string(content_type);
  req.body = body;
  req.source = source;
  auto sent = http.send(req);
  // An engine may answer (and close) before it has read a streamed body: a
  // 404 for a container that is gone. Its answer says more than EPIPE.
  auto head = http.read_head();
  if (!sent.ok() && (!head.ok() || (head->status >= 200 && head->status < 300)))
    return sent.take_error();
  if (!head.ok()) return head.take_error();
  Answer a;
  a.status = head->status;
  if ((a.status >= 200 && a.status < 300) || a.status == also_ok) {
    if (auto st = http.read_body(&a.body, body_limit); !st.ok()) return st.take_error();
    return a;
  }
  std::string err;
  (void)http.read_body(&err, kErrorBodyLimit, /*truncate=*/true);
  std::string message = engine_message(err);
  if (message.empty()) message = head->reason;
  return Error::make(code_for_status(a.status),
                     http.what() + ": HTTP " + std::to_string(a.status) + ": " + message);
}

Result<json> EngineClient::call_json(std::string_view method, std::string_view path,
                                     const json* body, const CallOptions& call) {
  const std::string text = body ? body->dump() : std::string();
  auto a = exchange(method, versioned(path), body ? &text : nullptr, nullptr,
                    body ? "application/json" : "", call);
  if (!a.ok()) return a.take_error();
  if (a->body.empty()) return json();
  return parse_body(
      a->body, "engine " + endpoint_.str() + ": " + std::string(method) + " " + std::string(path));
}

Status EngineClient::ping(const CallOptions& call) {
  auto a = exchange("GET", "/_ping", nullptr, nullptr, {}, call, 64);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Result<json> EngineClient::version(const CallOptions& call) {
  return call_json("GET", "/version", nullptr, call);
}

Result<json> EngineClient::image_inspect(std::string_view image, const CallOptions& call) {
  if (auto st = check_image(image); !st.ok()) return st.take_error();
  return call_json("GET", "/images/" + std::string(image) + "/json", nullptr, call);
}

Result<json> EngineClient::image_list(const CallOptions& call) {
  return call_json("GET", "/images/json", nullptr, call);
}

Result<std::string> EngineClient::image_build(const ByteSource& context, std::string_view repo_tag,
                                              const CallOptions& call) {
  if (auto st = check_image(repo_tag); !st.ok()) return st.take_error();
  const std::string target = versioned("/build?rm=1&forcerm=1&t=" + query_escape(repo_tag));
  auto a = exchange("POST", target, nullptr, &context, "application/x-tar", call);
  if (!a.ok()) return a.take_error();
  const std::string what = "engine " + endpoint_.str() + ": image build";
  if (auto progress = read_progress(a->body, what); !progress.ok()) return progress.take_error();
  // Both engines tag the result; its id is the tag's.
  auto info = image_inspect(repo_tag, call);
  if (!info.ok()) return info.take_error();
  auto id = info->find("Id");
  if (id == info->end() || !id->is_string())
    return Error::make(ErrorCode::kIo, what + ": the built image has no id");
  return printable(id->get<std::string>(), 128);
}

Result<std::string> EngineClient::image_import(const ByteSource& tar, std::string_view repo_tag,
                                               const CallOptions& call) {
  if (auto st = check_image(repo_tag); !st.ok()) return st.take_error();
  const std::string target = versioned("/images/create?fromSrc=-&repo=" + query_escape(repo_tag));
  auto a = exchange("POST", target, nullptr, &tar, "application/x-tar", call);
  if (!a.ok()) return a.take_error();
  const std::string what = "engine " + endpoint_.str() + ": image import";
  auto id = read_progress(a->body, what);
  if (!id.ok()) return id.take_error();
  if (id->empty()) return Error::make(ErrorCode::kIo, what + ": no image id in the answer");
  return id;
}

Status EngineClient::image_remove(std::string_view image, bool force, const CallOptions& call) {
  if (auto st = check_image(image); !st.ok()) return st;
  auto a =
      exchange("DELETE", versioned("/images/" + std::string(image) + (force ? "?force=1" : "")),
               nullptr, nullptr, {}, call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Result<std::string> EngineClient::container_create(const json& config, std::string_view name,
                                                   const CallOptions& call) {
  std::string path = "/containers/create";
  if (!name.empty()) {
    if (auto st = check_id(name, "container"); !st.ok()) return st.take_error();
    path += "?name=" + std::string(name);
  }
  auto j = call_json("POST", path, &config, call);
  if (!j.ok()) return j.take_error();
  return string_field(*j, "Id", "engine " + endpoint_.str() + ": container create");
}

Status EngineClient::container_start(std::string_view id, const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  // 304: already running.
  auto a = exchange("POST", versioned("/containers/" + std::string(id) + "/start"), nullptr,
                    nullptr, {}, call, kJsonBodyLimit, 304);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Result<json> EngineClient::container_inspect(std::string_view id, const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st.take_error();
  return call_json("GET", "/containers/" + std::string(id) + "/json", nullptr, call);
}

Result<json> EngineClient::container_list(bool all, const CallOptions& call) {
  return call_json("GET", all ? "/containers/json?all=1" : "/containers/json", nullptr, call);
}

Status EngineClient::container_kill(std::string_view id, std::string_view signal,
                                    const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  auto a = exchange(
      "POST", versioned("/containers/" + std::string(id) + "/kill?signal=" + query_escape(signal)),
      nullptr, nullptr, {}, call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Status EngineClient::container_remove(std::string_view id, bool force, bool volumes,
                                      const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  auto a = exchange("DELETE",
                    versioned("/containers/" + std::string(id) + "?force=" + (force ? "1" : "0") +
                              "&v=" + (volumes ? "1" : "0")),
                    nullptr, nullptr, {}, call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Status EngineClient::container_pause(std::string_view id, const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  auto a = exchange("POST", versioned("/containers/" + std::string(id) + "/pause"), nullptr,
                    nullptr, {}, call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Status EngineClient::container_unpause(std::string_view id, const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  auto a = exchange("POST", versioned("/containers/" + std::string(id) + "/unpause"), nullptr,
                    nullptr, {}, call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Result<json> EngineClient::container_stats(std::string_view id, bool one_shot,
                                           const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st.take_error();
  return call_json(
      "GET",
      "/containers/" + std::string(id) + "/stats?stream=false" + (one_shot ? "&one-shot=true" : ""),
      nullptr, call);
}

Result<std::string> EngineClient::commit(std::string_view id, std::string_view repo,
                                         std::string_view tag, const json& config,
                                         const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st.take_error();
  std::string path = "/commit?container=" + std::string(id) + "&pause=true";
  if (!repo.empty()) path += "&repo=" + query_escape(repo);
  if (!tag.empty()) path += "&tag=" + query_escape(tag);
  auto j = call_json("POST", path, &config, call);
  if (!j.ok()) return j.take_error();
  return string_field(*j, "Id", "engine " + endpoint_.str() + ": commit");
}

Status EngineClient::archive_get(std::string_view id, std::string_view path, const ByteSink& sink,
                                 std::size_t max_bytes, const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  HttpCall http(endpoint_, tls_.get(), timeout_of(call), options_.connect_timeout, call.cancel);
  if (auto st = http.open(); !st.ok()) return st;
  HttpRequest req;
  req.target = versioned("/containers/" + std::string(id) + "/archive?path=" + query_escape(path));
  if (auto st = http.send(req); !st.ok()) return st;
  auto head = http.read_head();
  if (!head.ok()) return head.take_error();
  if (head->status != 200) {
    std::string err;
    (void)http.read_body(&err, kErrorBodyLimit, true);
    return Error::make(
        code_for_status(head->status),
        http.what() + ": HTTP " + std::to_string(head->status) + ": " + engine_message(err));
  }
  return http.read_body_to(sink, max_bytes);
}

Status EngineClient::archive_put(std::string_view id, std::string_view path, const ByteSource& tar,
                                 const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st;
  auto a = exchange("PUT",
                    versioned("/containers/" + std::string(id) +
                              "/archive?path=" + query_escape(path) + "&noOverwriteDirNonDir=true"),
                    nullptr, &tar, "application/x-tar", call);
  if (!a.ok()) return a.take_error();
  return ok_status();
}

Result<std::string> EngineClient::exec_create(std::string_view id, const json& config,
                                              const CallOptions& call) {
  if (auto st = check_id(id, "container"); !st.ok()) return st.take_error();
  auto j = call_json("POST", "/containers/" + std::string(id) + "/exec", &config, call);
  if (!j.ok()) return j.take_error();
  return string_field(*j, "Id", "engine " + endpoint_.str() + ": exec create");
}

Result<std::unique_ptr<HttpCall>> EngineClient::open_exec_stream(std::string_view exec_id,
                                                                 std::chrono::milliseconds timeout,
                                                                 CancelToken* cancel) {
  if (auto st = check_id(exec_id, "exec"); !st.ok()) return st.take_error();
  auto http =
      std::make_unique<HttpCall>(endpoint_, tls_.get(), timeout, options_.connect_timeout, cancel);
  if (auto st = http->open(); !st.ok()) return st.take_error();
  const std::string body = R"({"Detach":false,"Tty":false})";
  HttpRequest req;
  req.verb = bhttp::verb::post;
  req.target = versioned("/exec/" + std::string(exec_id) + "/start");
  req.content_type = "application/json";
  req.body = &body;
  req.upgrade = true;
  if (auto st = http->send(req); !st.ok()) return st.take_error();
  auto head = http->read_head();
  if (!head.ok()) return head.take_error();
  // dockerd answers 101 to the upgrade; Podman 200, then hijacks all the same.
  if (head->status != 101 && head->status != 200) {
    std::string err;
    (void)http->read_body(&err, kErrorBodyLimit, true);
    return Error::make(
        code_for_status(head->status),
        http->what() + ": HTTP " + std::to_string(head->status) + ": " + engine_message(err));
  }
  return http;
}

Status EngineClient::exec_start(std::string_view exec_id, const ByteSource* stdin_src,
                                const StreamDemuxer::Sink& output, const CallOptions& call,
                                std::size_t max_frame) {
  auto http = open_exec_stream(exec_id, timeout_of(call), call.cancel);
  if (!http.ok()) return http.take_error();
  StreamDemuxer demux(output, max_frame);
  if (auto st = (*http)->duplex(stdin_src, [&](std::string_view b) { return demux.feed(b); });
      !st.ok())
    return st;
  return demux.finish();
}

Result<std::unique_ptr<ExecSession>> EngineClient::exec_attach(std::string_view exec_id,
                                                               const CallOptions& call,
                                                               std::size_t max_frame) {
  auto http = open_exec_stream(exec_id, call.timeout, call.cancel);
  if (!http.ok()) return http.take_error();
  std::unique_ptr<ExecSession> s(new ExecSession());
  s->client_ = this;
  s->http_ = std::move(*http);
  s->exec_id_ = std::string(exec_id);
  s->buffered_ = s->http_->take_buffered();
  ExecSession* raw = s.get();
  s->demux_ = std::make_unique<StreamDemuxer>(
      [raw](StreamId id, std::string_view b) -> Status {
        if (raw->sink_ == nullptr)
          return Error::make(ErrorCode::kInternal, "exec session: output outside a read");
        return (*raw->sink_)(id, b);
      },
      max_frame);
  return s;
}

ExecSession::~ExecSession() = default;

Status ExecSession::write(std::string_view data, std::chrono::milliseconds timeout) {
  if (ended_)
    return Error::make(ErrorCode::kFailedPrecondition, "exec session " + exec_id_ + " ended");
  auto st = http_->write_all(data, timeout);
  if (!st.ok()) ended_ = st.error().code == ErrorCode::kTimeout || ended_;
  return st;
}

Result<ExecSession::RawStream> ExecSession::take_stream() {
  if (ended_)
    return Error::make(ErrorCode::kFailedPrecondition, "exec session " + exec_id_ + " ended");
  if (http_->is_tls()) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return Error::from_errno("exec session " + exec_id_ + ": socketpair");
    RawStream out{UniqueFd(sv[0]), std::move(buffered_)};
    buffered_.clear();
    ended_ = true;
    // The caller's cancel token may not outlive this session; the pump
    // does.
    http_->forget_cancel();
    client_->start_pump(std::move(http_), UniqueFd(sv[1]));
    return out;
  }
  auto fd = http_->dup_stream_fd();
  if (!fd.ok()) return fd.take_error();
  RawStream out{UniqueFd(*fd), std::move(buffered_)};
  buffered_.clear();
  ended_ = true;
  http_.reset();  // our copy only: the descriptor lives on in `out`
  return out;
}

Status ExecSession::close_stdin() {
  if (ended_ || !http_)
    return Error::make(ErrorCode::kFailedPrecondition, "exec session " + exec_id_ + " ended");
  return http_->shutdown_send();
}

Result<bool> ExecSession::read(const StreamDemuxer::Sink& output,
                               std::chrono::milliseconds timeout) {
  if (ended_) return false;
  sink_ = &output;
  struct Reset {
    const StreamDemuxer::Sink*& p;
    ~Reset() { p = nullptr; }
  } reset{sink_};
  if (!buffered_.empty()) {
    const std::string bytes = std::move(buffered_);
    buffered_.clear();
    if (auto st = demux_->feed(bytes); !st.ok()) return st.take_error();
    return true;
  }
  std::array<char, std::size_t{64} * 1024> buf;
  auto n = http_->read_some(buf.data(), buf.size(), timeout);
  if (!n.ok()) return n.take_error();
  if (*n == 0) {
    ended_ = true;
    if (auto st = demux_->finish(); !st.ok()) return st.take_error();
    return false;
  }
  if (auto st = demux_->feed(std::string_view(buf.data(), *n)); !st.ok()) return st.take_error();
  return true;
}

Result<json> EngineClient::exec_inspect(std::string_view exec_id, const CallOptions& call) {
  if (auto st = check_id(exec_id, "exec"); !st.ok()) return st.take_error();
  return call_json("GET", "/exec/" + std::string(exec_id) + "/json", nullptr, call);
}

Result<ExecRun> EngineClient::exec_run(std::string_view id, const std::vector<std::string>& argv,
                                       const ByteSource* stdin_src,
                                       const StreamDemuxer::Sink& output, const CallOptions& call) {
  const auto deadline = Clock::now() + timeout_of(call);
  auto left = [&]() -> CallOptions {
    CallOptions c = call;
    c.timeout =
        std::max(std::chrono::milliseconds(1),
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    return c;
  };
  json config = {{"Cmd", argv},
                 {"AttachStdin", stdin_src != nullptr},
                 {"AttachStdout", true},
                 {"AttachStderr", true},
                 {"Tty", false}};
  auto exec_id = exec_create(id, config, left());
  if (!exec_id.ok()) return exec_id.take_error();
  if (auto st = exec_start(*exec_id, stdin_src, output, left()); !st.ok()) return st.take_error();
  // dockerd may close the stream a moment before it records the exit code;
  // the API has no wait for an exec, so ask again, briefly backing off.
  auto delay = std::chrono::microseconds(200);
  for (;;) {
    auto j = exec_inspect(*exec_id, left());
    if (!j.ok()) return j.take_error();
    const auto running = j->find("Running");
    const auto code = j->find("ExitCode");
    if (running != j->end() && running->is_boolean() && !running->get<bool>() && code != j->end() &&
        code->is_number_integer()) {
      const auto v = code->get<std::int64_t>();
      if (v < 0 || v > 255)
        return Error::make(ErrorCode::kIo, "engine " + endpoint_.str() + ": exec exit code " +
                                               std::to_string(v) + " out of range");
      return ExecRun{static_cast<int>(v)};
    }
    if (Clock::now() + delay >= deadline)
      return Error::make(ErrorCode::kTimeout, "engine " + endpoint_.str() + ": exec " + *exec_id +
                                                  " did not end in time");
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace sandcastle::sandbox::engine

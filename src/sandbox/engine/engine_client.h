// EngineClient: the Engine API of dockerd and Podman's compat service, over
// HTTP/1.1 (Boost.Beast), with no CLI and no SDK. One connection per call (a
// whole GET /_ping over a unix socket measured 0.2-0.3 ms here); calls are
// safe from several threads.
//
// Limits on what the engine sends (it is outside the sandbox boundary, but
// a remote engine or a tampered socket is still untrusted input):
//  - JSON answers: kJsonBodyLimit bytes, parsed with common/json_parse.h;
//  - error answers: kErrorBodyLimit bytes, of which the message is kept;
//  - archives: a byte limit per call; exec streams: the demuxer's frame
//    limit, the bytes going to the caller's sink as they come.
// An engine error is a Result error whose message is
// "engine <endpoint>: <METHOD> <target>: HTTP <status>: <engine's message>"
// (engine_http_status() reads the status back).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/engine/endpoint.h"
#include "sandbox/engine/engine_types.h"
#include "sandbox/engine/stream_demuxer.h"

namespace sandcastle::sandbox::engine {

struct EngineOptions {
  std::string url;      // unix:///path.sock, tcp://host:port
  std::string tls_dir;  // ca.pem, cert.pem, key.pem; tcp:// only
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // per call, unless stated
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
};

struct ExecRun {
  int exit_code = -1;
};

class HttpCall;
class StreamPump;
class EngineClient;

// A long-lived attached exec (a shell, a kernel, an agent): its hijacked
// stream kept open, so each exchange with the process costs a round trip on
// the stream, not an exec start. From EngineClient::exec_attach; must not
// outlive the client. One thread at a time.
class ExecSession {
 public:
  ~ExecSession();
  ExecSession(const ExecSession&) = delete;
  ExecSession& operator=(const ExecSession&) = delete;

  const std::string& exec_id() const { return exec_id_; }
  // All of `data` to the process's stdin; past `timeout` the session is
  // closed (kTimeout): a partial write leaves the stream unusable.
  Status write(std::string_view data, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // stdin's EOF.
  Status close_stdin();
  // Waits up to `timeout` for output and hands what came to `output`
  // (demuxed, as it came); false once the process's streams closed.
  // kTimeout when nothing came: the session goes on.
  Result<bool> read(const StreamDemuxer::Sink& output, std::chrono::milliseconds timeout);

  // The stream, for a relay of the caller's: a descriptor and the raw bytes
  // already read past the response head (still in the engine's framing).
  // Unix and TCP: a dup of the socket. TLS, whose bytes are not the
  // socket's: one end of a socketpair, the other pumped to and from the
  // TLS stream by a thread of the client's (StreamPump) until either side
  // ends. Only before the first read; the session is closed afterwards.
  struct RawStream {
    UniqueFd fd;
    std::string buffered;
  };
  Result<RawStream> take_stream();

 private:
  friend class EngineClient;
  ExecSession() = default;
  EngineClient* client_ = nullptr;
  std::unique_ptr<HttpCall> http_;
  std::unique_ptr<StreamDemuxer> demux_;
  const StreamDemuxer::Sink* sink_ = nullptr;  // the current read's
  std::string exec_id_;
  std::string buffered_;  // stream bytes that came with the response head
  bool ended_ = false;
};

class EngineClient {
 public:
  static constexpr std::size_t kJsonBodyLimit = std::size_t{8} << 20;
  static constexpr std::size_t kErrorBodyLimit = std::size_t{64} << 10;
  // The API versions sandcastle speaks: 1.40 (Docker 19.03) up to 1.47;
  // the newest both sides speak is used.
  static constexpr int kMinApiMinor = 40;
  static constexpr int kMaxApiMinor = 47;

  // Parses the endpoint, loads the TLS files, and negotiates the API version
  // with GET /version (ApiVersion, MinAPIVersion).
  static Result<std::unique_ptr<EngineClient>> connect(const EngineOptions& options,
                                                       const CallOptions& call = {});
  ~EngineClient();

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& api_version() const { return api_version_; }  // "1.41"

  Status ping(const CallOptions& call = {});
  Result<nlohmann::json> version(const CallOptions& call = {});

  Result<nlohmann::json> image_inspect(std::string_view image, const CallOptions& call = {});
  Result<nlohmann::json> image_list(const CallOptions& call = {});
  // POST /images/create?fromSrc=- with a tar of a root filesystem; the
  // image's id. `repo_tag` as "name:tag".
  Result<std::string> image_import(const ByteSource& tar, std::string_view repo_tag,
                                   const CallOptions& call = {});
  Status image_remove(std::string_view image, bool force, const CallOptions& call = {});
  // POST /build?t= with a build context tar (a Dockerfile at its top):
  // the new image's id. The engine's progress stream is read to its end
  // (kJsonBodyLimit); an "error" in it fails the call with the message.
  Result<std::string> image_build(const ByteSource& context, std::string_view repo_tag,
                                  const CallOptions& call = {});

  // POST /containers/create with `config` as the body; the container's id.
  Result<std::string> container_create(const nlohmann::json& config, std::string_view name = {},
                                       const CallOptions& call = {});
  Status container_start(std::string_view id, const CallOptions& call = {});
  Result<nlohmann::json> container_inspect(std::string_view id, const CallOptions& call = {});
  Result<nlohmann::json> container_list(bool all, const CallOptions& call = {});
  Status container_kill(std::string_view id, std::string_view signal = "KILL",
                        const CallOptions& call = {});
  Status container_remove(std::string_view id, bool force, bool volumes,
                          const CallOptions& call = {});
  Status container_pause(std::string_view id, const CallOptions& call = {});
  Status container_unpause(std::string_view id, const CallOptions& call = {});
  // GET /containers/{id}/stats?stream=false; `one_shot` skips the engine's
  // wait for a second CPU sample (precpu_stats then empty).
  Result<nlohmann::json> container_stats(std::string_view id, bool one_shot = true,
                                         const CallOptions& call = {});
  // POST /commit: the new image's id.
  Result<std::string> commit(std::string_view id, std::string_view repo, std::string_view tag,
                             const nlohmann::json& config, const CallOptions& call = {});

  // GET /containers/{id}/archive?path=: a tar stream to `sink`, at most
  // `max_bytes` (kResourceExhausted past it).
  Status archive_get(std::string_view id, std::string_view path, const ByteSink& sink,
                     std::size_t max_bytes, const CallOptions& call = {});
  // PUT /containers/{id}/archive?path=: a tar stream from `tar`, extracted
  // into the directory `path`.
  Status archive_put(std::string_view id, std::string_view path, const ByteSource& tar,
                     const CallOptions& call = {});

  // POST /containers/{id}/exec: the exec's id.
  Result<std::string> exec_create(std::string_view id, const nlohmann::json& config,
                                  const CallOptions& call = {});
  // POST /exec/{id}/start, attached: the connection is upgraded (hijacked),
  // `stdin_src` (if any; the exec needs AttachStdin) is written then closed,
  // and the multiplexed output goes to `output` until the process's streams
  // close. `max_frame` bounds one frame of the stream. A timeout or a
  // cancel closes the stream but does not end the process: the Engine API
  // has no exec kill (the backend kills it, e.g. by exec_inspect's Pid).
  Status exec_start(std::string_view exec_id, const ByteSource* stdin_src,
                    const StreamDemuxer::Sink& output, const CallOptions& call = {},
                    std::size_t max_frame = StreamDemuxer::kDefaultMaxFrame);
  Result<nlohmann::json> exec_inspect(std::string_view exec_id, const CallOptions& call = {});
  // POST /exec/{id}/start, attached, kept open as an ExecSession. The
  // call's timeout (0 here: none) bounds the whole session.
  Result<std::unique_ptr<ExecSession>> exec_attach(
      std::string_view exec_id, const CallOptions& call = {},
      std::size_t max_frame = StreamDemuxer::kDefaultMaxFrame);
  // create + start + inspect: runs `argv` in the container to its end (its
  // exit code). The call's timeout covers the three.
  Result<ExecRun> exec_run(std::string_view id, const std::vector<std::string>& argv,
                           const ByteSource* stdin_src, const StreamDemuxer::Sink& output,
                           const CallOptions& call = {});

  // Any call: `path` below the version prefix ("/containers/json?all=1").
  // The answer's JSON, or an engine error.
  Result<nlohmann::json> call_json(std::string_view method, std::string_view path,
                                   const nlohmann::json* body, const CallOptions& call = {});

 private:
  friend class ExecSession;
  EngineClient() = default;
  // Starts a StreamPump between `http`'s upgraded stream and `local`.
  void start_pump(std::unique_ptr<HttpCall> http, UniqueFd local);
  struct Answer {
    int status = 0;
    std::string body;
  };
  // One request; a non-2xx answer (other than `also_ok`) becomes the
  // engine's error. `body_limit` bounds the success body.
  Result<Answer> exchange(std::string_view method, const std::string& target,
                          const std::string* body, const ByteSource* source,
                          std::string_view content_type, const CallOptions& call,
                          std::size_t body_limit = kJsonBodyLimit, int also_ok = 0);
  std::string versioned(std::string_view path) const {
    return "/v" + api_version_ + std::string(path);
  }
  std::chrono::milliseconds timeout_of(const CallOptions& call) const;
  // Opens an exec's hijacked stream: the response head read, the stream next.
  Result<std::unique_ptr<HttpCall>> open_exec_stream(std::string_view exec_id,
                                                     std::chrono::milliseconds timeout,
                                                     CancelToken* cancel);

  Endpoint endpoint_;
  EngineOptions options_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::string api_version_;
  // Last: pumps end (and join) before what their calls refer to goes.
  std::mutex pumps_mu_;
  std::vector<std::unique_ptr<StreamPump>> pumps_;
};

// The HTTP status in an engine error's message, 0 if there is none.
int engine_http_status(const Error& error);

// Percent-encodes a query value (RFC 3986 unreserved characters kept).
std::string query_escape(std::string_view value);

}  // namespace sandcastle::sandbox::engine

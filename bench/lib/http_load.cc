// http_load: the load generator of bench/http_bench.mjs. C clients, each on
// its own keep-alive connection and (with --session) its own MCP session,
// send one JSON-RPC body back to back until N requests are done; one thread,
// epoll, no allocation per request beyond the response bytes. Written in C++
// so that the generator's own cost, which both servers share a 2-core
// machine with, stays small next to theirs.
//
// Usage: http_load --port P [--host 127.0.0.1] [--path /mcp] --clients C
//          --requests N --body JSON [--session 2025-06-18] [--warmup 3]
//          [--tool-call]
// Prints one JSON object: requests, errors, seconds, rps, p50_ms, p99_ms,
// bytes (of the last response body), first_error.
//
// A response counts as an error unless it is 200 with a JSON-RPC result (in
// a JSON body or an SSE event) and, with --tool-call, not an isError result.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/mcp";
  int clients = 1;
  long requests = 1000;
  std::string body;
  std::string session_version;  // empty: no initialize handshake
  int warmup = 3;
  bool tool_call = false;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "http_load: %s\n", why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--host")
      o.host = val();
    else if (a == "--port")
      o.port = std::atoi(val().c_str());
    else if (a == "--path")
      o.path = val();
    else if (a == "--clients")
      o.clients = std::atoi(val().c_str());
    else if (a == "--requests")
      o.requests = std::atol(val().c_str());
    else if (a == "--body")
      o.body = val();
    else if (a == "--session")
      o.session_version = val();
    else if (a == "--warmup")
      o.warmup = std::atoi(val().c_str());
    else if (a == "--tool-call")
      o.tool_call = true;
    else
      die("unknown argument " + a);
  }
  if (o.port <= 0 || o.clients <= 0 || o.requests <= 0 || o.body.empty())
    die("usage: http_load --port P --clients C --requests N --body JSON [--session VERSION]");
  return o;
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct Response {
  int status = 0;
  std::string session;
  bool close = false;
  std::string body;
};

// One complete response from the front of `in` (consumed), if there is one.
std::optional<Response> take_response(std::string& in) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return std::nullopt;
  Response r;
  std::string_view head(in.data(), head_end);
  if (head.size() < 12 || head.substr(0, 5) != "HTTP/") die("malformed status line");
  r.status = std::atoi(std::string(head.substr(9, 3)).c_str());
  long length = -1;
  bool chunked = false;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos < head.size()) {
    size_t next = head.find("\r\n", pos + 2);
    std::string_view line =
        head.substr(pos + 2, (next == std::string_view::npos ? head.size() : next) - pos - 2);
    if (iequals_prefix(line, "content-length:"))
      length = std::atol(std::string(trim(line.substr(15))).c_str());
    else if (iequals_prefix(line, "transfer-encoding:"))
      chunked = trim(line.substr(18)) == "chunked";
    else if (iequals_prefix(line, "mcp-session-id:"))
      r.session = std::string(trim(line.substr(15)));
    else if (iequals_prefix(line, "connection:"))
      r.close = trim(line.substr(11)) == "close";
    pos = next;
  }
  size_t p = head_end + 4;
  if (chunked) {
    for (;;) {
      size_t eol = in.find("\r\n", p);
      if (eol == std::string::npos) return std::nullopt;
      const long size = std::strtol(in.c_str() + p, nullptr, 16);
      if (size == 0) {
        size_t end = in.find("\r\n", eol + 2);  // empty trailer line
        if (end == std::string::npos) return std::nullopt;
        p = end + 2;
        break;
      }
      if (in.size() < eol + 2 + static_cast<size_t>(size) + 2) return std::nullopt;
      r.body.append(in, eol + 2, static_cast<size_t>(size));
      p = eol + 2 + static_cast<size_t>(size) + 2;
    }
  } else {
    if (length < 0) length = 0;  // 202 and friends
    if (in.size() < p + static_cast<size_t>(length)) return std::nullopt;
    r.body.assign(in, p, static_cast<size_t>(length));
    p += static_cast<size_t>(length);
  }
  in.erase(0, p);
  return r;
}

bool is_success(const Response& r, bool tool_call) {
  if (r.status != 200) return false;
  if (r.body.find("\"result\"") == std::string::npos) return false;
  if (tool_call && r.body.find("\"isError\":true") != std::string::npos) return false;
  return true;
}

enum class Phase { kInitialize, kInitialized, kWarmup, kReady, kMeasured, kDone };

struct Conn {
  int fd = -1;
  Phase phase = Phase::kWarmup;
  std::string out;
  size_t out_off = 0;
  std::string in;
  std::string session;
  std::string req;  // the measured request, with this connection's session
  int warm_left = 0;
  Clock::time_point sent_at;
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die("epoll_create1");
    const std::string init =
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":")" +
        o_.session_version +
        R"(","capabilities":{},"clientInfo":{"name":"http-load","version":"1"}}})";
    init_req_ = request(init, "");
    conns_.resize(static_cast<size_t>(o_.clients));
    for (auto& c : conns_) {
      connect_conn(c);
      c.warm_left = o_.warmup;
      if (o_.session_version.empty()) {
        c.phase = Phase::kWarmup;
        c.req = request(o_.body, "");
        send(c, c.req);
      } else {
        c.phase = Phase::kInitialize;
        send(c, init_req_);
      }
    }
  }

  void run() {
    loop([&] { return ready_ == conns_.size(); });
    start_ = Clock::now();
    for (auto& c : conns_) next_measured(c);
    loop([&] { return done_ == conns_.size(); });
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    std::sort(lat_ms_.begin(), lat_ms_.end());
    auto q = [&](double p) {
      if (lat_ms_.empty()) return 0.0;
      return lat_ms_[std::min(lat_ms_.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(lat_ms_.size())))];
    };
    std::string err;
    for (char ch : first_error_.substr(0, 300)) {
      if (ch == '"' || ch == '\\') err += '\\';
      if (static_cast<unsigned char>(ch) >= 0x20) err += ch;
    }
    std::printf(
        "{\"requests\":%zu,\"errors\":%ld,\"seconds\":%.6f,\"rps\":%.1f,\"p50_ms\":%.4f,\"p99_ms\":"
        "%.4f,"
        "\"bytes\":%zu,\"first_error\":\"%s\"}\n",
        lat_ms_.size(), errors_, secs, static_cast<double>(lat_ms_.size()) / secs, q(0.5), q(0.99),
        last_bytes_, err.c_str());
  }

 private:
  std::string request(const std::string& body, const std::string& session) const {
    std::string r =
        "POST " + o_.path + " HTTP/1.1\r\nHost: " + o_.host + ":" + std::to_string(o_.port) +
        "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n";
    if (!session.empty()) {
      r +=
          "Mcp-Session-Id: " + session + "\r\nMcp-Protocol-Version: " + o_.session_version + "\r\n";
    }
    r += "\r\n";
    r += body;
    return r;
  }

  void connect_conn(Conn& c) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0) die("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(o_.port));
    if (::inet_pton(AF_INET, o_.host.c_str(), &a.sin_addr) != 1) die("bad host " + o_.host);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      die(std::string("connect: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &c;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) != 0) die("epoll_ctl");
    c.in.clear();
  }

  void reconnect(Conn& c) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    connect_conn(c);
  }

  void send(Conn& c, const std::string& bytes) {
    c.out = bytes;
    c.out_off = 0;
    c.sent_at = Clock::now();
    flush(c);
  }

  void flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::write(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) die(std::string("write: ") + std::strerror(errno));
      c.out_off += static_cast<size_t>(n);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | (c.out_off < c.out.size() ? EPOLLOUT : 0u);
    ev.data.ptr = &c;
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void next_measured(Conn& c) {
    if (issued_ >= o_.requests) {
      c.phase = Phase::kDone;
      ++done_;
      return;
    }
    ++issued_;
    c.phase = Phase::kMeasured;
    send(c, c.req);
  }

  void on_response(Conn& c, const Response& r) {
    switch (c.phase) {
      case Phase::kInitialize:
        if (r.status != 200 || r.session.empty())
          die("initialize: HTTP " + std::to_string(r.status) + " " + r.body);
        c.session = r.session;
        c.phase = Phase::kInitialized;
        send(c, request(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", c.session));
        break;
      case Phase::kInitialized:
        if (r.status != 202 && r.status != 200)
          die("notifications/initialized: HTTP " + std::to_string(r.status));
        c.phase = Phase::kWarmup;
        c.req = request(o_.body, c.session);
        send(c, c.req);
        break;
      case Phase::kWarmup:
        if (--c.warm_left > 0) {
          send(c, c.req);
        } else {
          c.phase = Phase::kReady;
          ++ready_;
        }
        break;
      case Phase::kMeasured: {
        lat_ms_.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - c.sent_at).count());
        last_bytes_ = r.body.size();
        if (!is_success(r, o_.tool_call)) {
          ++errors_;
          if (first_error_.empty())
            first_error_ = "HTTP " + std::to_string(r.status) + " " + r.body;
        }
        next_measured(c);
        break;
      }
      case Phase::kReady:
      case Phase::kDone: die("unexpected response");
    }
  }

  template <typename Pred>
  void loop(Pred done) {
    epoll_event evs[256];
    char buf[65536];
    while (!done()) {
      int n = ::epoll_wait(ep_, evs, 256, 30'000);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("no progress for 30 s");
      for (int i = 0; i < n; ++i) {
        Conn& c = *static_cast<Conn*>(evs[i].data.ptr);
        if (evs[i].events & EPOLLOUT) flush(c);
        if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
        ssize_t got = ::read(c.fd, buf, sizeof buf);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got <= 0) die("server closed a connection mid-request");
        c.in.append(buf, static_cast<size_t>(got));
        while (auto r = take_response(c.in)) {
          const bool close = r->close;
          on_response(c, *r);
          if (close) {
            // The server ended the connection after this response: the
            // request just queued (if any) goes out on a fresh one.
            std::string pending = c.out;
            reconnect(c);
            if (c.phase != Phase::kReady && c.phase != Phase::kDone) {
              c.out = std::move(pending);
              c.out_off = 0;
              flush(c);
            }
            break;
          }
        }
      }
    }
  }

  Options o_;
  int ep_ = -1;
  std::string init_req_;
  std::vector<Conn> conns_;
  size_t ready_ = 0, done_ = 0;
  long issued_ = 0, errors_ = 0;
  std::vector<double> lat_ms_;
  size_t last_bytes_ = 0;
  std::string first_error_;
  Clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  Load load(std::move(o));
  load.run();
  return 0;
}

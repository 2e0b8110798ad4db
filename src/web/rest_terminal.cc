// GET /api/v1/sandboxes/{id}/terminal: a WebSocket to a shell on a pty in
// the sandbox (Sandbox::open_terminal). Binary frames carry raw bytes both
// ways; text frames from the client are JSON control messages (resize);
// when the shell exits the server sends {"type":"exit","code":N} and closes
// with 1000. One thread per terminal (at most max_terminals) owns it: it
// polls the pty and a wake-up eventfd, and stops reading the pty while the
// client has not taken what was sent (the shell then waits in its write).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <thread>

#include "common/json_parse.h"
#include "common/unique_fd.h"
#include "sandbox/sandbox.h"
#include "transport/http/websocket.h"
#include "web/rest_internal.h"

namespace sandcastle::web {

using namespace rest;
using transport::http::WsConnection;
using transport::http::WsHandler;
namespace ws_close = transport::http::ws_close;

namespace {

constexpr size_t kMaxPendingInput = size_t{256} * 1024;  // keystrokes not yet taken by the pty
constexpr size_t kHighWater = size_t{256} * 1024;        // unsent output: stop reading the pty
// A control message is one small flat object.
const JsonLimits kControlLimits{size_t{4} * 1024, 2, 16, "the terminal's control messages"};

class TerminalSession : public WsHandler, public std::enable_shared_from_this<TerminalSession> {
 public:
  TerminalSession(std::unique_ptr<service::Sandboxes::OpenTerminal> t, std::chrono::seconds idle,
                  std::shared_ptr<std::atomic<size_t>> count)
      : term_(std::move(t)),
        idle_(idle),
        count_(std::move(count)),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~TerminalSession() override { count_->fetch_sub(1); }
  // The owner's terminal slot: released with this session.
  void hold(std::shared_ptr<void> slot) { slot_ = std::move(slot); }

  void on_open(std::shared_ptr<WsConnection> conn) override {
    {
      std::lock_guard lock(mu_);
      conn_ = conn;
    }
    // The thread holds the session; it ends when the shell or the socket does.
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
    thread_.detach();
  }
  void on_binary(std::string bytes) override {
    std::lock_guard lock(mu_);
    if (input_bytes_ + bytes.size() > kMaxPendingInput) {
      closing_ = ws_close::kPolicyViolation;
    } else {
      input_bytes_ += bytes.size();
      input_.push_back(std::move(bytes));
    }
    wake();
  }
  void on_text(std::string text) override {
    // The only control message: {"type":"resize","cols":N,"rows":N}. Every
    // field's type is checked before use (a client's {"type":1} must not throw).
    auto parsed = parse_json(text, kControlLimits);
    std::optional<std::pair<uint16_t, uint16_t>> size;
    if (parsed.ok() && parsed->is_object()) {
      const json& m = *parsed;
      auto type = m.find("type"), cols = m.find("cols"), rows = m.find("rows");
      if (type != m.end() && type->is_string() && *type == "resize" && cols != m.end() &&
          rows != m.end() && cols->is_number_unsigned() && rows->is_number_unsigned() &&
          *cols >= 1 && *cols <= 1000 && *rows >= 1 && *rows <= 1000)
        size = std::pair{cols->get<uint16_t>(), rows->get<uint16_t>()};
    }
    std::lock_guard lock(mu_);
    if (size) {
      resize_ = size;
    } else {
      closing_ = ws_close::kUnsupportedData;  // not a control message we know
    }
    wake();
  }
  void on_close(uint16_t) override {
    std::lock_guard lock(mu_);
    gone_ = true;
    conn_.reset();
    wake();
  }

 private:
  void wake() {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }

  void run() {
    auto& t = *term_->terminal;
    std::string pending;  // input the pty has not taken yet
    char buf[16 * 1024];
    auto last_activity = std::chrono::steady_clock::now();
    std::shared_ptr<WsConnection> conn;
    {
      std::lock_guard lock(mu_);
      conn = conn_;
    }
    while (true) {
      std::optional<std::pair<uint16_t, uint16_t>> resize;
      uint16_t close_code = 0;
      bool gone;
      {
        std::lock_guard lock(mu_);
        // Taken only once the pty has the last batch: a shell that reads
        // nothing leaves the input queued, where kMaxPendingInput ends it
        // (1008), instead of growing `pending` without bound.
        while (pending.empty() && !input_.empty()) {
          pending += input_.front();
          input_bytes_ -= input_.front().size();
          input_.pop_front();
        }
        resize.swap(resize_);
        close_code = closing_;
        gone = gone_;
      }
      if (gone) break;
      if (close_code) {
        conn->close(close_code, close_code == ws_close::kPolicyViolation ? "input not consumed"
                                                                         : "bad message");
        break;
      }
      if (resize) (void)t.resize(resize->first, resize->second);
      if (!pending.empty()) {
        auto n = t.write(pending);
        if (n.ok()) pending.erase(0, *n);
        last_activity = std::chrono::steady_clock::now();
      }
      if (conn->queued() < kHighWater) {
        auto n = t.read(buf, sizeof buf);
        if (n.ok() && *n > 0) {
          conn->send_binary(std::string(buf, *n));
          last_activity = std::chrono::steady_clock::now();
          continue;  // more may wait
        }
        if (auto code = t.exit_code()) {
          conn->send_text(json{{"type", "exit"}, {"code", *code}}.dump());
          conn->close(ws_close::kNormal, "the shell exited");
          break;
        }
        if (!n.ok()) {
          conn->close(ws_close::kInternalError, "the terminal failed");
          break;
        }
      }
      if (std::chrono::steady_clock::now() - last_activity > idle_) {
        conn->close(ws_close::kNormal, "idle");
        break;
      }
      // Wait for output (unless the client is behind), for room for input, or to be woken.
      pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {t.fd(), 0, 0}};
      if (conn->queued() < kHighWater) fds[1].events |= POLLIN;
      if (!pending.empty()) fds[1].events |= POLLOUT;
      (void)::poll(fds, 2, conn->queued() < kHighWater ? 1000 : 20);
      if (fds[0].revents & POLLIN) {
        uint64_t v;
        (void)!::read(wake_.get(), &v, sizeof v);
      }
    }
    // The shell and what it started end with the terminal; then the lease.
    term_.reset();
    std::lock_guard lock(mu_);
    conn_.reset();  // the connection holds this handler: no cycle left behind
  }

  std::unique_ptr<service::Sandboxes::OpenTerminal> term_;
  const std::chrono::seconds idle_;
  std::shared_ptr<std::atomic<size_t>> count_;
  std::shared_ptr<void> slot_;
  UniqueFd wake_;
  std::thread thread_;
  std::mutex mu_;
  std::shared_ptr<WsConnection> conn_;
  std::deque<std::string> input_;
  size_t input_bytes_ = 0;
  std::optional<std::pair<uint16_t, uint16_t>> resize_;
  uint16_t closing_ = 0;
  bool gone_ = false;
};

}  // namespace

void RestApi::terminal_routes(Router& r) {
  service::Sandboxes* svc = options_.sandboxes;  // outlives the server; null: 503
  auto m = meta("An interactive terminal (WebSocket upgrade; see docs/rest-api.md)", "terminal");
  m.params = {RouteParam{"cols", "query", "integer", "columns (1-1000, default 80)", false},
              RouteParam{"rows", "query", "integer", "rows (1-1000, default 24)", false}};
  m.success_status = 101;
  m.response_type = "";
  (void)r.add("GET", "/api/v1/sandboxes/{id}/terminal", m, [this, svc](Call& c) {
    if (!transport::http::is_websocket_upgrade(c.req)) {
      Response res = problem(426, "invalid_argument",
                             "this is a WebSocket endpoint: send an Upgrade: websocket request");
      res.headers.emplace_back("Upgrade", "websocket");
      return c.reply(std::move(res));
    }
    if (!transport::http::websocket_origin_ok(c.req))
      return c.reply(
          problem(403, "forbidden", "the Origin of a terminal must be this server's own"));
    std::optional<uint64_t> cols, rows;
    if (!query_uint(c, "cols", 1000, &cols) || !query_uint(c, "rows", 1000, &rows)) return;
    auto count = terminals_;
    const size_t max = options_.max_terminals;
    with_service(c, [this, svc, count, max, cols, rows](Call& call, const Caller& who) {
      auto slot = owner_terminals_.acquire(who.owner());
      if (!slot)
        return call.reply(too_many("this key has " + std::to_string(owner_terminals_.max()) +
                                   " terminals open (the most it may); close one first"));
      if (count->fetch_add(1) >= max) {
        count->fetch_sub(1);
        return call.reply(problem(
            429, "resource_exhausted",
            "the server has " + std::to_string(max) + " terminals open (the most it allows)"));
      }
      std::chrono::seconds idle{1800};
      auto info = svc->get(to_service(who), call.param("id"));
      if (!info.ok()) {
        count->fetch_sub(1);
        return call.reply(problem(info.error()));
      }
      if (auto ttl = info->find("ttl_s");
          ttl != info->end() && ttl->is_number() && ttl->get<double>() > 0)
        idle = std::chrono::seconds(static_cast<int64_t>(ttl->get<double>()));
      sandbox::TerminalRequest req;
      req.cols = static_cast<uint16_t>(cols.value_or(80) ? cols.value_or(80) : 80);
      req.rows = static_cast<uint16_t>(rows.value_or(24) ? rows.value_or(24) : 24);
      auto t = svc->open_terminal(to_service(who), call.param("id"), req);
      if (!t.ok()) {
        count->fetch_sub(1);
        return call.reply(problem(t.error()));
      }
      auto session = std::make_shared<TerminalSession>(std::move(*t), idle, count);
      session->hold(std::move(slot));
      call.ex->upgrade(session, call.req, transport::http::WsOptions{});
    });
  });
}

}  // namespace sandcastle::web

#include "net/proxy_service.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <boost/asio/post.hpp>
#include <cstdio>
#include <future>
#include <thread>

#include "net/proxy_internal.h"

namespace sandcastle::net {
namespace {

using namespace detail;  // NOLINT(google-build-using-namespace): this file is detail's front

int sock_opt(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, name, &v, &len) != 0) return -1;
  return v;
}

// A listener the sandbox's init (or the engine's relay) handed over: the
// right type, listening, and bound to 127.0.0.1 or an AF_UNIX address.
Status check_fd(int fd, int type, const char* what) {
  auto bad = [&](const std::string& why) {
    return Error::make(ErrorCode::kInvalidArgument, std::string(what) + " listener: " + why);
  };
  if (sock_opt(fd, SO_TYPE) != type) return bad("not a socket of the expected type");
  const int domain = sock_opt(fd, SO_DOMAIN);
  if (type == SOCK_STREAM && sock_opt(fd, SO_ACCEPTCONN) != 1) return bad("not listening");
  if (domain == AF_UNIX) {
    if (type != SOCK_STREAM) return bad("a unix socket must be a stream");
    return ok_status();
  }
  if (domain != AF_INET) return bad("not AF_INET or AF_UNIX");
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return Error::from_errno(std::string(what) + " listener: getsockname");
  if (a.sin_addr.s_addr != htonl(INADDR_LOOPBACK)) return bad("not bound to 127.0.0.1");
  return ok_status();
}

std::unique_ptr<Acceptor> adopt_acceptor(asio::io_context& io, UniqueFd fd) {
  const int domain = sock_opt(fd.get(), SO_DOMAIN);
  auto acc = std::make_unique<Acceptor>(io);
  const asio::generic::stream_protocol proto(domain, domain == AF_UNIX ? 0 : IPPROTO_TCP);
  ErrorCodeT ec;
  acc->assign(proto, fd.get(), ec);
  if (ec) return nullptr;
  fd.release();
  return acc;
}

using MakeConn = std::shared_ptr<Conn> (*)(std::shared_ptr<AttachState>, Stream, bool);

std::size_t count_of(const std::map<const Session*, std::size_t>& m, const Session* k) {
  auto it = m.find(k);
  return it == m.end() ? std::size_t{0} : it->second;
}

// A new connection: served, or answered with a limit refusal when the
// sandbox or the server is at its cap (a flood past that is just closed).
void take(const std::shared_ptr<AttachState>& att, Stream s, MakeConn make) {
  Core& core = *att->core;
  const Session* key = att->session.get();
  const bool limited = core.total >= core.options.max_total ||
                       count_of(core.per_session, key) >= core.options.max_per_sandbox;
  if (limited && count_of(core.limited, key) >= kLimitedMax) {
    ErrorCodeT ignored;
    s.close(ignored);
    return;
  }
  auto conn = make(att, std::move(s), limited);
  att->conns[conn.get()] = conn;
  conn->start();
}

// An abstract AF_UNIX listener has no permissions and its name is listed in
// /proc/net/unix: only this process (the engine link relaying a sandbox's
// connection) may connect to it, not another local user looking for a
// sandbox's egress.
bool from_a_stranger(Stream& s) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return true;
  if (domain != AF_UNIX) return false;
  struct ucred cred {};
  len = sizeof cred;
  return ::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
         cred.pid != ::getpid();
}

void accept_loop(const std::shared_ptr<AttachState>& att, Acceptor* acc, MakeConn make) {
  acc->async_accept([att, acc, make](const ErrorCodeT& ec, Stream s) {
    if (att->closed || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
      return;
    if (!ec) {
      if (from_a_stranger(s)) {
        spdlog::warn(
            "network: sandbox {}: a connection to its proxy socket from another process "
            "was refused",
            att->session->id());
        ErrorCodeT ignored;
        s.close(ignored);
      } else {
        take(att, std::move(s), make);
      }
      if (att->closed) return;  // close_all released the acceptor
      return accept_loop(att, acc, make);
    }
    // EMFILE and the like: the connection stays queued; try again in a
    // moment instead of spinning on the same error.
    spdlog::warn("network: sandbox {}: accept: {}", att->session->id(), ec.message());
    auto pause = std::make_shared<asio::steady_timer>(att->core->io, kAcceptRetry);
    pause->async_wait([att, acc, make, pause](const ErrorCodeT& e) {
      if (!e && !att->closed) accept_loop(att, acc, make);
    });
  });
}

class AttachmentImpl final : public Attachment {
 public:
  explicit AttachmentImpl(std::shared_ptr<AttachState> st) : st_(std::move(st)) {}
  ~AttachmentImpl() override {
    // A destructor must not throw: a failure to detach (out of memory, a
    // mutex error) is reported; the sandbox's connections then end with
    // the service.
    try {
      detach();
    } catch (const std::exception& e) {
      spdlog::error("network: detaching a sandbox from the proxies failed: {}", e.what());
    }
  }

 private:
  void detach() {
    auto core = st_->core_ref.lock();
    if (!core) return;  // the service went first and closed everything
    asio::io_context& io = core->io;
    if (io.get_executor().running_in_this_thread()) {
      st_->close_all();
      return;
    }
    // Posted under post_mu while the loop runs: the service's destructor
    // takes it after the loop thread ended and runs what was left queued, so
    // this close always runs and the wait always returns. After that, the
    // loop is nobody's and the close runs here, under the mutex.
    std::promise<void> done;
    {
      std::lock_guard lock(core->post_mu);
      if (!core->loop_running) {
        st_->close_all();
        return;
      }
      // The promise is kept when the handler is done with, run or not (or
      // thrown out of), so the wait below always returns.
      std::shared_ptr<void> kept(nullptr, [&done](void*) { done.set_value(); });
      asio::post(io, [st = st_, kept = std::move(kept)] { st->close_all(); });
    }
    done.get_future().wait();
  }

  std::shared_ptr<AttachState> st_;
};

class ProxyServiceImpl final : public ProxyService {
 public:
  explicit ProxyServiceImpl(ProxyOptions options)
      : core_(std::make_shared<Core>(std::move(options))),
        work_(asio::make_work_guard(core_->io)),
        refresh_(core_->io) {}

  Status start() {
    auto r = Resolver::make(core_->io, core_->options.resolver);
    if (!r.ok()) return r.take_error();
    core_->resolver = std::move(*r);
    refresh_hosts();
    core_->loop_running = true;  // before the thread: nothing attached yet
    thread_ = std::thread([this] { core_->io.run(); });
    return ok_status();
  }

  ~ProxyServiceImpl() override {
    if (thread_.joinable()) {
      std::promise<void> closed;
      asio::post(core_->io, [&] {
        refresh_.cancel();
        for (auto& w : attachments_)
          if (auto st = w.lock()) st->close_all();
        closed.set_value();
      });
      closed.get_future().wait();
      work_.reset();
      core_->io.stop();
      thread_.join();
      // An attachment destroyed meanwhile on another thread may have posted
      // its close after the loop's last turn: it runs here, and later ones
      // run on their own thread (see ~AttachmentImpl).
      std::lock_guard lock(core_->post_mu);
      core_->loop_running = false;
      core_->io.restart();
      // Until every queued close has run: poll() returns at a handler's
      // exception, and a close left queued would hang its attachment.
      for (bool done = false; !done;) {
        try {
          core_->io.poll();
          done = true;
        } catch (...) {  // a handler's failure must not end the process here
          (void)std::fputs("sandcastle: network: a close failed while the proxies stopped\n",
                           stderr);
        }
      }
    }
    core_->resolver.reset();
  }

  Result<std::unique_ptr<Attachment>> attach(std::shared_ptr<Session> session,
                                             Listeners listeners) override {
    struct Check {
      UniqueFd* fd;
      int type;
      const char* what;
    };
    for (const Check& c : {Check{&listeners.http, SOCK_STREAM, "http"},
                           Check{&listeners.socks, SOCK_STREAM, "socks"},
                           Check{&listeners.dns_tcp, SOCK_STREAM, "dns tcp"},
                           Check{&listeners.dns_udp, SOCK_DGRAM, "dns udp"}}) {
      if (!*c.fd) continue;
      if (auto st = check_fd(c.fd->get(), c.type, c.what); !st.ok()) return st.take_error();
    }
    auto st = std::make_shared<AttachState>();
    st->core = core_.get();
    st->core_ref = core_;
    st->session = std::move(session);
    asio::io_context& io = core_->io;
    if (listeners.http) st->http = adopt_acceptor(io, std::move(listeners.http));
    if (listeners.socks) st->socks = adopt_acceptor(io, std::move(listeners.socks));
    if (listeners.dns_tcp) st->dns_tcp = adopt_acceptor(io, std::move(listeners.dns_tcp));
    if (listeners.dns_udp) {
      st->dns_udp = std::make_unique<asio::ip::udp::socket>(io);
      ErrorCodeT ec;
      st->dns_udp->assign(asio::ip::udp::v4(), listeners.dns_udp.get(), ec);
      if (ec) return Error::make(ErrorCode::kInvalidArgument, "dns udp listener: " + ec.message());
      listeners.dns_udp.release();
    }
    auto start = [this, st] {
      std::erase_if(attachments_, [](const auto& w) { return w.expired(); });
      attachments_.push_back(st);
      if (st->http) accept_loop(st, st->http.get(), &make_http_conn);
      if (st->socks) accept_loop(st, st->socks.get(), &make_socks_conn);
      if (st->dns_tcp) accept_loop(st, st->dns_tcp.get(), &make_dns_tcp_conn);
      if (st->dns_udp) serve_dns_udp(st);
    };
    if (io.get_executor().running_in_this_thread()) {
      start();
    } else {
      std::promise<void> started;
      asio::post(io, [&] {
        start();
        started.set_value();
      });
      started.get_future().wait();
    }
    return std::unique_ptr<Attachment>(new AttachmentImpl(st));
  }

  std::vector<IpAddr> host_addrs() const override { return *core_->host_addrs(); }
  std::size_t open_connections() const override { return core_->total.load(); }

 private:
  void refresh_hosts() {
    if (auto addrs = host_addresses(); addrs.ok()) {
      std::lock_guard lock(core_->hosts_mu);
      core_->hosts = std::make_shared<const std::vector<IpAddr>>(std::move(*addrs));
    } else {
      spdlog::warn("network: the host's addresses: {}", addrs.error().message());
    }
    refresh_.expires_after(kHostAddrRefresh);
    refresh_.async_wait([this](const ErrorCodeT& ec) {
      if (!ec) refresh_hosts();
    });
  }

  std::shared_ptr<Core> core_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer refresh_;
  std::vector<std::weak_ptr<AttachState>> attachments_;  // loop only
  std::thread thread_;
};

}  // namespace

namespace detail {

void AttachState::close_all() {
  if (closed) return;
  closed = true;
  ErrorCodeT ec;
  for (auto* acc : {http.get(), socks.get(), dns_tcp.get()})
    if (acc) acc->close(ec);
  if (dns_udp) dns_udp->close(ec);
  auto conns_now = std::move(conns);
  for (auto& [raw, weak] : conns_now)
    if (auto c = weak.lock()) c->close();
  // Gone while the loop is: the Attachment may outlive the service, and an
  // acceptor must not outlive its io_context.
  http.reset();
  socks.reset();
  dns_tcp.reset();
  dns_udp.reset();
}

}  // namespace detail

Result<std::unique_ptr<ProxyService>> ProxyService::start(ProxyOptions options) {
  auto svc = std::make_unique<ProxyServiceImpl>(std::move(options));
  if (auto st = svc->start(); !st.ok()) return st.take_error();
  return std::unique_ptr<ProxyService>(std::move(svc));
}

}  // namespace sandcastle::net

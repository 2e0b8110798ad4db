#include "tools/kernel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "sandbox/output_buffer.h"
#include "tools/kernel_driver_files.h"
#include "tools/warmup_gate.h"

namespace sandcastle::tools {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::milliseconds kStartupTimeout{20'000};
// The kernel lives as long as the sandbox; the exec still needs a deadline
// (below 2^31 ms: the engine's poll timeout is an int).
constexpr std::chrono::milliseconds kKernelLifetime{7LL * 24 * 3600 * 1000};
constexpr std::size_t kMaxFrame = std::size_t{256} * 1024 * 1024;
constexpr std::size_t kDiagBytes = std::size_t{8} * 1024;

std::atomic<std::uint64_t> g_cell_counter{0};

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGSYS: return "SIGSYS";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "signal " + std::to_string(sig);
  }
}

void poke(int fd) {
  std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void drain(int fd) {
  std::uint64_t v;
  (void)!::read(fd, &v, sizeof v);
}

bool send_frame(int fd, const json& msg) {
  std::string body = msg.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string frame(4, '\0');
  const auto n = static_cast<std::uint32_t>(body.size());
  frame[0] = static_cast<char>(n >> 24);
  frame[1] = static_cast<char>(n >> 16);
  frame[2] = static_cast<char>(n >> 8);
  frame[3] = static_cast<char>(n);
  frame += body;
  std::string_view rest = frame;
  while (!rest.empty()) {
    ssize_t w = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    rest.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// One complete frame from the front of `buf`, if there is one. An oversized
// length (the stream is broken) comes back as {"type": "garbage"}, a frame
// that is not a JSON object as {"type": "invalid"}.
std::optional<json> take_frame(std::string& buf, size_t& pos) {
  if (buf.size() - pos < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data() + pos);
  const std::size_t n = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
  if (n > kMaxFrame) return json{{"type", "garbage"}};
  if (buf.size() - pos < 4 + n) return std::nullopt;
  json msg = json::parse(buf.begin() + static_cast<std::ptrdiff_t>(pos + 4),
                         buf.begin() + static_cast<std::ptrdiff_t>(pos + 4 + n), nullptr, false);
  pos += 4 + n;
  if (pos == buf.size()) {
    buf.clear();
    pos = 0;
  } else if (pos > (1u << 20)) {
    buf.erase(0, pos);
    pos = 0;
  }
  if (!msg.is_object()) return json{{"type", "invalid"}};  // skipped; the framing is intact
  return msg;
}

}  // namespace

std::optional<KernelLanguage> kernel_language_for(const std::string& language) {
  if (language == "python") return KernelLanguage::kPython;
  if (language == "javascript") return KernelLanguage::kJavaScript;
  return std::nullopt;
}

const char* kernel_language_name(KernelLanguage lang) {
  return lang == KernelLanguage::kPython ? "python" : "javascript";
}

const char* cell_end_name(CellEnd e) {
  switch (e) {
    case CellEnd::kCompleted: return "exited";
    case CellEnd::kTimeout: return "timeout";
    case CellEnd::kCancelled: return "cancelled";
    case CellEnd::kKernelDied: return "kernel_died";
  }
  return "?";
}

// One kernel process and the connection to it.
struct Kernel::Instance {
  std::mutex mu;
  std::condition_variable cv;
  sandbox::CancelToken kill;
  UniqueFd exit_ev{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};  // readable once the process is gone
  UniqueFd ready_ev{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};  // readable once a cell had its hello
  std::thread thread;
  // A warm-up waits for a WarmupGate slot until somebody needs the kernel.
  std::atomic<bool> urgent{false};

  // Set by the launcher thread, under mu.
  bool launched = false;  // conn is set (the exec is starting), or the launch failed
  std::optional<Error> launch_error;
  bool exited = false;
  std::optional<Result<sandbox::ExecResult>> exit;
  // Our end of the socketpair whose other end is the process's fd 3; then
  // used only by the thread running a cell (the kernel's run_mu_ holder).
  UniqueFd conn;
  UniqueFd remote;  // the process's end, ours to close once it said hello

  // Used only by the thread running a cell.
  bool greeted = false;
  std::string rbuf;
  size_t rpos = 0;
  int pid = 0;
  std::string version;

  // Output the process writes to its own stdout/stderr (C extensions,
  // subprocesses): goes to the running cell, else kept for diagnostics.
  std::mutex sink_mu;
  std::function<void(const char*, std::string_view)> sink;
  std::string diag;

  void deliver(const char* stream, std::string_view data) {
    std::lock_guard l(sink_mu);
    if (sink) {
      sink(stream, data);
      return;
    }
    diag.append(data);
    if (diag.size() > kDiagBytes) diag.erase(0, diag.size() - kDiagBytes);
  }

  bool has_exited() {
    std::lock_guard l(mu);
    return exited;
  }
};

namespace {

void run_instance(sandbox::Sandbox& sb, KernelLanguage lang, std::map<std::string, std::string> env,
                  const std::shared_ptr<Kernel::Instance>& inst, bool warmup) {
  // A warm-up holds a gate slot until its interpreter has connected (or a
  // cell took the connection, or it ended): that is where its CPU goes.
  struct Slot {
    bool held = false;
    std::thread watcher;
    ~Slot() {
      if (watcher.joinable()) watcher.join();
      else if (held) WarmupGate::shared().leave();
    }
  } slot;
  if (warmup) slot.held = WarmupGate::shared().enter(inst->urgent);
  if (inst->kill.cancelled()) return;
  auto finish = [&](std::optional<Error> launch_error, std::optional<Result<sandbox::ExecResult>> exit) {
    {
      std::lock_guard l(inst->mu);
      if (launch_error) inst->launch_error = std::move(launch_error);
      inst->launched = true;
      inst->exited = true;
      inst->exit = std::move(exit);
    }
    inst->cv.notify_all();
    poke(inst->exit_ev.get());
  };
  auto driver = place_kernel_driver(sb, lang);
  if (!driver.ok()) return finish(driver.error(), std::nullopt);
  // The channel: a socketpair whose far end is the process's fd 3 (passed
  // with the exec), so nothing else in the sandbox can reach it.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return finish(Error::from_errno("socketpair for the kernel"), std::nullopt);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  const int pass_fd = theirs.get();
  if (slot.held) {
    // Watches a copy of our end for the hello; a cell reads the original.
    int watched = ::fcntl(ours.get(), F_DUPFD_CLOEXEC, 0);
    slot.watcher = std::thread([inst, watched] {
      struct pollfd p[3] = {{watched, POLLIN, 0}, {inst->exit_ev.get(), POLLIN, 0}, {inst->ready_ev.get(), POLLIN, 0}};
      int n;
      do {
        n = ::poll(p, 3, static_cast<int>(kStartupTimeout.count()));  // fd -1 is skipped
      } while (n < 0 && errno == EINTR);
      if (watched >= 0) ::close(watched);
      WarmupGate::shared().leave();
    });
  }
  {
    std::lock_guard l(inst->mu);
    inst->conn = std::move(ours);
    inst->remote = std::move(theirs);
    inst->launched = true;
  }
  inst->cv.notify_all();

  sandbox::ExecRequest req;
  if (lang == KernelLanguage::kPython) req.argv = {"/usr/bin/python3", "-X", "utf8", *driver};
  else req.argv = {"/usr/bin/node", "--expose-internals", *driver};
  req.env = std::move(env);
  req.pass_fd = pass_fd;
  req.timeout = kKernelLifetime;
  req.output.max_bytes = std::size_t{64} * 1024;
  sandbox::ExecCallbacks cb;
  cb.on_stdout = [&inst](std::string_view d) { inst->deliver("stdout", d); };
  cb.on_stderr = [&inst](std::string_view d) { inst->deliver("stderr", d); };
  auto r = sb.exec(req, cb, &inst->kill);
  if (r.ok()) {
    spdlog::debug("kernel in sandbox {} ended: {} status {}", sb.id(), sandbox::end_reason_name(r->reason),
                  r->status());
  }
  finish(std::nullopt, std::move(r));
}

// Why the process is gone, in words: "SIGSEGV", "out of memory", "exit 3".
void describe_death(Kernel::Instance& inst, CellResult& res) {
  std::lock_guard l(inst.mu);
  if (inst.launch_error) {
    res.death = "could not start: " + inst.launch_error->message();
    res.exit_code = 1;
    return;
  }
  if (!inst.exit || !inst.exit->ok()) {
    res.death = inst.exit ? inst.exit->error().message() : "unknown";
    res.exit_code = 1;
    return;
  }
  const auto& r = inst.exit->value();
  res.exit_code = r.status();
  res.signal = r.signal;
  if (r.reason == sandbox::EndReason::kOutOfMemory) res.death = "out of memory (OOM kill)";
  else if (r.reason == sandbox::EndReason::kTimeout) res.death = "it reached the kernel's 7-day lifetime";
  else if (r.signal) res.death = signal_name(r.signal);
  else res.death = "exit " + std::to_string(r.exit_code);
}

}  // namespace

Kernel::Kernel(sandbox::Sandbox& sb, KernelLanguage lang, std::map<std::string, std::string> env)
    : sb_(sb), lang_(lang), env_(std::move(env)) {}

Kernel::~Kernel() {
  std::shared_ptr<Instance> inst;
  {
    std::lock_guard l(mu_);
    inst = std::move(inst_);
  }
  if (inst) kill_instance(inst);
}

std::shared_ptr<Kernel::Instance> Kernel::launch_locked(bool warmup) {
  auto inst = std::make_shared<Instance>();
  std::map<std::string, std::string> env = env_;
  inst->thread = std::thread([this, inst, env = std::move(env), warmup]() mutable {
    run_instance(sb_, lang_, std::move(env), inst, warmup);
  });
  ever_started_ = true;
  return inst;
}

void Kernel::kill_instance(const std::shared_ptr<Instance>& inst) {
  inst->kill.cancel();
  inst->urgent = true;  // a warm-up still queued at the gate ends now
  WarmupGate::shared().wake();
  if (inst->thread.joinable() && inst->thread.get_id() != std::this_thread::get_id()) inst->thread.join();
  inst->conn.reset();
  inst->remote.reset();
}

void Kernel::start_async() {
  std::lock_guard l(mu_);
  if (inst_ && !inst_->has_exited()) return;
  if (inst_) {
    auto old = std::move(inst_);
    kill_instance(old);
  }
  inst_ = launch_locked(/*warmup=*/true);
}

void Kernel::restart() {
  std::unique_lock run(run_mu_);
  std::shared_ptr<Instance> old;
  {
    std::lock_guard l(mu_);
    old = std::move(inst_);
  }
  if (old) kill_instance(old);
  std::lock_guard l(mu_);
  execution_count_ = 0;
  inst_ = launch_locked();
}

json Kernel::status() const {
  std::lock_guard l(mu_);
  json j{{"language", kernel_language_name(lang_)}, {"execution_count", execution_count_}};
  bool alive = inst_ && !inst_->has_exited();
  j["alive"] = alive;
  if (alive && inst_->pid) j["pid"] = inst_->pid;
  if (inst_ && !inst_->version.empty()) j["version"] = inst_->version;
  return j;
}

Result<CellResult> Kernel::execute(const CellRequest& req, const CellCallbacks& cb, mcp::CancelToken* cancel) {
  const auto t0 = Clock::now();
  UniqueFd cancel_ev(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel_ev) return Error::from_errno("eventfd for kernel cancellation");
  struct Subscription {
    mcp::CancelToken* token;
    size_t id = 0;
    ~Subscription() {
      if (token && id) token->unsubscribe(id);
    }
  } sub{cancel};
  if (cancel) sub.id = cancel->on_cancel([fd = cancel_ev.get()] { poke(fd); });
  auto cancelled = [&] { return cancel && cancel->cancelled(); };

  // One cell at a time; a queued call still honours its cancellation.
  std::unique_lock run(run_mu_, std::defer_lock);
  while (!run.try_lock_for(std::chrono::milliseconds(50))) {
    if (cancelled()) {
      CellResult res;
      res.end = CellEnd::kCancelled;
      return res;
    }
  }

  CellResult res;
  std::shared_ptr<Instance> inst;
  {
    std::lock_guard l(mu_);
    if (!inst_ || inst_->has_exited()) {
      if (inst_) {
        auto old = std::move(inst_);
        kill_instance(old);
      }
      inst_ = launch_locked();
    }
    inst = inst_;
  }

  // Output from the socket (this thread) and from the process's own fds (the
  // exec thread) meet here, serialized.
  std::mutex out_mu;
  sandbox::OutputBuffer out_buf(req.max_output_bytes), err_buf(req.max_output_bytes);
  auto deliver = [&](const char* stream, std::string_view text) {
    std::lock_guard l(out_mu);
    (stream[3] == 'o' ? out_buf : err_buf).append(text);  // "stdout" / "stderr"
    if (cb.on_output) cb.on_output(stream, text);
  };
  auto finish_output = [&] {
    {
      std::lock_guard l(inst->sink_mu);
      inst->sink = nullptr;
    }
    std::lock_guard l(out_mu);
    res.stdout_truncated = out_buf.truncated();
    res.stderr_truncated = err_buf.truncated();
    res.stdout_total = out_buf.total();
    res.stderr_total = err_buf.total();
    res.stdout_data = out_buf.take();
    res.stderr_data = err_buf.take();
    res.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  };
  auto died = [&]() -> Result<CellResult> {
    // The process is gone (or going): wait for the exec to report why.
    {
      std::unique_lock l(inst->mu);
      inst->cv.wait_for(l, std::chrono::seconds(5), [&] { return inst->exited; });
    }
    finish_output();
    res.end = CellEnd::kKernelDied;
    res.state_lost = true;
    describe_death(*inst, res);
    // A replacement starts now, so the next call finds it ready.
    std::lock_guard l(mu_);
    execution_count_ = 0;
    if (inst_ == inst) {
      kill_instance(inst);
      inst_ = launch_locked();
      res.kernel_restarted = true;
    }
    return res;
  };

  const auto deadline = t0 + req.timeout;
  // ---- handshake with a kernel that has not said hello yet
  if (!inst->greeted) {
    res.fresh_kernel = true;
    // A cell is waiting: a warm-up queued at the gate goes ahead now.
    inst->urgent = true;
    WarmupGate::shared().wake();
    const auto until = std::min(deadline, Clock::now() + kStartupTimeout);
    {
      std::unique_lock l(inst->mu);
      inst->cv.wait_until(l, until, [&] { return inst->launched; });
      if (!inst->launched) return Error::make(ErrorCode::kTimeout, "the kernel did not start in time");
      if (inst->launch_error) return *inst->launch_error;
    }
    // The first frame must be hello: anything else means the driver is not
    // ours or is broken, and the kernel goes.
    std::optional<json> hello;
    bool gone = false;
    while (!hello && !gone) {
      hello = take_frame(inst->rbuf, inst->rpos);
      if (hello) break;
      auto now = Clock::now();
      if (now >= until || cancelled()) break;
      struct pollfd p[3] = {{inst->conn.get(), POLLIN, 0}, {inst->exit_ev.get(), POLLIN, 0}, {cancel_ev.get(), POLLIN, 0}};
      int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1;
      if (::poll(p, 3, wait_ms) < 0 && errno != EINTR) return Error::from_errno("poll for the kernel's hello");
      if (p[2].revents & POLLIN) drain(cancel_ev.get());
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = ::recv(inst->conn.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) inst->rbuf.append(buf, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN)) gone = true;
      } else if (p[1].revents & POLLIN) {
        gone = true;
      }
    }
    if (!hello || hello->value("type", "") != "hello") {
      if (!hello && !gone && cancelled()) {
        res.end = CellEnd::kCancelled;
        return res;
      }
      kill_instance(inst);
      std::string diag;
      {
        std::lock_guard l(inst->sink_mu);
        diag = inst->diag;
      }
      CellResult d;
      describe_death(*inst, d);
      const std::string what = hello ? "did not complete its handshake"
                                     : "did not start (" + d.death + ")" + (diag.empty() ? "" : ": " + diag);
      return Error::make(ErrorCode::kUnavailable, std::string("the ") + kernel_language_name(lang_) + " kernel " + what);
    }
    inst->pid = hello->value("pid", 0);
    inst->version = hello->value("version", "");
    inst->greeted = true;
    inst->remote.reset();  // the process has its end: EOF on ours is its exit
    poke(inst->ready_ev.get());
  }

  // ---- the cell
  {
    std::lock_guard l(inst->sink_mu);
    inst->sink = deliver;
  }
  const std::string cell_id = std::to_string(++g_cell_counter);
  json exec_msg{{"type", "execute"}, {"id", cell_id}, {"code", req.code}};
  if (!req.stdin_data.empty()) exec_msg["stdin"] = req.stdin_data;
  if (!send_frame(inst->conn.get(), exec_msg)) return died();

  bool interrupting = false;
  Clock::time_point kill_at{};
  // Python: the driver's reader thread raises KeyboardInterrupt in the main
  // thread. JavaScript: an awaiting cell reads the message; synchronous code
  // cannot, so if the cell is still running a moment later the sandbox sends
  // the kernel SIGINT, which stops a script run with breakOnSigint. (Sent
  // only then: a late signal must not reach the next cell.)
  constexpr auto kSignalAfter = std::chrono::milliseconds(100);
  const bool needs_signal = lang_ == KernelLanguage::kJavaScript;
  bool signal_pending = false;
  Clock::time_point signal_at{};
  auto interrupt = [&] { (void)send_frame(inst->conn.get(), json{{"type", "interrupt"}, {"id", cell_id}}); };
  for (;;) {
    while (auto f = take_frame(inst->rbuf, inst->rpos)) {
      const std::string type = f->value("type", "");
      if (type == "garbage") return died();
      if (f->value("id", "") != cell_id) continue;  // late output of an earlier cell
      if (type == "stream") {
        const std::string name = f->value("name", "stdout");
        const auto& text = (*f)["text"];
        if (text.is_string()) deliver(name == "stderr" ? "stderr" : "stdout", text.get_ref<const std::string&>());
      } else if (type == "display") {
        if ((*f)["data"].is_object()) res.displays.push_back(std::move((*f)["data"]));
      } else if (type == "result") {
        finish_output();
        res.execution_count = f->value("execution_count", 0);
        if (f->contains("value")) res.value = std::move((*f)["value"]);
        if (f->value("status", "ok") == "error") {
          res.error = std::move((*f)["error"]);
          res.exit_code = 1;
        }
        if (f->contains("exit_code") && (*f)["exit_code"].is_number_integer()) res.exit_code = (*f)["exit_code"];
        if (interrupting && res.exit_code == 0) res.exit_code = 130;
        if (!interrupting) res.end = CellEnd::kCompleted;
        std::lock_guard l(mu_);
        execution_count_ = res.execution_count;
        return res;
      }
    }
    auto now = Clock::now();
    if (!interrupting && (now >= deadline || cancelled())) {
      res.end = cancelled() ? CellEnd::kCancelled : CellEnd::kTimeout;
      interrupting = true;
      kill_at = now + req.interrupt_grace;
      if (needs_signal) {
        signal_pending = true;
        signal_at = now + kSignalAfter;
      }
      interrupt();
      continue;
    }
    if (signal_pending && now >= signal_at) {
      signal_pending = false;
      (void)inst->kill.interrupt();
    }
    if (interrupting && now >= kill_at) {
      // The code ignored the interrupt: the kernel goes, and a fresh one is
      // started for the next call.
      kill_instance(inst);
      finish_output();
      res.state_lost = true;
      res.kernel_restarted = true;
      res.exit_code = 137;
      std::lock_guard l(mu_);
      execution_count_ = 0;
      if (inst_ == inst) inst_ = launch_locked();
      return res;
    }
    const auto until = !interrupting ? deadline : signal_pending ? std::min(signal_at, kill_at) : kill_at;
    int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1;
    struct pollfd p[3] = {{inst->conn.get(), POLLIN, 0},
                          {inst->exit_ev.get(), POLLIN, 0},
                          {cancel_ev.get(), static_cast<short>(interrupting ? 0 : POLLIN), 0}};
    int pr = ::poll(p, 3, wait_ms);
    if (pr < 0 && errno != EINTR) return Error::from_errno("poll the kernel connection");
    if (pr <= 0) continue;
    if (p[2].revents & POLLIN) drain(cancel_ev.get());
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = ::recv(inst->conn.get(), buf, sizeof buf, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return died();  // the connection closed: the process is gone
      inst->rbuf.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (p[1].revents & POLLIN) {
      // The process exited: what it sent before is still readable.
      char buf[65536];
      ssize_t n;
      while ((n = ::recv(inst->conn.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0)
        inst->rbuf.append(buf, static_cast<size_t>(n));
      while (auto f = take_frame(inst->rbuf, inst->rpos)) {
        if (f->value("id", "") != cell_id) continue;
        if (f->value("type", "") == "stream" && (*f)["text"].is_string())
          deliver(f->value("name", "stdout") == "stderr" ? "stderr" : "stdout",
                  (*f)["text"].get_ref<const std::string&>());
      }
      return died();
    }
  }
}

}  // namespace sandcastle::tools

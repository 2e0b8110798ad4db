#include "service/kernel.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <map>
#include <thread>

#include "common/json_parse.h"
#include "sandbox/output_buffer.h"
#include "service/kernel_driver_files.h"
#include "service/kernel_frame.h"
#include "service/warmup_gate.h"

namespace sandcastle::service {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::milliseconds kStartupTimeout{20'000};
// The kernel lives as long as the sandbox; the exec still needs a deadline
// (below 2^31 ms: the engine's poll timeout is an int).
constexpr std::chrono::milliseconds kKernelLifetime{7LL * 24 * 3600 * 1000};
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
  UniqueFd ready_ev{
      ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};  // readable once a cell had its hello
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
  FrameReader reader;
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
      if (watcher.joinable())
        watcher.join();
      else if (held)
        WarmupGate::shared().leave();
    }
  } slot;
  if (warmup) slot.held = WarmupGate::shared().enter(inst->urgent);
  if (inst->kill.cancelled()) return;
  auto finish = [&](std::optional<Error> launch_error,
                    std::optional<Result<sandbox::ExecResult>> exit) {
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
      struct pollfd p[3] = {{watched, POLLIN, 0},
                            {inst->exit_ev.get(), POLLIN, 0},
                            {inst->ready_ev.get(), POLLIN, 0}};
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
  if (lang == KernelLanguage::kPython)
    req.argv = {"/usr/bin/python3", "-X", "utf8", *driver};
  else
    req.argv = {"/usr/bin/node", "--expose-internals", *driver};
  req.env = std::move(env);
  req.pass_fd = pass_fd;
  req.timeout = kKernelLifetime;
  req.output.max_bytes = std::size_t{64} * 1024;
  sandbox::ExecCallbacks cb;
  cb.on_stdout = [&inst](std::string_view d) { inst->deliver("stdout", d); };
  cb.on_stderr = [&inst](std::string_view d) { inst->deliver("stderr", d); };
  auto r = sb.exec(req, cb, &inst->kill);
  if (r.ok()) {
    spdlog::debug("kernel in sandbox {} ended: {} status {}", sb.id(),
                  sandbox::end_reason_name(r->reason), r->status());
  }
  finish(std::nullopt, std::move(r));
}

// A cell's stdout and stderr: from the socket (the cell's thread) and from
// the process's own fds (the exec thread), serialized.
class CellOutput {
 public:
  CellOutput(std::size_t cap, const CellCallbacks& cb) : out_(cap), err_(cap), cb_(cb) {}
  void deliver(const char* stream, std::string_view text) {
    std::lock_guard l(mu_);
    (stream[3] == 'o' ? out_ : err_).append(text);  // "stdout" / "stderr"
    if (cb_.on_output) cb_.on_output(stream, text);
  }
  void collect(CellResult& res) {
    std::lock_guard l(mu_);
    res.stdout_truncated = out_.truncated();
    res.stderr_truncated = err_.truncated();
    res.stdout_total = out_.total();
    res.stderr_total = err_.total();
    res.stdout_data = out_.take();
    res.stderr_data = err_.take();
  }

 private:
  std::mutex mu_;
  sandbox::OutputBuffer out_, err_;
  const CellCallbacks& cb_;
};

// Points the kernel's own stdout/stderr at a running cell's output for as
// long as this object lives, and no longer: the output and the caller's
// callback live on that call's stack. remove() (or the destructor, on every
// return path) takes sink_mu, so no call through the sink is in progress
// once it returns.
class SinkScope {
 public:
  SinkScope(Kernel::Instance& inst, CellOutput& out) : inst_(inst) {
    std::lock_guard l(inst_.sink_mu);
    inst_.sink = [&out](const char* stream, std::string_view text) { out.deliver(stream, text); };
  }
  ~SinkScope() { remove(); }
  SinkScope(const SinkScope&) = delete;
  SinkScope& operator=(const SinkScope&) = delete;
  void remove() {
    std::lock_guard l(inst_.sink_mu);
    inst_.sink = nullptr;
  }

 private:
  Kernel::Instance& inst_;
};

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
  if (r.reason == sandbox::EndReason::kOutOfMemory)
    res.death = "out of memory (OOM kill)";
  else if (r.reason == sandbox::EndReason::kTimeout)
    res.death = "it reached the kernel's 7-day lifetime";
  else if (r.signal)
    res.death = signal_name(r.signal);
  else
    res.death = "exit " + std::to_string(r.exit_code);
}

// The listing bytes the driver may send (names and figures): the frame cap
// (max_frame_bytes) has room for them beside a cut-down value.
constexpr std::size_t kMaxListingBytes = std::size_t{2} << 20;

// What is wrong with a listing the driver sent for `asked`, if anything: no
// more entries than asked for, and nothing from the name it was to skip.
std::optional<Error> listing_error(const KernelListing& l, const CellListRequest& asked) {
  if (l.count > asked.max_entries)
    return Error::make(ErrorCode::kInvalidArgument,
                       "a listing of " + std::to_string(l.count) + " files, more than the " +
                           std::to_string(asked.max_entries) + " asked for");
  if (asked.skip.empty()) return std::nullopt;
  for (const auto& [name, sig] : l.files) {
    const std::string_view top = std::string_view(name).substr(0, name.find('/'));
    if (top == asked.skip)
      return Error::make(ErrorCode::kInvalidArgument,
                         "a listing holds \"" + asked.skip + "\", which it was to leave out");
  }
  return std::nullopt;
}

}  // namespace

Kernel::Kernel(sandbox::Sandbox& sb, KernelLanguage lang, std::map<std::string, std::string> env)
    : sb_(sb),
      lang_(lang),
      env_(std::move(env)),
      cancel_ev_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

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
  if (inst->thread.joinable() && inst->thread.get_id() != std::this_thread::get_id())
    inst->thread.join();
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

Result<CellResult> Kernel::execute(const CellRequest& req, const CellCallbacks& cb,
                                   CancelToken* cancel) {
  auto r = run_cell(req, cb, cancel);
  if (auto st = sb_.persist_changes(); !st) return st.take_error();
  return r;
}

Result<CellResult> Kernel::run_cell(const CellRequest& req, const CellCallbacks& cb,
                                    CancelToken* cancel) {
  const auto t0 = Clock::now();
  if (!cancel_ev_) return Error::from_errno("eventfd for kernel cancellation");
  const UniqueFd& cancel_ev = cancel_ev_;
  struct Subscription {
    CancelToken* token;
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
  // Pokes for calls before this one (or queued beside it) are stale: this
  // call's own cancellation is read from its token before every wait.
  drain(cancel_ev.get());

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

  // The kernel goes and a fresh one starts for the next call.
  auto replace_kernel = [&] {
    kill_instance(inst);
    std::lock_guard l(mu_);
    execution_count_ = 0;
    if (inst_ == inst) {
      inst_ = launch_locked();
      return true;
    }
    return false;
  };
  // A frame we cannot take: the stream (or the driver) is not what it should
  // be, so nothing after it can be trusted either.
  auto malformed = [&](const Error& why) -> Result<CellResult> {
    spdlog::warn("kernel in sandbox {}: malformed frame: {}", sb_.id(), why.message());
    replace_kernel();
    return Error::make(
        ErrorCode::kUnavailable,
        std::string("the ") + kernel_language_name(lang_) +
            " kernel sent a malformed frame: " + why.message() +
            "; the kernel was killed, and a fresh one (without the earlier state) answers "
            "the next call");
  };
  auto drain_socket = [&] {
    // What the process sent before it went is still readable (the socket
    // buffer bounds it).
    ssize_t n;
    do {
      n = inst->reader.fill(inst->conn.get(), MSG_DONTWAIT);
    } while (n > 0 && inst->reader.buffered() < 2 * FrameReader::kReadBytes);
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
      if (!inst->launched)
        return Error::make(ErrorCode::kTimeout, "the kernel did not start in time");
      if (inst->launch_error) return *inst->launch_error;
    }
    // The first frame must be hello: anything else means the driver is not
    // ours or is broken, and the kernel goes.
    std::optional<KernelFrame> first;
    bool gone = false;
    while (!first && !gone) {
      auto body = inst->reader.next(kMaxHelloFrame);
      if (!body) return malformed(body.error());
      if (*body) {
        auto f = decode_kernel_frame(**body, kMaxHelloFrame);
        if (!f) return malformed(f.error());
        first = std::move(*f);
        break;
      }
      auto now = Clock::now();
      if (now >= until || cancelled()) break;
      struct pollfd p[3] = {{inst->conn.get(), POLLIN, 0},
                            {inst->exit_ev.get(), POLLIN, 0},
                            {cancel_ev.get(), POLLIN, 0}};
      int wait_ms =
          static_cast<int>(
              std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) +
          1;
      if (::poll(p, 3, wait_ms) < 0 && errno != EINTR)
        return Error::from_errno("poll for the kernel's hello");
      if (p[2].revents & POLLIN) drain(cancel_ev.get());
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = inst->reader.fill(inst->conn.get(), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) gone = true;
      } else if (p[1].revents & POLLIN) {
        gone = true;
      }
    }
    const auto* hello = first ? std::get_if<HelloFrame>(&*first) : nullptr;
    if (!hello) {
      if (!first && !gone && cancelled()) {
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
      const std::string what =
          first ? std::string("did not complete its handshake (its first frame was ") +
                      frame_type_name(*first) + ", not hello)"
                : "did not start (" + d.death + ")" + (diag.empty() ? "" : ": " + diag);
      return Error::make(ErrorCode::kUnavailable,
                         std::string("the ") + kernel_language_name(lang_) + " kernel " + what);
    }
    inst->pid = hello->pid;
    inst->version = hello->version;
    inst->greeted = true;
    inst->remote.reset();  // the process has its end: EOF on ours is its exit
    poke(inst->ready_ev.get());
  }

  // ---- the cell
  CellOutput out(req.max_output_bytes, cb);
  SinkScope sink(*inst, out);  // declared after `out`: gone before it, on every path
  auto finish_output = [&] {
    sink.remove();
    out.collect(res);
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
    res.kernel_restarted = replace_kernel();
    return std::move(res);
  };

  const std::size_t max_frame = max_frame_bytes(req.max_output_bytes);
  const std::string cell_id = std::to_string(++g_cell_counter);
  json exec_msg{{"type", "execute"},
                {"id", cell_id},
                {"code", req.code},
                {"limits",
                 {{"frame", max_frame},
                  {"display", kMaxDisplayBytes},
                  {"text", req.max_output_bytes},
                  {"depth", kJsonMaxDepth},
                  {"values", kMaxFrameValues}}}};
  if (!req.stdin_data.empty()) exec_msg["stdin"] = req.stdin_data;
  const bool listed = req.list && req.list->max_entries <= kMaxKernelListing;
  if (listed)
    exec_msg["list"] = {{"dir", req.list->dir},
                        {"max", req.list->max_entries},
                        {"skip", req.list->skip},
                        {"bytes", kMaxListingBytes}};
  if (!send_frame(inst->conn.get(), exec_msg)) return died();

  bool interrupting = false;
  std::size_t display_bytes = 0, display_values = 0, displays_dropped = 0;
  // Every frame received so far, checked and acted on; a value once the call
  // is over (its result came, or a frame was malformed).
  auto take_frames = [&]() -> std::optional<Result<CellResult>> {
    for (;;) {
      auto body = inst->reader.next(max_frame);
      if (!body) return malformed(body.error());
      if (!*body) return std::nullopt;
      auto frame = decode_kernel_frame(**body, max_frame);
      if (!frame) return malformed(frame.error());
      if (std::holds_alternative<HelloFrame>(*frame))
        return malformed(
            Error::make(ErrorCode::kInvalidArgument, "a hello frame in the middle of a cell"));
      if (auto* s = std::get_if<StreamFrame>(&*frame)) {
        if (s->id == cell_id) out.deliver(s->is_stderr ? "stderr" : "stdout", s->text);
      } else if (auto* d = std::get_if<DisplayFrame>(&*frame)) {
        if (d->id != cell_id) continue;  // late output of an earlier cell
        if (d->bytes > kMaxDisplayBytes || res.displays.size() >= kMaxDisplays ||
            display_bytes + d->bytes > kMaxDisplayTotal ||
            display_values + d->values > kMaxDisplayValues) {
          ++displays_dropped;
          continue;
        }
        display_bytes += d->bytes;
        display_values += d->values;
        res.displays.push_back(std::move(d->data));
      } else if (auto* r = std::get_if<ResultFrame>(&*frame)) {
        if (r->id != cell_id) continue;
        if (displays_dropped)
          out.deliver("stderr", "[sandcastle] " + std::to_string(displays_dropped) +
                                    " more displays were dropped: a cell returns at most " +
                                    std::to_string(kMaxDisplays) + " displays, each up to " +
                                    std::to_string(kMaxDisplayBytes >> 20) + " MiB, and " +
                                    std::to_string(kMaxDisplayTotal >> 20) + " MiB and " +
                                    std::to_string(kMaxDisplayValues) + " JSON values in all\n");
        if (listed && r->listing) {
          if (auto bad = listing_error(*r->listing, *req.list)) return malformed(*bad);
          res.listing = std::move(r->listing->files);
          res.listing_truncated = r->listing->truncated;
        }
        finish_output();
        res.execution_count = r->execution_count;
        res.value = std::move(r->value);
        if (r->failed) {
          res.error = std::move(r->error);
          res.exit_code = 1;
        }
        if (r->exit_code) res.exit_code = *r->exit_code;
        if (interrupting && res.exit_code == 0) res.exit_code = 130;
        if (!interrupting) res.end = CellEnd::kCompleted;
        std::lock_guard l(mu_);
        execution_count_ = res.execution_count;
        return Result<CellResult>(std::move(res));
      }
    }
  };

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
  auto interrupt = [&] {
    (void)send_frame(inst->conn.get(), json{{"type", "interrupt"}, {"id", cell_id}});
  };
  for (;;) {
    if (auto done = take_frames()) return std::move(*done);
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
      finish_output();
      res.state_lost = true;
      res.kernel_restarted = true;
      res.exit_code = 137;
      replace_kernel();
      return res;
    }
    const auto until = !interrupting    ? deadline
                       : signal_pending ? std::min(signal_at, kill_at)
                                        : kill_at;
    int wait_ms = static_cast<int>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) +
                  1;
    struct pollfd p[3] = {{inst->conn.get(), POLLIN, 0},
                          {inst->exit_ev.get(), POLLIN, 0},
                          {cancel_ev.get(), static_cast<short>(interrupting ? 0 : POLLIN), 0}};
    int pr = ::poll(p, 3, wait_ms);
    if (pr < 0 && errno != EINTR) return Error::from_errno("poll the kernel connection");
    if (pr <= 0) continue;
    if (p[2].revents & POLLIN) drain(cancel_ev.get());
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = inst->reader.fill(inst->conn.get(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return died();  // the connection closed: the process is gone
      continue;
    }
    if (p[1].revents & POLLIN) {
      // The process exited: what it sent before still counts.
      for (;;) {
        if (auto done = take_frames()) return std::move(*done);
        const std::size_t had = inst->reader.buffered();
        drain_socket();
        if (inst->reader.buffered() == had) break;
      }
      return died();
    }
  }
}

}  // namespace sandcastle::service

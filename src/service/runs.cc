// execute_code and execute_command: a kernel cell, a process (compiled
// first when the language is), or a shell command, with live output, the
// files the run created, and its ending in words (hint).
#include "service/runs.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "common/metrics.h"
#include "service/ahead.h"
#include "service/history.h"
#include "service/images.h"
#include "service/kernel.h"
#include "service/languages.h"
#include "service/op_args.h"
#include "service/run_env.h"
#include "service/sandbox_uri.h"
#include "service/simple_command.h"
#include "service/workspace_diff.h"

namespace sandcastle::service {

namespace {

std::atomic<std::uint64_t> g_run_counter{0};

// The caller's callbacks, serialized: exec output arrives on two threads.
class Emitter {
 public:
  explicit Emitter(const RunCallbacks& cb) : cb_(cb) {}
  bool wants_output() const { return static_cast<bool>(cb_.on_output); }
  void output(std::string_view stream, std::string_view text) {
    std::lock_guard l(mu_);
    if (cb_.on_output) cb_.on_output(stream, text);
  }
  void stage(std::string_view s) {
    std::lock_guard l(mu_);
    if (cb_.on_stage) cb_.on_stage(s);
  }
  void queued(std::size_t position, std::size_t waiting) {
    std::lock_guard l(mu_);
    if (cb_.on_queued) cb_.on_queued(position, waiting);
  }

 private:
  const RunCallbacks& cb_;
  std::mutex mu_;
};

std::string format_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::chrono::milliseconds seconds_arg(const json& args, std::chrono::milliseconds otherwise) {
  if (!args.contains("timeout_s")) return otherwise;
  return std::chrono::milliseconds(static_cast<int64_t>(args["timeout_s"].get<double>() * 1000));
}

std::chrono::milliseconds timeout_of(const json& args, const SandboxEntry& e) {
  return seconds_arg(args, e.spec().limits().exec_timeout);
}

// Runs one exec with the run's cancellation (the request's, or an
// interrupt: RunRegistry) and the caller's output callback.
Result<sandbox::ExecResult> exec(SandboxEntry& entry, const sandbox::ExecRequest& req,
                                 Emitter& emit, CancelToken* run_cancel) {
  sandbox::CancelToken cancel;
  std::size_t sub = 0;
  if (run_cancel) sub = run_cancel->on_cancel([&cancel] { cancel.cancel(); });
  sandbox::ExecCallbacks cb;
  if (emit.wants_output()) {
    cb.on_stdout = [&emit](std::string_view d) { emit.output("stdout", d); };
    cb.on_stderr = [&emit](std::string_view d) { emit.output("stderr", d); };
  }
  auto r = entry.sandbox().exec(req, cb, &cancel);
  if (run_cancel && sub) run_cancel->unsubscribe(sub);
  return r;
}

// A process's ending; a timeout or an OOM kill is a failure the model must
// act on, any exit (whatever its code) is not.
RunResult process_result(const sandbox::ExecResult& r, const char* stage,
                         std::chrono::milliseconds timeout) {
  RunResult o;
  o.stdout_data = r.stdout_data;
  o.stderr_data = r.stderr_data;
  o.exit_code = r.status();
  o.signal = r.signal;
  o.duration = r.duration;
  o.cpu_time = r.cpu_time;
  o.peak_memory_bytes = r.peak_memory_bytes;
  o.truncated = r.stdout_truncated || r.stderr_truncated;
  o.stdout_bytes = r.stdout_total;
  o.stderr_bytes = r.stderr_total;
  o.reason = sandbox::end_reason_name(r.reason);
  o.stage = stage;
  switch (r.reason) {
    case sandbox::EndReason::kTimeout:
      o.hint = "the command ran past its " + format_seconds(timeout) +
               " s timeout and was killed; pass a larger timeout_s or make it faster";
      o.failed = true;
      break;
    case sandbox::EndReason::kOutOfMemory:
      o.hint =
          "the sandbox ran out of memory and the process was killed; use less memory "
          "or create a sandbox with a larger limits.memory_mb";
      o.failed = true;
      break;
    default: break;
  }
  return o;
}

// files_created: what changed in /workspace, at most kMaxFilesReported
// named (each with its sandbox:// URI and, with the HTTP transport on, a
// download link); a larger change is counted and flagged. Returns the
// listing taken (for the sandbox's next run), unless it was cut short.
// `listed` is the listing the kernel's driver took after the cell, if any;
// otherwise the workdir is listed now, through the file channel, unless
// the watch on `before`'s tree saw nothing change: then it is `before`.
std::optional<WatchedSnapshot> report_files(const Env& env, SandboxEntry& e, WatchedSnapshot before,
                                            RunResult& out,
                                            std::optional<WorkspaceSnapshot> listed = {},
                                            bool listed_truncated = false) {
  if (!listed && unchanged_since(e.sandbox(), before)) {
    out.files_created.emplace();
    return before;
  }
  std::size_t changed = 0;
  bool listing_truncated = listed_truncated;
  WatchedSnapshot after;
  if (listed)
    after.files = std::move(*listed);
  else
    after = snapshot_workspace(e.sandbox(), env.config.max_listed_files, &listing_truncated);
  const json diff = diff_workspace(before.files, after.files, kMaxFilesReported, &changed);
  std::vector<CreatedFile> files;
  for (const auto& d : diff) {
    CreatedFile f;
    f.path = d["path"].get<std::string>();
    f.size = d["size"].get<std::uint64_t>();
    f.mime_type = d["mime_type"].get<std::string>();
    f.status = d["status"].get<std::string>();
    f.uri = sandbox_resource_uri(e.id(), f.path);
    if (env.config.file_link) f.url = env.config.file_link(e.owner(), e.id(), f.path);
    files.push_back(std::move(f));
  }
  if (changed > files.size() || listing_truncated) out.files_created_total = changed;
  out.files_created = std::move(files);
  if (listing_truncated) return std::nullopt;
  return after;
}

// The listing a run starts from: the one the sandbox's last run ended with
// if nothing used the sandbox since (files written between the two runs, by
// the earlier one's background work, are then this one's), else a new one.
WatchedSnapshot listing_before(const Env& env, EntryUse& use) {
  if (auto kept = use->take_listing(use->use_counts().begun)) return std::move(*kept);
  return snapshot_workspace(use->sandbox(), env.config.max_listed_files);
}

// Reports the files a run changed (report_files) and keeps the listing for
// the next run, unless another use ran alongside this one (its writes could
// land after the listing and would then be missed).
void report_and_keep(const Env& env, EntryUse& use, WatchedSnapshot before, RunResult& out,
                     std::optional<WorkspaceSnapshot> listed = {}, bool listed_truncated = false) {
  const auto uses = use->use_counts();
  auto after = report_files(env, *use, std::move(before), out, std::move(listed), listed_truncated);
  const auto uses_after = use->use_counts();
  if (after && uses.active == 1 && uses_after.active == 1 && uses_after.begun == uses.begun)
    use->keep_listing(std::move(*after), uses.begun);
}

std::string kernel_hint(const CellResult& c, std::chrono::milliseconds timeout) {
  const char* what = c.end == CellEnd::kCancelled ? "was cancelled" : nullptr;
  const std::string ran_past = "ran past its " + format_seconds(timeout) + " s timeout";
  switch (c.end) {
    case CellEnd::kCompleted: return {};
    case CellEnd::kTimeout:
    case CellEnd::kCancelled:
      if (c.state_lost)
        return "the code " + (what ? std::string(what) : ran_past) +
               " and ignored the interrupt for 2 s, so the kernel was killed and restarted: "
               "variables, imports and functions from earlier calls are lost; run the set-up "
               "code again" +
               (what ? "" : ", and pass a larger timeout_s or make the code faster");
      return "the code " + (what ? std::string(what) : ran_past) +
             " and was interrupted (KeyboardInterrupt); the kernel and its state are intact" +
             (what ? "" : "; pass a larger timeout_s or make the code faster");
    case CellEnd::kKernelDied:
      return "the kernel died (" + c.death +
             ") while running this code; its state was lost "
             "(variables, imports, functions). A fresh kernel answers the next call: run the "
             "set-up code again" +
             std::string(c.death.rfind("out of memory", 0) == 0
                             ? "; use less memory or create a sandbox with a larger "
                               "limits.memory_mb"
                             : "");
  }
  return {};
}

Result<RunResult> in_kernel(Env& env, EntryUse& use, KernelLanguage lang, const json& args,
                            Emitter& emit, CancelToken* cancel) {
  auto kernel = kernel_of(*use, lang);
  CellRequest req;
  req.code = args["code"].get<std::string>();
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  req.timeout = timeout_of(args, *use);
  req.max_output_bytes = env.config.max_output_bytes;
  req.list = CellListRequest{use->sandbox().spec().workdir(), env.config.max_listed_files,
                             std::string(kSandcastleStateDir)};
  CellCallbacks cb;
  if (emit.wants_output())
    cb.on_output = [&emit](const char* stream, std::string_view text) {
      emit.output(stream, text);
    };
  emit.stage("run");

  WatchedSnapshot before = listing_before(env, use);
  RunRegistry::Run registered(*env.runs, use->id(), cancel);
  auto r = kernel->execute(req, cb, registered.token());
  if (!r.ok()) return r.error();
  const CellResult& c = *r;
  RunResult out;
  out.stdout_data = c.stdout_data;
  out.stderr_data = c.stderr_data;
  out.exit_code = c.exit_code;
  out.signal = c.signal;
  out.duration = c.duration;
  out.truncated = c.stdout_truncated || c.stderr_truncated;
  out.stdout_bytes = c.stdout_total;
  out.stderr_bytes = c.stderr_total;
  out.reason = cell_end_name(c.end);
  out.mode = "kernel";
  out.language = kernel_language_name(lang);
  out.sandbox_id = use->id();
  out.execution_count = c.execution_count;
  out.kernel = KernelInfo{c.state_lost, c.kernel_restarted, c.fresh_kernel, c.death};
  if (!c.value.is_null()) out.result = mime_bundle_of(c.value);
  out.error = c.error;
  for (const auto& d : c.displays) out.displays.push_back(mime_bundle_of(d));
  report_and_keep(env, use, std::move(before), out, std::move(r->listing), c.listing_truncated);
  out.hint = kernel_hint(c, req.timeout);
  out.failed = c.end == CellEnd::kTimeout || c.end == CellEnd::kKernelDied;
  return out;
}

Result<RunResult> in_process(Env& env, EntryUse& use, const Language& lang, bool one_shot,
                             const json& args, Emitter& emit, CancelToken* cancel) {
  const std::string dir = "/tmp/.sandcastle/run-" + std::to_string(++g_run_counter);
  const std::string src = dir + "/" + lang.source_file;
  const std::string bin = dir + "/main";
  if (auto s =
          use->sandbox().write_file(src, args["code"].get<std::string>(), 0644, /*parents=*/true);
      !s.ok())
    return s.error();

  WatchedSnapshot before = one_shot ? WatchedSnapshot{} : listing_before(env, use);
  const auto timeout = timeout_of(args, *use);
  const auto id = one_shot ? std::nullopt : std::optional<std::string>(use->id());
  RunRegistry::Run registered(*env.runs, use->id(), cancel);
  sandbox::ExecRequest req;
  req.env = run_env();
  req.timeout = timeout;
  req.output.max_bytes = env.config.max_output_bytes;
  if (!lang.compile.empty()) {
    req.argv = expand_argv(lang.compile, dir, src, bin, use->spec().limits().memory_bytes);
    emit.stage("compile");
    auto c = exec(*use, req, emit, registered.token());
    if (!c.ok()) return c.error();
    if (c->reason != sandbox::EndReason::kExited || c->status() != 0) {
      RunResult out = process_result(*c, "compile", timeout);
      out.language = lang.name;
      out.sandbox_id = id;
      out.failed = true;  // nothing ran: the model must fix the code
      return out;
    }
  }
  req.argv = expand_argv(lang.run, dir, src, bin, use->spec().limits().memory_bytes);
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  req.last = one_shot;  // its sandbox goes right after
  emit.stage("run");
  auto r = exec(*use, req, emit, registered.token());
  // A one-shot sandbox is destroyed right after: no round trip to tidy it.
  if (!one_shot) (void)use->sandbox().remove(dir, true);
  if (!r.ok()) return r.error();
  RunResult out = process_result(*r, "run", timeout);
  out.language = lang.name;
  out.sandbox_id = id;
  out.mode = "process";
  if (one_shot)
    out.files_created.emplace();
  else
    report_and_keep(env, use, std::move(before), out);
  return out;
}

// A call that failed because its sandbox's processes died meanwhile (its
// init or the zygote killed) says so; the manager deals with the sandbox.
Result<RunResult> unless_ended(Env& env, EntryUse& use, Result<RunResult> r) {
  if (r.ok() && !r->failed) return r;
  // A failure to reach the sandbox (no result at all) or a kernel's death
  // may come from its processes being killed a moment before its init's
  // own death is final: that is waited for, briefly. A timeout or an OOM
  // kill is a result, from a sandbox that lives.
  const bool lost_contact = !r.ok() || r->reason == "kernel_died";
  const std::chrono::milliseconds grace(lost_contact ? 500 : 0);
  if (auto why = env.manager.ended_during_call(use.entry(), grace)) return *why;
  return r;
}

// The first run after a persistent sandbox came back without its processes'
// memory (a server restart, a resume that could not checkpoint) says so.
Result<RunResult> with_state_lost(Result<RunResult> r, bool lost) {
  if (lost && r.ok()) r->state_lost = true;
  return r;
}

Result<RunResult> code_run(Env& env, const Caller& c, const json& args, const RunOptions& opts,
                           Emitter& emit) {
  std::shared_ptr<SandboxEntry> entry;
  if (args.contains("sandbox_id")) {
    auto e = env.manager.get(args["sandbox_id"], c.owner);
    if (!e.ok()) return e.error();
    entry = *e;
  }
  const std::string lang_name = args.contains("language") ? args["language"].get<std::string>()
                                : entry                   ? entry->language()
                                                          : env.config.default_language;
  const std::string image =
      entry ? entry->spec().image() : default_image_for(env.config, lang_name);
  // A sandbox's own language was checked against its image when it was made.
  const Language* own = entry && !args.contains("language") ? language_by_name(lang_name) : nullptr;
  auto lang = own ? Result<const Language*>(own) : language_for_image(env, lang_name, image);
  if (!lang.ok()) return lang.error();
  const bool one_shot = !entry;
  std::optional<double> queued_ms;
  if (one_shot) {
    // The pool's sandboxes start ahead what the next one-shot likely runs.
    if (image == env.config.default_image)
      follow_one_shot(env.config, env.manager.backend(), **lang);
    CreateRequest req;
    req.language = (*lang)->name;
    req.owner = c.owner;
    req.spec.image = image;
    req.spec.limits = env.config.default_limits;
    req.spec.env = env.config.pass_through_env;
    req.one_shot = true;
    // At the server's cap a one-shot waits its turn (admission.h) for as
    // long as its own timeout, saying where it stands in line.
    const auto t0 = std::chrono::steady_clock::now();
    bool queued = false;
    auto e = env.manager.create_when_free(
        req, t0 + seconds_arg(args, env.config.default_limits.exec_timeout), opts.cancel,
        [&](std::size_t pos, std::size_t waiting) {
          queued = true;
          emit.queued(pos, waiting);
        });
    if (!e.ok()) return e.error();
    if (queued)
      queued_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    entry = *e;
  }
  struct Cleanup {
    Env& env;
    std::shared_ptr<SandboxEntry> e;
    bool one_shot;
    ~Cleanup() {
      if (one_shot) env.manager.retire(e->id(), e->owner());
    }
  } cleanup{env, entry, one_shot};
  EntryUse use(entry);
  const bool state_lost = !one_shot && use->take_state_lost();
  // A python/javascript sandbox keeps a kernel; one-shot runs, `fresh` runs
  // and other languages get a process of their own.
  const auto kl = kernel_language_for((*lang)->name);
  const bool use_kernel =
      !one_shot && !args.value("fresh", false) && (*lang)->name == use->language() && kl;
  auto r = use_kernel ? in_kernel(env, use, *kl, args, emit, opts.cancel)
                      : in_process(env, use, **lang, one_shot, args, emit, opts.cancel);
  if (r.ok() && queued_ms && r->mode == "process") r->queued_ms = queued_ms;
  if (!one_shot) r = unless_ended(env, use, std::move(r));
  return with_state_lost(std::move(r), state_lost);
}

Result<RunResult> command_in(Env& env, EntryUse& use, const json& args, Emitter& emit,
                             CancelToken* cancel) {
  sandbox::ExecRequest req;
  req.env = package_env();
  const std::string command = args["command"].get<std::string>();
  if (use->spec().image() == "host")
    req.argv = {"/bin/bash", "-c", command};
  else  // an image may have no bash (busybox, alpine): then its sh
    req.argv = {"/bin/sh", "-c",
                "[ -x /bin/bash ] && exec /bin/bash -c \"$1\"; exec /bin/sh -c \"$1\"", "sh",
                command};
  if (args.contains("workdir")) req.cwd = args["workdir"].get<std::string>();
  if (args.contains("env"))
    for (const auto& [k, v] : args["env"].items()) req.env[k] = v.get<std::string>();
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  const auto timeout = timeout_of(args, *use);
  req.timeout = timeout;
  req.output.max_bytes = env.config.max_output_bytes;
  sandbox::ExecRequest direct = req;
  bool try_direct = false;
  if (auto words = simple_command_words(command)) {
    auto merged = use->spec().env();
    for (const auto& [k, v] : req.env) merged[k] = v;
    if (environment_allows_direct_exec(merged)) {
      direct.argv = std::move(*words);
      direct.shell_env = true;
      try_direct = true;
    }
  }
  WatchedSnapshot before = listing_before(env, use);
  RunRegistry::Run registered(*env.runs, use->id(), cancel);
  emit.stage("run");
  auto r = exec(*use, try_direct ? direct : req, emit, registered.token());
  // The program could not be executed (not found, not executable, a script
  // without #!): bash reports it in its own words, or runs the script.
  if (try_direct && !r.ok() && r.error().context.rfind("execve ", 0) == 0)
    r = exec(*use, req, emit, registered.token());
  if (!r.ok()) return r.error();
  RunResult out = process_result(*r, "run", timeout);
  out.sandbox_id = use->id();
  report_and_keep(env, use, std::move(before), out);
  return out;
}

// The executions metrics, by how the run ended.
void count_execution(const Result<RunResult>& r, const CancelToken* cancel,
                     std::chrono::steady_clock::time_point started) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string detail = cancel && cancel->cancelled() ? "cancelled" : r.ok() ? "ok" : "error";
  if (r.ok()) {
    detail = r->reason;
    if (detail == "exited") detail = r->exit_code == 0 ? "exit_zero" : "exit_nonzero";
    if (r->stage == "compile") detail = "compile_error";
  }
  auto& reg = metrics::registry();
  reg.counter(metrics::name::kExecutions, "code and command executions, by outcome",
              {{"outcome", detail}})
      .inc();
  reg.histogram(metrics::name::kExecutionSeconds, "execution duration in seconds (whole tool call)")
      .observe(secs);
}

// Every run that got past its argument check is recorded and counted, its
// result or why it has none.
template <class Fn>
Result<RunResult> recorded(Env& env, const Caller& c, const char* tool, const json& args,
                           const RunOptions& opts, Fn&& run) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<RunResult> r = run();
  RunOutcome outcome;
  json structured;
  if (r.ok()) {
    structured = run_result_json(*r);
    outcome.result = &structured;
    outcome.images = r->image_count();
  } else {
    outcome.error_text = r.error().message() + " [" + error_code_name(r.error().code) + "]";
  }
  record_run(env, c.owner, tool, args, outcome, t0);
  count_execution(r, opts.cancel, t0);
  return r;
}

const Env::InputSchemas& run_schemas(Env& env) {
  Env::InputSchemas& s = *env.input_schemas;
  std::call_once(s.runs_once, [&] {
    s.code = std::make_unique<const json>(run_code_input_schema(env.config));
    s.command = std::make_unique<const json>(run_command_input_schema());
  });
  return s;
}

}  // namespace

Result<RunResult> run_code(Env& env, const Caller& c, const json& args, const RunOptions& opts) {
  auto checked = checked_args("execute_code", *run_schemas(env).code, args);
  if (!checked.ok()) return checked.error();
  Emitter emit(opts.callbacks);
  return recorded(env, c, "execute_code", *checked, opts,
                  [&] { return code_run(env, c, *checked, opts, emit); });
}

Result<RunResult> run_command(Env& env, const Caller& c, const json& args, const RunOptions& opts) {
  auto checked = checked_args("execute_command", *run_schemas(env).command, args);
  if (!checked.ok()) return checked.error();
  Emitter emit(opts.callbacks);
  return recorded(env, c, "execute_command", *checked, opts, [&]() -> Result<RunResult> {
    auto e = env.manager.get((*checked)["sandbox_id"], c.owner);
    if (!e.ok()) return e.error();
    EntryUse use(*e);
    const bool state_lost = use->take_state_lost();
    return with_state_lost(
        unless_ended(env, use, command_in(env, use, *checked, emit, opts.cancel)), state_lost);
  });
}

}  // namespace sandcastle::service

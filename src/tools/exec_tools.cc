// execute_code, execute_command and restart_kernel: run a snippet or a shell
// command in a sandbox (or a fresh one-shot sandbox), streaming output as it
// arrives. In a python or javascript sandbox, execute_code goes to the
// sandbox's persistent kernel (service/kernel.h) so state survives between
// calls; `fresh: true`, other languages and one-shot runs start a process.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "common/base64.h"
#include "common/metrics.h"
#include "mcp/pagination.h"
#include "service/kernel.h"
#include "service/images.h"
#include "service/languages.h"
#include "service/run_env.h"
#include "service/simple_command.h"
#include "service/workspace_diff.h"
#include "tools/resource_methods.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

std::atomic<uint64_t> g_run_counter{0};

json exec_output_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"stdout", {{"type", "string"}}},
        {"stderr", {{"type", "string"}}},
        {"exit_code", {{"type", "integer"}}},
        {"duration_ms", {{"type", "number"}}},
        {"truncated", {{"type", "boolean"}}},
        {"reason", {{"type", "string"}}},
        {"stage", {{"type", "string"}}},
        {"files_created", {{"type", "array"}}},
        {"mode", {{"type", "string"}, {"enum", {"kernel", "process"}}}},
        {"execution_count", {{"type", "integer"}}},
        {"result", {{"type", "object"}}},
        {"error", {{"type", "object"}}},
        {"displays", {{"type", "array"}}},
        {"kernel", {{"type", "object"}}},
        {"hint", {{"type", "string"}}},
        {"state_lost", {{"type", "boolean"}}}}},
      {"required", {"stdout", "stderr", "exit_code", "duration_ms", "truncated", "reason"}}};
}

// The first run after a persistent sandbox came back without its processes'
// memory (a server restart, a resume after a pause that could not
// checkpoint) says so: its files are there, its variables are not.
ToolResult with_state_lost(ToolResult res, bool lost) {
  if (!lost || !res.structured.is_object()) return res;
  res.structured["state_lost"] = true;
  res.content.push_back(
      {{"type", "text"},
       {"text",
        "state_lost: this sandbox's processes were started again (a server restart, or a "
        "resume without a memory checkpoint): its files and installed packages are kept, but "
        "variables, imports and background processes from before are gone."}});
  return res;
}

// A call that failed because its sandbox's processes died meanwhile (its
// init or the zygote killed) says so; the manager deals with the sandbox.
// Any other result passes unchanged.
ToolResult unless_ended(ToolEnv& env, EntryUse& use, ToolResult res) {
  if (!res.is_error) return res;
  // A failure to reach the sandbox (no result at all) or a kernel's death
  // may come from its processes being killed a moment before its init's
  // own death is final: that is waited for, briefly. A timeout or an OOM
  // kill is a result, from a sandbox that lives.
  const bool lost_contact =
      res.structured.is_null() ||
      (res.structured.is_object() && res.structured.value("reason", "") == "kernel_died");
  const std::chrono::milliseconds grace(lost_contact ? 500 : 0);
  if (auto why = env.manager.ended_during_call(use.entry(), grace)) return error_result(*why);
  return res;
}

// Live output: each chunk as notifications/progress (with a progressToken) and
// as a notifications/message log line (when logging is on), in order. Empty
// when the client asked for neither.
// `sent` progress notifications went before (a one-shot's place in line):
// the count goes on from there, as progress must rise.
std::function<void(const char*, std::string_view)> output_streamer(RequestContext& ctx,
                                                                   const std::string& stage,
                                                                   uint64_t sent = 0) {
  if (!ctx.wants_progress() && !ctx.log_enabled("info")) return nullptr;
  struct State {
    std::mutex mu;
    uint64_t chunks = 0;
  };
  auto st = std::make_shared<State>();
  st->chunks = sent;
  return [st, &ctx, stage](const char* name, std::string_view data) {
    std::string text(data);
    std::lock_guard l(st->mu);  // increment and send together: progress must rise
    ctx.progress(static_cast<double>(++st->chunks), std::nullopt, text);
    ctx.log("info", json{{"stream", name}, {"stage", stage}, {"text", text}}, "sandbox");
  };
}

// Runs one exec with the run's cancellation (the request's, or an
// interrupt: RunRegistry) and the request's progress wired in.
Result<sandbox::ExecResult> run(SandboxEntry& entry, sandbox::ExecRequest req, RequestContext& ctx,
                                CancelToken* run_cancel, const std::string& stage,
                                uint64_t progress_sent = 0) {
  sandbox::CancelToken cancel;
  size_t sub = 0;
  if (run_cancel) sub = run_cancel->on_cancel([&cancel] { cancel.cancel(); });
  sandbox::ExecCallbacks cb;
  auto emit = output_streamer(ctx, stage, progress_sent);
  if (emit) {
    cb.on_stdout = [&emit](std::string_view d) { emit("stdout", d); };
    cb.on_stderr = [&emit](std::string_view d) { emit("stderr", d); };
  }
  auto r = entry.sandbox().exec(req, cb, &cancel);
  if (run_cancel && sub) run_cancel->unsubscribe(sub);
  return r;
}

json result_json(const sandbox::ExecResult& r, const std::string& stage) {
  return json{{"stdout", r.stdout_data},
              {"stderr", r.stderr_data},
              {"exit_code", r.status()},
              {"signal", r.signal},
              {"duration_ms", static_cast<double>(r.duration.count()) / 1000.0},
              {"cpu_time_ms", static_cast<double>(r.cpu_time.count()) / 1000.0},
              {"peak_memory_bytes", r.peak_memory_bytes},
              {"truncated", r.stdout_truncated || r.stderr_truncated},
              {"stdout_bytes", r.stdout_total},
              {"stderr_bytes", r.stderr_total},
              {"reason", sandbox::end_reason_name(r.reason)},
              {"stage", stage}};
}

// With the HTTP transport on, each created file gets a download link. Every
// file also gets its sandbox:// resource URI (resources/read serves it).
void add_links(const ToolEnv& env, const SandboxEntry& e, json& files) {
  for (auto& f : files) {
    f["uri"] = sandbox_resource_uri(e.id(), f["path"].get<std::string>());
    if (env.config.file_link)
      f["url"] = env.config.file_link(e.owner(), e.id(), f["path"].get<std::string>());
  }
}

// resource_link content blocks (protocol 2025-06-18 and later) for the files
// a run created or changed.
void add_resource_links(ToolResult& res, const json& files, const RequestContext& ctx) {
  if (ctx.protocol_version() < "2025-06-18") return;
  for (const auto& f : files) {
    if (!f.contains("uri")) continue;
    res.content.push_back({{"type", "resource_link"},
                           {"uri", f["uri"]},
                           {"name", f["path"]},
                           {"mimeType", f["mime_type"]},
                           {"size", f["size"]}});
  }
}

std::string format_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// The text block that mirrors a run's structured result. Output up to
// kMirrorWhole bytes is mirrored whole (clients read either). Larger output
// is sent once: whole in structuredContent, and only its head and tail in the
// text, with the number of bytes left out there. Clients that show the model
// only the text (most do) still see both ends, where errors are.
constexpr size_t kMirrorWhole = size_t{16} * 1024;
constexpr size_t kMirrorEnd = size_t{4} * 1024;

std::string utf8_head(const std::string& s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string utf8_tail(const std::string& s, size_t n) {
  size_t from = s.size() - n;
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return s.substr(from);
}

std::string text_mirror(const json& out) {
  auto size_of = [&](const char* k) {
    return out.contains(k) ? out[k].get_ref<const std::string&>().size() : 0;
  };
  if (size_of("stdout") + size_of("stderr") <= kMirrorWhole) return mcp::dump_message(out);
  json brief = out;
  std::string note;
  for (const char* k : {"stdout", "stderr"}) {
    const std::string& s = out[k].get_ref<const std::string&>();
    if (s.size() <= 2 * kMirrorEnd) continue;
    std::string head = utf8_head(s, kMirrorEnd);
    std::string tail = utf8_tail(s, kMirrorEnd);
    const size_t left_out = s.size() - head.size() - tail.size();
    brief[k] = head + "\n[… " + std::to_string(left_out) + " bytes of " + k +
               " not repeated here …]\n" + tail;
    note += std::string(note.empty() ? "" : "; ") + k + ": " + std::to_string(left_out) + " of " +
            std::to_string(s.size()) + " bytes";
  }
  brief["text_excerpt"] =
      "this text shows the head and tail of large output (" + note +
      " left out); the whole output is in the result's structuredContent. Without "
      "it, write the output to a file in /workspace and read it with read_file "
      "(offset, length).";
  return mcp::dump_message(brief);
}

// Turns an exec outcome into the tool result: a run that ended on its own is
// a success whatever its exit code; timeouts and OOM kills are errors the
// model must act on.
ToolResult finish(json out, const sandbox::ExecResult& r, std::chrono::milliseconds timeout) {
  switch (r.reason) {
    case sandbox::EndReason::kTimeout:
      out["hint"] = "the command ran past its " + format_seconds(timeout) +
                    " s timeout and was killed; pass a larger timeout_s or make it faster";
      break;
    case sandbox::EndReason::kOutOfMemory:
      out["hint"] =
          "the sandbox ran out of memory and the process was killed; use less memory "
          "or create a sandbox with a larger limits.memory_mb";
      break;
    default: break;
  }
  ToolResult res;
  res.content.push_back({{"type", "text"}, {"text", text_mirror(out)}});
  res.structured = std::move(out);
  res.is_error =
      r.reason == sandbox::EndReason::kTimeout || r.reason == sandbox::EndReason::kOutOfMemory;
  return res;
}

std::chrono::milliseconds timeout_of(const json& args, const SandboxEntry& e) {
  if (args.contains("timeout_s"))
    return std::chrono::milliseconds(static_cast<int64_t>(args["timeout_s"].get<double>() * 1000));
  return e.spec().limits().exec_timeout;
}

bool is_image_mime(const std::string& m) {
  return m == "image/png" || m == "image/jpeg" || m == "image/gif" || m == "image/webp" ||
         m == "image/svg+xml";
}

// A MIME bundle from the kernel, as structured data: images become MCP image
// content (never base64 inside text) and are replaced by a pointer to it.
json bundle_to_content(const json& bundle, ToolResult& res) {
  json entry = json::object();
  for (const auto& [mime, v] : bundle.items()) {
    if (is_image_mime(mime) && v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      // SVG arrives as text; the other images as base64 already.
      std::string data = mime == "image/svg+xml" ? base64_encode(s) : s;
      entry[mime] = {{"content_index", res.content.size()},
                     {"bytes", mime == "image/svg+xml" ? s.size() : data.size() / 4 * 3}};
      res.content.push_back({{"type", "image"}, {"data", std::move(data)}, {"mimeType", mime}});
    } else {
      entry[mime] = v;
    }
  }
  return entry;
}

// files_created: what changed in /workspace, at most kMaxFilesReported
// named; a larger change is counted (files_created_total, itself bounded by
// the listing's cap) and flagged.
// Returns the listing taken (for a kernel's next call), unless it was cut short.
std::optional<WorkspaceSnapshot> report_files(json& out, const WorkspaceSnapshot& before,
                                              sandbox::Sandbox& sb, size_t max_listed) {
  size_t changed = 0;
  bool listing_truncated = false;
  auto after = snapshot_workspace(sb, max_listed, &listing_truncated);
  out["files_created"] = diff_workspace(before, after, kMaxFilesReported, &changed);
  if (changed > out["files_created"].size() || listing_truncated) {
    out["files_created_total"] = changed;
    out["files_created_truncated"] = true;
  }
  if (listing_truncated) return std::nullopt;
  return after;
}

ToolResult execute_in_kernel(ToolEnv& env, EntryUse& use, KernelLanguage lang, const json& args,
                             RequestContext& ctx) {
  auto kernel = kernel_of(*use, lang);
  CellRequest req;
  req.code = args["code"].get<std::string>();
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  req.timeout = timeout_of(args, *use);
  req.max_output_bytes = env.config.max_output_bytes;
  CellCallbacks cb;
  auto emit = output_streamer(ctx, "run");
  if (emit)
    cb.on_output = [&emit](const char* stream, std::string_view text) { emit(stream, text); };

  // The listing the previous call ended with, if nothing else used the
  // sandbox since: files the kernel's own background work wrote between
  // calls are then reported by this one.
  auto before = kernel->take_listing(use->use_counts().begun);
  if (!before) before = snapshot_workspace(use->sandbox(), env.config.max_listed_files);
  RunRegistry::Run registered(*env.runs, use->id(), ctx.cancel_token());
  auto r = kernel->execute(req, cb, registered.token());
  if (!r.ok()) return error_result(r.error());
  const CellResult& c = *r;
  json out{{"stdout", c.stdout_data},
           {"stderr", c.stderr_data},
           {"exit_code", c.exit_code},
           {"signal", c.signal},
           {"duration_ms", static_cast<double>(c.duration.count()) / 1000.0},
           {"truncated", c.stdout_truncated || c.stderr_truncated},
           {"stdout_bytes", c.stdout_total},
           {"stderr_bytes", c.stderr_total},
           {"reason", cell_end_name(c.end)},
           {"stage", "run"},
           {"mode", "kernel"},
           {"language", kernel_language_name(lang)},
           {"sandbox_id", use->id()},
           {"execution_count", c.execution_count}};
  json kinfo{
      {"state_lost", c.state_lost}, {"restarted", c.kernel_restarted}, {"fresh", c.fresh_kernel}};
  if (!c.death.empty()) kinfo["death"] = c.death;
  out["kernel"] = kinfo;

  ToolResult res;
  res.content.push_back(json::object());  // the structured mirror goes first, filled in below
  if (!c.value.is_null()) out["result"] = bundle_to_content(c.value, res);
  if (!c.error.is_null()) out["error"] = c.error;
  if (!c.displays.empty()) {
    json displays = json::array();
    for (const auto& d : c.displays) displays.push_back(bundle_to_content(d, res));
    out["displays"] = displays;
  }
  // Kept only if no other use ran alongside this listing (its writes could
  // land after it and would then be missed).
  const auto uses = use->use_counts();
  auto after = report_files(out, *before, use->sandbox(), env.config.max_listed_files);
  const auto uses_after = use->use_counts();
  if (after && uses.active == 1 && uses_after.active == 1 && uses_after.begun == uses.begun)
    kernel->keep_listing(std::move(*after), uses.begun);
  add_links(env, *use, out["files_created"]);

  const std::string secs = format_seconds(req.timeout);
  const char* what = c.end == CellEnd::kCancelled ? "was cancelled" : nullptr;
  std::string ran_past = "ran past its " + secs + " s timeout";
  switch (c.end) {
    case CellEnd::kCompleted: break;
    case CellEnd::kTimeout:
    case CellEnd::kCancelled:
      if (c.state_lost) {
        out["hint"] =
            "the code " + (what ? std::string(what) : ran_past) +
            " and ignored the interrupt for 2 s, so the kernel was killed and restarted: "
            "variables, imports and functions from earlier calls are lost; run the set-up "
            "code again" +
            (what ? "" : ", and pass a larger timeout_s or make the code faster");
      } else {
        out["hint"] =
            "the code " + (what ? std::string(what) : ran_past) +
            " and was interrupted (KeyboardInterrupt); the kernel and its state are intact" +
            (what ? "" : "; pass a larger timeout_s or make the code faster");
      }
      break;
    case CellEnd::kKernelDied:
      out["hint"] =
          "the kernel died (" + c.death +
          ") while running this code; its state was lost "
          "(variables, imports, functions). A fresh kernel answers the next call: run the "
          "set-up code again" +
          std::string(c.death.rfind("out of memory", 0) == 0
                          ? "; use less memory or create a sandbox with a larger limits.memory_mb"
                          : "");
      break;
  }
  res.content[0] = {{"type", "text"}, {"text", text_mirror(out)}};
  res.structured = std::move(out);
  res.is_error = c.end == CellEnd::kTimeout || c.end == CellEnd::kKernelDied;
  add_resource_links(res, res.structured["files_created"], ctx);
  return res;
}

ToolResult run_code(ToolEnv& env, EntryUse& use, const Language* lang, bool one_shot,
                    uint64_t progress_sent, double queued_ms, const json& args,
                    RequestContext& ctx);
ToolResult run_command(ToolEnv& env, EntryUse& use, const json& args, RequestContext& ctx);

ToolResult execute_code(ToolEnv& env, const json& args, RequestContext& ctx) {
  std::shared_ptr<SandboxEntry> entry;
  bool one_shot = false;
  uint64_t progress_sent = 0;  // queue-place notifications sent
  double queued_ms = 0;
  if (args.contains("sandbox_id")) {
    auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
    if (!e.ok()) return error_result(e.error());
    entry = *e;
  }
  std::string lang_name = args.contains("language") ? args["language"].get<std::string>()
                          : entry                   ? entry->language()
                                                    : env.config.default_language;
  const std::string image =
      entry ? entry->spec().image() : default_image_for(env.config, lang_name);
  auto lang = language_for_image(env, lang_name, image);
  if (!lang.ok()) return error_result(lang.error());
  if (!entry) {
    CreateRequest req;
    req.language = (*lang)->name;
    req.owner = owner_of(ctx);
    req.spec.image = image;
    req.spec.limits = env.config.default_limits;
    req.spec.env = env.config.pass_through_env;
    req.one_shot = true;
    // At the server's cap a one-shot waits its turn (service/admission.h) for
    // as long as its own timeout, saying where it stands in line.
    const auto wait_limit = args.contains("timeout_s")
                                ? std::chrono::milliseconds(
                                      static_cast<int64_t>(args["timeout_s"].get<double>() * 1000))
                                : env.config.default_limits.exec_timeout;
    const auto t0 = std::chrono::steady_clock::now();
    auto e = env.manager.create_when_free(
        req, t0 + wait_limit, ctx.cancel_token(), [&](size_t pos, size_t waiting) {
          ++progress_sent;
          const std::string text = "queued: place " + std::to_string(pos) + " of " +
                                   std::to_string(waiting) +
                                   " waiting for a sandbox (the server runs its maximum of " +
                                   std::to_string(env.manager.options().max_sandboxes) + ")";
          ctx.progress(static_cast<double>(progress_sent), std::nullopt, text);
          ctx.log(
              "info",
              json{{"stage", "queued"}, {"position", pos}, {"waiting", waiting}, {"text", text}},
              "sandbox");
        });
    if (!e.ok()) return error_result(e.error());
    queued_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    entry = *e;
    one_shot = true;
  }
  struct Cleanup {
    ToolEnv& env;
    std::shared_ptr<SandboxEntry> e;
    bool one_shot;
    ~Cleanup() {
      if (one_shot) env.manager.retire(e->id(), e->owner());
    }
  } cleanup{env, entry, one_shot};
  EntryUse use(entry);
  const bool state_lost = !one_shot && use->take_state_lost();
  ToolResult res = run_code(env, use, *lang, one_shot, progress_sent, queued_ms, args, ctx);
  if (!one_shot) res = unless_ended(env, use, std::move(res));
  return with_state_lost(std::move(res), state_lost);
}

ToolResult run_code(ToolEnv& env, EntryUse& use, const Language* lang, bool one_shot,
                    uint64_t progress_sent, double queued_ms, const json& args,
                    RequestContext& ctx) {
  // A python/javascript sandbox keeps a kernel; one-shot runs, `fresh` runs
  // and other languages get a process of their own.
  if (!one_shot && !args.value("fresh", false) && lang->name == use->language()) {
    if (auto kl = kernel_language_for(lang->name))
      return execute_in_kernel(env, use, *kl, args, ctx);
  }

  const std::string dir = "/tmp/.sandcastle/run-" + std::to_string(++g_run_counter);
  const std::string src = dir + "/" + lang->source_file;
  const std::string bin = dir + "/main";
  if (auto s =
          use->sandbox().write_file(src, args["code"].get<std::string>(), 0644, /*parents=*/true);
      !s.ok())
    return error_result(s.error());

  auto before = one_shot ? WorkspaceSnapshot{}
                         : snapshot_workspace(use->sandbox(), env.config.max_listed_files);
  const auto timeout = timeout_of(args, *use);
  RunRegistry::Run registered(*env.runs, use->id(), ctx.cancel_token());
  json out;
  sandbox::ExecRequest req;
  req.env = run_env();
  req.timeout = timeout;
  req.output.max_bytes = env.config.max_output_bytes;
  if (!lang->compile.empty()) {
    req.argv = expand_argv(lang->compile, dir, src, bin, use->spec().limits().memory_bytes);
    auto c = run(*use, req, ctx, registered.token(), "compile", progress_sent);
    if (!c.ok()) return error_result(c.error());
    if (c->reason != sandbox::EndReason::kExited || c->status() != 0) {
      out = result_json(*c, "compile");
      out["language"] = lang->name;
      out["sandbox_id"] = one_shot ? json(nullptr) : json(use->id());
      ToolResult res = finish(out, *c, timeout);
      res.is_error = true;  // nothing ran: the model must fix the code
      return res;
    }
  }
  req.argv = expand_argv(lang->run, dir, src, bin, use->spec().limits().memory_bytes);
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  auto r = run(*use, req, ctx, registered.token(), "run", progress_sent);
  // A one-shot sandbox is destroyed right after: no round trip to tidy it.
  if (!one_shot) (void)use->sandbox().remove(dir, true);
  if (!r.ok()) return error_result(r.error());
  out = result_json(*r, "run");
  out["language"] = lang->name;
  out["sandbox_id"] = one_shot ? json(nullptr) : json(use->id());
  out["files_created"] = json::array();
  if (!one_shot) report_files(out, before, use->sandbox(), env.config.max_listed_files);
  out["mode"] = "process";
  if (progress_sent > 0) out["queued_ms"] = queued_ms;  // waited in line for a sandbox
  if (!one_shot) add_links(env, *use, out["files_created"]);
  ToolResult res = finish(out, *r, timeout);
  add_resource_links(res, out["files_created"], ctx);
  return res;
}

ToolResult execute_command(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  const bool state_lost = use->take_state_lost();
  return with_state_lost(unless_ended(env, use, run_command(env, use, args, ctx)), state_lost);
}

ToolResult run_command(ToolEnv& env, EntryUse& use, const json& args, RequestContext& ctx) {
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
  auto before = snapshot_workspace(use->sandbox(), env.config.max_listed_files);
  RunRegistry::Run registered(*env.runs, use->id(), ctx.cancel_token());
  auto r = try_direct ? run(*use, direct, ctx, registered.token(), "run")
                      : run(*use, req, ctx, registered.token(), "run");
  // The program could not be executed (not found, not executable, a script
  // without #!): bash reports it in its own words, or runs the script.
  if (try_direct && !r.ok() && r.error().context.rfind("execve ", 0) == 0)
    r = run(*use, req, ctx, registered.token(), "run");
  if (!r.ok()) return error_result(r.error());
  json out = result_json(*r, "run");
  out["sandbox_id"] = use->id();
  report_files(out, before, use->sandbox(), env.config.max_listed_files);
  add_links(env, *use, out["files_created"]);
  ToolResult res = finish(out, *r, timeout);
  add_resource_links(res, out["files_created"], ctx);
  return res;
}

// The executions metrics (by how the run ended) for one execute_code /
// execute_command call that reached its handler.
void count_execution(const ToolResult& res, const RequestContext& ctx,
                     std::chrono::steady_clock::time_point started) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // The run's own ending when the tool reports one: exited (zero or not),
  // timeout, oom, cancelled, kernel_died; compile errors separately.
  std::string detail = ctx.cancelled() ? "cancelled" : res.is_error ? "error" : "ok";
  if (res.structured.is_object() && res.structured.contains("reason")) {
    detail = res.structured.value("reason", detail);
    if (detail == "exited")
      detail = res.structured.value("exit_code", 0) == 0 ? "exit_zero" : "exit_nonzero";
    if (res.structured.value("stage", "") == "compile") detail = "compile_error";
  }
  auto& reg = metrics::registry();
  reg.counter(metrics::name::kExecutions, "code and command executions, by outcome",
              {{"outcome", detail}})
      .inc();
  reg.histogram(metrics::name::kExecutionSeconds, "execution duration in seconds (whole tool call)")
      .observe(secs);
}

json timeout_schema() {
  return json{{"type", "number"},
              {"minimum", 0.1},
              {"maximum", 3600},
              {"description", "Seconds before the run is killed (default: the sandbox's, 30)."}};
}

}  // namespace

void register_exec_tools(mcp::Server& server, ToolEnv& env) {
  std::string langs;
  for (const auto& n : available_language_names()) langs += (langs.empty() ? "" : ", ") + n;
  mcp::ToolDefinition code_def{
      "execute_code", "Execute code",
       "Runs a code snippet and returns its stdout, stderr, exit code and the files it "
       "created in /workspace (also as resource links). With sandbox_id it runs in that sandbox "
       "(files and installed packages persist); in a python or javascript sandbox it runs in a "
       "persistent interpreter, so variables, imports and functions from earlier calls are still "
       "there, the value of the last expression comes back as `result`, exceptions as `error` "
       "{name, value, traceback}, and matplotlib figures and display(obj) images as image "
       "content (fresh: true runs a separate process instead). Without sandbox_id it runs in a "
       "fresh one-shot sandbox that is destroyed afterwards. Compiled languages are compiled "
       "first; a compile error comes back with stage \"compile\". A timeout or cancellation "
       "interrupts the code (KeyboardInterrupt); code that ignores it for 2 s loses the "
       "interpreter's state, and the result says so. The sandbox has no network. Languages: " +
           langs + ".",
       json{{"type", "object"},
            {"properties",
             {{"code", {{"type", "string"}, {"description", "The source code to run."}}},
              {"language",
               {{"type", "string"},
                {"description",
                 "Language (default: the sandbox's, else " + env.config.default_language + ")."}}},
              {"sandbox_id",
               {{"type", "string"},
                {"description", "Sandbox id or name; omit for a one-shot run."}}},
              {"timeout_s", timeout_schema()},
              {"stdin",
               {{"type", "string"}, {"description", "Bytes fed to the program's standard input."}}},
              {"fresh",
               {{"type", "boolean"},
                {"default", false},
                {"description",
                 "Run in a new process instead of the sandbox's persistent "
                 "kernel (no access to earlier variables)."}}}}},
            {"required", {"code"}},
            {"additionalProperties", false}},
       exec_output_schema(),
       json{{"readOnlyHint", false},
            {"destructiveHint", false},
            {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr};
  if (!env.config.run_result_view_html.empty())
    code_def.meta = json{{"ui", {{"resourceUri", kRunResultViewUri}}}};
  server.tools().add(
      std::move(code_def),
      [&env](const json& args, RequestContext& ctx) {
        const auto t0 = std::chrono::steady_clock::now();
        auto res = execute_code(env, args, ctx);
        record_run(env, ctx, "execute_code", args, res, t0);
        count_execution(res, ctx, t0);
        return res;
      });

  server.tools().add(
      {"execute_command", "Execute shell command",
       "Runs a shell command (bash -c) in a sandbox and returns stdout, stderr and the exit "
       "code, e.g. to compile and run a program you wrote with write_file, inspect files, or "
       "run a test suite. The working directory defaults to /workspace.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
              {"command",
               {{"type", "string"}, {"minLength", 1}, {"description", "The shell command."}}},
              {"workdir",
               {{"type", "string"}, {"description", "Working directory inside the sandbox."}}},
              {"timeout_s", timeout_schema()},
              {"env",
               {{"type", "object"},
                {"additionalProperties", {{"type", "string"}}},
                {"description", "Extra environment variables for this command."}}},
              {"stdin", {{"type", "string"}, {"description", "Bytes fed to standard input."}}}}},
            {"required", {"sandbox_id", "command"}},
            {"additionalProperties", false}},
       exec_output_schema(),
       json{{"readOnlyHint", false},
            {"destructiveHint", true},
            {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        const auto t0 = std::chrono::steady_clock::now();
        auto res = execute_command(env, args, ctx);
        record_run(env, ctx, "execute_command", args, res, t0);
        count_execution(res, ctx, t0);
        return res;
      });

  server.tools().add(
      {"restart_kernel", "Restart interpreter",
       "Restarts the persistent interpreter of a python or javascript sandbox: every variable, "
       "import and function defined by earlier execute_code calls is cleared. Files in "
       "/workspace and installed packages stay. Use it to start over or to recover a wedged "
       "interpreter.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}},
              {"language", {{"type", "string"}}},
              {"restarted", {{"type", "boolean"}}},
              {"note", {{"type", "string"}}}}},
            {"required", {"sandbox_id", "restarted"}}},
       json{{"readOnlyHint", false},
            {"destructiveHint", true},
            {"idempotentHint", true},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto r = service::restart_kernel(env, Caller{owner_of(ctx), {}}, args["sandbox_id"]);
        // A sandbox without a kernel reads as it always has, without a code.
        if (!r.ok() && r.error().code == ErrorCode::kInvalidArgument)
          return ToolResult::error(r.error().message());
        if (!r.ok()) return error_result(r.error());
        return ToolResult::from_structured(std::move(*r));
      });
}

}  // namespace sandcastle::tools

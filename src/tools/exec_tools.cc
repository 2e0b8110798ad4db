// execute_code and execute_command: run a snippet or a shell command in a
// sandbox (or a fresh one-shot sandbox), streaming output as it arrives.
#include <atomic>
#include <cstdio>
#include <set>

#include "tools/languages.h"
#include "tools/tool_env.h"
#include "tools/workspace_diff.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

std::atomic<uint64_t> g_run_counter{0};

json exec_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"stdout", {{"type", "string"}}},
                {"stderr", {{"type", "string"}}},
                {"exit_code", {{"type", "integer"}}},
                {"duration_ms", {{"type", "number"}}},
                {"truncated", {{"type", "boolean"}}},
                {"reason", {{"type", "string"}}},
                {"stage", {{"type", "string"}}},
                {"files_created", {{"type", "array"}}}}},
              {"required", {"stdout", "stderr", "exit_code", "duration_ms", "truncated", "reason"}}};
}

// Runs one exec with the request's cancellation and progress wired in.
Result<sandbox::ExecResult> run(SandboxEntry& entry, sandbox::ExecRequest req, RequestContext& ctx,
                                const std::string& stage) {
  sandbox::CancelToken cancel;
  size_t sub = 0;
  if (ctx.cancel_token()) sub = ctx.cancel_token()->on_cancel([&cancel] { cancel.cancel(); });
  sandbox::ExecCallbacks cb;
  std::atomic<uint64_t> chunks{0};
  const bool stream = ctx.wants_progress() || ctx.log_enabled("info");
  if (stream) {
    auto emit = [&ctx, &chunks, stage](const char* name, std::string_view data) {
      std::string text(data);
      ctx.progress(static_cast<double>(++chunks), std::nullopt, text);
      ctx.log("info", json{{"stream", name}, {"stage", stage}, {"text", text}}, "sandbox");
    };
    cb.on_stdout = [emit](std::string_view d) { emit("stdout", d); };
    cb.on_stderr = [emit](std::string_view d) { emit("stderr", d); };
  }
  auto r = entry.sandbox().exec(req, cb, &cancel);
  if (ctx.cancel_token() && sub) ctx.cancel_token()->unsubscribe(sub);
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

// With the HTTP transport on, each created file gets a download link.
void add_links(const ToolEnv& env, const std::string& sandbox_id, json& files) {
  if (!env.config.file_link) return;
  for (auto& f : files) f["url"] = env.config.file_link(sandbox_id, f["path"].get<std::string>());
}

std::string format_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
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
      out["hint"] = "the sandbox ran out of memory and the process was killed; use less memory "
                    "or create a sandbox with a larger limits.memory_mb";
      break;
    default:
      break;
  }
  ToolResult res = ToolResult::from_structured(out);
  res.is_error = r.reason == sandbox::EndReason::kTimeout || r.reason == sandbox::EndReason::kOutOfMemory;
  return res;
}

std::chrono::milliseconds timeout_of(const json& args, const SandboxEntry& e) {
  if (args.contains("timeout_s"))
    return std::chrono::milliseconds(static_cast<int64_t>(args["timeout_s"].get<double>() * 1000));
  return e.spec().limits().exec_timeout;
}

ToolResult execute_code(ToolEnv& env, const json& args, RequestContext& ctx) {
  std::shared_ptr<SandboxEntry> entry;
  bool one_shot = false;
  if (args.contains("sandbox_id")) {
    auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
    if (!e.ok()) return error_result(e.error());
    entry = *e;
  }
  std::string lang_name = args.contains("language") ? args["language"].get<std::string>()
                          : entry                  ? entry->language()
                                                   : env.config.default_language;
  auto lang = find_language(lang_name);
  if (!lang.ok()) return error_result(lang.error());
  if (!entry) {
    CreateRequest req;
    req.language = (*lang)->name;
    req.owner = owner_of(ctx);
    req.spec.image = env.config.default_image;
    req.spec.limits = env.config.default_limits;
    req.spec.env = env.config.pass_through_env;
    auto e = env.manager.create(req);
    if (!e.ok()) return error_result(e.error());
    entry = *e;
    one_shot = true;
  }
  struct Cleanup {
    ToolEnv& env;
    std::shared_ptr<SandboxEntry> e;
    bool one_shot;
    ~Cleanup() {
      if (one_shot) (void)env.manager.close(e->id(), e->owner());
    }
  } cleanup{env, entry, one_shot};
  EntryUse use(entry);

  const std::string dir = "/tmp/.sandcastle/run-" + std::to_string(++g_run_counter);
  const std::string src = dir + "/" + (*lang)->source_file;
  const std::string bin = dir + "/main";
  if (auto s = use->sandbox().mkdir(dir, true); !s.ok()) return error_result(s.error());
  if (auto s = use->sandbox().write_file(src, args["code"].get<std::string>(), 0644); !s.ok())
    return error_result(s.error());

  auto before = one_shot ? WorkspaceSnapshot{} : snapshot_workspace(use->sandbox(), env.config.max_listed_files);
  const auto timeout = timeout_of(args, *use);
  json out;
  sandbox::ExecRequest req;
  req.env = package_env();
  req.timeout = timeout;
  req.output.max_bytes = env.config.max_output_bytes;
  if (!(*lang)->compile.empty()) {
    req.argv = expand_argv((*lang)->compile, dir, src, bin);
    auto c = run(*use, req, ctx, "compile");
    if (!c.ok()) return error_result(c.error());
    if (c->reason != sandbox::EndReason::kExited || c->status() != 0) {
      out = result_json(*c, "compile");
      out["language"] = (*lang)->name;
      out["sandbox_id"] = use->id();
      ToolResult res = finish(out, *c, timeout);
      res.is_error = true;  // nothing ran: the model must fix the code
      return res;
    }
  }
  req.argv = expand_argv((*lang)->run, dir, src, bin);
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  auto r = run(*use, req, ctx, "run");
  (void)use->sandbox().remove(dir, true);
  if (!r.ok()) return error_result(r.error());
  out = result_json(*r, "run");
  out["language"] = (*lang)->name;
  out["sandbox_id"] = one_shot ? json(nullptr) : json(use->id());
  out["files_created"] = one_shot ? json::array()
                                  : diff_workspace(before, snapshot_workspace(use->sandbox(), env.config.max_listed_files));
  add_links(env, use->id(), out["files_created"]);
  return finish(out, *r, timeout);
}

ToolResult execute_command(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  sandbox::ExecRequest req;
  req.env = package_env();
  req.argv = {"/bin/bash", "-c", args["command"].get<std::string>()};
  if (args.contains("workdir")) req.cwd = args["workdir"].get<std::string>();
  if (args.contains("env"))
    for (const auto& [k, v] : args["env"].items()) req.env[k] = v.get<std::string>();
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  const auto timeout = timeout_of(args, *use);
  req.timeout = timeout;
  req.output.max_bytes = env.config.max_output_bytes;
  auto before = snapshot_workspace(use->sandbox(), env.config.max_listed_files);
  auto r = run(*use, req, ctx, "run");
  if (!r.ok()) return error_result(r.error());
  json out = result_json(*r, "run");
  out["sandbox_id"] = use->id();
  out["files_created"] = diff_workspace(before, snapshot_workspace(use->sandbox(), env.config.max_listed_files));
  add_links(env, use->id(), out["files_created"]);
  return finish(out, *r, timeout);
}

json timeout_schema() {
  return json{{"type", "number"}, {"minimum", 0.1}, {"maximum", 3600},
              {"description", "Seconds before the run is killed (default: the sandbox's, 30)."}};
}

}  // namespace

void register_exec_tools(mcp::Server& server, ToolEnv& env) {
  std::string langs;
  for (const auto& n : available_language_names()) langs += (langs.empty() ? "" : ", ") + n;
  server.tools().add(
      {"execute_code", "Execute code",
       "Runs a code snippet and returns its stdout, stderr, exit code and the files it "
       "created in /workspace. With sandbox_id it runs in that sandbox (files and installed "
       "packages persist); without, it runs in a fresh one-shot sandbox that is destroyed "
       "afterwards. Compiled languages are compiled first; a compile error comes back with "
       "stage \"compile\". The sandbox has no network. Languages: " + langs + ".",
       json{{"type", "object"},
            {"properties",
             {{"code", {{"type", "string"}, {"description", "The source code to run."}}},
              {"language", {{"type", "string"},
                            {"description", "Language (default: the sandbox's, else " +
                                                env.config.default_language + ")."}}},
              {"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name; omit for a one-shot run."}}},
              {"timeout_s", timeout_schema()},
              {"stdin", {{"type", "string"}, {"description", "Bytes fed to the program's standard input."}}}}},
            {"required", {"code"}},
            {"additionalProperties", false}},
       exec_output_schema(),
       json{{"readOnlyHint", false}, {"destructiveHint", false}, {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) { return execute_code(env, args, ctx); });

  server.tools().add(
      {"execute_command", "Execute shell command",
       "Runs a shell command (bash -c) in a sandbox and returns stdout, stderr and the exit "
       "code, e.g. to compile and run a program you wrote with write_file, inspect files, or "
       "run a test suite. The working directory defaults to /workspace.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
              {"command", {{"type", "string"}, {"minLength", 1}, {"description", "The shell command."}}},
              {"workdir", {{"type", "string"}, {"description", "Working directory inside the sandbox."}}},
              {"timeout_s", timeout_schema()},
              {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}},
                       {"description", "Extra environment variables for this command."}}},
              {"stdin", {{"type", "string"}, {"description", "Bytes fed to standard input."}}}}},
            {"required", {"sandbox_id", "command"}},
            {"additionalProperties", false}},
       exec_output_schema(),
       json{{"readOnlyHint", false}, {"destructiveHint", true}, {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) { return execute_command(env, args, ctx); });
}

}  // namespace sandcastle::tools

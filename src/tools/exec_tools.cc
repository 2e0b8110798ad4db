// execute_code, execute_command and restart_kernel: the MCP face of runs
// (service/runs.h). The service runs the code; here its callbacks become
// the notifications a client sees while it runs (progress, log lines with
// stream / stage / queued) and its RunResult the tool result: a text mirror,
// images as image content, created files as resource links.
#include <mutex>

#include "mcp/pagination.h"
#include "service/runs.h"
#include "tools/adapter.h"
#include "tools/resource_methods.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

// Live output: each chunk as notifications/progress (with a progressToken)
// and as a notifications/message log line (when logging is on), in order;
// a one-shot's place in line too. Progress rises across all of them.
struct Notifier {
  RequestContext& ctx;
  std::size_t max_sandboxes;
  std::string stage = "run";
  std::uint64_t sent = 0;

  service::RunOptions options() {
    service::RunOptions opts;
    opts.cancel = ctx.cancel_token();
    opts.callbacks.on_queued = [this](std::size_t pos, std::size_t waiting) {
      const std::string text = "queued: place " + std::to_string(pos) + " of " +
                               std::to_string(waiting) +
                               " waiting for a sandbox (the server runs its maximum of " +
                               std::to_string(max_sandboxes) + ")";
      ctx.progress(static_cast<double>(++sent), std::nullopt, text);
      ctx.log("info",
              json{{"stage", "queued"}, {"position", pos}, {"waiting", waiting}, {"text", text}},
              "sandbox");
    };
    if (!ctx.wants_progress() && !ctx.log_enabled("info")) return opts;
    opts.callbacks.on_stage = [this](std::string_view s) { stage = s; };
    opts.callbacks.on_output = [this](std::string_view stream, std::string_view data) {
      std::string text(data);
      ctx.progress(static_cast<double>(++sent), std::nullopt, text);
      ctx.log("info", json{{"stream", stream}, {"stage", stage}, {"text", text}}, "sandbox");
    };
    return opts;
  }
};

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

void add_images(ToolResult& res, const service::MimeBundle& b) {
  for (const auto& img : b.images)
    res.content.push_back({{"type", "image"}, {"data", img.base64}, {"mimeType", img.mime_type}});
}

// The run as the tool returns it: the structured result (images pointing to
// their content blocks), its text mirror first, then the images, the
// created files' links, and a word on lost state. A timeout, an OOM kill, a
// kernel's death or a failed compile is an error the model must act on.
ToolResult tool_result(const service::RunResult& r, const RequestContext& ctx) {
  ToolResult res;
  json out = service::run_result_json(r, service::ImageForm::kContentIndex, 1);
  // state_lost is said in a text block of its own, below. Taken out and put
  // back rather than mirroring a copy: the output may be megabytes.
  const bool lost = out.erase("state_lost") > 0;
  res.content.push_back({{"type", "text"}, {"text", text_mirror(out)}});
  if (lost) out["state_lost"] = true;
  if (r.result) add_images(res, *r.result);
  for (const auto& d : r.displays) add_images(res, d);
  if (out.contains("files_created")) add_resource_links(res, out["files_created"], ctx);
  if (r.state_lost)
    res.content.push_back(
        {{"type", "text"},
         {"text",
          "state_lost: this sandbox's processes were started again (a server restart, or a "
          "resume without a memory checkpoint): its files and installed packages are kept, "
          "but variables, imports and background processes from before are gone."}});
  res.structured = std::move(out);
  res.is_error = r.failed;
  return res;
}

template <class Run>
ToolResult run_tool(ToolEnv& env, RequestContext& ctx, Run&& run) {
  Notifier notifier{ctx, env.manager.options().max_sandboxes};
  auto r = run(Caller{owner_of(ctx), {}}, notifier.options());
  if (!r.ok()) return error_result(r.error());
  return tool_result(*r, ctx);
}

}  // namespace

void register_exec_tools(mcp::Server& server, ToolEnv& env) {
  std::string langs;
  for (const auto& n : available_language_names()) langs += (langs.empty() ? "" : ", ") + n;
  mcp::ToolDefinition code_def{
      "execute_code",
      "Execute code",
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
      service::run_code_input_schema(env.config),
      service::run_output_schema(),
      hints(false, false, false),
      nullptr};
  if (!env.config.run_result_view_html.empty())
    code_def.meta = json{{"ui", {{"resourceUri", kRunResultViewUri}}}};
  server.tools().add(std::move(code_def), [&env](const json& args, RequestContext& ctx) {
    return run_tool(env, ctx, [&](const Caller& c, const service::RunOptions& opts) {
      return service::run_code(env, c, args, opts);
    });
  });

  server.tools().add(
      {"execute_command", "Execute shell command",
       "Runs a shell command (bash -c) in a sandbox and returns stdout, stderr and the exit "
       "code, e.g. to compile and run a program you wrote with write_file, inspect files, or "
       "run a test suite. The working directory defaults to /workspace.",
       service::run_command_input_schema(), service::run_output_schema(), hints(false, true, false),
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        return run_tool(env, ctx, [&](const Caller& c, const service::RunOptions& opts) {
          return service::run_command(env, c, args, opts);
        });
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
       hints(false, true, true), nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto r = service::restart_kernel(env, Caller{owner_of(ctx), {}}, args["sandbox_id"]);
        // A sandbox without a kernel reads as it always has, without a code.
        if (!r.ok() && r.error().code == ErrorCode::kInvalidArgument)
          return ToolResult::error(r.error().message());
        return tool_result_of(std::move(r));
      });
}

}  // namespace sandcastle::tools

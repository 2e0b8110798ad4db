// Drop-in profile seed-c: the face of code-sandbox-mcp (../shared/seeds/003,
// llm-sandbox on podman). Each call runs its code in a fresh one-shot
// sandbox; output comes back as text, failures as the JSON of llm-sandbox's
// ExecutionResult; the resource sandbox://environments describes the
// languages.
#pragma once

#include <string>

#include "mcp/server.h"
#include "service/runs.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

namespace seed_c {

// run_python_code, run_js_code (the seed's README) and run_javascript_code
// (its code), and the resource sandbox://environments.
void register_tools(mcp::Server& server, ToolEnv& env);
std::string instructions();

inline constexpr const char* kEnvironmentsUri = "sandbox://environments";

// A run as the seed returns it: stdout, whitespace trimmed, when the code
// succeeded and printed something; else the JSON (indented by 2, as
// Python's json.dumps) of {exit_code, stderr, stdout}, with the real exit
// code, and stderr saying what happened (a timeout, no output: "No output,
// forgot print()?" / "forgot console.logs?").
std::string result_text(const service::RunResult& r, const std::string& language);
// The seed's failure JSON: {exit_code, stderr, stdout}, indented by 2.
std::string failure_json(int exit_code, const std::string& stderr_text,
                         const std::string& stdout_text);
// Whether result_text is the seed's failure JSON (nonzero exit, timeout).
bool failed(const service::RunResult& r);

// sandbox://environments: {python: {image, installed_libraries}, javascript:
// {...}} for the images this server runs them on.
mcp::json environments(const service::Config& config);

}  // namespace seed_c
}  // namespace sandcastle::tools

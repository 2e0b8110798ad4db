// The run history: record_run appends every execute_code / execute_command
// call to the sandbox store (capped, bounded by --history-max-mb), and
// sandbox_history reads a sandbox's runs back, newest first, a page at a
// time. Only the caller's own sandboxes: another owner's is "not found", as
// everywhere else. The MCP tool get_sandbox_history, the REST API's history
// route and the console all read it here.
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

using json = nlohmann::json;

inline constexpr std::size_t kDefaultHistoryLimit = 20;
inline constexpr std::size_t kMaxHistoryLimit = 200;

// get_sandbox_history's arguments: {sandbox_id, limit?, before?}.
json history_input_schema();
// Its result: {sandbox_id, entries: [...], count, next_before?}.
json history_output_schema();

// A page of the caller's runs in one sandbox (by id or name; live, paused,
// stopped, or ended while its history is kept), newest first. Arguments as
// history_input_schema (checked here); kNotFound as for any other sandbox
// that is not the caller's.
Result<json> sandbox_history(Env& env, const Caller& c, const json& args);

// How one execute_code / execute_command call ended.
struct RunOutcome {
  const json* result = nullptr;  // its structured result; null: it failed before having one
  std::string error_text;        // then: why
  std::size_t images = 0;        // images it returned
};

// Appends that call to the run history: what ran, its capped output and how
// it ended. Calls that ran nothing (unknown sandbox, bad arguments) are not
// recorded; a failed write loses this entry only.
void record_run(Env& env, const std::string& owner, const char* tool, const json& args,
                const RunOutcome& res, std::chrono::steady_clock::time_point started);

}  // namespace sandcastle::service

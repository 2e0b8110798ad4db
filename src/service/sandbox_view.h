// How a sandbox is shown to a caller (list_sandboxes, get_sandbox_status,
// the REST API's sandbox objects, the console's live list): one JSON shape
// for every face.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "service/env.h"

namespace sandcastle::service {

using json = nlohmann::json;

// UTC, second precision ("2026-11-26T17:37:31Z").
std::string iso_time(std::chrono::system_clock::time_point t);
// A running (or paused in memory) sandbox.
json sandbox_json(const SandboxEntry& e);
// A persistent sandbox that is not running (paused to disk or stopped).
json dormant_json(const store::SandboxRecord& r, const store::SandboxStore& store);
// The caller's sandbox as list_sandboxes shows it, live or dormant, without
// starting a stopped one; nullopt when `owner` has none by that id or name.
std::optional<json> find_listing(Env& env, const std::string& id_or_name, const std::string& owner);

}  // namespace sandcastle::service

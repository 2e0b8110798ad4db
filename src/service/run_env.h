// What every run in a sandbox gets: its environment (installed packages on
// the paths, matplotlib headless), and the python/javascript kernel a
// sandbox keeps for execute_code (attached to its entry, started once).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"
#include "service/kernel.h"
#include "service/sandbox_manager.h"

namespace sandcastle::service {

const std::map<std::string, std::string>& run_env();
// The sandbox's kernel for `lang`, made (not started) on first use.
std::shared_ptr<Kernel> kernel_of(SandboxEntry& e, KernelLanguage lang);
// Starts a python/javascript sandbox's kernel in the background (no-op for
// other languages), so the first execute_code finds it warm.
void start_kernel_async(const std::shared_ptr<SandboxEntry>& entry);

// restart_kernel: a fresh kernel for the caller's python/javascript sandbox
// (variables gone; files and packages stay): {sandbox_id, language,
// restarted, note}. kInvalidArgument for a language without a kernel.
Result<nlohmann::json> restart_kernel(Env& env, const Caller& c, const std::string& id_or_name);

}  // namespace sandcastle::service

// What every run in a sandbox gets: its environment (installed packages on
// the paths, matplotlib headless), and the python/javascript kernel a
// sandbox keeps for execute_code (attached to its entry, started once).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "service/kernel.h"
#include "service/sandbox_manager.h"

namespace sandcastle::service {

const std::map<std::string, std::string>& run_env();
// The sandbox's kernel for `lang`, made (not started) on first use.
std::shared_ptr<Kernel> kernel_of(SandboxEntry& e, KernelLanguage lang);
// Starts a python/javascript sandbox's kernel in the background (no-op for
// other languages), so the first execute_code finds it warm.
void start_kernel_async(const std::shared_ptr<SandboxEntry>& entry);

}  // namespace sandcastle::service

// Where a kernel's driver comes from inside its sandbox. The drivers are
// published once per server into the directory every sandbox sees read-only
// (sandbox::kSharedDir): one copy in the page cache for all of them, nothing
// written into each sandbox, nothing a sandbox can change. Python's driver
// also goes there compiled (.pyc), so a kernel never runs the compiler at
// start-up and never keeps the compiler's garbage (about 1 MiB of dirty
// pages per idle kernel).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sandbox/sandbox.h"
#include "service/kernel.h"

namespace sandcastle::service {

// The sandbox path to run the driver from (the .pyc for Python when one
// could be made), publishing the files first if this server has not yet.
// A backend without a shared directory gets a private copy under kKernelDir.
Result<std::string> place_kernel_driver(sandbox::Sandbox& sb, KernelLanguage lang);

// Python's driver compiled to a .pyc by the host's /usr/bin/python3 (the
// interpreter the host image runs), its code named after its shared path;
// made once per process. nullopt when that interpreter is missing or fails. The compiling
// interpreter runs isolated (-I -S) and never runs the driver, and nothing
// inside a sandbox takes part: a sandbox must not be able to change what
// another sandbox's kernel runs.
const std::optional<std::string>& python_driver_pyc();

// Runs `argv` on the host (stdin and stderr /dev/null, a minimal env) and
// returns its stdout when it exits 0 within `timeout_ms`.
Result<std::string> run_host_command(const std::vector<std::string>& argv, int timeout_ms);

}  // namespace sandcastle::service

// The in-sandbox side of the file channel (see file_wire.h for the rule and
// the format): a process forked by the sandbox's init that serves one
// server connection, one request at a time, as the sandbox user.
#pragma once

#include <cstdint>

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// What the server sends with ControlKind::kFiles: the limits the worker runs
// under, the same a command gets (a write cannot make a file larger than a
// sandbox program could).
struct FilesWire {
  std::uint64_t rlimit_fsize = 0;  // 0 = unlimited
};
std::string encode(const FilesWire& f);
std::optional<FilesWire> decode_files(std::string_view bytes);

// In a process forked by init: the context a sandbox command runs in, minus
// exec (signals reset, no core, fsize limit, no capabilities, no_new_privs,
// the sandbox's seccomp filter, cwd /); `name` is the process name.
bool enter_sandbox_context(const InitConfig& config, const FilesWire& limits, const char* name);

// Drops to the sandbox user's context (no capabilities, no_new_privs,
// seccomp), then serves `sock` until EOF or kSlotIdle without a request.
[[noreturn]] void run_file_worker(int sock, const InitConfig& config, const FilesWire& limits);

}  // namespace sandcastle::sandbox::native

// SandboxSpec: the one validated, immutable description of a sandbox. Every
// default lives in SpecOptions below, so "what does a sandbox get unless told
// otherwise" has exactly one answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/rules.h"

namespace sandcastle::sandbox {

// kNone: own network namespace with only loopback up. kAllowList and kFull
// (net/rules.h) are described there; no backend runs them yet.
using NetworkMode = net::Mode;

enum class Persistence {
  kEphemeral,  // everything is gone after destroy()
  kPersistent, // files on disk, kept across restarts (SpecOptions::storage_id)
};

// "none", "allowlist", "full" (net::mode_name).
const char* network_mode_name(NetworkMode mode);
const char* persistence_name(Persistence p);

constexpr std::uint64_t kMiB = 1024ull * 1024ull;

struct Limits {
  std::uint64_t memory_bytes = 512 * kMiB;
  std::uint32_t pids = 256;
  // CPU quota in thousandths of a CPU (1000 = one full core); 0 = unlimited.
  std::uint32_t cpu_millis = 1000;
  // Size of the writable /workspace; writes past it get ENOSPC inside.
  std::uint64_t disk_bytes = 256 * kMiB;
  // Size of the scratch /tmp and /dev/shm, together (one filesystem).
  std::uint64_t tmp_bytes = 64 * kMiB;
  std::uint32_t open_files = 1024;
  std::uint64_t file_size_bytes = 256 * kMiB;
  // Default wall-clock timeout of one exec; an ExecRequest may set its own.
  std::chrono::milliseconds exec_timeout{30'000};
};

// Caller-supplied fields; anything left alone keeps the default written here.
struct SpecOptions {
  std::string image = "host";
  Limits limits{};
  std::map<std::string, std::string> env{};
  std::string workdir = "/workspace";
  std::string hostname = "sandbox";
  NetworkMode network = NetworkMode::kNone;
  // Rules in net/rules.h's syntax, at most net::kMaxRules each; checked
  // here, applied by the backend that runs the mode.
  std::vector<std::string> network_allow{};
  std::vector<std::string> network_deny{};
  Persistence persistence = Persistence::kEphemeral;
  // With kPersistent: the name of the sandbox's storage in the backend (the
  // server uses the sandbox id): [a-z0-9-], 1..64 characters. Empty otherwise.
  std::string storage_id{};
};

class SandboxSpec {
 public:
  // The only way to obtain a spec: checks ranges, paths and names.
  static Result<SandboxSpec> create(SpecOptions options);
  static SandboxSpec defaults();

  const std::string& image() const { return o_.image; }
  const Limits& limits() const { return o_.limits; }
  const std::map<std::string, std::string>& env() const { return o_.env; }
  const std::string& workdir() const { return o_.workdir; }
  const std::string& hostname() const { return o_.hostname; }
  NetworkMode network() const { return o_.network; }
  const std::vector<std::string>& network_allow() const { return o_.network_allow; }
  const std::vector<std::string>& network_deny() const { return o_.network_deny; }
  Persistence persistence() const { return o_.persistence; }
  const std::string& storage_id() const { return o_.storage_id; }
  const SpecOptions& options() const { return o_; }

 private:
  explicit SandboxSpec(SpecOptions o) : o_(std::move(o)) {}
  SpecOptions o_;
};

// Environment every command starts from (a clean one: nothing leaks from the
// server); spec and request env are layered on top.
std::map<std::string, std::string> base_environment();

// True for a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*).
bool valid_env_name(const std::string& name);

}  // namespace sandcastle::sandbox

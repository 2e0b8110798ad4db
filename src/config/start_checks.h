// Settings that users of other code-sandbox MCP servers bring along (the
// E2B interpreter type, container images, their flags) which sandcastle
// cannot honour yet. They refuse the start with a message saying what to do,
// instead of a server that starts and then fails at the first call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/config.h"

namespace sandcastle::config {

struct StartInputs {
  // Where sandbox.backend came from, as the user wrote it: "INTERPRETER_TYPE",
  // "--backend", "SANDCASTLE_SANDBOX_BACKEND", "the config file" or "" (default).
  std::string backend_origin;
  // The environment variables read here (INTERPRETER_TYPE, CONTAINER_IMAGE,
  // E2B_API_KEY); absent or empty means unset.
  std::map<std::string, std::string> env;
  // Flags of other servers accepted only to be refused clearly ("--python-image" → value).
  std::map<std::string, std::string> foreign_flags;
};

struct StartCheck {
  std::vector<std::string> errors;    // each one refuses the start
  std::vector<std::string> warnings;  // logged; the server starts
};

StartCheck check_start_settings(const Config& cfg, const StartInputs& in);

// The backends this build has.
inline constexpr const char* kBackends[] = {"native"};

}  // namespace sandcastle::config

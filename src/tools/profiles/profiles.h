// Drop-in profiles: the tool set one server exposes. `sandcastle` is this
// server's own tools; each `seed-*` profile is the face of one of the
// reference servers (../shared/seeds): exactly its tool names, argument
// names and result shapes, as thin adapters over sandcastle's service layer,
// so that a user swaps the server in a client's configuration and their
// prompts keep working.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mcp/server.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

enum class Profile : std::uint8_t {
  kSandcastle,
  kSeedA,
  kSeedB,
  kSeedC,
  kSeedD,
};

std::optional<Profile> parse_profile(std::string_view name);

// Registers the profile's tools, resources and prompts on `server`.
void register_profile_tools(mcp::Server& server, ToolEnv& env, Profile profile);

// The server's instructions under the profile.
std::string profile_instructions(Profile profile, const std::string& own);

}  // namespace sandcastle::tools

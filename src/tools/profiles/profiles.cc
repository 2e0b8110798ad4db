#include "tools/profiles/profiles.h"

namespace sandcastle::tools {

std::optional<Profile> parse_profile(std::string_view name) {
  if (name == "sandcastle") return Profile::kSandcastle;
  return std::nullopt;
}

void register_profile_tools(mcp::Server& server, ToolEnv& env, Profile profile) {
  switch (profile) {
    case Profile::kSandcastle: register_sandbox_tools(server, env); return;
  }
}

std::string profile_instructions(Profile profile, const std::string& own) {
  switch (profile) {
    case Profile::kSandcastle: return own;
  }
  return own;
}

}  // namespace sandcastle::tools

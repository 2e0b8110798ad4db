#include "tools/profiles/profiles.h"

#include "tools/profiles/seed_a.h"
#include "tools/profiles/seed_c.h"

namespace sandcastle::tools {

std::optional<Profile> parse_profile(std::string_view name) {
  if (name == "sandcastle") return Profile::kSandcastle;
  if (name == "seed-a") return Profile::kSeedA;
  if (name == "seed-c") return Profile::kSeedC;
  return std::nullopt;
}

void register_profile_tools(mcp::Server& server, ToolEnv& env, Profile profile) {
  switch (profile) {
    case Profile::kSandcastle: register_sandbox_tools(server, env); return;
    case Profile::kSeedA: seed_a::register_tools(server, env); return;
    case Profile::kSeedC: seed_c::register_tools(server, env); return;
  }
}

std::string profile_instructions(Profile profile, const std::string& own) {
  switch (profile) {
    case Profile::kSandcastle: return own;
    case Profile::kSeedA: return seed_a::instructions();
    case Profile::kSeedC: return seed_c::instructions();
  }
  return own;
}

}  // namespace sandcastle::tools

#include "tools/profiles/profiles.h"

#include "tools/profiles/seed_a.h"
#include "tools/profiles/seed_b.h"
#include "tools/profiles/seed_c.h"
#include "tools/profiles/seed_d.h"

namespace sandcastle::tools {

std::optional<Profile> parse_profile(std::string_view name) {
  if (name == "sandcastle") return Profile::kSandcastle;
  if (name == "seed-a") return Profile::kSeedA;
  if (name == "seed-b") return Profile::kSeedB;
  if (name == "seed-c") return Profile::kSeedC;
  if (name == "seed-d") return Profile::kSeedD;
  return std::nullopt;
}

void register_profile_tools(mcp::Server& server, ToolEnv& env, Profile profile) {
  switch (profile) {
    case Profile::kSandcastle: register_sandbox_tools(server, env); return;
    case Profile::kSeedA: seed_a::register_tools(server, env); return;
    case Profile::kSeedB: seed_b::register_tools(server, env); return;
    case Profile::kSeedC: seed_c::register_tools(server, env); return;
    case Profile::kSeedD: seed_d::register_tools(server, env); return;
  }
}

std::string profile_instructions(Profile profile, const std::string& own) {
  switch (profile) {
    case Profile::kSandcastle: return own;
    case Profile::kSeedA: return seed_a::instructions();
    case Profile::kSeedB: return seed_b::instructions();
    case Profile::kSeedC: return seed_c::instructions();
    case Profile::kSeedD: return seed_d::instructions();
  }
  return own;
}

}  // namespace sandcastle::tools

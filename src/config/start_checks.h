// Settings that users of other code-sandbox MCP servers bring along (the
// E2B interpreter type, container images, their flags) which sandcastle
// cannot honour yet. They refuse the start with a message saying what to do,
// instead of a server that starts and then fails at the first call.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "config/config.h"

namespace sandcastle::config {

struct StartInputs {
  // Where sandbox.backend came from, as the user wrote it: "INTERPRETER_TYPE",
  // "--backend", "SANDCASTLE_SANDBOX_BACKEND", "the config file" or "" (default).
  std::string backend_origin;
  // The environment variables read here (INTERPRETER_TYPE, CONTAINER_IMAGE,
  // E2B_API_KEY); absent or empty means unset.
  std::map<std::string, std::string> env;
  // Image flags of other servers ("--python-image" → value, "--js-image" →
  // value): accepted when the image store has the image with that language.
  std::map<std::string, std::string> foreign_flags;
  // The languages of an image in the store (kNotFound when it has none by
  // that name); empty when the server has no image store, with why.
  std::function<Result<std::vector<std::string>>(const std::string& image)> image_languages;
  std::string no_store_reason;
  // cfg.default_language by its canonical name ("py" → "python").
  std::string default_language;
};

struct StartCheck {
  std::vector<std::string> errors;    // each one refuses the start
  std::vector<std::string> warnings;  // logged; the server starts
};

StartCheck check_start_settings(const Config& cfg, const StartInputs& in);

// The backends this build has.
inline constexpr const char* kBackends[] = {"native", "engine"};

}  // namespace sandcastle::config

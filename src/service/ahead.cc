#include "service/ahead.h"

#include <algorithm>

#include "service/kernel_sources.h"
#include "service/run_env.h"

namespace sandcastle::service {
namespace {

// The run step, if it is `... {src}` with nothing else to expand.
std::optional<std::vector<std::string>> run_prefix(const Language& lang) {
  if (!lang.compile.empty() || lang.run.size() < 2 || lang.run.back() != "{src}")
    return std::nullopt;
  std::vector<std::string> prefix(lang.run.begin(), lang.run.end() - 1);
  if (std::any_of(prefix.begin(), prefix.end(),
                  [](const std::string& a) { return a.find('{') != std::string::npos; }))
    return std::nullopt;
  return prefix;
}

}  // namespace

std::optional<sandbox::AheadCommand> ahead_command_for(const Language& lang) {
  if (lang.name != "python") return std::nullopt;
  auto prefix = run_prefix(lang);
  if (!prefix) return std::nullopt;
  sandbox::AheadCommand c;
  c.base.argv = std::move(*prefix);
  // What in_process gives a one-shot's run, so the exec matches.
  for (const auto& [k, v] : run_env()) c.base.env[k] = v;
  c.loader = {"-c", std::string(python_ahead_source())};
  return c;
}

void follow_one_shot(const Config& config, sandbox::Backend& backend, const Language& lang) {
  if (!config.start_ahead) return;
  backend.set_ahead_command(ahead_command_for(lang));  // (a backend keeps it if unchanged)
}

}  // namespace sandcastle::service

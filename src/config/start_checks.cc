#include "config/start_checks.h"

namespace sandcastle::config {

namespace {

std::string get(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? std::string() : it->second;
}

constexpr const char* kNoImages =
    "sandcastle cannot run container images yet: every sandbox sees the host's own /usr read-only "
    "(image "
    "\"host\"), so what the code needs must be installed on the host, or in a sandbox with "
    "install_packages";

}  // namespace

StartCheck check_start_settings(const Config& cfg, const StartInputs& in) {
  StartCheck out;
  bool known = false;
  for (const char* b : kBackends) known = known || cfg.backend == b;
  if (!known) {
    std::string said = in.backend_origin.empty() || in.backend_origin == "the config file"
                           ? "sandbox.backend = \"" + cfg.backend + "\" in the config file"
                       : in.backend_origin == "--backend" ? "--backend " + cfg.backend
                                                          : in.backend_origin + "=" + cfg.backend;
    std::string unset = in.backend_origin.empty() || in.backend_origin == "the config file"
                            ? "remove it"
                        : in.backend_origin == "--backend" ? "drop the flag"
                                                           : "unset " + in.backend_origin;
    std::string msg =
        said +
        ": sandcastle runs code in its own native Linux sandboxes (namespaces, seccomp, "
        "cgroups) and has no '" +
        cfg.backend + "' backend, so it cannot honour this setting. " + "To start, " + unset +
        " (or set it to native)";
    if (cfg.backend == "e2b" || cfg.backend == "E2B")
      msg += "; no E2B account or E2B_API_KEY is needed";
    out.errors.push_back(msg);
  }
  if (auto image = get(in.env, "CONTAINER_IMAGE"); !image.empty() && image != "host")
    out.errors.push_back("CONTAINER_IMAGE=" + image + ": " + kNoImages +
                         ". To start, unset CONTAINER_IMAGE " +
                         "(CONTAINER_LANGUAGE alone still picks the default language)");
  for (const auto& [flag, value] : in.foreign_flags)
    out.errors.push_back(flag + " " + value + ": " + kNoImages + ". To start, drop " + flag);
  if (!get(in.env, "E2B_API_KEY").empty() && known)
    out.warnings.push_back(
        "E2B_API_KEY is set, but sandcastle does not use E2B: the key is ignored and never "
        "enters a sandbox");
  return out;
}

}  // namespace sandcastle::config

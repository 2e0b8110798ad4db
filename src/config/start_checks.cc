#include "config/start_checks.h"

#include "net/rules.h"
#include "net/user_net.h"

namespace sandcastle::config {

namespace {

std::string get(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? std::string() : it->second;
}

// An image a setting names must exist and have the setting's language: the
// server refuses to start rather than fail at the first call (and never
// retries a warm pool for it).
void check_image(StartCheck& out, const StartInputs& in, const std::string& setting,
                 const std::string& image, const std::string& language, const std::string& undo) {
  if (!in.image_languages) {
    out.errors.push_back(setting + ": this server has no image store (" + in.no_store_reason +
                         "), so only image \"host\" (the host's own /usr, read-only) is available. "
                         "To start, " + undo);
    return;
  }
  auto langs = in.image_languages(image);
  if (!langs) {
    out.errors.push_back(setting + ": " + langs.error().message() +
                         ". Import, pull or build it first (`sandcastle image import|pull|build`; "
                         "`sandcastle image list` shows the store), or " + undo);
    return;
  }
  for (const auto& l : *langs)
    if (l == language) return;
  std::string has;
  for (const auto& l : *langs) has += (has.empty() ? "" : ", ") + l;
  out.errors.push_back(setting + ": image '" + image + "' has no interpreter for " + language +
                       " (its languages: " + (has.empty() ? "none found" : has) +
                       "). Pick an image with " + language + ", or " + undo);
}

// [network]: every mode and rule parses, and the default mode is offered;
// "full" only where this host can run it (pasta or slirp4netns, /dev/net/tun,
// nft), so that a missing package shows at start rather than at a create.
void check_network(StartCheck& out, const Config& cfg) {
  bool default_offered = false;
  for (const auto& name : cfg.network_modes) {
    auto m = net::parse_mode(name);
    if (!m) {
      out.errors.push_back("network.modes: unknown mode '" + name + "' (none, allowlist, full)");
    } else if (*m == net::Mode::kFull) {
      if (auto s = net::full_mode_available(); !s)
        out.errors.push_back("network.modes: mode \"full\" cannot run here: " +
                             s.error().message() + "; drop it from network.modes, or fix the host");
    }
    default_offered = default_offered || name == cfg.network_default_mode;
  }
  if (!net::parse_mode(cfg.network_default_mode))
    out.errors.push_back("network.default_mode: unknown mode '" + cfg.network_default_mode +
                         "' (none, allowlist, full)");
  else if (!default_offered)
    out.errors.push_back("network.default_mode \"" + cfg.network_default_mode +
                         "\" is not in network.modes");
  if (auto r = net::parse_rules(cfg.network_allow, net::ListKind::kAllow); !r)
    out.errors.push_back(r.error().message());
  if (auto r = net::parse_rules(cfg.network_deny, net::ListKind::kDeny); !r)
    out.errors.push_back(r.error().message());
  for (const auto& p : cfg.network_private_allow)
    if (auto c = net::Cidr::parse(p); !c)
      out.errors.push_back("network.private_allow \"" + p + "\": " + c.error().message());
}

// server.profile names a tool set this build has.
void check_profile(StartCheck& out, const Config& cfg) {
  std::string names;
  for (const char* p : kProfiles) {
    if (cfg.profile == p) return;
    names += (names.empty() ? "" : ", ") + std::string(p);
  }
  out.errors.push_back("server.profile: unknown profile '" + cfg.profile + "' (" + names + ")");
}

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
        "cgroups) or on a Docker/Podman engine (engine), and has no '" +
        cfg.backend + "' backend, so it cannot honour this setting. " + "To start, " + unset +
        " (or set it to native or engine)";
    if (cfg.backend == "e2b" || cfg.backend == "E2B")
      msg += "; no E2B account or E2B_API_KEY is needed";
    out.errors.push_back(msg);
  }
  const std::string lang = in.default_language.empty() ? cfg.default_language : in.default_language;
  // On an engine, images are the engine's: a create names one it lacks with
  // where to get it (sandcastle's store is not asked).
  const bool store_images = cfg.backend != "engine";
  if (auto image = get(in.env, "CONTAINER_IMAGE"); store_images && !image.empty() && image != "host")
    check_image(out, in, "CONTAINER_IMAGE=" + image, image, lang,
                "unset CONTAINER_IMAGE (CONTAINER_LANGUAGE alone still picks the default language)");
  for (const auto& [flag, value] : in.foreign_flags) {
    if (!store_images || value.empty() || value == "host") continue;
    check_image(out, in, flag + " " + value, value, flag == "--js-image" ? "javascript" : "python",
                "drop " + flag);
  }
  check_network(out, cfg);
  check_profile(out, cfg);
  if (!get(in.env, "E2B_API_KEY").empty() && known)
    out.warnings.push_back(
        "E2B_API_KEY is set, but sandcastle does not use E2B: the key is ignored and never "
        "enters a sandbox");
  return out;
}

}  // namespace sandcastle::config

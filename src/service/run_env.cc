#include "service/run_env.h"

#include <unistd.h>

namespace sandcastle::service {

// The environment of every run: installed packages on the paths, and
// matplotlib headless (Agg) with its config where Debian keeps it (the
// sandbox's /etc has no matplotlibrc).
const std::map<std::string, std::string>& run_env() {
  static const std::map<std::string, std::string> kEnv = [] {
    auto env = package_env();
    env["MPLBACKEND"] = "Agg";
    env["MPLCONFIGDIR"] = "/tmp/.sandcastle/mpl";
    env["XDG_CACHE_HOME"] =
        "/tmp/.sandcastle/cache";  // fontconfig's cache is not the program's output
    if (::access("/usr/share/matplotlib/mpl-data/matplotlibrc", R_OK) == 0)
      env["MATPLOTLIBRC"] = "/usr/share/matplotlib/mpl-data/matplotlibrc";
    return env;
  }();
  return kEnv;
}

std::shared_ptr<Kernel> kernel_of(SandboxEntry& e, KernelLanguage lang) {
  return std::static_pointer_cast<Kernel>(
      e.attachment([&e, lang] { return std::make_shared<Kernel>(e.sandbox(), lang, run_env()); }));
}

void start_kernel_async(const std::shared_ptr<SandboxEntry>& entry) {
  if (auto lang = kernel_language_for(entry->language())) kernel_of(*entry, *lang)->start_async();
}

Result<nlohmann::json> restart_kernel(Env& env, const Caller& c, const std::string& id_or_name) {
  auto e = env.manager.get(id_or_name, c.owner);
  if (!e.ok()) return e.error();
  EntryUse use(*e);
  auto lang = kernel_language_for(use->language());
  if (!lang)
    return Error::make(ErrorCode::kInvalidArgument,
                       "sandbox " + use->id() + " runs " + use->language() +
                           ", which has no kernel: every execute_code there already starts "
                           "fresh. Kernels exist for python and javascript sandboxes.");
  kernel_of(*use, *lang)->restart();
  return nlohmann::json{{"sandbox_id", use->id()},
                        {"language", use->language()},
                        {"restarted", true},
                        {"note",
                         "a fresh kernel is starting: earlier variables, imports and functions "
                         "are gone; files in /workspace and installed packages remain"}};
}

}  // namespace sandcastle::service

// `sandcastle image pull REF`: the command's options and what it does
// (pull into a temporary OCI layout under the state dir, then import it).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "images/image_store.h"

namespace CLI {
class App;
}

namespace sandcastle::images {

struct PullArgs {
  std::string reference;
  std::string name;  // --name; default: the normalised reference
  std::string platform = "linux/amd64";
  std::vector<std::string> insecure_registries;  // --insecure-registry HOST[:PORT], repeatable
  std::string ca_file;                           // --ca-file PEM
  std::string username;                          // --username, or SANDCASTLE_REGISTRY_USERNAME
  bool password_stdin = false;  // --password-stdin; else SANDCASTLE_REGISTRY_PASSWORD
  bool json = false;            // --json
  // From the configuration (set by the caller after parsing, not options of `pull`):
  std::string state_dir;
  std::uint64_t max_image_bytes = StoreLimits{}.max_image_bytes;  // also bounds the download
};

// Adds `pull` under `image` with its options bound to `args`; returns it (test ->parsed()).
CLI::App* add_image_pull_command(CLI::App& image, PullArgs& args);

// Opens the store at args.state_dir and pulls; the exit code (0, 1 on failure, 2 on usage).
int run_image_pull(const PullArgs& args);

// The same with the store, the password input and the outputs given.
int run_image_pull(const PullArgs& args, ImageStore& store, std::istream& in, std::ostream& out,
                   std::ostream& err);

}  // namespace sandcastle::images

// `sandcastle image import|list|inspect|rm|build`: the image store from the
// command line. register_image_cli() adds the subcommands before parsing;
// run() executes the one given, once the configuration (state dir, limits)
// is known.
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <memory>
#include <string>

#include "images/image_store.h"

namespace sandcastle::images {

class ImageCli {
 public:
  virtual ~ImageCli() = default;
  virtual bool parsed() const = 0;
  // The process's exit code: 0, 1 on an error (printed to `err`), 2 on bad usage.
  virtual int run(const std::string& state_dir, const StoreLimits& limits, std::ostream& out,
                  std::ostream& err) = 0;
};

std::unique_ptr<ImageCli> register_image_cli(CLI::App& app);

// The mmdebstrap command line `image build` runs (exposed for its tests).
std::vector<std::string> mmdebstrap_argv(const std::string& suite, const std::string& packages,
                                         const std::string& mirror, const std::string& out_tar,
                                         bool as_root);

}  // namespace sandcastle::images

// Which sandbox backend a server runs on, built from its configuration:
// the native one, one engine, or several engines; a backend that cannot
// start is a RefusingBackend that says why at every create.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

// `default_spec` is the spec most creates ask for (the warm pool's);
// `images` and `storage_dir` are the native backend's image store and
// persistent storage.
std::unique_ptr<sandbox::Backend> make_backend(const config::Config& cfg, bool allow_weak,
                                               const sandbox::SpecOptions& default_spec,
                                               const sandbox::native::PoolPolicy& pool,
                                               sandbox::native::ImageResolver images,
                                               const std::string& storage_dir);

}  // namespace sandcastle::service

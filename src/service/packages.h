// install_packages and check_package_installation_status, whatever the
// face: pip or npm runs inside the sandbox, and only it gets a network path
// (through the server's proxy, which reaches nothing but the configured package
// indexes; packages.cc says how). Only the caller's own sandboxes.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

// install_packages' arguments {sandbox_id, packages, manager?, wait, timeout_s}
// and result {status, packages, cause?, error?, log?}.
nlohmann::json install_input_schema();
nlohmann::json install_output_schema();
// check_package_installation_status' arguments {sandbox_id, package?}.
nlohmann::json package_status_input_schema();

// Reads the host's installer settings (trust store, proxy) now and reports
// them, so the first install does not.
void load_installer_settings();

// Installs (wait: true) or starts installing (wait: false: status
// "installing"). An install that ran and failed is a result, status
// "failed" with its cause, error and log; kInvalidArgument for a spec that
// is not a package name or a sandbox without a package manager.
Result<nlohmann::json> install_packages(Env& env, const Caller& c, const nlohmann::json& args);
// {packages: [{package, manager, status, updated, version?, error?}]}, or
// one package's {package, manager, status, ...} ("not_found" when no install
// of it was asked for).
Result<nlohmann::json> package_status(Env& env, const Caller& c, const nlohmann::json& args);

}  // namespace sandcastle::service

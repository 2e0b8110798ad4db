// Real engines for the engine client's tests: Podman's `system service` and
// dockerd, each started once per test binary (on first use) with its own
// root, run and socket directories under a temporary directory, an image
// imported into each from a busybox rootfs tar, and stopped at exit.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sandbox/engine/engine_client.h"

namespace sandcastle::sandbox::engine::testing {

struct TestEngine {
  std::string name;        // "podman" or "docker"
  std::string url;         // unix://...
  std::string tls_url;     // docker only: tcp://127.0.0.1:PORT with TLS
  std::string tls_dir;     // ca.pem, cert.pem, key.pem of a client the engine trusts
  std::string image;       // the imported busybox image (its id)
  std::string root;        // the engine's temporary directory
  std::string cli_prefix;  // the engine's CLI pointed at this engine, for comparisons
};

// The engine, started if needed; null with the reason when it cannot start
// as this user (the caller skips, saying why).
const TestEngine* test_engine(const std::string& name, std::string* why);

// Stops engine `name`'s process (as `stop` at exit: SIGTERM, then SIGKILL
// after 15 s), keeping its directories, images and socket path; false if
// it was not running. restart_test_engine starts it again with the same
// flags and waits until it answers (false with the reason if it does not).
// For tests of an engine that goes away; the tests after them find it up.
bool stop_test_engine(const std::string& name);
bool restart_test_engine(const std::string& name, std::string* why);

// A client for `engine` (fails the test if it cannot connect).
std::unique_ptr<EngineClient> client_for(const TestEngine& engine);

// The container config the issue asks for: CapDrop ALL, no network,
// no-new-privileges, read-only root, tmpfs /tmp, a volume at /workspace,
// user 1000, and the rlimits this machine needs (see machine.md).
nlohmann::json locked_down_config(const std::string& image);

// Minimal ustar archives for the archive calls.
std::string tar_of_file(const std::string& name, const std::string& content);
// The content of the first regular file in a tar, or "" (with ok=false).
std::string first_file_in_tar(const std::string& tar, std::string* name, bool* ok);

}  // namespace sandcastle::sandbox::engine::testing

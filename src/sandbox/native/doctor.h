// What this host allows, and whether the isolation sandcastle would use is
// adequate. `sandcastle doctor` prints the report; the server calls
// check_isolation() at start and refuses to run code when it is inadequate,
// unless started with --allow-weak-isolation.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace sandcastle::sandbox::native {

struct IsolationReport {
  bool user_namespaces = false;
  bool seccomp = false;
  bool pidfd = false;
  bool overlayfs = false;
  bool overlay_in_userns = false;  // images: overlay (userxattr) mounted in a user namespace
  int landlock_abi = 0;  // 0 = unavailable
  std::string cgroup_version;            // "v1", "v2" or "none"
  std::vector<std::string> controllers;  // usable cgroup controllers
  std::string init_helper;               // path, or empty when missing
  bool adequate = false;                 // every required facility present
  std::vector<std::string> problems;     // required facility missing: what to enable
  std::vector<std::string> weaknesses;   // optional facility missing: what is weaker
};

// Probes (forks short-lived children; does not need root). Cheap: ~10 ms.
IsolationReport check_isolation();

// Prints the report; returns 0 when isolation is adequate, 1 otherwise.
int run_doctor(std::ostream& out);

}  // namespace sandcastle::sandbox::native

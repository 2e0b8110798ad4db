// Cleanup after a crashed predecessor: its inits died with it (PDEATHSIG),
// but cgroup directories and runtime directories stay. Everything sandcastle
// creates is named sandcastle-<server pid>[-...]; entries whose pid is no
// longer alive are removed. Runtime dirs are looked for only where this
// server makes its own (runtime_parent(): /run as root, never /tmp), only
// real directories it owns, and nothing under them is reached through a
// symlink (a planted one would make root unmount the host's own mounts).
#pragma once

#include <string>
#include <vector>

namespace sandcastle::sandbox::native {

struct SweepReport {
  std::vector<std::string> removed;
  std::vector<std::string> failed;  // "path: reason"
};

// Call once at server start, before creating sandboxes.
SweepReport sweep_leftovers();

}  // namespace sandcastle::sandbox::native

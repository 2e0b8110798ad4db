// Cleanup after a crashed predecessor: its inits died with it (PDEATHSIG),
// but cgroup directories and runtime directories stay. Everything sandcastle
// creates is named sandcastle-<server pid>[-...]; entries whose pid is no
// longer alive are removed.
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

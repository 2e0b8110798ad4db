// save_sandbox's consistency: every process of a sandbox but its layer
// worker frozen while the worker walks (layer_export.h), then thawed.
//
// The worker runs in the sandbox's cgroup, so the cgroup itself cannot be
// frozen. Instead the others are moved into a freezer group of their own
// for the walk: on cgroup v1 a group in the freezer hierarchy beside the
// server's (freezer.state FROZEN), on v2 a child of the sandbox's group
// (cgroup.freeze 1); their memory, pids and CPU accounting is unchanged
// (v1: other hierarchies; v2: a child's usage counts in its parent). A
// process forked while they are being moved is moved on the next pass, and
// the passes end when nothing is left to move. The worker's host pid comes
// from the kernel (SCM_CREDENTIALS), never from the sandbox's word.
// Destruction thaws and moves them back, whatever happened in between.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "sandbox/native/cgroup.h"

namespace sandcastle::sandbox::native {

class SaveFreeze {
 public:
  // Freezes every process in `cgroup` except `worker`; a kFailedPrecondition
  // error says why there is no freezer (the save goes on unfrozen).
  static Result<std::unique_ptr<SaveFreeze>> freeze(const SandboxCgroup* cgroup, pid_t worker,
                                                    const std::string& sandbox_id);
  ~SaveFreeze();
  SaveFreeze(const SaveFreeze&) = delete;
  SaveFreeze& operator=(const SaveFreeze&) = delete;

 private:
  SaveFreeze() = default;
  Status move_all(pid_t worker);
  CgroupVersion version_ = CgroupVersion::kNone;
  std::string source_procs_;  // where the sandbox's processes are listed
  std::string group_;         // the freezer group made for the save
  std::string home_;          // where they go back (v1: the server's freezer group)
};

// The v1 freezer groups of servers that died while a sandbox was frozen
// (freeze() or a save): thawed, so their processes act on the SIGKILL they
// got, and removed. Returns the groups removed.
std::vector<std::string> sweep_stale_save_freezers();

}  // namespace sandcastle::sandbox::native

// Starting a sandbox's init: cloned into new namespaces by the zygote (see
// zygote.h), then id maps, its cgroup, and "go": it execs the init helper,
// and the helper's {step, errno} report comes back.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/userns.h"

namespace sandcastle::sandbox::native {

class SandboxCgroup;

// PR_SET_PDEATHSIG fires when the *thread* that forked a child exits, not
// the process. Server request threads come and go, so the zygote is cloned
// on this one long-lived thread, and dies only with the server.
class Spawner {
 public:
  Spawner();
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;
  // Runs fn on the spawner thread and waits for it (inline when called from
  // the spawner thread itself).
  void run(const std::function<void()>& fn);

 private:
  struct Job {
    std::function<void()> fn;
    bool* done = nullptr;  // run(): set under mu_ when fn returns
  };
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

struct InitProcess {
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd control;  // SOCK_SEQPACKET to the init's request loop
  std::uint64_t zygote_generation = 0;  // the zygote that cloned it (Zygote::alive)
};

struct SpawnRequest {
  std::string helper_path;
  IdMapping ids;
  SandboxCgroup* cgroup = nullptr;  // may be null (no cgroups)
  std::string config;               // encoded InitConfig (spec-independent)
};

// An init cloned into its namespaces, id-mapped, placed in its cgroup, and
// running the helper with its InitConfig: building everything of a sandbox
// that does not depend on its spec (most of the cost of creating one), then
// waiting for the FinishConfig.
struct PendingInit {
  InitProcess process;  // control socket set
  UniqueFd config;      // u32 length + encoded FinishConfig goes here
  UniqueFd status;      // two InitStatus records come back: prepared, ready
};

class Zygote;
Result<PendingInit> spawn_pending_init(Zygote& zygote, const SpawnRequest& req);
// Sends the FinishConfig (the spec-dependent part: sized mounts, hostname)
// and waits for the helper's {step, errno} or ready. Kills the init on failure.
Result<InitProcess> start_init(PendingInit pending, const std::string& finish_config);

// SIGKILL through the pidfd, and wait until it is gone.
void kill_and_reap(InitProcess& init);

}  // namespace sandcastle::sandbox::native

// Teardown off the request path. destroy() kills a sandbox's init at once
// (SIGKILL through its pidfd: PID 1 gone, the kernel kills every process of
// the sandbox and its mounts go with the last of them) and hands the rest —
// waiting for the exit, removing the cgroup — to this thread, so the caller
// does not wait for the kernel's namespace teardown. The exit itself runs at
// CpuShare::kBackground for up to kBackgroundExit after the kill (every killed
// sandbox, queued or not), so a burst's teardown does not compete with the
// burst.
//
// An emptied v1 cgroup is kept for the next sandbox (SandboxCgroup::recycle)
// when nothing else still refers to it, up to kMaxSpareCgroups; the rest are
// removed.
//
// Nothing leaks: the backend's shutdown drains every queued teardown and then
// removes the spares (release_spares), inits die with the server anyway
// (PDEATHSIG), and a server that crashed mid-teardown leaves cgroups named
// after its dead pid, which the next start's sweep removes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/spawn.h"

namespace sandcastle::sandbox::native {

class Reaper {
 public:
  Reaper();
  ~Reaper();  // drains
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Sends SIGKILL now; reaps and removes the cgroup later. `background`:
  // the exit runs at CpuShare::kBackground at first (false when a caller
  // waits for it, as a persistent sandbox's release does).
  void kill_and_release(std::string id, InitProcess init, std::shared_ptr<SandboxCgroup> cgroup,
                        bool background = true);
  // Drops `obj` on this thread: a teardown that waits on the kernel (an
  // image sandbox's idmapped layer binds, image_root.h) off the create path.
  void release(std::shared_ptr<void> obj);
  // Returns when everything queued so far is done.
  void drain();
  // A recycled cgroup, if one is spare (its limits are the last sandbox's).
  std::shared_ptr<SandboxCgroup> take_spare_cgroup();
  // Removes the spare groups, and every group released from now on (for
  // shutdown: nothing is kept for a next sandbox).
  void release_spares();
  static constexpr std::size_t kMaxSpareCgroups = 16;
  // How long a killed sandbox exits at CpuShare::kBackground before it
  // gets the normal share (looked at every kLiftCheck, queued ones too).
  static constexpr std::chrono::milliseconds kBackgroundExit{250};
  static constexpr std::chrono::milliseconds kLiftCheck{50};

 private:
  struct Item {
    std::string id;
    InitProcess init;
    std::shared_ptr<SandboxCgroup> cgroup;
    std::shared_ptr<void> keep;  // release(): dropped by the loop
    std::chrono::steady_clock::time_point killed_at{};
  };
  void loop();
  void wait_for_exit(Item& item);
  std::chrono::steady_clock::time_point lift_overdue(Item& item,
                                                     std::chrono::steady_clock::time_point now);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::vector<std::shared_ptr<SandboxCgroup>> spare_;
  std::size_t in_flight_ = 0;
  bool stop_ = false;
  bool keep_spares_ = true;
  std::thread thread_;
};

}  // namespace sandcastle::sandbox::native

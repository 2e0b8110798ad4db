// The zygote: a small single-threaded process (the init helper run with
// --zygote) that clones every sandbox's init on the server's behalf.
//
// Why: a clone from the server copies the server's page tables and marks its
// whole heap copy-on-write, only for the child to exec at once; the server
// then takes a fault on every page it writes next. Cloned from the zygote, a
// sandbox costs a copy of a few hundred KiB instead, whatever the server's
// size, and the clone needs no async-signal-safe discipline (the zygote has
// one thread).
//
// Lifetime: the zygote dies with the server (PDEATHSIG, set from the spawner
// thread that started it) and every init dies with the zygote (PDEATHSIG),
// so no sandbox outlives the server. A zygote that died anyway (killed by
// hand) takes its sandboxes with it; the next spawn starts a new one.
//
// Protocol (SOCK_SEQPACKET): ZygoteRequest + fds {config, status, control
// [, v2 cgroup dir]} -> ZygoteReply (+ the child's pidfd when pid > 0).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/spawn.h"

namespace sandcastle::sandbox::native {

struct ZygoteRequest {
  std::uint64_t clone_flags = 0;  // CLONE_NEW* (CLONE_INTO_CGROUP when a 4th fd comes)
  std::uint32_t uid = 0;          // inside the user namespace, once mapped
  std::uint32_t gid = 0;
};

struct ZygoteReply {
  std::int32_t pid = -1;
  std::int32_t err = 0;  // errno of clone3 when pid < 0
};

// The zygote's side: serves requests on `sock` until the server closes it.
// `helper` is the init helper the children exec once mapped.
int run_zygote(int sock, const char* helper);

// The server's side. Thread-safe; starts the zygote on first use.
class Zygote {
 public:
  explicit Zygote(Spawner& spawner) : spawner_(spawner) {}
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  struct Child {
    pid_t pid = -1;
    UniqueFd pidfd;
    std::uint64_t generation = 0;  // which zygote cloned it (see alive())
  };
  // Clones a child into new namespaces. It holds config/status/control as
  // fds 3/4/5 and waits for one byte on config before it takes its mapped
  // identity and execs `helper`.
  Result<Child> clone_init(const std::string& helper, const ZygoteRequest& req, int config_fd,
                           int status_fd, int control_fd, int cgroup_fd);
  // Stops the zygote and waits for it (shutdown); clone_init fails from now on.
  void stop();

  // False once the zygote of `generation` has died or been replaced. Its
  // children were sent SIGKILL (PDEATHSIG) as it died but may not have
  // exited yet: a pooled init whose zygote is gone is doomed even while its
  // own pidfd is quiet.
  bool alive(std::uint64_t generation) const;

 private:
  Status start_locked(const std::string& helper);
  // Closes its socket, kills it and reaps it (no-op without one).
  void stop_locked();
  // *gone: the zygote's socket is closed (it died).
  Result<Child> ask_locked(const ZygoteRequest& req, const int* fds, int nfds, bool* gone);
  Spawner& spawner_;
  std::mutex mu_;
  UniqueFd sock_;
  UniqueFd pidfd_;
  bool stopped_ = false;
  // What alive() reads, under a mutex of its own: a clone in progress holds
  // mu_ for up to 30 s, and a pool take must not wait for it.
  mutable std::mutex live_mu_;
  std::uint64_t generation_ = 0;  // of the current zygote; 0 before the first
  UniqueFd live_pidfd_;           // a dup of pidfd_ (none while there is no zygote)
};

}  // namespace sandcastle::sandbox::native

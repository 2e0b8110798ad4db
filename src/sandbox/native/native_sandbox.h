// One native sandbox: a long-lived init (PID 1 in its namespaces) that starts
// each exec as a fork, plus the host-side handles: pidfd, control socket,
// cgroup, and the channel to the sandbox's file worker (the server holds no
// handle on the sandbox's tree: file_wire.h says why).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/change_watches.h"
#include "sandbox/native/file_client.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/image_root.h"
#include "sandbox/native/persist_disk.h"
#include "sandbox/native/persist_mirror_store.h"
#include "sandbox/native/pool_sizer.h"
#include "sandbox/native/reaper.h"
#include "sandbox/native/save_freeze.h"
#include "sandbox/native/spawn.h"
#include "sandbox/native/userns.h"
#include "sandbox/native/zygote.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

// A sandbox begun ahead of demand: namespaces, id maps, cgroup and the
// running init helper, waiting for the spec-dependent rest (see PendingInit).
struct Prespawned {
  std::string id;
  IdMapping ids;
  std::shared_ptr<SandboxCgroup> cgroup;  // null without cgroups
  PendingInit init;
  // An image sandbox as root: its idmapped layers, until its init is ready.
  std::shared_ptr<LayerMounts> layers;
  // A persistent sandbox: the idmapped bind of its storage, likewise.
  std::shared_ptr<DiskBind> disk_bind;
};

// A sandbox ready to hand out: its spec's mounts and hostname in place, the
// root open. The pool holds these, finished for the backend's prespawn spec.
struct ReadySandbox {
  std::string id;
  IdMapping ids;
  std::shared_ptr<SandboxCgroup> cgroup;
  InitProcess init;
  std::string finish;  // the encoded FinishConfig it was finished with
  std::string image_id;  // rooted in an image: which (a create checks it is still that)
  bool ahead = false;    // its exec slot runs the pool's AheadCommand
};

class NativeSandbox;

// What init is sent for an exec `req` of a sandbox of `spec`.
Result<ExecWire> exec_wire_for(const ExecRequest& req, const SandboxSpec& spec, bool have_cgroup);
// Has a sandbox just made for `spec` start `command` (AheadCommand) in its
// waiting exec slot.
Status start_ahead(ReadySandbox& sandbox, const AheadCommand& command, const SandboxSpec& spec);

// Who a sandbox is made for: a create waiting on it, or the warm pool ahead
// of demand. One made ahead runs at CpuShare::kBackground until it is handed
// out (or a create starts waiting for it), so refilling the pool does not
// compete with the sandboxes in use.
enum class Making { kOnDemand, kAhead };

// Every field of a spec, encoded: a pooled sandbox goes only to a create
// whose key equals the pool's.
std::string pool_key(const SandboxSpec& spec);

struct BackendShared {
  RuntimeDirs dirs;
  CgroupSupport cgroups;
  std::string seccomp_bpf;
  std::string helper_path;
  BackendCapabilities caps;
  std::atomic<std::uint64_t> serial{0};
  Spawner spawner;
  Zygote zygote{spawner};
  Reaper reaper;
  ImageResolver images;  // empty: only image "host"
  std::unique_ptr<PersistStore> persist;  // persistent sandboxes' storage
  std::unique_ptr<MirrorStore> mirror;    // the same without root (persist_mirror.h)
  ChangeWatches change_watches;           // on sandboxes' workdirs, at most 16 (change_watches.h)

  // The one warm pool (the manager keeps none): sandboxes made ahead of
  // demand for pool_spec, handed out only to a create whose whole spec is
  // pool_spec (pool_key). Sized by sizer from the arrival rate, kept there
  // by refill_threads (which also destroys the ones an idle server no longer
  // needs). All under pool_mu.
  SandboxSpec pool_spec = SandboxSpec::defaults();
  std::string pool_key_bytes;  // pool_key(pool_spec)
  std::mutex pool_mu;
  std::condition_variable pool_cv;  // pool taken from, refilled, woken, or stopping
  std::deque<ReadySandbox> pool;
  PoolSizer sizer{PoolPolicy{}};
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::uint64_t pool_made = 0, pool_taken = 0, pool_shed = 0;
  std::size_t pool_peak = 0;  // the most ever ready at once (tests: never above the maximum)
  bool refill_failing = false;  // its last attempt failed (creates do not wait)
  std::size_t refilling = 0;    // sandboxes the refill threads are making
  std::size_t waiting = 0;      // creates waiting for the one being made
  // The groups of sandboxes being made ahead at the background share: a
  // create that starts waiting for one lifts them all to the normal share.
  std::vector<std::weak_ptr<SandboxCgroup>> making_ahead;
  // What the pool's sandboxes start ahead (set_ahead_command), each counted
  // at kAheadCommandBytes more in the memory budget; those the budget has
  // no room for start nothing.
  std::optional<AheadCommand> ahead_command;
  std::size_t pool_target = 0;  // the refill's last target
  std::size_t ahead_ready_locked() const;  // ready ones running it
  // What `sandboxes` ready ones and the commands started in the pool's hold.
  std::uint64_t pool_bytes_locked(std::size_t sandboxes) const;
  bool ahead_affordable_locked() const;
  // Under pool_mu: the send is one small message on r's control socket.
  void start_ahead_or_warn(ReadySandbox& r);
  std::chrono::steady_clock::time_point last_take{};
  std::chrono::steady_clock::time_point last_take_clock{};  // by `clock`
  static constexpr std::chrono::seconds kShedAfterIdle{1};
  static constexpr std::chrono::milliseconds kRefillDelay{10};
  bool stopping = false;     // shutdown began: no refill, no new create
  std::size_t creating = 0;  // creates in progress (under pool_mu)
  // Two makers: one sandbox's setup is mostly waiting on its init's own
  // work (mounts, exec), so a second overlaps it; the zygote's clones are
  // one at a time anyway, so more would only queue there.
  static constexpr unsigned kRefillThreads = 2;
  std::vector<std::thread> refill_threads;  // started last, joined first

  // Sandboxes handed out and not yet destructed, so shutdown reaches the
  // ones an owner still holds.
  std::mutex live_mu;
  std::set<NativeSandbox*> live;
  std::once_flag shutdown_once;

  // A new sandbox up to its init waiting for a config (on any thread).
  // An id, its id mapping and a cgroup (a spare one when it fits): what
  // every sandbox starts from, host image or not.
  Result<Prespawned> new_prespawned(const Limits& limits, Making making = Making::kOnDemand);
  // A new sandbox's CPU share for `making` (listed in making_ahead if
  // background).
  void set_making_share(const std::shared_ptr<SandboxCgroup>& cgroup, Making making);
  // Lifts every group in making_ahead to the normal share and empties it
  // (under pool_mu); the groups go to `lifted`, for the caller to let go
  // after the lock (a last reference removes a group's directories).
  void lift_making_ahead_locked(std::vector<std::shared_ptr<SandboxCgroup>>& lifted);
  // Sets a group's share; a failure is logged once per backend.
  void share_or_warn(SandboxCgroup& cgroup, CpuShare share);
  std::atomic<bool> share_warned{false};
  // `disk`: a persistent sandbox's storage, bound as its /workspace (host)
  // or holding its overlay's upper dir (image).
  Result<Prespawned> begin_sandbox(const Limits& limits, const AttachedDisk* disk = nullptr,
                                   Making making = Making::kOnDemand);
  // The same rooted in an image (image_root.h), with its whole plan in the
  // InitConfig (it depends on the image and the limits).
  // `restore_from`: without root, the storage's copy of the upper dir
  // (persist_mirror.h).
  Result<Prespawned> begin_image_sandbox(const Limits& limits, const ImageRoot& image,
                                         const ImageIds& ids, const AttachedDisk* disk = nullptr,
                                         const std::string& restore_from = {},
                                         Making making = Making::kOnDemand);
  // The idmapped bind of `disk` for p (its ids), kept in p.
  Result<std::string> bind_disk(Prespawned& p, const AttachedDisk& disk);
  // The spec's part: mounts and hostname, then the root opened.
  Result<ReadySandbox> finish_sandbox(Prespawned p, const SandboxSpec& spec);
  // Begun and finished, for `spec` on `image` (for a create, or the pool
  // when its spec names an image); records the image's id.
  Result<ReadySandbox> make_image_sandbox(const SandboxSpec& spec, const ImageRoot& image,
                                          const ImageIds& ids, const AttachedDisk* disk = nullptr,
                                          const std::string& restore_from = {},
                                          Making making = Making::kOnDemand);
  // One from the pool whose init is still alive when `key` is the pool's
  // (waiting for the one being made if the pool is empty), else nothing.
  // Counts the create for the sizer either way.
  std::optional<ReadySandbox> take_ready(const std::string& key);
  // One from the pool for a persistent `spec` on the host image, with
  // `disk` mounted over its /workspace (PersistStore::mount_into), else
  // nothing.
  std::optional<ReadySandbox> take_shell(const SandboxSpec& spec, const AttachedDisk& disk);
  // Keeps the pool at the sizer's target until stopping.
  void refill_loop();
  std::size_t live_count();
  PoolStats pool_stats_locked();
  // A create counted until leave_create; false once shutdown began.
  bool enter_create();
  void leave_create();
  void track(NativeSandbox* sandbox);
  void untrack(NativeSandbox* sandbox);
  // Leaves nothing of this backend: waits for creates in progress, destroys
  // every sandbox (pooled or still held), drains the reaper, removes the
  // spare cgroups, stops the zygote and removes the runtime directory.
  // Idempotent; later creates fail.
  void shutdown();
  ~BackendShared();
};

// Without root: a persist worker request on storage directories (a copy
// for fork_sandbox, a removal) run in a sandbox made for it and destroyed
// after, so that the server never walks a tree a sandbox wrote.
Status run_in_helper_sandbox(const std::shared_ptr<BackendShared>& shared,
                             const PersistMirrorWire& w, int store_fd, int other_fd);

class NativeSandbox : public Sandbox {
 public:
  NativeSandbox(std::string id, SandboxSpec spec, std::shared_ptr<BackendShared> shared,
                IdMapping ids, std::shared_ptr<SandboxCgroup> cgroup, InitProcess init);
  ~NativeSandbox() override;

  const std::string& id() const override { return id_; }
  const SandboxSpec& spec() const override { return spec_; }

  Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                          const CancelToken* cancel) override;

  Result<FileStat> stat(const std::string& path) override;
  Result<Listing> list(const std::string& path, const ListOptions& options) override;
  std::optional<bool> changed_since(std::uint64_t watch) override;
  Result<FileData> read_file(const std::string& path, const ReadRange& range) override;
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode,
                    bool parents) override;
  Status mkdir(const std::string& path, bool parents) override;
  Status remove(const std::string& path, bool recursive) override;
  Status rename(const std::string& from, const std::string& to) override;

  Result<Usage> usage() override;
  Result<SavedLayer> save_layer(const std::string& tar_path, const SaveLimits& limits) override;
  Status publish_shared(const std::string& name, std::string_view data) override;
  bool has_shared(const std::string& name) const override;
  Status destroy() override;
  // Whether init still runs: its pidfd turns readable when it exits, and
  // with PID 1 every process of the sandbox goes. One poll, no round trip.
  bool alive(std::chrono::milliseconds grace = {}) const override;
  // Issue 16: a persistent sandbox's storage stays (release) or goes
  // (destroy); freeze/thaw through the cgroup freezer (save_freeze.h).
  Status release() override;
  Status freeze() override;
  Status thaw() override;
  Status checkpoint(const std::string& dir) override;
  // A shell on a pty of the sandbox's own (terminal.h).
  Result<std::unique_ptr<Terminal>> open_terminal(const TerminalRequest& req) override;
  Result<net::Listeners> open_net_listeners(bool proxies) override;
  // From init's pidfd (PIDFD_GET_{NET,USER}_NAMESPACE, Linux 6.11+; older
  // kernels: /proc/<pid>/ns/*, with the pidfd checked alive after the open).
  Result<NetNamespaces> network_namespaces() override;
  // Without root: brings the storage's copy on disk up to date (a no-op for
  // any other sandbox). Every call that can write runs it before returning.
  Status persist_changes() override;

  // Host pid of the sandbox init (tests and diagnostics).
  pid_t init_pid() const { return init_.pid; }
  // Held while the sandbox object lives: its image's "in use" mark in the
  // store (ImageRoot::lease), so `image rm` refuses meanwhile.
  void keep_image_lease(std::shared_ptr<void> lease) { image_lease_ = std::move(lease); }
  // A persistent sandbox's storage, unmounted when the sandbox ends.
  void keep_disk(std::shared_ptr<AttachedDisk> disk) { disk_ = std::move(disk); }
  // One persist worker request (persist_mirror.h) run in this sandbox on
  // the given directory fds; the reply's error as a Status.
  // `timeout` (0: the call timeout) bounds the whole request: the worker is
  // then killed (a sandbox can SIGSTOP its own worker).
  Status run_store_worker(const PersistMirrorWire& w, int store_fd, int other_fd = -1,
                          std::chrono::milliseconds timeout = {});
  // How long a call's sync may take (300 s; tests lower it).
  void set_persist_timeout(std::chrono::milliseconds t) { persist_timeout_ms_ = t.count(); }
  // Without root: the storage's copy on disk, copied into /workspace now
  // (`restore`; an image sandbox's init copied its upper dir already).
  Status keep_mirror(std::shared_ptr<MirrorAttachment> mirror, bool restore = true);

 private:
  Status check_alive() const;
  // destroy() and release(): the processes killed, then (persistent) the
  // storage unmounted once they are gone, and removed with remove_files.
  Status end(bool remove_files);
  // Starts a file worker in the sandbox (FileChannel::Connect).
  Result<UniqueFd> connect_files();
  // The sandbox path as the worker's absolute path.
  Result<std::string> worker_path(const std::string& path) const;
  // The exec itself (exec() adds persist_changes).
  Result<ExecResult> run_exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                              const CancelToken* cancel);
  // One persist worker in the sandbox: /workspace to disk, or back.
  Status run_mirror_worker(const MirrorAttachment& m, bool restore,
                           std::chrono::milliseconds timeout = {});
  // persist_changes with this bound on the sync (release: a short one).
  Status persist_within(std::chrono::milliseconds timeout);
  std::atomic<std::int64_t> persist_timeout_ms_{300'000};
  std::shared_ptr<MirrorAttachment> mirror_snapshot() const;

  std::string id_;
  SandboxSpec spec_;
  std::shared_ptr<BackendShared> shared_;
  IdMapping ids_;
  // Shared with the reaper, which removes it after destroy; a concurrent
  // exec may still read its counters (they read 0 once it is gone).
  std::shared_ptr<SandboxCgroup> cgroup_;
  InitProcess init_;
  // Shared: exec and worker start requests to init. Exclusive: destroy.
  mutable std::shared_mutex mu_;
  bool destroyed_ = false;
  FileChannel files_{[this] { return connect_files(); }};
  std::shared_ptr<void> image_lease_;
  std::shared_ptr<AttachedDisk> disk_;  // under mu_
  std::shared_ptr<MirrorAttachment> mirror_;  // under mu_
  std::unique_ptr<SaveFreeze> frozen_;  // freeze() until thaw(); under mu_
  bool storage_removed_ = false;
  TerminalSlots terminals_;
};

}  // namespace sandcastle::sandbox::native

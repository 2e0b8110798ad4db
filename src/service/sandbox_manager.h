// Owns the live sandboxes behind the tools: ids and names, who owns each,
// last use and TTL reaping, and the server-wide cap. The warm pool that makes
// a create on the request path cost a map insert lives below, in the backend
// (the only one: the backend can begin a sandbox before any spec is known and
// hand one out only to a create whose whole spec it was made for).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/result.h"
#include "sandbox/sandbox.h"
#include "service/admission.h"
#include "service/ended_sandboxes.h"
#include "service/sandbox_network.h"
#include "service/workspace_diff.h"
#include "store/sandbox_store.h"

namespace sandcastle::service {

enum class PackageState { kInstalling, kSuccess, kFailed };
const char* package_state_name(PackageState s);

struct PackageRecord {
  std::string name;
  std::string manager;  // pip | npm
  PackageState state = PackageState::kInstalling;
  std::string error;  // the installer's own words when it failed
  std::chrono::system_clock::time_point updated;
  std::string version;  // as installed, when the installer said (validated); else empty
};

// One sandbox as the tools see it.
class SandboxEntry {
 public:
  SandboxEntry(std::string id, std::string name, std::string language, std::string owner,
               std::chrono::seconds ttl, std::unique_ptr<sandbox::Sandbox> sb);
  // A persistent sandbox started again from its record: keeps its creation
  // time, and its first run reports the processes' state as lost.
  SandboxEntry(const store::SandboxRecord& record, std::unique_ptr<sandbox::Sandbox> sb);

  const std::string& id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& language() const { return language_; }
  const std::string& owner() const { return owner_; }
  std::chrono::seconds ttl() const { return ttl_; }
  std::chrono::system_clock::time_point created_at() const { return created_at_; }
  sandbox::Sandbox& sandbox() { return *sandbox_; }
  const sandbox::SandboxSpec& spec() const { return sandbox_->spec(); }
  // The engine it runs on with several engines (Sandbox::location), else "".
  std::string location() const { return sandbox_->location(); }
  bool persistent() const { return spec().persistence() == sandbox::Persistence::kPersistent; }
  // What the reaper does when the TTL passes: "destroy" or "pause".
  const std::string& ttl_action() const { return ttl_action_; }
  void set_ttl_action(std::string a) { ttl_action_ = std::move(a); }

  // Frozen by pause_sandbox (mode freeze): its processes are stopped in
  // memory; tools other than resume/close/history refuse it.
  bool frozen() const { return frozen_.load(std::memory_order_acquire); }
  void set_frozen(bool f) { frozen_.store(f, std::memory_order_release); }
  // True once after the sandbox came back without its processes' memory (a
  // restart, a resume after a pause that could not checkpoint): the next
  // run says state_lost.
  bool take_state_lost() { return state_lost_.exchange(false); }
  void set_state_lost() { state_lost_.store(true); }
  // Told of every package change (the manager records them in the store).
  void on_package(std::function<void(const PackageRecord&)> fn);
  // Whether the store holds a record of it (not for one-shot sandboxes).
  bool recorded() const { return recorded_; }
  void set_recorded(bool r) { recorded_ = r; }

  void touch();
  std::chrono::steady_clock::time_point last_used_steady() const;
  std::chrono::system_clock::time_point last_used() const;
  // Operations in progress keep a sandbox from being reaped mid-call.
  void begin_use();
  void end_use();
  int active_uses() const;
  // Uses begun so far and uses in progress, read together: a tool can tell
  // whether anything else used the sandbox between two of its own calls.
  struct UseCounts {
    std::uint64_t begun = 0;
    int active = 0;
  };
  UseCounts use_counts() const;

  // The workdir listing the last run ended with, kept as the next run's
  // "before": valid only if the use count then (`uses`, its own use
  // included) is one below the next run's, i.e. nothing else used the
  // sandbox in between. Saves a listing (a round trip into the sandbox) per
  // run. take_listing() hands it over once, or nothing.
  void keep_listing(WatchedSnapshot files, std::uint64_t uses);
  std::optional<WatchedSnapshot> take_listing(std::uint64_t uses_now);

  void set_package(PackageRecord rec);
  std::optional<PackageRecord> package(const std::string& name) const;
  std::vector<PackageRecord> packages() const;

  // State a tool keeps alongside the sandbox (the interpreter kernel): made
  // by `make` on first use, destroyed with the entry before the sandbox.
  std::shared_ptr<void> attachment(const std::function<std::shared_ptr<void>()>& make);
  std::shared_ptr<void> attachment_if_any() const;

  // Allowlist and full mode: the sandbox's network session (null in mode
  // none); full mode: its network stack and firewall too (else null).
  void set_network(NetworkHandle handle);
  std::shared_ptr<net::Session> network() const;
  std::shared_ptr<FullNetwork> full_network() const;
  // The spec with the live network rules (set_sandbox_network changes them
  // after creation): what records and forks take.
  sandbox::SpecOptions spec_options() const;
  // Stops serving its network (the sandbox is being destroyed).
  void drop_network();

 private:
  const std::string id_, name_, language_, owner_;
  const std::chrono::seconds ttl_;
  const std::chrono::system_clock::time_point created_at_;
  std::unique_ptr<sandbox::Sandbox> sandbox_;
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point last_used_steady_;
  std::chrono::system_clock::time_point last_used_;
  int active_uses_ = 0;
  std::uint64_t uses_begun_ = 0;
  std::optional<std::pair<WatchedSnapshot, std::uint64_t>> listing_;
  std::map<std::string, PackageRecord> packages_;
  std::function<void(const PackageRecord&)> on_package_;
  std::string ttl_action_ = "destroy";
  bool recorded_ = true;
  std::atomic<bool> frozen_{false};
  std::atomic<bool> state_lost_{false};
  std::shared_ptr<void> attachment_;  // declared after sandbox_: released first
  NetworkHandle network_;             // likewise
};

// The store's record of a live entry, as server `server` runs it.
store::SandboxRecord record_of(const SandboxEntry& e, const std::string& server);

// RAII use of an entry: touches it and holds off the reaper.
class EntryUse {
 public:
  explicit EntryUse(std::shared_ptr<SandboxEntry> e);
  ~EntryUse();
  EntryUse(const EntryUse&) = delete;
  EntryUse& operator=(const EntryUse&) = delete;
  SandboxEntry* operator->() const { return e_.get(); }
  SandboxEntry& operator*() const { return *e_; }
  const std::shared_ptr<SandboxEntry>& entry() const { return e_; }

 private:
  std::shared_ptr<SandboxEntry> e_;
};

struct ManagerOptions {
  size_t max_sandboxes = 64;                  // server-wide cap on live sandboxes
  std::chrono::seconds default_ttl{30 * 60};  // idle time before reaping
  size_t max_per_owner = 0;                   // live sandboxes per owner; 0 = no quota
  size_t max_queued_runs = 1024;              // one-shot runs that may wait at the cap; 0 = none
  std::chrono::seconds reap_interval{5};
  // Non-empty: persistent sandboxes are refused with this message (another
  // server owns the state dir's), and recover() leaves the store alone.
  std::string persistent_refusal;
  // This server, as records name it (common/proc_identity.h).
  std::string server_identity;
  // Serves allowlist sandboxes' proxies; null: only mode none (not owned).
  net::ProxyService* proxies = nullptr;
};

struct CreateRequest {
  std::string name;      // empty: derived from the id
  std::string language;  // canonical language name
  std::string owner;     // "" for the local (stdio) user
  std::optional<std::chrono::seconds> ttl;
  std::string ttl_action = "destroy";  // or "pause"
  sandbox::SpecOptions spec;
  // A one-shot run's sandbox lives for one call and no one can name it: it
  // is not written to the store (two transactions saved per call).
  bool one_shot = false;
};

// How pause_sandbox stops a sandbox.
enum class PauseMode {
  kAuto,    // checkpoint where the backend can, else stop (persistent) or freeze (ephemeral)
  kFreeze,  // processes stopped in memory: resume is instant, the state is kept
  kStop,    // processes ended, files kept on disk (persistent only)
};
struct PauseOutcome {
  std::string mode;           // "checkpoint" | "freeze" | "stop"
  bool memory_saved = false;  // resume brings the processes' state back
  std::string note;           // why the memory is not saved, when it is not
};

// A sandbox as list_sandboxes shows it: a live entry, or a persistent one
// whose processes are not running (stopped by a restart, or paused).
struct SandboxListing {
  std::shared_ptr<SandboxEntry> live;  // null when dormant
  std::optional<store::SandboxRecord> dormant;
};

class SandboxManager {
 public:
  // `store` records every live sandbox (null: an in-memory store of its own).
  // The backend's own facts (its images, for one) for the tools' face.
  sandbox::Backend& backend() { return backend_; }
  SandboxManager(sandbox::Backend& backend, ManagerOptions options,
                 store::SandboxStore* store = nullptr);
  ~SandboxManager();
  SandboxManager(const SandboxManager&) = delete;
  SandboxManager& operator=(const SandboxManager&) = delete;

  // Starts the reaper thread.
  void start();
  // Destroys every ephemeral sandbox, stops persistent ones keeping their
  // files (their records say "stopped") and stops the background threads.
  void shutdown();

  // At start, before serving: persistent sandboxes in the store come back
  // as dormant (started again on first use, or by resume_sandbox when
  // paused); other records and storage no record names are removed.
  Status recover();
  Result<PauseOutcome> pause(const std::string& id_or_name, const std::string& owner,
                             PauseMode mode);
  Result<std::shared_ptr<SandboxEntry>> resume(const std::string& id_or_name,
                                               const std::string& owner);
  // Copies an ephemeral sandbox's files into its fork (the tools do it,
  // bounded by their transfer budget).
  using FileCopier = std::function<Status(sandbox::Sandbox& from, sandbox::Sandbox& to)>;
  // A new sandbox with a copy of the files of `id_or_name` (which keeps
  // running); named `name` (empty: its id). A persistent sandbox's storage
  // is copied by the backend; an ephemeral one's by `copy_files`.
  Result<std::shared_ptr<SandboxEntry>> fork(const std::string& id_or_name,
                                             const std::string& owner, const std::string& name,
                                             const FileCopier& copy_files);
  // The live sandbox, else the dormant record, of that id or name among
  // `owner`'s (neither: both empty). Never starts a stopped one.
  SandboxListing find_any(const std::string& id_or_name, const std::string& owner) const;
  // Live and dormant sandboxes of `owner`, oldest first.
  std::vector<SandboxListing> list_all(const std::string& owner) const;
  store::SandboxStore& mutable_store() { return *store_; }
  // Writes a live entry's record again (its live network rules), when the
  // store keeps one for it.
  Status save_record(const SandboxEntry& e);

  Result<std::shared_ptr<SandboxEntry>> create(const CreateRequest& req);
  // For a one-shot run: like create, but at the cap it waits in the
  // admission line (service/admission.h) until a slot frees, `deadline`
  // passes or `cancel` fires, instead of failing at once.
  Result<std::shared_ptr<SandboxEntry>> create_when_free(
      const CreateRequest& req, std::chrono::steady_clock::time_point deadline, CancelToken* cancel,
      const AdmissionQueue::OnQueued& on_queued);
  size_t runs_waiting() const { return admission_.waiting(); }
  // Finds by id or name, only among `owner`'s sandboxes: another owner's
  // sandbox is reported as not found, never as forbidden. A stopped
  // persistent sandbox is started again (its first run says state_lost); a
  // paused one is refused until resume_sandbox.
  Result<std::shared_ptr<SandboxEntry>> get(const std::string& id_or_name,
                                            const std::string& owner);
  // After a call on `e` failed: when its sandbox's processes turn out to be
  // gone (killed from outside, the zygote killed), the sandbox is dealt
  // with as get() would (a persistent one stops, to start again on its files
  // at the next call; an ephemeral one is removed) and the call's error
  // says so. Nothing when it is alive: the failure is the call's own.
  // `grace`: how long to wait for a death under way (Sandbox::alive).
  std::optional<Error> ended_during_call(const std::shared_ptr<SandboxEntry>& e,
                                         std::chrono::milliseconds grace = {});
  Status close(const std::string& id_or_name, const std::string& owner) {
    return close_attempt(id_or_name, owner, 0);
  }
  // Like close, but the destruction happens on the manager's thread, off the
  // request path (one-shot runs answer before their sandbox is torn down).
  void retire(const std::string& id, const std::string& owner);
  // Destroys every sandbox of `owner` (a session that ended); returns how many.
  size_t close_owned_by(const std::string& owner);
  std::vector<std::shared_ptr<SandboxEntry>> list(const std::string& owner) const;
  size_t live_count() const;
  const store::SandboxStore& store() const { return *store_; }
  // Warm sandboxes the backend holds ready.
  size_t pool_ready() const;
  const ManagerOptions& options() const { return options_; }

  // Destroys sandboxes idle past their TTL; returns how many. Called by the
  // reaper thread, public for tests.
  size_t reap_expired();
  // Full mode's upkeep (FullNetwork::tend) for every live full sandbox:
  // firewalls follow the host's addresses, an exited pasta is recorded and
  // started again. Called by the reaper thread each tick, public for tests.
  void tend_networks();

  // Told (id, owner) whenever a sandbox may have appeared, changed status or
  // gone (one-shot sandboxes excepted); `created` is the new sandbox when it
  // has just been made, so that one closed before the listener looks is
  // still seen to have come (and gone). May be called with the manager's
  // locks held: it must only take note (service/sandbox_watch.h looks).
  using ChangeListener = std::function<void(const std::string& id, const std::string& owner,
                                            std::shared_ptr<const SandboxEntry> created)>;
  void set_change_listener(ChangeListener fn);
  // Live sandboxes of `owner` (nullopt: of every owner).
  std::vector<std::shared_ptr<SandboxEntry>> list_every(
      const std::optional<std::string>& owner) const;

 private:
  // close(), looked up again (at most a few times) when the sandbox changed
  // hands between the lookup and the removal (a wake, a restart after its
  // processes died, a pause).
  Status close_attempt(const std::string& id_or_name, const std::string& owner, int attempt);
  Status retry_close(const std::string& id, const std::string& owner, int attempt);
  // `reserved`: the caller already holds a slot under the cap (creating_).
  Result<std::shared_ptr<SandboxEntry>> create_impl(const CreateRequest& req, bool reserved);
  std::string cap_text() const;
  // Live sandboxes of `owner` plus its creations under way (mu_ held).
  size_t owned_locked(const std::string& owner) const;
  void release_reservation_locked(const std::string& owner);
  void reaper_loop();
  std::string new_id() const;
  void changed(const std::string& id, const std::string& owner,
               std::shared_ptr<const SandboxEntry> created = nullptr) const;
  // Persistent sandboxes (sandbox_durable.cc).
  std::shared_ptr<SandboxEntry> insert_locked(std::shared_ptr<SandboxEntry> entry);
  Result<std::shared_ptr<SandboxEntry>> wake(const store::SandboxRecord& rec, bool state_lost);
  std::optional<store::SandboxRecord> find_dormant_locked(const std::string& id_or_name,
                                                          const std::string& owner) const;
  Result<std::shared_ptr<SandboxEntry>> find_live_locked(const std::string& id_or_name,
                                                         const std::string& owner) const;
  void stop_persistent(SandboxEntry& e, store::SandboxStatus status);
  // A live sandbox whose processes died: a persistent one becomes dormant
  // (stopped, its storage released), an ephemeral one is removed and its
  // end remembered. False when `e` was no longer live (closed, or another
  // call buried it first).
  bool bury_dead(const std::shared_ptr<SandboxEntry>& e);

  sandbox::Backend& backend_;
  const ManagerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<SandboxEntry>> by_id_;
  // Persistent sandboxes whose processes are not running, by id.
  std::map<std::string, store::SandboxRecord> dormant_;
  std::mutex wake_mu_;  // one wake (or resume) at a time: no sandbox starts twice
  std::deque<std::shared_ptr<SandboxEntry>> retiring_;  // destroyed by the reaper thread
  store::MemorySandboxStore own_store_;
  store::SandboxStore* store_;
  size_t creating_ = 0;  // reservations against the cap while a create runs
  std::map<std::string, size_t> reserved_by_owner_;  // creating_, per owner (quotas)
  std::thread reaper_thread_;
  EndedSandboxes ended_;            // why recent ones ended, for get()'s not-found message
  AdmissionQueue admission_;        // told (outside mu_) whenever a slot frees
  mutable std::mutex listener_mu_;  // after mu_ when both are held
  ChangeListener listener_;
};

}  // namespace sandcastle::service

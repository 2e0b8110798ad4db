// The warm pool's half of BackendShared (native_sandbox.h): handing out
// ready sandboxes, keeping the pool at its size, and the commands started
// ahead in it (AheadCommand).
#include <poll.h>

#include <algorithm>

#include "common/log.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::native {

std::optional<ReadySandbox> BackendShared::take_shell(const SandboxSpec& spec,
                                                      const AttachedDisk& disk) {
  // The pool's sandboxes differ from this one only by the tmpfs at
  // /workspace (its size is the pool's disk limit): the storage covers it.
  SpecOptions o = spec.options();
  o.persistence = Persistence::kEphemeral;
  o.storage_id.clear();
  o.limits.disk_bytes = pool_spec.limits().disk_bytes;
  auto shell_spec = SandboxSpec::create(std::move(o));
  if (!shell_spec) return std::nullopt;
  auto r = take_ready(pool_key(*shell_spec));
  if (!r) return std::nullopt;
  auto st = persist->mount_into(disk, r->init.pid, r->init.pidfd.get(), r->ids.inside_uid,
                                r->ids.inside_gid, r->ids.host_uid, r->ids.host_gid);
  if (!st) {
    spdlog::warn("native sandbox: a warm sandbox for storage {}: {} (made anew)", disk.id(),
                 st.error().message());
    reaper.kill_and_release(r->id, std::move(r->init), std::move(r->cgroup));
    return std::nullopt;
  }
  return r;
}

std::string pool_key(const SandboxSpec& spec) {
  // Length-prefixed fields: no two specs encode alike.
  std::string k;
  auto add = [&k](const std::string& v) {
    k += std::to_string(v.size());
    k += ':';
    k += v;
  };
  auto num = [&add](auto v) { add(std::to_string(v)); };
  const Limits& l = spec.limits();
  add(spec.image());
  num(l.memory_bytes);
  num(l.pids);
  num(l.cpu_millis);
  num(l.disk_bytes);
  num(l.tmp_bytes);
  num(l.open_files);
  num(l.file_size_bytes);
  num(l.exec_timeout.count());
  num(spec.env().size());
  for (const auto& [name, value] : spec.env()) {
    add(name);
    add(value);
  }
  add(spec.workdir());
  add(spec.hostname());
  // Not the network mode or rules: nothing of a finished sandbox depends
  // on them (allowlist only adds listeners after the take), so networked
  // creates get warm sandboxes too.
  add(persistence_name(spec.persistence()));
  return k;
}

PoolStats BackendShared::pool_stats_locked() {
  const auto now = clock();
  PoolStats st;
  st.ready = pool.size();
  st.target = stopping ? 0 : sizer.target(now, live_count());
  st.rate = sizer.rate(now);
  st.made = pool_made;
  st.taken = pool_taken;
  st.shed = pool_shed;
  st.peak_ready = pool_peak;
  st.ahead = ahead_ready_locked();
  return st;
}

std::optional<ReadySandbox> BackendShared::take_ready(const std::string& key) {
  // Declared before the lock: the groups lifted below are let go after it
  // (the last reference to a failed make's group removes its directories).
  std::vector<std::shared_ptr<SandboxCgroup>> lifted;
  std::unique_lock lock(pool_mu);
  if (sizer.policy().min == 0) return std::nullopt;
  // Only creates the pool could serve count towards its rate: a burst of
  // other specs would leave a grown pool unused.
  if (key != pool_key_bytes) return std::nullopt;
  sizer.on_create(clock());
  pool_cv.notify_all();  // the refill may aim higher now
  for (;;) {
    if (!pool.empty()) {
      ReadySandbox r = std::move(pool.front());
      pool.pop_front();
      last_take = std::chrono::steady_clock::now();
      last_take_clock = clock();
      pool_cv.notify_all();  // the refill thread makes the next one
      lock.unlock();
      // An init that died while waiting (killed by hand, say) is readable;
      // one whose zygote died is on its way out (PDEATHSIG) even if not yet.
      struct pollfd pfd {
        r.init.pidfd.get(), POLLIN, 0
      };
      if (::poll(&pfd, 1, 0) == 0 && zygote.alive(r.init.zygote_generation)) {
        if (r.cgroup) share_or_warn(*r.cgroup, CpuShare::kNormal);  // in use from now on
        lock.lock();
        ++pool_taken;
        return r;
      }
      reaper.kill_and_release(r.id, std::move(r.init), std::move(r.cgroup));
      lock.lock();
      continue;
    }
    // The pool is empty but one is on its way: it is ready sooner than one
    // begun now would be, which would first wait for the clone in progress.
    // One create waits per sandbox in the making; the others of a burst
    // build their own meanwhile (on their own threads, in parallel).
    if (stopping || refill_failing || waiting >= refilling) return std::nullopt;
    ++waiting;
    lift_making_ahead_locked(lifted);  // demand outruns the pool: they are needed now
    pool_cv.notify_all();              // a refill held back for the last take starts now
    pool_cv.wait(lock);
    --waiting;
  }
}

void BackendShared::refill_loop() {
  std::unique_lock lock(pool_mu);
  for (;;) {
    if (stopping) return;
    const std::size_t target = sizer.target(clock(), live_count());
    pool_target = target;
    const std::size_t coming = pool.size() + refilling;
    // Shed only once nothing was taken for a while: a target that dips
    // between the takes of a steady stream would otherwise destroy ready
    // sandboxes only to make them again (the bench saw 93 of 357 shed).
    // Above the server's cap, though, at once.
    const bool idle = clock() - last_take_clock >= kShedAfterIdle;
    const std::size_t in_use = live_count();
    const bool over_cap =
        sizer.policy().server_cap > 0 && coming + in_use > sizer.policy().server_cap;
    if (coming > target && !pool.empty() && (idle || over_cap)) {
      // Idle: the ones beyond the target go (the newest first: the oldest
      // have waited longest and their pages are the coldest either way).
      std::vector<ReadySandbox> shed;
      for (std::size_t excess = coming - target; excess > 0 && !pool.empty(); --excess) {
        shed.push_back(std::move(pool.back()));
        pool.pop_back();
        ++pool_shed;
      }
      pool_cv.notify_all();
      lock.unlock();
      for (auto& r : shed) reaper.kill_and_release(r.id, std::move(r.init), std::move(r.cgroup));
      lock.lock();
      continue;
    }
    // The budget counts the started commands too: one more sandbox must fit
    // beside them (the sizer's ceiling counts sandboxes only).
    const bool budget_full = pool_bytes_locked(coming + 1) > sizer.policy().memory_budget_bytes;
    if (coming >= target || budget_full) {
      // (Above the target but not idle yet: look again in a while.)
      // Look again when the burst has faded a little (the pool may shrink),
      // or when a create, a destroy, a finished refill or a test says so.
      const bool above_floor = pool.size() > sizer.policy().min;
      const auto period = std::max(sizer.policy().hold / 8, std::chrono::milliseconds(1));
      if (above_floor)
        pool_cv.wait_for(lock, period);
      else
        pool_cv.wait(lock);
      continue;
    }
    // A sandbox just taken is usually given its first command right away:
    // while the pool still has one ready, making the next one (a few ms of
    // CPU) waits a moment so as not to compete with it. (Also in a burst:
    // paced one-shots count as a small one, and without the pause their
    // round trip grew by 1.9 ms in tools_bench.)
    // The lock is let go while pausing, so look again afterwards: the other
    // refill thread may have begun one meanwhile (the pool overshot its
    // maximum by one without this).
    if (!pool.empty() && waiting == 0 &&
        std::chrono::steady_clock::now() < last_take + kRefillDelay) {
      pool_cv.wait_until(lock, last_take + kRefillDelay, [&] { return stopping || waiting > 0; });
      continue;
    }
    ++refilling;
    lock.unlock();
    Result<ReadySandbox> r = Error::make(ErrorCode::kInternal, "unset");
    if (pool_spec.image() == "host") {
      auto begun = begin_sandbox(pool_spec.limits(), nullptr, Making::kAhead);
      r = begun ? finish_sandbox(std::move(*begun), pool_spec)
                : Result<ReadySandbox>(begun.take_error());
    } else {
      // An image pool: the image as the store has it now (a create checks
      // the id it was made from).
      auto image = images
                       ? images(pool_spec.image())
                       : Result<ImageRoot>(Error::make(ErrorCode::kUnavailable, "no image store"));
      auto ids = image ? resolve_image_user(*image) : Result<ImageIds>(image.error());
      r = ids ? make_image_sandbox(pool_spec, *image, *ids, nullptr, {}, Making::kAhead)
              : Result<ReadySandbox>(ids.error());
    }
    lock.lock();
    --refilling;
    // Made (or failed, its group gone): no longer one to lift.
    std::erase_if(making_ahead, [&](const std::weak_ptr<SandboxCgroup>& w) {
      auto cg = w.lock();
      return !cg || (r && cg == r->cgroup);
    });
    // At most one entry per make in progress (a failed make's group is gone
    // by now; this only keeps the bound should that ever change).
    while (making_ahead.size() > refilling) making_ahead.erase(making_ahead.begin());
    refill_failing = !r;
    if (r) {
      pool.push_back(std::move(*r));
      // Before any create can take it (a waiting one included).
      if (ahead_command && ahead_affordable_locked()) start_ahead_or_warn(pool.back());
      ++pool_made;
      pool_peak = std::max(pool_peak, pool.size());
    }
    pool_cv.notify_all();
    if (!r && !stopping && pool_spec.image() != "host" && r.error().code == ErrorCode::kNotFound) {
      // The pool's image left the store: no retrying it every second.
      spdlog::warn("native sandbox: no warm pool from now on: {}", r.error().message());
      pool_cv.wait(lock, [&] { return stopping; });
      return;
    }
    if (!r && !stopping) {
      // Creates go on without the pool meanwhile (and report the cause).
      spdlog::warn("native sandbox: making a warm sandbox failed: {}", r.error().message());
      pool_cv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
    }
  }
}

std::size_t BackendShared::ahead_ready_locked() const {
  return static_cast<std::size_t>(
      std::count_if(pool.begin(), pool.end(), [](const ReadySandbox& r) { return r.ahead; }));
}

std::uint64_t BackendShared::pool_bytes_locked(std::size_t sandboxes) const {
  return sandboxes * kPooledSandboxBytes + ahead_ready_locked() * kAheadCommandBytes;
}

bool BackendShared::ahead_affordable_locked() const {
  // Room is kept for the pool the sizer aims for: a burst's sandboxes come
  // before the commands started in them.
  const std::size_t sandboxes = std::max(pool.size() + refilling, pool_target);
  return pool_bytes_locked(sandboxes) + kAheadCommandBytes <= sizer.policy().memory_budget_bytes;
}

void BackendShared::start_ahead_or_warn(ReadySandbox& r) {
  // Not starting it costs only its start-up later: the sandbox is fine.
  if (auto s = start_ahead(r, *ahead_command, pool_spec); !s)
    spdlog::warn("native sandbox: starting a command ahead failed: {}", s.error().message());
  else
    r.ahead = true;
}

}  // namespace sandcastle::sandbox::native

// cgroups: one group per sandbox for memory, pids and CPU quota. Detected at
// start: cgroup v2 when its controllers are delegated to us, otherwise the v1
// hierarchies of a hybrid host, otherwise none (rlimits remain).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/spec.h"

namespace sandcastle::sandbox::native {

enum class CgroupVersion { kNone, kV1, kV2 };
const char* cgroup_version_name(CgroupVersion v);

// A group's claim on the CPU against the other sandboxes' groups. Work done
// ahead of or after demand (a warm sandbox being made or waiting, a killed
// one exiting) runs at kBackground, so it takes what sandboxes in use leave
// (v1 cpu.shares 2 of 1024; v2 cpu.weight 1 of 100, where cpu is delegated).
enum class CpuShare { kNormal, kBackground };

struct CgroupSupport {
  CgroupVersion version = CgroupVersion::kNone;
  // v1: controller -> directory our groups are created in (our own group).
  std::map<std::string, std::string> v1_parents;
  std::string v2_parent;  // v2: directory our groups are created in
  std::string why_not;    // when kNone: the reason, for doctor and logs
};

// Probes /proc/self/cgroup and the mounted hierarchies; needs write access
// to memory and pids (cpu is used when present).
CgroupSupport detect_cgroups();

class SandboxCgroup {
 public:
  static Result<std::unique_ptr<SandboxCgroup>> create(const CgroupSupport& support,
                                                       const std::string& name, const Limits& limits);
  ~SandboxCgroup();
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;

  CgroupVersion version() const { return version_; }
  // Writes memory, pids and CPU limits; values already in place are skipped
  // (a pre-created group is adjusted to its sandbox's spec when claimed).
  Status apply_limits(const Limits& limits);
  // v2: directory fd for clone3(CLONE_INTO_CGROUP); -1 on v1.
  int v2_dir_fd() const { return v2_fd_.get(); }
  // v1: moves a process into every controller's group (done before the
  // child may run anything, so nothing escapes accounting).
  Status add_process(pid_t pid);

  // Sets the group's CpuShare; no-op without a cpu controller (and when
  // it already has that share).
  Status set_cpu_share(CpuShare share);
  CpuShare cpu_share() const { return cpu_share_; }

  std::uint64_t oom_kills() const;
  std::uint64_t memory_current() const;
  std::uint64_t memory_peak() const;
  std::uint64_t cpu_usage_us() const;
  std::uint32_t process_count() const;

  // Path of a control file ("" when that controller has no group).
  std::string file(const std::string& controller, const std::string& name) const;

  // Kills what is left (v2: cgroup.kill) and removes the directories.
  Status remove();
  // Readies an emptied group for another sandbox (v1 only): no process is
  // left, and the CPU time, peak and failure counters start from zero again.
  // Reuse spares a memory cgroup's creation and teardown, the costliest part
  // of a sandbox's life cycle on such hosts (the kernel sizes every new memcg
  // by the highest shrinker count it has seen), and leaves no dying memcg
  // behind. Fails (and the group must be removed) when anything is left.
  Status recycle();

 private:
  SandboxCgroup() = default;
  CgroupVersion version_ = CgroupVersion::kNone;
  std::map<std::string, std::string> dirs_;  // controller (or "") -> directory
  UniqueFd v2_fd_;
  // memory.events (v2) or memory.oom_control (v1), kept open: every exec
  // reads it (oom_kills), and a pread costs no path walk. -1: not opened.
  UniqueFd oom_fd_;
  // cpu.weight (v2) or cpu.shares (v1), opened on the first set_cpu_share
  // (a pooled sandbox's, made in the background) and kept: the take that
  // raises the share is on create_sandbox's path. -1: not yet.
  UniqueFd cpu_fd_;
  bool removed_ = false;
  bool limits_applied_ = false;
  CpuShare cpu_share_ = CpuShare::kNormal;  // a new group's
  Limits applied_{};
};

// Leftover groups of dead sandcastle processes (named sandcastle-<pid>-*).
std::vector<std::string> find_stale_cgroups(const CgroupSupport& support);
Status remove_cgroup_dir(const std::string& dir, CgroupVersion version);

}  // namespace sandcastle::sandbox::native

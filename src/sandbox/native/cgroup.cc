#include "sandbox/native/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr unsigned long kCgroup2Magic = 0x63677270;
constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

bool is_cgroup2(const std::string& path) {
  struct statfs sf {};
  return ::statfs(path.c_str(), &sf) == 0 && static_cast<unsigned long>(sf.f_type) == kCgroup2Magic;
}

bool writable_dir(const std::string& path) { return ::access(path.c_str(), W_OK | X_OK) == 0; }

// /proc/self/cgroup lines: "hierarchy-id:controller[,controller]:path".
std::map<std::string, std::string> own_groups() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::stringstream ss(ctrls);
    std::string c;
    if (ctrls.empty()) out[""] = path;
    while (std::getline(ss, c, ',')) out[c] = path;
  }
  return out;
}

std::uint64_t read_u64(const std::string& path) {
  std::string s = read_small_file(path);
  return s.empty() ? 0 : std::strtoull(s.c_str(), nullptr, 10);
}

// "key value" lines (memory.events, memory.oom_control, cpu.stat).
// The value of `key` in a cgroup file of "key value" lines (memory.events,
// cpu.stat), or 0. Read before every exec (oom_kills): no stream machinery.
std::uint64_t keyed_value(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const std::size_t eol = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ')
      continue;
    std::uint64_t v = 0;
    const char* first = line.data() + key.size() + 1;
    const char* last = line.data() + line.size();
    return std::from_chars(first, last, v).ec == std::errc{} ? v : 0;
  }
  return 0;
}

std::uint64_t read_keyed(const std::string& path, const std::string& key) {
  return keyed_value(read_small_file(path), key);
}

bool pid_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

const char* cgroup_version_name(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kNone: return "none";
    case CgroupVersion::kV1: return "v1";
    case CgroupVersion::kV2: return "v2";
  }
  return "?";
}

CgroupSupport detect_cgroups() {
  CgroupSupport s;
  auto own = own_groups();
  // Pure v2 (systemd delegation): our group must offer memory and pids to
  // children, and be writable by us.
  if (is_cgroup2(kCgroupRoot) && own.count("")) {
    std::string dir = std::string(kCgroupRoot) + own[""];
    std::string ctl = read_small_file(dir + "/cgroup.subtree_control");
    if (ctl.find("memory") != std::string::npos && ctl.find("pids") != std::string::npos &&
        writable_dir(dir)) {
      s.version = CgroupVersion::kV2;
      s.v2_parent = dir;
      return s;
    }
    s.why_not = "cgroup v2: memory/pids not delegated in " + dir + "/cgroup.subtree_control";
    return s;
  }
  // Hybrid/v1: one hierarchy per controller.
  std::string missing;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    std::string base = std::string(kCgroupRoot) + "/" + c;
    struct stat st {};
    if (::stat(base.c_str(), &st) != 0 || !own.count(c)) {
      if (std::string(c) == "memory" || std::string(c) == "pids") missing += std::string(" ") + c;
      continue;
    }
    std::string dir = base + own[c];
    if (dir.back() == '/') dir.pop_back();
    if (!writable_dir(dir)) {
      if (std::string(c) == "memory" || std::string(c) == "pids") missing += std::string(" ") + c;
      continue;
    }
    s.v1_parents[c] = dir;
  }
  if (missing.empty()) {
    s.version = CgroupVersion::kV1;
  } else {
    s.v1_parents.clear();
    s.why_not = "cgroup v1: no writable hierarchy for" + missing + " (needs root or delegation)";
  }
  return s;
}

Result<std::unique_ptr<SandboxCgroup>> SandboxCgroup::create(const CgroupSupport& support,
                                                             const std::string& name,
                                                             const Limits& limits) {
  std::unique_ptr<SandboxCgroup> cg(new SandboxCgroup());
  cg->version_ = support.version;
  auto make = [&](const std::string& key, const std::string& parent) -> Status {
    std::string dir = parent + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Error::from_errno("mkdir " + dir);
    cg->dirs_[key] = dir;
    return {};
  };
  if (support.version == CgroupVersion::kV2) {
    if (auto st = make("", support.v2_parent); !st) return st.take_error();
    cg->v2_fd_ = UniqueFd(::open(cg->dirs_[""].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!cg->v2_fd_) return Error::from_errno("open " + cg->dirs_[""]);
    (void)write_small_file(cg->dirs_[""] + "/memory.swap.max", "0");  // absent without swap accounting
  } else if (support.version == CgroupVersion::kV1) {
    for (const auto& [ctrl, parent] : support.v1_parents)
      if (auto st = make(ctrl, parent); !st) return st.take_error();
  } else {
    return Error::make(ErrorCode::kUnavailable, "no cgroups");
  }
  if (auto st = cg->apply_limits(limits); !st) return st.take_error();
  const std::string oom = cg->version_ == CgroupVersion::kV2
                              ? cg->file("", "memory.events")
                              : cg->file("memory", "memory.oom_control");
  if (!oom.empty()) cg->oom_fd_ = UniqueFd(::open(oom.c_str(), O_RDONLY | O_CLOEXEC));
  return cg;
}

Status SandboxCgroup::apply_limits(const Limits& limits) {
  auto set = [&](const std::string& key, const std::string& f, const std::string& v) -> Status {
    return write_small_file(dirs_[key] + "/" + f, v);
  };
  bool first = !limits_applied_;
  bool memory = first || applied_.memory_bytes != limits.memory_bytes;
  bool pids = first || applied_.pids != limits.pids;
  bool cpu = first || applied_.cpu_millis != limits.cpu_millis;
  if (version_ == CgroupVersion::kV2) {
    if (memory)
      if (auto st = set("", "memory.max", std::to_string(limits.memory_bytes)); !st) return st;
    if (pids)
      if (auto st = set("", "pids.max", std::to_string(limits.pids)); !st) return st;
    if (cpu) {
      std::string quota = limits.cpu_millis ? std::to_string(limits.cpu_millis * 100) : "max";
      (void)set("", "cpu.max", quota + " 100000");  // cpu may not be delegated
    }
  } else if (version_ == CgroupVersion::kV1) {
    if (memory)
      if (auto st = set("memory", "memory.limit_in_bytes", std::to_string(limits.memory_bytes)); !st)
        return st;
    if (pids)
      if (auto st = set("pids", "pids.max", std::to_string(limits.pids)); !st) return st;
    if (cpu && dirs_.count("cpu")) {
      if (first) (void)set("cpu", "cpu.cfs_period_us", "100000");
      std::string quota = limits.cpu_millis ? std::to_string(limits.cpu_millis * 100) : "-1";
      // A fresh group is unlimited: nothing to write for "unlimited" then.
      if (!(first && limits.cpu_millis == 0))
        if (auto st = set("cpu", "cpu.cfs_quota_us", quota); !st) return st;
    }
  }
  applied_ = limits;
  limits_applied_ = true;
  return {};
}

SandboxCgroup::~SandboxCgroup() { (void)remove(); }

std::string SandboxCgroup::file(const std::string& controller, const std::string& name) const {
  auto it = dirs_.find(version_ == CgroupVersion::kV2 ? "" : controller);
  return it == dirs_.end() ? std::string() : it->second + "/" + name;
}

Status SandboxCgroup::add_process(pid_t pid) {
  if (version_ != CgroupVersion::kV1) return {};
  for (const auto& [ctrl, dir] : dirs_)
    if (auto st = write_small_file(dir + "/cgroup.procs", std::to_string(pid)); !st) return st;
  return {};
}

Status SandboxCgroup::set_cpu_share(CpuShare share) {
  if (share == cpu_share_ || removed_) return {};
  const bool bg = share == CpuShare::kBackground;
  if (!cpu_fd_) {
    std::string f =
        version_ == CgroupVersion::kV2 ? file("", "cpu.weight") : file("cpu", "cpu.shares");
    if (f.empty()) return {};
    if (version_ == CgroupVersion::kV2 && ::access(f.c_str(), F_OK) != 0)
      return {};  // cpu not delegated
    cpu_fd_ = UniqueFd(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
    if (!cpu_fd_) return Error::from_errno("open " + f);
  }
  const std::string_view v =
      version_ == CgroupVersion::kV2 ? (bg ? "1" : "100") : (bg ? "2" : "1024");
  if (::write(cpu_fd_.get(), v.data(), v.size()) != static_cast<ssize_t>(v.size()))
    return Error::from_errno("write cpu share");
  cpu_share_ = share;
  return {};
}

std::uint64_t SandboxCgroup::oom_kills() const {
  if (oom_fd_) {
    char buf[1024];
    const ssize_t n = ::pread(oom_fd_.get(), buf, sizeof buf - 1, 0);
    if (n >= 0) return keyed_value(std::string_view(buf, static_cast<std::size_t>(n)), "oom_kill");
  }
  if (version_ == CgroupVersion::kV2) return read_keyed(file("", "memory.events"), "oom_kill");
  return read_keyed(file("memory", "memory.oom_control"), "oom_kill");
}

std::uint64_t SandboxCgroup::memory_current() const {
  if (version_ == CgroupVersion::kV2) return read_u64(file("", "memory.current"));
  return read_u64(file("memory", "memory.usage_in_bytes"));
}

std::uint64_t SandboxCgroup::memory_peak() const {
  if (version_ == CgroupVersion::kV2) return read_u64(file("", "memory.peak"));
  return read_u64(file("memory", "memory.max_usage_in_bytes"));
}

std::uint64_t SandboxCgroup::cpu_usage_us() const {
  if (version_ == CgroupVersion::kV2) return read_keyed(file("", "cpu.stat"), "usage_usec");
  return read_u64(file("cpuacct", "cpuacct.usage")) / 1000;
}

std::uint32_t SandboxCgroup::process_count() const {
  return static_cast<std::uint32_t>(read_u64(file("pids", "pids.current")));
}

Status SandboxCgroup::remove() {
  if (removed_) return {};
  removed_ = true;
  Status result;
  for (const auto& [ctrl, dir] : dirs_)
    if (auto st = remove_cgroup_dir(dir, version_); !st && result) result = st;
  return result;
}

Status SandboxCgroup::recycle() {
  if (removed_ || version_ != CgroupVersion::kV1)
    return Error::make(ErrorCode::kUnavailable, "cgroup: only v1 groups are reused");
  // Every controller's group must be empty: init was reaped after the last
  // process of its PID namespace, so anything here is not ours to inherit.
  for (const auto& [ctrl, dir] : dirs_)
    if (!read_small_file(dir + "/cgroup.procs").empty())
      return Error::make(ErrorCode::kUnavailable, "cgroup " + dir + " still has processes");
  // Reset to zero ("0" sets the peak to the current usage: what is left is
  // reclaimable cache the next sandbox's limit can push out).
  for (auto [ctrl, name] : {std::pair{"memory", "memory.max_usage_in_bytes"}, {"memory", "memory.failcnt"},
                            {"cpuacct", "cpuacct.usage"}}) {
    if (!dirs_.count(ctrl)) continue;
    if (auto st = write_small_file(dirs_[ctrl] + "/" + name, "0"); !st) return st;
  }
  return {};
}

Status remove_cgroup_dir(const std::string& dir, CgroupVersion version) {
  if (version == CgroupVersion::kV2) (void)write_small_file(dir + "/cgroup.kill", "1");
  // rmdir fails with EBUSY while exiting tasks are still being torn down.
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
    if (errno != EBUSY) break;
    if (version == CgroupVersion::kV1) {
      std::istringstream procs(read_small_file(dir + "/cgroup.procs"));
      pid_t p;
      while (procs >> p) ::kill(p, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Error::from_errno("rmdir " + dir);
}

std::vector<std::string> find_stale_cgroups(const CgroupSupport& support) {
  std::vector<std::string> parents;
  if (support.version == CgroupVersion::kV2) parents.push_back(support.v2_parent);
  for (const auto& [c, p] : support.v1_parents) parents.push_back(p);
  std::vector<std::string> out;
  for (const auto& parent : parents) {
    for (const auto& name : list_dir(parent)) {
      if (auto owner = owner_pid(name, "sandcastle-"); owner && !pid_alive(*owner))
        out.push_back(parent + "/" + name);
    }
  }
  return out;
}

}  // namespace sandcastle::sandbox::native

#include "sandbox/native/save_freeze.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr int kMovePasses = 32;
constexpr auto kFreezeWait = std::chrono::seconds(5);
constexpr auto kAttemptWait = std::chrono::milliseconds(250);

std::set<pid_t> read_pids(const std::string& procs) {
  std::set<pid_t> out;
  std::ifstream in(procs);
  long v = 0;
  while (in >> v)
    if (v > 0) out.insert(static_cast<pid_t>(v));
  return out;
}

std::string dir_of(const std::string& file) {
  return file.substr(0, file.rfind('/'));
}

// The server's own group in the v1 freezer hierarchy, as a directory.
std::string own_v1_freezer() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream ctrls(line.substr(a + 1, b - a - 1));
    std::string c;
    while (std::getline(ctrls, c, ','))
      if (c == "freezer") return "/sys/fs/cgroup/freezer" + line.substr(b + 1);
  }
  return {};
}

}  // namespace

Status SaveFreeze::move_all(pid_t worker) {
  // A process the kernel accepted but still lists outside the group is
  // exiting (a killed one not yet gone is not moved, without an error): it
  // neither runs nor forks, so it is not taken for a new one pass after pass.
  std::set<pid_t> tried;
  for (int pass = 0; pass < kMovePasses; ++pass) {
    // The source first, then the group: a process the sandbox forks between
    // the two reads from one already moved is born in the group (v1 lists
    // it in both) and is not taken for a new one, which a busy fork loop
    // would otherwise make of every pass.
    const std::set<pid_t> source = read_pids(source_procs_);
    const std::set<pid_t> in_group = read_pids(group_ + "/cgroup.procs");
    bool moved = false;
    for (pid_t p : source) {
      if (p == worker || in_group.count(p) || !tried.insert(p).second) continue;
      // A process that exited meanwhile (ESRCH) is no matter.
      if (write_small_file(group_ + "/cgroup.procs", std::to_string(p))) moved = true;
    }
    if (!moved) return {};
  }
  return Error::make(ErrorCode::kFailedPrecondition,
                     "the sandbox kept forking while its processes were being frozen");
}

Result<std::unique_ptr<SaveFreeze>> SaveFreeze::freeze(const SandboxCgroup* cgroup, pid_t worker,
                                                       const std::string& sandbox_id) {
  if (!cgroup || cgroup->version() == CgroupVersion::kNone)
    return Error::make(ErrorCode::kFailedPrecondition, "the sandbox has no cgroup to freeze");
  std::unique_ptr<SaveFreeze> f(new SaveFreeze);
  f->version_ = cgroup->version();
  if (f->version_ == CgroupVersion::kV1) {
    f->source_procs_ = cgroup->file("memory", "cgroup.procs");
    f->home_ = own_v1_freezer();
    if (f->source_procs_.empty() || f->home_.empty() || ::access(f->home_.c_str(), W_OK) != 0)
      return Error::make(ErrorCode::kFailedPrecondition,
                         "no writable cgroup v1 freezer hierarchy for the server");
    f->group_ = f->home_ + "/sandcastle-save-" + sandbox_id;
  } else {
    f->source_procs_ = cgroup->file("", "cgroup.procs");
    f->home_ = dir_of(f->source_procs_);
    f->group_ = f->home_ + "/save";
  }
  // One left by a save or freeze that could not empty it: reused if empty.
  int made = ::mkdir(f->group_.c_str(), 0700);
  if (made != 0 && errno == EEXIST && ::rmdir(f->group_.c_str()) == 0)
    made = ::mkdir(f->group_.c_str(), 0700);
  if (made != 0) {
    const int err = errno;
    f->group_.clear();
    return Error::from_errno("make the freezer group for the save", err);
  }
  if (auto st = f->move_all(worker); !st) return st.take_error();
  const bool v1 = f->version_ == CgroupVersion::kV1;
  const std::string control = f->group_ + (v1 ? "/freezer.state" : "/cgroup.freeze");
  const auto deadline = std::chrono::steady_clock::now() + kFreezeWait;
  // A freeze that does not complete soon is let go and tried again: a shell
  // that vforked just as its group froze can wait on a child that froze
  // first (seen with dash's vfork loop on cgroup v1, ~1 in 5 tries).
  for (int attempt = 0;; ++attempt) {
    if (auto st = write_small_file(control, v1 ? "FROZEN" : "1"); !st) return st.take_error();
    // A fork that raced the last pass is caught now (moving a process into
    // a frozen group freezes it).
    if (auto st = f->move_all(worker); !st) return st.take_error();
    const auto give_up = std::min(deadline, std::chrono::steady_clock::now() + kAttemptWait);
    for (;;) {
      const std::string state =
          read_small_file(f->group_ + (v1 ? "/freezer.state" : "/cgroup.events"));
      if (v1 ? state.rfind("FROZEN", 0) == 0 : state.find("frozen 1") != std::string::npos)
        return f;
      if (std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    (void)write_small_file(control, v1 ? "THAWED" : "0");
    if (auto st = f->move_all(worker); !st) return st.take_error();
  }
  // Which ones, and where they sleep (the first few): the reason.
  std::string who;
  int shown = 0;
  for (pid_t p : read_pids(f->group_ + "/cgroup.procs")) {
    if (++shown > 8) break;
    const std::string proc = "/proc/" + std::to_string(p);
    std::string comm = read_small_file(proc + "/comm");
    comm.resize(std::min(comm.size(), comm.find('\n')));
    who += ' ';
    who += std::to_string(p);
    who += ' ';
    who += comm;
    who += " (";
    who += read_small_file(proc + "/wchan");
    who += ')';
  }
  return Error::make(ErrorCode::kTimeout, "the sandbox's processes did not freeze in 5 s:" + who);
}

SaveFreeze::~SaveFreeze() {
  if (group_.empty()) return;
  const bool v1 = version_ == CgroupVersion::kV1;
  // Back where they were while the group is still frozen: each one thaws as
  // it leaves (a task moved takes its new group's state), and those not yet
  // moved cannot fork into the group meanwhile, so it empties (thawed
  // first, a fork loop refilled it faster than the passes emptied it).
  for (int pass = 0; pass < kMovePasses; ++pass) {
    auto left = read_pids(group_ + "/cgroup.procs");
    if (left.empty()) break;
    for (pid_t p : left) (void)write_small_file(home_ + "/cgroup.procs", std::to_string(p));
  }
  (void)write_small_file(group_ + (v1 ? "/freezer.state" : "/cgroup.freeze"), v1 ? "THAWED" : "0");
  (void)::rmdir(group_.c_str());
}

std::vector<std::string> sweep_stale_save_freezers() {
  std::vector<std::string> removed;
  const std::string home = own_v1_freezer();
  if (home.empty()) return removed;
  constexpr std::string_view kPrefix = "sandcastle-save-sandcastle-";
  for (const auto& name : list_dir(home)) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const auto owner = owner_pid(std::string_view(name).substr(kPrefix.size() - 11), "sandcastle-");
    if (!owner || ::kill(*owner, 0) == 0 || errno != ESRCH) continue;
    // A server killed while its sandbox was frozen: the sandbox's processes
    // got their SIGKILL but a frozen v1 task acts on it only once thawed.
    const std::string group = home + "/" + name;
    (void)write_small_file(group + "/freezer.state", "THAWED");
    // Dying ones stay listed (and the group busy) until the kernel is done
    // with them: up to a second.
    for (int attempt = 0; attempt < 200; ++attempt) {
      for (pid_t p : read_pids(group + "/cgroup.procs"))
        (void)write_small_file(home + "/cgroup.procs", std::to_string(p));
      if (::rmdir(group.c_str()) == 0) {
        removed.push_back(group);
        break;
      }
      if (errno != EBUSY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return removed;
}

}  // namespace sandcastle::sandbox::native

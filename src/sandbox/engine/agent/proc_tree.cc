#include "sandbox/engine/agent/proc_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

namespace sandcastle::sandbox::engine::agent {
namespace {

// The whole of a small /proc file (at most `cap` bytes), or "" on error.
std::string read_small(const std::string& path, std::size_t cap) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  while (out.size() < cap) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

bool is_decimal(const char* s) {
  if (*s == '\0') return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (!is_decimal(e->d_name)) continue;
    std::string list = read_small(task + "/" + e->d_name + "/children", 1 << 20);
    const char* p = list.c_str();
    while (*p) {
      char* end = nullptr;
      long v = std::strtol(p, &end, 10);
      if (end == p) break;
      if (v > 0) out.push_back(static_cast<pid_t>(v));
      p = end;
    }
  }
  ::closedir(d);
  return out;
}

pid_t session_of(pid_t pid) {
  std::string stat = read_small("/proc/" + std::to_string(pid) + "/stat", 4096);
  // "pid (comm) state ppid pgrp session ...": comm may hold spaces and ')'.
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  // After the name: state, ppid, pgrp, session.
  const char* p = stat.c_str() + close + 1;
  while (*p == ' ') ++p;
  if (*p == '\0') return -1;
  ++p;  // state
  long field = -1;
  for (int i = 0; i < 3; ++i) {
    char* end = nullptr;
    field = std::strtol(p, &end, 10);
    if (end == p) return -1;
    p = end;
  }
  return static_cast<pid_t>(field);
}

std::size_t kill_trees(const std::vector<pid_t>& roots, std::set<pid_t>& seen) {
  std::size_t fresh = 0;
  std::set<pid_t> walked;
  std::vector<pid_t> stack = roots;
  while (!stack.empty()) {
    pid_t pid = stack.back();
    stack.pop_back();
    if (pid <= 1 || !walked.insert(pid).second) continue;
    // Children are read before the kill: a dead parent's children move to
    // the agent (the subreaper) and out of this walk.
    for (pid_t c : children_of(pid)) stack.push_back(c);
    ::kill(pid, SIGKILL);
    if (seen.insert(pid).second) ++fresh;
  }
  return fresh;
}

std::uint32_t count_processes() {
  std::uint32_t n = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (struct dirent* e = ::readdir(d))
      if (is_decimal(e->d_name)) ++n;
    ::closedir(d);
  }
  return n;
}

std::uint64_t bytes_used(const char* path) {
  struct statfs sf {};
  if (::statfs(path, &sf) != 0) return 0;
  return static_cast<std::uint64_t>(sf.f_blocks - sf.f_bfree) *
         static_cast<std::uint64_t>(sf.f_bsize);
}

}  // namespace sandcastle::sandbox::engine::agent

#include "sandbox/engine/agent/peer_owner.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "sandbox/engine/agent/proc_tree.h"

namespace sandcastle::sandbox::engine::agent {
namespace {

struct Closer {
  void operator()(FILE* f) const { (void)std::fclose(f); }
  void operator()(DIR* d) const { ::closedir(d); }
};

// One "ADDR:PORT" of /proc/net/tcp (the address as the kernel's %08X of
// the raw in_addr) or /proc/net/tcp6 (four such words; an IPv4 peer of a
// dual-stack socket is ::ffff:a.b.c.d). Matches when it is `want`.
bool same_endpoint(const char* field, const sockaddr_in& want) {
  const char* colon = std::strchr(field, ':');
  if (colon == nullptr) return false;
  const std::size_t len = static_cast<std::size_t>(colon - field);
  char word[9] = {};
  if (len == 8) {
    std::memcpy(word, field, 8);
  } else if (len == 32) {
    if (std::strncmp(field, "0000000000000000FFFF0000", 24) != 0) return false;
    std::memcpy(word, field + 24, 8);
  } else {
    return false;
  }
  char* end = nullptr;
  const unsigned long addr = std::strtoul(word, &end, 16);
  if (*end != '\0' || static_cast<std::uint32_t>(addr) != want.sin_addr.s_addr) return false;
  const unsigned long port = std::strtoul(colon + 1, &end, 16);
  return end != colon + 1 && port == ntohs(want.sin_port);
}

// The inode of the socket whose local end is `client` and remote `server`
// (0: not in this table, or an orphan no process holds).
unsigned long find_inode(const char* table, const sockaddr_in& client, const sockaddr_in& server,
                         bool& readable) {
  std::unique_ptr<FILE, Closer> f(std::fopen(table, "re"));
  if (!f) return 0;
  readable = true;
  char line[512];
  for (std::size_t n = 0; n < kMaxSocketTableLines && std::fgets(line, sizeof line, f.get()); ++n) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    char local[64], rem[64];
    unsigned long inode = 0;
    // The kernel's own table; a malformed line fails the count and is skipped.
    if (std::sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, rem, &inode) != 3)  // NOLINT(cert-err34-c)
      continue;
    if (inode != 0 && same_endpoint(local, client) && same_endpoint(rem, server)) return inode;
  }
  return 0;
}

}  // namespace

bool connection_from_session(const sockaddr_in& client, const sockaddr_in& server, pid_t sid,
                             std::string& why) {
  // The tables of the session leader's network namespace (its own, or
  // the container's).
  const std::string net = "/proc/" + std::to_string(sid) + "/net/";
  bool readable = false;
  unsigned long inode = find_inode((net + "tcp").c_str(), client, server, readable);
  if (inode == 0) inode = find_inode((net + "tcp6").c_str(), client, server, readable);
  if (inode == 0) {
    why = readable ? "its socket is not in " + net + "tcp" : net + "tcp cannot be read";
    return false;
  }
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  std::unique_ptr<DIR, Closer> proc(::opendir("/proc"));
  if (!proc) {
    why = "/proc cannot be read";
    return false;
  }
  std::size_t scanned = 0;
  std::size_t holders = 0;
  // Every process of the namespace: a socket held in the session and
  // outside it too (passed on) is refused.
  while (struct dirent* p = ::readdir(proc.get())) {
    if (!is_decimal(p->d_name)) continue;
    const std::string fd_dir = std::string("/proc/") + p->d_name + "/fd";
    std::unique_ptr<DIR, Closer> fds(::opendir(fd_dir.c_str()));
    if (!fds) continue;  // gone, or not ours to read (another uid, not dumpable)
    bool holds = false;
    while (struct dirent* e = ::readdir(fds.get())) {
      if (!is_decimal(e->d_name)) continue;
      if (++scanned > kMaxFdsScanned) {
        why = "too many descriptors to search";
        return false;
      }
      char target[64];
      const std::string link = fd_dir + "/" + e->d_name;
      ssize_t n = ::readlink(link.c_str(), target, sizeof target);
      if (n > 0 && static_cast<std::size_t>(n) == want.size() &&
          std::memcmp(target, want.data(), want.size()) == 0) {
        holds = true;
        break;
      }
    }
    if (!holds) continue;
    const pid_t pid = static_cast<pid_t>(std::strtol(p->d_name, nullptr, 10));
    const pid_t s = session_of(pid);
    if (s != sid) {
      why = "held by process " + std::to_string(pid) + " of session " + std::to_string(s);
      return false;
    }
    ++holders;
  }
  if (holders == 0) {
    why = "no process found holding its socket";
    return false;
  }
  return true;
}

}  // namespace sandcastle::sandbox::engine::agent

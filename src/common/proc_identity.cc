#include "common/proc_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace sandcastle {

namespace {

// Field 22 of /proc/<pid>/stat, read past the command name (which may hold
// spaces and parentheses): empty when the process does not exist.
std::string start_time(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return {};
  auto close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  for (int i = 3; i <= 22 && fields >> f; ++i)
    if (i == 22) return f;
  return {};
}

}  // namespace

std::string self_identity() {
  const std::string pid = std::to_string(::getpid());
  return pid + ":" + start_time(pid);
}

bool identity_alive(const std::string& identity) {
  auto colon = identity.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 10) return false;
  const std::string pid = identity.substr(0, colon);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return false;
  const std::string start = start_time(pid);
  return !start.empty() && start == identity.substr(colon + 1);
}

}  // namespace sandcastle

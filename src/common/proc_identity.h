// A process named so that a recycled pid does not pass for it: "pid:start"
// with the start time from /proc/<pid>/stat (clock ticks since boot). Used
// to tell whether the server that wrote a record is still running.
#pragma once

#include <string>

namespace sandcastle {

// This process's identity.
std::string self_identity();
// Whether the process `identity` names is alive (false for a malformed one).
bool identity_alive(const std::string& identity);

}  // namespace sandcastle

// Why recently ended sandboxes ended, by id, so that a call naming one is
// told what happened to it ("its HTTP session ended") and how to avoid it,
// instead of a bare "not found". Bounded: the oldest are forgotten first.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace sandcastle::service {

class EndedSandboxes {
 public:
  explicit EndedSandboxes(size_t capacity = 4096) : capacity_(capacity) {}

  // Records that sandbox `id` ended for `reason` (a phrase: "its HTTP
  // session ended"); a later record of the same id replaces it.
  void remember(const std::string& id, std::string reason);
  std::optional<std::string> reason(const std::string& id) const;
  size_t size() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> reasons_;
  std::deque<std::string> order_;  // ids in the order first recorded
};

// The reason recorded when a keyless HTTP session's sandboxes are closed
// with it, with what keeps them next time.
inline constexpr const char* kEndedWithSession =
    "it ended when the HTTP session that created it ended: without an API key a sandbox belongs to "
    "its "
    "session and is destroyed with it. To keep sandboxes across sessions and reconnects, connect "
    "with an "
    "API key (`sandcastle keys create`, then 'Authorization: Bearer <key>'): a key's sandboxes "
    "outlive its "
    "sessions until closed or idle past their TTL. Call create_sandbox for a new one";

// The reason recorded when an ephemeral sandbox's processes died without a
// close (its init killed from outside or by the OOM killer, or the zygote
// that made it killed): its files lived in memory with them.
inline constexpr const char* kEndedUnexpectedly =
    "it ended unexpectedly: its processes were killed (its init was killed from outside or by "
    "the kernel's OOM killer, or the server's zygote process died), and its files, which lived "
    "in memory, went with them. Call create_sandbox for a new one; create it with persistent: "
    "true to keep its files on disk across such a crash";

}  // namespace sandcastle::service

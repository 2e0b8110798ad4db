// kSharedDir for an engine on another host (engine_backend.cc decides: any
// endpoint that is not a unix socket). Nothing of this host can be bound
// there, so each container gets an anonymous volume at kSharedDir, root's
// (the sandbox user cannot write it), filled through the archive API: the
// agent and every file published so far before the container starts, and a
// file published later into each container that asks for it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sandbox/engine/engine_client.h"

namespace sandcastle::sandbox::engine {

class RemoteShare {
 public:
  // All files published, agent excluded: the server's own few (kernel
  // drivers, a CA bundle); past it publish refuses.
  static constexpr std::size_t kMaxPublishedBytes = std::size_t{64} << 20;

  // Reads the agent binary once (it goes into every container).
  static Result<std::unique_ptr<RemoteShare>> load(const std::string& agent_path);

  // Before the container starts: the agent (.agent, 0755) and the files
  // published so far (0444), all root's, in one archive PUT. Their names
  // (the agent's excepted) go to *names.
  Status fill(EngineClient& client, const std::string& container_id,
              std::set<std::string>* names) const;
  // Puts `name` into one container's volume, and remembers it for the
  // containers started later. The name is validated as the native
  // backend's: no '/', no leading '.'.
  Status publish(EngineClient& client, const std::string& container_id, const std::string& name,
                 std::string_view data);

 private:
  RemoteShare() = default;
  std::string agent_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> files_;
  std::size_t bytes_ = 0;
};

}  // namespace sandcastle::sandbox::engine

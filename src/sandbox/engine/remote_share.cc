#include "sandbox/engine/remote_share.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sandbox/engine/container_config.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {
namespace {

Status put_tar(EngineClient& client, const std::string& container_id, const std::string& tar) {
  std::size_t at = 0;
  ByteSource src = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    const std::size_t n = std::min(cap, tar.size() - at);
    std::copy_n(tar.data() + at, n, buf);
    at += n;
    return n;
  };
  return client.archive_put(container_id, kSharedDir, src);
}

}  // namespace

Result<std::unique_ptr<RemoteShare>> RemoteShare::load(const std::string& agent_path) {
  std::ifstream in(agent_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in || bytes.str().empty())
    return Error::make(ErrorCode::kNotFound, "the container agent " + agent_path +
                                                 " cannot be read (built with sandcastle as "
                                                 "sandcastle-agent)");
  std::unique_ptr<RemoteShare> share(new RemoteShare());
  share->agent_ = std::move(bytes).str();
  return share;
}

Status RemoteShare::fill(EngineClient& client, const std::string& container_id,
                         std::set<std::string>* names) const {
  auto agent = tar_file_entry(kAgentInShare, 0755, agent_);
  if (!agent) return agent.take_error();
  std::string tar = std::move(*agent);
  {
    std::lock_guard l(mu_);
    for (const auto& [name, data] : files_) {
      auto entry = tar_file_entry(name, 0444, data);
      if (!entry) return entry.take_error();
      tar += *entry;
      names->insert(name);
    }
  }
  tar += tar_end();
  return put_tar(client, container_id, tar);
}

Status RemoteShare::publish(EngineClient& client, const std::string& container_id,
                            const std::string& name, std::string_view data) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
    return Error::make(ErrorCode::kInvalidArgument, "shared file name: " + name.substr(0, 100));
  auto entry = tar_file_entry(name, 0444, data);
  if (!entry) return entry.take_error();
  {
    std::lock_guard l(mu_);
    auto it = files_.find(name);
    const std::size_t old = it == files_.end() ? 0 : it->second.size();
    if (bytes_ - old + data.size() > kMaxPublishedBytes)
      return Error::make(ErrorCode::kResourceExhausted,
                         "shared files past " + std::to_string(kMaxPublishedBytes) + " bytes");
    bytes_ = bytes_ - old + data.size();
    files_[name] = std::string(data);
  }
  return put_tar(client, container_id, *entry + tar_end());
}

}  // namespace sandcastle::sandbox::engine

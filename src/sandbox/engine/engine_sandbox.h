// One sandbox on a container engine: a container whose PID 1 is the agent's
// reaper, and one attached exec of the agent that carries every call
// (agent_link.h). Nothing here runs an Engine API exec per call: the API's
// own exec costs 66-190 ms on this host, a call on the agent's stream well
// under a millisecond.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "net/proxy_service.h"
#include "sandbox/engine/agent_link.h"
#include "sandbox/engine/container_remover.h"
#include "sandbox/engine/engine_client.h"
#include "sandbox/engine/remote_share.h"
#include "sandbox/native/file_client.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {

// What every sandbox of one backend shares.
struct EngineShared {
  std::shared_ptr<EngineClient> client;
  std::string engine_name;  // "docker@unix:///run/docker.sock", for messages
  std::string share_dir;    // the host directory bound at kSharedDir ("" if none)
  std::unique_ptr<ContainerRemover> remover;
  std::shared_ptr<RemoteShare> remote;  // an engine on another host (else null)
};

struct EngineContainer {
  std::string container_id;
  std::unique_ptr<AgentLink> link;
  std::string workspace_seed;  // ContainerPlan::workspace_seed: copied in at create
  std::set<std::string> shared_names;  // remote: in this container's kSharedDir
};

// The link as a sandbox's terminals reach it: null once the sandbox is
// destroyed (a terminal may outlive its sandbox object).
struct TerminalLink {
  std::mutex mu;
  AgentLink* link = nullptr;
};

class EngineSandbox final : public Sandbox {
 public:
  EngineSandbox(std::shared_ptr<EngineShared> shared, std::string id, SandboxSpec spec,
                EngineContainer container);
  ~EngineSandbox() override;

  const std::string& id() const override { return id_; }
  const SandboxSpec& spec() const override { return spec_; }
  const std::string& container_id() const { return container_.container_id; }

  Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks = {},
                          const sandbox::CancelToken* cancel = nullptr) override;

  Result<FileStat> stat(const std::string& path) override;
  Result<Listing> list(const std::string& path, const ListOptions& options = {}) override;
  Result<FileData> read_file(const std::string& path, const ReadRange& range = {}) override;
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode = 0644,
                    bool parents = false) override;
  Status mkdir(const std::string& path, bool parents = true) override;
  Status remove(const std::string& path, bool recursive = false) override;
  Status rename(const std::string& from, const std::string& to) override;

  Result<Usage> usage() override;
  bool saves_own_images() const override { return true; }
  Result<SavedImage> save_image(const std::string& name, const std::string& owner) override;
  Status publish_shared(const std::string& name, std::string_view data) override;
  bool has_shared(const std::string& name) const override;
  Status freeze() override;
  Status thaw() override;
  Status destroy() override;
  bool alive(std::chrono::milliseconds grace = {}) const override;
  // A shell on a pty the agent opens in the container (engine_terminal.cc).
  Result<std::unique_ptr<Terminal>> open_terminal(const TerminalRequest& req) override;

  // Issue 19 (engine_net.cc): the agent listens on 127.0.0.1:53 (TCP, and
  // UDP turned into TCP DNS) and, when `proxies`, :3128 and :1080 in the
  // container for the whole sandbox; each connection arrives on one of the
  // returned listeners (abstract unix sockets of the server's: http, socks,
  // dns_tcp; dns_udp stays empty), to be served by net::ProxyService.
  // Once per sandbox, and not in mode none (else kFailedPrecondition). On an error, some ports may
  // be taken in the container: the sandbox is for destroying. destroy()
  // shuts the listeners down (they poll POLLHUP, connects are refused).
  Result<net::Listeners> open_net_listeners(bool proxies) override;

 private:
  Status check_alive() const;
  Result<std::string> resolve(const std::string& path) const;
  Result<UniqueFd> connect_files();
  void shut_net_listeners();

  std::shared_ptr<EngineShared> shared_;
  std::string id_;
  SandboxSpec spec_;
  EngineContainer container_;
  native::FileChannel files_;
  mutable std::mutex mu_;
  bool destroyed_ = false;
  TerminalSlots terminals_;
  std::vector<UniqueFd> net_listeners_;  // the server's copies, shut down at destroy (mu_)
  bool net_opened_ = false;              // mu_
  std::shared_ptr<TerminalLink> terminal_link_ = std::make_shared<TerminalLink>();
};

}  // namespace sandcastle::sandbox::engine

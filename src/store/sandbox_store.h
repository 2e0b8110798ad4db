// Where the server records the sandboxes it runs: id, name, owner, language,
// spec and timestamps. In memory today; the interface is what a SQLite store
// implements when persistent sandboxes survive restarts.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sandcastle::store {

struct SandboxRecord {
  std::string id;
  std::string name;
  std::string owner;
  std::string language;
  std::string image;
  bool persistent = false;
  std::chrono::system_clock::time_point created_at;
  std::chrono::seconds ttl{0};
  std::string spec_json;  // the spec options, to recreate the sandbox
};

class SandboxStore {
 public:
  virtual ~SandboxStore() = default;
  virtual void put(const SandboxRecord& record) = 0;
  virtual void remove(const std::string& id) = 0;
  virtual std::optional<SandboxRecord> get(const std::string& id) const = 0;
  virtual std::vector<SandboxRecord> list() const = 0;
};

class MemorySandboxStore : public SandboxStore {
 public:
  void put(const SandboxRecord& record) override;
  void remove(const std::string& id) override;
  std::optional<SandboxRecord> get(const std::string& id) const override;
  std::vector<SandboxRecord> list() const override;

 private:
  mutable std::mutex mu_;
  std::map<std::string, SandboxRecord> records_;
};

}  // namespace sandcastle::store

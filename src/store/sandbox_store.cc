#include "store/sandbox_store.h"

#include <algorithm>

namespace sandcastle::store {

const char* sandbox_status_name(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::kRunning: return "running";
    case SandboxStatus::kPaused: return "paused";
    case SandboxStatus::kStopped: return "stopped";
  }
  return "unknown";
}

std::optional<SandboxStatus> parse_sandbox_status(const std::string& s) {
  if (s == "running") return SandboxStatus::kRunning;
  if (s == "paused") return SandboxStatus::kPaused;
  if (s == "stopped") return SandboxStatus::kStopped;
  return std::nullopt;
}

Status MemorySandboxStore::put(const SandboxRecord& record) {
  std::lock_guard lock(mu_);
  records_[record.id] = record;
  return ok_status();
}

Status MemorySandboxStore::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  records_.erase(id);
  packages_.erase(id);
  std::erase_if(history_, [&](const HistoryEntry& e) { return e.sandbox_id == id; });
  return ok_status();
}

std::optional<SandboxRecord> MemorySandboxStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

Result<std::vector<SandboxRecord>> MemorySandboxStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<SandboxRecord> out;
  out.reserve(records_.size());
  for (const auto& [_, r] : records_) out.push_back(r);
  return out;
}

Status MemorySandboxStore::set_status(const std::string& id, SandboxStatus status,
                                      bool memory_saved) {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return Error::make(ErrorCode::kNotFound, "no sandbox record " + id);
  it->second.status = status;
  it->second.memory_saved = memory_saved;
  return ok_status();
}

Status MemorySandboxStore::touch(const std::string& id, std::chrono::system_clock::time_point at) {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  if (it != records_.end()) it->second.last_used_at = at;
  return ok_status();
}

Status MemorySandboxStore::put_package(const std::string& id, const PackageEntry& p) {
  std::lock_guard lock(mu_);
  packages_[id][p.manager + ":" + p.name] = p;
  return ok_status();
}

std::vector<PackageEntry> MemorySandboxStore::packages(const std::string& id) const {
  std::lock_guard lock(mu_);
  std::vector<PackageEntry> out;
  auto it = packages_.find(id);
  if (it != packages_.end())
    for (const auto& [_, p] : it->second) out.push_back(p);
  return out;
}

Result<std::int64_t> MemorySandboxStore::append_history(const HistoryEntry& e) {
  std::lock_guard lock(mu_);
  history_.push_back(e);
  history_.back().seq = next_seq_++;
  return history_.back().seq;
}

HistoryPage MemorySandboxStore::history(const std::string& id, std::size_t limit,
                                        std::optional<std::int64_t> before) const {
  std::lock_guard lock(mu_);
  HistoryPage page;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (it->sandbox_id != id || (before && it->seq >= *before)) continue;
    if (page.entries.size() == limit) {
      page.next_before = page.entries.back().seq;
      break;
    }
    page.entries.push_back(*it);
  }
  return page;
}

}  // namespace sandcastle::store

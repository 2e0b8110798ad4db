#include "store/sandbox_store.h"

namespace sandcastle::store {

void MemorySandboxStore::put(const SandboxRecord& record) {
  std::lock_guard lock(mu_);
  records_[record.id] = record;
}

void MemorySandboxStore::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  records_.erase(id);
}

std::optional<SandboxRecord> MemorySandboxStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::vector<SandboxRecord> MemorySandboxStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<SandboxRecord> out;
  out.reserve(records_.size());
  for (const auto& [_, r] : records_) out.push_back(r);
  return out;
}

}  // namespace sandcastle::store

// API keys in SQLite (<state dir>/sandcastle.db). A key is shown once, at
// creation: "sc_<id>_<secret>". Only a salted SHA-256 of the secret is
// stored; verification looks the id up and compares hashes in constant time.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::store {

struct KeyInfo {
  std::string id;
  std::string name;
  std::string created_at;  // ISO 8601 UTC
  std::string revoked_at;  // "" while active
  std::string last_used_at;
  bool admin = false;  // may manage keys (REST /api/v1/keys)
};

struct CreatedKey {
  KeyInfo info;
  std::string secret;  // the whole key to give to the client; never stored
};

class KeyStore {
 public:
  // Opens (creating when missing) the database at `path`.
  static Result<std::unique_ptr<KeyStore>> open(const std::string& path);
  ~KeyStore();
  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  Result<CreatedKey> create(const std::string& name, bool admin = false);
  Result<std::vector<KeyInfo>> list();
  // Revokes by id or name; kNotFound when no active key matches.
  Status revoke(const std::string& id_or_name);
  // Revokes by id only; kNotFound when no active key has it.
  Status revoke_id(const std::string& id);
  // The key's id when `key` is a valid, unrevoked key.
  std::optional<std::string> verify(const std::string& key);
  // Like verify, with the key's record (id, name, admin).
  std::optional<KeyInfo> authenticate(const std::string& key);
  // The record of an active (unrevoked) key by id, or nullopt: a browser
  // session asks on every request, so revoking a key ends its sessions.
  std::optional<KeyInfo> find_active(const std::string& id);
  // Active keys (for deciding whether auth can be on).
  size_t active_count();
  // True when key `id`'s last_used_at is due a write (none in the last
  // `every`); no SQLite: cheap enough for an I/O thread.
  bool use_due(const std::string& id);
  // Writes last_used_at = now when due (at most once per `every` per key,
  // however many requests a key makes). Blocks on SQLite: worker threads only.
  void note_used(const std::string& id);

 private:
  explicit KeyStore(sqlite3* db) : db_(db) {}
  Status exec(const std::string& sql);
  // Databases made before keys had an admin flag get the column (not admin).
  Status migrate();

  sqlite3* db_;
  std::mutex mu_;
  // When each key's last_used_at was last written (this process).
  std::mutex used_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> used_written_;
  std::chrono::seconds every_{60};
};

// Splits "sc_<id>_<secret>"; false when the shape is wrong.
bool parse_key(const std::string& key, std::string* id, std::string* secret);

}  // namespace sandcastle::store

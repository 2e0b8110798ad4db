#include "store/key_store.h"

#include <sys/stat.h>

#include <chrono>
#include <ctime>

#include "common/crypto.h"
#include "store/sqlite_stmt.h"

namespace sandcastle::store {

namespace {

std::string now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return {};  // year past 9999
  return buf;
}

}  // namespace

bool parse_key(const std::string& key, std::string* id, std::string* secret) {
  if (key.rfind("sc_", 0) != 0) return false;
  auto sep = key.find('_', 3);
  if (sep == std::string::npos || sep == 3 || sep + 1 >= key.size()) return false;
  *id = key.substr(3, sep - 3);
  *secret = key.substr(sep + 1);
  return true;
}

Result<std::unique_ptr<KeyStore>> KeyStore::open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Error::make(ErrorCode::kIo, "open key database " + path + ": " + msg);
  }
  // Only hashes are stored, but nobody else needs to read them either.
  ::chmod(path.c_str(), 0600);
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<KeyStore> ks(new KeyStore(db));
  if (auto s = ks->exec("PRAGMA journal_mode=WAL"); !s.ok()) return s.error();
  if (auto s = ks->exec("CREATE TABLE IF NOT EXISTS api_keys ("
                        " id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,"
                        " created_at TEXT NOT NULL, revoked_at TEXT, last_used_at TEXT)");
      !s.ok())
    return s.error();
  if (auto s = ks->migrate(); !s.ok()) return s.error();
  return ks;
}

Status KeyStore::migrate() {
  // Inside one write transaction: two processes opening an old database
  // at once add the column once.
  if (auto s = exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  bool has_admin = false;
  {
    Stmt st(db_, "SELECT name FROM pragma_table_info('api_keys')");
    if (!st.ok()) {
      (void)exec("ROLLBACK");
      return db_error(db_, "read the api_keys columns");
    }
    while (st.step() == SQLITE_ROW)
      if (st.text(0) == "admin") has_admin = true;
  }
  Status s = has_admin ? ok_status() : exec("ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0");
  if (s.ok()) s = exec("COMMIT");
  if (!s.ok()) (void)exec("ROLLBACK");
  return s;
}

KeyStore::~KeyStore() { sqlite3_close(db_); }

Status KeyStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Error::make(ErrorCode::kIo, "sqlite: " + msg);
  }
  return ok_status();
}

Result<CreatedKey> KeyStore::create(const std::string& name, bool admin) {
  std::lock_guard lock(mu_);
  CreatedKey k;
  k.info.id = crypto::hex(crypto::random_bytes(6));
  k.info.name = name.empty() ? "key-" + k.info.id : name;
  k.info.created_at = now_iso();
  k.info.admin = admin;
  std::string secret = crypto::base64url(crypto::random_bytes(24));
  std::string salt = crypto::random_bytes(16);
  std::string hash = crypto::sha256(salt + secret);
  Stmt st(db_, "INSERT INTO api_keys(id, name, salt, hash, created_at, admin) VALUES(?,?,?,?,?,?)");
  if (!st.ok()) return db_error(db_, "prepare insert");
  st.bind(1, k.info.id);
  st.bind(2, k.info.name);
  st.bind_blob(3, salt);
  st.bind_blob(4, hash);
  st.bind(5, k.info.created_at);
  st.bind_int(6, admin ? 1 : 0);
  if (st.step() != SQLITE_DONE) return db_error(db_, "insert key");
  k.secret = "sc_" + k.info.id + "_" + secret;
  return k;
}

Result<std::vector<KeyInfo>> KeyStore::list() {
  std::lock_guard lock(mu_);
  Stmt st(db_, "SELECT id, name, created_at, revoked_at, last_used_at, admin FROM api_keys ORDER BY created_at, id");
  if (!st.ok()) return db_error(db_, "prepare list");
  std::vector<KeyInfo> out;
  while (st.step() == SQLITE_ROW)
    out.push_back({st.text(0), st.text(1), st.text(2), st.text(3), st.text(4), st.text(5) == "1"});
  return out;
}

Status KeyStore::revoke(const std::string& id_or_name) {
  std::lock_guard lock(mu_);
  Stmt st(db_, "UPDATE api_keys SET revoked_at=? WHERE (id=? OR name=?) AND revoked_at IS NULL");
  if (!st.ok()) return db_error(db_, "prepare revoke");
  st.bind(1, now_iso());
  st.bind(2, id_or_name);
  st.bind(3, id_or_name);
  if (st.step() != SQLITE_DONE) return db_error(db_, "revoke key");
  if (sqlite3_changes(db_) == 0)
    return Error::make(ErrorCode::kNotFound, "no active API key with id or name '" + id_or_name + "'");
  return ok_status();
}

Status KeyStore::revoke_id(const std::string& id) {
  std::lock_guard lock(mu_);
  Stmt st(db_, "UPDATE api_keys SET revoked_at=? WHERE id=? AND revoked_at IS NULL");
  if (!st.ok()) return db_error(db_, "prepare revoke");
  st.bind(1, now_iso());
  st.bind(2, id);
  if (st.step() != SQLITE_DONE) return db_error(db_, "revoke key");
  if (sqlite3_changes(db_) == 0) return Error::make(ErrorCode::kNotFound, "no active API key with id '" + id + "'");
  return ok_status();
}

std::optional<std::string> KeyStore::verify(const std::string& key) {
  auto info = authenticate(key);
  if (!info) return std::nullopt;
  return info->id;
}

std::optional<KeyInfo> KeyStore::authenticate(const std::string& key) {
  std::string id, secret;
  if (!parse_key(key, &id, &secret)) return std::nullopt;
  std::lock_guard lock(mu_);
  Stmt st(db_, "SELECT salt, hash, name, created_at, admin FROM api_keys WHERE id=? AND revoked_at IS NULL");
  if (!st.ok()) return std::nullopt;
  st.bind(1, id);
  if (st.step() != SQLITE_ROW) return std::nullopt;
  std::string salt = st.blob(0), hash = st.blob(1);
  if (!crypto::constant_time_equal(crypto::sha256(salt + secret), hash)) return std::nullopt;
  return KeyInfo{id, st.text(2), st.text(3), {}, {}, st.text(4) == "1"};
}

std::optional<KeyInfo> KeyStore::find_active(const std::string& id) {
  std::lock_guard lock(mu_);
  Stmt st(db_, "SELECT name, created_at, admin FROM api_keys WHERE id=? AND revoked_at IS NULL");
  if (!st.ok()) return std::nullopt;
  st.bind(1, id);
  if (st.step() != SQLITE_ROW) return std::nullopt;
  return KeyInfo{id, st.text(0), st.text(1), {}, {}, st.text(2) == "1"};
}

size_t KeyStore::active_count() {
  std::lock_guard lock(mu_);
  Stmt st(db_, "SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL");
  if (!st.ok() || st.step() != SQLITE_ROW) return 0;
  return static_cast<size_t>(std::stoull(st.text(0)));
}

bool KeyStore::use_due(const std::string& id) {
  std::lock_guard lock(used_mu_);
  auto it = used_written_.find(id);
  return it == used_written_.end() || std::chrono::steady_clock::now() - it->second >= every_;
}

void KeyStore::note_used(const std::string& id) {
  {
    std::lock_guard lock(used_mu_);
    auto now = std::chrono::steady_clock::now();
    auto it = used_written_.find(id);
    if (it != used_written_.end() && now - it->second < every_) return;
    // Bounded by the keys there are: only verified ids get here.
    used_written_[id] = now;
  }
  std::lock_guard lock(mu_);
  Stmt st(db_, "UPDATE api_keys SET last_used_at=? WHERE id=? AND revoked_at IS NULL");
  if (!st.ok()) return;
  st.bind(1, now_iso());
  st.bind(2, id);
  (void)st.step();  // a failed write only leaves an older time shown
}

}  // namespace sandcastle::store

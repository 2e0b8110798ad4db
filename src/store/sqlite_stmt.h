// What the store's own SQLite connections share (the key store, the task
// records): a prepared statement that finalizes itself, and an error that
// quotes SQLite.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "common/result.h"

namespace sandcastle::store {

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind_blob(int i, const std::string& v) {
    sqlite3_bind_blob(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind_int(int i, int v) { sqlite3_bind_int(st_, i, v); }
  void bind_int64(int i, std::int64_t v) { sqlite3_bind_int64(st_, i, v); }
  int step() { return sqlite3_step(st_); }
  std::string text(int col) {
    const unsigned char* p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  std::string blob(int col) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st_, col))) : std::string();
  }
  std::int64_t int64(int col) { return sqlite3_column_int64(st_, col); }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_;
};

inline Error db_error(sqlite3* db, const std::string& what) {
  return Error::make(ErrorCode::kIo, what + ": " + sqlite3_errmsg(db));
}

}  // namespace sandcastle::store

#include "web/session.h"

#include <vector>

#include "common/crypto.h"

namespace sandcastle::web {

namespace {

std::string hash_of(const std::string& id) {
  return crypto::sha256(id);
}

}  // namespace

SessionTable::SessionTable(SessionOptions options, std::function<Clock::time_point()> now)
    : options_(options), now_(std::move(now)) {}

void SessionTable::sweep_locked(Clock::time_point now) {
  for (auto it = by_hash_.begin(); it != by_hash_.end();)
    it = now - it->second.last_used >= options_.idle ? by_hash_.erase(it) : std::next(it);
}

Result<BrowserSession> SessionTable::create(const std::string& key_id, bool admin) {
  const auto now = now_();
  std::lock_guard lock(mu_);
  // The key's own oldest session makes room when it has too many.
  size_t mine = 0;
  auto oldest = by_hash_.end();
  for (auto it = by_hash_.begin(); it != by_hash_.end(); ++it) {
    if (it->second.s.key_id != key_id) continue;
    ++mine;
    if (oldest == by_hash_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
  }
  if (mine >= options_.max_per_key && oldest != by_hash_.end()) by_hash_.erase(oldest);
  if (by_hash_.size() >= options_.max_sessions) sweep_locked(now);
  if (by_hash_.size() >= options_.max_sessions)
    return Error::make(ErrorCode::kResourceExhausted, "too many browser sessions (" +
                                                          std::to_string(options_.max_sessions) +
                                                          "); try again later");
  BrowserSession s;
  s.id = crypto::hex(crypto::random_bytes(32));
  s.key_id = key_id;
  s.admin = admin;
  s.csrf_token = crypto::base64url(crypto::random_bytes(32));
  Entry e{s, now};
  e.s.id.clear();
  by_hash_[hash_of(s.id)] = std::move(e);
  return s;
}

std::optional<BrowserSession> SessionTable::find(const std::string& id) {
  if (id.empty() || id.size() > 128) return std::nullopt;
  const auto now = now_();
  std::lock_guard lock(mu_);
  auto it = by_hash_.find(hash_of(id));
  if (it == by_hash_.end()) return std::nullopt;
  if (now - it->second.last_used >= options_.idle) {
    by_hash_.erase(it);
    return std::nullopt;
  }
  it->second.last_used = now;
  BrowserSession s = it->second.s;
  s.id = id;
  return s;
}

bool SessionTable::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  return by_hash_.erase(hash_of(id)) != 0;
}

size_t SessionTable::remove_key(const std::string& key_id) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    if (it->second.s.key_id == key_id) {
      it = by_hash_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

size_t SessionTable::sweep() {
  std::lock_guard lock(mu_);
  size_t before = by_hash_.size();
  sweep_locked(now_());
  return before - by_hash_.size();
}

size_t SessionTable::size() const {
  std::lock_guard lock(mu_);
  return by_hash_.size();
}

bool csrf_matches(const BrowserSession& s, const std::string& presented) {
  if (s.csrf_token.empty() || presented.empty()) return false;
  // Hashes of equal length: the compare's time does not depend on where
  // the strings differ, nor on the presented token's length.
  return crypto::constant_time_equal(crypto::sha256(s.csrf_token), crypto::sha256(presented));
}

std::string session_cookie(const std::string& id, bool secure) {
  std::string c = std::string(kSessionCookie) + "=" + id + "; Path=/; HttpOnly; SameSite=Strict";
  if (secure) c += "; Secure";
  return c;
}

std::string clear_session_cookie(bool secure) {
  std::string c = std::string(kSessionCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0";
  if (secure) c += "; Secure";
  return c;
}

std::string cookie_value(const std::string& header, const std::string& name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    size_t a = pos;
    while (a < end && (header[a] == ' ' || header[a] == '\t')) ++a;
    size_t eq = header.find('=', a);
    if (eq != std::string::npos && eq < end && header.compare(a, eq - a, name) == 0 &&
        eq - a == name.size()) {
      std::string v = header.substr(eq + 1, end - eq - 1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
    pos = end + 1;
  }
  return {};
}

}  // namespace sandcastle::web

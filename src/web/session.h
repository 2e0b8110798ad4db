// Browser sessions of the console (docs/rest-api.md, Authentication): a
// server-side table of signed-in browsers, bounded in size, each bound to the
// API key it signed in with. The cookie carries only a random 256-bit id;
// the table is keyed by the id's SHA-256, so a lookup's timing says nothing
// about stored ids. A session ends on sign-out, after `idle` without use, or
// when its key is revoked (the REST face checks the key on every request).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/result.h"

namespace sandcastle::web {

inline constexpr const char* kSessionCookie = "sc_session";

struct BrowserSession {
  std::string id;  // the cookie's value; only known to the table at creation
  std::string key_id;
  bool admin = false;
  std::string csrf_token;  // sent by the console in X-CSRF-Token
};

struct SessionOptions {
  size_t max_sessions = 10'000;
  size_t max_per_key = 32;  // a key signing in again and again evicts its own oldest
  std::chrono::seconds idle{12 * 3600};
};

class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;
  explicit SessionTable(SessionOptions options = {},
                        std::function<Clock::time_point()> now = Clock::now);

  // A new session for the key; kResourceExhausted when the table is full
  // of live sessions (expired ones are dropped first).
  Result<BrowserSession> create(const std::string& key_id, bool admin);
  // The live session with this cookie value (its idle clock restarts), or
  // nullopt: unknown, or expired (then dropped).
  std::optional<BrowserSession> find(const std::string& id);
  // Signs out; true when it existed.
  bool remove(const std::string& id);
  // Ends every session of the key (revocation); returns how many.
  size_t remove_key(const std::string& key_id);
  // Drops expired sessions; returns how many.
  size_t sweep();
  size_t size() const;

 private:
  struct Entry {
    BrowserSession s;  // id cleared: only its hash is kept
    Clock::time_point last_used;
  };
  void sweep_locked(Clock::time_point now);

  SessionOptions options_;
  std::function<Clock::time_point()> now_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> by_hash_;
};

// Constant-time comparison of a presented CSRF token with the session's.
bool csrf_matches(const BrowserSession& s, const std::string& presented);

// The Set-Cookie value that signs a browser in (HttpOnly, SameSite=Strict,
// Path=/, Secure when served over TLS), and the one that signs it out.
std::string session_cookie(const std::string& id, bool secure);
std::string clear_session_cookie(bool secure);
// The value of cookie `name` in a Cookie header ("" when absent).
std::string cookie_value(const std::string& cookie_header, const std::string& name);

}  // namespace sandcastle::web

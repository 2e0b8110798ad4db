#include "web/session.h"

#include <gtest/gtest.h>

#include <set>

namespace sandcastle::web {
namespace {

struct FakeClock {
  SessionTable::Clock::time_point t{};
  std::function<SessionTable::Clock::time_point()> fn() {
    return [this] { return t; };
  }
};

TEST(SessionTable, CreateFindRemove) {
  SessionTable table;
  auto s = table.create("k1", true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->id.size(), 64u);  // 256 random bits, hex
  EXPECT_GE(s->csrf_token.size(), 40u);
  auto found = table.find(s->id);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->key_id, "k1");
  EXPECT_TRUE(found->admin);
  EXPECT_EQ(found->csrf_token, s->csrf_token);
  EXPECT_FALSE(table.find(s->id + "0"));
  EXPECT_FALSE(table.find(""));
  EXPECT_FALSE(table.find(std::string(10000, 'a')));
  EXPECT_TRUE(table.remove(s->id));
  EXPECT_FALSE(table.find(s->id));
  EXPECT_FALSE(table.remove(s->id));
}

TEST(SessionTable, IdsAndTokensAreDistinct) {
  SessionTable table;
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    auto s = table.create("k", false);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(seen.insert(s->id).second);
    EXPECT_TRUE(seen.insert(s->csrf_token).second);
  }
}

TEST(SessionTable, IdleExpiryRestartsOnUse) {
  FakeClock clock;
  SessionOptions o;
  o.idle = std::chrono::seconds(100);
  SessionTable table(o, clock.fn());
  auto s = table.create("k", false);
  ASSERT_TRUE(s.ok());
  clock.t += std::chrono::seconds(90);
  EXPECT_TRUE(table.find(s->id));  // used: the idle clock restarts
  clock.t += std::chrono::seconds(90);
  EXPECT_TRUE(table.find(s->id));
  clock.t += std::chrono::seconds(100);
  EXPECT_FALSE(table.find(s->id));
  EXPECT_EQ(table.size(), 0u);
  auto t = table.create("k", false);
  ASSERT_TRUE(t.ok());
  clock.t += std::chrono::seconds(101);
  EXPECT_EQ(table.sweep(), 1u);
}

TEST(SessionTable, BoundedGloballyAndPerKey) {
  FakeClock clock;
  SessionOptions o;
  o.max_sessions = 4;
  o.max_per_key = 2;
  o.idle = std::chrono::seconds(100);
  SessionTable table(o, clock.fn());
  auto a1 = table.create("a", false);
  clock.t += std::chrono::seconds(1);
  auto a2 = table.create("a", false);
  clock.t += std::chrono::seconds(1);
  auto a3 = table.create("a", false);  // evicts a1, the key's oldest
  ASSERT_TRUE(a1.ok() && a2.ok() && a3.ok());
  EXPECT_FALSE(table.find(a1->id));
  EXPECT_TRUE(table.find(a2->id));
  EXPECT_TRUE(table.find(a3->id));
  ASSERT_TRUE(table.create("b", false).ok());
  ASSERT_TRUE(table.create("c", false).ok());
  auto full = table.create("d", false);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(table.size(), 4u);
  // Once they expire, there is room again.
  clock.t += std::chrono::seconds(200);
  EXPECT_TRUE(table.create("d", false).ok());
  EXPECT_EQ(table.size(), 1u);
}

TEST(SessionTable, RevokingAKeyEndsItsSessions) {
  SessionTable table;
  auto a = table.create("a", false);
  auto b = table.create("a", false);
  auto c = table.create("c", false);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(table.remove_key("a"), 2u);
  EXPECT_FALSE(table.find(a->id));
  EXPECT_FALSE(table.find(b->id));
  EXPECT_TRUE(table.find(c->id));
}

TEST(Csrf, MatchesOnlyTheSessionsToken) {
  SessionTable table;
  auto s = table.create("k", false);
  auto other = table.create("k", false);
  ASSERT_TRUE(s.ok() && other.ok());
  EXPECT_TRUE(csrf_matches(*s, s->csrf_token));
  EXPECT_FALSE(csrf_matches(*s, other->csrf_token));
  EXPECT_FALSE(csrf_matches(*s, ""));
  EXPECT_FALSE(csrf_matches(*s, s->csrf_token + "x"));
  EXPECT_FALSE(csrf_matches(*s, s->csrf_token.substr(1)));
  BrowserSession empty;
  EXPECT_FALSE(csrf_matches(empty, ""));
}

TEST(Cookies, FlagsAndParsing) {
  EXPECT_EQ(session_cookie("abc", false), "sc_session=abc; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(session_cookie("abc", true),
            "sc_session=abc; Path=/; HttpOnly; SameSite=Strict; Secure");
  EXPECT_NE(clear_session_cookie(false).find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(cookie_value("a=1; sc_session=xyz; b=2", "sc_session"), "xyz");
  EXPECT_EQ(cookie_value("sc_session=xyz", "sc_session"), "xyz");
  EXPECT_EQ(cookie_value("xsc_session=no; sc_session_x=no", "sc_session"), "");
  EXPECT_EQ(cookie_value("sc_session=\"q\"", "sc_session"), "q");
  EXPECT_EQ(cookie_value("", "sc_session"), "");
  EXPECT_EQ(cookie_value(";;;=;", "sc_session"), "");
}

}  // namespace
}  // namespace sandcastle::web

#include <gtest/gtest.h>

#include "common/base64.h"
#include "common/crypto.h"
#include "common/metrics.h"

namespace sandcastle {
namespace {

TEST(Crypto, Sha256KnownVector) {
  EXPECT_EQ(crypto::hex(crypto::sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Crypto, HmacRfc4231Case2) {
  EXPECT_EQ(crypto::hex(crypto::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Crypto, Base64RoundTripsAndRejectsGarbage) {
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba", "foobar", std::string("\x00\xff\x10", 3)}) {
    auto decoded = base64_decode(crypto::base64url(s));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, s);
  }
  EXPECT_EQ(crypto::base64url("foobar"), "Zm9vYmFy");
  EXPECT_FALSE(base64_decode("ab$c").has_value());
  EXPECT_EQ(base64_decode("dGVzdF9lY2hv"), "test_echo");  // standard alphabet too
}

TEST(Crypto, ConstantTimeEqual) {
  EXPECT_TRUE(crypto::constant_time_equal("abc", "abc"));
  EXPECT_FALSE(crypto::constant_time_equal("abc", "abd"));
  EXPECT_FALSE(crypto::constant_time_equal("abc", "ab"));
  EXPECT_EQ(crypto::random_bytes(32).size(), 32u);
  EXPECT_NE(crypto::random_bytes(16), crypto::random_bytes(16));
}

TEST(Metrics, RendersPrometheusText) {
  metrics::Registry r;
  r.counter("t_requests_total", "requests", {{"code", "200"}}).inc();
  r.counter("t_requests_total", "requests", {{"code", "200"}}).inc(2);
  r.counter("t_requests_total", "requests", {{"code", "404"}}).inc();
  r.gauge_fn("t_live", "live things", [] { return 7.0; });
  auto& h = r.histogram("t_seconds", "durations", {{"tool", "x\"y"}}, {0.1, 1});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string t = r.render();
  EXPECT_NE(t.find("# TYPE t_requests_total counter\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_requests_total{code=\"200\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_requests_total{code=\"404\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_live 7\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_seconds_bucket{tool=\"x\\\"y\",le=\"0.1\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_seconds_bucket{tool=\"x\\\"y\",le=\"1\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_seconds_bucket{tool=\"x\\\"y\",le=\"+Inf\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_seconds_count{tool=\"x\\\"y\"} 3\n"), std::string::npos) << t;
}

TEST(Metrics, FamiliesComputedAtScrapeTimeDropWhatIsGone) {
  metrics::Registry r;
  std::vector<std::string> live = {"sb-1", "sb-2"};
  r.family_fn("t_refused", "refusals per sandbox", "gauge", [&live] {
    metrics::Registry::Rows rows;
    for (const auto& id : live) rows.push_back({{{"sandbox", id}}, 3});
    return rows;
  });
  std::string t = r.render();
  EXPECT_NE(t.find("# TYPE t_refused gauge\n"), std::string::npos) << t;
  EXPECT_NE(t.find("t_refused{sandbox=\"sb-1\"} 3\n"), std::string::npos) << t;
  live = {"sb-2"};
  t = r.render();
  EXPECT_EQ(t.find("sb-1"), std::string::npos) << t;
  EXPECT_NE(t.find("t_refused{sandbox=\"sb-2\"} 3\n"), std::string::npos) << t;
}

}  // namespace
}  // namespace sandcastle

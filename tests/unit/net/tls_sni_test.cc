#include "net/tls_sni.h"

#include <gtest/gtest.h>

#include <vector>

#include "client_hello_fixture.h"

namespace sandcastle::net {
namespace {

using Bytes = std::vector<std::uint8_t>;

template <std::size_t N>
Bytes bytes(const std::uint8_t (&a)[N]) {
  return Bytes(a, a + N);
}

SniStatus status_of(const Bytes& b) {
  return peek_sni(b).status;
}

// push_back rather than insert(): GCC 12 -O2 reports false -Warray-bounds on
// small vectors grown by insert().
template <typename Range>
void append(Bytes& out, const Range& more) {
  for (auto c : more) out.push_back(static_cast<std::uint8_t>(c));
}

TEST(PeekSni, ReadsOpensslClientHellos) {
  auto r = peek_sni(bytes(fixtures::kHelloSni));
  EXPECT_EQ(r.status, SniStatus::kName);
  EXPECT_EQ(r.name, "allowed.test");
  EXPECT_FALSE(r.ech);
  auto r12 = peek_sni(bytes(fixtures::kHelloTls12));
  EXPECT_EQ(r12.status, SniStatus::kName);
  EXPECT_EQ(r12.name, "x.allowed.test");
  EXPECT_EQ(status_of(bytes(fixtures::kHelloNoSni)), SniStatus::kNone);
}

TEST(PeekSni, EveryPrefixNeedsMore) {
  const Bytes full = bytes(fixtures::kHelloSni);
  for (std::size_t n = 0; n < full.size(); ++n)
    ASSERT_EQ(status_of(Bytes(full.begin(), full.begin() + static_cast<long>(n))),
              SniStatus::kNeedMore)
        << n;
}

TEST(PeekSni, SplitAcrossRecords) {
  // The same ClientHello re-framed as records of 7 bytes each.
  const Bytes full = bytes(fixtures::kHelloSni);
  const Bytes hs(full.begin() + 5, full.end());
  Bytes framed;
  for (std::size_t i = 0; i < hs.size(); i += 7) {
    const std::size_t n = std::min<std::size_t>(7, hs.size() - i);
    append(framed, Bytes{0x16, 0x03, 0x01, 0x00, static_cast<std::uint8_t>(n)});
    for (std::size_t j = i; j < i + n; ++j) framed.push_back(hs[j]);
  }
  auto r = peek_sni(framed);
  EXPECT_EQ(r.status, SniStatus::kName);
  EXPECT_EQ(r.name, "allowed.test");
  EXPECT_EQ(status_of(Bytes(framed.begin(), framed.end() - 1)), SniStatus::kNeedMore);
}

TEST(PeekSni, OtherProtocolsAreNotTls) {
  const std::string get = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  EXPECT_EQ(status_of(Bytes(get.begin(), get.end())), SniStatus::kNotTls);
  EXPECT_EQ(status_of(Bytes{'S', 'S', 'H'}), SniStatus::kNotTls);
}

TEST(PeekSni, MalformedHellos) {
  const Bytes full = bytes(fixtures::kHelloSni);
  Bytes b = full;
  b[1] = 0x02;  // record version major
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
  EXPECT_EQ(status_of(Bytes{0x16, 0x04}), SniStatus::kMalformed);
  b = full;
  b[5] = 0x02;  // ServerHello, not ClientHello
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
  b = full;
  b[3] = 0x00;  // record length 0
  b[4] = 0x00;
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
  b = full;
  b[3] = 0x48;  // record length past 16384
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
  // A ClientHello claiming 1 MiB.
  EXPECT_EQ(status_of(Bytes{0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00}),
            SniStatus::kMalformed);
  // A hello whose inner lengths disagree: declare the extensions one byte
  // longer than they are, keeping the outer lengths.
  b = full;
  const std::size_t ext_len_at = 5 + 4 + 2 + 32 + 1 + b[5 + 4 + 2 + 32];
  const std::size_t suites = (std::size_t{b[ext_len_at]} << 8) | b[ext_len_at + 1];
  const std::size_t comp_at = ext_len_at + 2 + suites;
  const std::size_t exts_at = comp_at + 1 + b[comp_at];
  b[exts_at + 1] = static_cast<std::uint8_t>(b[exts_at + 1] + 1);
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
  // A second handshake message after the ClientHello in the same record.
  b = full;
  const std::size_t len = (std::size_t{b[3]} << 8) + b[4] + 4;
  b[3] = static_cast<std::uint8_t>(len >> 8);
  b[4] = static_cast<std::uint8_t>(len & 0xff);
  append(b, Bytes{0x14, 0x00, 0x00, 0x00});
  EXPECT_EQ(status_of(b), SniStatus::kMalformed);
}

// A minimal ClientHello around the given extensions.
Bytes hello(const Bytes& exts) {
  Bytes body{0x03, 0x03};
  append(body, Bytes(32, 0x11));
  append(body, Bytes{0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00});
  body.push_back(static_cast<std::uint8_t>(exts.size() >> 8));
  body.push_back(static_cast<std::uint8_t>(exts.size() & 0xff));
  append(body, exts);
  Bytes hs{0x01, 0x00, static_cast<std::uint8_t>(body.size() >> 8),
           static_cast<std::uint8_t>(body.size() & 0xff)};
  append(hs, body);
  Bytes rec{0x16, 0x03, 0x01, static_cast<std::uint8_t>(hs.size() >> 8),
            static_cast<std::uint8_t>(hs.size() & 0xff)};
  append(rec, hs);
  return rec;
}

Bytes sni_ext(const std::string& name, int entries = 1) {
  Bytes list;
  for (int i = 0; i < entries; ++i) {
    append(list, Bytes{0x00, 0x00, static_cast<std::uint8_t>(name.size())});
    append(list, name);
  }
  Bytes ext{0x00, 0x00,
            0x00, static_cast<std::uint8_t>(list.size() + 2),
            0x00, static_cast<std::uint8_t>(list.size())};
  append(ext, list);
  return ext;
}

TEST(PeekSni, BuiltHellos) {
  auto ok = peek_sni(hello(sni_ext("Allowed.Test")));
  EXPECT_EQ(ok.status, SniStatus::kName);
  EXPECT_EQ(ok.name, "Allowed.Test");
  EXPECT_EQ(status_of(hello({})), SniStatus::kNone);
  EXPECT_EQ(status_of(hello(sni_ext("a.test", 2))), SniStatus::kMalformed);
  EXPECT_EQ(status_of(hello(sni_ext("a\x01.test"))), SniStatus::kMalformed);
  EXPECT_EQ(status_of(hello(sni_ext(""))), SniStatus::kMalformed);
  Bytes twice = sni_ext("a.test");
  const Bytes again = sni_ext("b.test");
  append(twice, again);
  EXPECT_EQ(status_of(hello(twice)), SniStatus::kMalformed);
  Bytes ech = sni_ext("public.test");
  append(ech, Bytes{0xfe, 0x0d, 0x00, 0x01, 0x00});
  auto e = peek_sni(hello(ech));
  EXPECT_EQ(e.status, SniStatus::kName);
  EXPECT_TRUE(e.ech);
}

}  // namespace
}  // namespace sandcastle::net

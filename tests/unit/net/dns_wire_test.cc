#include "net/dns_wire.h"

#include <gtest/gtest.h>

namespace sandcastle::net::dns {
namespace {

using Bytes = std::vector<std::uint8_t>;

IpAddr ip(const char* text) {
  return IpAddr::parse(text).value();
}

Message query(const char* name, std::uint16_t qtype, bool edns) {
  auto wire = build_query(0x1234, name, qtype, edns);
  EXPECT_TRUE(wire.ok());
  auto m = parse(*wire);
  EXPECT_TRUE(m.ok()) << m.error().context;
  return *m;
}

std::string parse_error(const Bytes& wire) {
  auto m = parse(wire);
  EXPECT_FALSE(m.ok());
  return m ? "" : m.error().context;
}

// A header with one question, then `rest` (the question and beyond).
Bytes with_header(std::initializer_list<std::uint8_t> rest, std::uint16_t an = 0) {
  Bytes b{0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00, static_cast<std::uint8_t>(an),
          0x00, 0x00, 0x00, 0x00};
  for (std::uint8_t c : rest) b.push_back(c);  // insert() trips GCC 12's -Warray-bounds
  return b;
}

TEST(DnsWire, QueryRoundTrip) {
  const Message q = query("Allowed.Test", type::kA, false);
  EXPECT_EQ(q.id, 0x1234);
  EXPECT_FALSE(q.is_response());
  EXPECT_TRUE(q.recursion_desired());
  EXPECT_EQ(q.opcode(), 0);
  EXPECT_EQ(q.question.name, "Allowed.Test");  // case kept, for 0x20 clients
  EXPECT_EQ(q.question.qtype, type::kA);
  EXPECT_EQ(q.question.qclass, kClassIn);
  EXPECT_FALSE(q.edns);
  const Message e = query("allowed.test.", type::kAaaa, true);
  EXPECT_TRUE(e.edns);
  EXPECT_EQ(e.edns_udp_size, 4096);
  EXPECT_EQ(e.question.name, "allowed.test");
  EXPECT_EQ(reply_limit(q, false), 512u);
  EXPECT_EQ(reply_limit(e, false), 4096u);
  EXPECT_EQ(reply_limit(q, true), kMaxMessage);
  EXPECT_EQ(build_query(1, "a..b", type::kA, false).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(build_query(1, "a b", type::kA, false).error().code, ErrorCode::kInvalidArgument);
}

TEST(DnsWire, AnswerRoundTripCapsTtl) {
  const Message q = query("allowed.test", type::kA, true);
  const IpAddr addrs[] = {ip("198.51.100.2"), ip("2001:db8::1"), ip("198.51.100.4")};
  auto wire = build_answer(q, addrs, 3600, reply_limit(q, false));
  auto r = parse(wire);
  ASSERT_TRUE(r.ok()) << r.error().context;
  EXPECT_EQ(r->id, q.id);
  EXPECT_TRUE(r->is_response());
  EXPECT_EQ(r->rcode(), Rcode::kNoError);
  EXPECT_FALSE(r->truncated());
  EXPECT_EQ(r->question.name, "allowed.test");
  ASSERT_EQ(r->answers.size(), 2u);  // the AAAA address is not an A answer
  EXPECT_EQ(r->answers[0].address, ip("198.51.100.2"));
  EXPECT_EQ(r->answers[1].address, ip("198.51.100.4"));
  EXPECT_EQ(r->answers[0].ttl, kMaxAnswerTtl);
  EXPECT_EQ(r->answers[0].name, "allowed.test");
  EXPECT_TRUE(r->edns);
  auto short_ttl = parse(build_answer(q, addrs, 5, 512));
  EXPECT_EQ(short_ttl->answers[0].ttl, 5u);

  const Message q6 = query("allowed.test", type::kAaaa, false);
  auto r6 = parse(build_answer(q6, addrs, 10, 512));
  ASSERT_TRUE(r6.ok());
  ASSERT_EQ(r6->answers.size(), 1u);
  EXPECT_EQ(r6->answers[0].address, ip("2001:db8::1"));
  EXPECT_FALSE(r6->edns);  // no OPT for a client that sent none
}

TEST(DnsWire, AnswerPastTheLimitSetsTc) {
  const Message q = query("allowed.test", type::kA, false);
  std::vector<IpAddr> many;
  for (std::uint8_t i = 1; i <= 60; ++i) many.push_back(IpAddr::v4({198, 51, 100, i}));
  auto wire = build_answer(q, many, 10, 512);
  EXPECT_LE(wire.size(), 512u);
  auto r = parse(wire);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->truncated());
  EXPECT_LT(r->answers.size(), 60u);
  auto tcp = parse(build_answer(q, many, 10, kMaxMessage));
  EXPECT_FALSE(tcp->truncated());
  EXPECT_EQ(tcp->answers.size(), 60u);
}

TEST(DnsWire, RefusedCarriesEdeOnlyWithEdns) {
  const Message e = query("other.test", type::kA, true);
  auto r = parse(build_refused(e, ede::kBlocked, "not on this sandbox's allow list"));
  ASSERT_TRUE(r.ok()) << r.error().context;
  EXPECT_EQ(r->rcode(), Rcode::kRefused);
  EXPECT_TRUE(r->answers.empty());
  ASSERT_TRUE(r->ede_code.has_value());
  EXPECT_EQ(*r->ede_code, ede::kBlocked);
  EXPECT_EQ(r->ede_text, "not on this sandbox's allow list");
  const Message plain = query("other.test", type::kA, false);
  auto p = parse(build_refused(plain, ede::kBlocked, "x"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rcode(), Rcode::kRefused);
  EXPECT_FALSE(p->edns);
  EXPECT_FALSE(p->ede_code.has_value());
}

TEST(DnsWire, NodataAndErrors) {
  const Message q = query("allowed.test", type::kHttps, true);
  auto n = parse(build_nodata(q));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->rcode(), Rcode::kNoError);
  EXPECT_TRUE(n->answers.empty());
  EXPECT_EQ(n->question.qtype, type::kHttps);
  auto s = parse(build_error(q, Rcode::kServFail));
  EXPECT_EQ(s->rcode(), Rcode::kServFail);
  const Bytes f = build_formerr(0xbeef);
  EXPECT_EQ(f.size(), 12u);
  EXPECT_EQ(peek_id(f), 0xbeef);
  EXPECT_FALSE(peek_id(Bytes(11, 0)).has_value());
}

TEST(DnsWire, ParsesCnameChainsAndCompression) {
  // allowed.test CNAME x.allowed.test (compressed), x.allowed.test A 198.51.100.2
  Bytes b{0x00, 0x07, 0x81, 0x80, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 7,
          'a',  'l',  'l',  'o',  'w',  'e',  'd',  4,    't',  'e',  's',  't',  0,
          0x00, 0x01, 0x00, 0x01, 0xc0, 0x0c, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00,
          0x3c, 0x00, 0x04, 1,    'x',  0xc0, 0x0c, 0xc0, 42,   0x00, 0x01, 0x00, 0x01,
          0x80, 0x00, 0x00, 0x00, 0x00, 0x04, 198,  51,   100,  2};
  auto m = parse(b);
  ASSERT_TRUE(m.ok()) << m.error().context;
  ASSERT_EQ(m->answers.size(), 2u);
  EXPECT_EQ(m->answers[0].rtype, type::kCname);
  EXPECT_EQ(m->answers[0].target, "x.allowed.test");
  EXPECT_EQ(m->answers[1].name, "x.allowed.test");
  EXPECT_EQ(m->answers[1].address, ip("198.51.100.2"));
  EXPECT_EQ(m->answers[1].ttl, 0u);  // top bit set reads as zero
}

TEST(DnsWire, EscapesBytesThatWouldChangeTheName) {
  // One label "a.allowed" then "test": must not read as a.allowed.test.
  auto m = parse(with_header(
      {9, 'a', '.', 'a', 'l', 'l', 'o', 'w', 'e', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->question.name, "a\\.allowed.test");
  auto z = parse(with_header({3, 'a', 0, '*', 0, 0, 1, 0, 1}));
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->question.name, "a\\000\\042");
  auto root = parse(with_header({0, 0, 2, 0, 1}));
  EXPECT_EQ(root->question.name, ".");
}

TEST(DnsWire, MalformedInputs) {
  EXPECT_EQ(parse_error(Bytes(11, 0)), "malformed DNS message: shorter than a header");
  Bytes two_q{0, 1, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(parse_error(two_q), "malformed DNS message: 2 questions (one is supported)");
  Bytes no_q{0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(parse_error(no_q), "malformed DNS message: 0 questions (one is supported)");
  // A pointer to itself, and a two-pointer loop.
  EXPECT_EQ(parse_error(with_header({0xc0, 12, 0, 1, 0, 1})),
            "malformed DNS message: compression pointer does not point backwards");
  EXPECT_EQ(parse_error(with_header({1, 'a', 0xc0, 16, 0xc0, 12, 0, 1, 0, 1})),
            "malformed DNS message: compression pointer does not point backwards");
  // Forward pointer.
  EXPECT_EQ(parse_error(with_header({0xc0, 20, 0, 1, 0, 1, 0, 0, 1, 'a', 0})),
            "malformed DNS message: compression pointer does not point backwards");
  EXPECT_EQ(parse_error(with_header({0xc0})),
            "malformed DNS message: truncated compression pointer");
  EXPECT_EQ(parse_error(with_header({0x40, 0, 0, 1, 0, 1})),
            "malformed DNS message: unknown label type");
  EXPECT_EQ(parse_error(with_header({5, 'a', 'b'})),
            "malformed DNS message: label runs past the end");
  EXPECT_EQ(parse_error(with_header({1, 'a'})), "malformed DNS message: name runs past the end");
  EXPECT_EQ(parse_error(with_header({1, 'a', 0, 0, 1})),
            "malformed DNS message: truncated question");
  EXPECT_EQ(parse_error(with_header({1, 'a', 0, 0, 1, 0, 1, 9})),
            "malformed DNS message: trailing bytes after the last record");
  EXPECT_EQ(parse_error(with_header({1, 'a', 0, 0, 1, 0, 1}, 1)),
            "malformed DNS message: name runs past the end");
  EXPECT_EQ(parse_error(with_header(
                {1, 'a', 0, 0, 1, 0, 1, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 3, 1, 2, 3}, 1)),
            "malformed DNS message: A record of 3 bytes");
  EXPECT_EQ(parse_error(
                with_header({1, 'a', 0, 0, 1, 0, 1, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 9, 1}, 1)),
            "malformed DNS message: record data runs past the end");
  EXPECT_EQ(parse_error(with_header({1, 'a', 0, 0, 1, 0, 1}, 65)),
            "malformed DNS message: more than 64 records in a section");
  // An OPT record in the answer section.
  EXPECT_EQ(
      parse_error(with_header({1, 'a', 0, 0, 1, 0, 1, 0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0}, 1)),
      "malformed DNS message: OPT record out of place");
  // A name of 128 one-byte labels (257 wire bytes).
  Bytes long_name = with_header({});
  for (int i = 0; i < 128; ++i) long_name.insert(long_name.end(), {1, 'a'});
  long_name.insert(long_name.end(), {0, 0, 1, 0, 1});
  EXPECT_EQ(parse_error(long_name), "malformed DNS message: name longer than 255 bytes");
  EXPECT_EQ(parse_error(Bytes(kMaxMessage + 1, 0)),
            "malformed DNS message: longer than 65535 bytes");
}

TEST(DnsWire, LongestNameRoundTrips) {
  std::string name;
  for (int i = 0; i < 3; ++i) name += std::string(63, static_cast<char>('a' + i)) + ".";
  name += std::string(61, 'z');  // 253 characters, 255 wire bytes
  ASSERT_EQ(name.size(), 253u);
  const Message q = query(name.c_str(), type::kA, false);
  EXPECT_EQ(q.question.name, name);
  EXPECT_EQ(q.question.wire_name.size(), 255u);
}

}  // namespace
}  // namespace sandcastle::net::dns

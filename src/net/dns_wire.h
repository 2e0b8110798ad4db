// The DNS wire format, as much as the sandbox's DNS stub and its resolver
// need: parse a message with exactly one question, and build queries,
// REFUSED/NODATA replies (with an Extended DNS Error when the client speaks
// EDNS) and A/AAAA answers. Every input is hostile: parsing is iterative,
// bounded and never follows a compression pointer forwards or to itself.
//
// Limits: a message is at most 65535 bytes (TCP framing); names at most 255
// wire bytes and 127 labels; at most 64 resource records per section are
// parsed (more is a parse error); EDE text at most 256 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "net/address.h"

namespace sandcastle::net::dns {

constexpr std::size_t kMaxMessage = 65535;
constexpr std::size_t kMaxWireName = 255;
constexpr std::size_t kMaxRecordsPerSection = 64;
constexpr std::size_t kClassicUdpLimit = 512;
// Answers the stub gives out live at most this long, so a policy change
// reaches cached names soon.
constexpr std::uint32_t kMaxAnswerTtl = 30;

namespace type {
constexpr std::uint16_t kA = 1;
constexpr std::uint16_t kCname = 5;
constexpr std::uint16_t kPtr = 12;
constexpr std::uint16_t kAaaa = 28;
constexpr std::uint16_t kOpt = 41;
constexpr std::uint16_t kHttps = 65;
}  // namespace type
constexpr std::uint16_t kClassIn = 1;

enum class Rcode : std::uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

// RFC 8914 info codes the stub uses.
namespace ede {
constexpr std::uint16_t kOther = 0;
constexpr std::uint16_t kProhibited = 18;
constexpr std::uint16_t kBlocked = 15;
}  // namespace ede

struct Question {
  // Presentation form, case as sent. Bytes other than LDH, '_' are escaped
  // ("\\." for a dot inside a label, "\\DDD" otherwise), so a crafted label
  // can never read as a different name.
  std::string name{};
  std::string wire_name{};  // the uncompressed wire form, echoed in replies
  std::uint16_t qtype = 0;
  std::uint16_t qclass = 0;
};

struct Record {
  std::string name{};
  std::uint16_t rtype = 0;
  std::uint16_t rclass = 0;
  std::uint32_t ttl = 0;
  std::optional<IpAddr> address{};  // A and AAAA
  std::string target{};             // CNAME
};

struct Message {
  std::uint16_t id = 0;
  std::uint16_t flags = 0;  // QR, opcode, AA, TC, RD, RA, Z, rcode (low 4 bits)
  Question question{};
  std::vector<Record> answers{};
  // EDNS (an OPT record in the additional section).
  bool edns = false;
  std::uint16_t edns_udp_size = 0;
  std::optional<std::uint16_t> ede_code{};
  std::string ede_text{};

  bool is_response() const { return (flags & 0x8000) != 0; }
  std::uint8_t opcode() const { return static_cast<std::uint8_t>((flags >> 11) & 0xf); }
  bool truncated() const { return (flags & 0x0200) != 0; }
  bool recursion_desired() const { return (flags & 0x0100) != 0; }
  Rcode rcode() const { return static_cast<Rcode>(flags & 0xf); }
};

// A message with exactly one question. Records of other types in the answer
// section are skipped (counted against the limit); authority records are
// skipped; an OPT record is read for its UDP size and EDE option.
Result<Message> parse(std::span<const std::uint8_t> wire);

// The header's id of a message too broken to parse, so a FORMERR can still
// be matched by the client; nullopt under 12 bytes.
std::optional<std::uint16_t> peek_id(std::span<const std::uint8_t> wire);

// A recursive query for `name` (normalized text, at most 253 characters of
// LDH, '_' and '.'), with EDNS (4096) when `edns`.
Result<std::vector<std::uint8_t>> build_query(std::uint16_t id, std::string_view name,
                                              std::uint16_t qtype, bool edns);

// The largest reply the client of `query` takes: 512 without EDNS, else its
// advertised size within [512, 65535]; over TCP pass kMaxMessage.
std::size_t reply_limit(const Message& query, bool tcp);

// REFUSED, with EDE `info_code` and `text` when the query had EDNS.
std::vector<std::uint8_t> build_refused(const Message& query, std::uint16_t info_code,
                                        std::string_view text);
// NOERROR without answers (a name that exists, no records of that type).
std::vector<std::uint8_t> build_nodata(const Message& query);
// SERVFAIL, FORMERR, ... without answers.
std::vector<std::uint8_t> build_error(const Message& query, Rcode rcode);
// The same with EDE `info_code` and `text` when the query had EDNS.
std::vector<std::uint8_t> build_error(const Message& query, Rcode rcode, std::uint16_t info_code,
                                      std::string_view text);
// FORMERR for a message that did not parse: header only, the id echoed.
std::vector<std::uint8_t> build_formerr(std::uint16_t id);
// NOERROR with one record per address of the question's type (others are
// skipped), owner name = the question's, TTL = min(ttl, ttl_cap). Records
// that would pass `limit` bytes are left out and TC is set.
std::vector<std::uint8_t> build_answer(const Message& query, std::span<const IpAddr> addrs,
                                       std::uint32_t ttl, std::size_t limit,
                                       std::uint32_t ttl_cap = kMaxAnswerTtl);

}  // namespace sandcastle::net::dns

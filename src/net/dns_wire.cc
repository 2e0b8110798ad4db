#include "net/dns_wire.h"

#include <algorithm>

namespace sandcastle::net::dns {

namespace {

constexpr std::size_t kHeader = 12;
constexpr std::size_t kMaxLabels = 127;
constexpr std::size_t kMaxEdeText = 64;  // what we send; we read up to 256
constexpr std::uint16_t kEdeOption = 15;
constexpr std::uint16_t kOurUdpSize = 1232;

Error malformed(std::string what) {
  return Error::make(ErrorCode::kInvalidArgument, "malformed DNS message: " + std::move(what));
}

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : b_(b) {}
  std::size_t pos() const { return pos_; }
  bool has(std::size_t n) const { return n <= b_.size() - pos_; }
  std::uint8_t u8_at(std::size_t at) const { return b_[at]; }
  std::size_t size() const { return b_.size(); }
  std::uint16_t u16() {
    const auto v = static_cast<std::uint16_t>((b_[pos_] << 8) | b_[pos_ + 1]);
    pos_ += 2;
    return v;
  }
  std::uint32_t u32() {
    const std::uint32_t hi = u16();
    return (hi << 16) | u16();
  }
  void skip(std::size_t n) { pos_ += n; }
  std::span<const std::uint8_t> bytes(std::size_t n) {
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  // Reads a possibly compressed name at pos(), leaving pos() after it. A
  // pointer must aim strictly before the label it replaces, so each hop goes
  // backwards and the walk ends (no loops, no forward references).
  Result<std::pair<std::string, std::string>> name() {
    std::string text;
    std::string wire;
    std::size_t at = pos_;
    std::size_t end = 0;  // where the caller continues; set at the first pointer
    std::size_t labels = 0;
    while (true) {
      if (at >= b_.size()) return malformed("name runs past the end");
      const std::uint8_t len = b_[at];
      if ((len & 0xc0) == 0xc0) {
        if (at + 1 >= b_.size()) return malformed("truncated compression pointer");
        const std::size_t target = ((len & 0x3fu) << 8) | b_[at + 1];
        if (end == 0) end = at + 2;
        if (target >= at) return malformed("compression pointer does not point backwards");
        at = target;
        continue;
      }
      if ((len & 0xc0) != 0) return malformed("unknown label type");
      if (len == 0) {
        wire.push_back('\0');
        if (end == 0) end = at + 1;
        break;
      }
      if (at + 1 + len > b_.size()) return malformed("label runs past the end");
      if (++labels > kMaxLabels || wire.size() + 1 + len + 1 > kMaxWireName)
        return malformed("name longer than 255 bytes");
      wire.push_back(static_cast<char>(len));
      if (!text.empty()) text.push_back('.');
      for (std::size_t i = 0; i < len; ++i) {
        const auto c = static_cast<char>(b_[at + 1 + i]);
        wire.push_back(c);
        append_escaped(text, c);
      }
      at += 1 + len;
    }
    pos_ = end;
    if (text.empty()) text.push_back('.');
    return std::pair{std::move(text), std::move(wire)};
  }

 private:
  static void append_escaped(std::string& out, char c) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
                       u == '-' || u == '_';
    if (plain) {
      out.push_back(c);
    } else if (u == '.' || u == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else {
      out.push_back('\\');
      out.push_back(static_cast<char>('0' + u / 100));
      out.push_back(static_cast<char>('0' + u / 10 % 10));
      out.push_back(static_cast<char>('0' + u % 10));
    }
  }

  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

Status read_opt(Reader& r, std::uint16_t rclass, std::uint16_t rdlen, Message& m) {
  if (m.edns) return malformed("more than one OPT record");
  m.edns = true;
  m.edns_udp_size = rclass;
  const std::size_t end = r.pos() + rdlen;
  while (r.pos() < end) {
    if (end - r.pos() < 4) return malformed("truncated EDNS option");
    const std::uint16_t code = r.u16();
    const std::uint16_t len = r.u16();
    if (len > end - r.pos()) return malformed("EDNS option runs past its record");
    if (code == kEdeOption && len >= 2 && !m.ede_code) {
      m.ede_code = r.u16();
      auto text = r.bytes(std::min<std::size_t>(len - 2u, 256));
      m.ede_text.assign(text.begin(), text.end());
      r.skip(len - 2u - text.size());
    } else {
      r.skip(len);
    }
  }
  return ok_status();
}

// One resource record; answers of interest go to `out` (others are read and
// dropped), an OPT in the additional section fills the EDNS fields.
Status read_record(Reader& r, Message& m, bool answer_section, bool additional_section) {
  auto owner = r.name();
  if (!owner) return owner.take_error();
  if (!r.has(10)) return malformed("truncated record header");
  Record rec;
  rec.name = std::move(owner->first);
  rec.rtype = r.u16();
  rec.rclass = r.u16();
  rec.ttl = r.u32();
  if (rec.ttl > 0x7fffffffu) rec.ttl = 0;  // RFC 2181 8: top bit set means zero
  const std::uint16_t rdlen = r.u16();
  if (!r.has(rdlen)) return malformed("record data runs past the end");
  if (rec.rtype == type::kOpt) {
    if (!additional_section || rec.name != ".") return malformed("OPT record out of place");
    return read_opt(r, rec.rclass, rdlen, m);
  }
  const std::size_t end = r.pos() + rdlen;
  if (answer_section && rec.rtype == type::kA) {
    if (rdlen != 4) return malformed("A record of " + std::to_string(rdlen) + " bytes");
    auto b = r.bytes(4);
    rec.address = IpAddr::v4({b[0], b[1], b[2], b[3]});
  } else if (answer_section && rec.rtype == type::kAaaa) {
    if (rdlen != 16) return malformed("AAAA record of " + std::to_string(rdlen) + " bytes");
    std::array<std::uint8_t, 16> a{};
    auto b = r.bytes(16);
    std::copy(b.begin(), b.end(), a.begin());
    rec.address = IpAddr::v6(a);
  } else if (answer_section && rec.rtype == type::kCname) {
    auto target = r.name();
    if (!target) return target.take_error();
    if (r.pos() != end) return malformed("CNAME data longer than its name");
    rec.target = std::move(target->first);
  } else {
    r.skip(rdlen);
  }
  if (answer_section) m.answers.push_back(std::move(rec));
  return ok_status();
}

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v & 0xffff));
}

std::vector<std::uint8_t> opt_record(std::optional<std::uint16_t> ede_code, std::string_view text) {
  std::vector<std::uint8_t> out{0};  // root owner
  put16(out, type::kOpt);
  put16(out, kOurUdpSize);
  put32(out, 0);
  if (!ede_code) {
    put16(out, 0);
    return out;
  }
  text = text.substr(0, kMaxEdeText);
  put16(out, static_cast<std::uint16_t>(4 + 2 + text.size()));
  put16(out, kEdeOption);
  put16(out, static_cast<std::uint16_t>(2 + text.size()));
  put16(out, *ede_code);
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

// Header and question of a reply to `q`; counts are patched by the caller.
std::vector<std::uint8_t> reply_head(const Message& q, Rcode rcode) {
  std::vector<std::uint8_t> out;
  put16(out, q.id);
  // QR, the query's opcode and RD, RA; no AA.
  const auto flags = static_cast<std::uint16_t>(0x8000 | (q.flags & 0x7900) | 0x0080 |
                                                static_cast<std::uint16_t>(rcode));
  put16(out, flags);
  put16(out, 1);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  out.insert(out.end(), q.question.wire_name.begin(), q.question.wire_name.end());
  put16(out, q.question.qtype);
  put16(out, q.question.qclass);
  return out;
}

void set_count(std::vector<std::uint8_t>& out, std::size_t at, std::size_t v) {
  out[at] = static_cast<std::uint8_t>(v >> 8);
  out[at + 1] = static_cast<std::uint8_t>(v & 0xff);
}

std::vector<std::uint8_t> reply_without_answers(const Message& q, Rcode rcode,
                                                std::optional<std::uint16_t> ede_code,
                                                std::string_view text) {
  auto out = reply_head(q, rcode);
  if (q.edns) {
    auto opt = opt_record(ede_code, text);
    out.insert(out.end(), opt.begin(), opt.end());
    set_count(out, 10, 1);
  }
  return out;
}

}  // namespace

Result<Message> parse(std::span<const std::uint8_t> wire) {
  if (wire.size() > kMaxMessage) return malformed("longer than 65535 bytes");
  if (wire.size() < kHeader) return malformed("shorter than a header");
  Reader r(wire);
  Message m;
  m.id = r.u16();
  m.flags = r.u16();
  const std::uint16_t qd = r.u16();
  const std::uint16_t an = r.u16();
  const std::uint16_t ns = r.u16();
  const std::uint16_t ar = r.u16();
  if (qd != 1) return malformed(std::to_string(qd) + " questions (one is supported)");
  if (an > kMaxRecordsPerSection || ns > kMaxRecordsPerSection || ar > kMaxRecordsPerSection)
    return malformed("more than 64 records in a section");
  auto qname = r.name();
  if (!qname) return qname.take_error();
  if (!r.has(4)) return malformed("truncated question");
  m.question.name = std::move(qname->first);
  m.question.wire_name = std::move(qname->second);
  m.question.qtype = r.u16();
  m.question.qclass = r.u16();
  for (std::size_t i = 0; i < an; ++i)
    if (auto s = read_record(r, m, true, false); !s) return s.take_error();
  for (std::size_t i = 0; i < ns; ++i)
    if (auto s = read_record(r, m, false, false); !s) return s.take_error();
  for (std::size_t i = 0; i < ar; ++i)
    if (auto s = read_record(r, m, false, true); !s) return s.take_error();
  if (r.pos() != wire.size()) return malformed("trailing bytes after the last record");
  return m;
}

std::optional<std::uint16_t> peek_id(std::span<const std::uint8_t> wire) {
  if (wire.size() < kHeader) return std::nullopt;
  return static_cast<std::uint16_t>((wire[0] << 8) | wire[1]);
}

Result<std::vector<std::uint8_t>> build_query(std::uint16_t id, std::string_view name,
                                              std::uint16_t qtype, bool edns) {
  if (name.ends_with('.')) name.remove_suffix(1);
  if (name.empty() || name.size() > 253)
    return Error::make(ErrorCode::kInvalidArgument, "DNS name: 1 to 253 characters");
  std::vector<std::uint8_t> out;
  put16(out, id);
  put16(out, 0x0100);  // RD
  put16(out, 1);
  put16(out, 0);
  put16(out, 0);
  put16(out, edns ? 1 : 0);
  std::size_t start = 0;
  while (start <= name.size()) {
    auto dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    const std::string_view label = name.substr(start, dot - start);
    if (label.empty() || label.size() > 63)
      return Error::make(ErrorCode::kInvalidArgument, "DNS name: labels of 1 to 63 characters");
    for (char c : label) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
      if (!ok) return Error::make(ErrorCode::kInvalidArgument, "DNS name: LDH and '_' only");
    }
    out.push_back(static_cast<std::uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    start = dot + 1;
  }
  out.push_back(0);
  put16(out, qtype);
  put16(out, kClassIn);
  if (edns) {
    auto opt = opt_record(std::nullopt, {});
    set_count(opt, 3, 4096);  // the class field: our UDP size as a client
    out.insert(out.end(), opt.begin(), opt.end());
  }
  return out;
}

std::size_t reply_limit(const Message& query, bool tcp) {
  if (tcp) return kMaxMessage;
  if (!query.edns) return kClassicUdpLimit;
  return std::clamp<std::size_t>(query.edns_udp_size, kClassicUdpLimit, kMaxMessage);
}

std::vector<std::uint8_t> build_refused(const Message& query, std::uint16_t info_code,
                                        std::string_view text) {
  return reply_without_answers(query, Rcode::kRefused, info_code, text);
}

std::vector<std::uint8_t> build_nodata(const Message& query) {
  return reply_without_answers(query, Rcode::kNoError, std::nullopt, {});
}

std::vector<std::uint8_t> build_error(const Message& query, Rcode rcode) {
  return reply_without_answers(query, rcode, std::nullopt, {});
}

std::vector<std::uint8_t> build_error(const Message& query, Rcode rcode, std::uint16_t info_code,
                                      std::string_view text) {
  return reply_without_answers(query, rcode, info_code, text);
}

std::vector<std::uint8_t> build_formerr(std::uint16_t id) {
  std::vector<std::uint8_t> out;
  put16(out, id);
  put16(out, 0x8000 | static_cast<std::uint16_t>(Rcode::kFormErr));
  for (int i = 0; i < 4; ++i) put16(out, 0);
  return out;
}

std::vector<std::uint8_t> build_answer(const Message& query, std::span<const IpAddr> addrs,
                                       std::uint32_t ttl, std::size_t limit,
                                       std::uint32_t ttl_cap) {
  auto out = reply_head(query, Rcode::kNoError);
  std::vector<std::uint8_t> opt;
  if (query.edns) opt = opt_record(std::nullopt, {});
  const bool want_v4 = query.question.qtype == type::kA;
  const bool want_v6 = query.question.qtype == type::kAaaa;
  ttl = std::min(ttl, ttl_cap);
  std::size_t count = 0;
  bool dropped = false;
  for (const IpAddr& a : addrs) {
    if (!((a.is_v4() && want_v4) || (!a.is_v4() && want_v6))) continue;
    const auto bytes = a.bytes();
    if (out.size() + 12 + bytes.size() + opt.size() > limit) {
      dropped = true;
      break;
    }
    put16(out, 0xc000 | kHeader);  // the question's name
    put16(out, want_v4 ? type::kA : type::kAaaa);
    put16(out, kClassIn);
    put32(out, ttl);
    put16(out, static_cast<std::uint16_t>(bytes.size()));
    out.insert(out.end(), bytes.begin(), bytes.end());
    ++count;
  }
  set_count(out, 6, count);
  if (dropped) out[2] |= 0x02;  // TC
  if (query.edns) {
    out.insert(out.end(), opt.begin(), opt.end());
    set_count(out, 10, 1);
  }
  return out;
}

}  // namespace sandcastle::net::dns

#include "net/tls_sni.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace sandcastle::net {

namespace {

constexpr std::uint8_t kHandshakeRecord = 0x16;
constexpr std::uint8_t kClientHello = 1;
constexpr std::size_t kMaxRecord = 16384;  // TLSPlaintext.length
constexpr std::uint16_t kServerNameExt = 0;
constexpr std::uint16_t kEchExt = 0xfe0d;

SniResult status(SniStatus s) {
  return SniResult{s, {}, false};
}

class Cursor {
 public:
  explicit Cursor(std::span<const std::uint8_t> b) : b_(b) {}
  std::size_t left() const { return b_.size() - pos_; }
  std::optional<std::uint32_t> num(std::size_t width) {
    if (left() < width) return std::nullopt;
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v = (v << 8) | b_[pos_++];
    return v;
  }
  std::optional<std::span<const std::uint8_t>> take(std::size_t n) {
    if (left() < n) return std::nullopt;
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  // A length-prefixed vector (width bytes of length, then that many bytes).
  std::optional<std::span<const std::uint8_t>> vec(std::size_t width) {
    auto n = num(width);
    if (!n) return std::nullopt;
    return take(*n);
  }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

bool name_char(std::uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// The server_name extension's body: exactly one host_name entry counts.
SniResult read_server_name(std::span<const std::uint8_t> body) {
  Cursor c(body);
  auto list = c.vec(2);
  if (!list || c.left() != 0 || list->empty()) return status(SniStatus::kMalformed);
  Cursor l(*list);
  SniResult r = status(SniStatus::kNone);
  while (l.left() > 0) {
    auto kind = l.num(1);
    auto name = l.vec(2);
    if (!kind || !name) return status(SniStatus::kMalformed);
    if (*kind != 0) continue;  // no other name types are defined
    if (r.status == SniStatus::kName || name->empty() || name->size() > 255)
      return status(SniStatus::kMalformed);
    if (!std::all_of(name->begin(), name->end(), name_char)) return status(SniStatus::kMalformed);
    r.status = SniStatus::kName;
    r.name.assign(name->begin(), name->end());
  }
  return r;
}

// The ClientHello body (after the 4-byte handshake header).
SniResult read_client_hello(std::span<const std::uint8_t> hello) {
  Cursor c(hello);
  if (!c.take(2 + 32)) return status(SniStatus::kMalformed);  // legacy_version, random
  auto session = c.vec(1);
  auto suites = c.vec(2);
  auto compression = c.vec(1);
  if (!session || session->size() > 32 || !suites || suites->empty() || suites->size() % 2 != 0 ||
      !compression || compression->empty())
    return status(SniStatus::kMalformed);
  if (c.left() == 0) return status(SniStatus::kNone);  // no extensions at all
  auto exts = c.vec(2);
  if (!exts || c.left() != 0) return status(SniStatus::kMalformed);
  Cursor e(*exts);
  SniResult r = status(SniStatus::kNone);
  std::vector<std::uint16_t> seen;
  while (e.left() > 0) {
    auto type = e.num(2);
    auto body = e.vec(2);
    if (!type || !body) return status(SniStatus::kMalformed);
    seen.push_back(static_cast<std::uint16_t>(*type));
    if (*type == kEchExt) r.ech = true;
    if (*type != kServerNameExt) continue;
    const bool ech = r.ech;
    r = read_server_name(*body);
    r.ech = ech;
    if (r.status == SniStatus::kMalformed) return r;
  }
  // RFC 8446 4.2: an extension type appears at most once.
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
    return status(SniStatus::kMalformed);
  return r;
}

}  // namespace

SniResult peek_sni(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return status(SniStatus::kNeedMore);
  if (bytes[0] != kHandshakeRecord) return status(SniStatus::kNotTls);
  // Gather handshake bytes from consecutive records until the ClientHello
  // is complete; a record's own header is checked as soon as it is there.
  std::vector<std::uint8_t> hs;
  std::size_t off = 0;
  std::optional<std::size_t> need;  // 4 + ClientHello length, once known
  while (!need || hs.size() < *need) {
    if (bytes.size() - off < 5) {
      // Partial header: what is there must still look like a handshake record.
      if (off < bytes.size() && bytes[off] != kHandshakeRecord)
        return status(SniStatus::kMalformed);
      if (off + 1 < bytes.size() && bytes[off + 1] != 3) return status(SniStatus::kMalformed);
      return status(SniStatus::kNeedMore);
    }
    const std::size_t len = (std::size_t{bytes[off + 3]} << 8) | bytes[off + 4];
    if (bytes[off] != kHandshakeRecord || bytes[off + 1] != 3 || len == 0 || len > kMaxRecord)
      return status(SniStatus::kMalformed);
    const std::size_t avail = std::min(len, bytes.size() - off - 5);
    hs.insert(hs.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off + 5),
              bytes.begin() + static_cast<std::ptrdiff_t>(off + 5 + avail));
    if (!need && hs.size() >= 4) {
      if (hs[0] != kClientHello) return status(SniStatus::kMalformed);
      const std::size_t n = (std::size_t{hs[1]} << 16) | (std::size_t{hs[2]} << 8) | hs[3];
      if (n > kMaxClientHello) return status(SniStatus::kMalformed);
      need = 4 + n;
    }
    if (avail < len) {
      if (need && hs.size() >= *need) break;
      return status(SniStatus::kNeedMore);
    }
    off += 5 + len;
  }
  // Another handshake message after the ClientHello is no client's first
  // flight: refuse the oddity rather than guess which one counts.
  if (hs.size() > *need) return status(SniStatus::kMalformed);
  return read_client_hello(std::span(hs).subspan(4, *need - 4));
}

const char* sni_status_name(SniStatus s) {
  switch (s) {
    case SniStatus::kNeedMore: return "need_more";
    case SniStatus::kNotTls: return "not_tls";
    case SniStatus::kNone: return "none";
    case SniStatus::kName: return "name";
    case SniStatus::kMalformed: return "malformed";
  }
  return "?";
}

}  // namespace sandcastle::net

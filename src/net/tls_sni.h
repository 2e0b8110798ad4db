// The server name a TLS client asks for, read from the first bytes of a
// tunnel before anything is forwarded, so the proxy can hold a TLS
// connection to the name it allowed. Bounded: the ClientHello may span
// several records but at most kMaxClientHello bytes of it are looked at.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace sandcastle::net {

// A ClientHello larger than this is refused as malformed (real ones are
// under 2 KiB, 16 KiB with large post-quantum key shares is the most seen).
constexpr std::size_t kMaxClientHello = std::size_t{16} * 1024;

enum class SniStatus : std::uint8_t {
  kNeedMore,   // a TLS handshake so far; call again with more bytes
  kNotTls,     // the first byte is not a TLS handshake record: another protocol
  kNone,       // a complete ClientHello without a server_name
  kName,       // a complete ClientHello with one host_name
  kMalformed,  // claims to be a TLS handshake and is not a well-formed ClientHello
};

struct SniResult {
  SniStatus status = SniStatus::kNeedMore;
  // kName: as sent (LDH, '_' and '.' only; anything else is kMalformed).
  std::string name{};
  // The ClientHello offers Encrypted Client Hello (extension 0xfe0d): the
  // visible name is only the outer one.
  bool ech = false;
};

// `bytes` is everything the client has sent so far, from the first byte.
SniResult peek_sni(std::span<const std::uint8_t> bytes);

const char* sni_status_name(SniStatus status);

}  // namespace sandcastle::net

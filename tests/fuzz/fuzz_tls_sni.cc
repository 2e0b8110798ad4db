// Fuzzes the ClientHello reader the proxy runs on a tunnel's first bytes
// (net/tls_sni.h): a name it returns is plain LDH text, and one byte less
// input never turns a finished answer into another finished answer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "net/tls_sni.h"

using namespace sandcastle::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::uint8_t> in(data, size);
  const SniResult r = peek_sni(in);
  if (r.status == SniStatus::kName) {
    if (r.name.empty() || r.name.size() > 255) std::abort();
    for (char c : r.name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
      if (!ok) std::abort();
    }
  } else if (!r.name.empty()) {
    std::abort();
  }
  if (size > 0 && (r.status == SniStatus::kName || r.status == SniStatus::kNone)) {
    const SniResult shorter = peek_sni(in.first(size - 1));
    if (shorter.status != SniStatus::kNeedMore &&
        (shorter.status != r.status || shorter.name != r.name))
      std::abort();
  }
  return 0;
}

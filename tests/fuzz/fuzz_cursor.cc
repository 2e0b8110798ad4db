// Fuzzes the opaque list cursors and base64 decoding clients hand back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/base64.h"
#include "mcp/pagination.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandcastle::mcp;
  std::string in(reinterpret_cast<const char*>(data), size);
  if (auto off = decode_cursor("tools", in)) {
    // A cursor that decodes must be exactly one we could have issued.
    if (encode_cursor("tools", *off) != in) std::abort();
  }
  if (auto bytes = sandcastle::base64_decode(in)) {
    // Re-encoding and decoding again is stable.
    auto again = sandcastle::base64_decode(sandcastle::base64_encode(*bytes));
    if (!again || *again != *bytes) std::abort();
  }
  return 0;
}

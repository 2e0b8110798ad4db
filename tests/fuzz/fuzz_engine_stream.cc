// Fuzzes the Engine API's multiplexed-stream demuxer (sandbox/engine/
// stream_demuxer.h) with a small frame limit: fed whole, fed one byte at a
// time and fed in pieces cut where the input's first byte says, it must give
// the same payloads and the same verdict; no frame past the limit may be
// delivered, and nothing is delivered after an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/engine/stream_demuxer.h"

namespace {

using sandcastle::Status;
using sandcastle::sandbox::engine::StreamDemuxer;
using sandcastle::sandbox::engine::StreamId;

constexpr std::size_t kLimit = 64;

struct Run {
  std::string out[3];
  bool ok = true;
};

Run feed(std::string_view in, std::size_t step) {
  Run r;
  StreamDemuxer d(
      [&r](StreamId id, std::string_view b) -> Status {
        if (!r.ok || b.empty() || b.size() > kLimit) std::abort();
        r.out[static_cast<int>(id)].append(b);
        return sandcastle::ok_status();
      },
      kLimit);
  for (std::size_t i = 0; i < in.size() && r.ok; i += step) r.ok = d.feed(in.substr(i, step)).ok();
  if (r.ok) r.ok = d.finish().ok();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::size_t step = 1 + data[0] % 13;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Run whole = feed(in, in.size() + 1);
  for (const Run& other : {feed(in, 1), feed(in, step)}) {
    if (other.ok != whole.ok) std::abort();
    // Bytes before a bad header are all delivered, none after: the same
    // bytes whatever the pieces, error or not.
    for (int s = 0; s < 3; ++s)
      if (other.out[s] != whole.out[s]) std::abort();
  }
  return 0;
}

// The Engine API's multiplexed stream (attach and exec without a TTY): frames
// of an 8-byte header — stream byte 0 (stdin), 1 (stdout) or 2 (stderr),
// three zero bytes, a big-endian u32 payload length — then the payload.
// The engine is hostile input: a header with another stream byte, non-zero
// padding, or a length past the stated limit ends the stream with an error.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "common/result.h"

namespace sandcastle::sandbox::engine {

enum class StreamId : std::uint8_t { kStdin = 0, kStdout = 1, kStderr = 2 };

class StreamDemuxer {
 public:
  // dockerd and Podman write one frame per read of the process's pipe
  // (32 KiB buffers), so 1 MiB is far past any honest frame.
  static constexpr std::size_t kDefaultMaxFrame = std::size_t{1} << 20;
  static constexpr std::size_t kHeaderSize = 8;

  // Receives payload bytes as they arrive: a frame may come in several
  // pieces (never across two frames). An error from it ends the stream.
  using Sink = std::function<Status(StreamId, std::string_view)>;

  explicit StreamDemuxer(Sink sink, std::size_t max_frame = kDefaultMaxFrame);

  // Any split of the stream into pieces gives the same frames. After an
  // error every later call returns it again.
  Status feed(std::string_view bytes);
  // At the end of the stream: an error if it stopped inside a frame.
  Status finish();

 private:
  Sink sink_;
  std::size_t max_frame_;
  std::array<unsigned char, kHeaderSize> header_{};
  std::size_t header_have_ = 0;
  std::size_t payload_left_ = 0;
  StreamId current_ = StreamId::kStdout;
  bool failed_ = false;
  Error error_{};
};

}  // namespace sandcastle::sandbox::engine

#include "sandbox/engine/stream_demuxer.h"

#include <algorithm>
#include <utility>

namespace sandcastle::sandbox::engine {

StreamDemuxer::StreamDemuxer(Sink sink, std::size_t max_frame)
    : sink_(std::move(sink)), max_frame_(max_frame) {}

Status StreamDemuxer::feed(std::string_view bytes) {
  if (failed_) return error_;
  auto fail = [this](Error e) -> Status {
    failed_ = true;
    error_ = e;
    return e;
  };
  while (!bytes.empty()) {
    if (payload_left_ > 0) {
      const std::size_t n = std::min(payload_left_, bytes.size());
      payload_left_ -= n;
      if (auto st = sink_(current_, bytes.substr(0, n)); !st.ok()) return fail(st.take_error());
      bytes.remove_prefix(n);
      continue;
    }
    const std::size_t n = std::min(kHeaderSize - header_have_, bytes.size());
    std::copy_n(bytes.begin(), n, header_.begin() + static_cast<std::ptrdiff_t>(header_have_));
    header_have_ += n;
    bytes.remove_prefix(n);
    if (header_have_ < kHeaderSize) break;
    header_have_ = 0;
    if (header_[0] > 2)
      return fail(Error::make(ErrorCode::kInvalidArgument,
                              "multiplexed stream: bad stream byte " + std::to_string(header_[0])));
    if (header_[1] != 0 || header_[2] != 0 || header_[3] != 0)
      return fail(Error::make(ErrorCode::kInvalidArgument,
                              "multiplexed stream: non-zero padding in a frame header"));
    const std::size_t len = (std::size_t{header_[4]} << 24) | (std::size_t{header_[5]} << 16) |
                            (std::size_t{header_[6]} << 8) | std::size_t{header_[7]};
    if (len > max_frame_)
      return fail(Error::make(ErrorCode::kResourceExhausted,
                              "multiplexed stream: a frame of " + std::to_string(len) +
                                  " bytes is past the limit of " + std::to_string(max_frame_)));
    current_ = static_cast<StreamId>(header_[0]);
    payload_left_ = len;
  }
  return ok_status();
}

Status StreamDemuxer::finish() {
  if (failed_) return error_;
  if (header_have_ != 0 || payload_left_ != 0) {
    failed_ = true;
    error_ = Error::make(ErrorCode::kIo, "multiplexed stream: the stream ended inside a frame");
    return error_;
  }
  return ok_status();
}

}  // namespace sandcastle::sandbox::engine

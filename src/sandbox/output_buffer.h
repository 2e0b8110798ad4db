// OutputBuffer: keeps at most `cap` bytes of a stream — the first half and the
// most recent half — so a flood costs bounded memory yet the caller still
// sees how the output began and how it ended.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sandcastle::sandbox {

class OutputBuffer {
 public:
  explicit OutputBuffer(std::size_t cap) : cap_(cap), head_cap_(cap - cap / 2), tail_cap_(cap / 2) {}

  void append(std::string_view data);
  bool truncated() const { return total_ > cap_; }
  std::uint64_t total() const { return total_; }
  // Head + marker + tail when truncated, else everything.
  std::string take();

 private:
  std::size_t cap_;
  std::size_t head_cap_;
  std::size_t tail_cap_;
  std::string head_;
  std::string tail_;         // ring buffer of the last tail_cap_ bytes
  std::size_t tail_pos_ = 0;  // next write position once the ring is full
  std::uint64_t total_ = 0;
};

}  // namespace sandcastle::sandbox

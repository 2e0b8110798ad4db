#include "sandbox/output_buffer.h"

#include <algorithm>

namespace sandcastle::sandbox {

void OutputBuffer::append(std::string_view data) {
  total_ += data.size();
  if (head_.size() < head_cap_) {
    std::size_t n = std::min(head_cap_ - head_.size(), data.size());
    head_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  if (tail_cap_ == 0 || data.empty()) return;
  // Only the last tail_cap_ bytes of this chunk can survive.
  if (data.size() > tail_cap_) data = data.substr(data.size() - tail_cap_);
  if (tail_.size() < tail_cap_) {
    std::size_t n = std::min(tail_cap_ - tail_.size(), data.size());
    tail_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  while (!data.empty()) {
    std::size_t n = std::min(tail_cap_ - tail_pos_, data.size());
    tail_.replace(tail_pos_, n, data.substr(0, n));
    tail_pos_ = (tail_pos_ + n) % tail_cap_;
    data.remove_prefix(n);
  }
}

std::string OutputBuffer::take() {
  std::string tail = tail_.substr(tail_pos_) + tail_.substr(0, tail_pos_);
  std::string out = std::move(head_);
  if (truncated()) {
    out += "\n[... ";
    out += std::to_string(total_ - head_cap_ - tail.size());
    out += " bytes truncated ...]\n";
  }
  out += tail;
  head_.clear();
  tail_.clear();
  tail_pos_ = 0;
  total_ = 0;
  return out;
}

}  // namespace sandcastle::sandbox

#include "sandbox/engine/agent/channels.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sandcastle::sandbox::engine::agent {
namespace {

// Credit goes back in batches of at least this much (or when the channel's
// buffer is empty), not one control frame per write.
constexpr std::uint32_t kCreditBatch = kWindow / 4;
// Reads of one channel per wake-up, so a busy one does not starve the rest.
constexpr int kReadsPerWake = 4;

}  // namespace

void Channels::frame(std::uint32_t id, std::string_view payload) {
  if (out_off_ > 0 && out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  }
  out_ += encode_frame(id, payload);
}

bool Channels::flush() {
  while (out_off_ < out_.size()) {
    ssize_t n = ::write(1, out_.data() + out_off_, out_.size() - out_off_);
    if (n > 0) {
      out_off_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    return false;
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  } else if (out_off_ > (std::size_t{1} << 20)) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  return true;
}

void Channels::add(std::uint32_t id, ChannelKind kind, UniqueFd fd,
                   std::optional<std::uint32_t> exec) {
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK);
  Channel c;
  c.kind = kind;
  c.fd = std::move(fd);
  c.exec = exec;
  c.reading = kind != ChannelKind::kStdin;
  c.writing = kind != ChannelKind::kOutput;
  map_[id] = std::move(c);
}

const char* Channels::on_data(std::uint32_t id, std::string_view data) {
  auto it = map_.find(id);
  if (it == map_.end()) return nullptr;  // closed here while the bytes were on their way
  Channel& c = it->second;
  if (c.kind == ChannelKind::kOutput) return data.empty() ? nullptr : "data on an output channel";
  if (c.server_eof) return "data after EOF";
  if (c.in_flight() + data.size() > kWindow) return "data beyond the channel's window";
  if (data.empty()) {
    c.server_eof = true;
    pump_write(id, c);
    return nullptr;
  }
  if (!c.writing) {
    // The fd refused an earlier write (kClose is on its way): discard, and
    // credit it so the server is never left waiting.
    frame(kControlChannel, encode_credit(id, static_cast<std::uint32_t>(data.size())));
    return nullptr;
  }
  if (c.pending_off > 0 && c.pending_off == c.pending.size()) {
    c.pending.clear();
    c.pending_off = 0;
  }
  c.pending.append(data);
  pump_write(id, c);
  return nullptr;
}

const char* Channels::on_credit(std::uint32_t id, std::uint32_t bytes) {
  auto it = map_.find(id);
  if (it == map_.end()) return nullptr;
  Channel& c = it->second;
  if (bytes > kWindow - c.credit) return "credit beyond the channel's window";
  c.credit += bytes;
  if (!c.reading && !c.writing) {  // closed here, waiting for this credit
    retire(id, c);
    return nullptr;
  }
  if (c.reading && c.draining) pump_read(id, c);
  return nullptr;
}

void Channels::on_close(std::uint32_t id) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  // The exec may have been waiting for this channel to drain.
  if (it->second.reading && it->second.exec) finished_.push_back(*it->second.exec);
  map_.erase(it);
}

void Channels::pump_write(std::uint32_t id, Channel& c) {
  while (c.writing && c.in_flight() > 0) {
    ssize_t n = ::write(c.fd.get(), c.pending.data() + c.pending_off, c.in_flight());
    if (n > 0) {
      c.pending_off += static_cast<std::size_t>(n);
      c.owed += static_cast<std::uint32_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    // The reader is gone (EPIPE) or the socket failed: what is left is
    // discarded and credited, the server told.
    c.owed += static_cast<std::uint32_t>(c.in_flight());
    c.pending.clear();
    c.pending_off = 0;
    end_writing(id, c);
    return;
  }
  if (c.owed > 0 && (c.owed >= kCreditBatch || c.in_flight() == 0)) {
    frame(kControlChannel, encode_credit(id, c.owed));
    c.owed = 0;
  }
  if (c.in_flight() == 0 && c.server_eof && c.writing) end_writing(id, c);
}

void Channels::end_writing(std::uint32_t id, Channel& c) {
  if (c.owed > 0) {
    frame(kControlChannel, encode_credit(id, c.owed));
    c.owed = 0;
  }
  c.writing = false;
  c.pending.clear();
  c.pending_off = 0;
  // A socket keeps its other direction: the peer sees EOF on its read.
  if (c.kind == ChannelKind::kSocket || c.kind == ChannelKind::kFiles)
    (void)::shutdown(c.fd.get(), SHUT_WR);
  retire(id, c);
}

void Channels::pump_read(std::uint32_t id, Channel& c) {
  char buf[kMaxDataFrame];
  for (int i = 0; c.reading && c.credit > 0 && !backlogged(); ++i) {
    if (i >= kReadsPerWake && !c.draining) return;
    std::size_t want = std::min<std::size_t>(c.credit, sizeof buf);
    ssize_t n = ::read(c.fd.get(), buf, want);
    if (n > 0) {
      frame(id, std::string_view(buf, static_cast<std::size_t>(n)));
      c.credit -= static_cast<std::uint32_t>(n);
      if (c.draining && (c.drained += static_cast<std::size_t>(n)) >= kDrainCap) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !c.draining) return;
    break;  // EOF, an error, or a drained pipe after the command ended
  }
  if (c.reading && (c.credit == 0 || backlogged())) {
    if (!(c.draining && c.drained >= kDrainCap)) return;  // more once the server takes some
  }
  if (c.reading) end_reading(id, c);
}

void Channels::end_reading(std::uint32_t id, Channel& c) {
  c.reading = false;
  frame(id, {});  // EOF
  if (c.exec) finished_.push_back(*c.exec);
  retire(id, c);
}

void Channels::retire(std::uint32_t id, Channel& c) {
  if (c.reading || c.writing) return;
  // The server closes its end at kClose, dropping what it has not handed
  // on yet: so kClose waits until all we sent is credited (or is forced).
  if (c.credit < kWindow && !c.now) {
    c.fd.reset();
    return;
  }
  frame(kControlChannel, encode_close(id));
  map_.erase(id);
}

void Channels::end_of_command(std::uint32_t id) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  Channel& c = it->second;
  if (c.kind == ChannelKind::kStdin) {
    end_writing(id, c);
    return;
  }
  c.draining = true;
  pump_read(id, c);
}

bool Channels::still_reading(std::uint32_t id) const {
  auto it = map_.find(id);
  return it != map_.end() && it->second.reading;
}

void Channels::close(std::uint32_t id, bool now) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  Channel& c = it->second;
  c.now = c.now || now;
  if (c.reading) {
    c.reading = false;
    frame(id, {});
  }
  if (c.writing)
    end_writing(id, c);  // retires
  else
    retire(id, c);
}

void Channels::abandon(std::uint32_t id, bool output) {
  if (map_.count(id)) return close(id, true);
  if (output) frame(id, {});
  frame(kControlChannel, encode_close(id));
}

void Channels::resume_drains() {
  if (backlogged()) return;
  std::vector<std::uint32_t> ids;
  for (const auto& [id, c] : map_)
    if (c.draining && c.reading && c.credit > 0) ids.push_back(id);
  for (std::uint32_t id : ids)
    if (auto it = map_.find(id); it != map_.end()) pump_read(id, it->second);
}

void Channels::poll_set(std::vector<struct pollfd>& pfds, std::vector<std::uint32_t>& who) const {
  const bool room = !backlogged();
  for (const auto& [id, c] : map_) {
    short events = 0;
    if (c.reading && c.credit > 0 && room) events |= POLLIN;
    if (c.writing && c.in_flight() > 0) events |= POLLOUT;
    if (events == 0) continue;
    pfds.push_back({c.fd.get(), events, 0});
    who.push_back(id);
  }
}

void Channels::on_ready(std::uint32_t id, short revents) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  Channel& c = it->second;
  if (c.writing && c.in_flight() > 0 && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    pump_write(id, c);
    it = map_.find(id);
    if (it == map_.end()) return;
  }
  Channel& again = it->second;
  if (again.reading && (revents & (POLLIN | POLLHUP | POLLERR))) pump_read(id, again);
}

}  // namespace sandcastle::sandbox::engine::agent

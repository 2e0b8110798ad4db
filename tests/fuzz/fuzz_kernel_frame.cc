// Fuzzes the kernel channel as the server reads it (service/kernel_frame.h):
// the first byte picks the mode. Even: the rest is one frame body for the
// decoder. Odd: the rest is the channel's byte stream, sent through a real
// socketpair in small writes and cut into frames by FrameReader under a
// small cap. Any bytes give frames whose fields hold what the types promise,
// or one clean error; never a crash, and never a buffer past one frame.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "service/kernel_frame.h"

namespace {

using namespace sandcastle::service;

void check(const KernelFrame& f, std::size_t body_size) {
  if (const auto* s = std::get_if<StreamFrame>(&f)) {
    if (s->id.size() > 64 || s->text.size() > body_size) std::abort();
  } else if (const auto* d = std::get_if<DisplayFrame>(&f)) {
    if (!d->data.is_object() || d->bytes != body_size) std::abort();
    (void)d->data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // depth-bounded
  } else if (const auto* r = std::get_if<ResultFrame>(&f)) {
    if (!r->value.is_null() && !r->value.is_object()) std::abort();
    if (r->failed != r->error.is_object()) std::abort();
    if (r->failed && (!r->error["name"].is_string() || !r->error["traceback"].is_array()))
      std::abort();
    if (r->execution_count < 0) std::abort();
  } else if (const auto* h = std::get_if<HelloFrame>(&f)) {
    if (h->pid <= 0 || h->version.size() > 256) std::abort();
  }
}

void stream_mode(std::string_view in) {
  constexpr std::size_t kMaxFrame = 512;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  FrameReader reader;
  bool broken = false;
  std::size_t step = 1 + (in.empty() ? 0 : static_cast<unsigned char>(in.front()) % 97);
  while (!broken && !in.empty()) {
    const std::size_t n = std::min(step, in.size());
    if (::send(sv[1], in.data(), n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) std::abort();
    in.remove_prefix(n);
    while (reader.fill(sv[0], MSG_DONTWAIT) > 0) {
    }
    for (;;) {
      auto body = reader.next(kMaxFrame);
      if (!body) {
        broken = true;  // a length over the cap ends the stream
        break;
      }
      if (!*body) break;
      if ((*body)->size() > kMaxFrame) std::abort();
      if (auto f = decode_kernel_frame(**body, kMaxFrame)) check(*f, (*body)->size());
    }
    if (reader.buffered() > 4 + kMaxFrame + FrameReader::kReadBytes) std::abort();
  }
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    stream_mode(in);
  } else {
    auto f = decode_kernel_frame(in, in.size());
    if (f)
      check(*f, in.size());
    else if (f.error().message().empty())
      std::abort();
  }
  return 0;
}

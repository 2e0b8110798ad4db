// Small types shared by the engine client and its HTTP layer.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>

#include "common/cancel_token.h"
#include "common/result.h"

namespace sandcastle::sandbox::engine {

// Receives a response body (or a stream's bytes) piece by piece; an error
// ends the call with it.
using ByteSink = std::function<Status(std::string_view)>;
// Fills up to `cap` bytes at `buf`; returns how many, 0 at the end.
using ByteSource = std::function<Result<std::size_t>(char* buf, std::size_t cap)>;

class HttpCall;

struct CallOptions {
  // The whole call (connect, request, response, streams); 0: the client's
  // default.
  std::chrono::milliseconds timeout{0};
  // Ends the call from another thread: its connection is closed and it
  // returns kCancelled (at once if the token was cancelled before).
  CancelToken* cancel = nullptr;
};

}  // namespace sandcastle::sandbox::engine

// Small types shared by the engine client and its HTTP layer.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/result.h"

namespace sandcastle::sandbox::engine {

// Receives a response body (or a stream's bytes) piece by piece; an error
// ends the call with it.
using ByteSink = std::function<Status(std::string_view)>;
// Fills up to `cap` bytes at `buf`; returns how many, 0 at the end.
using ByteSource = std::function<Result<std::size_t>(char* buf, std::size_t cap)>;

class HttpCall;

// Ends a call from another thread: the call's connection is closed and the
// call returns kCancelled. A token cancelled before its call starts makes
// that call return kCancelled at once. One call at a time per token.
class CancelToken {
 public:
  void cancel();
  bool cancelled() const;

 private:
  friend class HttpCall;
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> closer_;  // set while a call runs
};

struct CallOptions {
  // The whole call (connect, request, response, streams); 0: the client's
  // default.
  std::chrono::milliseconds timeout{0};
  CancelToken* cancel = nullptr;
};

}  // namespace sandcastle::sandbox::engine

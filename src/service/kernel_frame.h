// The kernel channel's frames, read as what they are: bytes from inside a
// sandbox. Cell code runs in the driver's process and can write anything to
// its fd 3, so every length is capped before a byte is buffered and every
// field of every frame is checked before it is used; a frame that fails is
// a protocol error that ends the kernel (kernel.cc).
//
// The caps, at the default 1 MiB output cap (CellRequest::max_output_bytes):
//   frame     8 MiB (a display) + 4 x the output cap (a value or traceback
//             cut to the output cap, escaped) = 12 MiB; the receive buffer
//             never holds more than one frame plus one 64 KiB read.
//   values    65536 array elements and object members per frame, nesting
//             128 deep (json_parse.h): the parsed frame stays within a few
//             times its size.
//   displays  8 MiB each (a larger one is dropped with a note); per cell 64,
//             16 MiB and 131072 values in all (their parsed form is kept
//             until the call returns).
// The drivers know these figures (the execute message carries them) and cut
// their output to fit, so only a hostile or broken kernel meets them.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/result.h"
#include "service/workspace_diff.h"

namespace sandcastle::service {

inline constexpr std::size_t kMaxDisplayBytes = 8u << 20;
inline constexpr std::size_t kMaxDisplays = 64;
inline constexpr std::size_t kMaxDisplayTotal = 16u << 20;
inline constexpr std::size_t kMaxDisplayValues = 131072;
inline constexpr std::size_t kMaxFrameValues = 65536;
inline constexpr std::size_t kMaxHelloFrame = 64u << 10;

// The largest frame a cell with this output cap may send.
std::size_t max_frame_bytes(std::size_t max_output_bytes);

struct HelloFrame {
  int pid = 0;
  std::string version;
};
struct StreamFrame {
  std::string id;
  bool is_stderr = false;
  std::string text;
};
// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's noexcept destructor may allocate
struct DisplayFrame {
  std::string id;
  nlohmann::json data;     // a MIME bundle: an object, any values
  std::size_t bytes = 0;   // the frame's size and value count, for the
  std::size_t values = 0;  // per-cell display caps
};
// The workdir's regular files as the driver listed them after the cell
// (CellRequest::list): each name checked (sandbox::valid_listed_name).
struct KernelListing {
  WorkspaceSnapshot files;
  std::size_t count = 0;  // entries as sent (a repeated name counts twice)
  bool truncated = false;
};
// A listing holds at most this many files; the driver sends none (the server
// lists the files itself) rather than more.
inline constexpr std::size_t kMaxKernelListing = 10'000;

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's noexcept destructor may allocate
struct ResultFrame {
  std::string id;
  int execution_count = 0;
  bool failed = false;   // status "error"
  nlohmann::json value;  // a MIME bundle, or null
  nlohmann::json error;  // {name, value, traceback[]} when failed, else null
  std::optional<int> exit_code;
  std::optional<KernelListing> listing;  // absent or null: the driver did not list
};
using KernelFrame = std::variant<HelloFrame, StreamFrame, DisplayFrame, ResultFrame>;

const char* frame_type_name(const KernelFrame& f);

// One frame's body (the JSON after the length), checked field by field. The
// error says what is wrong ("\"id\" is a number, expected a string").
Result<KernelFrame> decode_kernel_frame(std::string_view body, std::size_t max_bytes);

// Cuts the channel's byte stream into frames, holding at most one frame and
// one read beyond it.
class FrameReader {
 public:
  static constexpr std::size_t kReadBytes = 64u << 10;
  // What the buffer may keep once every frame is taken: an idle kernel's
  // reader holds no read-sized buffer (there is one per live kernel).
  static constexpr std::size_t kIdleBytes = 4u << 10;

  // The next complete frame's body, nullopt until one is complete, or an
  // error when the length prefix is over `max_frame` (the stream is then
  // useless). The view lives until the next call.
  Result<std::optional<std::string_view>> next(std::size_t max_frame);

  // One recv(2) into the buffer: its result (0 at EOF, -1 with errno).
  ssize_t fill(int fd, int flags);

  std::size_t buffered() const { return buf_.size() - pos_; }
  std::size_t capacity() const { return buf_.capacity(); }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
};

}  // namespace sandcastle::service

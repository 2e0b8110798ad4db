// multipart/form-data (RFC 7578) for uploads: a push parser fed the body in
// pieces, a state machine without recursion, bounded in everything a client
// chooses (parts, header bytes per part, bytes per part and in total, name
// lengths). Part bodies go to the sink as they are found; only a delimiter's
// length is held back between pieces.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace sandcastle::web {

struct MultipartLimits {
  size_t max_parts = 64;
  size_t max_header_bytes = 4096;  // one part's header block
  size_t max_part_bytes = size_t{16} << 20;
  size_t max_total_bytes = size_t{64} << 20;
  size_t max_name_bytes = 255;  // the name and filename parameters
};

struct PartHead {
  std::string name;      // form field name
  std::string filename;  // "" when not a file
  bool has_filename = false;
  std::string content_type;  // "" when absent
};

struct MultipartSink {
  std::function<Status(const PartHead&)> begin;
  std::function<Status(std::string_view)> data;
  std::function<Status()> end;
};

class MultipartParser {
 public:
  MultipartParser(std::string boundary, MultipartLimits limits, MultipartSink sink);
  // Parses the next piece; an error (kInvalidArgument for a malformed body,
  // kResourceExhausted for a limit, or the sink's own) ends the parse.
  Status feed(std::string_view piece);
  // The body ended: an error unless the closing delimiter was seen.
  Status finish();
  size_t parts() const { return parts_; }
  // Where the bytes a sink call is handed start in the whole body (the
  // offset of the unparsed rest): a caller that holds the body keeps its
  // parts as views into it instead of copies.
  size_t offset() const { return total_ - buf_.size(); }

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kBody, kDone, kFailed };
  Status step(bool* progressed);
  Status fail(Error e);
  Status parse_headers(std::string_view block, PartHead* head);

  std::string dash_boundary_;  // "--" + boundary
  std::string delimiter_;      // "\r\n--" + boundary
  MultipartLimits limits_;
  MultipartSink sink_;
  State state_ = State::kPreamble;
  std::string buf_;
  size_t parts_ = 0;
  size_t part_bytes_ = 0;
  size_t total_ = 0;
};

// The boundary parameter of a multipart/form-data Content-Type (1-70
// characters of RFC 2046's set); kInvalidArgument otherwise.
Result<std::string> multipart_boundary(const std::string& content_type);

}  // namespace sandcastle::web

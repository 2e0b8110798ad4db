#include "web/rest_multipart.h"

#include <algorithm>
#include <cctype>

#include "common/text.h"

namespace sandcastle::web {

namespace {

Error bad(const std::string& why) {
  return Error::make(ErrorCode::kInvalidArgument, "multipart body: " + why);
}

// `; key=value` parameters (value a token or a quoted string), lower-case
// keys. False when malformed.
bool parse_params(std::string_view s, std::vector<std::pair<std::string, std::string>>* out) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == ';')) ++i;
    if (i >= s.size()) break;
    size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return false;
    std::string key = ascii_lower(trim_blanks(s.substr(i, eq - i)));
    i = eq + 1;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::string value;
    if (i < s.size() && s[i] == '"') {
      ++i;
      bool closed = false;
      while (i < s.size()) {
        char c = s[i++];
        if (c == '\\' && i < s.size()) {
          value.push_back(s[i++]);
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return false;
    } else {
      size_t end = s.find(';', i);
      if (end == std::string_view::npos) end = s.size();
      value = std::string(trim_blanks(s.substr(i, end - i)));
      i = end;
    }
    if (key.empty()) return false;
    out->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

bool boundary_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

}  // namespace

Result<std::string> multipart_boundary(const std::string& content_type) {
  auto semi = content_type.find(';');
  if (ascii_lower(trim_blanks(std::string_view(content_type).substr(0, semi))) !=
      "multipart/form-data")
    return Error::make(ErrorCode::kInvalidArgument, "Content-Type must be multipart/form-data");
  std::vector<std::pair<std::string, std::string>> params;
  if (semi == std::string::npos ||
      !parse_params(std::string_view(content_type).substr(semi + 1), &params))
    return Error::make(ErrorCode::kInvalidArgument,
                       "multipart/form-data needs a boundary parameter");
  for (const auto& [k, v] : params) {
    if (k != "boundary") continue;
    if (v.empty() || v.size() > 70 || v.back() == ' ' ||
        !std::all_of(v.begin(), v.end(), boundary_char))
      return Error::make(ErrorCode::kInvalidArgument,
                         "the multipart boundary is not 1-70 valid characters");
    return v;
  }
  return Error::make(ErrorCode::kInvalidArgument, "multipart/form-data needs a boundary parameter");
}

MultipartParser::MultipartParser(std::string boundary, MultipartLimits limits, MultipartSink sink)
    : dash_boundary_("--" + boundary),
      delimiter_("\r\n--" + boundary),
      limits_(limits),
      sink_(std::move(sink)) {}

Status MultipartParser::fail(Error e) {
  state_ = State::kFailed;
  buf_.clear();
  return e;
}

Status MultipartParser::feed(std::string_view piece) {
  if (state_ == State::kFailed) return bad("the parse already failed");
  total_ += piece.size();
  if (total_ > limits_.max_total_bytes)
    return fail(
        Error::make(ErrorCode::kResourceExhausted,
                    "the upload is over " + std::to_string(limits_.max_total_bytes) + " bytes"));
  if (state_ == State::kDone) return ok_status();  // the epilogue is ignored
  buf_.append(piece);
  bool progressed = true;
  while (progressed && state_ != State::kDone && state_ != State::kFailed) {
    progressed = false;
    if (auto s = step(&progressed); !s.ok()) return s;
  }
  if (state_ == State::kDone) buf_.clear();
  return ok_status();
}

Status MultipartParser::step(bool* progressed) {
  switch (state_) {
    case State::kPreamble: {
      // The body starts with the first delimiter, or a preamble and CRLF before it.
      size_t at;
      const bool at_start = total_ == buf_.size();  // nothing consumed yet
      if (at_start && buf_.size() < dash_boundary_.size() &&
          dash_boundary_.compare(0, buf_.size(), buf_) == 0)
        return ok_status();  // maybe the first delimiter, not whole yet
      if (at_start && buf_.compare(0, dash_boundary_.size(), dash_boundary_) == 0) {
        buf_.erase(0, dash_boundary_.size());
      } else if ((at = buf_.find(delimiter_)) != std::string::npos) {
        buf_.erase(0, at + delimiter_.size());
      } else {
        // Keep only what could still be the start of a delimiter.
        if (buf_.size() > delimiter_.size()) buf_.erase(0, buf_.size() - delimiter_.size());
        if (total_ > limits_.max_header_bytes + delimiter_.size())
          return fail(bad("no boundary found"));
        return ok_status();
      }
      state_ = State::kAfterDelimiter;
      *progressed = true;
      return ok_status();
    }
    case State::kAfterDelimiter: {
      if (buf_.size() < 2) return ok_status();
      if (buf_.compare(0, 2, "--") == 0) {
        state_ = State::kDone;
        *progressed = true;
        return ok_status();
      }
      // Transport padding (spaces, tabs) may precede the CRLF.
      size_t i = 0;
      while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\t')) ++i;
      if (i + 2 > buf_.size()) {
        if (buf_.size() > 256) return fail(bad("junk after a boundary"));
        return ok_status();
      }
      if (buf_.compare(i, 2, "\r\n") != 0) return fail(bad("a boundary is not followed by CRLF"));
      buf_.erase(0, i + 2);
      if (++parts_ > limits_.max_parts)
        return fail(Error::make(ErrorCode::kResourceExhausted,
                                "more than " + std::to_string(limits_.max_parts) + " parts"));
      state_ = State::kHeaders;
      *progressed = true;
      return ok_status();
    }
    case State::kHeaders: {
      size_t end = buf_.find("\r\n\r\n");
      size_t skip = 4;
      if (buf_.compare(0, 2, "\r\n") == 0) {
        end = 0;  // no header fields at all
        skip = 2;
      }
      if (end == std::string::npos) {
        if (buf_.size() > limits_.max_header_bytes)
          return fail(Error::make(
              ErrorCode::kResourceExhausted,
              "a part's headers are over " + std::to_string(limits_.max_header_bytes) + " bytes"));
        return ok_status();
      }
      if (end > limits_.max_header_bytes)
        return fail(Error::make(
            ErrorCode::kResourceExhausted,
            "a part's headers are over " + std::to_string(limits_.max_header_bytes) + " bytes"));
      PartHead head;
      if (auto s = parse_headers(std::string_view(buf_).substr(0, end), &head); !s.ok())
        return fail(s.take_error());
      buf_.erase(0, end + skip);
      if (sink_.begin)
        if (auto s = sink_.begin(head); !s.ok()) return fail(s.take_error());
      part_bytes_ = 0;
      state_ = State::kBody;
      *progressed = true;
      return ok_status();
    }
    case State::kBody: {
      size_t at = buf_.find(delimiter_);
      size_t emit =
          at != std::string::npos
              ? at
              : (buf_.size() >= delimiter_.size() ? buf_.size() - delimiter_.size() + 1 : 0);
      if (emit > 0) {
        part_bytes_ += emit;
        if (part_bytes_ > limits_.max_part_bytes)
          return fail(
              Error::make(ErrorCode::kResourceExhausted,
                          "a part is over " + std::to_string(limits_.max_part_bytes) + " bytes"));
        if (sink_.data)
          if (auto s = sink_.data(std::string_view(buf_).substr(0, emit)); !s.ok())
            return fail(s.take_error());
        buf_.erase(0, emit);
        *progressed = true;
      }
      if (at != std::string::npos) {
        buf_.erase(0, delimiter_.size());
        if (sink_.end)
          if (auto s = sink_.end(); !s.ok()) return fail(s.take_error());
        state_ = State::kAfterDelimiter;
        *progressed = true;
      }
      return ok_status();
    }
    case State::kDone:
    case State::kFailed: return ok_status();
  }
  return ok_status();
}

Status MultipartParser::parse_headers(std::string_view block, PartHead* head) {
  bool disposition = false;
  size_t pos = 0;
  while (pos < block.size()) {
    size_t eol = block.find("\r\n", pos);
    if (eol == std::string_view::npos) eol = block.size();
    std::string_view line = block.substr(pos, eol - pos);
    pos = eol + 2;
    if (line.empty()) continue;
    if (line.front() == ' ' || line.front() == '\t')
      return bad("folded header lines are not accepted");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("a part header without ':'");
    std::string name = ascii_lower(trim_blanks(line.substr(0, colon)));
    std::string_view value = trim_blanks(line.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return bad("control characters in a part header");
    if (name == "content-disposition") {
      if (disposition) return bad("two Content-Disposition fields in a part");
      disposition = true;
      size_t semi = value.find(';');
      if (ascii_lower(trim_blanks(value.substr(0, semi))) != "form-data")
        return bad("a part's Content-Disposition is not form-data");
      std::vector<std::pair<std::string, std::string>> params;
      if (semi == std::string_view::npos || !parse_params(value.substr(semi + 1), &params))
        return bad("a part's Content-Disposition parameters are malformed");
      bool has_name = false;
      for (auto& [k, v] : params) {
        if (k == "name") {
          if (has_name) return bad("two name parameters in a part");
          has_name = true;
          head->name = std::move(v);
        } else if (k == "filename") {
          if (head->has_filename) return bad("two filename parameters in a part");
          head->has_filename = true;
          head->filename = std::move(v);
        }
      }
      if (!has_name) return bad("a part without a name");
      if (head->name.size() > limits_.max_name_bytes ||
          head->filename.size() > limits_.max_name_bytes)
        return Error::make(ErrorCode::kResourceExhausted,
                           "a part's name or filename is over " +
                               std::to_string(limits_.max_name_bytes) + " bytes");
    } else if (name == "content-type") {
      head->content_type = std::string(value);
    }
  }
  if (!disposition) return bad("a part without Content-Disposition");
  return ok_status();
}

Status MultipartParser::finish() {
  if (state_ == State::kFailed) return bad("the parse failed");
  if (state_ != State::kDone) return fail(bad("the body ended before the closing boundary"));
  return ok_status();
}

}  // namespace sandcastle::web

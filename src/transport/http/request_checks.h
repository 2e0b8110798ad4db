// What RFC 9112 requires of a request head before anything routes on it:
// exactly one valid Host (§3.2), a request-target in origin- or absolute-form
// (§3.2.1-2) and message framing nobody can read two ways (§6.1: a
// Transfer-Encoding that does not end in chunked, or on HTTP/1.0, is a
// smuggling attempt). Beast already refuses Content-Length together with
// chunked; these are the cases it lets through.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sandcastle::transport::http {

struct RequestHead {
  std::string_view method;
  std::string_view target;
  unsigned version = 11;                            // 10 or 11
  std::vector<std::string_view> host;               // every Host field's value
  std::vector<std::string_view> transfer_encoding;  // every Transfer-Encoding field's value
};

struct HeadVerdict {
  int status = 0;   // 0: acceptable; else the status to answer (400, 501) before closing
  std::string why;  // for the error body
  // For an absolute-form target ("http://host/p"): the origin-form to route on
  // and the host it names, which replaces the Host field (RFC 9112 §3.2.2).
  bool absolute_form = false;
  std::string target;
  std::string host;
};

HeadVerdict check_request_head(const RequestHead& head);

}  // namespace sandcastle::transport::http

#include "transport/http/request_checks.h"

#include "common/text.h"
#include "transport/http/authority.h"

namespace sandcastle::transport::http {

namespace {

HeadVerdict refuse(int status, std::string why) {
  HeadVerdict v;
  v.status = status;
  v.why = std::move(why);
  return v;
}

// Only "chunked" is decoded here. Anything else before it is a coding this
// server does not implement (501); chunked missing, not last or repeated
// leaves the body's length unknowable (400, RFC 9112 §6.1 and §6.3).
HeadVerdict check_transfer_encoding(const RequestHead& head) {
  if (head.transfer_encoding.empty()) return {};
  if (head.version < 11)
    return refuse(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request");
  std::vector<std::string_view> codings;
  for (std::string_view field : head.transfer_encoding) {
    while (true) {
      auto comma = field.find(',');
      auto item = trim_blanks(field.substr(0, comma));
      if (!item.empty()) codings.push_back(item);
      if (comma == std::string_view::npos) break;
      field.remove_prefix(comma + 1);
    }
  }
  if (codings.empty() || !ascii_iequals(codings.back(), "chunked"))
    return refuse(400, "the request's Transfer-Encoding does not end in chunked");
  for (size_t i = 0; i + 1 < codings.size(); ++i)
    if (ascii_iequals(codings[i], "chunked"))
      return refuse(400, "the request's Transfer-Encoding applies chunked more than once");
  if (codings.size() > 1)
    return refuse(501, "the request's Transfer-Encoding has a coding other than chunked");
  return {};
}

}  // namespace

HeadVerdict check_request_head(const RequestHead& head) {
  if (head.host.size() > 1) return refuse(400, "more than one Host header");
  if (head.host.empty() && head.version >= 11)
    return refuse(400, "an HTTP/1.1 request needs a Host header");
  if (!head.host.empty() && !parse_authority(head.host.front()))
    return refuse(400, "the Host header is not a valid host[:port]");
  auto target = parse_target(head.target);
  if (!target)
    return refuse(400, "the request-target is neither an absolute path nor an http(s) URI");
  if (auto v = check_transfer_encoding(head); v.status) return v;
  HeadVerdict ok;
  if (target->authority) {
    ok.absolute_form = true;
    ok.target = std::move(target->origin_form);
    ok.host = target->authority->host;
    if (target->authority->port) {
      ok.host.push_back(':');
      ok.host += std::to_string(*target->authority->port);
    }
  }
  return ok;
}

}  // namespace sandcastle::transport::http

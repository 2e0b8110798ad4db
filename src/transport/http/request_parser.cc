#include "transport/http/request_parser.h"

#include <cstdint>

namespace sandcastle::transport::http {

namespace bhttp = boost::beast::http;

void limit_request_parser(RequestParser& parser, const ServerOptions& options) {
  parser.body_limit(options.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
}

boost::beast::error_code parse_request_bytes(std::string_view bytes, RequestParser& parser) {
  boost::beast::error_code ec;
  parser.eager(true);
  while (!parser.is_done()) {
    const std::size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == bhttp::error::need_more) {
      // Beast needs a whole header (or chunk header) in one buffer: with all
      // the bytes given at once, no progress means none is coming.
      if (used == 0) return ec;
      ec = {};
      continue;
    }
    if (ec) return ec;
    if (used == 0 && !parser.is_done()) return bhttp::error::need_more;
  }
  return ec;
}

}  // namespace sandcastle::transport::http

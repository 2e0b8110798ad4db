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
    // All the bytes are given at once: need_more means the request is cut
    // short. Beast's contract is to call again only with more bytes than it
    // saw (called again without, its chunk parser asserts: the fuzzer found
    // it once the fuzz build kept asserts on).
    if (ec) return ec;
    if (used == 0 && !parser.is_done()) return bhttp::error::need_more;
  }
  return ec;
}

}  // namespace sandcastle::transport::http

// How every connection reads a request: Beast's parser with the server's
// header and body limits. Kept apart from the connection so the fuzz target
// (tests/fuzz/fuzz_http_head.cc) parses exactly what a client's bytes meet.
#pragma once

#include <boost/beast/http.hpp>
#include <string_view>

#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Header block over max_header_bytes: header_limit (431); body (declared or
// chunked) over max_body_bytes: body_limit (413).
void limit_request_parser(RequestParser& parser, const ServerOptions& options);

// Feeds `bytes` to the parser as one connection's input: no error once a
// whole request is parsed, need_more while it is not, else the parser's
// error (what the connection answers 400/413/431 to).
boost::beast::error_code parse_request_bytes(std::string_view bytes, RequestParser& parser);

}  // namespace sandcastle::transport::http

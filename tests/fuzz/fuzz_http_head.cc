// Fuzzes the HTTP request head as a connection parses it: Beast's parser
// limited as http_server.cc limits it (transport/http/request_parser.h),
// with the server's default limits and with tiny ones (so the 431/413 paths
// are reachable from small inputs), then the target's percent-decoding.
// A request that parses must respect the limits it was parsed under (as
// Beast applies them: see run()).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "transport/http/request_parser.h"

namespace {

using namespace sandcastle::transport::http;

void run(std::string_view in, const ServerOptions& options) {
  RequestParser parser;
  limit_request_parser(parser, options);
  auto ec = parse_request_bytes(in, parser);
  if (ec) return;
  if (!parser.is_done()) std::abort();
  const auto& msg = parser.get();
  if (msg.body().size() > options.max_body_bytes) std::abort();
  // Beast (1.74) applies header_limit to the request line and to the header
  // fields each, so a head holds up to twice max_header_bytes (found by this
  // target; still a bound). The trailer of a chunked body is bounded by
  // neither limit (found by this target too; the connection must bound it
  // by other means), so its fields are not checked here.
  if (msg.target().size() + msg.method_string().size() > options.max_header_bytes) std::abort();
  if (parser.chunked()) return;
  std::size_t fields = 0;
  for (const auto& f : msg) fields += f.name_string().size() + f.value().size();
  if (fields > options.max_header_bytes) std::abort();
  const std::string_view target = msg.target();
  const auto q = target.find('?');
  (void)url_decode(target.substr(0, q));
  if (q != std::string_view::npos) (void)url_decode(target.substr(q + 1), true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  run(in, ServerOptions{});
  ServerOptions tiny;
  tiny.max_header_bytes = 128;
  tiny.max_body_bytes = 64;
  run(in, tiny);
  return 0;
}

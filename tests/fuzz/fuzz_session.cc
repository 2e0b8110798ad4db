// Fuzzes everything a client can send: one message (or batch) per input,
// handled by a session that negotiated 2025-03-26 (so batches are live) and
// has the fixture tools. Every reply must be valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/fixtures.h"
#include "mcp/session.h"

namespace {

sandcastle::mcp::Server& server() {
  static sandcastle::mcp::Server* s = [] {
    auto* srv = new sandcastle::mcp::Server();
    sandcastle::mcp::register_test_fixtures(*srv);
    return srv;
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sandcastle::mcp::json;
  auto check = [](const json& msg) {
    // What the transport would write must serialise and parse back.
    std::string out = sandcastle::mcp::dump_message(msg);
    if (!json::accept(out)) std::abort();
  };
  auto session = sandcastle::mcp::Session::create(server(), check);
  session->handle_text(
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}})");
  session->handle_text(std::string_view(reinterpret_cast<const char*>(data), size));
  // Slow fixture calls (test_sleep) are cancelled at once.
  session->shutdown(std::chrono::milliseconds(0), std::chrono::seconds(5));
  return 0;
}

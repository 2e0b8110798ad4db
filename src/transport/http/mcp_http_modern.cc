// MCP 2026-07-28 over HTTP: every POST stands alone (no session); headers are
// checked against the body; closing the response stream cancels the request.
#include "transport/http/mcp_http_internal.h"
#include "transport/http/param_headers.h"

namespace sandcastle::transport::http {

void handle_modern_post(Ctx& c, const json& body) {
  auto& st = c.st;
  const std::string& method = body["method"].get_ref<const std::string&>();
  const json params = body.value("params", json::object());
  const json& meta = params.is_object() && params.contains("_meta") ? params["_meta"] : json();
  std::string body_version = meta.is_object() ? meta.value(mcp::meta_key::kProtocolVersion, std::string()) : "";
  const bool is_request = body.contains("id");
  json id = is_request ? body["id"] : json();
  auto mismatch = [&](const std::string& what) {
    c.reply(rpc_error_response(400, id, mcp::rpc_error::kHeaderMismatch, "Header mismatch: " + what));
  };
  // The _meta envelope itself: -32602 with HTTP 400 when it is incomplete.
  auto invalid = [&](const std::string& what) {
    c.reply(rpc_error_response(400, id, mcp::rpc_error::kInvalidParams, "Invalid params: " + what));
  };
  if (!meta.is_object()) return invalid("the 2026-07-28 protocol requires params._meta on every request");
  if (body_version.empty())
    return invalid(std::string("params._meta is missing \"") + mcp::meta_key::kProtocolVersion + "\"");
  if (is_request && (!meta.contains(mcp::meta_key::kClientCapabilities) ||
                     !meta[mcp::meta_key::kClientCapabilities].is_object()))
    return invalid(std::string("params._meta is missing \"") + mcp::meta_key::kClientCapabilities +
                   "\" (an object; required for protocol version " + body_version + ")");
  const std::string hv = c.req.header("mcp-protocol-version");
  if (hv.empty()) return mismatch("the MCP-Protocol-Version header is required (expected " + body_version + ")");
  if (hv != body_version)
    return mismatch("MCP-Protocol-Version header '" + hv + "' does not match _meta " +
                    mcp::meta_key::kProtocolVersion + " '" + body_version + "'");
  const std::string hm = decode_header_value(c.req.header("mcp-method"));
  if (hm.empty()) return mismatch("the Mcp-Method header is required (expected " + method + ")");
  if (hm != method) return mismatch("Mcp-Method header '" + hm + "' does not match the body's method '" + method + "'");
  std::string name_field = method == "resources/read" ? "uri" : "name";
  if (method == "tools/call" || method == "prompts/get" || method == "resources/read") {
    std::string expected = params.is_object() ? params.value(name_field, std::string()) : "";
    const std::string hn = decode_header_value(c.req.header("mcp-name"));
    if (!c.req.has_header("mcp-name"))
      return mismatch("the Mcp-Name header is required for " + method + " (expected '" + expected + "')");
    if (hn != expected)
      return mismatch("Mcp-Name header '" + hn + "' does not match params." + name_field + " '" + expected + "'");
  }
  // Clients of this era must mirror the marked arguments (SEP-2243).
  if (auto bad = check_param_headers(c.req.headers, st.server.tools(), body, true))
    return mismatch(*bad);
  if (!is_request) {
    c.reply(Response{202, {}, {}});
    return;
  }
  const std::string& accept = c.req.header("accept");
  const bool sse_ok = accept.find(kSseContentType) != std::string::npos;
  auto ex = c.ex;
  Headers cors = c.cors;
  auto state = st.shared_from_this();
  // The stream of this one request: plain JSON when the reply is the first
  // message, SSE as soon as a notification precedes it.
  struct Pending {
    std::mutex mu;
    bool sse = false;
    bool done = false;
    std::shared_ptr<mcp::Session> session;
  };
  auto pending = std::make_shared<Pending>();
  auto session = mcp::Session::create_routed(
      st.server,
      [pending, ex, cors, state, sse_ok, id](const json& msg, const json*) {
        std::lock_guard lock(pending->mu);
        if (pending->done) return;
        bool final = is_final_for(msg) && msg["id"] == id;
        if (final) {
          pending->done = true;
          if (!pending->sse) {
            int status = 200;
            if (msg.contains("error")) {
              int code = msg["error"].value("code", 0);
              if (code == mcp::rpc_error::kHeaderMismatch || code == mcp::rpc_error::kUnsupportedProtocolVersion ||
                  code == mcp::rpc_error::kMissingRequiredClientCapability)
                status = 400;
              else if (code == mcp::rpc_error::kMethodNotFound)
                status = 404;
            }
            Headers h = cors;
            h.emplace_back("Content-Type", "application/json");
            ex->respond(Response{status, std::move(h), mcp::dump_message(msg)});
          } else {
            ex->write(sse_event("", "message", mcp::dump_message(msg)));
            state->end_sse(ex);
          }
          std::lock_guard slock(state->mu);
          state->stateless.erase(pending->session);
          pending->session.reset();
          return;
        }
        if (!sse_ok) return;  // a JSON-only client gets the reply alone
        if (!pending->sse) {
          pending->sse = true;
          state->start_sse(ex, cors);
        }
        ex->write(sse_event("", "message", mcp::dump_message(msg)));
      },
      c.key_id.empty() ? std::string() : "key:" + c.key_id);
  {
    std::lock_guard lock(st.mu);
    st.stateless.insert(session);
  }
  {
    std::lock_guard lock(pending->mu);
    if (!pending->done) pending->session = session;
  }
  // Closing the stream cancels the request (2026-07-28).
  std::weak_ptr<mcp::Session> weak = session;
  ex->on_close([weak, id, state, pending] {
    auto s = weak.lock();
    if (!s) return;
    s->handle_json(json{{"jsonrpc", "2.0"},
                        {"method", "notifications/cancelled"},
                        {"params", {{"requestId", id}, {"reason", "the client closed the HTTP stream"}}}});
    std::lock_guard lock(pending->mu);
    pending->done = true;
    pending->session.reset();
    std::lock_guard slock(state->mu);
    state->stateless.erase(s);
  });
  session->handle_json(body);
}

}  // namespace sandcastle::transport::http

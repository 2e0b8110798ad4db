// The 2024-11-05 HTTP+SSE transport: GET /sse opens a session whose first
// event names the POST endpoint; replies travel back on that stream.
#include "transport/http/mcp_http_internal.h"

namespace sandcastle::transport::http {

void handle_sse_open(Ctx& c) {
  auto s = c.st.make_session(HttpSession::Kind::kSse, c.key_id);
  {
    std::lock_guard lock(s->mu);
    Stream& stream = s->streams[0];
    stream.sink = c.ex;
    stream.sink_is_sse = true;
    c.st.start_sse(c.ex, c.cors);
    c.ex->write(sse_event("", "endpoint", "/messages?sessionId=" + s->id));
  }
  // The stream is the session: when it closes, the session ends.
  std::weak_ptr<HttpSession> weak = s;
  auto state = c.st.shared_from_this();
  c.ex->on_close([weak, state] {
    if (auto sess = weak.lock()) state->end_session(sess, "SSE stream closed");
  });
}

void handle_sse_message(Ctx& c) {
  auto it = c.req.query.find("sessionId");
  if (it == c.req.query.end()) {
    c.reply(Response::text(400, "Bad Request: sessionId is required"));
    return;
  }
  auto s = c.st.find_session(it->second);
  // The session id is the capability here (clients drop ?api_key= from the
  // endpoint URL); a different key presented is refused all the same.
  if (!s || s->kind != HttpSession::Kind::kSse || (!c.key_id.empty() && s->key_id != c.key_id)) {
    c.reply(Response::text(404, "Session not found"));
    return;
  }
  auto parsed = parse_body(c.req);
  if (!parsed) {
    c.reply(body_refused(parsed.error()));
    return;
  }
  const json body = std::move(*parsed);
  if (refuse_param_headers(c, body)) return;
  {
    std::lock_guard lock(s->mu);
    s->last_seen = Clock::now();
  }
  c.reply(Response{202, c.cors, "Accepted"});
  s->mcp->handle_json(body);
}


}  // namespace sandcastle::transport::http

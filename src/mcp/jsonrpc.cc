#include "mcp/jsonrpc.h"

#include "common/json_parse.h"

namespace sandcastle::mcp {

namespace {

bool valid_id(const json& id) {
  // MCP narrows JSON-RPC ids to strings and integers; null is not allowed.
  return id.is_string() || id.is_number_integer();
}

}  // namespace

Classified classify(const json& msg) {
  Classified c;
  if (!msg.is_object()) {
    c.why = "a JSON-RPC message must be a JSON object";
    return c;
  }
  auto id_it = msg.find("id");
  const bool has_id = id_it != msg.end();
  if (has_id && valid_id(*id_it)) c.id = *id_it;
  auto v = msg.find("jsonrpc");
  if (v == msg.end() || !v->is_string() || *v != "2.0") {
    c.why = "\"jsonrpc\" must be \"2.0\"";
    return c;
  }
  if (has_id && !valid_id(*id_it)) {
    c.why = "\"id\" must be a string or an integer";
    return c;
  }
  auto m = msg.find("method");
  if (m != msg.end()) {
    if (!m->is_string()) {
      c.why = "\"method\" must be a string";
      return c;
    }
    auto p = msg.find("params");
    if (p != msg.end() && !p->is_object() && !p->is_array()) {
      c.why = "\"params\" must be an object";
      return c;
    }
    c.kind = has_id ? MessageKind::kRequest : MessageKind::kNotification;
    return c;
  }
  if (has_id && (msg.contains("result") || msg.contains("error"))) {
    c.kind = MessageKind::kResponse;
    return c;
  }
  c.why = "message has neither \"method\" nor \"result\"/\"error\"";
  return c;
}

json make_result(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json make_error(const json& id, int code, const std::string& message, const json& data) {
  json err{{"code", code}, {"message", message}};
  if (!data.is_null()) err["data"] = data;
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

json make_error(const json& id, const RpcError& err) {
  return make_error(id, err.code, err.message, err.data);
}

json make_notification(const std::string& method, json params) {
  json n{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

json parse_failure(const json& id, const Error& why) {
  if (is_json_limit_error(why))
    return make_error(id, rpc_error::kInvalidRequest, "Invalid Request: " + why.message());
  return make_error(id, rpc_error::kParseError, "Parse error: the message is " + why.message());
}

json preserialized(std::string text) {
  return json{{kPreserializedKey, std::move(text)}};
}

std::string dump_message(const json& msg) {
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (msg.is_array()) {  // a batch reply may hold preserialized results
    std::string out = "[";
    for (const auto& m : msg) {
      if (out.size() > 1) out += ',';
      out += dump_message(m);
    }
    return out + "]";
  }
  if (msg.is_object()) {
    auto r = msg.find("result");
    if (r != msg.end() && r->is_object() && r->size() == 1) {
      auto text = r->find(kPreserializedKey);
      if (text != r->end() && text->is_string()) {
        // The other members as usual, then the result's own text.
        std::string out = "{";
        for (auto it = msg.begin(); it != msg.end(); ++it) {
          if (it == r) continue;
          out += dump(it.key());
          out += ':';
          out += dump(it.value());
          out += ',';
        }
        out += "\"result\":";
        out += text->get_ref<const std::string&>();
        out += '}';
        return out;
      }
    }
  }
  return dump(msg);
}

}  // namespace sandcastle::mcp

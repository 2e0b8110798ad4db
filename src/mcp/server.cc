#include "mcp/server.h"

#include <optional>

namespace sandcastle::mcp {

Server::Server(ServerInfo info, ServerOptions options)
    : info_(std::move(info)), options_(options), tools_(options.page_size) {
  add_builtin_methods();
}

void Server::add_builtin_methods() {
  MethodSpec list;
  list.cacheable = true;
  list.ttl_ms = 60'000;
  list.cache_public = true;  // the same list for every client
  list.handler = [this](const json& params, RequestContext&) {
    std::optional<std::string> cursor;
    if (params.contains("cursor")) {
      if (!params["cursor"].is_string())
        throw RpcError{rpc_error::kInvalidParams, "\"cursor\" must be a string", nullptr};
      cursor = params["cursor"].get<std::string>();
    }
    return tools_.list_page(cursor);
  };
  add_method("tools/list", std::move(list));

  MethodSpec call;
  call.async = true;
  call.handler = [this](const json& params, RequestContext& ctx) {
    auto name = params.find("name");
    if (name == params.end() || !name->is_string())
      throw RpcError{rpc_error::kInvalidParams, "tools/call needs \"name\": the tool to call",
                     nullptr};
    json args = params.value("arguments", json::object());
    if (!args.is_object())
      throw RpcError{rpc_error::kInvalidParams, "\"arguments\" must be an object", nullptr};
    return tools_.call(name->get<std::string>(), args, ctx).to_json();
  };
  add_method("tools/call", std::move(call));
}

void Server::add_method(const std::string& name, MethodSpec spec) {
  methods_[name] = std::move(spec);
}

const MethodSpec* Server::find_method(const std::string& name) const {
  auto it = methods_.find(name);
  return it == methods_.end() ? nullptr : &it->second;
}

json Server::capabilities() const {
  json caps{{"logging", json::object()}};
  if (tools_.size() > 0) caps["tools"] = {{"listChanged", false}};
  if (methods_.count("resources/read")) {
    caps["resources"] = {{"listChanged", false},
                         {"subscribe", methods_.count("resources/subscribe") != 0}};
  }
  if (methods_.count("prompts/list")) caps["prompts"] = {{"listChanged", false}};
  if (methods_.count("completion/complete")) caps["completions"] = json::object();
  return caps;
}

json Server::server_info_json() const {
  json j{{"name", info_.name}, {"version", info_.version}};
  if (!info_.title.empty()) j["title"] = info_.title;
  return j;
}

}  // namespace sandcastle::mcp

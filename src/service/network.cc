#include "service/network.h"

#include <algorithm>

#include "service/op_args.h"
#include "service/sandbox_network.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

using nlohmann::json;

namespace {

json rules_schema(const char* what) {
  return json{{"type", "array"},
              {"maxItems", net::kMaxRules},
              {"items", {{"type", "string"}, {"maxLength", net::kMaxRuleLength}}},
              {"description", what}};
}

json mode_names(const std::vector<net::Mode>& modes) {
  json out = json::array();
  for (auto m : modes) out.push_back(net::mode_name(m));
  return out;
}

std::vector<std::string> strings(const json& in, const char* key) {
  std::vector<std::string> out;
  if (in.contains(key))
    for (const auto& v : in[key]) out.push_back(v.get<std::string>());
  return out;
}

// The config's deny rules first, then the caller's (duplicates dropped).
std::vector<std::string> with_config_deny(const Config& config, std::vector<std::string> deny) {
  std::vector<std::string> out = config.network_deny;
  for (auto& d : deny)
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(std::move(d));
  return out;
}

json rule_texts(const std::vector<net::Rule>& rules) {
  json out = json::array();
  for (const auto& r : rules) out.push_back(r.to_string());
  return out;
}

// A caller's allow rule that would open a built-in refusal (it lies inside
// loopback, a private or link-local range, or is one of the host's own
// addresses: what decide() lets such a rule lift) needs the operator's
// permission: otherwise any API key could reach the server's host.
Status check_caller_allow(const Config& config, const std::vector<std::string>& allow,
                          const std::vector<std::string>& from_config) {
  auto rules = net::parse_rules(allow, net::ListKind::kAllow);
  if (!rules) return rules.take_error();
  auto listed = net::host_addresses();
  const std::vector<net::IpAddr> host =
      listed.ok() ? std::move(*listed) : std::vector<net::IpAddr>{};
  for (std::size_t i = 0; i < rules->size(); ++i) {
    const net::Rule& r = (*rules)[i];
    if (r.kind != net::Rule::Kind::kAddress) continue;
    if (std::find(from_config.begin(), from_config.end(), allow[i]) != from_config.end()) continue;
    bool lifts = false;
    for (const auto& block : net::builtin_refusals()) lifts = lifts || block.covers(r.cidr);
    for (const auto& a : host) lifts = lifts || r.cidr == net::Cidr::of(a, a.is_v4() ? 32 : 128);
    lifts = lifts || (net::is_metadata_address(r.cidr.base()) &&
                      r.cidr.prefix() == (r.cidr.base().is_v4() ? 32U : 128U));
    if (!lifts) continue;
    bool permitted = false;
    for (const auto& p : config.network_private_allow) permitted = permitted || p.covers(r.cidr);
    if (!permitted)
      return Error::make(ErrorCode::kPermissionDenied,
                         "network.allow[" + std::to_string(i) + "] \"" + allow[i] +
                             "\" opens loopback, private, link-local or the server's own "
                             "addresses, which callers may not on this server (the operator's "
                             "[network] private_allow lists the ranges that may be opened)");
  }
  return {};
}

}  // namespace

json network_arg_schema(const Config& config) {
  return json{
      {"type", "object"},
      {"description",
       "The sandbox's network. none (default): loopback only. allowlist: no route out; HTTP(S) "
       "and SOCKS5 proxies at 127.0.0.1:3128 and :1080 (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY "
       "are set) and DNS reach only the hosts in allow. full (where the server offers it): a "
       "direct route out through pasta, with a firewall in the sandbox refusing (ECONNREFUSED) "
       "the addresses in deny, loopback, private and metadata addresses and the host's own; no "
       "proxy variables; DNS only through the stub at 127.0.0.1:53, for names in allow. Rules: "
       "host[:ports] with host a name, *.domain, an IP or a CIDR ([v6] in brackets) and ports "
       "*, 443, 80,443 or 8000-8100 (default 80,443). Loopback, private and metadata addresses "
       "stay refused unless an allow CIDR names them. set_sandbox_network changes the rules "
       "later."},
      {"properties",
       {{"mode",
         {{"type", "string"},
          {"enum", mode_names(config.network_modes)},
          {"default", net::mode_name(config.network_default_mode)}}},
        {"allow", rules_schema("Allowed destinations (default: the server's list).")},
        {"deny", rules_schema("Refused destinations; win over allow (no ports: every port).")}}},
      {"additionalProperties", false}};
}

Status apply_network_args(const Config& config, const json* in, sandbox::SpecOptions& o) {
  net::Mode mode = config.network_default_mode;
  if (in != nullptr && in->contains("mode")) {
    const std::string name = (*in)["mode"].get<std::string>();
    auto m = net::parse_mode(name);
    if (!m) return Error::make(ErrorCode::kInvalidArgument, "unknown network mode '" + name + "'");
    mode = *m;
  }
  if (std::find(config.network_modes.begin(), config.network_modes.end(), mode) ==
      config.network_modes.end())
    return Error::make(ErrorCode::kPermissionDenied,
                       std::string("network mode \"") + net::mode_name(mode) +
                           "\" is not enabled on this server; it offers " +
                           mode_names(config.network_modes).dump());
  o.network = mode;
  const bool has_allow = in != nullptr && in->contains("allow");
  const bool has_deny = in != nullptr && in->contains("deny");
  if (mode == net::Mode::kNone) {
    if (has_allow || has_deny)
      return Error::make(ErrorCode::kInvalidArgument,
                         "network rules need mode \"allowlist\" (mode none has no way out)");
    return {};
  }
  o.network_allow = has_allow ? strings(*in, "allow") : config.network_allow;
  o.network_deny =
      with_config_deny(config, has_deny ? strings(*in, "deny") : std::vector<std::string>{});
  // The same check SandboxSpec::create makes, with the rule named.
  if (auto r = net::parse_rules(o.network_allow, net::ListKind::kAllow); !r) return r.take_error();
  if (auto s = check_caller_allow(config, o.network_allow, config.network_allow); !s.ok()) return s;
  if (auto r = net::parse_rules(o.network_deny, net::ListKind::kDeny); !r) return r.take_error();
  return {};
}

json network_json(const SandboxEntry& e) {
  const auto o = e.spec_options();
  return json{
      {"mode", net::mode_name(o.network)}, {"allow", o.network_allow}, {"deny", o.network_deny}};
}

json network_status_json(const SandboxEntry& e) {
  auto session = e.network();
  if (!session) return nullptr;
  const auto st = session->stats();
  json by_reason = json::object();
  for (const auto& [reason, n] : st.refused_by_reason) by_reason[net::reason_name(reason)] = n;
  json refusals = json::array();
  for (const auto& r : session->last_refusals())
    refusals.push_back({{"at", iso_time(r.at)},
                        {"via", net::via_name(r.via)},
                        {"target", r.target},
                        {"address", r.address},
                        {"port", r.port},
                        {"reason", net::reason_name(r.reason)}});
  json out{{"stats",
            {{"allowed", st.allowed},
             {"refused", st.refused},
             {"refused_by_reason", by_reason},
             {"dns_queries", st.dns_queries},
             {"bytes_out", st.bytes_out},
             {"bytes_in", st.bytes_in},
             {"open_connections", st.open}}},
           {"last_refusals", refusals}};
  // The last connection that could not be made, or in full mode why the
  // network tool went down ("pasta exited (status N)"; restarted or not).
  if (auto failure = session->last_failure(); !failure.empty()) out["last_failure"] = failure;
  return out;
}

json set_network_input_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
        {"mode",
         {{"type", "string"},
          {"description", "Only the sandbox's own mode: it is fixed at creation."}}},
        {"allow", rules_schema("Replaces the allow list.")},
        {"deny", rules_schema("Replaces the deny list (the server's own deny rules stay).")}}},
      {"required", {"sandbox_id"}},
      {"additionalProperties", false}};
}

Result<json> set_sandbox_network(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("set_sandbox_network", set_network_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  auto entry = env.manager.get(args["sandbox_id"].get<std::string>(), c.owner);
  if (!entry.ok()) return entry.error();
  EntryUse use(*entry);
  auto session = use->network();
  const auto mode = use->spec().network();
  if (args.contains("mode") && net::parse_mode(args["mode"].get<std::string>()) != mode)
    return Error::make(ErrorCode::kFailedPrecondition,
                       std::string("the network mode is fixed at creation (this sandbox's is \"") +
                           net::mode_name(mode) + "\"); create or fork a new sandbox");
  if (!session)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "sandbox " + use->id() +
                           " has network mode \"none\"; create a sandbox with network.mode "
                           "\"allowlist\" to give it rules");
  const auto current = session->policy();
  std::vector<std::string> allow, deny;
  if (args.contains("allow")) {
    allow = strings(args, "allow");
    if (auto s = check_caller_allow(env.config, allow, env.config.network_allow); !s.ok())
      return s.take_error();
  } else {
    for (const auto& r : current->allow) allow.push_back(r.to_string());
  }
  if (args.contains("deny")) {
    deny = with_config_deny(env.config, strings(args, "deny"));
  } else {
    for (const auto& r : current->deny) deny.push_back(r.to_string());
  }
  auto policy = net::make_policy(mode, allow, deny);
  if (!policy) return policy.take_error();
  const auto* proxies = env.manager.options().proxies;
  auto closed = change_network_policy(*session, use->full_network().get(), *policy,
                                      proxies ? proxies->host_addrs() : std::vector<net::IpAddr>{});
  if (!closed) return closed.take_error();
  if (auto s = env.manager.save_record(*use); !s.ok()) return s.take_error();
  return json{{"sandbox_id", use->id()},
              {"network",
               {{"mode", net::mode_name(mode)},
                {"allow", rule_texts((*policy)->allow)},
                {"deny", rule_texts((*policy)->deny)}}},
              {"closed_connections", *closed}};
}

}  // namespace sandcastle::service

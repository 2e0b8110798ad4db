// Full mode's firewall: an nftables table inside the sandbox's network
// namespace that refuses what the policy denies, the built-in refusals
// (loopback, private, metadata) and the host's own addresses, with a TCP
// reset or an ICMP port-unreachable, so programs see ECONNREFUSED at once
// instead of a timeout.
#pragma once

#include <span>
#include <string>

#include "common/result.h"
#include "net/address.h"
#include "net/rules.h"

namespace sandcastle::net::nft {

// One `table inet sandcastle`, replacing any previous one in the same
// transaction (so `nft -f` swaps it atomically). Its output chain, in order:
//   1. `oif lo accept` (the DNS stub and the proxies listen on lo);
//   2. the deny address rules (name rules act in the DNS stub): TCP reset,
//      else ICMP port-unreachable, each with a counter;
//   3. port 53 anywhere else is refused: DNS only through the stub;
//   4. allow address rules that lie inside a refused block (decide()'s
//      lifts) accept;
//   5. the built-in refusals and `host_addrs`: refused, with counters.
// Deny before the lifts, as in decide(). There is no `ct established
// accept`: a new ruleset cuts flows that were open under the old one.
std::string render_ruleset(const Policy& policy, std::span<const IpAddr> host_addrs);

// Loads `ruleset` with `nft -f -` inside the sandbox's namespaces: a forked
// child enters `userns_fd` (skipped when -1), then `netns_fd`, keeps
// CAP_NET_ADMIN across execve as an ambient capability, and execs nft with
// the ruleset on stdin. nft's stderr is the error's text on failure.
Status apply(int userns_fd, int netns_fd, const std::string& ruleset);

// The nft binary's path, or an error saying to install nftables.
Result<std::string> nft_binary();

}  // namespace sandcastle::net::nft

#include "net/nft.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/unique_fd.h"

namespace sandcastle::net::nft {
namespace {

// "ip daddr 10.0.0.0/8" or "ip6 daddr fc00::/7"; a single address without
// its /32 or /128.
std::string daddr(const Cidr& c) {
  const bool v4 = c.base().is_v4();
  std::string out = v4 ? "ip daddr " : "ip6 daddr ";
  const bool single = c.prefix() == (v4 ? 32U : 128U);
  out.append(single ? c.base().to_string() : c.to_string());
  return out;
}

// "443" or "{ 80, 443, 8000-8100 }".
std::string port_set(const std::vector<PortRange>& ports) {
  std::string out;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) out.append(", ");
    out.append(std::to_string(ports[i].first));
    if (ports[i].last != ports[i].first) out.append("-").append(std::to_string(ports[i].last));
  }
  if (ports.size() == 1 && ports[0].first == ports[0].last) return out;
  return "{ " + out + " }";
}

// The two refusing rules for `match` (every protocol when `ports` is empty,
// else TCP and UDP on those ports).
void refuse(std::string& out, const std::string& match, const std::vector<PortRange>& ports) {
  const std::string m = match.empty() ? "" : match + " ";
  if (ports.empty()) {
    out.append("\t\t" + m + "meta l4proto tcp counter reject with tcp reset\n");
    out.append("\t\t" + m + "counter reject with icmpx port-unreachable\n");
    return;
  }
  const std::string p = port_set(ports);
  out.append("\t\t" + m + "tcp dport " + p + " counter reject with tcp reset\n");
  out.append("\t\t" + m + "udp dport " + p + " counter reject with icmpx port-unreachable\n");
}

void accept(std::string& out, const std::string& match, const std::vector<PortRange>& ports) {
  if (ports.empty()) {
    out.append("\t\t" + match + " accept\n");
    return;
  }
  const std::string p = port_set(ports);
  out.append("\t\t" + match + " tcp dport " + p + " accept\n");
  out.append("\t\t" + match + " udp dport " + p + " accept\n");
}

// The refused blocks of one family, with blocks inside another dropped: an
// interval set refuses overlapping elements.
std::vector<Cidr> refused_blocks(bool v4, std::span<const IpAddr> host_addrs) {
  std::vector<Cidr> all;
  for (const Cidr& c : builtin_refusals())
    if (c.base().is_v4() == v4) all.push_back(c);
  for (const IpAddr& a : host_addrs)
    if (a.is_v4() == v4) all.push_back(Cidr::of(a, v4 ? 32 : 128));
  std::vector<Cidr> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    bool inside = false;
    for (std::size_t j = 0; j < all.size() && !inside; ++j)
      inside = j != i && all[j].covers(all[i]) && (all[j] != all[i] || j < i);
    if (!inside) out.push_back(all[i]);
  }
  return out;
}

void render_set(std::string& out, const char* name, bool v4, const std::vector<Cidr>& blocks) {
  out.append("\tset ").append(name).append(" {\n");
  out.append(v4 ? "\t\ttype ipv4_addr\n" : "\t\ttype ipv6_addr\n");
  out.append("\t\tflags interval\n\t\telements = { ");
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) out.append(", ");
    const bool single = blocks[i].prefix() == (v4 ? 32U : 128U);
    out.append(single ? blocks[i].base().to_string() : blocks[i].to_string());
  }
  out.append(" }\n\t}\n");
}

// Whether an allow rule lifts a refusal (decide()'s step 2): an address
// rule lying inside a built-in block, or exactly a host address.
bool lifts(const Rule& r, std::span<const IpAddr> host_addrs) {
  if (r.kind != Rule::Kind::kAddress) return false;
  if (auto block = builtin_refusal(r.cidr.base()); block && block->covers(r.cidr)) return true;
  const unsigned width = r.cidr.base().is_v4() ? 32U : 128U;
  return r.cidr.prefix() == width &&
         std::find(host_addrs.begin(), host_addrs.end(), r.cidr.base()) != host_addrs.end();
}

}  // namespace

std::string render_ruleset(const Policy& policy, std::span<const IpAddr> host_addrs) {
  std::string out;
  out.append("table inet sandcastle\ndelete table inet sandcastle\n");
  out.append("table inet sandcastle {\n");
  render_set(out, "refused_v4", true, refused_blocks(true, host_addrs));
  render_set(out, "refused_v6", false, refused_blocks(false, host_addrs));
  out.append("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n");
  out.append("\t\toif \"lo\" accept\n");
  for (const Rule& r : policy.deny) {
    if (r.kind != Rule::Kind::kAddress) {
      out.append("\t\t# deny " + r.to_string() + ": by the DNS stub\n");
      continue;
    }
    out.append("\t\t# deny " + r.to_string() + "\n");
    refuse(out, daddr(r.cidr), r.ports);
  }
  out.append("\t\t# DNS only through the stub on lo\n");
  refuse(out, "", {{53, 53}});
  // The host's addresses and the metadata endpoints, before any lift: a
  // rule opening the private range around one of them opens the range, not
  // it (decide()); only a rule for exactly that address does.
  std::vector<IpAddr> singles(host_addrs.begin(), host_addrs.end());
  for (const char* m : {"169.254.169.254", "fd00:ec2::254", "168.63.129.16"})
    singles.push_back(*IpAddr::parse(m));
  for (const IpAddr& a : singles) {
    const Cidr exact = Cidr::of(a, a.is_v4() ? 32 : 128);
    const bool opened = std::any_of(policy.allow.begin(), policy.allow.end(), [&](const Rule& r) {
      return r.kind == Rule::Kind::kAddress && r.cidr == exact;
    });
    if (!opened) refuse(out, daddr(exact), {});
  }
  for (const Rule& r : policy.allow) {
    if (!lifts(r, host_addrs)) continue;
    out.append("\t\t# allow " + r.to_string() + "\n");
    accept(out, daddr(r.cidr), r.ports);
  }
  out.append("\t\t# built-in refusals and the host's addresses\n");
  refuse(out, "ip daddr @refused_v4", {});
  refuse(out, "ip6 daddr @refused_v6", {});
  out.append("\t}\n}\n");
  return out;
}

Result<std::string> nft_binary() {
  for (const char* p : {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/usr/local/sbin/nft"})
    if (::access(p, X_OK) == 0) return std::string(p);
  return Error::make(ErrorCode::kUnavailable,
                     "full mode's deny rules need nft (the Debian package nftables)");
}

namespace {

// In the forked child (async-signal-safe only): CAP_NET_ADMIN, which the
// child holds in the sandbox's user namespace after setns, survives execve
// only as an ambient capability when the caller's uid is not root there.
int raise_net_admin_ambient() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return errno;
  data[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable |= CAP_TO_MASK(CAP_NET_ADMIN);
  if (syscall(SYS_capset, &hdr, data) != 0) return errno;
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) != 0) return errno;
  return 0;
}

// Writes a short step name and errno to stderr (fd 2) and exits: the
// parent reads it as nft's stderr.
[[noreturn]] void child_fail(const char* step, int err) {
  char buf[96];
  std::size_t n = 0;
  for (const char* p = "sandcastle nft helper: "; *p != '\0' && n < sizeof buf - 16; ++p)
    buf[n++] = *p;
  for (const char* p = step; *p != '\0' && n < sizeof buf - 16; ++p) buf[n++] = *p;
  buf[n++] = ' ';
  char digits[12];
  int d = 0;
  for (unsigned v = static_cast<unsigned>(err); d == 0 || v != 0; v /= 10)
    digits[d++] = static_cast<char>('0' + v % 10);
  while (d > 0) buf[n++] = digits[--d];
  buf[n++] = '\n';
  (void)!::write(2, buf, n);
  _exit(126);
}

}  // namespace

Status apply(int userns_fd, int netns_fd, const std::string& ruleset) {
  auto nft = nft_binary();
  if (!nft) return nft.take_error();
  // stdin is a socket so a write after nft died is EPIPE, not SIGPIPE.
  int in[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)
    return Error::from_errno("socketpair");
  UniqueFd in_parent(in[0]), in_child(in[1]);
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  UniqueFd err_rd(err[0]), err_wr(err[1]);
  UniqueFd devnull(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!devnull) return Error::from_errno("open /dev/null");
  std::string path = *nft;
  char arg0[] = "nft";
  char arg1[] = "-f";
  char arg2[] = "-";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  char env0[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};

  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork");
  if (pid == 0) {
    if (::dup2(err_wr.get(), 2) < 0) _exit(126);
    if (userns_fd >= 0 && ::setns(userns_fd, CLONE_NEWUSER) != 0) child_fail("setns user", errno);
    if (::setns(netns_fd, CLONE_NEWNET) != 0) child_fail("setns net", errno);
    if (int e = raise_net_admin_ambient(); e != 0) child_fail("raise CAP_NET_ADMIN", e);
    if (::dup2(in_child.get(), 0) < 0 || ::dup2(devnull.get(), 1) < 0) child_fail("dup2", errno);
    ::execve(path.c_str(), argv, envp);
    child_fail("execve nft", errno);
  }
  in_child.reset();
  err_wr.reset();
  std::size_t sent = 0;
  while (sent < ruleset.size()) {
    ssize_t n = ::send(in_parent.get(), ruleset.data() + sent, ruleset.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // nft exited early: its stderr says why
    sent += static_cast<std::size_t>(n);
  }
  in_parent.reset();
  std::string messages;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(err_rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (messages.size() < 16384) messages.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!messages.empty() && (messages.back() == '\n' || messages.back() == ' '))
    messages.pop_back();
  return Error::make(ErrorCode::kIo,
                     "nft -f - failed (status " + std::to_string(status) + "): " + messages);
}

}  // namespace sandcastle::net::nft

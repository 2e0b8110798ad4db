// escape.h defines _GNU_SOURCE (strerrorname_np), so it must come first.
// clang-format off
#include "escape.h"
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
// clang-format on
/* Changing the sandbox's own network from inside: a route around the
 * firewall (198.51.100.3 via lo), the default route removed, an address
 * added, lo taken down, and an nftables socket to flush the firewall. Route
 * netlink is open (getaddrinfo needs it) but every change needs
 * CAP_NET_ADMIN, which no program holds: EPERM in the kernel's ack. The
 * netfilter socket is refused by seccomp. */
struct req {
  struct nlmsghdr nh;
  union {
    struct rtmsg rt;
    struct ifaddrmsg ifa;
    struct ifinfomsg ifi;
  } u;
  char attrs[64];
};

static void add_attr(struct req* r, unsigned short type, const void* data, int len) {
  struct rtattr* a = (struct rtattr*)((char*)r + NLMSG_ALIGN(r->nh.nlmsg_len));
  a->rta_type = type;
  a->rta_len = RTA_LENGTH(len);
  memcpy(RTA_DATA(a), data, len);
  r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

static void send_and_ack(int fd, const char* label, struct req* r) {
  char buf[4096];
  r->nh.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  if (send(fd, r, r->nh.nlmsg_len, 0) < 0) {
    printf("%s %s\n", label, strerrorname_np(errno));
    return;
  }
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  struct nlmsghdr* h = (struct nlmsghdr*)buf;
  if (n < 0)
    printf("%s %s\n", label, strerrorname_np(errno));
  else if (h->nlmsg_type != NLMSG_ERROR)
    printf("%s unexpected %d\n", label, h->nlmsg_type);
  else {
    int err = ((struct nlmsgerr*)NLMSG_DATA(h))->error;
    if (err == 0)
      printf("%s OK 0\n", label);
    else
      printf("%s %s\n", label, strerrorname_np(-err));
  }
}

int main(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    printf("route %s\n", strerrorname_np(errno));
    return 0;
  }
  struct in_addr dst, local;
  inet_pton(AF_INET, "198.51.100.3", &dst);
  inet_pton(AF_INET, "10.9.9.9", &local);
  int lo = 1;

  struct req r = {0};
  r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  r.nh.nlmsg_type = RTM_NEWROUTE;
  r.nh.nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  r.u.rt = (struct rtmsg){.rtm_family = AF_INET,
                          .rtm_dst_len = 32,
                          .rtm_table = RT_TABLE_MAIN,
                          .rtm_protocol = RTPROT_BOOT,
                          .rtm_scope = RT_SCOPE_LINK,
                          .rtm_type = RTN_UNICAST};
  add_attr(&r, RTA_DST, &dst, sizeof dst);
  add_attr(&r, RTA_OIF, &lo, sizeof lo);
  send_and_ack(fd, "route", &r);

  memset(&r, 0, sizeof r);
  r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  r.nh.nlmsg_type = RTM_DELROUTE;
  r.u.rt = (struct rtmsg){
      .rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN, .rtm_scope = RT_SCOPE_NOWHERE};
  send_and_ack(fd, "unroute", &r);

  memset(&r, 0, sizeof r);
  r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
  r.nh.nlmsg_type = RTM_NEWADDR;
  r.nh.nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
  r.u.ifa = (struct ifaddrmsg){.ifa_family = AF_INET, .ifa_prefixlen = 32, .ifa_index = 1};
  add_attr(&r, IFA_LOCAL, &local, sizeof local);
  send_and_ack(fd, "addr", &r);

  memset(&r, 0, sizeof r);
  r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
  r.nh.nlmsg_type = RTM_NEWLINK;
  r.u.ifi = (struct ifinfomsg){.ifi_family = AF_UNSPEC, .ifi_index = 1, .ifi_change = IFF_UP};
  send_and_ack(fd, "link", &r);

  int nf = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  printf("nft %s\n", nf < 0 ? strerrorname_np(errno) : "OK");
  return 0;
}

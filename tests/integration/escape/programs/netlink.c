#include "escape.h"
#include <linux/netlink.h>
/* Route netlink (getaddrinfo, getifaddrs) is the sandbox's own network
 * namespace; audit, uevents and netfilter are not for it. */
static void try(int proto) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
  if (fd < 0) printf("%s\n", strerrorname_np(errno));
  else printf("OK\n");
}
int main(void) {
  try(NETLINK_ROUTE);
  try(NETLINK_AUDIT);
  try(NETLINK_KOBJECT_UEVENT);
  try(NETLINK_NETFILTER);
  return 0;
}

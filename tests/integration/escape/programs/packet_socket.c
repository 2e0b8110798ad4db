#include "escape.h"
#include <linux/if_ether.h>
int main(void) { return report(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL))); }

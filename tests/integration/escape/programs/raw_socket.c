#include "escape.h"
#include <netinet/in.h>
int main(void) { return report(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)); }

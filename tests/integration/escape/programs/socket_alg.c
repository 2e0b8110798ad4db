#include "escape.h"
/* AF_ALG: the kernel's crypto API, a long CVE history; Docker denies it. */
int main(void) { return report(socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0)); }

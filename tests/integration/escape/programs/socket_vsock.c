#include "escape.h"
/* AF_VSOCK: one address space shared by the host and every VM and
 * container on it. */
int main(void) { return report(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0)); }

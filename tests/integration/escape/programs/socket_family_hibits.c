#include "escape.h"
/* The kernel reads the family as an int: AF_VSOCK with stray upper bits must
 * not pass a filter that compares all 64. */
int main(void) { return report(syscall(SYS_socket, (1UL << 32) | 40, SOCK_STREAM, 0)); }

#include "escape.h"
#include <sys/sysmacros.h>
int main(void) { return report(mknod("/tmp/mem", S_IFCHR | 0600, makedev(1, 1))); }

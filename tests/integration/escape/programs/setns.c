#include "escape.h"
int main(void) { int fd = open("/proc/self/ns/net", O_RDONLY); return report(setns(fd, CLONE_NEWNET)); }

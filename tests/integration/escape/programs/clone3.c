#include "escape.h"
int main(void) { char args[88] = {0}; return report(syscall(SYS_clone3, args, sizeof args)); }

#include "escape.h"
int main(void) { long r = syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0); if (r == 0) _exit(0); return report(r); }

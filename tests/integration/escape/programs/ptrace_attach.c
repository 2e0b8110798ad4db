#include "escape.h"
#include <sys/ptrace.h>
int main(void) { pid_t c = fork(); if (c == 0) { pause(); _exit(0); } long r = ptrace(PTRACE_ATTACH, c, 0, 0); kill(c, SIGKILL); return report(r); }

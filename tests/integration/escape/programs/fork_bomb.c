#include "escape.h"
int main(void) { int n = 0; for (;;) { pid_t p = fork(); if (p == 0) { pause(); _exit(0); } if (p < 0) break; n++; } printf("%s %d\n", strerrorname_np(errno), n < 300); return 0; }

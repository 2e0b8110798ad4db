#include "escape.h"
int main(void) { int n = 0; for (int i = 0; i < 200; i++) { pid_t p = fork(); if (p == 0) _exit(0); if (p > 0) n++; } printf("zombies %d\n", n > 100); return 0; }

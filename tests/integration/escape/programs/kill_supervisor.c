#include "escape.h"
int main(void) { long r = kill(1, SIGKILL); usleep(100000); printf("alive "); return report(r); }

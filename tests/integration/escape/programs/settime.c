#include "escape.h"
#include <time.h>
int main(void) { struct timespec t = {0, 0}; return report(clock_settime(CLOCK_REALTIME, &t)); }

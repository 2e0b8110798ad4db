#include "escape.h"
int main(void) { char c = 0x41; return report(ioctl(0, TIOCSTI, &c)); }

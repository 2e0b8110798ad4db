#include "escape.h"
int main(void) { return report(setuid(0)); }

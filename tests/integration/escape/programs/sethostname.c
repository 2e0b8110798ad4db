#include "escape.h"
int main(void) { return report(sethostname("evil", 4)); }

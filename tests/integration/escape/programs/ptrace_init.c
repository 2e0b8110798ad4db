#include "escape.h"
#include <sys/ptrace.h>
int main(void) { return report(ptrace(PTRACE_SEIZE, 1, 0, 0)); }

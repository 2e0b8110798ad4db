#include "escape.h"
#include <sys/ptrace.h>
int main(void) { return report(ptrace(PTRACE_TRACEME, 0, 0, 0)); }

#include "escape.h"
#include <linux/perf_event.h>
int main(void) { struct perf_event_attr a; memset(&a, 0, sizeof a); a.size = sizeof a; a.type = PERF_TYPE_SOFTWARE; a.config = PERF_COUNT_SW_CPU_CLOCK; return report(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0)); }

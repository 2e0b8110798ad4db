// Copying a disk image file (a persistent sandbox's disk.img) for a fork:
// data extents only, and a second pass that makes the copy equal to an
// image that changed while it was copied.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace sandcastle::sandbox::native {

// Copies [0, size) of `in` to `out`, data extents only (holes stay holes).
Status sparse_copy(int in, int out, off_t size);

// Makes `out` equal to `in` (both `size` bytes) where a copy taken while
// `in` still changed left it behind: each 4 KiB page of `in`'s data that
// differs is written again, and `out`'s data where `in` has a hole is
// punched out. Compares through mappings of both (no copies of the bytes).
Status make_equal(int in, int out, off_t size);

}  // namespace sandcastle::sandbox::native

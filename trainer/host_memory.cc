#include "trainer/host_memory.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace verl::trainer {

bool keep_freed_host_memory() {
#if defined(__GLIBC__)
  static const bool applied = [] {
    // No mmap for large blocks (they come from the heap and go back to it), and never hand the
    // heap's top back to the kernel below 2 GiB of free space (mallopt takes an int).
    return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  }();
  return applied;
#else
  return false;
#endif
}

}  // namespace verl::trainer

// jemalloc's settings for the executables that link it (meson's alloc_dep).
//
// jemalloc hands the pages freed by a burst back to the kernel about 10 s
// later (dirty_decay_ms); the next burst then faults every one of them in
// again. A fault storm is such a burst and usually comes after a long idle
// spell: storm_bench --idle 15 measured it at about 60 ms of the time to
// all stopped. Keeping the freed pages costs their memory, the heap's
// high-water mark (README, "Storms after idling"). MALLOC_CONF in the
// environment still overrides this, e.g. MALLOC_CONF=dirty_decay_ms:10000.

#include <jemalloc/jemalloc.h>

/// Read by jemalloc once, before its first allocation.
const char* malloc_conf = "dirty_decay_ms:-1";

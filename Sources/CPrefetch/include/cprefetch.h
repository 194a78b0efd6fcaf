#ifndef CHECKOUTBUS_CPREFETCH_H
#define CHECKOUTBUS_CPREFETCH_H

/// Asks the CPU to start loading the cache line at `p` for a read soon, without waiting for it
/// (Swift has no prefetch of its own). A hint only: any address is allowed, nothing faults.
static inline void cb_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/// The same, for a line about to be written.
static inline void cb_prefetch_write(const void *p) { __builtin_prefetch(p, 1, 3); }

#endif

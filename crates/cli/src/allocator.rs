//! What a memory budget asks of the process's allocator.
//!
//! glibc's `malloc` raises its threshold for serving requests from mappings of their own each
//! time such a mapping is freed, up to tens of MiB; after that, freed buffers (merged
//! columns, batcher chunks, sort scratch, cached blocks) stay in its heaps, in holes between
//! live ones, instead of going back to the system. Under a budget that kept hundreds of MiB
//! resident beyond the heap's own peak, and a fixed threshold of 128 KiB still left a fifth
//! of the budget in holes between buffers of some KiB. From 16 KiB up, buffers are mapped on
//! their own and unmapped when freed: resident memory then stays within a few MiB of the
//! heap, at a cost in system calls of some percent of a larger-than-memory run's time (see
//! docs/perf-notes.md, section "Storage: the whole process within its budget").

/// Buffers from this size up are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAP_FROM: libc::c_int = 16 << 10;

/// Free memory of this size at the top of a heap is given back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_FROM: libc::c_int = 128 << 10;

/// Has the allocator give freed memory back to the system as it goes (see the module
/// documentation). Returns whether this platform's allocator took the setting; elsewhere it
/// does nothing and returns false.
pub fn give_back_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only sets parameters of glibc's allocator, which it reads under
        // its own locks, so it may be called at any time from any thread; the arguments are
        // constants within the ranges its manual gives (a threshold of at most
        // HEAP_MAX_SIZE / 2 for M_MMAP_THRESHOLD, any non-negative size for
        // M_TRIM_THRESHOLD). The test below calls it.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_FROM) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_FROM) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    /// glibc takes both settings, and allocations big and small still work after them.
    #[test]
    fn the_allocator_takes_the_settings() {
        let taken = super::give_back_freed_memory();
        assert_eq!(taken, cfg!(all(target_os = "linux", target_env = "gnu")));
        let big = vec![7u8; 1 << 20];
        let small = vec![1u64; 100];
        assert_eq!(big.iter().map(|&b| b as usize).sum::<usize>(), 7 << 20);
        drop(big);
        assert_eq!(small.iter().sum::<u64>(), 100);
    }
}

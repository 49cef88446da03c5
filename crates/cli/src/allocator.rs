//! What a memory budget asks of the process's allocator.
//!
//! glibc's `malloc` raises its threshold for serving requests from mappings of their own each
//! time such a mapping is freed, up to tens of MiB; after that, freed buffers (merged
//! columns, batcher chunks, sort scratch, cached blocks) stay in its heaps, in holes between
//! live ones, instead of going back to the system. Under a budget that kept hundreds of MiB
//! resident beyond the heap's own peak, and a fixed threshold of 128 KiB still left about a
//! quarter of the budget in holes between buffers of some KiB. From 16 KiB up, buffers are
//! mapped on their own and unmapped when freed: resident memory then stays within about a
//! fortieth of the heap's peak, at a cost in system calls of some percent of a
//! larger-than-memory run's time (see docs/perf-notes.md, section "Storage: the whole process
//! within its budget").
//!
//! glibc marks `mallopt` unsafe to call while other threads run, so the `ripple` binary sets
//! this at the start of `main`, before anything starts a thread ([`budget_asked`] reads the
//! arguments for it).

/// Whether `args` (a command line) give `--memory-budget`. A value that merely looks like it
/// makes the allocator give memory back where it need not, which costs a little time only.
pub fn budget_asked(args: &[String]) -> bool {
    args.iter()
        .any(|arg| arg == "--memory-budget" || arg.starts_with("--memory-budget="))
}

/// Buffers from this size up are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAP_FROM: libc::c_int = 16 << 10;

/// At most this many buffers are mapped at once (later ones come from glibc's heaps): half
/// of Linux's default limit on a process's mappings, so that the block cache of a budget of
/// many GiB cannot take the mappings that thread stacks and files need.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAPPED_MAX: libc::c_int = 1 << 15;

/// Free memory of this size at the top of a heap is given back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_FROM: libc::c_int = 128 << 10;

/// Has the allocator give freed memory back to the system as it goes (see the module
/// documentation). Returns whether this platform's allocator took the settings; elsewhere it
/// does nothing and returns false.
///
/// # Safety
///
/// No other thread of the process may be running: glibc's manual marks `mallopt`
/// "MT-Unsafe", its `malloc` and `free` reading (and moving) these settings without a lock.
pub unsafe fn give_back_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: the caller guarantees that no other thread runs; the values are within
        // the ranges glibc's manual gives (thresholds below its largest mapping threshold,
        // a non-negative count of mappings).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_FROM) == 1
                && libc::mallopt(libc::M_MMAP_MAX, MAPPED_MAX) == 1
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
    use super::budget_asked;

    #[test]
    fn a_budget_is_asked_in_either_spelling() {
        let line = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert!(budget_asked(&line(&[
            "ripple",
            "bfs",
            "--memory-budget",
            "1MiB"
        ])));
        assert!(budget_asked(&line(&[
            "ripple",
            "bfs",
            "--memory-budget=1MiB"
        ])));
        assert!(!budget_asked(&line(&["ripple", "bfs", "--spill-dir", "x"])));
    }
}

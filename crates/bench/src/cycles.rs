//! The processor's time-stamp counter, for benchmarks that report cycles beside wall time (as
//! Kudu's measurements did).
//!
//! The counter ticks at a constant reference rate, not at the core's current clock: on a
//! machine whose hardware counters are not available (virtual machines, `perf stat` saying
//! "not supported"), it is the cycle count there is. Reference cycles per operation compare
//! two ways of doing the same work on one machine; across machines, compare ratios.

/// The time-stamp counter now; `None` where the processor has none ripple reads (not x86_64).
pub fn reference_cycles() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads a counter and touches no memory; every x86_64 processor has
        // the instruction, so the intrinsic has no precondition left to uphold here.
        Some(unsafe { std::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::reference_cycles;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_counter_moves_forward() {
        let before = reference_cycles().expect("x86_64 has a time-stamp counter");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let after = reference_cycles().expect("x86_64 has a time-stamp counter");
        assert!(after > before, "{before} then {after}");
    }
}

//! The counting allocator sees allocations, growth and frees.
//!
//! One test function in its own binary, so no other test thread allocates or frees meanwhile
//! (a concurrent test freeing memory it took before `before` was read made this flaky as a unit
//! test).

use ripple_bench::alloc::{
    allocation_calls, live_bytes, peak_bytes, reset_peak, CountingAlloc, SLACK_BYTES,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn counts_allocations() {
    let before = live_bytes();
    let calls_before = allocation_calls();
    reset_peak();
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 20);
    buffer.push(1);
    assert!(live_bytes() >= before + (1 << 20));
    buffer.reserve_exact(2 << 20);
    assert!(peak_bytes() >= before + (2 << 20));
    // One allocation and one reallocation (other threads may add, never subtract).
    assert!(allocation_calls() >= calls_before + 2);
    drop(buffer);
    assert!(live_bytes() < before + (64 << 10));

    // Small allocations stay in this thread's cells until a read moves them: reads on the
    // allocating thread are exact.
    let before = live_bytes();
    let small: Vec<u8> = Vec::with_capacity(100);
    assert_eq!(live_bytes(), before + 100);
    drop(small);
    assert_eq!(live_bytes(), before);
    // A short-lived peak below the slack, freed before any read, still counts.
    reset_peak();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(1000)));
    assert_eq!(peak_bytes(), before + 1000);
    assert_eq!(live_bytes(), before);

    // Another thread's counts reach the shared counters within the slack, and a peak reached
    // there is seen here.
    let before = live_bytes();
    reset_peak();
    let slack = SLACK_BYTES as usize;
    let held = std::thread::spawn(|| {
        let big: Vec<u8> = Vec::with_capacity(1 << 20);
        let smalls: Vec<Vec<u8>> = (0..10).map(|_| Vec::with_capacity(100)).collect();
        (big, smalls)
    })
    .join()
    .expect("the allocating thread finishes");
    let live = live_bytes();
    assert!(
        live + slack >= before + (1 << 20) + 1000,
        "{live} after {before}"
    );
    assert!(peak_bytes() + slack >= before + (1 << 20) + 1000);
    // Freed here, on another thread than the one that allocated.
    drop(held);
    assert!(live_bytes() <= before + slack);
}

//! The counting allocator sees allocations, growth and frees.
//!
//! One test function in its own binary, so no other test thread allocates or frees meanwhile
//! (a concurrent test freeing memory it took before `before` was read made this flaky as a unit
//! test).

use ripple_bench::alloc::{allocation_calls, live_bytes, peak_bytes, reset_peak, CountingAlloc};

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
}

//! A global allocator wrapper that counts live heap bytes, their peak, and allocation calls.
//!
//! Benchmarks install it with `#[global_allocator]` and read [`live_bytes`], [`peak_bytes`] and
//! [`allocation_calls`] around the measured region; [`reset_peak`] starts a new region. The
//! counts include capacity, not just what is used: over-reserved memory counts against whoever
//! reserved it.
//!
//! Each thread first adds its counts up in thread-local cells and moves them to the shared
//! counters once they reach [`SLACK_BYTES`] (either way) or [`SLACK_CALLS`]. Updating shared
//! atomics on every call made two timely workers fight over one cache line, which slowed bfs
//! with two workers by about a third, ripple and differential alike (see docs/perf-notes.md,
//! section "Bench: counting allocator"). Each thread also notes the highest its
//! pending bytes reached and publishes that high with them, so a short-lived peak is not lost.
//! Reads publish the reading thread's counts first, so on the reading thread live bytes, calls
//! and the peak are exact; other threads' counts lag by less than the slack each (the peak is
//! within 4 KiB per running thread). A thread that ends with counts still in its cells leaves
//! them uncounted (a thread-local destructor would have to allocate to register itself, inside
//! the allocator); that drift is at most the slack per thread, and measurements subtract a
//! reading taken at their start.
//!
//! The cells rely on native thread-locals (x86_64 and aarch64 Linux, macOS, Windows): `const`
//! keys of a type without `Drop` are then plain thread-local statics that never allocate.
//! Where std emulates thread-locals with OS keys, the first use in a thread allocates, which
//! inside an allocator would recurse.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// A thread's pending byte count moves to the shared count when it reaches this far from zero.
pub const SLACK_BYTES: isize = 4 << 10;
/// A thread moves its call count to the shared counter at this many calls.
pub const SLACK_CALLS: usize = 64;

thread_local! {
    // `const` and without `Drop`: no lazy initialisation and no destructor to register, so
    // using them inside the allocator never allocates.
    /// Bytes counted but not yet published, and the highest that count reached since the last
    /// publication (at least 0).
    static PENDING: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
    static CALLED: Cell<usize> = const { Cell::new(0) };
}

/// Adds `delta` bytes to the shared count; `high` (at least `delta`) is the most the pending
/// count reached on the way, so the peak is at least what was live before plus `high`.
fn publish_bytes(delta: isize, high: isize) {
    let before = LIVE.fetch_add(delta, Ordering::Relaxed);
    let peak = before + high.max(delta);
    // A load first: the read-modify-write is needed only at a new high.
    if peak > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(peak, Ordering::Relaxed);
    }
}

#[inline]
fn count_bytes(delta: isize) {
    let kept = PENDING.try_with(|pending| {
        let (bytes, high) = pending.get();
        let (bytes, high) = (bytes + delta, high.max(bytes + delta));
        if bytes.unsigned_abs() >= SLACK_BYTES.unsigned_abs() {
            pending.set((0, 0));
            publish_bytes(bytes, high);
        } else {
            pending.set((bytes, high));
        }
    });
    // Unreachable with native thread-locals (see the module documentation); counting directly
    // is right all the same.
    if kept.is_err() {
        publish_bytes(delta, delta);
    }
}

#[inline]
fn count_call() {
    let kept = CALLED.try_with(|called| {
        let local = called.get() + 1;
        if local >= SLACK_CALLS {
            called.set(0);
            CALLS.fetch_add(local, Ordering::Relaxed);
        } else {
            called.set(local);
        }
    });
    // As in `count_bytes`.
    if kept.is_err() {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Moves the calling thread's counts to the shared counters.
fn flush_this_thread() {
    let (bytes, high) = PENDING
        .try_with(|pending| pending.replace((0, 0)))
        .unwrap_or((0, 0));
    if bytes != 0 || high != 0 {
        publish_bytes(bytes, high);
    }
    let calls = CALLED.try_with(|called| called.replace(0)).unwrap_or(0);
    CALLS.fetch_add(calls, Ordering::Relaxed);
}

/// Forwards to the system allocator and counts bytes.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's pointer and layout unchanged, so
// `System`'s guarantees carry over; the counters are side effects that never touch the memory
// (and their thread-local cells never allocate, see above).
// Exercised by `tests/counting_alloc.rs` and by every benchmark that installs it.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; see the impl comment.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            count_call();
            count_bytes(layout.size() as isize);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; see the impl comment.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            count_call();
            count_bytes(layout.size() as isize);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; see the impl comment.
        unsafe { System.dealloc(pointer, layout) };
        count_bytes(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; see the impl comment.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            count_call();
            count_bytes(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

/// Heap bytes allocated and not yet freed (exact for the calling thread's allocations, other
/// threads' to within [`SLACK_BYTES`] each).
pub fn live_bytes() -> usize {
    flush_this_thread();
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// The most heap bytes live at once since the last [`reset_peak`] (exact on one thread,
/// within [`SLACK_BYTES`] per running thread otherwise).
pub fn peak_bytes() -> usize {
    flush_this_thread();
    PEAK.load(Ordering::Relaxed).max(0) as usize
}

/// Allocations and reallocations that succeeded so far (a growing count: subtract two
/// readings; other threads' calls to within [`SLACK_CALLS`] each).
pub fn allocation_calls() -> usize {
    flush_this_thread();
    CALLS.load(Ordering::Relaxed)
}

/// Starts a new peak measurement from the current live bytes.
pub fn reset_peak() {
    flush_this_thread();
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Runs `body`, returning its result and the most heap it added at once (see [`peak_bytes`]).
pub fn peak_during<T>(body: impl FnOnce() -> T) -> (T, usize) {
    let before = live_bytes();
    reset_peak();
    let result = body();
    (result, peak_bytes().saturating_sub(before))
}

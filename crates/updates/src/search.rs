//! Galloping search over a sorted range: the walk the trace's cursors and lookups and reduce's
//! deferred list share, each stepping forward through sorted data by distances that are usually
//! short. (The batcher's merger keeps a variant of its own; see `ripple_batcher::merger`.)

/// The first index in `[start, end)` at which `before` is false, given that `before` is true
/// on a prefix of the range and false after it. Steps 1, 2, 4, ... from `start`, then halves:
/// about `2 log d` probes to land `d` places away, so walking forward in small steps is cheap.
#[inline]
pub fn gallop(mut start: usize, end: usize, before: impl Fn(usize) -> bool) -> usize {
    if start >= end || !before(start) {
        return start;
    }
    // Invariant: before(start) holds.
    let mut step = 1;
    while start + step < end && before(start + step) {
        start += step;
        step <<= 1;
    }
    // The answer is in (start, min(start + step, end)].
    let mut step = step >> 1;
    while step > 0 {
        if start + step < end && before(start + step) {
            start += step;
        }
        step >>= 1;
    }
    start + 1
}

#[cfg(test)]
mod tests {
    use super::gallop;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn gallop_finds_the_boundary(len in 0usize..300, boundary in 0usize..300, start in 0usize..300) {
            let boundary = boundary.min(len);
            let start = start.min(len);
            let found = gallop(start, len, |i| i < boundary);
            prop_assert_eq!(found, boundary.max(start));
        }
    }
}

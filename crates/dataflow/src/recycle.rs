//! Buffers of borrowed items kept across activations.
//!
//! An operator's per-key scratch vectors hold items borrowed from the batches of one
//! activation (`Ref<'a, V>`), so their type names that activation's lifetime and they cannot be
//! kept in the operator's state as they are. [`recycle`] empties such a vector and gives back
//! its allocation typed for another lifetime: kept between activations as `'static`, and taken
//! up again as the next activation's. Without it each activation grows its scratch from empty,
//! a handful of reallocations per vector that weigh at one update per step.

/// Vectors holding room for more items than this are let go rather than kept: one huge key
/// should not pin its buffers for the operator's lifetime (2 MiB of 32-byte items).
const KEEP_ITEMS_MAX: usize = 1 << 16;

/// `vec`, emptied, as a vector of another item type in the same allocation when the two types
/// have the same size and alignment (as `Ref<'a, V>` and `Ref<'b, V>` do): collecting an empty
/// iterator over a vector's own items back into a vector reuses its buffer in place. For other
/// types it is a new empty vector, which is correct, only not reused; so is a vector with room
/// for more than [`KEEP_ITEMS_MAX`] items. Owned buffers go through it too, to be emptied and
/// capped alike.
pub(crate) fn recycle<A, B>(mut vec: Vec<A>) -> Vec<B> {
    if vec.capacity() > KEEP_ITEMS_MAX {
        return Vec::new();
    }
    vec.clear();
    vec.into_iter()
        .map(|_| unreachable!("the vector was emptied"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::recycle;

    /// A buffer of borrows outlives them: the same allocation comes back, empty, typed for the
    /// next borrows. (This relies on std collecting in place, which it does not promise: should
    /// that change, this test says so, and recycling only stops saving allocations.) A huge
    /// buffer is let go.
    #[test]
    fn the_allocation_is_kept_for_other_borrows() {
        let kept: Vec<(&'static u64, u32)> = {
            let value = 7u64;
            let mut borrows: Vec<(&u64, u32)> = Vec::with_capacity(100);
            borrows.push((&value, 1));
            let address = borrows.as_ptr() as usize;
            let kept: Vec<(&'static u64, u32)> = recycle(borrows);
            assert_eq!(kept.as_ptr() as usize, address);
            kept
        };
        assert!(kept.is_empty());
        assert_eq!(kept.capacity(), 100);
        let other = 9u64;
        let mut again: Vec<(&u64, u32)> = recycle(kept);
        again.push((&other, 2));
        assert_eq!(again, vec![(&9, 2)]);
        assert!(again.capacity() >= 100);
        let huge: Vec<u64> = Vec::with_capacity(super::KEEP_ITEMS_MAX + 1);
        assert_eq!(recycle::<u64, u64>(huge).capacity(), 0);
    }
}

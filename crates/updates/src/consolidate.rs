//! Consolidation: sort by `(key, val, time)`, add the diffs of equal triples, drop zero sums.
//!
//! Two paths, chosen per update type at compile time:
//! - **Rows** ([`consolidate_rows`]), for plain-old-data updates (no field owns heap memory:
//!   integers, tuples of integers, `Product` times). Copying such an update out of its columns
//!   is a few register moves, and sorting a `Vec` of rows in place is the fastest sort there is.
//!   This is the common case in graphs, and the case where per-record column access made the
//!   columnar merge batcher of the seed lose several times over. Rows keyed by a primitive
//!   integer are sorted by a radix sort on the key's bytes, then by value and time within each
//!   key ([`crate::radix`]); other rows by a comparison sort. Spreading *all* of a row's
//!   significant bits over radix passes does not pay: byte passes scattering whole rows took
//!   longer than the comparison sort. Inputs made of a few sorted runs (common in bfs's forms)
//!   are not worth detecting: a stable sort, which merges such runs, cut a fraction of a
//!   percent of the instructions and ran no faster. See docs/perf-notes.md, section
//!   "Consolidation: sorting rows".
//! - **Columns** ([`consolidate_columns`]), for everything else (`String`, `Vec<u8>`, ...):
//!   sort a permutation of indices by comparing borrowed items in place, then gather. Nothing is
//!   cloned per record. `String` keys sort by an integer of their bytes past the prefix all keys
//!   share (see `sort_by_key_prefix`), unless the input is found already sorted.
//!
//! Both produce the same result; property tests check each against a map of accumulations.

use crate::columns::{Updates, UpdatesView};
use crate::diff::Semigroup;
use crate::radix::sort_by_integer_key;
use crate::update::{Row, Update};
use columnar::{Columnar, ContainerOf, Index, Strings};
use std::any::Any;
use std::cmp::Ordering;

/// True when updates of type `U` can be consolidated as owned rows without touching the heap.
///
/// A type that needs no drop glue owns no heap memory, so turning a borrowed item into an owned
/// one is a plain copy.
pub const fn rows_are_plain<U: Update>() -> bool {
    !std::mem::needs_drop::<Row<U>>()
}

/// Sorts `rows` by `(key, val, time)`, sums the diffs of equal triples and drops zero sums.
pub fn consolidate_rows<U: Update>(rows: &mut Vec<Row<U>>) {
    sort_rows::<U>(rows);
    consolidate_sorted_rows::<U>(rows);
}

/// Like [`consolidate_rows`], in descending `(key, val, time)` order.
pub fn consolidate_rows_descending<U: Update>(rows: &mut Vec<Row<U>>) {
    sort_rows::<U>(rows);
    rows.reverse();
    consolidate_sorted_rows::<U>(rows);
}

/// Sorts `rows` by `(key, val, time)`: rows keyed by a primitive integer by a radix sort on the
/// key (see [`crate::radix`]), others by a comparison sort.
fn sort_rows<U: Update>(rows: &mut Vec<Row<U>>) {
    if !sort_by_integer_key(rows, |row| &row.0, cmp_val_time::<U>) {
        rows.sort_unstable_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    }
}

/// The order of two rows of the same key.
fn cmp_val_time<U: Update>(a: &Row<U>, b: &Row<U>) -> Ordering {
    (&a.1, &a.2).cmp(&(&b.1, &b.2))
}

/// Like [`consolidate_rows`], for rows already sorted by `(key, val, time)`, ascending or
/// descending: it only needs equal triples next to each other.
pub fn consolidate_sorted_rows<U: Update>(rows: &mut Vec<Row<U>>) {
    let len = rows.len();
    if len == 0 {
        return;
    }
    // `write` is the number of rows kept so far; rows[write] is the group being accumulated.
    let mut write = 0;
    for read in 1..len {
        let same = {
            let (kept, next) = (&rows[write], &rows[read]);
            kept.0 == next.0 && kept.1 == next.1 && kept.2 == next.2
        };
        if same {
            let diff = rows[read].3.clone();
            rows[write].3.plus_equals(&diff);
        } else {
            if !rows[write].3.is_zero() {
                write += 1;
            }
            // On distinct, non-cancelling rows `write` keeps up with `read`: no move at all.
            if write != read {
                rows.swap(write, read);
            }
        }
    }
    if !rows[write].3.is_zero() {
        write += 1;
    }
    rows.truncate(write);
}

/// Appends the consolidation of `updates` to `output`, using `order` and `sums` as scratch space
/// (passed in so callers can reuse their allocations).
pub fn consolidate_columns<U: Update>(
    updates: &Updates<U>,
    order: &mut Vec<u32>,
    sums: &mut Vec<U::Diff>,
    output: &mut Updates<U>,
) {
    if consolidate_order(updates, order, sums) {
        output.extend_from(updates.view(), 0..updates.len());
    } else {
        output.extend_gather_with_diffs(updates.view(), order, sums);
    }
}

/// The consolidation of `updates` as indices into it: on return `order[i]` is the first update
/// of the `i`-th distinct `(key, val, time)` in sorted order and `sums[i]` its non-zero total
/// diff. Nothing is copied out of the columns, so callers can write the survivors wherever they
/// go.
///
/// Returns true when the input was found sorted and consolidated already (a sorted load): the
/// survivors are then every update, in place, with their own diffs, and callers may copy the
/// columns in bulk instead of gathering. (False does not rule that out; the gather is correct
/// either way.)
pub fn consolidate_order<U: Update>(
    updates: &Updates<U>,
    order: &mut Vec<u32>,
    sums: &mut Vec<U::Diff>,
) -> bool {
    let view = updates.view();
    assert!(
        view.len() <= u32::MAX as usize,
        "consolidate_order: {} updates exceed the u32 permutation",
        view.len()
    );
    order.clear();
    sums.clear();
    // Reserved once: growing by doubling from empty reallocates a dozen times on a fresh
    // chunker's first form.
    order.reserve(view.len());
    sums.reserve(view.len());
    match byte_string_keys::<U::Key>(&updates.keys) {
        Some(keys) => {
            // The prefix sort builds its integers before it compares anything, so already
            // sorted input (a sorted load, a run of ordered keys) is looked for first, in one
            // pass that stops at the first update out of order. When no two neighbours are
            // equal either, that pass has also found every update distinct.
            let mut distinct = true;
            let sorted = (1..view.len()).all(|i| match view.cmp_at(i - 1, &view, i) {
                Ordering::Less => true,
                Ordering::Equal => {
                    distinct = false;
                    true
                }
                Ordering::Greater => false,
            });
            if sorted {
                sum_equal_runs(view, view.len(), |p| p, |_, _| distinct, order, sums);
                return distinct && order.len() == view.len();
            } else {
                let keyed = sort_by_key_prefix(keys, view);
                // Different prefixes mean different keys: only equal ones need a comparison.
                let at = |p: usize| keyed[p].1 as usize;
                let differ = |p: usize, q: usize| keyed[p].0 != keyed[q].0;
                sum_equal_runs(view, keyed.len(), at, differ, order, sums);
            }
        }
        None => {
            let mut sorted: Vec<u32> = (0..view.len() as u32).collect();
            sorted.sort_unstable_by(|&a, &b| view.cmp_at(a as usize, &view, b as usize));
            let at = |p: usize| sorted[p] as usize;
            sum_equal_runs(view, sorted.len(), at, |_, _| false, order, sums);
        }
    }
    false
}

/// Walks `view` in a sorted order (`at(p)` is the index of the `p`-th of `len` updates), adds
/// the diffs of runs of equal `(key, val, time)` and appends each run's first index and non-zero
/// sum to `order` and `sums`. `differ(p, q)` may answer `true` cheaply when the updates at
/// positions `p` and `q` are known to differ; otherwise they are compared.
fn sum_equal_runs<U: Update>(
    view: UpdatesView<'_, U>,
    len: usize,
    at: impl Fn(usize) -> usize,
    differ: impl Fn(usize, usize) -> bool,
    order: &mut Vec<u32>,
    sums: &mut Vec<U::Diff>,
) {
    let mut position = 0;
    while position < len {
        let start = position;
        let first = at(start);
        let mut diff = <U::Diff as columnar::Columnar>::into_owned(view.diff(first));
        position += 1;
        while position < len
            && !differ(start, position)
            && view.cmp_at(first, &view, at(position)) == Ordering::Equal
        {
            diff.plus_equals_ref(view.diff(at(position)));
            position += 1;
        }
        if !diff.is_zero() {
            order.push(first as u32);
            sums.push(diff);
        }
    }
}

/// The key column as byte strings, when the keys are `String`s (or `Box<str>`s): both use
/// `columnar`'s `Strings` container, whose items compare as their bytes do.
fn byte_string_keys<K: Columnar>(keys: &ContainerOf<K>) -> Option<&Strings> {
    (keys as &dyn Any).downcast_ref::<Strings>()
}

/// The indices of `view`, sorted by `(key, val, time)`, each beside its key's prefix integer
/// (below), where `keys` are the byte strings of the key column.
///
/// String keys often share a long prefix (paths, zero-padded numbers, URLs), and a plain
/// comparison walks it again every time. Instead each key gets an 8-byte integer: its bytes
/// just past the prefix common to all keys, zero-padded, big-endian. Integers compare in one
/// instruction and agree with the byte order wherever they differ (a key that ends early pads
/// with zeros, and a proper prefix sorts first anyway), so the pairs are sorted as plain
/// integers first; only runs of equal integers are then sorted again by the full comparison.
fn sort_by_key_prefix<U: Update>(keys: &Strings, view: UpdatesView<'_, U>) -> Vec<(u64, u32)> {
    let key = |index: usize| -> &[u8] { keys.get(index) };
    let first = key(0);
    let mut common = first.len();
    for index in 1..view.len() {
        let other = key(index);
        // The common prefix rarely shrinks: one slice comparison confirms it.
        if other.get(..common) == Some(&first[..common]) {
            continue;
        }
        common = first[..common]
            .iter()
            .zip(other)
            .position(|(a, b)| a != b)
            .unwrap_or(common.min(other.len()));
        if common == 0 {
            break;
        }
    }
    let prefix = |bytes: &[u8]| -> u64 {
        let rest = bytes.get(common..).unwrap_or_default();
        let mut word = [0u8; 8];
        let take = rest.len().min(8);
        word[..take].copy_from_slice(&rest[..take]);
        u64::from_be_bytes(word)
    };
    let mut keyed: Vec<(u64, u32)> = (0..view.len())
        .map(|index| (prefix(key(index)), index as u32))
        .collect();
    keyed.sort_unstable();
    let mut start = 0;
    while start < keyed.len() {
        let mut end = start + 1;
        while end < keyed.len() && keyed[end].0 == keyed[start].0 {
            end += 1;
        }
        if end - start > 1 {
            keyed[start..end]
                .sort_unstable_by(|a, b| view.cmp_at(a.1 as usize, &view, b.1 as usize));
        }
        start = end;
    }
    keyed
}

/// Consolidates `updates` in place, choosing the row or column path by type.
pub fn consolidate<U: Update>(updates: &mut Updates<U>) {
    if rows_are_plain::<U>() {
        let mut rows = updates.to_rows();
        consolidate_rows::<U>(&mut rows);
        updates.clear();
        for (k, v, t, r) in rows.iter() {
            updates.push(k, v, t, r);
        }
    } else {
        let mut output = Updates::default();
        consolidate_columns(updates, &mut Vec::new(), &mut Vec::new(), &mut output);
        *updates = output;
    }
}

/// Within each run of equal values (`.0`), sorts by time (`.1`), adds up the diffs of equal
/// times and drops zero sums; the runs keep their order. Any order of values is correct, and
/// grouping equal values makes the consolidation thorough. Used where histories were just
/// advanced by a meet, which makes many of a value's times equal.
pub fn consolidate_within_values<V: Eq, T: Ord, R: Semigroup>(updates: &mut Vec<(V, T, R)>) {
    // Often nothing collided: find the first update not strictly after its predecessor of the
    // same value. Everything before its run is consolidated already and stays where it is.
    let Some(first) = (1..updates.len()).find(|&index| {
        updates[index].0 == updates[index - 1].0 && updates[index].1 <= updates[index - 1].1
    }) else {
        return;
    };
    let mut start = first - 1;
    while start > 0 && updates[start - 1].0 == updates[start].0 {
        start -= 1;
    }
    let mut kept = start;
    while start < updates.len() {
        let mut end = start + 1;
        while end < updates.len() && updates[end].0 == updates[start].0 {
            end += 1;
        }
        let run = &mut updates[start..end];
        if !run.is_sorted_by(|a, b| a.1 <= b.1) {
            run.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        }
        let run_kept = kept;
        for index in start..end {
            let collides = kept > run_kept && updates[kept - 1].1 == updates[index].1;
            keep_or_add(updates, &mut kept, index, collides);
        }
        start = end;
    }
    updates.truncate(kept);
}

/// One step of consolidating `updates` in place, front to back: `updates[..*kept]` holds the
/// updates kept so far, and `updates[index]` (with `index >= *kept`) is the next one. When it
/// `collides` with the last kept update (same value and time), its diff is added there and a
/// zero sum is dropped; otherwise it joins the kept updates. The caller truncates to `kept`.
#[inline(always)]
pub fn keep_or_add<V, T, R: Semigroup>(
    updates: &mut [(V, T, R)],
    kept: &mut usize,
    index: usize,
    collides: bool,
) {
    debug_assert!(*kept <= index && (!collides || *kept > 0));
    if collides {
        let diff = updates[index].2.clone();
        updates[*kept - 1].2.plus_equals(&diff);
        if updates[*kept - 1].2.is_zero() {
            *kept -= 1;
        }
    } else {
        if *kept != index {
            updates.swap(*kept, index);
        }
        *kept += 1;
    }
}

/// Sorts `(item, diff)` pairs by item, adds the diffs of equal items and drops zero sums: the
/// normal form of one key's history (items are times) or accumulation (items are values).
pub fn consolidate_pairs<I: Ord, R: Semigroup>(pairs: &mut Vec<(I, R)>) {
    // Most calls get a few pairs already in normal form (a value's history after its times
    // were advanced, an accumulation): one comparison pass instead of a sort and a rewrite.
    if pairs.windows(2).all(|pair| pair[0].0 < pair[1].0)
        && pairs.iter().all(|(_, diff)| !diff.is_zero())
    {
        return;
    }
    // Equal items are summed, so their order does not matter; the stable sort is for its runs:
    // a merge's two histories of a value, interleaved or advanced, come as sorted runs, which
    // it merges where the unstable sort sorted afresh (see docs/perf-notes.md, section
    // "Reduce: sorting a key's times and corrections").
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept = 0;
    for index in 0..pairs.len() {
        if kept > 0 && pairs[kept - 1].0 == pairs[index].0 {
            let diff = pairs[index].1.clone();
            pairs[kept - 1].1.plus_equals(&diff);
        } else {
            pairs.swap(kept, index);
            kept += 1;
        }
    }
    pairs.truncate(kept);
    pairs.retain(|(_, diff)| !diff.is_zero());
}

/// Sorts `(item, time, diff)` triples by `(item, time)`, adds the diffs of equal pairs and drops
/// zero sums: the normal form of a key's `(value, time, diff)` history.
pub fn consolidate_triples<I: Ord, T: Ord, R: Semigroup>(triples: &mut Vec<(I, T, R)>) {
    // Equal pairs are summed, so their order does not matter.
    triples.sort_unstable_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    sum_sorted_triples(triples);
}

/// [`consolidate_triples`] for triples that are often in time order already (a reduce's
/// corrections, made by a sweep through a key's times): then a stable sort by item alone puts
/// them in `(item, time)` order, comparing less and merging the runs it finds, where sorting by
/// both sorted them afresh (`degrees` on big steps, whose every time changes a count, spent a
/// tenth of its instructions there). Other input takes [`consolidate_triples`].
pub fn consolidate_time_ordered_triples<I: Ord, T: Ord, R: Semigroup>(
    triples: &mut Vec<(I, T, R)>,
) {
    if triples.is_sorted_by(|a, b| a.1 <= b.1) {
        triples.sort_by(|a, b| a.0.cmp(&b.0));
        sum_sorted_triples(triples);
    } else {
        consolidate_triples(triples);
    }
}

/// [`consolidate_triples`] for owned triples, sorted by a radix sort on the item when it is a
/// primitive integer (see [`crate::radix`]): the `ripple` command's output, by time, each step.
pub fn consolidate_owned_triples<I, T, R>(triples: &mut Vec<(I, T, R)>)
where
    I: Ord + Clone + 'static,
    T: Ord + Clone,
    R: Semigroup,
{
    if !sort_by_integer_key(triples, |triple| &triple.0, |a, b| a.1.cmp(&b.1)) {
        triples.sort_unstable_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    }
    sum_sorted_triples(triples);
}

/// Adds up the diffs of neighbouring triples with equal items and times and drops zero sums.
fn sum_sorted_triples<I: Eq, T: Eq, R: Semigroup>(triples: &mut Vec<(I, T, R)>) {
    let mut kept = 0;
    for index in 0..triples.len() {
        if kept > 0
            && triples[kept - 1].0 == triples[index].0
            && triples[kept - 1].1 == triples[index].1
        {
            let diff = triples[index].2.clone();
            triples[kept - 1].2.plus_equals(&diff);
        } else {
            triples.swap(kept, index);
            kept += 1;
        }
    }
    triples.truncate(kept);
    triples.retain(|(_, _, diff)| !diff.is_zero());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn reference<K: Ord + Clone, V: Ord + Clone>(
        rows: &[(K, V, u64, i64)],
    ) -> Vec<(K, V, u64, i64)> {
        let mut map = BTreeMap::new();
        for (k, v, t, r) in rows {
            *map.entry((k.clone(), v.clone(), *t)).or_insert(0i64) += r;
        }
        map.into_iter()
            .filter(|(_, r)| *r != 0)
            .map(|((k, v, t), r)| (k, v, t, r))
            .collect()
    }

    /// Each maximal run of equal values, consolidated by time on its own, runs in order.
    fn within_values_reference(updates: &[(u8, u8, i64)]) -> Vec<(u8, u8, i64)> {
        let mut output = Vec::new();
        for run in updates.chunk_by(|a, b| a.0 == b.0) {
            let mut sums = BTreeMap::new();
            for (_, t, r) in run {
                *sums.entry(*t).or_insert(0i64) += r;
            }
            output.extend(
                sums.into_iter()
                    .filter(|(_, r)| *r != 0)
                    .map(|(t, r)| (run[0].0, t, r)),
            );
        }
        output
    }

    proptest! {
        /// Pairs consolidate to the sums of their items, sorted, none zero: from any order and
        /// from inputs that are sorted already (with or without repeated items or zero diffs,
        /// which the sorted fast path must not let through).
        #[test]
        fn pairs_match_reference(
            mut pairs in proptest::collection::vec((0u8..8, -2i64..3), 0..24),
            sort_first in any::<bool>(),
        ) {
            if sort_first {
                pairs.sort();
            }
            let mut sums = BTreeMap::new();
            for (item, diff) in &pairs {
                *sums.entry(*item).or_insert(0i64) += diff;
            }
            let expected: Vec<(u8, i64)> = sums.into_iter().filter(|(_, r)| *r != 0).collect();
            consolidate_pairs(&mut pairs);
            prop_assert_eq!(pairs, expected);
        }

        /// Consolidation within values, on inputs that are often consolidated already except
        /// for a few updates (the case its fast path skips ahead for).
        #[test]
        fn within_values_match_reference(
            mut updates in proptest::collection::vec((0u8..3, 0u8..6, prop_oneof![Just(1i64), Just(-1i64), Just(2i64)]), 0..40),
            sorted_prefix in 0usize..40,
        ) {
            // Make a prefix consolidated per value, so the first collision can come late.
            let prefix = sorted_prefix.min(updates.len());
            let mut head = updates[..prefix].to_vec();
            head.sort();
            head.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
            head.extend_from_slice(&updates[prefix..]);
            updates = head;
            let expected = within_values_reference(&updates);
            consolidate_within_values(&mut updates);
            prop_assert_eq!(updates, expected);
        }

        #[test]
        fn rows_match_reference(rows in proptest::collection::vec((0u64..6, 0u64..3, 0u64..4, -2i64..3), 0..200)) {
            type U = (u64, u64, u64, i64);
            assert!(rows_are_plain::<U>());
            let mut consolidated = rows.clone();
            consolidate_rows::<U>(&mut consolidated);
            prop_assert_eq!(consolidated, reference(&rows));
        }

        /// Keys spread over three bytes (radix passes that are not skipped) and negative keys,
        /// both directions, and tuple keys, which take the comparison sort.
        #[test]
        fn rows_of_every_key_kind_match_reference(
            rows in proptest::collection::vec((0u32..70_000, 0u64..3, 0u64..4, -2i64..3), 0..300),
            signed in proptest::collection::vec((-40i64..40, 0u64..3, 0u64..4, -2i64..3), 0..300),
        ) {
            type U = (u32, u64, u64, i64);
            let mut ascending = rows.clone();
            consolidate_rows::<U>(&mut ascending);
            prop_assert_eq!(&ascending, &reference(&rows));
            let mut descending = rows.clone();
            consolidate_rows_descending::<U>(&mut descending);
            descending.reverse();
            prop_assert_eq!(&descending, &ascending);

            type S = (i64, u64, u64, i64);
            let mut consolidated = signed.clone();
            consolidate_rows::<S>(&mut consolidated);
            prop_assert_eq!(consolidated, reference(&signed));

            type P = ((u32, u32), u64, u64, i64);
            let pairs: Vec<((u32, u32), u64, u64, i64)> =
                rows.iter().map(|(k, v, t, r)| ((k % 7, k % 5), *v, *t, *r)).collect();
            let mut consolidated = pairs.clone();
            consolidate_rows::<P>(&mut consolidated);
            prop_assert_eq!(consolidated, reference(&pairs));
        }

        /// Also on input already sorted, with or without equal neighbours (the pass that finds
        /// sorted input also decides whether any neighbours need adding up).
        #[test]
        fn columns_match_reference(
            mut rows in proptest::collection::vec(("[a-c]{0,3}", 0u64..3, 0u64..4, -2i64..3), 0..200),
            presorted in any::<bool>(),
            distinct in any::<bool>(),
        ) {
            type U = (String, u64, u64, i64);
            assert!(!rows_are_plain::<U>());
            if presorted {
                rows.sort();
                if distinct {
                    rows.dedup_by(|a, b| (&a.0, a.1, a.2) == (&b.0, b.1, b.2));
                }
            }
            let mut updates = Updates::<U>::from_rows(rows.iter());
            consolidate(&mut updates);
            updates.view().check_sorted_consolidated();
            prop_assert_eq!(updates.to_rows(), reference(&rows));
        }

        /// String keys sharing long prefixes, of lengths around the 8 bytes the sort keys on
        /// past the common prefix, with multi-byte characters and keys that are prefixes of
        /// others: the prefix sort must agree with the byte order.
        #[test]
        fn long_shared_string_prefixes_match_reference(
            common in prop_oneof![Just(""), Just("shared/path/"), Just("0000000000000000")],
            rows in proptest::collection::vec(
                ("[ab\u{e9}]{0,12}", 0u64..3, 0u64..2, -2i64..3),
                0..200,
            )
        ) {
            type U = (String, u64, u64, i64);
            let rows: Vec<(String, u64, u64, i64)> = rows
                .into_iter()
                .map(|(tail, v, t, r)| (format!("{common}{tail}"), v, t, r))
                .collect();
            let mut updates = Updates::<U>::from_rows(rows.iter());
            consolidate(&mut updates);
            updates.view().check_sorted_consolidated();
            prop_assert_eq!(updates.to_rows(), reference(&rows));
        }

        #[test]
        fn both_paths_agree(rows in proptest::collection::vec((0u64..6, 0u64..3, 0u64..4, -2i64..3), 0..200)) {
            type U = (u64, u64, u64, i64);
            let updates = Updates::<U>::from_rows(rows.iter());
            let mut by_columns = Updates::default();
            consolidate_columns(&updates, &mut Vec::new(), &mut Vec::new(), &mut by_columns);
            let mut by_rows = rows.clone();
            consolidate_rows::<U>(&mut by_rows);
            prop_assert_eq!(by_columns.to_rows(), by_rows);
        }
    }

    proptest! {
        /// In time order or not, the result is [`consolidate_triples`]'s.
        #[test]
        fn time_ordered_triples_match_the_plain_path(
            mut triples in proptest::collection::vec((0u8..6, 0u64..30, -2i64..3), 0..200),
            time_ordered: bool,
        ) {
            if time_ordered {
                triples.sort_by_key(|triple| triple.1);
            }
            let mut adaptive = triples.clone();
            consolidate_time_ordered_triples(&mut adaptive);
            let mut plain = triples;
            consolidate_triples(&mut plain);
            prop_assert_eq!(adaptive, plain);
        }

        #[test]
        fn owned_triples_match_borrowed_path(triples in proptest::collection::vec((0u64..100, 0u8..4, -2i64..3), 0..200)) {
            let mut owned = triples.clone();
            consolidate_owned_triples(&mut owned);
            let mut plain = triples;
            consolidate_triples(&mut plain);
            prop_assert_eq!(owned, plain);
        }
    }

    #[test]
    fn all_cancelling_input_is_empty() {
        type U = (u64, (), u64, i64);
        let mut rows: Vec<Row<U>> =
            vec![(1, (), 0, 1), (1, (), 0, -1), (2, (), 3, 5), (2, (), 3, -5)];
        consolidate_rows::<U>(&mut rows);
        assert!(rows.is_empty());
    }
}

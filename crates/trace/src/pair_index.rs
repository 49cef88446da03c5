//! Which `(time, diff)` pair of a batch's dictionary each update uses (see `crate::history`):
//! as stored in a batch, and as a builder grows it.
//!
//! While a builder's dictionary holds one pair, its index is only a count; the second pair
//! writes it out in 16 bits (dictionaries never grow past that), narrowed to bytes at the
//! build where 256 pairs or fewer allow it. A big batch of one repeated pair, such as a load
//! at one time, then never holds an index, and others hold two bytes per update while they are
//! built instead of four. At the load of a big graph the four-byte index was a tenth of the
//! process's peak heap (see docs/perf-notes.md, section "Histories: the index while
//! building").

/// Which pair each update of a batch uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PairIndex {
    /// Update `i` uses pair `i`.
    Plain,
    /// Every update uses pair 0.
    Single,
    Narrow8(Vec<u8>),
    Narrow16(Vec<u16>),
}

/// A builder's index, growing one entry per update pushed: only counted while every entry is
/// pair 0, then written out in 16 bits.
#[derive(Debug)]
pub(crate) struct IndexBuilder {
    /// Whether every entry so far is pair 0, so only their number is kept.
    counting: bool,
    /// Entries pushed while counting.
    count: usize,
    /// The entries, once written out.
    wide: Vec<u16>,
    /// Entries expected at most (0: no idea): the room taken at once when the entries are
    /// written out, rather than grown by doubling, whose copies were a few percent of a merge.
    expected: usize,
}

impl Default for IndexBuilder {
    /// An empty index, as [`IndexBuilder::restart`] leaves it with no expectation.
    fn default() -> Self {
        Self {
            counting: true,
            count: 0,
            wide: Vec::new(),
            expected: 0,
        }
    }
}

impl IndexBuilder {
    /// Empties the index for a batch of at most about `expected` updates (0: no idea); the
    /// entries' buffer keeps its allocation.
    pub(crate) fn restart(&mut self, expected: usize) {
        self.counting = true;
        self.count = 0;
        self.wide.clear();
        self.expected = expected;
    }

    /// The number of entries pushed.
    pub(crate) fn len(&self) -> usize {
        if self.counting {
            self.count
        } else {
            self.wide.len()
        }
    }

    /// Appends the entry `pair`, which must fit in 16 bits (dictionaries are abandoned
    /// before, see `crate::history`).
    #[inline(always)]
    pub(crate) fn push(&mut self, pair: u32) {
        debug_assert!(pair <= u32::from(u16::MAX), "pair {pair} past 16 bits");
        // One test on the path of written-out entries, the one merges mostly take: a narrower
        // width chosen as entries come cost more instructions than the copy at `finish`.
        if !self.counting {
            self.wide.push(pair as u16);
        } else if pair == 0 {
            self.count += 1;
        } else {
            self.write_out(pair);
        }
    }

    /// Writes out the entries counted so far, then appends `pair`.
    #[cold]
    fn write_out(&mut self, pair: u32) {
        self.wide.reserve(self.expected.max(self.count + 1));
        self.wide.resize(self.count, 0);
        self.counting = false;
        self.push(pair);
    }

    /// Calls `visit` with each entry in order.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(usize)) {
        if self.counting {
            (0..self.count).for_each(|_| visit(0));
        } else {
            self.wide.iter().for_each(|&pair| visit(usize::from(pair)));
        }
    }

    /// The finished index of a dictionary of `pairs` pairs, as narrow as they allow and with
    /// an exact allocation, and the builder emptied.
    pub(crate) fn finish(&mut self, pairs: usize) -> PairIndex {
        let index = if self.counting {
            assert!(pairs <= 1, "{pairs} pairs with every entry 0");
            PairIndex::Single
        } else if pairs <= 1 << 8 {
            PairIndex::Narrow8(self.wide.iter().map(|&pair| pair as u8).collect())
        } else {
            // Shrinking gives back the slack in place; the builder allocates anew, which
            // only big batches (more than 256 pairs) make it do.
            let mut wide = std::mem::take(&mut self.wide);
            wide.shrink_to_fit();
            PairIndex::Narrow16(wide)
        };
        self.restart(0);
        index
    }
}

#[cfg(test)]
mod tests {
    use super::{IndexBuilder, PairIndex};
    use proptest::prelude::*;

    /// Pushes `entries` into `index` (restarted for `expected`), checks they read back, and
    /// finishes it for a dictionary of as many pairs as the largest entry needs.
    fn build(index: &mut IndexBuilder, entries: &[u32], expected: usize) -> PairIndex {
        index.restart(expected);
        for &entry in entries {
            index.push(entry);
        }
        assert_eq!(index.len(), entries.len());
        let mut read = Vec::new();
        index.for_each(|pair| read.push(pair as u32));
        assert_eq!(read, entries);
        let pairs = entries.iter().copied().max().unwrap_or(0) as usize + 1;
        let finished = index.finish(pairs);
        assert_eq!(index.len(), 0);
        finished
    }

    /// The entries of `index`, whatever its width.
    fn entries_of(index: &PairIndex, len: usize) -> Vec<u32> {
        match index {
            PairIndex::Plain => (0..len as u32).collect(),
            PairIndex::Single => vec![0; len],
            PairIndex::Narrow8(bytes) => bytes.iter().map(|&b| u32::from(b)).collect(),
            PairIndex::Narrow16(wide) => wide.iter().map(|&w| u32::from(w)).collect(),
        }
    }

    proptest! {
        /// The entries read back as pushed, written out or not, in a builder reused from batch
        /// to batch, and each finished index is the narrowest its largest entry allows.
        #[test]
        fn entries_read_back(
            batches in proptest::collection::vec((
                proptest::collection::vec(
                    prop_oneof![Just(0u32), 0u32..4, 250u32..260, 0u32..70_000], 0..600),
                0usize..700,
            ), 1..4),
        ) {
            let mut index = IndexBuilder::default();
            for (entries, expected) in batches {
                let entries: Vec<u32> =
                    entries.into_iter().map(|e| e.min(u32::from(u16::MAX))).collect();
                let finished = build(&mut index, &entries, expected);
                prop_assert_eq!(entries_of(&finished, entries.len()), entries.clone());
                let largest = entries.iter().copied().max().unwrap_or(0);
                match finished {
                    PairIndex::Single => prop_assert_eq!(largest, 0),
                    PairIndex::Narrow8(_) => prop_assert!(largest > 0 && largest <= 255),
                    PairIndex::Narrow16(_) => prop_assert!(largest > 255),
                    PairIndex::Plain => prop_assert!(false, "a builder's index is never plain"),
                }
            }
        }
    }

    #[test]
    fn widths_change_at_one_and_256_pairs() {
        let mut index = IndexBuilder::default();
        assert_eq!(index.finish(1), PairIndex::Single, "a new builder counts");
        let upto = |largest: u32| (0..=largest).chain(0..=largest).collect::<Vec<_>>();
        assert!(matches!(build(&mut index, &upto(0), 0), PairIndex::Single));
        assert!(matches!(
            build(&mut index, &upto(1), 0),
            PairIndex::Narrow8(_)
        ));
        assert!(matches!(
            build(&mut index, &upto(255), 0),
            PairIndex::Narrow8(_)
        ));
        assert!(matches!(
            build(&mut index, &upto(256), 0),
            PairIndex::Narrow16(_)
        ));
    }

    /// A big batch of one repeated pair never writes its entries out, however many it expects;
    /// a narrowed or widened index holds exactly its entries.
    #[test]
    fn one_pair_allocates_nothing() {
        let mut index = IndexBuilder::default();
        index.restart(1 << 20);
        (0..1 << 20).for_each(|_| index.push(0));
        assert_eq!((index.len(), index.wide.capacity()), (1 << 20, 0));
        assert_eq!(index.finish(1), PairIndex::Single);
        let entries: Vec<u32> = (0..3000).map(|i| i % 300).collect();
        match build(&mut index, &entries, 1 << 20) {
            PairIndex::Narrow16(wide) => assert_eq!(wide.capacity(), wide.len()),
            other => panic!("300 pairs need 16 bits, not {other:?}"),
        }
        let entries: Vec<u32> = (0..3000).map(|i| i % 7).collect();
        match build(&mut index, &entries, 1 << 20) {
            PairIndex::Narrow8(bytes) => assert_eq!(bytes.capacity(), bytes.len()),
            other => panic!("7 pairs fit in bytes, not {other:?}"),
        }
    }
}

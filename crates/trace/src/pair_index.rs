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
#[derive(Debug, Default)]
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

    proptest! {
        /// The entries read back as pushed, written out or not, and the finished index is the
        /// narrowest the largest entry allows.
        #[test]
        fn entries_read_back(
            entries in proptest::collection::vec(
                prop_oneof![Just(0u32), 0u32..4, 0u32..300, 0u32..70_000], 0..600),
            expected in 0usize..700,
        ) {
            let entries: Vec<u32> = entries.into_iter().map(|e| e.min(u32::from(u16::MAX))).collect();
            let mut index = IndexBuilder::default();
            index.restart(expected);
            for &entry in &entries {
                index.push(entry);
            }
            prop_assert_eq!(index.len(), entries.len());
            let mut read = Vec::new();
            index.for_each(|pair| read.push(pair as u32));
            prop_assert_eq!(&read, &entries);
            let largest = entries.iter().copied().max().unwrap_or(0);
            let pairs = largest as usize + 1;
            match index.finish(pairs) {
                PairIndex::Single => prop_assert_eq!(largest, 0),
                PairIndex::Narrow8(bytes) => {
                    prop_assert!(largest > 0 && largest <= 255);
                    prop_assert_eq!(bytes.iter().map(|&b| u32::from(b)).collect::<Vec<_>>(), entries);
                }
                PairIndex::Narrow16(wide) => {
                    prop_assert!(largest > 255);
                    prop_assert_eq!(wide.iter().map(|&w| u32::from(w)).collect::<Vec<_>>(), entries);
                }
                PairIndex::Plain => prop_assert!(false, "a builder's index is never plain"),
            }
            prop_assert_eq!(index.len(), 0);
        }
    }
}

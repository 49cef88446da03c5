//! Offsets from one level of a batch's trie into the next, stored as compactly as they allow.
//!
//! A batch records, for each key, where its values end, and for each value, where its updates
//! end. Three encodings, chosen as entries arrive:
//! - *uniform*: every entry has the same length (one value per key, one update per value: the
//!   common shapes after compaction). Nothing is stored per entry.
//! - *narrow*: offsets as `u32`.
//! - *wide*: offsets as `u64`, once an offset exceeds `u32::MAX`.

/// The ends of a sequence of contiguous ranges `[end(i-1), end(i))`, starting at 0.
#[derive(Clone, Debug, Default)]
pub struct OffsetList {
    /// How many ranges.
    len: usize,
    /// While every range has had the same length, that length (and nothing is stored).
    uniform: Option<u64>,
    /// Ends as `u32`, once ranges stopped being uniform.
    narrow: Vec<u32>,
    /// Ends that do not fit in `u32`, after all of `narrow`.
    wide: Vec<u64>,
}

/// An [`OffsetList`], borrowed: what cursors read, wherever the list's vectors live.
#[derive(Clone, Copy, Debug)]
pub struct OffsetsView<'a> {
    len: usize,
    uniform: Option<u64>,
    narrow: &'a [u32],
    wide: &'a [u64],
}

impl<'a> OffsetsView<'a> {
    /// The view as three columns, for a block's bytes: `[len, 1 if uniform, stride]`, then the
    /// narrow and the wide ends.
    pub(crate) fn parts(&self) -> ([u64; 3], &'a [u32], &'a [u64]) {
        let meta = [
            self.len as u64,
            self.uniform.is_some() as u64,
            self.uniform.unwrap_or(0),
        ];
        (meta, self.narrow, self.wide)
    }

    /// The view [`Self::parts`] made, checked: a described length that the stored ends do
    /// not match, or ends that decrease, is an error rather than a later panic. `count` is the
    /// length the next level's column has, which the last end must equal. Without `scan`, the
    /// ends are not read one by one (parts checked with a scan before, entered again).
    pub(crate) fn from_parts(
        meta: &[u64],
        narrow: &'a [u32],
        wide: &'a [u64],
        count: usize,
        scan: bool,
    ) -> Result<Self, String> {
        let [len, uniform, stride] = meta else {
            return Err(format!("offsets: {} header words, expected 3", meta.len()));
        };
        let len = usize::try_from(*len).map_err(|_| format!("offsets: length {len}"))?;
        let view = match uniform {
            0 if narrow.len() + wide.len() == len => Self {
                len,
                uniform: None,
                narrow,
                wide,
            },
            1 if narrow.is_empty() && wide.is_empty() => Self {
                len,
                uniform: Some(*stride),
                narrow,
                wide,
            },
            _ => {
                return Err(format!(
                    "offsets: {len} ranges do not match the stored ends"
                ))
            }
        };
        let ends_increase = !scan
            || narrow.windows(2).all(|w| w[0] <= w[1])
                && wide.windows(2).all(|w| w[0] <= w[1])
                && match (narrow.last(), wide.first()) {
                    (Some(&narrow), Some(&wide)) => u64::from(narrow) <= wide,
                    _ => true,
                };
        let last = match view.uniform {
            Some(stride) => stride.checked_mul(len as u64),
            None => Some(view.last_end() as u64),
        };
        if !ends_increase || last != Some(count as u64) {
            return Err(format!(
                "offsets: ends decrease or end at {last:?}, not at the {count} items they index"
            ));
        }
        Ok(view)
    }
}

impl OffsetsView<'_> {
    /// The number of ranges.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no ranges.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The end of range `index` (exclusive).
    #[inline(always)]
    pub fn end(&self, index: usize) -> usize {
        debug_assert!(index < self.len, "offset {index} of {}", self.len);
        if let Some(stride) = self.uniform {
            return ((index as u64 + 1) * stride) as usize;
        }
        if index < self.narrow.len() {
            self.narrow[index] as usize
        } else {
            self.wide[index - self.narrow.len()] as usize
        }
    }

    /// The start of range `index`.
    #[inline(always)]
    pub fn start(&self, index: usize) -> usize {
        if index == 0 {
            0
        } else {
            self.end(index - 1)
        }
    }

    /// The last end, or 0.
    #[inline(always)]
    pub fn last_end(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            self.end(self.len - 1)
        }
    }

    /// Prefetches what [`Self::start`] of range `index` will read (nothing when uniform).
    #[inline]
    pub(crate) fn prefetch_start(&self, index: usize) {
        if self.uniform.is_some() || index == 0 || index > self.len {
            return;
        }
        let entry = index - 1;
        if entry < self.narrow.len() {
            crate::columns::prefetch_item::<u32>(self.narrow, entry, self.narrow.len());
        } else {
            let entry = entry - self.narrow.len();
            crate::columns::prefetch_item::<u64>(self.wide, entry, self.wide.len());
        }
    }
}

impl OffsetList {
    /// The list, borrowed.
    #[inline(always)]
    pub fn view(&self) -> OffsetsView<'_> {
        OffsetsView {
            len: self.len,
            uniform: self.uniform,
            narrow: &self.narrow,
            wide: &self.wide,
        }
    }

    /// The number of ranges.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no ranges.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The end of range `index` (exclusive).
    #[inline(always)]
    pub fn end(&self, index: usize) -> usize {
        self.view().end(index)
    }

    /// The start of range `index`.
    #[inline(always)]
    pub fn start(&self, index: usize) -> usize {
        self.view().start(index)
    }

    /// The last end, or 0.
    #[inline(always)]
    pub fn last_end(&self) -> usize {
        self.view().last_end()
    }

    /// Appends a range ending at `end`, which must be `>=` the last end.
    #[inline]
    pub fn push(&mut self, end: usize) {
        let last = self.last_end();
        debug_assert!(end >= last, "offsets must not decrease: {last} then {end}");
        let length = (end - last) as u64;
        match self.uniform {
            Some(stride) if stride == length => {}
            None if self.len == 0 => self.uniform = Some(length),
            Some(stride) => {
                // The first range of a different length: store everything so far explicitly.
                self.uniform = None;
                for index in 0..self.len {
                    self.store((index as u64 + 1) * stride);
                }
                self.store(end as u64);
            }
            None => self.store(end as u64),
        }
        self.len += 1;
    }

    fn store(&mut self, end: u64) {
        match u32::try_from(end) {
            Ok(narrow) if self.wide.is_empty() => self.narrow.push(narrow),
            _ => self.wide.push(end),
        }
    }

    /// Releases spare capacity.
    pub fn shrink_to_fit(&mut self) {
        self.narrow.shrink_to_fit();
        self.wide.shrink_to_fit();
    }

    /// The same list without spare capacity, shrinking its vectors in place (for big ones the
    /// allocator remaps the pages rather than copying them).
    pub fn shrunk(mut self) -> Self {
        self.shrink_to_fit();
        self
    }

    /// A copy holding exactly the entries, no spare capacity.
    pub fn exact_copy(&self) -> Self {
        // `Vec::clone` allocates exactly the length.
        self.clone()
    }

    /// Removes every range, keeping the allocations.
    pub fn clear(&mut self) {
        self.len = 0;
        self.uniform = None;
        self.narrow.clear();
        self.wide.clear();
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.narrow.capacity() * 4 + self.wide.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ends_round_trip(lengths in proptest::collection::vec(prop_oneof![Just(1usize), 0usize..5, Just(u32::MAX as usize)], 0..40)) {
            let mut list = OffsetList::default();
            let mut ends = Vec::new();
            let mut end = 0;
            for length in lengths {
                end += length;
                list.push(end);
                ends.push(end);
            }
            prop_assert_eq!(list.len(), ends.len());
            for (index, &expected) in ends.iter().enumerate() {
                prop_assert_eq!(list.end(index), expected);
                prop_assert_eq!(list.start(index), if index == 0 { 0 } else { ends[index - 1] });
            }
        }
    }

    #[test]
    fn uniform_stores_nothing() {
        let mut list = OffsetList::default();
        for end in 1..=1000 {
            list.push(end);
        }
        assert_eq!(list.heap_bytes(), 0);
        assert_eq!(list.end(999), 1000);
    }
}

//! A fast path for columns of strings (the `columnar` container of `String` and `Box<str>`).
//!
//! Merging string keys through the generic column interface costs two library calls per
//! update: `memcmp` to compare and `memcpy` to copy. For keys of a few dozen bytes both calls
//! branch on the length class of their argument (up to 16, 32, 64 bytes...), and when key lengths
//! straddle a class boundary those branches mispredict about every other update. Callgrind on a
//! merge of 24 to 40 byte keys counted one mispredicted branch per update in the two calls, a
//! third of the merge's time.
//!
//! [`StringColumn`] reads a borrowed `Strings` column directly (its bounds and bytes) and does
//! both operations inline, without branching on the length:
//! - [`StringColumn::cmp_at`] compares eight bytes at a time as big-endian words, which orders
//!   exactly as the byte-wise comparison of the slices does;
//! - [`StringColumn::push_to`] copies a fixed 64-byte window starting at the string and then
//!   cuts the destination back to the string's length, when both the source and the
//!   destination's spare capacity have 64 bytes there; otherwise it copies exactly.
//!
//! The column is recognised by the `TypeId` of its container, and borrowed through its byte
//! slices (`AsBytes` / `FromBytes`), so no `unsafe` is involved.

use columnar::{AsBytes, BorrowedOf, Columnar, ContainerOf, FromBytes, Strings};
use std::any::{Any, TypeId};
use std::cmp::Ordering;

/// The width of the window [`StringColumn::push_to`] copies at once.
const WINDOW: usize = 64;

/// A borrowed column of strings: each string's end offset, and the bytes of all of them.
#[derive(Clone, Copy)]
pub struct StringColumn<'a> {
    bounds: &'a [u64],
    bytes: &'a [u8],
}

impl<'a> StringColumn<'a> {
    /// The column, if `T`'s container is `Strings` (for `String` and `Box<str>`).
    #[inline]
    pub fn of<T: Columnar>(column: BorrowedOf<'a, T>) -> Option<Self> {
        if TypeId::of::<ContainerOf<T>>() != TypeId::of::<Strings>() {
            return None;
        }
        let mut slices = column.as_bytes().map(|(_align, bytes)| bytes);
        let strings = <Strings<&'a [u64], &'a [u8]> as FromBytes<'a>>::from_bytes(&mut slices);
        Some(Self {
            bounds: strings.bounds,
            bytes: strings.values,
        })
    }

    /// The byte range of string `index`.
    #[inline(always)]
    fn range(&self, index: usize) -> (usize, usize) {
        let lower = if index == 0 {
            0
        } else {
            self.bounds[index - 1] as usize
        };
        (lower, self.bounds[index] as usize)
    }

    /// String `index`, as bytes.
    #[inline(always)]
    pub fn get(&self, index: usize) -> &'a [u8] {
        let (lower, upper) = self.range(index);
        &self.bytes[lower..upper]
    }

    /// The eight bytes at `at`, as a big-endian word, if the column has them.
    #[inline(always)]
    fn word_at(&self, at: usize) -> Option<u64> {
        Some(word(self.bytes.get(at..at + 8)?))
    }

    /// Compares string `index` with string `other_index` of `other`, as `&[u8]` compares.
    #[inline(always)]
    pub fn cmp_at(&self, index: usize, other: &Self, other_index: usize) -> Ordering {
        let (lower, upper) = self.range(index);
        let (other_lower, other_upper) = other.range(other_index);
        let (string, other_string) = (
            &self.bytes[lower..upper],
            &other.bytes[other_lower..other_upper],
        );
        // Whole words of the common prefix. Big-endian words order as their bytes do.
        let words = string.chunks_exact(8).zip(other_string.chunks_exact(8));
        for (bytes, other_bytes) in words {
            let (word, other_word) = (word(bytes), word(other_bytes));
            if word != other_word {
                return word.cmp(&other_word);
            }
        }
        let common = string.len().min(other_string.len());
        let offset = common & !7;
        let rest = common - offset;
        if rest > 0 {
            // The last 1 to 7 common bytes: read a whole word where both columns have one
            // (bytes past a string belong to the strings after it) and drop the bytes past
            // `rest`.
            match (
                self.word_at(lower + offset),
                other.word_at(other_lower + offset),
            ) {
                (Some(word), Some(other_word)) => {
                    let shift = 8 * (8 - rest) as u32;
                    let (word, other_word) = (word >> shift, other_word >> shift);
                    if word != other_word {
                        return word.cmp(&other_word);
                    }
                }
                _ => {
                    let ordering = string[offset..common].cmp(&other_string[offset..common]);
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
            }
        }
        string.len().cmp(&other_string.len())
    }

    /// Appends string `index` to `target`.
    #[inline(always)]
    pub fn push_to(&self, index: usize, target: &mut Strings) {
        let (lower, upper) = self.range(index);
        let values = &mut target.values;
        let start = values.len();
        match self.bytes.get(lower..lower + WINDOW) {
            // A constant-length copy compiles to a few vector moves, with no branch on the
            // length; the bytes past the string are cut off again at once.
            Some(window) if upper - lower <= WINDOW && values.capacity() - start >= WINDOW => {
                values.extend_from_slice(window);
                values.truncate(start + (upper - lower));
            }
            _ => values.extend_from_slice(&self.bytes[lower..upper]),
        }
        target.bounds.push(values.len() as u64);
    }
}

/// Eight bytes as a big-endian word.
#[inline(always)]
fn word(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes.try_into().expect("eight bytes"))
}

/// The column as `Strings`, if it is one.
#[inline(always)]
pub fn strings_mut<C: Any>(column: &mut C) -> Option<&mut Strings> {
    (column as &mut dyn Any).downcast_mut::<Strings>()
}

#[cfg(test)]
mod tests {
    use super::{strings_mut, StringColumn};
    use columnar::{Borrow, ContainerOf, Index, Len, Push};
    use proptest::prelude::*;

    /// Strings with long shared prefixes, zero and high bytes, and lengths around the word and
    /// window sizes.
    fn strings() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                "[ab]{0,20}",
                "0{0,30}[0-9]{0,12}",
                "[a\u{0}\u{7f}é]{0,9}",
                "x{60,70}[ab]{0,3}",
            ],
            1..40,
        )
    }

    proptest! {
        /// Comparisons agree with `&[u8]`'s, also for the last strings of a column, where no
        /// whole word follows them.
        #[test]
        fn cmp_at_orders_as_bytes(left in strings(), right in strings()) {
            let left_column: ContainerOf<String> = left.iter().fold(
                Default::default(),
                |mut column: ContainerOf<String>, string| { column.push(string); column },
            );
            let right_column: ContainerOf<String> = right.iter().fold(
                Default::default(),
                |mut column: ContainerOf<String>, string| { column.push(string); column },
            );
            let a = StringColumn::of::<String>(left_column.borrow()).expect("a string column");
            let b = StringColumn::of::<String>(right_column.borrow()).expect("a string column");
            for (i, x) in left.iter().enumerate() {
                for (j, y) in right.iter().enumerate() {
                    prop_assert_eq!(a.cmp_at(i, &b, j), x.as_bytes().cmp(y.as_bytes()), "{:?} vs {:?}", x, y);
                }
                prop_assert_eq!(a.get(i), x.as_bytes());
            }
        }

        /// Pushing copies exactly the string, whatever the room left in the target.
        #[test]
        fn push_to_copies_exactly(source in strings(), picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..60), room in 0usize..200) {
            let column: ContainerOf<String> = source.iter().fold(
                Default::default(),
                |mut column: ContainerOf<String>, string| { column.push(string); column },
            );
            let view = StringColumn::of::<String>(column.borrow()).expect("a string column");
            let mut target: ContainerOf<String> = Default::default();
            target.values.reserve_exact(room);
            let mut expected = Vec::new();
            for pick in &picks {
                let index = pick.index(source.len());
                view.push_to(index, strings_mut(&mut target).expect("a string column"));
                expected.push(source[index].clone());
            }
            prop_assert_eq!(target.len(), expected.len());
            for (index, string) in expected.iter().enumerate() {
                prop_assert_eq!(target.borrow().get(index), string.as_bytes());
            }
        }
    }

    /// Other columns are not taken for strings.
    #[test]
    fn only_strings_are_string_columns() {
        let numbers: ContainerOf<u64> = Default::default();
        assert!(StringColumn::of::<u64>(numbers.borrow()).is_none());
        let bytes: ContainerOf<Vec<u8>> = Default::default();
        assert!(StringColumn::of::<Vec<u8>>(bytes.borrow()).is_none());
        let mut tuples: ContainerOf<(String, u64)> = Default::default();
        assert!(strings_mut(&mut tuples).is_none());
    }
}

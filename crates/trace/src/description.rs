//! What a batch covers: the interval of times `[lower, upper)` and its compaction frontier.

use ripple_updates::{Antichain, PartialOrder, Time};

/// The times a batch speaks for.
///
/// A batch with description `{lower, upper, since}` holds every update whose original time `t`
/// satisfied `lower <= t` and not `upper <= t`, with times advanced by `since` (so only
/// accumulations at times `>= since` are meaningful). Batches of a trace have contiguous
/// descriptions: each one's `lower` is the previous one's `upper`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description<T: Time> {
    /// Every original time in the batch is `>=` some element of `lower`.
    pub lower: Antichain<T>,
    /// No original time in the batch is `>=` any element of `upper`.
    pub upper: Antichain<T>,
    /// Times have been advanced by this frontier (logical compaction).
    pub since: Antichain<T>,
}

impl<T: Time> Description<T> {
    /// A description of `[lower, upper)` with times not (yet) advanced: `since == lower`.
    pub fn new(lower: Antichain<T>, upper: Antichain<T>) -> Self {
        let since = lower.clone();
        Self::with_since(lower, upper, since)
    }

    /// A description with an explicit `since`.
    pub fn with_since(lower: Antichain<T>, upper: Antichain<T>, since: Antichain<T>) -> Self {
        assert!(
            PartialOrder::less_equal(&lower, &upper),
            "batch description with lower {lower:?} not <= upper {upper:?}"
        );
        Self {
            lower,
            upper,
            since,
        }
    }

    /// True when the interval is empty of time: `lower == upper`.
    pub fn is_point(&self) -> bool {
        self.lower == self.upper
    }
}

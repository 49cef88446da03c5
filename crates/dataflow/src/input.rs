//! Feeding changes into a dataflow.

use crate::collection::{Collection, Output};
use crate::container::{UpdateContainer, SEND_UPDATES};
use ripple_updates::{Data, Semigroup, Time};
use std::fmt;
use timely::dataflow::operators::Input;
use timely::dataflow::{InputHandle, Scope};
use timely::order::TotalOrder;

/// Misuse of an [`InputSession`]: the session's time only moves forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputError {
    /// An update was given a time before the session's current time.
    TimeBeforeCurrent {
        /// The update's time.
        time: String,
        /// The session's current time.
        current: String,
    },
    /// `advance_to` was asked to move the session's time backwards.
    AdvanceBackwards {
        /// The session's current time.
        current: String,
        /// The requested time.
        requested: String,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::TimeBeforeCurrent { time, current } => write!(
                f,
                "update at time {time} is before the input's current time {current}; \
                 updates must be at or after the time last passed to advance_to"
            ),
            InputError::AdvanceBackwards { current, requested } => write!(
                f,
                "cannot advance the input from time {current} back to {requested}; \
                 input time only moves forward"
            ),
        }
    }
}

impl std::error::Error for InputError {}

/// A source of changes for one collection.
///
/// Updates may carry any time at or after the session's current time, so one step of the
/// computation can hold changes at many times (high resolution, large batches). `advance_to`
/// promises that no later update will be earlier than the new time; the computation can then
/// complete every earlier time.
///
/// ```
/// use ripple_dataflow::{Captured, InputSession};
/// let captured = Captured::new();
/// let sink = captured.clone();
/// timely::execute_directly(move |worker| {
///     let mut input = InputSession::<u64, String>::new();
///     worker.dataflow(|scope| input.to_collection(scope).capture_into(&sink));
///     input.insert("hello".to_string());
///     input.update_at("later".to_string(), 5, 2).unwrap();
///     input.advance_to(3).unwrap();
///     assert!(input.update_at("too early".to_string(), 2, 1).is_err());
///     input.remove("hello".to_string());
///     input.close();
/// });
/// assert_eq!(
///     captured.consolidated(),
///     vec![("hello".to_string(), 0, 1), ("hello".to_string(), 3, -1), ("later".to_string(), 5, 2)]
/// );
/// ```
pub struct InputSession<T: Time + TotalOrder, D: Data, R: Semigroup = i64> {
    handle: InputHandle<T, Output<D, T, R>>,
    buffer: UpdateContainer<D, T, R>,
}

impl<T: Time + TotalOrder, D: Data, R: Semigroup> Default for InputSession<T, D, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Time + TotalOrder, D: Data, R: Semigroup> InputSession<T, D, R> {
    /// A session at the minimal time, not yet connected to a dataflow.
    pub fn new() -> Self {
        Self {
            handle: InputHandle::new(),
            buffer: UpdateContainer::default(),
        }
    }

    /// The collection of this session's changes, in `scope`.
    pub fn to_collection<'scope>(
        &mut self,
        scope: Scope<'scope, T>,
    ) -> Collection<'scope, T, D, R> {
        Collection::new(scope.input_from(&mut self.handle))
    }

    /// The current time: updates may not be earlier.
    pub fn time(&self) -> &T {
        self.handle.time()
    }

    /// Adds one copy of `data` at the current time.
    pub fn insert(&mut self, data: D)
    where
        R: From<i8>,
    {
        self.update(data, R::from(1));
    }

    /// Removes one copy of `data` at the current time.
    pub fn remove(&mut self, data: D)
    where
        R: From<i8>,
    {
        self.update(data, R::from(-1));
    }

    /// Changes the multiplicity of `data` by `diff` at the current time.
    pub fn update(&mut self, data: D, diff: R) {
        let time = self.handle.time().clone();
        self.push(&data, &time, &diff);
    }

    /// Changes the multiplicity of `data` by `diff` at `time`, which must not be before the
    /// current time.
    pub fn update_at(&mut self, data: D, time: T, diff: R) -> Result<(), InputError> {
        if !self.handle.time().less_equal(&time) {
            return Err(InputError::TimeBeforeCurrent {
                time: format!("{time:?}"),
                current: format!("{:?}", self.handle.time()),
            });
        }
        self.push(&data, &time, &diff);
        Ok(())
    }

    fn push(&mut self, data: &D, time: &T, diff: &R) {
        self.buffer.push(data, time, diff);
        if self.buffer.len() >= SEND_UPDATES {
            self.handle.send_batch(&mut self.buffer.take_reserving());
        }
    }

    /// Sends buffered updates into the dataflow now.
    pub fn flush(&mut self) {
        if !self.buffer.is_empty() {
            self.handle.send_batch(&mut self.buffer);
            self.buffer.clear();
        }
    }

    /// Moves the current time forward to `time`, promising no more updates before it.
    pub fn advance_to(&mut self, time: T) -> Result<(), InputError> {
        if !self.handle.time().less_equal(&time) {
            return Err(InputError::AdvanceBackwards {
                current: format!("{:?}", self.handle.time()),
                requested: format!("{time:?}"),
            });
        }
        self.flush();
        self.handle.advance_to(time);
        Ok(())
    }

    /// Sends everything buffered and closes the input: the computation can complete all times.
    pub fn close(mut self) {
        self.flush();
    }
}

impl<T: Time + TotalOrder, D: Data, R: Semigroup> Drop for InputSession<T, D, R> {
    fn drop(&mut self) {
        self.flush();
    }
}

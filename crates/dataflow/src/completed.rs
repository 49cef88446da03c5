//! A collection's changes handed out one complete time at a time, in time order: how a
//! program turns a live feed of input changes into a live feed of output changes.
//!
//! [`Collection::completed_times`] routes every update to worker 0 and holds it until the
//! collection's frontier has passed its time; then the time's changes, consolidated and
//! sorted, are queued on [`CompletedTimes`] for the program to take with
//! [`CompletedTimes::next`]. A time whose changes cancel out is not handed out.
//!
//! ```
//! use ripple_dataflow::InputSession;
//! use std::sync::{mpsc, Mutex};
//!
//! // A live source: another thread sends each time's changes as they happen.
//! let (send, receive) = mpsc::channel::<(u64, Vec<(u32, i64)>)>();
//! let receive = Mutex::new(receive); // the worker closure must be `Sync`
//! std::thread::spawn(move || {
//!     for time in 0..3u64 {
//!         let changes = vec![(time as u32, 1), (time as u32 + 1, 1)];
//!         send.send((time, changes)).unwrap();
//!     }
//! });
//! let output = timely::execute_directly(move |worker| {
//!     let mut input = InputSession::<u64, u32>::new();
//!     let distinct = worker.dataflow(|scope| {
//!         input.to_collection(scope).distinct().completed_times()
//!     });
//!     let mut output = Vec::new();
//!     // Each time, as it arrives: feed it, run until it is complete, take its changes.
//!     for (time, changes) in receive.lock().unwrap().iter() {
//!         for (data, diff) in changes {
//!             input.update_at(data, time, diff).unwrap();
//!         }
//!         input.advance_to(time + 1).unwrap();
//!         worker.step_while(|| !distinct.complete_before(&(time + 1)));
//!         while let Some(completed) = distinct.next() {
//!             output.push(completed);
//!         }
//!     }
//!     output
//! });
//! assert_eq!(
//!     output,
//!     vec![(0, vec![(0, 1), (1, 1)]), (1, vec![(2, 1)]), (2, vec![(3, 1)])]
//! );
//! ```

use crate::capture::consolidate_rows;
use crate::collection::Collection;
use crate::exchange::{exchange_by, ExchangeData};
use ripple_updates::{Semigroup, Time};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use timely::dataflow::operators::generic::Operator;
use timely::order::TotalOrder;
use timely::progress::Antichain;

/// A collection's complete times, for the program on worker 0 (see the module documentation).
/// On other workers nothing is ever handed out.
pub struct CompletedTimes<D, T, R> {
    state: Rc<RefCell<State<D, T, R>>>,
}

struct State<D, T, R> {
    /// Updates at times not yet complete.
    pending: Vec<(D, T, R)>,
    /// Complete times not yet taken, in time order.
    ready: VecDeque<(T, Vec<(D, R)>)>,
    /// The collection's frontier as last seen: times not beyond it are complete.
    frontier: Antichain<T>,
}

impl<D, T: Time, R> CompletedTimes<D, T, R> {
    /// The next complete time not yet taken, with its changes (consolidated, sorted by data),
    /// if there is one.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self) -> Option<(T, Vec<(D, R)>)> {
        self.state.borrow_mut().ready.pop_front()
    }

    /// Whether every time before `time` is complete (and queued, on worker 0).
    pub fn complete_before(&self, time: &T) -> bool {
        let state = self.state.borrow();
        !state.frontier.iter().any(|element| element.less_than(time))
    }

    /// Whether the collection is complete: every time was handed out or is queued.
    pub fn done(&self) -> bool {
        self.state.borrow().frontier.is_empty()
    }
}

impl<'scope, T, D, R> Collection<'scope, T, D, R>
where
    T: Time + TotalOrder,
    D: ExchangeData + Ord,
    R: Semigroup,
{
    /// This collection's changes, one complete time at a time, on worker 0 (see
    /// [`crate::completed`]).
    pub fn completed_times(self) -> CompletedTimes<D, T, R> {
        let state = Rc::new(RefCell::new(State {
            pending: Vec::new(),
            ready: VecDeque::new(),
            frontier: Antichain::from_elem(<T as timely::progress::Timestamp>::minimum()),
        }));
        let shared = Rc::clone(&state);
        self.inner.sink(
            exchange_by(|_| 0),
            "CompletedTimes",
            move |(input, frontier)| {
                let mut state = shared.borrow_mut();
                input.for_each(|_capability, container| {
                    state.pending.extend(container.rows());
                });
                let frontier = frontier.frontier();
                if state.frontier.borrow() == frontier {
                    return;
                }
                state.frontier = frontier.to_owned();
                let (complete, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut state.pending)
                    .into_iter()
                    .partition(|(_, time, _)| !frontier.less_equal(time));
                state.pending = pending;
                // As `(time, data, diff)`, consolidation's order is the order handed out.
                let by_time = complete.into_iter().map(|(d, t, r)| (t, d, r)).collect();
                for (time, data, diff) in consolidate_rows(by_time) {
                    match state.ready.back_mut() {
                        Some((last, changes)) if *last == time => changes.push((data, diff)),
                        _ => state.ready.push_back((time, vec![(data, diff)])),
                    }
                }
            },
        );
        CompletedTimes { state }
    }
}

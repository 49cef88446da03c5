//! Streaming input: changes read as they arrive (stdin, or a file followed as it grows), each
//! time handed to the workers once it is complete.
//!
//! A reader thread parses and checks lines as they come ([`crate::changes::parse_record`]).
//! A streamed input's times must not go back: a line at a later time completes every earlier
//! time, a progress line `@T` completes the times below `T` without data, and the end of the
//! input completes everything. When a time completes, its changes are checked
//! ([`Multiplicities`]) and queued in a [`Backlog`] for the workers, which take every complete
//! time queued (up to `--batch`) at each step. The backlog holds at most about
//! [`Backlog::LIMIT`] changes (a single bigger time is let in alone): beyond that the reader
//! waits, so a fast producer cannot fill memory. An error (a malformed line, a time that goes
//! back, a removal of an absent edge) is queued behind the times completed before it: their
//! output is written, then the run stops with the error.

use crate::changes::{parse_record, Edge, EdgeChange, InputError, Multiplicities, Record};
use crate::source::{Fed, Feed, Position};
use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Where a stream's lines come from: [`std::io::BufRead`] sources (stdin), or a followed file
/// ([`crate::follow::Follow`]).
pub trait LineSource: Send {
    /// Appends the next line (with its newline, if it has one) to `buf`, waiting for it if
    /// need be; returns its length, 0 at the end of the input.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize>;

    /// Whether the source started over since this was last asked (a followed file truncated
    /// or replaced): line numbers count from its new start.
    fn restarted(&mut self) -> bool {
        false
    }
}

impl<R: BufRead + Send> LineSource for R {
    fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        self.read_until(b'\n', buf)
    }
}

/// A complete time, or progress without data; each with the input's position after it.
#[derive(Debug)]
enum Message {
    Time {
        time: u64,
        changes: Vec<(Edge, i64)>,
        end: Position,
    },
    Progress(u64, Position),
}

/// Where a stream begins: at the start of its input, or where a resumed run's checkpoint left
/// it (`--state-dir`).
#[derive(Debug, Default)]
pub struct StreamStart {
    /// Times below this are complete already: a change below it is out of order.
    pub frontier: u64,
    /// Where the lines begin (the source is there already); line numbers go on from it.
    pub position: Position,
    /// The edges' multiplicities at `frontier`, which removals are checked against.
    pub multiplicities: Multiplicities,
}

/// Complete times read but not yet taken by the workers (see the module documentation).
pub struct Backlog {
    state: Mutex<State>,
    changed: Condvar,
    /// About the most changes queued at once.
    limit: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Message>,
    /// Changes in `queue`.
    queued: usize,
    /// How the input ended, once it has: `Ok` at its end, the error that stopped it.
    ended: Option<Result<(), InputError>>,
    /// The workers are gone: the reader stops.
    abandoned: bool,
    /// The position after the last message taken.
    taken: Position,
}

impl Backlog {
    /// About the most changes queued at once (some tens of megabytes).
    pub const LIMIT: usize = 1 << 20;

    fn new(limit: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            limit,
        }
    }

    /// Changes queued now.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.lock().queued
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `message`, waiting while the backlog is full; false if the workers are gone.
    fn push(&self, message: Message) -> bool {
        let size = match &message {
            Message::Time { changes, .. } => changes.len(),
            Message::Progress(..) => 0,
        };
        let mut state = self.lock();
        // Progress behind progress says only the later one: merged, a producer's heartbeats
        // cannot grow the queue.
        if let (Message::Progress(upto, end), Some(Message::Progress(last, last_end))) =
            (&message, state.queue.back_mut())
        {
            *last = (*last).max(*upto);
            *last_end = *end;
            return !state.abandoned;
        }
        while !state.abandoned && !state.queue.is_empty() && state.queued + size > self.limit {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        if state.abandoned {
            return false;
        }
        state.queued += size;
        state.queue.push_back(message);
        self.changed.notify_all();
        true
    }

    fn finish(&self, outcome: Result<(), InputError>) {
        let mut state = self.lock();
        state.ended = Some(outcome);
        self.changed.notify_all();
    }

    /// Waits until a complete time or progress is queued, the input ended, or `deadline`
    /// passed; then takes up to `max_times` complete times (and any progress among them),
    /// pushing their changes to `push`.
    fn take(
        &self,
        max_times: u64,
        deadline: Option<Instant>,
        push: &mut dyn FnMut(Edge, u64, i64),
    ) -> Result<Fed, InputError> {
        let mut state = self.lock();
        while state.queue.is_empty() && state.ended.is_none() {
            match deadline {
                None => {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                Some(deadline) => {
                    let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                        return Ok(Fed::Idle);
                    };
                    state = self
                        .changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0;
                }
            }
        }
        if state.queue.is_empty() {
            // Ended, and everything before the end was taken.
            return match state.ended.take().expect("the loop waits for the end") {
                Ok(()) => {
                    state.ended = Some(Ok(()));
                    Ok(Fed::End)
                }
                Err(error) => Err(error),
            };
        }
        let (mut end, mut times, mut changes) = (0, 0, 0);
        while times < max_times {
            match state.queue.pop_front() {
                None => break,
                Some(Message::Progress(upto, after)) => {
                    end = end.max(upto);
                    state.taken = after;
                }
                Some(Message::Time {
                    time,
                    changes: batch,
                    end: after,
                }) => {
                    state.taken = after;
                    state.queued -= batch.len();
                    changes += batch.len() as u64;
                    for (edge, diff) in batch {
                        push(edge, time, diff);
                    }
                    times += 1;
                    // Times stay below u64::MAX (the parser checks).
                    end = end.max(time + 1);
                }
            }
        }
        self.changed.notify_all();
        Ok(Fed::Step {
            end,
            times,
            changes,
        })
    }

    fn abandon(&self) {
        let mut state = self.lock();
        state.abandoned = true;
        self.changed.notify_all();
    }
}

/// The workers' side of a stream: a [`Feed`] taking complete times from the backlog its
/// reader thread fills.
pub struct Stream {
    backlog: Arc<Backlog>,
}

impl Stream {
    /// Starts a thread reading `lines` (named `name` in messages) into a new backlog.
    pub fn spawn(lines: Box<dyn LineSource>, name: String) -> std::io::Result<Self> {
        Self::spawn_from(lines, name, StreamStart::default(), Backlog::LIMIT)
    }

    /// Like [`Stream::spawn`], for lines that begin at `start`, the backlog holding about
    /// `limit` changes at most.
    pub fn spawn_from(
        lines: Box<dyn LineSource>,
        name: String,
        start: StreamStart,
        limit: usize,
    ) -> std::io::Result<Self> {
        let backlog = Arc::new(Backlog::new(limit));
        backlog.lock().taken = start.position;
        let filled = Arc::clone(&backlog);
        std::thread::Builder::new()
            .name("ripple-input".into())
            .spawn(move || {
                let outcome = read_stream(lines, &name, start, &filled);
                filled.finish(outcome);
            })?;
        Ok(Self { backlog })
    }
}

impl Feed for Stream {
    fn feed(
        &mut self,
        max_times: u64,
        deadline: Option<Instant>,
        push: &mut dyn FnMut(Edge, u64, i64),
    ) -> Result<Fed, InputError> {
        self.backlog.take(max_times, deadline, push)
    }

    fn position(&self) -> Position {
        self.backlog.lock().taken
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // A reader waiting for room stops; one waiting for input ends with the process.
        self.backlog.abandon();
    }
}

/// The time being read: its changes with their lines, the first of those lines, the position
/// before it, and the position after the last.
struct Open {
    time: u64,
    first_line: usize,
    group: Vec<(EdgeChange, usize)>,
    start: Position,
    end: Position,
}

/// Reads `lines` to their end into `backlog` (see the module documentation).
fn read_stream(
    mut lines: Box<dyn LineSource>,
    name: &str,
    start: StreamStart,
    backlog: &Backlog,
) -> Result<(), InputError> {
    let mut multiplicities = start.multiplicities;
    let mut open: Option<Open> = None;
    // The latest progress line: `(T, line)`.
    let mut progress: Option<(u64, usize)> = None;
    // Every time below this is complete (the last completed time's successor, or progress).
    let frontier = std::cell::Cell::new(start.frontier);
    let resumed_at = start.frontier;
    let mut bytes = Vec::new();
    let mut line = start.position.line as usize;
    // The position before the line being read.
    let mut at = start.position;
    // Completes the open time: checks it and queues it. False if the workers are gone.
    let mut complete = |open: &mut Option<Open>| -> Result<bool, InputError> {
        let Some(done) = open.take() else {
            return Ok(true);
        };
        multiplicities.apply_time(&done.group, name)?;
        // Times stay below u64::MAX (the parser checks).
        frontier.set(frontier.get().max(done.time + 1));
        let changes = done.group.iter().map(|(c, _)| (c.edge, c.diff)).collect();
        Ok(backlog.push(Message::Time {
            time: done.time,
            changes,
            end: done.end,
        }))
    };
    loop {
        bytes.clear();
        let read = lines
            .read_line(&mut bytes)
            .map_err(|source| InputError::Io {
                file: name.to_string(),
                source,
            })?;
        if read == 0 {
            break;
        }
        if lines.restarted() {
            line = 0;
            at = Position::default();
        }
        line += 1;
        let before = at;
        at = at.after(&bytes);
        let here = at;
        match parse_record(&bytes, name, line)? {
            Record::Skip => {}
            Record::Change(change) => {
                let out_of_order = |after: String| InputError::OutOfOrder {
                    file: name.to_string(),
                    line,
                    time: change.time,
                    after,
                };
                match &open {
                    Some(current) if change.time < current.time => {
                        return Err(out_of_order(format!(
                            "time {} of line {}",
                            current.time, current.first_line
                        )));
                    }
                    Some(current) if change.time == current.time => {}
                    _ => {
                        if let Some((upto, at)) = progress.filter(|(upto, _)| change.time < *upto) {
                            return Err(out_of_order(format!(
                                "the progress line `@{upto}` of line {at}"
                            )));
                        }
                        if change.time < resumed_at {
                            return Err(out_of_order(format!(
                                "the checkpoint the run resumed from, which holds the times below {resumed_at}"
                            )));
                        }
                        if !complete(&mut open)? {
                            return Ok(());
                        }
                        open = Some(Open {
                            time: change.time,
                            first_line: line,
                            group: Vec::new(),
                            start: before,
                            end: here,
                        });
                    }
                }
                let current = open.as_mut().expect("a time is open");
                current.group.push((change, line));
                current.end = here;
            }
            Record::Progress(upto) => {
                if open.as_ref().is_some_and(|current| current.time < upto) && !complete(&mut open)?
                {
                    return Ok(());
                }
                if upto <= frontier.get() {
                    // Nothing new: those times are complete already.
                    continue;
                }
                frontier.set(upto);
                progress = Some((upto, line));
                // A time still open (at or after `upto`) is read again by a run resuming here.
                let resume = open.as_ref().map_or(here, |current| current.start);
                if !backlog.push(Message::Progress(upto, resume)) {
                    return Ok(());
                }
            }
        }
    }
    // The end of the input completes the last time.
    complete(&mut open).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each step's outcome and the changes it pushed.
    type Steps = Vec<(Fed, Vec<(Edge, u64, i64)>)>;

    /// Every step a stream of `text` gives, taking up to `max_times` times each.
    fn stream_steps(text: &'static str, max_times: u64) -> (Steps, String) {
        let mut stream = Stream::spawn(Box::new(text.as_bytes()), "s".into()).unwrap();
        let mut steps = Vec::new();
        loop {
            let mut pushed = Vec::new();
            match stream.feed(max_times, None, &mut |edge, time, diff| {
                pushed.push((edge, time, diff))
            }) {
                Ok(Fed::End) => return (steps, String::new()),
                Ok(fed) => steps.push((fed, pushed)),
                Err(error) => return (steps, error.to_string()),
            }
        }
    }

    /// The messages a stream of `text` queues, read to its end.
    fn messages(text: &'static str) -> Vec<Message> {
        let backlog = Backlog::new(Backlog::LIMIT);
        read_stream(
            Box::new(text.as_bytes()),
            "s",
            StreamStart::default(),
            &backlog,
        )
        .unwrap();
        let queued = std::mem::take(&mut backlog.lock().queue);
        queued.into_iter().collect()
    }

    #[test]
    fn positions_are_before_the_first_line_not_fed() {
        let at = |offset, line| (offset, line);
        let ends: Vec<(u64, (u64, u64))> =
            messages("0,1,4,1\n1,2,7,1\n@6\n2,3,7,1\n# c\n3,4,8,1\n")
                .into_iter()
                .map(|message| match message {
                    Message::Time { time, end, .. } => (time, at(end.offset, end.line)),
                    Message::Progress(upto, end) => (upto, at(end.offset, end.line)),
                })
                .collect();
        // Time 4 ends after its line; `@6` comes while time 7 is open, so a run resuming after
        // it reads time 7 again from its first line (byte 8, after line 1); time 7 ends after
        // its last line, not after the comment.
        assert_eq!(
            ends,
            vec![(4, at(8, 1)), (6, at(8, 1)), (7, at(27, 4)), (8, at(39, 6))]
        );
    }

    #[test]
    fn times_complete_in_order() {
        let (steps, error) = stream_steps("1,2,0,1\n2,3,0,1\n# c\n3,4,5,1\n@9\n@7\n4,5,9,1\n", 1);
        assert_eq!(error, "");
        let fed: Vec<_> = steps
            .iter()
            .map(|(fed, pushed)| (*fed, pushed.len()))
            .collect();
        let step = |end, times, changes| Fed::Step {
            end,
            times,
            changes,
        };
        // Progress `@9` rides with the step that takes time 5 when the queue holds both;
        // otherwise it is a step of its own. Either way every time is fed once, in order.
        let ends: Vec<u64> = fed
            .iter()
            .map(|(fed, _)| match fed {
                Fed::Step { end, .. } => *end,
                _ => unreachable!(),
            })
            .collect();
        assert!(ends.windows(2).all(|w| w[0] <= w[1]), "{fed:?}");
        assert_eq!(fed.first(), Some(&(step(1, 1, 2), 2)));
        assert_eq!(fed.last(), Some(&(step(10, 1, 1), 1)));
        let pushed: usize = fed.iter().map(|(_, n)| n).sum();
        assert_eq!(pushed, 4);
    }

    /// A producer that never stops: one change per time, times counting up.
    struct Endless(u64);

    impl LineSource for Endless {
        fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
            self.0 += 1;
            let line = format!("1,2,{},1\n", self.0);
            buf.extend_from_slice(line.as_bytes());
            Ok(line.len())
        }
    }

    #[test]
    fn progress_that_says_nothing_new_is_skipped() {
        // `@3` after time 5 completed, and heartbeats behind one another.
        let (steps, error) = stream_steps("1,2,5,1\n1,2,6,1\n@3\n@8\n@9\n@9\n", 10);
        assert_eq!(error, "");
        let ends: Vec<u64> = steps
            .iter()
            .map(|(fed, _)| match fed {
                Fed::Step { end, .. } => *end,
                _ => unreachable!(),
            })
            .collect();
        assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
        assert_eq!(ends.last(), Some(&9));
    }

    #[test]
    fn a_fast_producer_waits_for_the_workers() {
        let mut stream = Stream::spawn_from(
            Box::new(Endless(0)),
            "e".into(),
            StreamStart::default(),
            100,
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            stream.backlog.queued() <= 100,
            "{}",
            stream.backlog.queued()
        );
        // Taking times makes room, and the reader fills it again, never beyond the limit.
        let mut taken = 0;
        for _ in 0..5 {
            let fed = stream.feed(30, None, &mut |_, _, _| taken += 1).unwrap();
            assert!(matches!(fed, Fed::Step { times: 30, .. }), "{fed:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(stream.backlog.queued() <= 100);
        }
        assert_eq!(taken, 150);
    }

    #[test]
    fn errors_come_after_the_times_completed_before_them() {
        let (steps, error) = stream_steps("1,2,0,1\n1,2,3,1\n1,2,2,1\n", 5);
        assert_eq!(error, "s:3: time 2 comes after time 3 of line 2; a streamed input's times must not go back (read the file whole, without --follow, for times in any order)");
        let fed: u64 = steps
            .iter()
            .map(|(fed, _)| match fed {
                Fed::Step { times, .. } => *times,
                _ => 0,
            })
            .sum();
        assert_eq!(fed, 1, "time 0 was complete, time 3 was not");
        let (_, error) = stream_steps("@5\n1,2,4,1\n", 5);
        assert!(
            error.contains("time 4 comes after the progress line `@5` of line 1"),
            "{error}"
        );
        let (steps, error) = stream_steps("1,2,0,1\n1,2,1,-1\n1,2,1,-1\n1,2,2,1\n", 5);
        assert!(
            error.starts_with("s:3: at time 1, edge 1->2 is removed more often"),
            "{error}"
        );
        assert_eq!(steps.len(), 1);
    }
}

//! Where edge changes come from, and how their times are handed to the workers.
//!
//! A [`Feed`] hands out complete times in order, up to a number of distinct times per step.
//! The driver takes the first time (the initial graph) on its own as the *load* step, then up
//! to `--batch` times per step; it feeds a step's changes, advances the inputs to the step's
//! end, and runs until the output is complete up to there. A [`Source`] read whole (a change
//! file, or the generator) always has `--batch` times ready; a stream ([`crate::stream`]) has
//! what has arrived.

use crate::changes::{Edge, EdgeChange, InputError};
use crate::generator::{Generator, GraphSpec};
use std::time::Instant;

/// What one call of [`Feed::feed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fed {
    /// Fed the changes of `times` complete times (`changes` changes); every time below `end`
    /// is now complete.
    Step { end: u64, times: u64, changes: u64 },
    /// Nothing completed before the deadline.
    Idle,
    /// The input has ended, and everything in it was fed.
    End,
}

/// Where a streamed input stands after the times fed so far: the bytes and lines read before
/// the first line of a time not yet fed. A resumed stream starts reading there; an input read
/// whole resumes by time alone, and stays at zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub offset: u64,
    pub line: u64,
    /// The CRC-32C of the first `head_len` bytes of the file read (up to [`HEAD_BYTES`]): what
    /// the offset is of. A followed file truncated or replaced starts a new head.
    pub head_len: u64,
    pub head_crc: u32,
}

/// The bytes of an input file whose checksum identifies it.
pub const HEAD_BYTES: u64 = 64 << 10;

impl Position {
    /// The position after `line`, read from here.
    pub fn after(self, line: &[u8]) -> Self {
        let take = HEAD_BYTES
            .saturating_sub(self.head_len)
            .min(line.len() as u64) as usize;
        Self {
            offset: self.offset + line.len() as u64,
            line: self.line + 1,
            head_len: self.head_len + take as u64,
            head_crc: crc32c::crc32c_append(self.head_crc, &line[..take]),
        }
    }
}

/// Complete times, in order, for the driver.
pub trait Feed: Send {
    /// Where the input stands after the steps fed so far (see [`Position`]).
    fn position(&self) -> Position {
        Position::default()
    }

    /// Waits until some time is complete (or the input ends, or `deadline` passes), then passes
    /// the changes of up to `max_times` complete times to `push`, in time order. An error in
    /// the input comes after every time completed before it.
    fn feed(
        &mut self,
        max_times: u64,
        deadline: Option<Instant>,
        push: &mut dyn FnMut(Edge, u64, i64),
    ) -> Result<Fed, InputError>;
}

/// An input read whole.
#[derive(Clone, Debug)]
pub enum Source {
    /// Changes read from a file, sorted by time.
    Changes {
        name: String,
        changes: Vec<EdgeChange>,
    },
    /// The generated workload (see [`crate::generator`]).
    Generated(GraphSpec),
}

impl Source {
    /// The input, for `--summary`.
    pub fn describe(&self) -> String {
        match self {
            Source::Changes { name, changes } => format!("{name} ({} changes)", changes.len()),
            Source::Generated(spec) => format!(
                "generated: {} nodes, {} edges, {} updates, seed {}",
                spec.nodes, spec.edges, spec.updates, spec.seed
            ),
        }
    }

    /// The number of distinct times.
    fn distinct(&self) -> u64 {
        match self {
            Source::Generated(spec) => spec.updates + 1,
            Source::Changes { changes, .. } => {
                changes.chunk_by(|a, b| a.time == b.time).count() as u64
            }
        }
    }

    /// How many steps a run taking the first time alone, then `batch` times per step, makes.
    pub fn steps(&self, batch: u64) -> u64 {
        let distinct = self.distinct();
        u64::from(distinct > 0) + distinct.saturating_sub(1).div_ceil(batch.max(1))
    }

    /// Like [`Source::steps`], for a run resumed at time `from`: the times at or after it, at
    /// `batch` per step.
    pub fn steps_from(&self, batch: u64, from: u64) -> u64 {
        if from == 0 {
            return self.steps(batch);
        }
        let distinct = match self {
            Source::Generated(spec) => (spec.updates + 1).saturating_sub(from),
            Source::Changes { changes, .. } => {
                let at = changes.partition_point(|change| change.time < from);
                changes[at..].chunk_by(|a, b| a.time == b.time).count() as u64
            }
        };
        distinct.div_ceil(batch.max(1))
    }

    /// This source as a feed.
    pub fn into_feed(self) -> Planned {
        self.into_feed_from(0)
    }

    /// This source as a feed of the times at or after `from` (a resumed run's).
    pub fn into_feed_from(self, from: u64) -> Planned {
        let next = match &self {
            Source::Changes { changes, .. } => Next::Changes {
                next: changes.partition_point(|change| change.time < from),
            },
            Source::Generated(spec) => {
                let mut generator = Generator::new(spec);
                let from = from.min(spec.updates + 1);
                generator.skip_to(from, spec.edges);
                Next::Generated {
                    generator,
                    next_time: from,
                }
            }
        };
        Planned { source: self, next }
    }
}

/// A [`Source`] handing out its times in order.
pub struct Planned {
    source: Source,
    next: Next,
}

/// What a [`Planned`] feeds next.
enum Next {
    /// The next change to feed.
    Changes { next: usize },
    Generated {
        generator: Generator,
        next_time: u64,
    },
}

impl Feed for Planned {
    fn feed(
        &mut self,
        max_times: u64,
        _deadline: Option<Instant>,
        push: &mut dyn FnMut(Edge, u64, i64),
    ) -> Result<Fed, InputError> {
        let max_times = max_times.max(1);
        match (&self.source, &mut self.next) {
            (Source::Changes { changes, .. }, Next::Changes { next }) => {
                let (start, mut times, mut last) = (*next, 0, None);
                while let Some(change) = changes.get(*next) {
                    if last != Some(change.time) {
                        if times == max_times {
                            break;
                        }
                        times += 1;
                        last = Some(change.time);
                    }
                    push(change.edge, change.time, change.diff);
                    *next += 1;
                }
                let Some(last) = last else {
                    return Ok(Fed::End);
                };
                Ok(Fed::Step {
                    // Times stay below u64::MAX (the parser checks).
                    end: last + 1,
                    times,
                    changes: (*next - start) as u64,
                })
            }
            (
                Source::Generated(spec),
                Next::Generated {
                    generator,
                    next_time,
                },
            ) => {
                if *next_time > spec.updates {
                    return Ok(Fed::End);
                }
                let start = *next_time;
                let end = start.saturating_add(max_times).min(spec.updates + 1);
                let mut changes = 0;
                for time in start..end {
                    if time == 0 {
                        for _ in 0..spec.edges {
                            push(generator.insertion(), 0, 1);
                        }
                        changes += spec.edges;
                    } else {
                        push(generator.insertion(), time, 1);
                        push(generator.removal(), time, -1);
                        changes += 2;
                    }
                }
                *next_time = end;
                Ok(Fed::Step {
                    end,
                    times: end - start,
                    changes,
                })
            }
            _ => unreachable!("a position matches its source"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(times: &[u64]) -> Source {
        Source::Changes {
            name: "test".into(),
            changes: times
                .iter()
                .map(|&time| EdgeChange {
                    time,
                    edge: (0, 1),
                    diff: 1,
                })
                .collect(),
        }
    }

    /// Every step of `source` taking the first time alone, then `batch` times.
    fn steps(source: Source, batch: u64) -> Vec<Fed> {
        let mut feed = source.into_feed();
        let mut steps = Vec::new();
        loop {
            let max = if steps.is_empty() { 1 } else { batch };
            match feed.feed(max, None, &mut |_, _, _| {}).unwrap() {
                Fed::End => return steps,
                fed => steps.push(fed),
            }
        }
    }

    fn step(end: u64, times: u64, changes: u64) -> Fed {
        Fed::Step {
            end,
            times,
            changes,
        }
    }

    #[test]
    fn sparse_times_cut_into_steps() {
        let source = changes(&[3, 3, 7, 9, 9, 20, 21]);
        assert_eq!(source.steps(2), 3);
        assert_eq!(
            steps(source, 2),
            vec![step(4, 1, 2), step(10, 2, 3), step(22, 2, 2)]
        );
    }

    #[test]
    fn empty_input_has_no_steps() {
        assert_eq!(changes(&[]).steps(5), 0);
        assert_eq!(steps(changes(&[]), 5), vec![]);
    }

    #[test]
    fn generated_steps_cover_every_update() {
        let spec = GraphSpec {
            nodes: 4,
            edges: 3,
            updates: 10,
            seed: 1,
        };
        let source = Source::Generated(spec);
        assert_eq!(source.steps(4), 4);
        assert_eq!(
            steps(source, 4),
            vec![step(1, 1, 3), step(5, 4, 8), step(9, 4, 8), step(11, 2, 4)]
        );
    }
}

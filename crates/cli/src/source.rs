//! Where edge changes come from (a parsed file or the generator), and how their times are cut
//! into steps.
//!
//! The first input time (the initial graph) is the *load* step on its own. The remaining
//! distinct times are cut into steps of `batch` distinct times each: the driver feeds a step's
//! changes, advances the inputs to the step's end, and runs until the output is complete up to
//! there.

use crate::changes::{Edge, EdgeChange};
use crate::generator::{Generator, GraphSpec};

/// The input of a run.
#[derive(Clone, Debug)]
pub enum Source {
    /// Changes read from a file (or stdin), sorted by time.
    Changes {
        name: String,
        changes: Vec<EdgeChange>,
    },
    /// The generated workload (see [`crate::generator`]).
    Generated(GraphSpec),
}

/// The times `first <= t < end` fed before the workers run to completion for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub first: u64,
    pub end: u64,
}

/// Every step of a run.
#[derive(Clone, Debug)]
pub struct Plan {
    batch: u64,
    times: Times,
}

#[derive(Clone, Debug)]
enum Times {
    /// Every time in `0..=last` occurs (the generator).
    Dense { last: u64 },
    /// The distinct times of a file, ascending.
    Sparse(Vec<u64>),
}

impl Source {
    /// Cuts this source's times into steps of `batch` distinct times (`batch >= 1`).
    pub fn plan(&self, batch: u64) -> Plan {
        assert!(batch >= 1, "callers check --batch is positive");
        let times = match self {
            Source::Generated(spec) => Times::Dense { last: spec.updates },
            Source::Changes { changes, .. } => {
                let mut times: Vec<u64> = changes.iter().map(|change| change.time).collect();
                times.dedup();
                Times::Sparse(times)
            }
        };
        Plan { batch, times }
    }

    /// How many changes the source holds after its first time.
    pub fn update_changes(&self) -> u64 {
        match self {
            Source::Generated(spec) => 2 * spec.updates,
            Source::Changes { changes, .. } => {
                let first = changes.first().map(|change| change.time);
                changes.iter().filter(|c| Some(c.time) != first).count() as u64
            }
        }
    }

    /// A feeder positioned before the first time.
    pub fn feeder(&self) -> Feeder<'_> {
        match self {
            Source::Changes { changes, .. } => Feeder::Changes { changes, next: 0 },
            Source::Generated(spec) => Feeder::Generated {
                generator: Generator::new(spec),
                spec: *spec,
                next_time: 0,
            },
        }
    }
}

impl Plan {
    fn distinct(&self) -> u64 {
        match &self.times {
            Times::Dense { last } => last + 1,
            Times::Sparse(times) => times.len() as u64,
        }
    }

    /// The `index`-th distinct time; `distinct()` stands for one past the last time.
    fn time(&self, index: u64) -> u64 {
        match &self.times {
            Times::Dense { last } => index.min(last + 1),
            Times::Sparse(times) => match times.get(index as usize) {
                Some(time) => *time,
                // Times stay below u64::MAX (the parser checks), so this cannot overflow.
                None => times.last().map_or(0, |last| last + 1),
            },
        }
    }

    /// The first time on its own, if there is any input.
    pub fn load(&self) -> Option<Step> {
        (self.distinct() > 0).then(|| Step {
            first: self.time(0),
            end: self.time(1),
        })
    }

    /// How many steps follow the load.
    pub fn steps(&self) -> u64 {
        self.distinct().saturating_sub(1).div_ceil(self.batch)
    }

    /// Distinct input times after the load.
    pub fn update_times(&self) -> u64 {
        self.distinct().saturating_sub(1)
    }

    /// The `index`-th step after the load.
    pub fn step(&self, index: u64) -> Step {
        debug_assert!(index < self.steps());
        let start = 1 + index * self.batch;
        Step {
            first: self.time(start),
            end: self.time(start + self.batch),
        }
    }
}

/// Hands out a source's changes in time order.
pub enum Feeder<'a> {
    Changes {
        changes: &'a [EdgeChange],
        next: usize,
    },
    Generated {
        generator: Generator,
        spec: GraphSpec,
        next_time: u64,
    },
}

impl Feeder<'_> {
    /// Passes every change with time before `end` not yet fed to `push`; returns how many.
    pub fn feed(&mut self, end: u64, mut push: impl FnMut(Edge, u64, i64)) -> u64 {
        match self {
            Feeder::Changes { changes, next } => {
                let start = *next;
                while *next < changes.len() && changes[*next].time < end {
                    let change = changes[*next];
                    push(change.edge, change.time, change.diff);
                    *next += 1;
                }
                (*next - start) as u64
            }
            Feeder::Generated {
                generator,
                spec,
                next_time,
            } => {
                let mut fed = 0;
                while *next_time < end && *next_time <= spec.updates {
                    let time = *next_time;
                    if time == 0 {
                        for _ in 0..spec.edges {
                            push(generator.insertion(), 0, 1);
                        }
                        fed += spec.edges;
                    } else {
                        push(generator.insertion(), time, 1);
                        push(generator.removal(), time, -1);
                        fed += 2;
                    }
                    *next_time += 1;
                }
                fed
            }
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

    #[test]
    fn sparse_times_cut_into_steps() {
        let source = changes(&[3, 3, 7, 9, 9, 20, 21]);
        let plan = source.plan(2);
        assert_eq!(plan.load(), Some(Step { first: 3, end: 7 }));
        assert_eq!(plan.steps(), 2);
        assert_eq!(plan.step(0), Step { first: 7, end: 20 });
        assert_eq!(plan.step(1), Step { first: 20, end: 22 });
        assert_eq!(source.update_changes(), 5);
        let mut feeder = source.feeder();
        assert_eq!(feeder.feed(7, |_, _, _| {}), 2);
        assert_eq!(feeder.feed(20, |_, _, _| {}), 3);
        assert_eq!(feeder.feed(22, |_, _, _| {}), 2);
    }

    #[test]
    fn empty_input_has_no_steps() {
        let plan = changes(&[]).plan(5);
        assert_eq!(plan.load(), None);
        assert_eq!(plan.steps(), 0);
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
        let plan = source.plan(4);
        assert_eq!(plan.load(), Some(Step { first: 0, end: 1 }));
        let steps: Vec<Step> = (0..plan.steps()).map(|i| plan.step(i)).collect();
        assert_eq!(
            steps,
            [(1, 5), (5, 9), (9, 11)].map(|(first, end)| Step { first, end })
        );
        let mut feeder = source.feeder();
        let mut fed = vec![];
        feeder.feed(1, |_, time, diff| fed.push((time, diff)));
        assert_eq!(fed, vec![(0, 1); 3]);
        let total: u64 = steps.iter().map(|s| feeder.feed(s.end, |_, _, _| {})).sum();
        assert_eq!(total, source.update_changes());
    }
}

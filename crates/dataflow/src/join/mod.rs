//! Joins: matching the keys of two arrangements as both change.
//!
//! Each new batch of one side is joined against the other side's trace *as acknowledged so
//! far*: the batches of that side this operator has already received. A pair of batches is
//! therefore joined exactly once, by whichever of the two arrived second. The operator holds
//! the other trace's physical compaction at its acknowledged frontier (so the batches through
//! it stay separable) and its logical compaction at this side's input frontier (every future
//! batch of this side is at or beyond it, and joins with such times are preserved).
//!
//! Work is queued per received batch with the capabilities of its message, and done with a
//! bounded amount of fuel per activation; when fuel runs out the operator reschedules itself.

mod product;
mod shell;
mod work;

use crate::arrange::Arranged;
use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::exchange::ExchangeData;
use columnar::Ref;
use ripple_updates::{Abelian, Data, Multiply, Semigroup, Time};
use shell::{fuel_per_activation, JoinState};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;

impl<'scope, K, V1, T, R1> Arranged<'scope, K, V1, T, R1>
where
    K: Data,
    V1: Data,
    T: Time,
    R1: Semigroup,
{
    /// Joins two arrangements, producing `logic(key, v1, v2)` for each matching pair, at the
    /// join of their times, with the product of their diffs.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut left = InputSession::<u64, (u64, u64)>::new();
    ///     let mut right = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let left = left.to_collection(scope).arrange_by_key();
    ///         let right = right.to_collection(scope).arrange_by_key();
    ///         // Arrangements can be shared: `left` here could feed other joins too.
    ///         left.join_core(right, |key, a, b| (*key, a + b)).capture_into(&sink)
    ///     });
    ///     left.insert((1, 10));
    ///     right.update_at((1, 5), 3, 1).unwrap();
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 15), 3, 1)]);
    /// ```
    pub fn join_core<V2, R2, D>(
        self,
        other: Arranged<'scope, K, V2, T, R2>,
        mut logic: impl FnMut(Ref<'_, K>, Ref<'_, V1>, Ref<'_, V2>) -> D + 'static,
    ) -> Collection<'scope, T, D, <R1 as Multiply<R2>>::Output>
    where
        V2: Data,
        R2: Semigroup,
        D: Data,
        R1: Multiply<R2>,
    {
        type R3<A, B> = <A as Multiply<B>>::Output;
        let scope = self.stream.scope();
        let config = RippleConfig::of(scope.worker());
        let fuel = fuel_per_activation::<D, T, R3<R1, R2>>(config.storage.as_deref());
        let mut state = JoinState::new(
            self.trace.handle.clone(),
            other.trace.handle.clone(),
            config.probe_run,
            fuel,
        );
        let inner = self
            .stream
            .binary_frontier::<_, Output<D, T, R3<R1, R2>>, _, _, _, _>(
                other.stream,
                Pipeline,
                Pipeline,
                "Join",
                move |_, info| {
                    let activator = scope.activator_for(info.address);
                    move |(input1, frontier1), (input2, frontier2), output| {
                        input1.for_each(|capability, batches| {
                            state.receive1(batches, capability.retain_stamp(0));
                        });
                        input2.for_each(|capability, batches| {
                            state.receive2(batches, capability.retain_stamp(0));
                        });
                        if state.work(output, &mut logic) {
                            activator.activate();
                        }
                        state.release_traces(frontier1.frontier(), frontier2.frontier());
                    }
                },
            );
        Collection { inner }
    }
}

impl<'scope, K, V1, T, R> Collection<'scope, T, (K, V1), R>
where
    K: ExchangeData,
    V1: Data,
    T: Time,
    R: Semigroup,
{
    /// Matches records of the two collections with equal keys: `(key, (v1, v2))` for each
    /// pair, with the product of their multiplicities.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut names = InputSession::<u64, (u64, String)>::new();
    ///     let mut ages = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let names = names.to_collection(scope);
    ///         let ages = ages.to_collection(scope);
    ///         names.join(ages).capture_into(&sink);
    ///     });
    ///     names.insert((1, "ada".to_string()));
    ///     ages.insert((1, 36));
    ///     ages.insert((2, 41));
    ///     names.advance_to(1).unwrap();
    ///     ages.advance_to(1).unwrap();
    ///     ages.remove((1, 36));
    /// });
    /// assert_eq!(
    ///     captured.consolidated(),
    ///     vec![((1, ("ada".to_string(), 36)), 0, 1), ((1, ("ada".to_string(), 36)), 1, -1)]
    /// );
    /// ```
    pub fn join<V2: Data>(
        self,
        other: Collection<'scope, T, (K, V2), R>,
    ) -> Collection<'scope, T, (K, (V1, V2)), <R as Multiply>::Output>
    where
        R: Multiply,
    {
        self.join_map(other, |key, v1, v2| {
            (K::into_owned(key), (V1::into_owned(v1), V2::into_owned(v2)))
        })
    }

    /// Matches records with equal keys and produces `logic(key, v1, v2)` for each pair.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut left = InputSession::<u64, (u64, u64)>::new();
    ///     let mut right = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let right = right.to_collection(scope);
    ///         left.to_collection(scope).join_map(right, |_key, a, b| a * b).capture_into(&sink)
    ///     });
    ///     left.insert((1, 3));
    ///     right.insert((1, 4));
    ///     right.insert((2, 5));
    /// });
    /// assert_eq!(captured.consolidated(), vec![(12, 0, 1)]);
    /// ```
    pub fn join_map<V2: Data, R2: Semigroup, D: Data>(
        self,
        other: Collection<'scope, T, (K, V2), R2>,
        logic: impl FnMut(Ref<'_, K>, Ref<'_, V1>, Ref<'_, V2>) -> D + 'static,
    ) -> Collection<'scope, T, D, <R as Multiply<R2>>::Output>
    where
        R: Multiply<R2>,
    {
        self.arrange_by_key()
            .join_core(other.arrange_by_key(), logic)
    }

    /// Keeps the records whose key is in `keys`, multiplied by the key's multiplicity there.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut edges = InputSession::<u64, (u64, u64)>::new();
    ///     let mut keep = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         edges.to_collection(scope).semijoin(keep.to_collection(scope)).capture_into(&sink);
    ///     });
    ///     edges.insert((1, 2));
    ///     edges.insert((3, 4));
    ///     keep.insert(3);
    /// });
    /// assert_eq!(captured.consolidated(), vec![((3, 4), 0, 1)]);
    /// ```
    pub fn semijoin<R2: Semigroup>(
        self,
        keys: Collection<'scope, T, K, R2>,
    ) -> Collection<'scope, T, (K, V1), <R as Multiply<R2>>::Output>
    where
        R: Multiply<R2>,
    {
        self.arrange_by_key()
            .join_core(keys.arrange_by_self(), |key, v1, ()| {
                (K::into_owned(key), V1::into_owned(v1))
            })
    }

    /// Keeps the records whose key is *not* in `keys`: the collection minus its semijoin with
    /// `keys` (so `keys` should be a set, each key with multiplicity 1).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut edges = InputSession::<u64, (u64, u64)>::new();
    ///     let mut drop = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         edges.to_collection(scope).antijoin(drop.to_collection(scope)).consolidate().capture_into(&sink);
    ///     });
    ///     edges.insert((1, 2));
    ///     edges.insert((3, 4));
    ///     drop.insert(3);
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 2), 0, 1)]);
    /// ```
    pub fn antijoin(self, keys: Collection<'scope, T, K, R>) -> Self
    where
        R: Multiply<Output = R> + Abelian,
    {
        self.clone().concat(self.semijoin(keys).negate())
    }
}

#[cfg(test)]
mod tests {
    use super::shell::fuel_per_activation;
    use crate::{Captured, InputSession, RippleConfig};
    use ripple_storage::{SpillDir, Storage, StorageSettings};
    use std::sync::Arc;

    type Row = ((u64, u64, u64), u64, i64);

    /// Keys, and values per key on each side: 200,000 pairs.
    const KEYS: u64 = 2_000;
    const VALUES: u64 = 10;

    /// The join of `VALUES` by `VALUES` on each of `KEYS` keys, with `storage` installed and
    /// a key per probe run, so that a join out of fuel stops after any key.
    fn join_all_pairs(storage: Option<Arc<Storage>>) -> Vec<Row> {
        let captured = Captured::new();
        let sink = captured.clone();
        let mut config = timely::Config::thread();
        RippleConfig {
            storage,
            probe_run: 1,
            ..RippleConfig::default()
        }
        .install(&mut config.worker);
        let guards = timely::execute(config, move |worker| {
            let mut left = InputSession::<u64, (u64, u64)>::new();
            let mut right = InputSession::<u64, (u64, u64)>::new();
            worker.dataflow(|scope| {
                let left = left.to_collection(scope).arrange_by_key();
                let right = right.to_collection(scope).arrange_by_key();
                left.join_core(right, |key, a, b| (*key, *a, *b))
                    .capture_into(&sink)
            });
            for key in 0..KEYS {
                for value in 0..VALUES {
                    left.insert((key, value));
                    right.insert((key, value));
                }
            }
        })
        .expect("timely starts");
        for result in guards.join() {
            result.expect("worker completes");
        }
        captured.consolidated()
    }

    /// Under a small budget a join's fuel runs out part way through its output (in memory it
    /// does not): the activations that follow give the rest, every pair once, as in memory.
    #[test]
    fn a_join_out_of_fuel_resumes_where_it_stopped() {
        let spill = SpillDir::new_in_temp().expect("a spill directory");
        let storage = Storage::in_spill_dir(spill, StorageSettings::with_budget(1 << 20));
        let fuel = fuel_per_activation::<(u64, u64, u64), u64, i64>(Some(&storage));
        let pairs = (KEYS * VALUES * VALUES) as usize;
        assert!(fuel < pairs / 2, "the join yields at least twice");
        assert!(fuel_per_activation::<(u64, u64, u64), u64, i64>(None) > pairs);
        let in_memory = join_all_pairs(None);
        assert_eq!(in_memory.len(), pairs);
        assert!(in_memory
            .iter()
            .all(|&(_, time, diff)| time == 0 && diff == 1));
        assert_eq!(join_all_pairs(Some(Arc::new(storage))), in_memory);
    }
}

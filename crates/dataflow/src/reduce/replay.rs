//! Reduce for one key whose times are partially ordered: replay the key's history in sorted
//! time order (a linear extension of the partial order).
//!
//! Three ideas keep the work near linear in the history:
//!
//! - **Advance by the meet.** Every time still to be examined is at least the meet of the
//!   times still to come, so a passed update's time can be joined with that meet without
//!   changing any accumulation we will still take. Passed updates then collapse: in an
//!   iteration, the updates of many earlier rounds become one update per iteration.
//! - **Lazy closure.** A time needs examining only if it is the join of a new time with other
//!   times. In sorted order a join is never before its parts, so joins are formed when their
//!   later part is reached, against the (small, advanced) passed updates only.
//! - **Interesting times only.** A time is examined (`logic` runs) only if it is a new time, a
//!   synthesised join, or at least an already examined time; other history times just pass.

use columnar::Ref;
use ripple_updates::consolidate::{consolidate_pairs, consolidate_triples};
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup, Time};

/// Buffers reused across keys.
pub(crate) struct ReplayScratch<'a, V: Data, V2, T, R, R2> {
    passed_input: Vec<(Ref<'a, V>, T, R)>,
    passed_output: Vec<(V2, T, R2)>,
    examined: Vec<T>,
    synthetic: Vec<T>,
    joins: Vec<T>,
    input: Vec<(Ref<'a, V>, T, R)>,
    output: Vec<(V2, T, R2)>,
    produced: Vec<(V2, T, R2)>,
    suffix_meets: [Vec<T>; 3],
}

impl<V: Data, V2, T, R, R2> Default for ReplayScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            passed_input: Vec::new(),
            passed_output: Vec::new(),
            examined: Vec::new(),
            synthetic: Vec::new(),
            joins: Vec::new(),
            input: Vec::new(),
            output: Vec::new(),
            produced: Vec::new(),
            suffix_meets: Default::default(),
        }
    }
}

/// `meets[i]` becomes the meet of the times of `items[i..]`.
fn suffix_meets<I, T: Time>(items: &[I], time: impl Fn(&I) -> &T, meets: &mut Vec<T>) {
    meets.clear();
    meets.extend(items.iter().map(|item| time(item).clone()));
    for index in (1..meets.len()).rev() {
        let later = meets[index].clone();
        meets[index - 1].meet_assign(&later);
    }
}

fn meet_into<T: Time>(meet: &mut Option<T>, time: Option<&T>) {
    if let Some(time) = time {
        match meet {
            Some(meet) => meet.meet_assign(time),
            None => *meet = Some(time.clone()),
        }
    }
}

/// Joins every time with `meet`, then sorts by `(value, time)` and adds up equal pairs.
fn advance_and_consolidate<V: Ord, T: Time, R: Semigroup>(updates: &mut Vec<(V, T, R)>, meet: &T) {
    for update in updates.iter_mut() {
        update.1.join_assign(meet);
    }
    consolidate_triples(updates);
}

/// The corrections for one key: `history` and `output` are its input and output histories
/// (any order; `output` gains the corrections), `times` its new times (sorted, distinct, none at
/// or beyond `upper`). Corrections at times before `upper` go to `emit`; times at or beyond
/// `upper` that will need examining go to `defer`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay_key<'a, V, V2, T, R, R2>(
    history: &[(Ref<'a, V>, T, R)],
    output: &mut Vec<(V2, T, R2)>,
    times: &[T],
    upper: AntichainRef<'_, T>,
    scratch: &mut ReplayScratch<'a, V, V2, T, R, R2>,
    input_acc: &mut Vec<(Ref<'a, V>, R)>,
    output_acc: &mut Vec<(V2, R2)>,
    desired: &mut Vec<(V2, R2)>,
    logic: &mut impl FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    emit: &mut impl FnMut(&V2, &T, &R2),
    defer: &mut impl FnMut(&T),
) where
    V: Data,
    V2: Data,
    T: Time,
    R: Semigroup,
    R2: Semigroup + Abelian,
{
    let ReplayScratch {
        passed_input,
        passed_output,
        examined,
        synthetic,
        joins,
        input,
        output: advanced,
        produced,
        suffix_meets: [input_meets, output_meets, time_meets],
    } = scratch;
    suffix_meets(times, |t| t, time_meets);
    let Some(first_meet) = time_meets.first().cloned() else {
        return;
    };
    // Only times at or after the meet of the new times are examined, so histories can be
    // advanced by it (into copies: `output` must keep its true times).
    input.clear();
    input.extend(
        history
            .iter()
            .map(|(v, t, r)| (*v, t.join(&first_meet), r.clone())),
    );
    input.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    advanced.clear();
    advanced.extend(
        output
            .iter()
            .map(|(v, t, r)| (v.clone(), t.join(&first_meet), r.clone())),
    );
    advanced.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    suffix_meets(input, |u| &u.1, input_meets);
    suffix_meets(advanced, |u| &u.1, output_meets);
    examined.clear();
    // Sorted descending: the least synthetic time is last.
    synthetic.clear();
    passed_input.clear();
    passed_output.clear();
    produced.clear();

    let (mut next_input, mut next_output, mut next_time) = (0, 0, 0);
    let mut meet: Option<T> = None;
    loop {
        let candidates = [
            input.get(next_input).map(|u| &u.1),
            advanced.get(next_output).map(|u| &u.1),
            times.get(next_time),
            synthetic.last(),
        ];
        let Some(now) = candidates.into_iter().flatten().min().cloned() else {
            break;
        };
        while next_input < input.len() && input[next_input].1 == now {
            passed_input.push(input[next_input].clone());
            next_input += 1;
        }
        while next_output < advanced.len() && advanced[next_output].1 == now {
            passed_output.push(advanced[next_output].clone());
            next_output += 1;
        }
        let mut interesting = false;
        while synthetic.last() == Some(&now) {
            synthetic.pop();
            interesting = true;
        }
        while times.get(next_time) == Some(&now) {
            next_time += 1;
            interesting = true;
        }
        interesting = interesting || examined.iter().any(|t| t.less_equal(&now));

        if !upper.less_equal(&now) {
            // Joins with `now` that lie ahead. Any time joins with examined times; an
            // interesting time also with the passed updates (it carries a new time into them).
            joins.clear();
            let ahead = |t: &T| (!t.less_equal(&now)).then(|| t.join(&now));
            joins.extend(examined.iter().filter_map(ahead));
            if interesting {
                joins.extend(passed_input.iter().filter_map(|u| ahead(&u.1)));
                joins.extend(passed_output.iter().filter_map(|u| ahead(&u.1)));
            }
            joins.sort_unstable();
            joins.dedup();
            let before = synthetic.len();
            for join in joins.drain(..) {
                if upper.less_equal(&join) {
                    defer(&join);
                } else {
                    synthetic.push(join);
                }
            }
            if synthetic.len() > before {
                synthetic.sort_unstable_by(|a, b| b.cmp(a));
                synthetic.dedup();
            }

            if interesting {
                examined.push(now.clone());
                input_acc.clear();
                input_acc.extend(
                    passed_input
                        .iter()
                        .filter(|u| u.1.less_equal(&now))
                        .map(|u| (u.0, u.2.clone())),
                );
                consolidate_pairs(input_acc);
                output_acc.clear();
                output_acc.extend(
                    passed_output
                        .iter()
                        .filter(|u| u.1.less_equal(&now))
                        .map(|u| (u.0.clone(), u.2.clone())),
                );
                consolidate_pairs(output_acc);
                desired.clear();
                if !input_acc.is_empty() {
                    logic(input_acc, desired);
                    consolidate_pairs(desired);
                }
                corrections(desired, output_acc, |val, diff| {
                    emit(&val, &now, &diff);
                    produced.push((val.clone(), now.clone(), diff.clone()));
                    passed_output.push((val, now.clone(), diff));
                });
            }
        } else if interesting {
            defer(&now);
        }

        // Everything still to come is at least this meet.
        let mut next_meet = None;
        meet_into(&mut next_meet, input_meets.get(next_input));
        meet_into(&mut next_meet, output_meets.get(next_output));
        meet_into(&mut next_meet, time_meets.get(next_time));
        for time in synthetic.iter() {
            meet_into(&mut next_meet, Some(time));
        }
        if let Some(advanced) = &next_meet {
            if meet.as_ref() != Some(advanced) {
                advance_and_consolidate(passed_input, advanced);
                advance_and_consolidate(passed_output, advanced);
                for time in examined.iter_mut() {
                    time.join_assign(advanced);
                }
                examined.sort_unstable();
                examined.dedup();
                meet = next_meet;
            }
        }
    }
    output.append(produced);
}

/// Calls `correct(value, diff)` for each value whose diff in `desired` differs from `current`
/// (both consolidated, sorted by value), with `desired - current`.
pub(crate) fn corrections<V2: Data, R2: Semigroup + Abelian>(
    desired: &[(V2, R2)],
    current: &[(V2, R2)],
    mut correct: impl FnMut(V2, R2),
) {
    let (mut d, mut c) = (0, 0);
    while d < desired.len() || c < current.len() {
        let order = match (desired.get(d), current.get(c)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                correct(desired[d].0.clone(), desired[d].1.clone());
                d += 1;
            }
            std::cmp::Ordering::Greater => {
                let mut diff = current[c].1.clone();
                diff.negate();
                correct(current[c].0.clone(), diff);
                c += 1;
            }
            std::cmp::Ordering::Equal => {
                let mut diff = current[c].1.clone();
                diff.negate();
                diff.plus_equals(&desired[d].1);
                if !diff.is_zero() {
                    correct(desired[d].0.clone(), diff);
                }
                d += 1;
                c += 1;
            }
        }
    }
}

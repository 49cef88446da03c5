//! An arrangement imported into a second dataflow, created midway, gives the same join output
//! as the join built in one dataflow from the start; on 1 and 3 workers.

mod common;

use common::workload;
use ripple_dataflow::{Captured, InputSession};

type Output = Vec<((u64, u64), u64, i64)>;

fn run(workers: usize, import_at: Option<u64>) -> Output {
    let captured = Captured::new();
    let sink = captured.clone();
    let input = workload(5, 16, 40, 30, 12);
    timely::execute(timely::Config::process(workers), move |worker| {
        let mut edges = InputSession::<u64, (u64, u64)>::new();
        let mut keys = InputSession::<u64, (u64, ())>::new();
        let feeds = worker.index() == 0;
        let mut agent = None;
        let mut probe = match import_at {
            Some(_) => {
                let (arranged, p) = worker.dataflow(|scope| {
                    let arranged = edges.to_collection(scope).arrange_by_key();
                    let (p, _) = arranged.clone().as_collection().probe();
                    (arranged.trace, p)
                });
                agent = Some(arranged);
                Some(p)
            }
            None => {
                let p = worker.dataflow(|scope| {
                    let edges = edges.to_collection(scope).arrange_by_key();
                    let (p, joined) = keys
                        .to_collection(scope)
                        .arrange_by_key()
                        .join_core(edges, |src, (), dst| (*src, *dst))
                        .probe();
                    joined.capture_into(&sink);
                    p
                });
                Some(p)
            }
        };
        let mut next = 0;
        for time in 0..=input.max_time {
            if Some(time) == import_at {
                let agent = agent.take().expect("arranged");
                probe = Some(worker.dataflow(|scope| {
                    let (p, joined) = keys
                        .to_collection(scope)
                        .arrange_by_key()
                        .join_core(agent.import(scope), |src, (), dst| (*src, *dst))
                        .probe();
                    joined.capture_into(&sink);
                    p
                }));
            }
            if feeds {
                while next < input.edges.len() && input.edges[next].1 == time {
                    let (edge, _, diff) = input.edges[next];
                    edges.update(edge, diff);
                    next += 1;
                }
                if time == 6 {
                    for key in [0, 3, 5, 7] {
                        keys.insert((key, ()));
                    }
                }
                if time == 9 {
                    keys.remove((3, ()));
                }
            }
            edges.advance_to(time + 1).unwrap();
            keys.advance_to(time + 1).unwrap();
            let probe = probe.as_ref().unwrap();
            worker.step_while(|| probe.less_than(&(time + 1)));
        }
    })
    .unwrap()
    .join()
    .into_iter()
    .for_each(|result| result.expect("worker completes"));
    captured.consolidated()
}

#[test]
fn imported_arrangement_joins_like_a_local_one() {
    let expected = run(1, None);
    assert!(!expected.is_empty());
    for workers in [1, 3] {
        assert_eq!(run(workers, None), expected, "{workers} workers, local");
        assert_eq!(
            run(workers, Some(4)),
            expected,
            "{workers} workers, imported at 4"
        );
    }
}

//! Memory held by the merge batcher stays within 1.25x of the consolidated data it holds.
//!
//! Measured with the counting allocator, so capacity counts, not just length. After a seal the
//! batcher keeps its chains and at most a 64 KiB rows buffer (scratch and stash are released),
//! and every chunk's capacity is within 1.25x of its contents. One test function, so no other
//! test thread allocates meanwhile.

use ripple_batcher::{BatcherConfig, MergeBatcher};
use ripple_bench::alloc::{live_bytes, CountingAlloc};
use ripple_updates::update::Row;
use ripple_updates::{Antichain, Update, Updates};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn held_after_seal<U: Update>(
    rounds: &[Updates<U>],
    upper: U::Time,
    chunk_bytes: usize,
) -> (usize, usize) {
    let before = live_bytes();
    let mut batcher = MergeBatcher::<U>::new(BatcherConfig::with_chunk_bytes(chunk_bytes));
    for round in rounds {
        batcher.push_updates(round);
    }
    let shipped = batcher.seal(Antichain::from_elem(upper).borrow());
    drop(shipped);
    batcher.check_invariants();
    let held = live_bytes() - before;
    (held, batcher.byte_len())
}

#[test]
fn batcher_holds_at_most_a_quarter_more_than_its_data() {
    type IntU = (u64, u64, u64, i64);
    type StrU = (String, (), u64, i64);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let ints: Vec<Updates<IntU>> = (0..16)
        .map(|_| {
            let rows: Vec<Row<IntU>> = (0..20_000)
                .map(|_| (next() % 1_000_000, next() % 4, next() % 4, 1))
                .collect();
            Updates::from_rows(rows.iter())
        })
        .collect();
    let strings: Vec<Updates<StrU>> = (0..16)
        .map(|_| {
            let rows: Vec<Row<StrU>> = (0..10_000)
                .map(|_| {
                    (
                        format!(
                            "{:024}{}",
                            next() % 1_000_000,
                            "x".repeat((next() % 17) as usize)
                        ),
                        (),
                        next() % 4,
                        1,
                    )
                })
                .collect();
            Updates::from_rows(rows.iter())
        })
        .collect();

    for chunk_bytes in [4096, 64 << 10, BatcherConfig::CHUNK_BYTES_DEFAULT] {
        let (held, data) = held_after_seal(&ints, 2, chunk_bytes);
        assert!(data > 0);
        assert!(
            held * 4 <= data * 5 + 4096,
            "ints at {chunk_bytes}-byte chunks: held {held} bytes for {data} bytes of data"
        );
        let (held, data) = held_after_seal(&strings, 2, chunk_bytes);
        assert!(
            held * 4 <= data * 5 + 4096,
            "strings at {chunk_bytes}-byte chunks: held {held} bytes for {data} bytes of data"
        );
    }
}

//! The result's changes as text, and their checksum.
//!
//! Each step's output is complete once the workers have run past the step's end, and steps
//! cover disjoint, increasing times; so consolidating and sorting each step on its own yields
//! the whole run's output sorted by time then value, whatever the batching and the workers.

use crate::computation::{Computation, Value};
use ripple_updates::consolidate::consolidate_owned_triples;
use std::io::Write;

/// One output change: `(value, time, diff)`.
pub type Row = (Value, u64, i64);

/// One output change as the drivers gather it for the sink, `(time, value, diff)`: time first,
/// so that consolidating a step sorts it into output order in place.
pub type TimedRow = (u64, Value, i64);

/// FNV-1a (64-bit) over the output rows: for each row in output order, the little-endian
/// bytes of its printed value fields (as u64), its time (u64) and its diff (i64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checksum(pub u64);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(0xCBF2_9CE4_8422_2325)
    }
}

impl Checksum {
    fn bytes(&mut self, bytes: [u8; 8]) {
        for byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01B3);
        }
    }

    /// Folds in one row of `computation`'s output.
    pub fn row(&mut self, computation: Computation, row: &Row) {
        let ((first, second), time, diff) = *row;
        self.bytes(first.to_le_bytes());
        if computation.columns() == 2 {
            self.bytes(second.to_le_bytes());
        }
        self.bytes(time.to_le_bytes());
        self.bytes(diff.to_le_bytes());
    }
}

/// Buffers of at most this many rows keep their allocation from step to step whatever the steps'
/// sizes.
const KEPT_ROWS_MIN: usize = 1 << 10;

/// Gives back most of the emptied `buffer`'s room when it is more than four times what a step
/// of `used` rows needed: a load's output would otherwise stay allocated for the whole run,
/// while steps of about the same size keep reusing it.
fn shrink_after<T>(buffer: &mut Vec<T>, used: usize) {
    let keep = (2 * used).max(KEPT_ROWS_MIN);
    if buffer.capacity() > 2 * keep {
        buffer.shrink_to(keep);
    }
}

/// Where a run's output goes: lines to a writer, or only into the checksum.
pub struct OutputSink {
    computation: Computation,
    writer: Option<Box<dyn Write + Send>>,
    /// Whether each step's rows are flushed at once (a stream's readers see them as soon as
    /// their time is complete); otherwise they go out as the writer's buffer fills.
    flush_steps: bool,
    checksum: Checksum,
    rows: u64,
    line: Vec<u8>,
}

impl OutputSink {
    pub fn new(
        computation: Computation,
        writer: Option<Box<dyn Write + Send>>,
        flush_steps: bool,
    ) -> Self {
        Self {
            computation,
            writer,
            flush_steps,
            checksum: Checksum::default(),
            rows: 0,
            line: Vec::new(),
        }
    }

    /// Consolidates one step's rows, which leaves them sorted by time then value, and emits
    /// them. Leaves `rows` empty, its allocation kept unless it is much bigger than this step
    /// needed: the drivers gather every step into the same vector.
    pub fn step(&mut self, rows: &mut Vec<TimedRow>) -> std::io::Result<()> {
        let gathered = rows.len();
        consolidate_owned_triples(rows);
        let result = self.emit(rows);
        rows.clear();
        shrink_after(rows, gathered);
        result?;
        match &mut self.writer {
            Some(writer) if self.flush_steps => writer.flush(),
            _ => Ok(()),
        }
    }

    /// Rows emitted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The checksum of the rows emitted so far.
    pub fn checksum(&self) -> Checksum {
        self.checksum
    }

    /// Goes on from `rows` rows of checksum `checksum`, emitted by the run resumed.
    pub fn resume(&mut self, rows: u64, checksum: Checksum) {
        self.rows = rows;
        self.checksum = checksum;
    }

    /// Writes out what the writer holds.
    pub fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.writer {
            Some(writer) => writer.flush(),
            None => Ok(()),
        }
    }

    fn emit(&mut self, rows: &[TimedRow]) -> std::io::Result<()> {
        for &(time, value, diff) in rows {
            let row = (value, time, diff);
            self.rows += 1;
            self.checksum.row(self.computation, &row);
            if let Some(writer) = &mut self.writer {
                self.line.clear();
                format_row(self.computation, &row, &mut self.line);
                writer.write_all(&self.line)?;
            }
        }
        Ok(())
    }

    /// Flushes the writer; returns the checksum and the number of rows.
    pub fn finish(mut self) -> std::io::Result<(Checksum, u64)> {
        if let Some(writer) = &mut self.writer {
            writer.flush()?;
        }
        Ok((self.checksum, self.rows))
    }
}

/// Appends `value,time,diff\n` (with `node,label` for a two-column value).
pub fn format_row(computation: Computation, row: &Row, line: &mut Vec<u8>) {
    let ((first, second), time, diff) = *row;
    // Writing into a Vec cannot fail.
    let _ = if computation.columns() == 2 {
        writeln!(line, "{first},{second},{time},{diff}")
    } else {
        writeln!(line, "{first},{time},{diff}")
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn steps_are_consolidated_and_sorted() {
        let buffer = Shared::default();
        let mut sink = OutputSink::new(Computation::Cc, Some(Box::new(buffer.clone())), false);
        let mut rows = vec![
            (5, (2, 1), 1),
            (5, (1, 1), 1),
            (4, (1, 1), 2),
            (5, (2, 1), -1),
        ];
        sink.step(&mut rows).unwrap();
        assert!(rows.is_empty());
        // The next step reuses the buffers; nothing of the first step is emitted again.
        rows.extend([(7, (3, 1), 1), (6, (3, 1), -1)]);
        sink.step(&mut rows).unwrap();
        let (checksum, count) = sink.finish().unwrap();
        assert_eq!(count, 4);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "1,1,4,2\n1,1,5,1\n3,1,6,-1\n3,1,7,1\n");

        // The checksum depends only on the consolidated rows, not on how they arrived.
        let mut other = OutputSink::new(Computation::Cc, None, true);
        other
            .step(&mut vec![(5, (1, 1), 1), (4, (1, 1), 1), (4, (1, 1), 1)])
            .unwrap();
        other
            .step(&mut vec![(7, (3, 1), 1), (6, (3, 1), -1)])
            .unwrap();
        assert_eq!(other.finish().unwrap(), (checksum, 4));
    }

    /// After a big step the rows' buffer gives back most of its room; steps of about the same
    /// size keep it.
    #[test]
    fn a_big_step_leaves_no_big_buffers() {
        let mut sink = OutputSink::new(Computation::Reach, None, false);
        let big = 100 * KEPT_ROWS_MIN as u64;
        let mut rows: Vec<TimedRow> = (0..big).map(|node| (1, (node, 0), 1)).collect();
        sink.step(&mut rows).unwrap();
        let kept = rows.capacity();
        assert!(kept >= big as usize, "a step keeps the room it just needed");
        rows.extend((0..big).map(|node| (2, (node, 0), -1)));
        sink.step(&mut rows).unwrap();
        assert_eq!(
            rows.capacity(),
            kept,
            "steps of the same size reuse the room"
        );
        rows.push((3, (0, 0), 1));
        sink.step(&mut rows).unwrap();
        assert!(rows.capacity() <= 2 * KEPT_ROWS_MIN);
        assert_eq!(sink.finish().unwrap().1, 2 * big + 1);
    }
}

//! Edge change files: one `src,dst,time,diff` update per line, and progress lines `@T`.
//!
//! A file read whole ([`read_changes`]) is parsed and checked before anything runs, so a
//! malformed line stops the run before a single output line is written. A stream
//! ([`crate::stream`]) is checked line by line as it arrives, with the same parser
//! ([`parse_record`]) and the same check of each completed time ([`Multiplicities`]).

use std::collections::HashMap;
use std::io::BufRead;
use thiserror::Error;

/// A node id.
pub type Node = u32;

/// A directed edge `(src, dst)`.
pub type Edge = (Node, Node);

/// One change to the graph: the multiplicity of `edge` changes by `diff` at `time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EdgeChange {
    pub time: u64,
    pub edge: Edge,
    pub diff: i64,
}

/// Why an input could not be read. Every variant names the input; format errors name the line.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: at time {time}, edge {src}->{dst} is removed more often than inserted (multiplicity {multiplicity})")]
    NegativeMultiplicity {
        file: String,
        /// 1-based line number of the last change to the edge at that time.
        line: usize,
        time: u64,
        src: Node,
        dst: Node,
        multiplicity: i64,
    },
    #[error("{file}:{line}: time {time} comes after {after}; a streamed input's times must not go back (read the file whole, without --follow, for times in any order)")]
    OutOfOrder {
        file: String,
        line: usize,
        time: u64,
        /// What the time is below: the time of an earlier line, or a progress line's.
        after: String,
    },
    #[error("{file}:{line}: at time {time}, {what} would leave the range of a 64-bit diff")]
    Overflow {
        file: String,
        line: usize,
        time: u64,
        /// The multiplicity or the node's edge count that would overflow.
        what: String,
    },
    #[error("{file}:{line}: expected {expected}, found {found}")]
    Malformed {
        file: String,
        /// 1-based line number.
        line: usize,
        expected: &'static str,
        found: String,
    },
}

const FIELDS: &str = "4 comma-separated fields `src,dst,time,diff`";
const NODE: &str = "a node id (an unsigned 32-bit integer)";
const TIME: &str = "a time (an unsigned 64-bit integer below 18446744073709551615)";
const DIFF: &str = "a diff (a signed 64-bit integer)";
const PROGRESS: &str =
    "a progress line `@T`, T a time (an unsigned 64-bit integer below 18446744073709551615)";

/// One line of an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A blank line or a comment (`#...`).
    Skip,
    Change(EdgeChange),
    /// `@T`: no change at a time below `T` follows; those times are complete.
    Progress(u64),
}

/// The header line a change file may start with, skipped.
const HEADER: &str = "src,dst,time,diff";

/// Parses the line `bytes` (the `line`-th of `file`, its newline included or not). A byte-order
/// mark opening the first line is skipped, and so is a line that is exactly the header
/// `src,dst,time,diff`.
pub fn parse_record(bytes: &[u8], file: &str, line: usize) -> Result<Record, InputError> {
    let malformed = |expected, found: &str| InputError::Malformed {
        file: file.to_string(),
        line,
        expected,
        found: escaped(found),
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| malformed("UTF-8 text", "bytes that are not UTF-8"))?;
    let text = if line == 1 {
        text.trim_start_matches('\u{feff}')
    } else {
        text
    };
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') || text.eq_ignore_ascii_case(HEADER) {
        return Ok(Record::Skip);
    }
    if let Some(time) = text.strip_prefix('@') {
        let time = time.trim();
        return match time.parse::<u64>().ok().filter(|time| *time < u64::MAX) {
            Some(time) => Ok(Record::Progress(time)),
            None => Err(malformed(PROGRESS, &format!("`{text}`"))),
        };
    }
    parse_line(text).map(Record::Change).map_err(|(expected, found)| {
        // A word where the first number should be: most likely a header of other names.
        let worded = text.split(',').next().is_some_and(|field| {
            field.trim().starts_with(|c: char| c.is_alphabetic())
        });
        if worded {
            let hint = format!("{found} (a header line? ripple skips `{HEADER}`; begin other headers with `#`)");
            malformed(expected, &hint)
        } else {
            malformed(expected, &found)
        }
    })
}

/// `text` with control characters and byte-order marks written as escapes, so that a message
/// shows what the input holds.
fn escaped(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\u{feff}' {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Every edge's multiplicity after the times checked so far, and every node's edge counts.
/// After each time every edge's multiplicity must be non-negative: removing an edge that is
/// not there is an error, not something to compute with. Within a time the order of the
/// changes does not matter.
///
/// No running sum may leave the 64-bit range of a diff, change by change in the input's
/// order: an edge's multiplicity, a node's out-edges (the degree `degrees` counts) and its
/// out- and in-edges together (what `cc`'s undirected edges and `bfs`'s and `reach`'s joins
/// sum at a node). The engine adds diffs without checks in release builds, so a sum that
/// wrapped would be a wrong answer, not an error.
#[derive(Debug, Default)]
pub struct Multiplicities {
    counts: HashMap<Edge, i64>,
    /// Per node: the multiplicities of its out-edges and of its in-edges, summed.
    degrees: HashMap<Node, (i64, i64)>,
}

impl Multiplicities {
    /// Applies the changes of one time, each with its line, and fails, naming the line of the
    /// last change to the edge, if an edge's multiplicity is then negative; or naming the line
    /// of a change whose running sums would overflow.
    pub fn apply_time(
        &mut self,
        group: &[(EdgeChange, usize)],
        file: &str,
    ) -> Result<(), InputError> {
        for (change, line) in group {
            self.apply(change).map_err(|what| InputError::Overflow {
                file: file.to_string(),
                line: *line,
                time: change.time,
                what,
            })?;
        }
        for (change, line) in group.iter().rev() {
            let multiplicity = self.counts.get(&change.edge).copied().unwrap_or(0);
            if multiplicity < 0 {
                return Err(InputError::NegativeMultiplicity {
                    file: file.to_string(),
                    line: *line,
                    time: change.time,
                    src: change.edge.0,
                    dst: change.edge.1,
                    multiplicity,
                });
            }
        }
        Ok(())
    }

    /// Adds an edge's multiplicity at a checkpoint a run resumes from; or says which running
    /// sum would overflow.
    pub fn seed(&mut self, edge: Edge, diff: i64) -> Result<(), String> {
        self.apply(&EdgeChange {
            edge,
            time: 0,
            diff,
        })
    }

    /// Adds one change to the running sums, or says which would overflow (changing nothing).
    fn apply(&mut self, change: &EdgeChange) -> Result<(), String> {
        let ((src, dst), diff) = (change.edge, change.diff);
        let count = self.counts.get(&change.edge).copied().unwrap_or(0);
        let count = count
            .checked_add(diff)
            .ok_or_else(|| format!("the multiplicity of edge {src}->{dst}"))?;
        let (src_out, src_in) = self.degrees.get(&src).copied().unwrap_or((0, 0));
        let src_out = src_out
            .checked_add(diff)
            .ok_or_else(|| format!("the out-edges of node {src}"))?;
        // A loop is an out- and an in-edge of the same node.
        let (dst_out, dst_in) = if src == dst {
            (src_out, src_in)
        } else {
            self.degrees.get(&dst).copied().unwrap_or((0, 0))
        };
        let dst_in = dst_in
            .checked_add(diff)
            .ok_or_else(|| format!("the in-edges of node {dst}"))?;
        let src_in = if src == dst { dst_in } else { src_in };
        for (node, out, into) in [(src, src_out, src_in), (dst, dst_out, dst_in)] {
            if out.checked_add(into).is_none() {
                return Err(format!("the edges of node {node}"));
            }
        }
        // Zero sums are not kept: the maps hold only the edges and nodes present.
        set_or_remove(&mut self.counts, change.edge, count, 0);
        set_or_remove(&mut self.degrees, src, (src_out, src_in), (0, 0));
        if src != dst {
            set_or_remove(&mut self.degrees, dst, (dst_out, dst_in), (0, 0));
        }
        Ok(())
    }
}

/// Sets `key` to `value` in `map`, or removes it when `value` is `zero`.
fn set_or_remove<K: std::hash::Hash + Eq, V: PartialEq>(
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
    zero: V,
) {
    if value == zero {
        map.remove(&key);
    } else {
        map.insert(key, value);
    }
}

/// Reads every change in `reader` (named `file` in errors), sorted by time; lines of one time
/// keep their order. Blank lines, lines starting with `#` and progress lines are skipped (read
/// whole, times may come in any order, so progress lines say nothing). Each time's changes are
/// checked as [`Multiplicities`] says.
pub fn read_changes(reader: impl BufRead, file: &str) -> Result<Vec<EdgeChange>, InputError> {
    let mut changes = Vec::new();
    let mut bytes = Vec::new();
    let mut reader = reader;
    let mut line = 0;
    loop {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|source| InputError::Io {
                file: file.to_string(),
                source,
            })?;
        if read == 0 {
            break;
        }
        line += 1;
        if let Record::Change(change) = parse_record(&bytes, file, line)? {
            changes.push((change, line));
        }
    }
    // Stable: the changes of one time keep the file's order.
    changes.sort_by_key(|(change, _)| change.time);
    let mut multiplicities = Multiplicities::default();
    for group in changes.chunk_by(|a, b| a.0.time == b.0.time) {
        multiplicities.apply_time(group, file)?;
    }
    Ok(changes.into_iter().map(|(change, _)| change).collect())
}

/// Parses one non-blank line, or says what was expected and what was found.
fn parse_line(text: &str) -> Result<EdgeChange, (&'static str, String)> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() != 4 {
        return Err((FIELDS, format!("{} field(s) in `{text}`", fields.len())));
    }
    let quoted = |field: &str| format!("`{field}`");
    let src = fields[0]
        .parse::<Node>()
        .map_err(|_| (NODE, format!("src {}", quoted(fields[0]))))?;
    let dst = fields[1]
        .parse::<Node>()
        .map_err(|_| (NODE, format!("dst {}", quoted(fields[1]))))?;
    let time = fields[2]
        .parse::<u64>()
        .ok()
        // The run advances past the last time, so the largest u64 cannot be a time.
        .filter(|time| *time < u64::MAX)
        .ok_or_else(|| (TIME, format!("time {}", quoted(fields[2]))))?;
    let diff = fields[3]
        .parse::<i64>()
        .map_err(|_| (DIFF, format!("diff {}", quoted(fields[3]))))?;
    Ok(EdgeChange {
        time,
        edge: (src, dst),
        diff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<EdgeChange>, InputError> {
        read_changes(text.as_bytes(), "in.csv")
    }

    #[test]
    fn reads_sorts_and_skips() {
        let changes = read("# header\n1,2,5,1\n\n 3 , 4 , 0 , 2 \n5,6,5,1").unwrap();
        let expected = [(0, (3, 4), 2), (5, (1, 2), 1), (5, (5, 6), 1)];
        let expected: Vec<_> = expected
            .iter()
            .map(|&(time, edge, diff)| EdgeChange { time, edge, diff })
            .collect();
        assert_eq!(changes, expected);
    }

    #[test]
    fn names_line_and_expectation() {
        let cases = [
            ("1,2,3", "in.csv:1: expected 4 comma-separated fields"),
            ("\n\n1,2,3,4,5", "in.csv:3: expected 4 comma-separated"),
            (
                "-1,2,3,4",
                "in.csv:1: expected a node id (an unsigned 32-bit integer), found src `-1`",
            ),
            ("1,4294967296,3,4", "found dst `4294967296`"),
            ("1,2,x,4", "expected a time"),
            (
                "1,2,18446744073709551615,4",
                "found time `18446744073709551615`",
            ),
            (
                "1,2,3,1.5",
                "expected a diff (a signed 64-bit integer), found diff `1.5`",
            ),
            ("1,2,3,", "found diff ``"),
        ];
        for (text, message) in cases {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains(message), "{text:?}: {error}");
        }
        let error = read_changes(&b"1,2,3,4\n\xff,2,3,4\n"[..], "in.csv")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("in.csv:2: expected UTF-8 text"),
            "{error}"
        );
    }

    #[test]
    fn progress_lines_parse_and_are_skipped_when_read_whole() {
        assert_eq!(
            parse_record(b"@12\n", "f", 1).unwrap(),
            Record::Progress(12)
        );
        assert_eq!(parse_record(b" @ 3 ", "f", 1).unwrap(), Record::Progress(3));
        assert_eq!(parse_record(b"# @3", "f", 1).unwrap(), Record::Skip);
        let error = parse_record(b"@x", "f", 4).unwrap_err().to_string();
        assert!(
            error.starts_with("f:4: expected a progress line `@T`"),
            "{error}"
        );
        let changes = read("1,2,5,1\n@9\n3,4,0,1\n").unwrap();
        assert_eq!(changes.len(), 2);
    }

    #[test]
    fn boms_headers_and_control_bytes() {
        let changes = read("\u{feff}src,dst,time,diff\n1,2,0,1\n").unwrap();
        assert_eq!(changes.len(), 1);
        let error = read("source,target,t,d\n1,2,0,1\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("found src `source` (a header line?"),
            "{error}"
        );
        let error = read("1,2,0,1\n\u{feff}1,2,0,1\n").unwrap_err().to_string();
        assert!(error.contains("src `\\u{feff}1`"), "{error}");
        let error = read("1\u{1b}[2J,2,0,1\n").unwrap_err().to_string();
        assert!(error.contains("src `1\\u{1b}[2J`"), "{error}");
    }

    #[test]
    fn running_sums_may_not_overflow() {
        let max = i64::MAX;
        // An edge's multiplicity.
        let error = read(&format!("0,1,0,{max}\n0,1,0,1\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "in.csv:2: at time 0, the multiplicity of edge 0->1 would leave the range of a 64-bit diff"
        );
        // A node's out-edges (two edges of the largest multiplicity).
        let error = read(&format!("0,1,0,{max}\n0,2,1,{max}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("in.csv:2: at time 1, the out-edges of node 0"),
            "{error}"
        );
        // A node's out- and in-edges together.
        let error = read(&format!("0,1,0,{max}\n2,0,0,1\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("the edges of node 0"), "{error}");
        // Large but in range: fine, and removals bring the sums back.
        assert!(read(&format!("0,1,0,{}\n0,1,1,-5\n0,2,1,5\n", max - 1)).is_ok());
    }

    #[test]
    fn rejects_removing_absent_edges() {
        // Within a time the order does not matter; across times it does.
        assert!(read("1,2,0,-1\n1,2,0,1\n1,2,0,1\n1,2,1,-1").is_ok());
        let error = read("1,2,0,1\n1,2,3,-1\n# c\n1,2,3,-1\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "in.csv:4: at time 3, edge 1->2 is removed more often than inserted (multiplicity -1)"
        );
    }
}

//! Edge change files: one `src,dst,time,diff` update per line.
//!
//! The whole input is parsed and checked before anything runs, so a malformed line stops the run
//! before a single output line is written.

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

/// Reads every change in `reader` (named `file` in errors), sorted by time; lines of one time
/// keep their order. Blank lines and lines starting with `#` are skipped.
///
/// After each time every edge's multiplicity must be non-negative: removing an edge that is
/// not there is an error, not something to compute with.
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
        let malformed = |expected, found: &str| InputError::Malformed {
            file: file.to_string(),
            line,
            expected,
            found: found.to_string(),
        };
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| malformed("UTF-8 text", "bytes that are not UTF-8"))?
            .trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let change = parse_line(text).map_err(|(expected, found)| malformed(expected, &found))?;
        changes.push((change, line));
    }
    // Stable: the changes of one time keep the file's order.
    changes.sort_by_key(|(change, _)| change.time);
    check_multiplicities(&changes, file)?;
    Ok(changes.into_iter().map(|(change, _)| change).collect())
}

/// Fails on the first time after which some edge has a negative multiplicity.
fn check_multiplicities(changes: &[(EdgeChange, usize)], file: &str) -> Result<(), InputError> {
    let mut multiplicities: HashMap<Edge, i64> = HashMap::new();
    for group in changes.chunk_by(|a, b| a.0.time == b.0.time) {
        for (change, _) in group {
            let count = multiplicities.entry(change.edge).or_insert(0);
            *count = count.saturating_add(change.diff);
        }
        for (change, line) in group.iter().rev() {
            let multiplicity = multiplicities[&change.edge];
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
        for (change, _) in group {
            if multiplicities.get(&change.edge) == Some(&0) {
                multiplicities.remove(&change.edge);
            }
        }
    }
    Ok(())
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

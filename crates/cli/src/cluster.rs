//! Connecting the processes of a cluster: ripple opens the TCP connections itself, with a
//! timeout and a handshake, and hands them to timely.
//!
//! As timely does, process `p` connects to every process before it and accepts a connection
//! from every process after it. Each connection begins with a *hello* from both ends: the
//! sender's index and its settings (ripple's version, the computation, the workers per
//! process, the number of processes, the roots and the progress mode). Processes whose
//! settings differ would exchange data neither can decode, so the run fails at once, saying
//! which settings differ. A process that does not connect (or answer) within the timeout
//! fails the run with a message naming it; waiting is reported on stderr, never on stdout.
//!
//! Once running, a connection that breaks (a peer killed) panics inside timely's
//! communication threads with a message beginning [`TIMELY_COMMUNICATION_ERROR`]; the
//! `ripple` command turns that into an error naming the lost process (see
//! [`lost_process`]).

use crate::options::RunOptions;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set once this process stops its peers because one of its workers failed: the breaks that
/// follow in its own connections are expected, not news (see [`stop_peers`]).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Ends this process's connections, so that the other processes, which would wait forever
/// for a failed worker's progress, stop too ("lost the connection to process ...").
pub fn stop_peers(connections: &[TcpStream]) {
    STOPPING.store(true, Ordering::Release);
    for connection in connections {
        let _ = connection.shutdown(Shutdown::Both);
    }
}

/// Whether this process is stopping its peers (see [`stop_peers`]).
pub fn stopping() -> bool {
    STOPPING.load(Ordering::Acquire)
}

/// What timely's communication threads begin their panic messages with.
pub const TIMELY_COMMUNICATION_ERROR: &str = "timely communication error:";

/// The first word of a hello, `RPLHELLO`.
const MAGIC: u64 = u64::from_le_bytes(*b"RPLHELLO");

/// How often waiting is reported.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// The connections of one process to the others: `None` at its own index.
pub type Sockets = Vec<Option<TcpStream>>;

/// Why the processes could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("could not listen on {address}: {source}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    #[error("process {process} did not connect to {address} within {seconds} s")]
    NotConnected {
        process: usize,
        address: String,
        seconds: u64,
    },
    #[error("process {process} at {address} did not answer within {seconds} s")]
    NoAnswer {
        process: usize,
        address: String,
        seconds: u64,
    },
    #[error("process {process} was started with other settings: {differences}")]
    Mismatch { process: usize, differences: String },
    #[error("the handshake with process {process} failed: {reason}")]
    Handshake { process: usize, reason: String },
}

/// The settings every process must share, as `(name, value)` pairs.
pub fn settings(options: &RunOptions) -> Vec<(String, String)> {
    let cluster = &options.cluster;
    let roots: Vec<String> = options.roots.iter().map(u32::to_string).collect();
    [
        ("ripple", env!("CARGO_PKG_VERSION").to_string()),
        ("computation", options.computation.name().to_string()),
        ("workers", cluster.workers.to_string()),
        ("processes", cluster.hosts.len().to_string()),
        ("roots", roots.join(",")),
        (
            "progress mode",
            format!("{:?}", cluster.progress_mode).to_lowercase(),
        ),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect()
}

/// Connects this process to the others of `options.cluster`, all within `timeout`.
pub fn connect(options: &RunOptions, timeout: Duration) -> Result<Sockets, ClusterError> {
    let cluster = &options.cluster;
    let (me, hosts) = (cluster.process, &cluster.hosts);
    let hello = encode_hello(me, &settings(options));
    let deadline = Instant::now() + timeout;
    let seconds = timeout.as_secs();
    // Listen first, so that the processes after this one can connect while it connects.
    let listener = if me + 1 < hosts.len() {
        let address = &hosts[me];
        let listen = TcpListener::bind(address).and_then(|listener| {
            listener.set_nonblocking(true)?;
            Ok(listener)
        });
        Some(listen.map_err(|source| ClusterError::Listen {
            address: address.clone(),
            source,
        })?)
    } else {
        None
    };
    let mut sockets: Sockets = (0..hosts.len()).map(|_| None).collect();
    for (process, address) in hosts.iter().enumerate().take(me) {
        let mut stream = connect_to(process, address, deadline, seconds)?;
        stream
            .write_all(&hello)
            .map_err(|error| handshake_error(process, &error))?;
        let (index, theirs) = read_hello(&mut stream, deadline, process, address, seconds)?;
        if index != process {
            let reason = format!("it says it is process {index}");
            return Err(ClusterError::Handshake { process, reason });
        }
        compare(process, &settings(options), &theirs)?;
        sockets[process] = Some(stream);
    }
    if let Some(listener) = listener {
        let address = &hosts[me];
        let mut last_report = Instant::now();
        while let Some(waiting) = (me + 1..hosts.len()).find(|&p| sockets[p].is_none()) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|error| handshake_error(waiting, &error))?;
                    let (index, theirs) =
                        read_hello(&mut stream, deadline, waiting, address, seconds)?;
                    if index <= me || index >= hosts.len() || sockets[index].is_some() {
                        let reason = format!("a process says it is process {index}");
                        return Err(ClusterError::Handshake {
                            process: waiting,
                            reason,
                        });
                    }
                    stream
                        .write_all(&hello)
                        .map_err(|error| handshake_error(index, &error))?;
                    compare(index, &settings(options), &theirs)?;
                    sockets[index] = Some(stream);
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(ClusterError::NotConnected {
                            process: waiting,
                            address: address.clone(),
                            seconds,
                        });
                    }
                    if last_report.elapsed() >= REPORT_EVERY {
                        eprintln!("ripple: waiting for process {waiting} to connect to {address}");
                        last_report = Instant::now();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(source) => {
                    return Err(ClusterError::Listen {
                        address: address.clone(),
                        source,
                    })
                }
            }
        }
    }
    for stream in sockets.iter().flatten() {
        // The handshake read with a timeout; timely reads without.
        let _ = stream.set_read_timeout(None);
        let _ = stream.set_nodelay(true);
    }
    Ok(sockets)
}

/// Connects to `process` at `address`, retrying until `deadline`.
fn connect_to(
    process: usize,
    address: &str,
    deadline: Instant,
    seconds: u64,
) -> Result<TcpStream, ClusterError> {
    let mut last_report = Instant::now();
    loop {
        // Every address the name resolves to, as the listener binds them all.
        let attempt = address.to_socket_addrs().and_then(|addresses| {
            let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no such address");
            for found in addresses {
                let left = deadline.saturating_duration_since(Instant::now());
                match TcpStream::connect_timeout(&found, left.max(Duration::from_millis(10))) {
                    Ok(stream) => return Ok(stream),
                    Err(error) => last = error,
                }
            }
            Err(last)
        });
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(_) if Instant::now() < deadline => {
                if last_report.elapsed() >= REPORT_EVERY {
                    eprintln!("ripple: waiting for process {process} at {address}");
                    last_report = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => {
                return Err(ClusterError::NoAnswer {
                    process,
                    address: address.to_string(),
                    seconds,
                })
            }
        }
    }
}

fn handshake_error(process: usize, error: &std::io::Error) -> ClusterError {
    ClusterError::Handshake {
        process,
        reason: error.to_string(),
    }
}

/// A hello: magic, sender's index, settings' length, settings as `name=value` lines.
fn encode_hello(index: usize, settings: &[(String, String)]) -> Vec<u8> {
    let text: String = settings
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect();
    let mut bytes = Vec::with_capacity(24 + text.len());
    bytes.extend(MAGIC.to_le_bytes());
    bytes.extend((index as u64).to_le_bytes());
    bytes.extend((text.len() as u64).to_le_bytes());
    bytes.extend(text.as_bytes());
    bytes
}

/// Reads a hello from `stream` (expected from `process`), by `deadline`.
fn read_hello(
    stream: &mut TcpStream,
    deadline: Instant,
    process: usize,
    address: &str,
    seconds: u64,
) -> Result<(usize, Vec<(String, String)>), ClusterError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let _ = stream.set_read_timeout(Some(left.max(Duration::from_millis(10))));
    let mut read = |buf: &mut [u8]| {
        stream.read_exact(buf).map_err(|error| match error.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ClusterError::NoAnswer {
                    process,
                    address: address.to_string(),
                    seconds,
                }
            }
            _ => handshake_error(process, &error),
        })
    };
    let mut head = [0u8; 24];
    read(&mut head)?;
    let word = |i: usize| u64::from_le_bytes(head[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    if word(0) != MAGIC {
        let reason = "it is not a ripple process of this version".to_string();
        return Err(ClusterError::Handshake { process, reason });
    }
    let length = word(2);
    if length > 1 << 16 {
        let reason = format!("a hello of {length} bytes");
        return Err(ClusterError::Handshake { process, reason });
    }
    let mut text = vec![0u8; length as usize];
    read(&mut text)?;
    let settings = String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    Ok((word(1) as usize, settings))
}

/// Fails, naming every difference, unless `theirs` (of `process`) equals `ours`.
fn compare(
    process: usize,
    ours: &[(String, String)],
    theirs: &[(String, String)],
) -> Result<(), ClusterError> {
    let value = |settings: &[(String, String)], name: &str| {
        settings
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(|| "unset".to_string(), |(_, v)| v.clone())
    };
    let differences: Vec<String> = ours
        .iter()
        .filter(|(name, value_here)| value(theirs, name) != *value_here)
        .map(|(name, here)| format!("{name} {} there, {here} here", value(theirs, name)))
        .collect();
    if differences.is_empty() {
        Ok(())
    } else {
        Err(ClusterError::Mismatch {
            process,
            differences: differences.join("; "),
        })
    }
}

/// For a panic of timely's communication thread `thread` (`timely:send-N` or
/// `timely:recv-N`) with `message`: the process whose connection broke, and why.
pub fn lost_process(thread: &str, message: &str) -> Option<(usize, String)> {
    let cause = message.strip_prefix(TIMELY_COMMUNICATION_ERROR)?;
    let index = thread
        .strip_prefix("timely:send-")
        .or_else(|| thread.strip_prefix("timely:recv-"))?
        .parse()
        .ok()?;
    Some((index, cause.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_named() {
        let ours = vec![
            ("computation".to_string(), "bfs".to_string()),
            ("workers".to_string(), "2".to_string()),
        ];
        let theirs = vec![
            ("computation".to_string(), "cc".to_string()),
            ("workers".to_string(), "2".to_string()),
        ];
        let error = compare(1, &ours, &theirs).unwrap_err().to_string();
        assert_eq!(
            error,
            "process 1 was started with other settings: computation cc there, bfs here"
        );
        assert!(compare(1, &ours, &ours).is_ok());
    }

    #[test]
    fn lost_processes_are_named() {
        assert_eq!(
            lost_process(
                "timely:recv-1",
                "timely communication error: reading data: reset"
            ),
            Some((1, "reading data: reset".to_string()))
        );
        assert_eq!(
            lost_process("worker", "timely communication error: x"),
            None
        );
        assert_eq!(lost_process("timely:recv-1", "other"), None);
    }
}

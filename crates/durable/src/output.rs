//! Output that survives a crash: rows written for the times below a checkpoint's frontier are
//! synced before the checkpoint commits (the application records the file's length then), and
//! a resumed run cuts the file back to that length before it writes on.

use crate::error::DurableError;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::Path;

/// Opens the output file `path` of a resumed run to write on after its first `length`
/// bytes, which a checkpoint recorded: what was written after them (rows of times after the
/// checkpoint) is cut. A file shorter than `length`, or missing, is not the run's output.
pub fn resume_file(path: &Path, length: u64) -> Result<File, DurableError> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|error| DurableError::io(path, error))?;
    let found = file
        .metadata()
        .map_err(|error| DurableError::io(path, error))?
        .len();
    if found < length {
        return Err(DurableError::damaged(
            path,
            format!(
                "the output holds {found} bytes, but the checkpoint had written {length}: it was cut or replaced"
            ),
        ));
    }
    file.set_len(length)
        .and_then(|()| file.sync_all())
        .and_then(|()| file.seek(SeekFrom::End(0)))
        .map_err(|error| DurableError::io(path, error))?;
    Ok(file)
}

//! Who stops the server. A process that finds a server already running must not stop it
//! from under the process that started it (say `gatehouse migrate` while `gatehouse up`
//! runs), but must take over one whose starter died, or nothing would ever stop it.
//! The starter's pid is kept in a file in the data directory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::pidfile;

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("gatehouse.owner")
}

/// Records this process as the one that stops the server.
pub(crate) fn claim(data_dir: &Path) -> Result<()> {
    let file = path(data_dir);
    fs::write(&file, format!("{}\n", std::process::id())).map_err(Error::io("write", file))
}

/// Whether the server's recorded owner is gone, so the caller should take it over. No record
/// means something other than this crate started the server; it is left to stop it.
pub(crate) fn orphaned(data_dir: &Path) -> bool {
    match fs::read_to_string(path(data_dir)) {
        Ok(text) => !text.trim().parse::<i32>().is_ok_and(pidfile::is_alive),
        Err(_) => false,
    }
}

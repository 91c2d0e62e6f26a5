//! `postmaster.pid`: how a running server is found and how a crashed one is recognised.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PostmasterPid {
    pub pid: i32,
    pub port: u16,
    /// `starting`, `ready`, `stopping` or `standby`; empty while the server sets up.
    pub status: String,
}

pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("postmaster.pid")
}

/// `None` when there is no pid file. Lines are documented in PostgreSQL's `pidfile.h`.
pub(crate) fn read(data_dir: &Path) -> Result<Option<PostmasterPid>> {
    let file = path(data_dir);
    let text = match fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", file)(e)),
    };
    Ok(Some(parse(&text)))
}

fn parse(text: &str) -> PostmasterPid {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let field = |i: usize| lines.get(i).copied().unwrap_or("");
    PostmasterPid {
        // A half-written or corrupt file parses as pid 0, which is treated as not running.
        pid: field(0).parse::<i32>().map(i32::abs).unwrap_or(0),
        port: field(3).parse().unwrap_or(0),
        status: field(7).to_string(),
    }
}

/// Whether `pid` is a live PostgreSQL process. After a reboot or in a fresh container the pid
/// in a stale file may belong to an unrelated process, so the program name is checked too.
pub(crate) fn is_postgres(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match kill(Pid::from_raw(pid), None) {
        Ok(()) | Err(Errno::EPERM) => {}
        Err(_) => return false,
    }
    match fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim() == "postgres",
        // Without /proc (not Linux) the signal check above is all there is.
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

/// Whether any process has this pid (signal 0 needs no permission to tell).
pub(crate) fn is_alive(pid: i32) -> bool {
    pid > 0 && matches!(kill(Pid::from_raw(pid), None), Ok(()) | Err(Errno::EPERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_ready_server() {
        let text = "4242\n/data\n1700000000\n54321\n/data\n127.0.0.1\n  1234567   98304\nready   \n";
        let pid = parse(text);
        assert_eq!(pid, PostmasterPid { pid: 4242, port: 54321, status: "ready".into() });
    }

    #[test]
    fn a_truncated_file_reads_as_not_running() {
        let pid = parse("");
        assert_eq!(pid.pid, 0);
        assert!(!is_postgres(pid.pid));
    }
}

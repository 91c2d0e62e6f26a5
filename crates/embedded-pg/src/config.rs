//! Server settings live in a file of their own, included from `postgresql.conf`, rather than
//! on pg_ctl's command line: pg_ctl hands `-o` to a shell, and data directory paths with
//! spaces or quotes would need shell quoting on top of PostgreSQL's own.

use std::fs;
use std::path::Path;

use crate::error::{Error, Result};

const FILE: &str = "gatehouse.conf";
const INCLUDE: &str = "include_if_exists = 'gatehouse.conf'";
pub(crate) const LOG_DIR: &str = "log";

/// A Unix socket path may hold 107 bytes; PostgreSQL appends `/.s.PGSQL.<port>` (up to 15).
const MAX_SOCKET_DIR: usize = 107 - 15;

/// Rewritten on every start because the port is chosen afresh each time.
pub(crate) fn write(data_dir: &Path, port: u16) -> Result<()> {
    let conf = data_dir.join("postgresql.conf");
    let text = fs::read_to_string(&conf).map_err(Error::io("read", &conf))?;
    if !text.lines().any(|line| line.trim() == INCLUDE) {
        let appended =
            format!("{}\n# Settings managed by gatehouse (rewritten on each start).\n{INCLUDE}\n", text.trim_end());
        fs::write(&conf, appended).map_err(Error::io("write", &conf))?;
    }
    let file = data_dir.join(FILE);
    fs::write(&file, settings(data_dir, port)).map_err(Error::io("write", &file))
}

fn settings(data_dir: &Path, port: u16) -> String {
    let dir = data_dir.to_string_lossy();
    // Clients use TCP; the socket only keeps PostgreSQL from needing a system directory
    // (/var/run/postgresql), so it is dropped rather than failing on a deep data directory.
    let socket_dir = if dir.len() <= MAX_SOCKET_DIR { quote(&dir) } else { quote("") };
    format!(
        "# Written by gatehouse on every start; changes here are overwritten.\n\
         listen_addresses = '127.0.0.1'\n\
         port = {port}\n\
         unix_socket_directories = {socket_dir}\n\
         max_connections = 200\n\
         # pg_hba.conf asks for SCRAM-SHA-256, so every password is stored that way.\n\
         password_encryption = 'scram-sha-256'\n\
         shared_buffers = '128MB'\n\
         # Benchmarks measure the cost of a durable commit, so durability stays real.\n\
         fsync = on\n\
         synchronous_commit = on\n\
         logging_collector = on\n\
         log_directory = '{LOG_DIR}'\n\
         log_filename = 'postgresql-%a.log'\n\
         log_rotation_age = '1d'\n\
         log_rotation_size = 0\n\
         log_truncate_on_rotation = on\n"
    )
}

/// A PostgreSQL configuration string literal: backslash escapes apply inside quotes.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_awkward_paths() {
        assert_eq!(quote(r"/a b/it's\x"), r"'/a b/it''s\\x'");
    }

    #[test]
    fn drops_the_socket_when_the_path_is_too_long() {
        let deep = format!("/{}", "d".repeat(120));
        assert!(settings(Path::new(&deep), 5432).contains("unix_socket_directories = ''\n"));
        assert!(settings(Path::new("/short"), 5432).contains("unix_socket_directories = '/short'\n"));
    }
}

//! `pg_hba.conf`: every connection, over TCP or the Unix socket, gives its role's password
//! (SCRAM-SHA-256). gatehouse owns the file, as it owns `gatehouse.conf`: any other content
//! (an older gatehouse's `trust` lines, a hand edit) is replaced when the server next starts.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::account::Account;
use crate::error::{Error, Result};
use crate::perms;

const FILE: &str = "pg_hba.conf";

const CONTENT: &str = "\
# Written by gatehouse; changes here are overwritten when the server starts. Every connection
# must give its role's password: the superuser's is in gatehouse.password, next to this file.
# TYPE  DATABASE     USER  ADDRESS       METHOD
local   all          all                 scram-sha-256
host    all          all   127.0.0.1/32  scram-sha-256
host    all          all   ::1/128       scram-sha-256
local   replication  all                 scram-sha-256
host    replication  all   127.0.0.1/32  scram-sha-256
host    replication  all   ::1/128       scram-sha-256
";

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The file as it is; an absent file reads as empty (the server would not start without one).
fn read(data_dir: &Path) -> Result<String> {
    let file = path(data_dir);
    match fs::read_to_string(&file) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io("read", file)(e)),
    }
}

/// Whether the file is exactly what [`write`] writes.
pub(crate) fn is_current(data_dir: &Path) -> Result<bool> {
    Ok(read(data_dir)? == CONTENT)
}

/// Whether some line lets a client in without a password (what initdb's `--auth=trust`, used
/// by older gatehouse versions, writes).
pub(crate) fn allows_trust(data_dir: &Path) -> Result<bool> {
    Ok(trusts(&read(data_dir)?))
}

/// Replaces the file in one step, so an interruption leaves the old file or the new one.
pub(crate) fn write(data_dir: &Path, account: Option<&Account>) -> Result<()> {
    perms::write_private(&path(data_dir), CONTENT, account)
}

fn trusts(text: &str) -> bool {
    text.lines().any(|line| {
        let rule = line.split('#').next().unwrap_or("");
        // The method is the last word that is not an option (`name=value`).
        rule.split_whitespace().rfind(|word| !word.contains('=')) == Some("trust")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules of the pg_hba.conf that `initdb --auth=trust` writes (PostgreSQL 18).
    const INITDB_TRUST: &str = "\
# TYPE  DATABASE        USER            ADDRESS                 METHOD

# \"local\" is for Unix domain socket connections only
local   all             all                                     trust
# IPv4 local connections:
host    all             all             127.0.0.1/32            trust
# IPv6 local connections:
host    all             all             ::1/128                 trust
# Allow replication connections from localhost, by a user with the
# replication privilege.
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
host    replication     all             ::1/128                 trust
";

    #[test]
    fn recognises_what_initdb_writes_for_trust() {
        assert!(trusts(INITDB_TRUST));
        assert!(trusts("host all all 127.0.0.1/32 trust map=x\n"));
    }

    #[test]
    fn the_written_file_trusts_nobody() {
        assert!(!trusts(CONTENT));
        assert!(CONTENT.lines().filter(|l| !l.starts_with('#')).all(|l| l.ends_with("scram-sha-256")));
        assert!(!trusts("host all all 127.0.0.1/32 scram-sha-256 # not trust\n# local all all trust\n"));
    }

    #[test]
    fn writing_makes_the_file_current() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!is_current(dir.path()).expect("read"));
        fs::write(path(dir.path()), INITDB_TRUST).expect("write");
        assert!(allows_trust(dir.path()).expect("read"));
        write(dir.path(), None).expect("write");
        assert!(is_current(dir.path()).expect("read"));
        assert!(!allows_trust(dir.path()).expect("read"));
    }
}

//! PostgreSQL refuses to run as root, so a root caller runs it as an unprivileged user.

use std::io;
use std::path::Path;
use std::process::Command;

use nix::unistd::{User, geteuid};

use crate::error::{Error, Result};

const USER: &str = "gatehouse-pg";
const FALLBACK_USER: &str = "nobody";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `None` when the process is not root: then the server simply runs as the caller.
pub(crate) fn for_server() -> Result<Option<Account>> {
    if !geteuid().is_root() {
        return Ok(None);
    }
    if let Some(account) = lookup(USER)? {
        return Ok(Some(account));
    }
    let failure = create_user().err();
    // Looked up again even after a failure: a concurrent process may have created it.
    if let Some(account) = lookup(USER)? {
        return Ok(Some(account));
    }
    let why = failure.unwrap_or_else(|| "useradd succeeded but the user is not visible".into());
    match lookup(FALLBACK_USER)? {
        Some(account) => {
            eprintln!("gatehouse: running PostgreSQL as {FALLBACK_USER} (could not create user {USER}: {why})");
            Ok(Some(account))
        }
        None => Err(Error::NoUnprivilegedUser {
            detail: format!("could not create {USER}: {why}; no {FALLBACK_USER} user either"),
        }),
    }
}

fn lookup(name: &str) -> Result<Option<Account>> {
    let user = User::from_name(name)
        .map_err(|errno| Error::NoUnprivilegedUser { detail: format!("looking up user {name}: {errno}") })?;
    Ok(user.map(|u| Account { name: u.name, uid: u.uid.as_raw(), gid: u.gid.as_raw() }))
}

fn create_user() -> std::result::Result<(), String> {
    // Root's PATH does not always include the sbin directories (e.g. `su` without `-`).
    let program =
        ["/usr/sbin/useradd", "/sbin/useradd"].into_iter().find(|p| Path::new(p).is_file()).unwrap_or("useradd");
    let output = Command::new(program)
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => "useradd is not available".to_string(),
            _ => format!("running useradd: {e}"),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("useradd {}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()))
    }
}

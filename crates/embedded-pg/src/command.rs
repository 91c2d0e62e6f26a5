//! Runs the install's programs the same way every time: as the server's user, with an
//! environment that cannot redirect them.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::account::Account;
use crate::error::{Error, Result};
use crate::install::PgInstall;

pub(crate) struct Tools<'a> {
    pub install: &'a PgInstall,
    pub account: Option<&'a Account>,
    pub data_dir: &'a Path,
}

impl Tools<'_> {
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.install.bin(program));
        // PGDATA, PGPORT, PGOPTIONS, PGSSLMODE... would silently change what the tools do.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                cmd.env_remove(key);
            }
        }
        // Log lines are searched for known messages (port clashes) and shown in errors.
        cmd.env("LC_ALL", "C");
        // The server's user may not be allowed into the caller's working directory, and
        // initdb/pg_ctl fail when they cannot resolve it.
        cmd.current_dir("/");
        cmd.stdin(Stdio::null());
        if let Some(account) = self.account {
            // std also clears supplementary groups (setgroups(0)) when root sets a uid.
            cmd.uid(account.uid).gid(account.gid);
            // libpq and psql look under $HOME; root's home is not the server user's to read.
            cmd.env("HOME", self.data_dir);
        }
        cmd
    }

    /// Runs to completion; a non-zero exit becomes an error carrying the tool's own words.
    pub fn run(&self, mut cmd: Command, stdin: Option<&str>, hint: &str) -> Result<Output> {
        let tool = Path::new(cmd.get_program()).file_name().unwrap_or(OsStr::new("?")).to_string_lossy().into_owned();
        let program = Path::new(cmd.get_program()).display().to_string();
        let spawn_error = |e: std::io::Error| Error::Tool {
            tool: tool.clone(),
            status: "could not run".into(),
            output: format!("{program}: {e}"),
            hint: hint.to_string(),
        };
        let output = match stdin {
            None => cmd.output().map_err(spawn_error)?,
            Some(input) => {
                let mut child = cmd
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(spawn_error)?;
                if let Some(mut pipe) = child.stdin.take() {
                    pipe.write_all(input.as_bytes()).map_err(spawn_error)?;
                }
                child.wait_with_output().map_err(spawn_error)?
            }
        };
        if output.status.success() {
            return Ok(output);
        }
        Err(Error::Tool { tool, status: output.status.to_string(), output: words(&output), hint: hint.to_string() })
    }
}

/// What a tool said, stderr first since that is where PostgreSQL tools report problems.
pub(crate) fn words(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    [stderr.trim(), stdout.trim()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n")
}

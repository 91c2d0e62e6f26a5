//! The superuser's password: 32 random bytes from the operating system, hex-encoded, made once
//! per data directory and kept in it, in a file only the directory's owner can read (mode 0600).
//! When root runs the server as an unprivileged user, that user owns the file like every other
//! file of the cluster, and root reads it through its privilege to build the URL.

use std::fmt::{self, Write as _};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::account::Account;
use crate::error::{Error, Result};
use crate::perms;

const FILE: &str = "gatehouse.password";
const RANDOM_BYTES: usize = 32;

/// Never shown by `Debug`; [`Password::scrub`] takes it out of tool output bound for an error.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Password(String);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

impl Password {
    pub fn generate() -> Result<Password> {
        let mut bytes = [0u8; RANDOM_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| Error::NoRandomness { detail: e.to_string() })?;
        let mut hex = String::with_capacity(2 * RANDOM_BYTES);
        for byte in bytes {
            let _ = write!(hex, "{byte:02x}");
        }
        Ok(Password(hex))
    }

    /// The stored password: the file's first line without surrounding blanks. `None` when there
    /// is no file, or nothing in it (then a new password is set on the next start).
    pub fn load(data_dir: &Path) -> Result<Option<Password>> {
        let file = path(data_dir);
        let text = match fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read the database password from", file)(e)),
        };
        Ok(text.lines().next().map(str::trim).filter(|line| !line.is_empty()).map(|line| Password(line.to_owned())))
    }

    /// Stores the password in the data directory, replacing the file in one step.
    pub fn save(&self, data_dir: &Path, account: Option<&Account>) -> Result<()> {
        perms::write_private(&path(data_dir), &format!("{}\n", self.0), account)
    }

    /// The password itself, for a file or an environment variable; never for a message.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Percent-encoded for the user-info part of a URL (a generated password needs none).
    pub fn for_url(&self) -> String {
        let mut encoded = String::with_capacity(self.0.len());
        for byte in self.0.bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                encoded.push(char::from(byte));
            } else {
                let _ = write!(encoded, "%{byte:02X}");
            }
        }
        encoded
    }

    /// A SQL string literal (standard_conforming_strings is on, so only quotes are doubled).
    pub fn sql_literal(&self) -> String {
        format!("'{}'", self.0.replace('\'', "''"))
    }

    /// The error, with the password cut out of any tool output it quotes.
    pub fn scrub(&self, error: Error) -> Error {
        match error {
            Error::Tool { tool, status, output, hint } => {
                Error::Tool { tool, status, output: output.replace(&self.0, "<password>"), hint }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_password_is_64_hex_digits_and_new_each_time() {
        let first = Password::generate().expect("random");
        let second = Password::generate().expect("random");
        assert_eq!(first.expose().len(), 64);
        assert!(first.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
        assert_eq!(first.for_url(), first.expose(), "hex needs no percent-encoding");
    }

    #[test]
    fn debug_output_hides_the_password() {
        let password = Password("hunter2".into());
        assert!(!format!("{password:?}").contains("hunter2"));
    }

    #[test]
    fn awkward_characters_are_percent_encoded_and_quoted() {
        let password = Password("p@ss:w/rd% it's".into());
        assert_eq!(password.for_url(), "p%40ss%3Aw%2Frd%25%20it%27s");
        assert_eq!(password.sql_literal(), "'p@ss:w/rd% it''s'");
    }

    #[test]
    fn tool_output_is_scrubbed_of_the_password() {
        let password = Password("s3cret".into());
        let error = Error::Tool {
            tool: "postgres".into(),
            status: "exit status: 1".into(),
            output: "STATEMENT: ALTER ROLE postgres PASSWORD 's3cret'".into(),
            hint: String::new(),
        };
        let message = password.scrub(error).to_string();
        assert!(!message.contains("s3cret"), "{message}");
        assert!(message.contains("PASSWORD '<password>'"), "{message}");
    }

    #[test]
    fn a_missing_or_empty_file_means_no_password_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Password::load(dir.path()).expect("load"), None);
        fs::write(path(dir.path()), "\n  \n").expect("write");
        assert_eq!(Password::load(dir.path()).expect("load"), None);

        let password = Password::generate().expect("random");
        password.save(dir.path(), None).expect("save");
        assert_eq!(Password::load(dir.path()).expect("load"), Some(password));
    }
}

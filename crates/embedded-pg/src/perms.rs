//! When root runs PostgreSQL as another user, that user must reach the data directory and
//! read the binaries. CI clones into directories that may be mode 700 (e.g. root's home), so
//! the exact missing bits are added and nothing else is loosened. Files that must stay private
//! (the password, pg_hba.conf) are written for the server's user alone.

use std::ffi::OsString;
use std::fs::{self, File, Metadata, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown};
use std::path::{Path, PathBuf};

use crate::account::Account;
use crate::error::{Error, Result};

const R: u32 = 0o4;
const X: u32 = 0o1;

/// Lets `account` traverse every ancestor of each path.
pub(crate) fn make_reachable(paths: &[&Path], account: &Account) -> Result<()> {
    let mut changed: Vec<String> = Vec::new();
    let mut seen: Vec<&Path> = Vec::new();
    for path in paths {
        for dir in path.ancestors().skip(1) {
            if seen.contains(&dir) {
                continue;
            }
            seen.push(dir);
            let meta = fs::metadata(dir).map_err(Error::io("inspect", dir))?;
            if let Some(bits) = grant(dir, &meta, X, account)? {
                changed.push(format!("{bits} on {}", dir.display()));
            }
        }
    }
    if !changed.is_empty() {
        eprintln!(
            "gatehouse: so that PostgreSQL's user {} can reach its files, added {}",
            account.name,
            changed.join(", ")
        );
    }
    Ok(())
}

/// Lets `account` read every file under the trees and run the executables among them.
pub(crate) fn make_readable(trees: &[PathBuf], account: &Account) -> Result<()> {
    let mut changed = 0usize;
    for tree in trees {
        changed += readable_tree(tree, account)?;
    }
    if changed > 0 {
        let roots: Vec<String> = trees.iter().map(|t| t.display().to_string()).collect();
        eprintln!(
            "gatehouse: made {changed} PostgreSQL files readable by user {} (under {})",
            account.name,
            roots.join(", ")
        );
    }
    Ok(())
}

fn readable_tree(path: &Path, account: &Account) -> Result<usize> {
    let meta = fs::symlink_metadata(path).map_err(Error::io("inspect", path))?;
    // Links point inside the same trees, which are walked anyway; chmod would follow them.
    if meta.file_type().is_symlink() {
        return Ok(0);
    }
    let executable = meta.is_dir() || meta.mode() & 0o111 != 0;
    let bits = if executable { R | X } else { R };
    let mut changed = usize::from(grant(path, &meta, bits, account)?.is_some());
    if meta.is_dir() {
        for entry in fs::read_dir(path).map_err(Error::io("list", path))? {
            let entry = entry.map_err(Error::io("list", path))?;
            changed += readable_tree(&entry.path(), account)?;
        }
    }
    Ok(changed)
}

/// Gives the directory tree to `account` unless it already owns its top.
pub(crate) fn hand_over(dir: &Path, account: &Account) -> Result<()> {
    let meta = fs::metadata(dir).map_err(Error::io("inspect", dir))?;
    if meta.uid() == account.uid && meta.gid() == account.gid {
        return Ok(());
    }
    chown_tree(dir, account)
}

fn chown_tree(path: &Path, account: &Account) -> Result<()> {
    lchown(path, Some(account.uid), Some(account.gid)).map_err(Error::io("change the owner of", path))?;
    let meta = fs::symlink_metadata(path).map_err(Error::io("inspect", path))?;
    if meta.is_dir() {
        for entry in fs::read_dir(path).map_err(Error::io("list", path))? {
            let entry = entry.map_err(Error::io("list", path))?;
            chown_tree(&entry.path(), account)?;
        }
    }
    Ok(())
}

/// Writes `path` with mode 0600, owned by `account` (else by the caller), through a temporary
/// file renamed over it: an interruption leaves the old content or the new, never a mix, and
/// no moment when the file can be read by anyone else.
pub(crate) fn write_private(path: &Path, contents: &str, account: Option<&Account>) -> Result<()> {
    let mut name = path.file_name().map(OsString::from).unwrap_or_default();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", tmp)(e)),
    }
    // create_new: never write through a file or link someone else put there.
    let mut file =
        OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(Error::io("create", &tmp))?;
    file.write_all(contents.as_bytes()).map_err(Error::io("write", &tmp))?;
    file.sync_all().map_err(Error::io("write", &tmp))?;
    if let Some(account) = account {
        fchown(&file, Some(account.uid), Some(account.gid)).map_err(Error::io("change the owner of", &tmp))?;
    }
    drop(file);
    fs::rename(&tmp, path).map_err(Error::io("replace", path))?;
    if let Some(dir) = path.parent() {
        // Makes the rename itself durable.
        File::open(dir).and_then(|d| d.sync_all()).map_err(Error::io("sync", dir))?;
    }
    Ok(())
}

/// Adds `bits` (an rwx triple) for `account` in the one class that applies to it, and says
/// what it added (`"o+x"`), or `None` when nothing was missing.
fn grant(path: &Path, meta: &Metadata, bits: u32, account: &Account) -> Result<Option<String>> {
    // The server's user has no supplementary groups (privileges are dropped with setgroups(0)),
    // so its primary group is the only group that can match.
    let (class, shift) = if meta.uid() == account.uid {
        ('u', 6)
    } else if meta.gid() == account.gid {
        ('g', 3)
    } else {
        ('o', 0)
    };
    let mode = meta.mode() & 0o7777;
    let missing = bits & !(mode >> shift);
    if missing & 0o7 == 0 {
        return Ok(None);
    }
    fs::set_permissions(path, Permissions::from_mode(mode | (missing << shift)))
        .map_err(Error::io("change the permissions of", path))?;
    let mut label = format!("{class}+");
    if missing & R != 0 {
        label.push('r');
    }
    if missing & X != 0 {
        label.push('x');
    }
    Ok(Some(label))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> Account {
        // An id no real file here belongs to, so only the "other" class applies.
        Account { name: "test".into(), uid: 4_000_001, gid: 4_000_001 }
    }

    #[test]
    fn grant_adds_only_the_missing_other_bits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        fs::write(&path, b"x").expect("write");
        fs::set_permissions(&path, Permissions::from_mode(0o750)).expect("chmod");
        let meta = fs::metadata(&path).expect("stat");
        let label = grant(&path, &meta, R | X, &account()).expect("grant");
        assert_eq!(label.as_deref(), Some("o+rx"));
        assert_eq!(fs::metadata(&path).expect("stat").mode() & 0o7777, 0o755);

        let meta = fs::metadata(&path).expect("stat");
        assert_eq!(grant(&path, &meta, R | X, &account()).expect("grant"), None);
    }

    #[test]
    fn a_private_file_is_replaced_whole_and_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret");
        fs::write(&path, "old").expect("write");
        fs::set_permissions(&path, Permissions::from_mode(0o644)).expect("chmod");
        // A leftover of an interrupted write is replaced, not written through.
        fs::write(dir.path().join("secret.tmp"), "stale").expect("write");

        write_private(&path, "new\n", None).expect("write_private");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
        assert_eq!(fs::metadata(&path).expect("stat").mode() & 0o777, 0o600);
        assert!(!dir.path().join("secret.tmp").exists());
    }
}

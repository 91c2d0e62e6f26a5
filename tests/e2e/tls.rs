//! TLS to PostgreSQL: `gatehouse migrate` and `gatehouse up` (its own connections and the
//! guests' `spin:postgres` ones) against a server that accepts only TLS, with each `sslmode`.
//!
//! The embedded PostgreSQL is built without SSL, so the test puts pgbouncer (installed by
//! scripts/setup) in front of the test database, requiring TLS of its clients, with a server
//! certificate for `localhost` only, issued by a CA the test makes.
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse_tests::lifecycle::{App, ensure_fixture_tables, lifecycle_manifest, lifecycle_options};
use gatehouse_tests::{Runner, RunnerOptions, app_manifest, database_url, db, http, unique};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use serde_json::{Value, json};

/// The unprivileged account the embedded PostgreSQL runs as (crates/embedded-pg) when the
/// tests run as root; pgbouncer refuses to run as root too.
const UNPRIVILEGED_USER: &str = "gatehouse-pg";

/// A certificate authority made for one test.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().expect("CA key");
        let certificate = params.self_signed(&key).expect("CA certificate");
        Ca { pem: certificate.pem(), issuer: Issuer::new(params, key) }
    }

    /// A server certificate naming `names` (DNS names), and its key, both PEM.
    fn server_certificate(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("server params");
        params.distinguished_name.push(DnType::CommonName, names[0].as_str());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("server key");
        let certificate = params.signed_by(&key, &self.issuer).expect("server certificate");
        (certificate.pem(), key.serialize_pem())
    }
}

/// pgbouncer on a free loopback port, requiring TLS of its clients, in front of the test
/// database; killed (and its folder removed) when dropped.
struct TlsBouncer {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    dir: PathBuf,
    port: u16,
    user: String,
    dbname: String,
    ca_file: PathBuf,
}

fn pgbouncer_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("pgbouncer")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin/pgbouncer")])
        .find(|candidate| candidate.is_file())
        .expect("pgbouncer is not installed: run scripts/setup")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn write(path: &Path, contents: &str) {
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

impl TlsBouncer {
    fn start(ca: &Ca) -> TlsBouncer {
        let upstream: tokio_postgres::Config = database_url().parse().expect("DATABASE_URL");
        let host = match upstream.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            other => panic!("the test database must be reached over TCP, not {other:?}"),
        };
        let upstream_port = upstream.get_ports().first().copied().unwrap_or(5432);
        let user = upstream.get_user().unwrap_or("postgres").to_owned();
        let dbname = upstream.get_dbname().unwrap_or("postgres").to_owned();
        let password = upstream.get_password().map(|p| String::from_utf8_lossy(p).into_owned());

        // World-readable (a test key, thrown away): pgbouncer runs as the unprivileged user.
        let dir = std::env::temp_dir().join(unique("gatehouse-tls"));
        std::fs::create_dir_all(&dir).expect("pgbouncer folder");
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let (certificate, key) = ca.server_certificate(&["localhost"]);
        write(&dir.join("server.pem"), &certificate);
        write(&dir.join("server.key"), &key);
        let ca_file = dir.join("ca.pem");
        write(&ca_file, &ca.pem);
        write(&dir.join("userlist.txt"), &format!("\"{user}\" \"\"\n"));

        let port = free_port();
        let password = password.map(|p| format!(" password={p}")).unwrap_or_default();
        write(
            &dir.join("pgbouncer.ini"),
            &format!(
                "[databases]\n\
                 {dbname} = host={host} port={upstream_port} dbname={dbname} user={user}{password}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {userlist}\n\
                 pool_mode = session\n\
                 max_client_conn = 200\n\
                 default_pool_size = 40\n\
                 ignore_startup_parameters = extra_float_digits,options\n\
                 client_tls_sslmode = require\n\
                 client_tls_cert_file = {cert}\n\
                 client_tls_key_file = {key}\n",
                userlist = dir.join("userlist.txt").display(),
                cert = dir.join("server.pem").display(),
                key = dir.join("server.key").display(),
            ),
        );

        let mut command = Command::new(pgbouncer_bin());
        let root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
        if root {
            command.args(["-u", UNPRIVILEGED_USER]);
        }
        let mut child = command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning pgbouncer");

        // Its log (stderr): one line per client login, saying whether the client used TLS.
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, sink) = (child.stderr.take().expect("pgbouncer stderr"), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut log) = sink.lock() {
                    log.push(line);
                }
            }
        });

        // Ready when it accepts connections; a few seconds at most.
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                let log = log.lock().map(|l| l.join("\n")).unwrap_or_default();
                panic!("pgbouncer exited ({status}) before listening:\n{log}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("pgbouncer did not listen on {address} within 5 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsBouncer { child, log, dir, port, user, dbname, ca_file }
    }

    /// A URL to the test database through pgbouncer, by `host`, with `query` (the TLS part).
    fn url(&self, host: &str, query: &str) -> String {
        let query = if query.is_empty() { String::new() } else { format!("?{query}") };
        format!("postgres://{}@{host}:{}/{}{query}", self.user, self.port, self.dbname)
    }

    /// pgbouncer's log lines for client logins.
    fn logins(&self) -> Vec<String> {
        self.log
            .lock()
            .map(|log| log.iter().filter(|l| l.contains("login attempt")).cloned().collect())
            .unwrap_or_default()
    }

    fn ca(&self) -> String {
        self.ca_file.display().to_string()
    }

    /// Writes another PEM file into the folder, for a URL to name.
    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.dir.join(name);
        write(&path, contents);
        path.display().to_string()
    }
}

impl Drop for TlsBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `gatehouse migrate` against `url`: whether it succeeded, and its stderr.
fn migrate(url: &str) -> (bool, String) {
    let output = gatehouse_tests::migrate(url, &[]).expect("running gatehouse migrate");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn assert_migrates(url: &str) {
    let (ok, stderr) = migrate(url);
    assert!(ok, "gatehouse migrate failed with {url}:\n{stderr}");
}

fn assert_refused(url: &str, expected: &[&str]) -> String {
    let (ok, stderr) = migrate(url);
    assert!(!ok, "gatehouse migrate succeeded with {url}, which it should refuse");
    eprintln!("{url}:\n{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "the error for {url} does not say {part:?}:\n{stderr}");
    }
    stderr
}

#[tokio::test]
async fn migrate_and_up_serve_through_verified_tls() {
    let bouncer = TlsBouncer::start(&Ca::new("Gatehouse test CA"));
    let url = bouncer.url("localhost", &format!("sslmode=verify-full&sslrootcert={}", bouncer.ca()));
    assert_migrates(&url);

    // The runner migrates and serves from DATABASE_URL, and hands it to the guests (db_url),
    // so both its own connections and the guests' pooled ones go through TLS.
    ensure_fixture_tables(&db().await.expect("test database")).await.expect("fixture tables");
    let mut options = lifecycle_options(&[], &[]);
    options.env.push(("DATABASE_URL".into(), url.clone()));
    let runner = Runner::start(&lifecycle_manifest(), options).expect("runner starts over TLS");
    let app = App { runner, http: http(), database_url: database_url() };

    let response = app.http.get(app.runner.url("/health")).send().await.expect("health");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body, json!({"status": "ok", "database": "ok"}));

    let session = unique("tls");
    let id = app.create_id(&session, json!({"to": "a@example.com"}), None).await.expect("create over TLS");
    let status = app.status(&id).await.expect("status");
    assert_eq!(status.status, 200, "{}", status.body);
    // Written to the real database behind pgbouncer.
    let stored: i64 = db()
        .await
        .expect("test database")
        .query_one("SELECT count(*) FROM tool_calls WHERE tool_call_id = $1 AND session_id = $2", &[&id, &session])
        .await
        .expect("count")
        .get(0);
    assert_eq!(stored, 1);
    let logs = app.runner.logs().join("\n");
    assert!(!logs.contains("cannot connect"), "{logs}");
    // Every client pgbouncer saw (migrate, the runner, its guests' pool) logged in over TLS.
    let logins = bouncer.logins();
    assert!(logins.len() >= 3, "{logins:#?}");
    assert!(logins.iter().all(|login| login.contains(" tls=TLSv1.")), "{logins:#?}");
}

#[tokio::test]
async fn require_needs_no_ca_and_disable_is_refused_by_a_tls_only_server() {
    let bouncer = TlsBouncer::start(&Ca::new("Gatehouse test CA"));
    // require encrypts without checking the certificate (libpq's meaning), so no CA is needed.
    assert_migrates(&bouncer.url("127.0.0.1", "sslmode=require"));
    // prefer, also the default, uses TLS when the server offers it.
    assert_migrates(&bouncer.url("127.0.0.1", "sslmode=prefer"));
    assert_migrates(&bouncer.url("127.0.0.1", ""));
    // With a CA file, require checks the chain (libpq: as verify-ca).
    let other = bouncer.file("other-ca.pem", &Ca::new("Another CA").pem);
    assert_refused(&bouncer.url("127.0.0.1", &format!("sslmode=require&sslrootcert={other}")), &["not trusted"]);

    let stderr = assert_refused(
        &bouncer.url("127.0.0.1", "sslmode=disable"),
        &[
            &format!("cannot connect to 127.0.0.1:{}/{} (sslmode=disable)", bouncer.port, bouncer.dbname),
            "the server refused a connection without TLS",
        ],
    );
    assert!(!stderr.contains("sslrootcert="), "{stderr}");
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_from_another_ca() {
    let bouncer = TlsBouncer::start(&Ca::new("Gatehouse test CA"));
    let other = bouncer.file("other-ca.pem", &Ca::new("Another CA").pem);
    let stderr = assert_refused(
        &bouncer.url("localhost", &format!("sslmode=verify-full&sslrootcert={other}")),
        &[
            &format!("cannot connect to localhost:{}/{} (sslmode=verify-full)", bouncer.port, bouncer.dbname),
            &format!("the server's TLS certificate is not trusted: no CA in sslrootcert {other} issued it"),
        ],
    );
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    // Without sslrootcert the built-in web PKI roots do not know the test CA either.
    assert_refused(&bouncer.url("localhost", "sslmode=verify-ca"), &["not trusted", "built-in web PKI roots"]);
    // A CA file that cannot be read is an error of its own.
    assert_refused(
        &bouncer.url("localhost", "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
        &["sslrootcert /nonexistent/ca.pem: cannot be read"],
    );
}

#[tokio::test]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let bouncer = TlsBouncer::start(&Ca::new("Gatehouse test CA"));
    // The certificate names localhost only; 127.0.0.1 reaches the same server.
    let ca = bouncer.ca();
    assert_migrates(&bouncer.url("localhost", &format!("sslmode=verify-full&sslrootcert={ca}")));
    assert_refused(
        &bouncer.url("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={ca}")),
        &["the server's TLS certificate does not name the host 127.0.0.1"],
    );
    assert_migrates(&bouncer.url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")));
}

#[tokio::test]
async fn the_guests_connections_refuse_an_untrusted_server() {
    let bouncer = TlsBouncer::start(&Ca::new("Gatehouse test CA"));
    let other = bouncer.file("other-ca.pem", &Ca::new("Another CA").pem);
    // The runner itself migrates the plain test database; only the guests' address (db_url)
    // goes through pgbouncer, with a CA that did not issue its certificate.
    let options = RunnerOptions {
        variables: vec![
            ("db_url".into(), bouncer.url("localhost", &format!("sslmode=verify-full&sslrootcert={other}"))),
            ("db_host".into(), format!("localhost:{}", bouncer.port)),
        ],
        ..Default::default()
    };
    let runner = Runner::start(&app_manifest(), options).expect("runner starts");
    let response = http().get(runner.url("/health")).send().await.expect("health");
    assert_eq!(response.status(), 503);
    // The runner's log is read on another thread: the line may land just after the answer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let explained = |logs: &str| logs.contains("the server's TLS certificate is not trusted");
    while !explained(&runner.logs().join("\n")) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let logs = runner.logs().join("\n");
    assert!(explained(&logs), "{logs}");
    assert!(bouncer.logins().is_empty(), "{:#?}", bouncer.logins());
}

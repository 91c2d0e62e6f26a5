use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::lchown;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::account::{self, Account};
use crate::command::Tools;
use crate::config::{self, LOG_DIR};
use crate::error::{Error, Result};
use crate::install::PgInstall;
use crate::password::{self, Password};
use crate::{hba, owner, perms, pidfile};

/// The application's database, created on first start.
pub const DATABASE: &str = "gatehouse";
/// The superuser initdb creates. Like any role it must give its password, over TCP and the Unix
/// socket alike (SCRAM-SHA-256); [`EmbeddedPostgres::url`] carries it.
pub const SUPERUSER: &str = "postgres";

const HOST: &str = "127.0.0.1";
const WAIT: Duration = Duration::from_secs(60);
/// Another process can take the chosen port between probing and binding it.
const PORT_ATTEMPTS: usize = 5;
const LOG_TAIL_LINES: usize = 20;

/// Where `gatehouse` keeps its embedded server's data, next to the venv `scripts/setup` makes.
pub fn default_data_dir(project_root: &Path) -> PathBuf {
    project_root.join(".gatehouse/pgdata")
}

/// A PostgreSQL server on 127.0.0.1 serving [`DATABASE`] with pgvector installed.
///
/// Every connection must give a password. The superuser's is random, made once per data
/// directory and kept in `gatehouse.password` inside it, readable by the directory's owner
/// alone (the unprivileged server user when the caller is root, which reads it through its
/// privilege). A data directory from an older gatehouse, which let any local user in by
/// `trust`, gets a password and a new `pg_hba.conf` on the first start that launches its server.
///
/// It is stopped by [`EmbeddedPostgres::stop`] or, failing that, on drop, but only by the
/// handle that owns it: one that found the server already running under a live gatehouse
/// process leaves it running. A server whose starting process died is taken over.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    install: PgInstall,
    account: Option<Account>,
    data_dir: PathBuf,
    port: u16,
    reused: bool,
    owner: bool,
    stopped: bool,
    /// `None` only for a server still running from before passwords, which needs none.
    password: Option<Password>,
}

impl EmbeddedPostgres {
    /// Starts (or finds running) a server on `data_dir`, creating the cluster on first use.
    /// Blocks until the server accepts connections and [`DATABASE`] exists with pgvector.
    pub fn start(install: &PgInstall, data_dir: &Path) -> Result<EmbeddedPostgres> {
        let account = account::for_server()?;
        fs::create_dir_all(data_dir).map_err(Error::io("create", data_dir))?;
        let data_dir = fs::canonicalize(data_dir).map_err(Error::io("resolve", data_dir))?;
        if let Some(account) = &account {
            let trees = install.readable_trees();
            let mut reach: Vec<&Path> = trees.iter().map(PathBuf::as_path).collect();
            reach.push(&data_dir);
            perms::make_reachable(&reach, account)?;
            perms::make_readable(&trees, account)?;
            perms::hand_over(&data_dir, account)?;
        }
        // Two processes starting on one data directory would race to initdb, to bind, and
        // to create the database; the second one waits here and then reuses the first's.
        let lock = File::open(&data_dir).map_err(Error::io("open", &data_dir))?;
        lock.lock().map_err(Error::io("lock", &data_dir))?;

        let mut pg = EmbeddedPostgres {
            install: install.clone(),
            account,
            data_dir,
            port: 0,
            reused: false,
            owner: false,
            stopped: false,
            password: None,
        };
        if pg.reuse_running()? {
            pg.password = Password::load(&pg.data_dir)?;
            pg.warn_if_trusting()?;
        } else {
            pg.init_if_new()?;
            pg.password = Some(pg.require_password()?);
            pg.launch()?;
        }
        pg.bootstrap()?;
        Ok(pg)
    }

    /// `postgres://postgres:<password>@127.0.0.1:<port>/gatehouse`, the password percent-encoded.
    /// It is a secret: hand it to what connects, but do not log it. A server found running from
    /// before passwords (it trusts everyone until restarted) gets `postgres://postgres@...`.
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => {
                format!("postgres://{SUPERUSER}:{}@{HOST}:{}/{DATABASE}", password.for_url(), self.port)
            }
            None => format!("postgres://{SUPERUSER}@{HOST}:{}/{DATABASE}", self.port),
        }
    }

    /// The file in the data directory that keeps the superuser's password (mode 0600).
    pub fn password_file(&self) -> PathBuf {
        password::path(&self.data_dir)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// True when the server was already running and this handle attached to it.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// True when this handle stops the server on [`stop`](Self::stop) or drop.
    pub fn owns_server(&self) -> bool {
        self.owner
    }

    /// Stops the server (fast shutdown: sessions are ended, committed data is kept) if this
    /// handle owns it; otherwise just lets go of it.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    /// Lets go of the server and leaves it running, for a command that starts a database for
    /// others to use (`gatehouse db start`). A later handle on the same data directory takes
    /// it over, since this process will be gone.
    pub fn detach(mut self) {
        self.stopped = true;
    }

    fn tools(&self) -> Tools<'_> {
        Tools { install: &self.install, account: self.account.as_ref(), data_dir: &self.data_dir }
    }

    fn reuse_running(&mut self) -> Result<bool> {
        let Some(found) = pidfile::read(&self.data_dir)? else {
            return Ok(false);
        };
        if !pidfile::is_postgres(found.pid) {
            if pidfile::is_alive(found.pid) {
                // The pid now belongs to an unrelated process (a reboot or a new container
                // reused it); PostgreSQL would refuse to start while it lives, so the stale
                // file goes. A dead pid is left to PostgreSQL, which replaces the file itself
                // after checking that no orphaned backend still uses the old shared memory.
                let file = pidfile::path(&self.data_dir);
                fs::remove_file(&file).map_err(Error::io("remove stale", file))?;
            }
            return Ok(false);
        }
        if found.status == "stopping" {
            self.wait_for_exit(found.pid, found.port)?;
            return Ok(false);
        }
        self.port = found.port;
        self.reused = true;
        self.wait_until_accepting(found.pid)?;
        // Only a server that answers is taken over; one that does not is left as found, for
        // the user to inspect and stop.
        if owner::orphaned(&self.data_dir) {
            owner::claim(&self.data_dir)?;
            self.owner = true;
        }
        Ok(true)
    }

    fn wait_for_exit(&self, pid: i32, port: u16) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        while pidfile::is_alive(pid) {
            if Instant::now() > deadline {
                return Err(Error::Unreachable { data_dir: self.data_dir.clone(), pid, port });
            }
            sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn wait_until_accepting(&self, pid: i32) -> Result<()> {
        const ACCEPTING: i32 = 0;
        const NO_RESPONSE: i32 = 2;
        let tools = self.tools();
        let deadline = Instant::now() + WAIT;
        let unreachable = || Error::Unreachable { data_dir: self.data_dir.clone(), pid, port: self.port };
        loop {
            // pg_isready answers at once, also while the server is starting or recovering.
            let mut cmd = tools.command("pg_isready");
            cmd.args(["-q", "-t", "5", "-d", &self.conninfo("postgres")]);
            let code = cmd.status().ok().and_then(|s| s.code());
            if code == Some(ACCEPTING) {
                return Ok(());
            }
            // A server that reports itself ready has opened its sockets already; silence then
            // means it listens elsewhere (started by hand), and waiting would not help.
            let ready = pidfile::read(&self.data_dir)?.is_some_and(|p| p.status == "ready");
            if (code == Some(NO_RESPONSE) && ready) || Instant::now() > deadline || !pidfile::is_alive(pid) {
                return Err(unreachable());
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// A server that an older gatehouse started with `trust` keeps it until it restarts: it is
    /// not converted under clients that hold its password-less URL. Its next start converts it.
    fn warn_if_trusting(&self) -> Result<()> {
        if hba::allows_trust(&self.data_dir)? {
            eprintln!(
                "gatehouse: the PostgreSQL running on {} still lets any local user in without a \
                 password; stop it (`gatehouse db stop`) and its next start will require one",
                self.data_dir.display()
            );
        }
        Ok(())
    }

    fn init_if_new(&self) -> Result<()> {
        let pwfile = initdb_password_file(&self.data_dir);
        // Left behind only if a start was killed during initdb; that password was never kept.
        let _ = fs::remove_file(&pwfile);
        if self.data_dir.join("PG_VERSION").is_file() {
            return Ok(());
        }
        let mut entries = fs::read_dir(&self.data_dir).map_err(Error::io("list", &self.data_dir))?;
        if entries.next().is_some() {
            return Err(Error::NotADataDir { path: self.data_dir.clone() });
        }
        // initdb wants an empty data directory, so the password reaches it in a file next to the
        // directory, readable by initdb's user alone, and removed as soon as initdb is done.
        let password = Password::generate()?;
        perms::write_private(&pwfile, &format!("{}\n", password.expose()), self.account.as_ref())?;
        let removed_after = RemoveOnDrop(&pwfile);
        let mut pwfile_arg = OsString::from("--pwfile=");
        pwfile_arg.push(&pwfile);
        let tools = self.tools();
        let mut cmd = tools.command("initdb");
        cmd.arg("-D").arg(&self.data_dir).args([
            "-U",
            SUPERUSER,
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-instructions",
        ]);
        cmd.arg(pwfile_arg);
        // One syncfs() instead of an fsync() per file: the new cluster is just as durable, and
        // initdb takes about a second instead of four.
        #[cfg(target_os = "linux")]
        cmd.arg("--sync-method=syncfs");
        tools
            .run(cmd, None, "initdb cleaned up after itself; fix the cause above and start again")
            .map_err(|e| password.scrub(e))?;
        drop(removed_after);
        // Killed before the password is saved, the next start finds none and sets a new one.
        hba::write(&self.data_dir, self.account.as_ref())?;
        password.save(&self.data_dir, self.account.as_ref())
    }

    /// Makes sure, before the server listens, that the superuser's password is the one saved in
    /// the data directory and that pg_hba.conf asks every connection for a password. This moves
    /// over a data directory made with `trust` by an older gatehouse, and one whose password
    /// file was lost. Each step can be redone, in this order, so an interrupted run is completed
    /// by the next start: the password is saved first, set second, and pg_hba.conf, the mark
    /// of a finished conversion, is rewritten last.
    fn require_password(&self) -> Result<Password> {
        let saved = Password::load(&self.data_dir)?;
        if let Some(password) = &saved
            && hba::is_current(&self.data_dir)?
        {
            return Ok(password.clone());
        }
        let trusted = hba::allows_trust(&self.data_dir)?;
        let file = password::path(&self.data_dir);
        let missing = saved.is_none();
        let password = match saved {
            Some(password) => password,
            None => {
                let password = Password::generate()?;
                password.save(&self.data_dir, self.account.as_ref())?;
                password
            }
        };
        self.set_password_offline(&password)?;
        hba::write(&self.data_dir, self.account.as_ref())?;
        let (dir, file) = (self.data_dir.display(), file.display());
        if trusted {
            eprintln!(
                "gatehouse: the PostgreSQL data directory {dir} let any local user in without a \
                 password; it now requires one for every connection (kept in {file})"
            );
        } else if missing {
            eprintln!(
                "gatehouse: no password was kept in {file}; gave PostgreSQL's superuser {SUPERUSER} a new one, kept there"
            );
        } else {
            eprintln!("gatehouse: rewrote pg_hba.conf in {dir} to require a password for every connection");
        }
        Ok(password)
    }

    /// Sets the superuser's password in single-user mode: the server is down, so no client
    /// can slip in through the old pg_hba.conf meanwhile, and no password is needed to do it.
    fn set_password_offline(&self, password: &Password) -> Result<()> {
        let tools = self.tools();
        let mut cmd = tools.command("postgres");
        cmd.arg("--single").arg("-D").arg(&self.data_dir).args([
            // An error ends the session with a failing exit status.
            "-c",
            "exit_on_error=on",
            // Nothing may quote the statement, and with it the password, in the output.
            "-c",
            "log_min_error_statement=panic",
            "-c",
            "log_statement=none",
            "-c",
            "log_min_duration_statement=-1",
            "-c",
            "password_encryption=scram-sha-256",
            "postgres",
        ]);
        let script = format!("ALTER ROLE {SUPERUSER} PASSWORD {};\n", password.sql_literal());
        let hint = "the password was not changed; fix the cause above and start again to retry";
        tools.run(cmd, Some(&script), hint).map_err(|e| password.scrub(e))?;
        Ok(())
    }

    fn launch(&mut self) -> Result<()> {
        let log_dir = self.data_dir.join(LOG_DIR);
        fs::create_dir_all(&log_dir).map_err(Error::io("create", &log_dir))?;
        let log = log_dir.join("pg_ctl.log");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            config::write(&self.data_dir, port)?;
            // Claimed before starting, so a crash right after the start still leaves a record
            // that lets the next run take the server over.
            owner::claim(&self.data_dir)?;
            self.give_to_server_user(&[&log_dir, &self.data_dir.join("gatehouse.conf")])?;
            let log_start = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);

            let tools = self.tools();
            let mut cmd = tools.command("pg_ctl");
            cmd.arg("start").arg("-D").arg(&self.data_dir).arg("-l").arg(&log).args([
                "-w",
                "-s",
                "-t",
                &WAIT.as_secs().to_string(),
            ]);
            let outcome = tools.run(cmd, None, "");
            if outcome.is_ok() {
                self.port = port;
                self.owner = true;
                return Ok(());
            }
            let tail = log_tail(&log, log_start);
            let port_taken = tail.contains("could not bind") || tail.contains("Address already in use");
            if port_taken && attempt < PORT_ATTEMPTS {
                continue;
            }
            let tail = match (tail.is_empty(), outcome) {
                (true, Err(e)) => e.to_string(),
                _ => tail,
            };
            return Err(Error::StartFailed { data_dir: self.data_dir.clone(), log, tail });
        }
    }

    /// Creates the database and the extension unless they exist. Runs under the start lock,
    /// so concurrent starts cannot both try to create them.
    fn bootstrap(&self) -> Result<()> {
        let script = format!(
            "SELECT 'CREATE DATABASE {DATABASE}' \
             WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{DATABASE}')\\gexec\n\
             \\connect {DATABASE}\n\
             CREATE EXTENSION IF NOT EXISTS vector;\n"
        );
        let tools = self.tools();
        let mut cmd = tools.command("psql");
        cmd.args(["-X", "-w", "-q", "-v", "ON_ERROR_STOP=1", "-d", &self.conninfo("postgres")]);
        if let Some(password) = &self.password {
            // Set on psql alone: the server would hand it on to whatever it runs.
            cmd.env("PGPASSWORD", password.expose());
        }
        let log_dir = self.data_dir.join(LOG_DIR);
        match tools.run(cmd, Some(&script), &format!("the server is running; its log is in {}", log_dir.display())) {
            Ok(_) => Ok(()),
            Err(Error::Tool { tool, status, output, .. })
                if output.contains("password authentication failed") || output.contains("no password supplied") =>
            {
                let hint = format!(
                    "the server is running and wants the password kept in {file}. If that file was \
                     lost or edited, stop the server (`pg_ctl -D {dir} stop -m fast`, as the owner of \
                     that directory), delete the file if it is still there, and start again: a new \
                     password is then set",
                    file = self.password_file().display(),
                    dir = self.data_dir.display(),
                );
                Err(Error::Tool { tool, status, output, hint })
            }
            Err(e) => Err(e),
        }
    }

    fn conninfo(&self, dbname: &str) -> String {
        format!("host={HOST} port={} user={SUPERUSER} dbname={dbname} sslmode=disable connect_timeout=10", self.port)
    }

    fn give_to_server_user(&self, paths: &[&Path]) -> Result<()> {
        let Some(account) = &self.account else {
            return Ok(());
        };
        for path in paths {
            lchown(path, Some(account.uid), Some(account.gid)).map_err(Error::io("change the owner of", *path))?;
        }
        Ok(())
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        if !self.owner {
            return Ok(());
        }
        let tools = self.tools();
        let mut cmd = tools.command("pg_ctl");
        cmd.arg("stop").arg("-D").arg(&self.data_dir).args([
            "-m",
            "fast",
            "-w",
            "-s",
            "-t",
            &WAIT.as_secs().to_string(),
        ]);
        let hint = format!(
            "stop it by hand with `pg_ctl -D {} stop -m fast` (as the user that owns that directory)",
            self.data_dir.display()
        );
        match tools.run(cmd, None, &hint) {
            Ok(_) => Ok(()),
            // Already gone (stopped by hand, or by another handle): the goal is met.
            Err(_) if pidfile::read(&self.data_dir)?.is_none() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("gatehouse: could not stop the embedded PostgreSQL: {e}");
        }
    }
}

/// Where initdb reads the first password from: next to the data directory, which must be empty.
fn initdb_password_file(data_dir: &Path) -> PathBuf {
    let name = data_dir.file_name().map_or_else(|| "pgdata".into(), |n| n.to_string_lossy());
    data_dir.with_file_name(format!(".{name}.initdb-password"))
}

struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0);
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::NoFreePort)?;
    let port = listener.local_addr().map_err(Error::NoFreePort)?.port();
    Ok(port)
}

/// The last lines written to `log` since byte `from`, so old runs' errors are not shown.
fn log_tail(log: &Path, from: u64) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(log)?;
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let text = read().unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

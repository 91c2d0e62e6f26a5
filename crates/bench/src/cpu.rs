//! Where a measurement's CPU went: each measured level prints the CPU time each process
//! serving the benchmark used per request. A process counts with its children, so PostgreSQL's
//! backends count towards its postmaster. Read from Linux's `/proc`; elsewhere the option is
//! refused.
//!
//! With `--url`, the processes are named on the command line (`--cpu NAME=PID`: a host, the
//! database's postmaster, a proxy). When the benchmark starts the application itself, it
//! watches two on its own: the runner, which is this process less the threads of the
//! benchmark's own clients ([`CLIENT_THREADS`]), and PostgreSQL, when its postmaster runs on
//! this machine.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The name of the threads the benchmark's clients run on, so their CPU time can be told
/// apart from the application's in the same process. Linux keeps 15 bytes of a thread's name.
pub const CLIENT_THREADS: &str = "bench-client";

/// One process to watch.
#[derive(Clone, Debug)]
pub struct Watched {
    pub name: String,
    pub target: Target,
}

/// What a [`Watched`] process is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A process and its children.
    Process(u32),
    /// This process without its threads named [`CLIENT_THREADS`]: the application the
    /// benchmark started in-process.
    ThisProcessButClients,
}

/// Parses `NAME=PID`.
pub fn parse_watched(text: &str) -> Result<Watched, String> {
    let (name, pid) = text.split_once('=').ok_or_else(|| format!("'{text}' is not NAME=PID"))?;
    let pid = pid.trim().parse().map_err(|_| format!("'{pid}' is not a process id"))?;
    Ok(Watched { name: name.trim().to_owned(), target: Target::Process(pid) })
}

/// The PostgreSQL server of `database_url` as a [`Watched`] process: the parent of the
/// backend serving a connection, which is the postmaster, if that backend runs on this machine.
pub async fn postgres(database_url: &str) -> Result<Option<Watched>> {
    let (client, _driver) =
        gatehouse_pg_connect::connect(database_url).await.context("connecting to find PostgreSQL's process")?;
    let backend: i32 = client.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
    let Some(backend) = u32::try_from(backend).ok().and_then(|pid| stat(&format!("/proc/{pid}/stat"))) else {
        return Ok(None);
    };
    // A server in a container or on another machine has its own process numbers: the process
    // of that number here, if any, is another program.
    if backend.command != "postgres" {
        return Ok(None);
    }
    Ok(Some(Watched { name: "postgres".into(), target: Target::Process(backend.parent) }))
}

/// CPU time used so far by each watched process, in clock ticks.
pub struct Sample {
    ticks: Vec<u64>,
}

/// The kernel's clock ticks per second for `/proc/<pid>/stat` (USER_HZ), 100 on every Linux
/// this runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// What the benchmark reads of a process's or a thread's `stat` file.
struct Stat {
    command: String,
    parent: u32,
    /// User and system time.
    ticks: u64,
}

/// Reads `/proc/<pid>/stat` or `/proc/self/task/<tid>/stat`.
fn stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces: the fields start after the last ')'.
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let command = text.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = text.get(close + 2..)?.split(' ').collect();
    let parent = fields.get(1)?.parse().ok()?;
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(Stat { command, parent, ticks: user + system })
}

/// Every process's (parent, ticks), by process id.
fn processes() -> Result<HashMap<u32, (u32, u64)>> {
    let mut processes = HashMap::new();
    for entry in std::fs::read_dir("/proc").context("reading /proc")? {
        let Some(pid) = entry.ok().and_then(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok())) else {
            continue;
        };
        if let Some(stat) = stat(&format!("/proc/{pid}/stat")) {
            processes.insert(pid, (stat.parent, stat.ticks));
        }
    }
    Ok(processes)
}

/// This process's ticks less those of its client threads. A client thread that ended between
/// two samples would take its ticks with it; the clients' threads live as long as the run.
fn this_process_but_clients() -> Result<u64> {
    let own = stat("/proc/self/stat").context("reading /proc/self/stat")?.ticks;
    let mut clients = 0;
    for entry in std::fs::read_dir("/proc/self/task").context("reading /proc/self/task")? {
        let Some(tid) = entry.ok().map(|e| e.file_name()) else { continue };
        let Some(thread) = stat(&format!("/proc/self/task/{}/stat", tid.to_string_lossy())) else { continue };
        if thread.command == CLIENT_THREADS {
            clients += thread.ticks;
        }
    }
    Ok(own.saturating_sub(clients))
}

pub fn sample(watched: &[Watched]) -> Result<Sample> {
    let processes = match watched.iter().any(|w| matches!(w.target, Target::Process(_))) {
        true => processes()?,
        false => HashMap::new(),
    };
    let mut ticks = Vec::with_capacity(watched.len());
    for process in watched {
        match process.target {
            Target::Process(pid) => {
                let Some(&(_, own)) = processes.get(&pid) else {
                    bail!("{} (process {pid}): no such process", process.name);
                };
                let children: u64 = processes.values().filter(|(parent, _)| *parent == pid).map(|(_, t)| t).sum();
                ticks.push(own + children);
            }
            Target::ThisProcessButClients => ticks.push(this_process_but_clients()?),
        }
    }
    Ok(Sample { ticks })
}

/// The CPU each watched process used between `before` and `after`, per request, and all of
/// them together as a share of the machine's cores over `elapsed`.
pub fn print(watched: &[Watched], before: &Sample, after: &Sample, requests: u64, elapsed: Duration) {
    if watched.is_empty() || requests == 0 {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut parts = Vec::new();
    let mut total = 0.0;
    for (index, process) in watched.iter().enumerate() {
        let used = after.ticks[index].saturating_sub(before.ticks[index]) as f64 / TICKS_PER_SECOND;
        total += used;
        parts.push(format!("{} {:.3}", process.name, used * 1000.0 / requests as f64));
    }
    println!(
        "  cpu ms/request: {}; together {:.3} = {:.0}% of {cores} cores",
        parts.join(", "),
        total * 1000.0 / requests as f64,
        100.0 * total / (elapsed.as_secs_f64() * cores)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_processes_are_name_equals_pid() {
        let watched = parse_watched("edge1=1234").expect("valid");
        assert_eq!((watched.name.as_str(), watched.target), ("edge1", Target::Process(1234)));
        assert!(parse_watched("edge1").is_err());
        assert!(parse_watched("edge1=abc").is_err());
    }

    #[test]
    fn this_process_uses_cpu_and_its_children_count() {
        let me = Watched { name: "me".into(), target: Target::Process(std::process::id()) };
        let before = sample(std::slice::from_ref(&me)).expect("sampled");
        spin(Duration::from_millis(200));
        let after = sample(std::slice::from_ref(&me)).expect("sampled");
        assert!(after.ticks[0] > before.ticks[0], "{} !> {}", after.ticks[0], before.ticks[0]);
    }

    /// Spins for `duration` on the calling thread.
    fn spin(duration: Duration) {
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < duration {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }

    #[test]
    fn the_clients_threads_do_not_count_towards_the_process() {
        let runner = [Watched { name: "runner".into(), target: Target::ThisProcessButClients }];
        let me = [Watched { name: "me".into(), target: Target::Process(std::process::id()) }];
        let (runner_before, me_before) = (sample(&runner).expect("sampled"), sample(&me).expect("sampled"));
        // The client thread stays alive until sampled, as the benchmark's clients do. It spins
        // until the process has used 30 ticks of CPU, not for a wall-clock time: on a busy
        // machine 300 ms of wall clock can be far fewer ticks.
        let (spun, sampled) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let start = me_before.ticks[0];
        let whole_process = me.clone();
        let client = std::thread::Builder::new()
            .name(CLIENT_THREADS.into())
            .spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::time::Instant::now() < deadline
                    && sample(&whole_process).is_ok_and(|now| now.ticks[0] < start + 30)
                {
                    spin(Duration::from_millis(20));
                }
                let _ = spun.0.send(());
                let _ = sampled.1.recv();
            })
            .expect("spawned");
        spun.1.recv().expect("the client spun");
        let (runner_after, me_after) = (sample(&runner).expect("sampled"), sample(&me).expect("sampled"));
        let _ = sampled.0.send(());
        client.join().expect("joined");
        let whole = me_after.ticks[0] - me_before.ticks[0];
        let without_clients = runner_after.ticks[0].saturating_sub(runner_before.ticks[0]);
        // The client thread's work (up to 30 ticks) counts for the whole process only.
        assert!(whole >= without_clients + 10, "whole {whole}, without the clients {without_clients}");
    }
}

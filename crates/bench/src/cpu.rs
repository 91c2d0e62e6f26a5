//! Where a measurement's CPU went: `--cpu NAME=PID` names processes serving the benchmark (a
//! host, the database's postmaster, a proxy), and each measured level prints the CPU time each
//! used per request. A process counts with its children, so PostgreSQL's backends count
//! towards its postmaster. Read from Linux's `/proc`; elsewhere the option is refused.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// One process to watch, as given on the command line.
#[derive(Clone, Debug)]
pub struct Watched {
    pub name: String,
    pub pid: u32,
}

/// Parses `NAME=PID`.
pub fn parse_watched(text: &str) -> Result<Watched, String> {
    let (name, pid) = text.split_once('=').ok_or_else(|| format!("'{text}' is not NAME=PID"))?;
    let pid = pid.trim().parse().map_err(|_| format!("'{pid}' is not a process id"))?;
    Ok(Watched { name: name.trim().to_owned(), pid })
}

/// CPU time used so far by each watched process and its children, in clock ticks.
pub struct Sample {
    ticks: Vec<u64>,
}

/// The kernel's clock ticks per second for `/proc/<pid>/stat` (USER_HZ), 100 on every Linux
/// this runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// One process's (parent, user + system ticks) from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the fields start after the last ')'.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
    let parent = fields.get(1)?.parse().ok()?;
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some((parent, user + system))
}

pub fn sample(watched: &[Watched]) -> Result<Sample> {
    if watched.is_empty() {
        return Ok(Sample { ticks: Vec::new() });
    }
    let mut processes: HashMap<u32, (u32, u64)> = HashMap::new();
    for entry in std::fs::read_dir("/proc").context("reading /proc for --cpu")? {
        let Some(pid) = entry.ok().and_then(|e| e.file_name().to_str().and_then(|n| n.parse().ok())) else {
            continue;
        };
        if let Some(stat) = stat(pid) {
            processes.insert(pid, stat);
        }
    }
    let mut ticks = Vec::with_capacity(watched.len());
    for process in watched {
        let Some(&(_, own)) = processes.get(&process.pid) else {
            bail!("--cpu {}={}: no such process", process.name, process.pid);
        };
        let children: u64 = processes.values().filter(|(parent, _)| *parent == process.pid).map(|(_, t)| t).sum();
        ticks.push(own + children);
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
        assert_eq!((watched.name.as_str(), watched.pid), ("edge1", 1234));
        assert!(parse_watched("edge1").is_err());
        assert!(parse_watched("edge1=abc").is_err());
    }

    #[test]
    fn this_process_uses_cpu_and_its_children_count() {
        let me = Watched { name: "me".into(), pid: std::process::id() };
        let before = sample(std::slice::from_ref(&me)).expect("sampled");
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = sample(std::slice::from_ref(&me)).expect("sampled");
        assert!(after.ticks[0] > before.ticks[0], "{} !> {}", after.ticks[0], before.ticks[0]);
    }
}

//! The process's own series, under the names and meanings every Prometheus client library gives
//! them (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...), read from Linux's
//! `/proc` at each scrape; and `gatehouse_build_info`, what this binary is (docs/architecture.md,
//! "Metrics"). Elsewhere than Linux only the build's series is served.
use prometheus::{Counter, Gauge, IntGauge, Opts, Registry};

/// `/proc` counts CPU time in USER_HZ ticks, which is 100 on every architecture Linux runs
/// Gatehouse on; reading it through `sysconf` would take unsafe code for a value that does not
/// change (Prometheus' own `procfs` library makes the same choice).
#[cfg(target_os = "linux")]
const USER_HZ: f64 = 100.0;

/// The build's labels: the release, and the wasmtime that runs the components.
pub(crate) fn register_build_info(registry: &Registry) -> prometheus::Result<()> {
    let info = IntGauge::with_opts(
        Opts::new("gatehouse_build_info", "Always 1; its labels say which build of gatehouse answers.")
            .const_label("version", env!("CARGO_PKG_VERSION"))
            .const_label("wasmtime", gatehouse_spin_host::WASMTIME_VERSION),
    )?;
    info.set(1);
    registry.register(Box::new(info))
}

/// The process's series, brought up to date by [`ProcessMetrics::refresh`].
pub(crate) struct ProcessMetrics {
    cpu_seconds: Counter,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    start_time: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    threads: Gauge,
}

impl ProcessMetrics {
    /// The series, registered in `registry`; none where there is no `/proc`.
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<Option<ProcessMetrics>> {
        if !cfg!(target_os = "linux") {
            return Ok(None);
        }
        let metrics = ProcessMetrics {
            cpu_seconds: Counter::new("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")?,
            resident_bytes: Gauge::new("process_resident_memory_bytes", "Resident memory size in bytes.")?,
            virtual_bytes: Gauge::new("process_virtual_memory_bytes", "Virtual memory size in bytes.")?,
            start_time: Gauge::new(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            )?,
            open_fds: Gauge::new("process_open_fds", "Number of open file descriptors.")?,
            max_fds: Gauge::new("process_max_fds", "Maximum number of open file descriptors.")?,
            threads: Gauge::new("process_threads", "Number of OS threads in the process.")?,
        };
        registry.register(Box::new(metrics.cpu_seconds.clone()))?;
        registry.register(Box::new(metrics.resident_bytes.clone()))?;
        registry.register(Box::new(metrics.virtual_bytes.clone()))?;
        registry.register(Box::new(metrics.start_time.clone()))?;
        registry.register(Box::new(metrics.open_fds.clone()))?;
        registry.register(Box::new(metrics.max_fds.clone()))?;
        registry.register(Box::new(metrics.threads.clone()))?;
        metrics.refresh();
        Ok(Some(metrics))
    }

    /// Reads `/proc/self`; a value that cannot be read keeps its last one.
    pub(crate) fn refresh(&self) {
        #[cfg(target_os = "linux")]
        {
            if let Some(stat) = std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(SelfStat::parse) {
                let cpu = (stat.utime + stat.stime) as f64 / USER_HZ;
                // A counter only goes up: the difference since the last scrape.
                let seen = self.cpu_seconds.get();
                if cpu > seen {
                    self.cpu_seconds.inc_by(cpu - seen);
                }
                self.virtual_bytes.set(stat.vsize as f64);
                self.threads.set(stat.threads as f64);
                if let Some(boot) = boot_time() {
                    self.start_time.set(boot as f64 + stat.start_ticks as f64 / USER_HZ);
                }
            }
            if let Some(kib) = status_kib("VmRSS") {
                self.resident_bytes.set(kib as f64 * 1024.0);
            }
            if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
                self.open_fds.set(entries.count() as f64);
            }
            if let Some(max) = max_open_files() {
                self.max_fds.set(max as f64);
            }
        }
    }
}

/// The fields of `/proc/self/stat` the series need (proc(5)).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, PartialEq, Eq)]
struct SelfStat {
    utime: u64,
    stime: u64,
    threads: u64,
    start_ticks: u64,
    vsize: u64,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl SelfStat {
    /// Reads the line after the command's name, which is in parentheses and may hold spaces
    /// or parentheses itself: the fields are counted from the last `)`.
    fn parse(line: &str) -> Option<SelfStat> {
        let (_, rest) = line.rsplit_once(')')?;
        // proc(5) numbers the fields from 1; `rest` starts at field 3 (state).
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(SelfStat {
            utime: field(14)?,
            stime: field(15)?,
            threads: field(20)?,
            start_ticks: field(22)?,
            vsize: field(23)?,
        })
    }
}

/// When the machine booted, in seconds since the epoch (`btime` of `/proc/stat`).
#[cfg(target_os = "linux")]
fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|line| line.strip_prefix("btime ")).and_then(|value| value.trim().parse().ok())
}

/// A `kB` field of `/proc/self/status`.
#[cfg(target_os = "linux")]
fn status_kib(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The soft limit on open files, unless unlimited.
#[cfg(target_os = "linux")]
fn max_open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find_map(|line| line.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use prometheus::Encoder as _;

    use super::*;

    /// One sample's value from a scrape's text.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn the_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let line = "4242 (gate (house) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1234 \
                    987654 512 18446744073709551615";
        let stat = SelfStat::parse(line).expect("a stat line");
        assert_eq!(stat, SelfStat { utime: 250, stime: 50, threads: 7, start_ticks: 1234, vsize: 987654 });
        assert_eq!(SelfStat::parse("4242 (cut short) S 1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_scrape_has_the_process_and_the_build() {
        let registry = Registry::new();
        register_build_info(&registry).expect("fresh registry");
        let process = ProcessMetrics::register(&registry).expect("fresh registry").expect("Linux has /proc");
        // Some CPU to count: the kernel counts it in ticks of 10 ms, and a busy machine may
        // give this thread little of a wall-clock slice, so spin until a tick shows (bounded).
        let scrape = || {
            process.refresh();
            let mut text = Vec::new();
            prometheus::TextEncoder::new().encode(&registry.gather(), &mut text).expect("text format");
            String::from_utf8(text).expect("UTF-8")
        };
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut text = scrape();
        while sample(&text, "process_cpu_seconds_total").is_some_and(|cpu| cpu == 0.0)
            && std::time::Instant::now() < give_up
        {
            let slice = std::time::Instant::now() + std::time::Duration::from_millis(20);
            while std::time::Instant::now() < slice {
                std::hint::black_box((0..1_000u64).fold(0u64, |sum, n| sum.wrapping_add(n * n)));
            }
            text = scrape();
        }

        let build = format!(
            "gatehouse_build_info{{version=\"{}\",wasmtime=\"{}\"}}",
            env!("CARGO_PKG_VERSION"),
            gatehouse_spin_host::WASMTIME_VERSION
        );
        assert_eq!(sample(&text, &build), Some(1.0), "{text}");
        assert!(text.contains("# TYPE process_cpu_seconds_total counter"), "{text}");
        assert!(sample(&text, "process_cpu_seconds_total").is_some_and(|cpu| cpu > 0.0), "{text}");
        assert!(sample(&text, "process_resident_memory_bytes").is_some_and(|rss| rss > 1024.0 * 1024.0), "{text}");
        assert!(sample(&text, "process_virtual_memory_bytes").is_some_and(|v| v > 0.0), "{text}");
        assert!(sample(&text, "process_open_fds").is_some_and(|fds| fds >= 3.0), "{text}");
        assert!(sample(&text, "process_max_fds").is_some_and(|max| max >= 3.0), "{text}");
        assert!(sample(&text, "process_threads").is_some_and(|threads| threads >= 1.0), "{text}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs_f64();
        let started = sample(&text, "process_start_time_seconds").expect("a start time");
        assert!(started <= now + 1.0 && started > now - 3600.0, "started at {started}, now {now}");
    }
}

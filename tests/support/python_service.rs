//! A team's own Python web service with a Gatehouse tool beside its code
//! (examples/tool-service/clinic.py): Starlette under uvicorn, in a process of its own, with the
//! tool contract served by the gatehouse-tool package (sdk/python) from the wheel `sdk/test`
//! builds and installs into `target/sdk/venv`.
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::workspace_root;

/// The virtualenv `sdk/test` makes, with the SDK's wheel, uvicorn and Starlette installed.
pub fn sdk_python() -> PathBuf {
    workspace_root().join("target/sdk/venv/bin/python")
}

pub struct PythonService {
    /// The service's origin, `http://127.0.0.1:<port>`.
    pub origin: String,
    /// The tool contract's base URL, for a `tool_registry` entry.
    pub contract_url: String,
    _process: Child,
}

impl PythonService {
    /// The clinic's service, requiring requests signed with `secret`; its calls are kept in an
    /// SQLite file of its own under target/.
    pub async fn start_clinic(secret: &str) -> Result<PythonService> {
        let python = sdk_python();
        if !python.exists() {
            bail!("{} is missing: run sdk/test first (scripts/test does)", python.display());
        }
        let store = workspace_root().join("target").join(crate::unique("clinic")).with_extension("sqlite3");
        let mut process = Command::new(&python)
            .args(["-m", "uvicorn", "clinic:app", "--host", "127.0.0.1", "--port", "0", "--no-access-log"])
            .arg("--app-dir")
            .arg(workspace_root().join("examples/tool-service"))
            .env("GATEHOUSE_CONTRACT_SECRET", secret)
            .env("CLINIC_CONTRACT_DB", &store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting uvicorn with {}", python.display()))?;
        let stderr = process.stderr.take().context("uvicorn's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let origin = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = tokio::time::timeout(left, lines.next_line())
                .await
                .context("uvicorn never said where it listens")??
                .context("uvicorn exited before it listened")?;
            // "Uvicorn running on http://127.0.0.1:PORT (Press CTRL+C to quit)"
            if let Some(rest) = line.split("running on ").nth(1) {
                break rest.split_whitespace().next().context("an address")?.to_owned();
            }
        };
        // The rest of its log is read (and dropped) so a full pipe never stalls it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let contract_url = format!("{origin}/gatehouse");
        Ok(PythonService { origin, contract_url, _process: process })
    }

    /// The clinic's book as its own route shows it: appointments, holds and the moves made.
    pub async fn book(&self) -> Result<Value> {
        Ok(crate::http().get(format!("{}/appointments", self.origin)).send().await?.error_for_status()?.json().await?)
    }
}

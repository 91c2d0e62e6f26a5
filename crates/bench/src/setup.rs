//! What one benchmark run works from: the arguments, read, and what the harness provided.
use std::path::PathBuf;

use crate::args::BenchArgs;
use crate::cpu;
use crate::scenario::Scenario;

/// What the benchmark's own work needs, owned, so that it can run on the clients' runtime.
pub(crate) struct Setup {
    pub(crate) args: BenchArgs,
    pub(crate) scenarios: Vec<Scenario>,
    /// The application's address, `http://host:port`.
    pub(crate) base: String,
    pub(crate) token: String,
    pub(crate) database_url: Option<String>,
    pub(crate) callback_secret: String,
    pub(crate) project_home: PathBuf,
    /// For `embed`: where the model is.
    pub(crate) model_dir: Option<PathBuf>,
    /// The processes whose CPU each level prints.
    pub(crate) watched: Vec<cpu::Watched>,
}

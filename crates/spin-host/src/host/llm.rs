//! `fermyon:spin/llm@2.0.0`: embeddings with the local all-MiniLM-L6-v2, as `spin up` serves
//! them from `.spin/ai-models/`. No language model ships, so `infer` is never supported.
//!
//! As in Spin, a component may use only the models its manifest entry lists in `ai_models`.
//! The model is loaded on the first request that needs it, once per process, so a runner whose
//! components never embed does not hold its 90 MB of weights.
use std::path::PathBuf;
use std::sync::Arc;

use gatehouse_embeddings::{EmbedError, Embedder, MODEL_NAME, locate_model_dir};
use tokio::sync::OnceCell;

use super::HostState;
use crate::bindings::fermyon::spin2_0_0::llm::{
    EmbeddingsResult, EmbeddingsUsage, Error, Host, InferencingParams, InferencingResult,
};

/// The local models of one runner process, shared by every component.
pub(crate) struct LocalModels {
    /// `--model-dir` (or `GATEHOUSE_MODEL_DIR`), which wins over the search.
    explicit_dir: Option<PathBuf>,
    /// Folders whose `.spin/ai-models/` may hold the model, in order.
    search_roots: Vec<PathBuf>,
    embedder: OnceCell<Arc<Embedder>>,
}

impl LocalModels {
    pub(crate) fn new(explicit_dir: Option<PathBuf>, search_roots: Vec<PathBuf>) -> LocalModels {
        LocalModels { explicit_dir, search_roots, embedder: OnceCell::new() }
    }

    /// Where the embedding model would be loaded from; checks the files, loads nothing.
    pub(crate) fn model_dir(&self) -> Result<PathBuf, EmbedError> {
        let roots: Vec<&std::path::Path> = self.search_roots.iter().map(PathBuf::as_path).collect();
        locate_model_dir(self.explicit_dir.as_deref(), &roots)
    }

    /// The shared embedder, loaded by the first caller. A failed load is not remembered, so
    /// installing the model makes the next request work without a restart.
    async fn embedder(&self) -> Result<Arc<Embedder>, Error> {
        self.embedder
            .get_or_try_init(|| async {
                let dir = self.model_dir().map_err(runtime_error)?;
                tokio::task::spawn_blocking(move || Embedder::load(&dir))
                    .await
                    .map_err(|e| Error::RuntimeError(format!("loading the embedding model failed: {e}")))?
                    .map(Arc::new)
                    .map_err(runtime_error)
            })
            .await
            .cloned()
    }
}

fn runtime_error(error: EmbedError) -> Error {
    Error::RuntimeError(error.to_string())
}

impl HostState {
    /// Spin's answer when a component names a model its manifest entry does not list.
    fn check_model_allowed(&self, model: &str) -> Result<(), Error> {
        if self.component.ai_models.iter().any(|allowed| allowed == model) {
            return Ok(());
        }
        Err(Error::InvalidInput(format!(
            "component '{}' may not use model '{model}': add it to `ai_models` of [component.{}] in the manifest",
            self.component.id, self.component.id
        )))
    }
}

impl Host for HostState {
    async fn infer(
        &mut self,
        model: String,
        _prompt: String,
        _params: Option<InferencingParams>,
    ) -> Result<InferencingResult, Error> {
        self.check_model_allowed(&model)?;
        Err(Error::ModelNotSupported)
    }

    async fn generate_embeddings(&mut self, model: String, text: Vec<String>) -> Result<EmbeddingsResult, Error> {
        self.check_model_allowed(&model)?;
        if model != MODEL_NAME {
            return Err(Error::ModelNotSupported);
        }
        let embedder = self.component.models.embedder().await?;
        // A forward pass takes milliseconds of CPU: off the async workers, so other requests
        // keep being served meanwhile.
        let embeddings = tokio::task::spawn_blocking(move || {
            let texts: Vec<&str> = text.iter().map(String::as_str).collect();
            embedder.embed_counting_tokens(&texts)
        })
        .await
        .map_err(|e| Error::RuntimeError(format!("embedding task failed: {e}")))?
        .map_err(runtime_error)?;
        let prompt_token_count = u32::try_from(embeddings.token_count()).unwrap_or(u32::MAX);
        Ok(EmbeddingsResult { embeddings: embeddings.vectors, usage: EmbeddingsUsage { prompt_token_count } })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::chaining::Outbound;
    use crate::host::{ComponentRuntime, PgPools};
    use crate::outbound::AllowedHosts;

    fn project_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn state(ai_models: &[&str], models: Arc<LocalModels>) -> HostState {
        let component = ComponentRuntime {
            id: Arc::from("searcher"),
            variables: HashMap::new(),
            allowed_hosts: Arc::new(AllowedHosts::default()),
            environment: Vec::new(),
            ai_models: ai_models.iter().map(|m| (*m).to_owned()).collect(),
            models,
            mounts: Vec::new(),
        };
        let outbound = Outbound::unchained(component.id.clone(), component.allowed_hosts.clone());
        HostState::new(
            outbound,
            Arc::new(component),
            Arc::new(PgPools::new(1)),
            crate::telemetry::GuestTelemetry::detached(),
        )
    }

    #[tokio::test]
    async fn a_listed_model_embeds_each_text_into_a_unit_vector() {
        let models = Arc::new(LocalModels::new(None, vec![project_root()]));
        let mut host = state(&[MODEL_NAME], models.clone());
        let texts = vec!["Revenue in EMEA grew 12% in March.".to_owned(), "hello".to_owned()];
        let result = host.generate_embeddings(MODEL_NAME.into(), texts.clone()).await.unwrap();
        assert_eq!(result.embeddings.len(), 2);
        for vector in &result.embeddings {
            assert_eq!(vector.len(), gatehouse_embeddings::DIMENSIONS);
            let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5);
        }
        // [CLS] hello [SEP] is 3 tokens; the sentence has more than that.
        assert!(result.usage.prompt_token_count > 6, "{:?}", result.usage);

        // The same model instance serves every component of the process.
        let mut other = state(&[MODEL_NAME], models.clone());
        let again = other.generate_embeddings(MODEL_NAME.into(), texts[..1].to_vec()).await.unwrap();
        assert_eq!(again.embeddings[0], result.embeddings[0]);
    }

    #[tokio::test]
    async fn a_component_may_use_only_the_models_it_lists() {
        let models = Arc::new(LocalModels::new(None, vec![project_root()]));
        let mut host = state(&[], models.clone());
        let refused = host.generate_embeddings(MODEL_NAME.into(), vec!["hi".into()]).await;
        assert!(matches!(&refused, Err(Error::InvalidInput(m)) if m.contains("ai_models")), "{refused:?}");
        assert!(matches!(host.infer("llama2-chat".into(), "hi".into(), None).await, Err(Error::InvalidInput(_))));
    }

    #[tokio::test]
    async fn other_models_and_inference_are_not_supported() {
        let models = Arc::new(LocalModels::new(None, vec![project_root()]));
        let mut host = state(&[MODEL_NAME, "bge-small", "llama2-chat"], models);
        let other = host.generate_embeddings("bge-small".into(), vec!["hi".into()]).await;
        assert!(matches!(other, Err(Error::ModelNotSupported)), "{other:?}");
        let infer = host.infer("llama2-chat".into(), "hi".into(), None).await;
        assert!(matches!(infer, Err(Error::ModelNotSupported)), "{infer:?}");
    }

    #[tokio::test]
    async fn a_missing_model_is_a_runtime_error_that_says_how_to_install_it() {
        let nowhere = std::env::temp_dir().join(format!("gatehouse-no-model-{}", std::process::id()));
        let models = Arc::new(LocalModels::new(Some(nowhere), Vec::new()));
        let mut host = state(&[MODEL_NAME], models);
        let missing = host.generate_embeddings(MODEL_NAME.into(), vec!["hi".into()]).await;
        assert!(matches!(&missing, Err(Error::RuntimeError(m)) if m.contains("scripts/setup")), "{missing:?}");
    }
}

//! Against the real model files that `scripts/setup` installs, and against vectors that
//! sentence-transformers computed from the same files (tests/fixtures/embeddings).
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::*;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn embedder() -> &'static Embedder {
    static EMBEDDER: OnceLock<Embedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        let root = workspace_root();
        let dir = locate_model_dir(None, &[&root]).unwrap();
        Embedder::load(&dir).unwrap()
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// `(text, tokens, vector)` for each reference sentence.
fn reference() -> Vec<(String, usize, Vec<f32>)> {
    let path = workspace_root().join("tests/fixtures/embeddings/reference.json");
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(reference["model"], MODEL_NAME);
    assert_eq!(reference["max_seq_length"], MAX_TOKENS);
    let sentences = reference["sentences"].as_array().unwrap();
    assert!(sentences.len() >= 5);
    sentences
        .iter()
        .map(|s| {
            let vector = s["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            (s["text"].as_str().unwrap().to_owned(), s["tokens"].as_u64().unwrap() as usize, vector)
        })
        .collect()
}

#[test]
fn vectors_match_sentence_transformers_alone_and_in_a_batch() {
    let reference = reference();
    let texts: Vec<&str> = reference.iter().map(|(text, _, _)| text.as_str()).collect();
    let batched = embedder().embed(&texts).unwrap();
    for ((text, tokens, expected), in_batch) in reference.iter().zip(&batched) {
        let alone = embedder().embed_counting_tokens(&[text]).unwrap();
        assert_eq!(alone.token_count(), *tokens, "tokens of {text:?}");
        let similarity = cosine(&alone.vectors[0], expected);
        assert!(similarity >= 0.999, "{text:?}: cosine {similarity} to sentence-transformers");
        let similarity = cosine(in_batch, expected);
        assert!(similarity >= 0.999, "{text:?} in a batch: cosine {similarity} to sentence-transformers");
    }
}

#[test]
fn a_vector_does_not_depend_on_the_texts_it_is_batched_with() {
    let short = "Revenue grew in EMEA.";
    let alone = embedder().embed(&[short]).unwrap().remove(0);
    let long = "Inventory was counted and reconciled across every warehouse of the region. ".repeat(20);
    let mixed = embedder().embed(&[&long, short, "Late deliveries of the Atlas router.", &long[..300]]).unwrap();
    let similarity = cosine(&alone, &mixed[1]);
    assert!(similarity >= 0.9999, "cosine {similarity}");
    // Alone, the long text is a pass spread over every core; in the batch it shares a pass
    // that runs on one thread, beside another.
    let long_alone = embedder().embed(&[&long]).unwrap().remove(0);
    let similarity = cosine(&long_alone, &mixed[0]);
    assert!(similarity >= 0.9999, "cosine {similarity}");
    // Texts over several passes, in an order that is not their length order.
    let many: Vec<String> = (0..70).map(|i| format!("{} {i}", "word ".repeat(i % 13))).collect();
    let mut texts: Vec<&str> = many.iter().map(String::as_str).collect();
    texts.insert(37, short);
    let vectors = embedder().embed(&texts).unwrap();
    assert_eq!(vectors.len(), texts.len());
    assert!(cosine(&alone, &vectors[37]) >= 0.9999);
    let single = embedder().embed(&[texts[5]]).unwrap().remove(0);
    assert!(cosine(&single, &vectors[5]) >= 0.9999);
}

#[test]
fn vectors_have_384_dimensions_and_unit_length() {
    let vectors = embedder().embed(&["Quarterly revenue grew in EMEA.", "", "a"]).unwrap();
    assert_eq!(vectors.len(), 3);
    for vector in &vectors {
        assert_eq!(vector.len(), DIMENSIONS);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    assert!(embedder().embed(&[]).unwrap().is_empty());
}

#[test]
fn the_model_folder_is_found_and_a_missing_one_says_how_to_install_it() {
    let root = workspace_root();
    assert_eq!(locate_model_dir(None, &[Path::new("/nonexistent"), &root]).unwrap(), spin_model_dir(&root));
    let explicit = spin_model_dir(&root);
    assert_eq!(locate_model_dir(Some(&explicit), &[]).unwrap(), explicit);

    let empty = std::env::temp_dir().join(format!("gatehouse-empty-model-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    // A folder named explicitly must hold the model: no fallback to the project's copy.
    let error = locate_model_dir(Some(&empty), &[&root]).unwrap_err().to_string();
    assert!(error.contains("has no model.safetensors") && error.contains("scripts/setup"), "{error}");
    let error = locate_model_dir(None, &[&empty]).unwrap_err().to_string();
    assert!(error.contains(".spin/ai-models/all-minilm-l6-v2") && error.contains("scripts/setup"), "{error}");
    std::fs::remove_dir_all(&empty).unwrap();
}

#[test]
fn one_embedder_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Embedder>();
}

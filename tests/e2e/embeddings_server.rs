//! `gatehouse embeddings serve` (docs/embeddings.md), the real process over real HTTP: the
//! vectors it answers are the local engine's, whatever they are batched with and however they
//! are encoded; every bad request is refused with OpenAI's error shape and a stable code; a full
//! queue refuses at once. The vector tool pointed at it is tested in `vector_search`.

use anyhow::{Context, Result, ensure};
use base64::Engine;
use gatehouse_embeddings::{DIMENSIONS, Embedder, locate_model_dir};
use gatehouse_embeddings_server::Config;
use gatehouse_embeddings_server::openai::{EmbeddingsResponse, Vector};
use gatehouse_tests::vector::EmbeddingsServer;
use gatehouse_tests::workspace_root;
use serde_json::{Value, json};

const TOKEN: &str = "embeddings-test-token-5b1e";

fn texts(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| match i % 4 {
            0 => format!("late deliveries of order {i} in the Midwest"),
            1 => format!("customer {i} asked for a refund on a damaged battery pack"),
            2 => format!("quarterly revenue report number {i}"),
            _ => format!("the router in branch {i} keeps dropping the connection after the firmware update"),
        })
        .collect()
}

async fn post(client: &reqwest::Client, server: &EmbeddingsServer, body: &Value) -> Result<(u16, Value)> {
    let answer = client.post(&server.url).bearer_auth(TOKEN).json(body).send().await?;
    Ok((answer.status().as_u16(), answer.json().await?))
}

fn vectors(answer: Value) -> Result<Vec<Vec<f32>>> {
    let response: EmbeddingsResponse = serde_json::from_value(answer)?;
    ensure!(response.object == "list" && response.model == "all-minilm-l6-v2", "{response:?}");
    ensure!(response.usage.prompt_tokens > 0 && response.usage.total_tokens == response.usage.prompt_tokens);
    response
        .data
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            ensure!(item.index == i && item.object == "embedding", "item {i}: {item:?}");
            Ok(match item.embedding {
                Vector::Float(vector) => vector,
                Vector::Base64(text) => base64::engine::general_purpose::STANDARD
                    .decode(text)?
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            })
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Sixteen clients at once, each with its own texts, some asking for base64: every vector is
/// the one the local engine computes for its text alone (cosine at least 0.99999), in order.
#[tokio::test]
async fn serves_the_local_vectors_to_concurrent_clients() -> Result<()> {
    let server = EmbeddingsServer::start(TOKEN).await?;
    let all = texts(48);
    let model_dir = locate_model_dir(None, &[&workspace_root()])?;
    let local = {
        let all = all.clone();
        tokio::task::spawn_blocking(move || -> Result<Vec<Vec<f32>>> {
            let embedder = Embedder::load(&model_dir)?;
            all.iter().map(|text| Ok(embedder.embed(&[text.as_str()])?.remove(0))).collect()
        })
        .await??
    };
    let client = reqwest::Client::new();
    let requests = all.chunks(3).enumerate().map(|(client_number, chunk)| {
        let (client, server) = (&client, &server);
        let format = if client_number % 2 == 0 { "float" } else { "base64" };
        let body = json!({"model": "all-minilm-l6-v2", "input": chunk, "encoding_format": format});
        async move { post(client, server, &body).await }
    });
    let answers = futures::future::join_all(requests).await;
    for (chunk_number, answer) in answers.into_iter().enumerate() {
        let (status, body) = answer?;
        ensure!(status == 200, "{status}: {body}");
        let got = vectors(body)?;
        ensure!(got.len() == 3, "three vectors for three texts");
        for (offset, vector) in got.iter().enumerate() {
            let expected = &local[chunk_number * 3 + offset];
            ensure!(vector.len() == DIMENSIONS);
            let similarity = cosine(vector, expected);
            ensure!(similarity >= 0.99999, "text {}: cosine {similarity}", chunk_number * 3 + offset);
        }
    }

    // One text as a plain string, and the model under its Hugging Face name.
    let (status, body) =
        post(&client, &server, &json!({"model": "sentence-transformers/all-MiniLM-L6-v2", "input": all[0]})).await?;
    ensure!(status == 200, "{body}");
    ensure!(cosine(&vectors(body)?[0], &local[0]) >= 0.99999);
    Ok(())
}

/// Sends `request` and reads its refusal in OpenAI's error shape: the status and the code, with
/// a message, a type and a param, and never the token.
async fn refusal(request: reqwest::RequestBuilder) -> Result<(u16, String)> {
    let answer = request.send().await?;
    let status = answer.status().as_u16();
    let body: Value = answer.json().await?;
    let fields = body["error"].as_object().context(format!("not an error: {body}"))?;
    ensure!(fields["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    ensure!(fields["type"].is_string() && fields.contains_key("param"), "{body}");
    ensure!(!body.to_string().contains(TOKEN), "{body}");
    Ok((status, fields["code"].as_str().unwrap_or_default().to_owned()))
}

/// Each bad request gets its status and code in OpenAI's error shape; the token is needed
/// everywhere but the health probe, and no answer repeats it.
#[tokio::test]
async fn refuses_each_bad_request_with_a_stable_code() -> Result<()> {
    let server = EmbeddingsServer::start(TOKEN).await?;
    let client = reqwest::Client::new();
    let base = server.url.trim_end_matches("/v1/embeddings").to_owned();
    let good = json!({"model": "all-minilm-l6-v2", "input": "hello"});
    assert_eq!(refusal(client.post(&server.url).json(&good)).await?, (401, "invalid_api_key".into()));
    let wrong = client.post(&server.url).bearer_auth("wrong").json(&good);
    assert_eq!(refusal(wrong).await?, (401, "invalid_api_key".into()));
    let answer = client.get(format!("{base}/v1/models")).send().await?;
    assert_eq!(answer.status().as_u16(), 401);
    let models: Value = client.get(format!("{base}/v1/models")).bearer_auth(TOKEN).send().await?.json().await?;
    assert_eq!(models["data"][0]["id"], "all-minilm-l6-v2");
    let health = client.get(format!("{base}/healthz")).send().await?;
    assert_eq!(health.status().as_u16(), 200);

    let cases = [
        (json!({"model": "text-embedding-3-small", "input": "x"}), 404, "model_not_found"),
        (json!({"model": "all-minilm-l6-v2", "input": [101, 2023, 102]}), 400, "unsupported_input"),
        (json!({"model": "all-minilm-l6-v2", "input": []}), 400, "invalid_input"),
        (json!({"model": "all-minilm-l6-v2", "input": ["fine", ""]}), 400, "invalid_input"),
        (json!({"model": "all-minilm-l6-v2", "input": "x", "dimensions": 128}), 400, "unsupported_dimensions"),
        (json!({"model": "all-minilm-l6-v2", "input": "x", "encoding_format": "int8"}), 400, "invalid_encoding_format"),
        (json!({"model": "all-minilm-l6-v2", "input": vec!["x"; 2049]}), 400, "too_many_inputs"),
        (json!({"model": "all-minilm-l6-v2", "input": "y".repeat(32_769)}), 400, "input_too_long"),
        (json!({"input": "no model"}), 400, "invalid_json"),
    ];
    for (body, status, code) in cases {
        let request = client.post(&server.url).bearer_auth(TOKEN).json(&body);
        assert_eq!(refusal(request).await?, (status, code.to_owned()), "the case expecting {code}");
    }
    let not_json = client.post(&server.url).bearer_auth(TOKEN).body("{not json");
    assert_eq!(refusal(not_json).await?, (400, "invalid_json".into()));
    // One byte over the server's limit, so that the server reads all of it before it answers:
    // with more left unread, closing the connection could reset it under the answer.
    let huge = "z".repeat(Config::new(String::new()).max_body_bytes + 1);
    let huge = client.post(&server.url).bearer_auth(TOKEN).body(huge);
    assert_eq!(refusal(huge).await?, (413, "request_too_large".into()));
    let wrong_method = client.get(&server.url).bearer_auth(TOKEN);
    assert_eq!(refusal(wrong_method).await?, (405, "method_not_allowed".into()));
    let elsewhere = client.get(format!("{base}/v2/anything")).bearer_auth(TOKEN);
    assert_eq!(refusal(elsewhere).await?, (404, "not_found".into()));

    // After all that, it still serves.
    let (status, body) = post(&client, &server, &good).await?;
    ensure!(status == 200, "{body}");
    Ok(())
}

/// With room for one waiting request, eight large requests at once: the model takes one, one
/// waits, and the rest are refused at once with 503 `overloaded`, not left to time out. Every
/// request that was taken is answered in full.
#[tokio::test]
async fn a_full_queue_refuses_at_once() -> Result<()> {
    let server = EmbeddingsServer::start_with(TOKEN, &["--queue", "1"]).await?;
    let client = reqwest::Client::new();
    let body = json!({"model": "all-minilm-l6-v2", "input": texts(256)});
    let answers = futures::future::join_all((0..8).map(|_| post(&client, &server, &body))).await;
    let mut served = 0;
    let mut refused = 0;
    for answer in answers {
        let (status, answer) = answer?;
        match status {
            200 => {
                ensure!(vectors(answer)?.len() == 256);
                served += 1;
            }
            503 => {
                ensure!(answer["error"]["code"] == "overloaded", "{answer}");
                refused += 1;
            }
            other => anyhow::bail!("{other}: {answer}"),
        }
    }
    ensure!(served >= 1 && refused >= 1, "{served} served, {refused} refused");
    Ok(())
}

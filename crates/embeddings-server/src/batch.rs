//! One thread runs the model; requests queue for it, and whatever has queued while it was busy
//! is embedded together. A batch of many texts spreads over every core (the model runs its
//! passes side by side) where one short text alone keeps most of the machine idle, so under
//! concurrent clients the server's throughput approaches `gatehouse ingest`'s, with no timer
//! that makes a lone request wait for company. A text's vector does not depend on the texts it
//! is batched with (`gatehouse_embeddings::Embedder::embed`).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use gatehouse_embeddings::{EmbedError, Embedder};
use tokio::sync::oneshot;

/// Vectors of one request's texts, in order, and the tokens the model read for them.
#[derive(Debug)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub tokens: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The queue is full: the server is taking more than it can embed.
    #[error("the embedding queue is full")]
    Busy,
    #[error("the embedding thread has stopped")]
    Stopped,
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

struct Job {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Embedded, EmbedError>>,
}

/// The queue in front of the model's thread. Cloned into every connection.
#[derive(Clone)]
pub struct Batcher {
    jobs: SyncSender<Job>,
}

impl Batcher {
    /// Starts the model's thread. At most `max_texts` texts go into one batch (a request with
    /// more is embedded alone); at most `queue` requests wait, beyond which a request is
    /// refused at once rather than left to time out.
    pub fn start(embedder: Arc<Embedder>, max_texts: usize, queue: usize) -> std::io::Result<Batcher> {
        let (jobs, waiting) = sync_channel(queue);
        std::thread::Builder::new()
            .name("embeddings-batch".into())
            .spawn(move || run(&embedder, &waiting, max_texts.max(1)))?;
        Ok(Batcher { jobs })
    }

    pub async fn embed(&self, texts: Vec<String>) -> Result<Embedded, BatchError> {
        let (reply, answer) = oneshot::channel();
        self.jobs.try_send(Job { texts, reply }).map_err(|error| match error {
            TrySendError::Full(_) => BatchError::Busy,
            TrySendError::Disconnected(_) => BatchError::Stopped,
        })?;
        Ok(answer.await.map_err(|_| BatchError::Stopped)??)
    }
}

/// Until every [`Batcher`] is dropped: take a request, add what else waits, embed, answer.
fn run(embedder: &Embedder, waiting: &Receiver<Job>, max_texts: usize) {
    while let Ok(first) = waiting.recv() {
        let mut texts = first.texts.len();
        let mut batch = vec![first];
        while texts < max_texts {
            let Ok(job) = waiting.try_recv() else { break };
            texts += job.texts.len();
            batch.push(job);
        }
        answer(embedder, batch);
    }
}

fn answer(embedder: &Embedder, batch: Vec<Job>) {
    let texts: Vec<&str> = batch.iter().flat_map(|job| job.texts.iter().map(String::as_str)).collect();
    match embedder.embed_counting_tokens(&texts) {
        Ok(embedded) => {
            let mut vectors = embedded.vectors.into_iter();
            let mut tokens = embedded.tokens_per_text.into_iter();
            for job in batch {
                let count = job.texts.len();
                let answer = Embedded {
                    vectors: vectors.by_ref().take(count).collect(),
                    tokens: tokens.by_ref().take(count).sum(),
                };
                // A client that hung up has dropped its receiver: nothing to tell.
                let _ = job.reply.send(Ok(answer));
            }
        }
        // One request's text failed the whole batch: each request again on its own, so only
        // the one at fault hears of it.
        Err(_) if batch.len() > 1 => {
            for job in batch {
                answer(embedder, vec![job]);
            }
        }
        Err(error) => {
            if let Some(job) = batch.into_iter().next() {
                let _ = job.reply.send(Err(error));
            }
        }
    }
}

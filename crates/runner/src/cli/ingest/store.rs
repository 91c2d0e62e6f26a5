//! Writing a batch of documents: one statement per batch, which inserts new ids, updates those
//! whose content, metadata or date changed, and leaves identical rows (and their
//! `updated_at`) untouched.
use std::collections::HashMap;

use anyhow::{Context, Result};
use chrono::NaiveDate;
use serde_json::Value;
use tokio_postgres::{Client, Statement};

use super::line::Document;

/// A missing embedding (`NULL`) means the content is unchanged: the row keeps the vector it
/// has. Rows are compared on the content hash rather than the text, which is cheaper. $7 is
/// the tenant the documents belong to; ids are the tenant's own.
const UPSERT: &str = "
    WITH input AS (
        SELECT *
          FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::date[], $5::text[], $6::text[])
               AS t(id, content, metadata, doc_date, embedding, content_hash)
    )
    INSERT INTO documents AS d (tenant_id, id, content, metadata, doc_date, embedding, content_hash)
    SELECT $7, i.id, i.content, i.metadata, i.doc_date,
           coalesce(i.embedding::vector, (SELECT e.embedding FROM documents e WHERE e.tenant_id = $7 AND e.id = i.id)),
           i.content_hash
      FROM input i
    ON CONFLICT (tenant_id, id) DO UPDATE
       SET content = EXCLUDED.content, metadata = EXCLUDED.metadata, doc_date = EXCLUDED.doc_date,
           embedding = EXCLUDED.embedding, content_hash = EXCLUDED.content_hash, updated_at = now()
     WHERE (d.content_hash, d.metadata, d.doc_date)
           IS DISTINCT FROM (EXCLUDED.content_hash, EXCLUDED.metadata, EXCLUDED.doc_date)
    RETURNING (xmax = 0) AS inserted";

const EXISTING_HASHES: &str = "SELECT id, content_hash FROM documents WHERE tenant_id = $2 AND id = ANY($1::text[])";

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Written {
    pub(crate) inserted: u64,
    pub(crate) updated: u64,
    pub(crate) unchanged: u64,
}

pub(super) struct DocumentStore {
    /// Writes the batches.
    writer: Client,
    /// Reads the next batch's stored hashes while the writer writes the one before: on one
    /// connection the read would wait for the write (an insert into the HNSW graph, tens of
    /// milliseconds a document in a large table), and the model with it.
    reader: Client,
    tenant: String,
    upsert: Statement,
    existing_hashes: Statement,
}

impl DocumentStore {
    pub(super) async fn new(writer: Client, reader: Client, tenant: &str) -> Result<DocumentStore> {
        let upsert = writer.prepare(UPSERT).await.context("preparing the document upsert")?;
        let existing_hashes = reader.prepare(EXISTING_HASHES).await.context("preparing the hash lookup")?;
        Ok(DocumentStore { writer, reader, tenant: tenant.to_owned(), upsert, existing_hashes })
    }

    /// The stored content hash of each of these ids that exists.
    pub(super) async fn existing_hashes(&self, documents: &[Document]) -> Result<HashMap<String, String>> {
        let ids: Vec<&str> = documents.iter().map(|d| d.id.as_str()).collect();
        let rows =
            self.reader.query(&self.existing_hashes, &[&ids, &self.tenant]).await.context("reading stored hashes")?;
        Ok(rows.into_iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Upserts the batch; `embeddings[i]` is `None` where document `i`'s content is stored
    /// already with this very hash. Ids must be unique within the batch.
    pub(super) async fn write(&self, documents: &[Document], embeddings: &[Option<String>]) -> Result<Written> {
        let ids: Vec<&str> = documents.iter().map(|d| d.id.as_str()).collect();
        let contents: Vec<&str> = documents.iter().map(|d| d.content.as_str()).collect();
        let metadata: Vec<&Value> = documents.iter().map(|d| &d.metadata).collect();
        let dates: Vec<Option<NaiveDate>> = documents.iter().map(|d| d.doc_date).collect();
        let hashes: Vec<&str> = documents.iter().map(|d| d.content_hash.as_str()).collect();
        let rows = self
            .writer
            .query(&self.upsert, &[&ids, &contents, &metadata, &dates, &embeddings, &hashes, &self.tenant])
            .await
            .context("writing documents")?;
        let inserted = rows.iter().filter(|row| row.get::<_, bool>(0)).count() as u64;
        let updated = rows.len() as u64 - inserted;
        Ok(Written { inserted, updated, unchanged: documents.len() as u64 - inserted - updated })
    }
}

/// pgvector's text form, `[0.1,-0.2,...]`; Rust prints the shortest text that reads back as
/// the same `f32`, so nothing is lost.
pub(super) fn vector_literal(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 12 + 2);
    text.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&x.to_string());
    }
    text.push(']');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_written_in_pgvector_text_form_without_loss() {
        let vector = [0.1f32, -2.5e-7, 1.0 / 3.0];
        let text = vector_literal(&vector);
        assert_eq!(text, "[0.1,-0.00000025,0.33333334]");
        let back: Vec<f32> = text.trim_matches(['[', ']']).split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(back, vector);
    }
}

//! The mailbox: messages with their labels, and drafts pointing at DRAFT messages.
use std::time::{SystemTime, UNIX_EPOCH};

use crate::headers::{self, HeaderBlock};

pub(crate) const DRAFT: &str = "DRAFT";
pub(crate) const SENT: &str = "SENT";

/// A message in the mailbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// 16 hexadecimal digits, like Gmail's.
    pub id: String,
    pub thread_id: String,
    pub label_ids: Vec<String>,
    /// The decoded RFC 5322 bytes exactly as received.
    pub raw: Vec<u8>,
    /// The Message-ID header as written in the message, brackets included.
    pub message_id_header: Option<String>,
    /// What the recipients receive: `raw` without its Bcc field.
    pub delivered: Vec<u8>,
    /// The Bcc addresses Gmail delivers to, taken from the field it removes.
    pub bcc: Vec<String>,
    /// When it was created, or sent for a sent draft, in milliseconds since the Unix epoch
    /// (Gmail's `internalDate`).
    pub created_at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredDraft {
    /// `r` followed by digits, like Gmail's.
    pub id: String,
    pub message: StoredMessage,
}

impl StoredMessage {
    pub fn has_label(&self, label: &str) -> bool {
        self.label_ids.iter().any(|l| l.eq_ignore_ascii_case(label))
    }

    pub(crate) fn headers(&self) -> HeaderBlock {
        HeaderBlock::parse(&self.raw)
    }
}

/// A message to store: its bytes and the thread the client asked for, if any.
pub(crate) struct NewMessage {
    pub raw: Vec<u8>,
    pub thread_id: Option<String>,
}

#[derive(Default)]
pub(crate) struct Mailbox {
    /// In the order they reached their current label, so listing newest first is a reverse walk.
    messages: Vec<StoredMessage>,
    /// Draft id and message id, oldest first.
    drafts: Vec<(String, String)>,
    last_message_id: u64,
    history_id: u64,
}

impl Mailbox {
    pub fn sent(&self) -> Vec<StoredMessage> {
        self.messages.iter().filter(|m| m.has_label(SENT)).cloned().collect()
    }

    pub fn drafts(&self) -> Vec<StoredDraft> {
        self.drafts
            .iter()
            .filter_map(|(draft_id, message_id)| {
                self.message(message_id).map(|message| StoredDraft { id: draft_id.clone(), message: message.clone() })
            })
            .collect()
    }

    pub fn draft(&self, draft_id: &str) -> Option<StoredDraft> {
        let (_, message_id) = self.drafts.iter().find(|(id, _)| id == draft_id)?;
        let message = self.message(message_id)?;
        Some(StoredDraft { id: draft_id.to_owned(), message: message.clone() })
    }

    pub fn message(&self, id: &str) -> Option<&StoredMessage> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// Every message, newest first, as messages.list walks them.
    pub fn newest_first(&self) -> impl Iterator<Item = &StoredMessage> {
        self.messages.iter().rev()
    }

    pub fn history_id(&self) -> u64 {
        self.history_id
    }

    pub fn create_draft(&mut self, new: NewMessage) -> StoredDraft {
        let message = self.store(new, DRAFT);
        let draft_id = self.new_draft_id();
        self.drafts.push((draft_id.clone(), message.id.clone()));
        StoredDraft { id: draft_id, message }
    }

    pub fn send(&mut self, new: NewMessage) -> StoredMessage {
        self.store(new, SENT)
    }

    /// Replaces a draft's content, keeping its ids, as drafts.send does with a message given
    /// alongside the draft id.
    pub fn replace_draft_content(&mut self, draft_id: &str, raw: Vec<u8>) -> bool {
        let Some(message_id) = self.drafts.iter().find(|(id, _)| id == draft_id).map(|(_, m)| m.clone()) else {
            return false;
        };
        let Some(message) = self.messages.iter_mut().find(|m| m.id == message_id) else { return false };
        message.message_id_header = HeaderBlock::parse(&raw).message_id();
        message.delivered = headers::without_bcc(&raw);
        message.bcc = bcc_of(&raw);
        message.raw = raw;
        self.history_id += 1;
        true
    }

    /// Turns a draft into a SENT message under the same message id; the draft is gone after.
    pub fn send_draft(&mut self, draft_id: &str) -> Option<StoredMessage> {
        let position = self.drafts.iter().position(|(id, _)| id == draft_id)?;
        let (_, message_id) = self.drafts.remove(position);
        let index = self.messages.iter().position(|m| m.id == message_id)?;
        let mut message = self.messages.remove(index);
        message.label_ids = vec![SENT.to_owned()];
        message.created_at_ms = unix_ms();
        self.history_id += 1;
        self.messages.push(message.clone());
        Some(message)
    }

    /// Deletes a draft and its message for good, as drafts.delete does.
    pub fn delete_draft(&mut self, draft_id: &str) -> bool {
        let Some(position) = self.drafts.iter().position(|(id, _)| id == draft_id) else { return false };
        let (_, message_id) = self.drafts.remove(position);
        self.messages.retain(|m| m.id != message_id);
        self.history_id += 1;
        true
    }

    fn store(&mut self, new: NewMessage, label: &str) -> StoredMessage {
        let id = self.new_message_id();
        // Gmail only files a message into an existing thread when asked to; otherwise the
        // message starts a thread whose id is its own.
        let thread_id = new
            .thread_id
            .filter(|thread| self.messages.iter().any(|m| &m.thread_id == thread))
            .unwrap_or_else(|| id.clone());
        let message = StoredMessage {
            id,
            thread_id,
            label_ids: vec![label.to_owned()],
            message_id_header: HeaderBlock::parse(&new.raw).message_id(),
            delivered: headers::without_bcc(&new.raw),
            bcc: bcc_of(&new.raw),
            raw: new.raw,
            created_at_ms: unix_ms(),
        };
        self.history_id += 1;
        self.messages.push(message.clone());
        message
    }

    /// Gmail ids are 64-bit numbers in hexadecimal that grow with time; these are the creation
    /// time in milliseconds shifted left, plus a counter so that ids made in the same
    /// millisecond stay distinct and ordered.
    fn new_message_id(&mut self) -> String {
        let from_clock = unix_ms() << 20;
        self.last_message_id = from_clock.max(self.last_message_id + 1);
        format!("{:016x}", self.last_message_id)
    }

    fn new_draft_id(&self) -> String {
        loop {
            let id = format!("r{}", rand::random::<u64>() >> 1);
            if !self.drafts.iter().any(|(existing, _)| existing == &id) {
                return id;
            }
        }
    }
}

fn bcc_of(raw: &[u8]) -> Vec<String> {
    HeaderBlock::parse(raw).get("Bcc").and_then(headers::parse_address_list).unwrap_or_default()
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// The start of the body as plain text, for Gmail's `snippet`; empty for encoded or multipart
/// bodies, which this fake does not decode.
pub(crate) fn snippet(message: &StoredMessage) -> String {
    let headers = message.headers();
    let content_type = headers.get("Content-Type").unwrap_or("text/plain").to_ascii_lowercase();
    let encoding = headers.get("Content-Transfer-Encoding").unwrap_or("7bit").to_ascii_lowercase();
    if !content_type.starts_with("text/plain") || !matches!(encoding.as_str(), "7bit" | "8bit" | "binary") {
        return String::new();
    }
    let text = String::from_utf8_lossy(headers::body(&message.raw));
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.chars().take(200).collect()
}

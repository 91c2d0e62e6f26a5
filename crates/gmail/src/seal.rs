//! Sealing the cached access token with a key only the Spin secret variables can rebuild.

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use sha2::{Digest, Sha256};

use crate::config::GmailConfig;

const NONCE_BYTES: usize = 12;

fn derive(label: &str, config: &GmailConfig) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [label, &config.client_id, &config.client_secret, &config.refresh_token] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

/// The row key: it changes when the credentials change, so a rotated refresh token never
/// picks up a token issued for the old one.
pub fn cache_key(config: &GmailConfig) -> String {
    let digest = derive("gatehouse gmail access token key", config);
    format!("gmail:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn cipher(config: &GmailConfig) -> ChaCha20Poly1305 {
    ChaCha20Poly1305::new(Key::from_slice(&derive("gatehouse gmail access token seal", config)))
}

pub fn seal(config: &GmailConfig, plaintext: &str) -> Option<Vec<u8>> {
    let nonce = gatehouse_platform::random_bytes::<NONCE_BYTES>();
    let mut sealed = nonce.to_vec();
    sealed.extend(cipher(config).encrypt(Nonce::from_slice(&nonce), plaintext.as_bytes()).ok()?);
    Some(sealed)
}

/// `None` when the bytes were not sealed with these credentials (or were tampered with).
pub fn open(config: &GmailConfig, sealed: &[u8]) -> Option<String> {
    if sealed.len() <= NONCE_BYTES {
        return None;
    }
    let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
    let plaintext = cipher(config).decrypt(Nonce::from_slice(nonce), ciphertext).ok()?;
    String::from_utf8(plaintext).ok()
}

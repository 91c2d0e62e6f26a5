//! HTTP/1.1 spoken by hand over a TCP socket, for requests an HTTP client library would not
//! send as written (two `Authorization` lines, a path with malformed escapes or dot segments),
//! and a callback receiver that, like Python's `http.server`, reads a request's body only as
//! far as its `Content-Length` says.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one raw exchange may take before the test fails.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One request, exactly as it goes on the wire (apart from the `Host`, `Connection: close`
/// and `Content-Length` lines [`RawRequest::to_bytes`] adds).
#[derive(Debug, Clone)]
pub struct RawRequest {
    pub method: String,
    /// The request target as sent: path and query, not normalized or re-encoded.
    pub target: String,
    /// Header lines in order; a name may repeat.
    pub headers: Vec<(String, String)>,
    /// Header lines whose values are bytes, not text (sent after `headers`).
    pub byte_headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl RawRequest {
    pub fn new(method: &str, target: &str) -> RawRequest {
        RawRequest {
            method: method.to_owned(),
            target: target.to_owned(),
            headers: Vec::new(),
            byte_headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A header whose value is any bytes (obs-text, not UTF-8), as HTTP/1.1 lets a client send.
    pub fn header_bytes(mut self, name: &str, value: &[u8]) -> RawRequest {
        self.byte_headers.push((name.to_owned(), value.to_vec()));
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> RawRequest {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn bearer(self, token: &str) -> RawRequest {
        self.header("Authorization", &format!("Bearer {token}"))
    }

    /// A body sent as `application/json` (whatever the bytes are).
    pub fn json_bytes(self, body: impl Into<Vec<u8>>) -> RawRequest {
        self.header("Content-Type", "application/json").body(body)
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> RawRequest {
        self.body = body.into();
        self
    }

    /// The bytes on the wire: the request line, `Host`, the headers in order, `Content-Length`
    /// when there is a body (or the method usually has one), `Connection: close`, the body.
    pub fn to_bytes(&self, host: &str) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\nHost: {host}\r\n", self.method, self.target);
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let mut bytes = head.into_bytes();
        for (name, value) in &self.byte_headers {
            bytes.extend_from_slice(format!("{name}: ").as_bytes());
            bytes.extend_from_slice(value);
            bytes.extend_from_slice(b"\r\n");
        }
        let mut tail = String::new();
        if !self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH") {
            tail.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        tail.push_str("Connection: close\r\n\r\n");
        bytes.extend_from_slice(tail.as_bytes());
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// The request as text, for a failure message that lets someone replay it.
    pub fn describe(&self) -> String {
        let mut text = format!("{} {}", self.method, self.target);
        for (name, value) in &self.headers {
            text.push_str(&format!("\n  {name}: {value}"));
        }
        for (name, value) in &self.byte_headers {
            text.push_str(&format!("\n  {name}: {}", value.escape_ascii()));
        }
        if !self.body.is_empty() {
            let shown = String::from_utf8_lossy(&self.body);
            let shown: String = shown.chars().take(600).collect();
            let more = if self.body.len() > 600 { format!(" … ({} bytes)", self.body.len()) } else { String::new() };
            text.push_str(&format!("\n  body: {shown:?}{more}"));
        }
        text
    }
}

/// What came back: the status, the header lines and the (de-chunked) body.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether `content-type` is `application/json` (parameters allowed).
    pub fn is_json_content_type(&self) -> bool {
        self.header("content-type")
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    }
}

/// `host:port` of a base URL such as `http://127.0.0.1:1234`.
pub fn host_of(base_url: &str) -> Result<String> {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    Ok(rest.split('/').next().filter(|h| !h.is_empty()).context("no host in the base URL")?.to_owned())
}

/// Sends `request` to the server at `base_url` on a connection of its own and reads the whole
/// answer (the server closes the connection after it, as `Connection: close` asks).
pub async fn send(base_url: &str, request: &RawRequest) -> Result<RawResponse> {
    let host = host_of(base_url)?;
    let exchange = async {
        let mut stream = TcpStream::connect(&host).await?;
        stream.write_all(&request.to_bytes(&host)).await?;
        stream.flush().await?;
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await?;
        parse_response(&bytes, &request.method)
    };
    tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .with_context(|| format!("no answer within {EXCHANGE_TIMEOUT:?} to {}", request.describe()))?
}

fn parse_response(bytes: &[u8], method: &str) -> Result<RawResponse> {
    let end = find(bytes, b"\r\n\r\n").with_context(|| {
        format!("the answer has no end of headers: {:?}", String::from_utf8_lossy(&bytes[..bytes.len().min(300)]))
    })?;
    let head = std::str::from_utf8(&bytes[..end]).context("the answer's head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().context("no status line")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked"));
    let body = if method == "HEAD" {
        Vec::new()
    } else if chunked {
        dechunk(rest)?
    } else {
        match headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length")) {
            Some((_, length)) => {
                let length: usize = length.parse().context("bad content-length in the answer")?;
                rest.get(..length).context("the answer is shorter than its content-length")?.to_vec()
            }
            None => rest.to_vec(),
        }
    };
    Ok(RawResponse { status, headers, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = find(rest, b"\r\n").context("a chunk size line has no end")?;
        let size_text = std::str::from_utf8(&rest[..line_end])?.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).with_context(|| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(rest.get(..size).context("a chunk is cut short")?);
        rest = rest.get(size + 2..).context("a chunk has no end")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request the [`LengthOnlyReceiver`] got: its head as text and the body it read.
#[derive(Debug, Clone)]
pub struct ReceivedRaw {
    pub request_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl ReceivedRaw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header, by case-insensitive name.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }
}

/// A webhook receiver as simple as they come: it reads the request head, then exactly
/// `Content-Length` bytes of body (none if the header is absent; it knows nothing of chunked
/// encoding), records both, and answers `200` with an empty body, then closes the connection.
pub struct LengthOnlyReceiver {
    pub url: String,
    received: Arc<Mutex<Vec<ReceivedRaw>>>,
}

impl LengthOnlyReceiver {
    pub async fn start() -> Result<LengthOnlyReceiver> {
        let listener = crate::relay_listener().await?;
        let url = format!("http://{}/callbacks", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = received.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(EXCHANGE_TIMEOUT, receive_one(stream, &sink)).await;
                });
            }
        });
        Ok(LengthOnlyReceiver { url, received })
    }

    pub fn received(&self) -> Vec<ReceivedRaw> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Waits until `done` holds for what was received, or fails after `timeout`.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&[ReceivedRaw]) -> bool,
    ) -> Result<Vec<ReceivedRaw>> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if done(&received) {
                return Ok(received);
            }
            if Instant::now() > deadline {
                bail!("timed out after {timeout:?} waiting for {what}; received {received:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive_one(mut stream: TcpStream, sink: &Mutex<Vec<ReceivedRaw>>) -> Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            bail!("the connection closed before the end of the request head");
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    if let Ok(mut received) = sink.lock() {
        received.push(ReceivedRaw { request_line, headers, body });
    }
    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await?;
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// A relay that answers every callback with `size` bytes: a relay gone wrong, or one trying to
/// exhaust the component reading its answers.
pub struct FloodingRelay {
    pub url: String,
}

impl FloodingRelay {
    pub async fn start(size: usize) -> Result<FloodingRelay> {
        let listener = crate::relay_listener().await?;
        let url = format!("http://{}/callbacks", listener.local_addr()?);
        let flood = std::sync::Arc::new(vec![b'x'; size]);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let flood = flood.clone();
                tokio::spawn(async move {
                    let mut head = vec![0u8; 64 * 1024];
                    let _ = tokio::time::timeout(EXCHANGE_TIMEOUT, stream.read(&mut head)).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        flood.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                    let _ = stream.write_all(&flood).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Ok(FloodingRelay { url })
    }
}

/// A relay that takes the connection and the request and never answers.
pub struct SilentRelay {
    pub url: String,
}

impl SilentRelay {
    pub async fn start() -> Result<SilentRelay> {
        let listener = crate::relay_listener().await?;
        let url = format!("http://{}/callbacks", listener.local_addr()?);
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Ok(SilentRelay { url })
    }
}

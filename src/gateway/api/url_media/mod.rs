//! Media by URL (`media_from_urls`, off by default): the gateway fetches the file a bot names by
//! an http(s) URL and hands the body on as it arrives, to be encrypted and sent like an
//! uploaded part (`media::fetch_url`); the platform only ever gets the encrypted file.
//!
//! The fetch, on the HTTP worker that serves the call: at most [`MAX_REDIRECTS`] redirects,
//! each followed here (not by ureq) so that every hop's scheme and addresses are checked
//! (`address`); the connection goes to exactly the checked addresses (a resolver pinned to
//! them); [`CONNECT_TIMEOUT`] to connect and [`FETCH_TIMEOUT`] for everything; the size
//! refused early by Content-Length and, whatever that says, while reading, at one byte over
//! the limit (5 MiB for photos, 20 MiB for other files, lowered by `max_bytes`); the first
//! bytes checked against the method (`sniff`) before anything is sent on. Errors carry the
//! reference's words and a reason that names the host at most, never the path or query,
//! which may hold a secret.

mod address;
mod sniff;

use std::fmt;
use std::io::{self, Read};
use std::time::{Duration, Instant};

use url::Url;

use crate::gateway::botapi::types::MediaKind;
use crate::gateway::botapi::ApiError;
use crate::gateway::config::{MediaFromUrls, URL_FILE_LIMIT, URL_PHOTO_LIMIT};

/// Why a URL is refused while `media_from_urls` is off (after the parameter's name): the
/// words bots already match on, and the setting that changes it.
pub const OFF: &str =
    "external URLs are not supported unless the gateway's operator sets media_from_urls {\"enabled\": true} in its config";

/// Redirects followed at most (the reference follows a few).
pub const MAX_REDIRECTS: usize = 3;
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// For the whole fetch: every hop, and reading the body.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A file by URL refused, in the reference's words and with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    words: &'static str,
    why: String,
}

/// Not fetched: the address, the network, the server's answer, the size.
const UNREACHABLE: &str = "failed to get HTTP URL content";
/// Not an http(s) URL the gateway can fetch.
const MALFORMED: &str = "wrong file identifier/HTTP URL specified";
/// Fetched, but not what the method sends (a photo that is no image). The reference's words
/// (tdlib/telegram-bot-api: WEBPAGE_MEDIA_EMPTY).
const WRONG_TYPE: &str = "wrong type of the web page content";

impl Refusal {
    fn unreachable(why: impl Into<String>) -> Refusal {
        Refusal { words: UNREACHABLE, why: why.into() }
    }

    fn malformed(why: impl Into<String>) -> Refusal {
        Refusal { words: MALFORMED, why: why.into() }
    }

    /// 400 "Bad Request: <the reference's words>: <parameter>: <why>": the reference's words
    /// first, which bots match on.
    pub fn to_api(&self, at: &str) -> ApiError {
        ApiError::bad_request(format!("{}: {at}: {}", self.words, self.why))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.words, self.why)
    }
}

/// Why a fetch ended without the file: refused, or the body's consumer failed on its own
/// (the upload to the platform: not the URL's fault).
#[derive(Debug)]
pub enum Failure<E> {
    Refused(Refusal),
    Taking(E),
}

impl<E> From<Refusal> for Failure<E> {
    fn from(r: Refusal) -> Failure<E> {
        Failure::Refused(r)
    }
}

/// A fetched file: what the consumer made of the body, with the name and type it goes with.
pub struct Fetched<T> {
    /// The last segment of the final URL's path ("" when it has none).
    pub file_name: String,
    /// What the bytes showed (a photo's, a sticker's format) or the server named; `None`: to
    /// be guessed from the name.
    pub mime_type: Option<String>,
    pub taken: T,
}

/// A media parameter's or an inline result's URL, when it is one the gateway can fetch: http
/// or https with a host.
pub fn parse(text: &str) -> Result<Url, Refusal> {
    let url = Url::parse(text.trim()).map_err(|e| Refusal::malformed(format!("not a valid URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refusal::malformed(format!("a {}: URL; only http and https URLs are fetched", url.scheme())));
    }
    if url.host().is_none() {
        return Err(Refusal::malformed("the URL has no host"));
    }
    Ok(url)
}

/// The most a file of `kind` by URL may have.
pub fn limit(settings: &MediaFromUrls, kind: MediaKind) -> u64 {
    let reference = if kind == MediaKind::Photo { URL_PHOTO_LIMIT } else { URL_FILE_LIMIT };
    settings.max_bytes.map_or(reference, |cap| cap.min(reference))
}

/// The limit in words, for a refusal.
fn limit_words(settings: &MediaFromUrls, kind: MediaKind) -> String {
    let limit = limit(settings, kind);
    match (settings.max_bytes, kind) {
        (Some(cap), _) if cap == limit => format!("{limit} bytes, the limit media_from_urls.max_bytes sets"),
        (_, MediaKind::Photo) => format!("{} MiB, the limit for photos by URL", limit >> 20),
        _ => format!("{} MiB, the limit for files by URL", limit >> 20),
    }
}

/// Fetches `url` as a file of `kind` and hands its body to `take` (which reads it to its
/// end: the upload), once the first bytes passed the method's check. An error the body
/// raised while `take` read it (the size, the network) is the URL's refusal, not `take`'s.
pub fn fetch<T, E>(
    settings: &MediaFromUrls,
    url: &Url,
    kind: MediaKind,
    take: impl FnOnce(&mut dyn Read) -> Result<T, E>,
) -> Result<Fetched<T>, Failure<E>> {
    fetch_within(settings, url, kind, FETCH_TIMEOUT, take)
}

fn fetch_within<T, E>(
    settings: &MediaFromUrls,
    url: &Url,
    kind: MediaKind,
    timeout: Duration,
    take: impl FnOnce(&mut dyn Read) -> Result<T, E>,
) -> Result<Fetched<T>, Failure<E>> {
    let limit = limit(settings, kind);
    let too_big = || Refusal::unreachable(format!("the file is larger than {}", limit_words(settings, kind)));
    let (response, final_url) = get(settings, url, Instant::now() + timeout)?;
    let declared_len = response.header("Content-Length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared_len.is_some_and(|n| n > limit) {
        return Err(too_big().into());
    }
    let declared = sniff::media_type(response.header("Content-Type"));
    let mut body = Body { inner: response.into_reader(), read: 0, limit, failure: None };
    let mut head = Vec::with_capacity(sniff::HEAD);
    if (&mut body).take(sniff::HEAD as u64).read_to_end(&mut head).is_err() {
        return Err(body.refusal(too_big()).into());
    }
    if head.is_empty() {
        return Err(Refusal::unreachable("the server sent an empty file").into());
    }
    let mime_type = sniff::check(kind, &head, declared.as_deref()).map_err(|why| Refusal { words: WRONG_TYPE, why })?;
    let taken = take(&mut io::Cursor::new(head).chain(&mut body));
    match (taken, body.failure.is_some()) {
        (Ok(taken), false) => Ok(Fetched { file_name: sniff::file_name(&final_url), mime_type, taken }),
        (Err(e), false) => Err(Failure::Taking(e)),
        // What `take` made of a body that failed is dropped (an upload: cancelled).
        (_, true) => Err(body.refusal(too_big()).into()),
    }
}

/// The response of the first hop that is not a redirect, and its URL.
fn get(settings: &MediaFromUrls, url: &Url, deadline: Instant) -> Result<(ureq::Response, Url), Refusal> {
    let mut current = url.clone();
    let mut redirects = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refusal::unreachable(timed_out()));
        }
        let response = match agent(settings, &current)?.get(current.as_str()).timeout(left).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(code, _)) => return Err(Refusal::unreachable(format!("the server answered {code}"))),
            Err(ureq::Error::Transport(t)) => return Err(Refusal::unreachable(transport_reason(&t))),
        };
        match response.status() {
            200..=299 => return Ok((response, current)),
            301 | 302 | 303 | 307 | 308 if redirects == MAX_REDIRECTS => {
                return Err(Refusal::unreachable(format!("more than {MAX_REDIRECTS} redirects")));
            }
            301 | 302 | 303 | 307 | 308 => {
                let location = response.header("Location").ok_or_else(|| Refusal::unreachable("a redirect without a Location"))?;
                current = current.join(location).map_err(|_| Refusal::unreachable("a redirect to a malformed URL"))?;
                if !matches!(current.scheme(), "http" | "https") {
                    return Err(Refusal::unreachable(format!("a redirect to a {}: URL", current.scheme())));
                }
                redirects += 1;
            }
            code => return Err(Refusal::unreachable(format!("the server answered {code}"))),
        }
    }
}

/// An agent for one request to `url`: its host resolved and checked now, and the connection
/// made to exactly those addresses (the resolver ureq asks returns them whatever it is asked);
/// redirects left to [`get`]; no proxy, no cookies, no compression.
fn agent(settings: &MediaFromUrls, url: &Url) -> Result<ureq::Agent, Refusal> {
    let host = url.host().ok_or_else(|| Refusal::unreachable("a redirect to a URL without a host"))?;
    let name = host.to_string().trim_end_matches('.').to_ascii_lowercase();
    let allowed = settings.allow_hosts.contains(&name);
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses = address::checked(&host, port, allowed).map_err(Refusal::unreachable)?;
    let tls = crate::gateway::webhook::tls_connector()
        .map_err(|e| Refusal::unreachable(format!("TLS is not available on this machine: {e}")))?;
    Ok(ureq::AgentBuilder::new()
        .tls_connector(tls)
        .resolver(move |_: &str| Ok(addresses.clone()))
        .timeout_connect(CONNECT_TIMEOUT)
        .redirects(0)
        .max_idle_connections(0)
        .user_agent(concat!("bot-gateway/", env!("CARGO_PKG_VERSION")))
        .build())
}

fn timed_out() -> String {
    format!("the server did not send the file in time ({} s for the whole fetch)", FETCH_TIMEOUT.as_secs())
}

/// A failed connection or request in a few words, from its kind: ureq's own text names the
/// whole URL.
fn transport_reason(t: &ureq::Transport) -> String {
    let io = std::iter::successors(std::error::Error::source(t), |s| s.source()).find_map(|s| s.downcast_ref::<io::Error>());
    match (t.kind(), io.map(io::Error::kind)) {
        (ureq::ErrorKind::ConnectionFailed, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => {
            format!("no connection within {} s", CONNECT_TIMEOUT.as_secs())
        }
        (_, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => timed_out(),
        (_, Some(io::ErrorKind::ConnectionRefused)) => "the connection was refused".into(),
        (_, Some(io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionAborted)) => {
            "the server closed the connection".into()
        }
        (ureq::ErrorKind::ConnectionFailed, None) => "the connection failed (TLS handshake or certificate)".into(),
        (ureq::ErrorKind::BadStatus | ureq::ErrorKind::BadHeader, _) => "the server's answer is not HTTP".into(),
        (kind, Some(io)) => format!("{kind}: {io}"),
        (kind, None) => kind.to_string(),
    }
}

/// The response body, cut off at the limit (one byte more is read, to know); what went wrong
/// while reading it.
struct Body<R> {
    inner: R,
    read: u64,
    limit: u64,
    /// Over the limit (no reason), or the network's reason.
    failure: Option<Option<String>>,
}

impl<R> Body<R> {
    /// The refusal for the failure met: `too_big`, or the network's reason.
    fn refusal(&self, too_big: Refusal) -> Refusal {
        match &self.failure {
            Some(Some(why)) => Refusal::unreachable(why.clone()),
            _ => too_big,
        }
    }
}

impl<R: Read> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failure.is_some() {
            return Err(io::Error::other("the file by URL was refused"));
        }
        // Never more than one byte past the limit, whatever Content-Length said.
        let room = (self.limit + 1 - self.read).min(buf.len() as u64) as usize;
        match self.inner.read(&mut buf[..room]) {
            Ok(n) => {
                self.read += n as u64;
                if self.read > self.limit {
                    // The bytes within the limit go on; the next read fails.
                    self.failure = Some(None);
                    let within = n - (self.read - self.limit) as usize;
                    if within > 0 {
                        return Ok(within);
                    }
                    return Err(io::Error::other("the file by URL is over its limit"));
                }
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let why = match e.kind() {
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => timed_out(),
                    kind => format!("the connection failed while the file was read ({kind})"),
                };
                self.failure = Some(Some(why));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;

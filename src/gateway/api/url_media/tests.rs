//! The fetch against a small HTTP server on 127.0.0.1, reached as `localhost` (allowed by name)
//! or by its address (not allowed). The methods' tests fetch from it too.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::*;

pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// What the server answers a path with.
enum Reply {
    /// A body, with or without Content-Length (without: the end of the body is the close).
    File { body: Vec<u8>, content_type: &'static str, length: bool },
    Redirect(String),
    Status(u16),
    /// Nothing for this long, then a close.
    Stall(Duration),
}

/// One connection at a time, `Connection: close`; records each path asked for.
pub(crate) struct Server {
    addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serving [`routes`].
    pub(crate) fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopping) = (asked.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("url-test-srv".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        serve(conn, addr.port(), &log);
                    }
                }
            })
            .expect("server thread");
        Server { addr, asked, stop, thread: Some(thread) }
    }

    pub(crate) fn url(&self, host: &str, path: &str) -> Url {
        Url::parse(&format!("http://{host}:{}{path}", self.addr.port())).expect("url")
    }

    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("log").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept
        if let Some(t) = self.thread.take() {
            t.join().expect("server thread");
        }
    }
}

fn serve(conn: TcpStream, port: u16, log: &Mutex<Vec<String>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
    // The rest of the head (bounded by the read timeout and the client's few headers).
    for _ in 0..64 {
        let mut h = String::new();
        if reader.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
            break;
        }
    }
    log.lock().expect("log").push(path.clone());
    let mut out = conn;
    let _ = match routes(&path, port) {
        Reply::File { body, content_type, length } => {
            let len = if length { format!("Content-Length: {}\r\n", body.len()) } else { String::new() };
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{len}Connection: close\r\n\r\n");
            out.write_all(head.as_bytes()).and_then(|_| out.write_all(&body))
        }
        Reply::Redirect(to) => {
            out.write_all(format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes())
        }
        Reply::Status(code) => out.write_all(format!("HTTP/1.1 {code} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes()),
        Reply::Stall(d) => {
            std::thread::sleep(d);
            Ok(())
        }
    };
}

fn routes(path: &str, port: u16) -> Reply {
    let file = |body: Vec<u8>, content_type, length| Reply::File { body, content_type, length };
    let big = || PNG.iter().copied().chain(std::iter::repeat(7u8)).take(5 * 1024 * 1024 + 1).collect::<Vec<u8>>();
    match path {
        "/cat.png" | "/dir/cat%20one.png?token=secret" => file(PNG.to_vec(), "application/octet-stream", true),
        "/big.png" => file(big(), "image/png", true),
        "/big-unsized.png" => file(big(), "image/png", false),
        "/notes.txt" => file(b"plain words, no image".to_vec(), "text/plain; charset=utf-8", true),
        "/empty" => file(Vec::new(), "image/png", true),
        "/1000" => file(vec![1u8; 1000], "application/x-thing", false),
        "/missing" => Reply::Status(404),
        "/stall" => Reply::Stall(Duration::from_millis(1500)),
        "/to-cat" => Reply::Redirect("cat.png".into()),
        "/r1" => Reply::Redirect("/to-cat".into()),
        "/r2" => Reply::Redirect(format!("http://localhost:{port}/r1")),
        "/r3" => Reply::Redirect("/r2".into()),
        "/to-private" => Reply::Redirect("http://10.0.0.1/cat.png".into()),
        "/to-loopback-ip" => Reply::Redirect(format!("http://127.0.0.1:{port}/cat.png")),
        "/to-ftp" => Reply::Redirect("ftp://localhost/cat.png".into()),
        _ => Reply::Status(404),
    }
}

fn allowing(hosts: &[&str]) -> MediaFromUrls {
    MediaFromUrls { enabled: true, allow_hosts: hosts.iter().map(|h| h.to_string()).collect(), max_bytes: None }
}

/// Fetches into memory: (what was read, the name, the type), or why not.
fn fetched(settings: &MediaFromUrls, url: &Url, kind: MediaKind) -> Result<(Vec<u8>, String, Option<String>), Failure<io::Error>> {
    let f = fetch_within(settings, url, kind, Duration::from_secs(10), |body| {
        let mut bytes = Vec::new();
        body.read_to_end(&mut bytes).map(|_| bytes)
    })?;
    Ok((f.taken, f.file_name, f.mime_type))
}

fn refused(r: Result<(Vec<u8>, String, Option<String>), Failure<io::Error>>) -> Refusal {
    match r {
        Err(Failure::Refused(r)) => r,
        Err(Failure::Taking(e)) => panic!("not refused: the consumer failed: {e}"),
        Ok((bytes, ..)) => panic!("not refused: {} bytes", bytes.len()),
    }
}

#[test]
fn a_named_host_allowed_on_loopback_serves_and_its_address_alone_is_refused() {
    let server = Server::start();
    let ok = allowing(&["localhost"]);
    let (bytes, name, mime) = fetched(&ok, &server.url("localhost", "/cat.png"), MediaKind::Photo).expect("fetched");
    assert_eq!((bytes.as_slice(), name.as_str(), mime.as_deref()), (PNG, "cat.png", Some("image/png")));
    let (_, name, _) = fetched(&ok, &server.url("LocalHost", "/dir/cat%20one.png?token=secret"), MediaKind::Photo).expect("fetched");
    assert_eq!(name, "cat one.png");

    let asked = server.asked().len();
    let r = refused(fetched(&ok, &server.url("127.0.0.1", "/cat.png"), MediaKind::Photo));
    assert_eq!(r.to_string(), "failed to get HTTP URL content: 127.0.0.1 is a loopback address (an operator may allow the host in media_from_urls.allow_hosts)");
    let r = refused(fetched(&allowing(&[]), &server.url("localhost", "/cat.png"), MediaKind::Photo));
    assert!(r.why.starts_with("the host localhost resolves to a loopback address"), "{r}");
    assert_eq!(server.asked().len(), asked, "nothing was asked of a refused address");
}

#[test]
fn redirects_are_followed_three_times_and_each_hop_is_checked() {
    let server = Server::start();
    let ok = allowing(&["localhost"]);
    let (bytes, name, _) = fetched(&ok, &server.url("localhost", "/r2"), MediaKind::Document).expect("three redirects");
    assert_eq!((bytes.as_slice(), name.as_str()), (PNG, "cat.png"), "named after the final URL");
    assert_eq!(server.asked(), ["/r2", "/r1", "/to-cat", "/cat.png"]);
    let r = refused(fetched(&ok, &server.url("localhost", "/r3"), MediaKind::Document));
    assert_eq!(r.why, "more than 3 redirects");

    let started = Instant::now();
    let r = refused(fetched(&ok, &server.url("localhost", "/to-private"), MediaKind::Photo));
    assert_eq!(r.why, "10.0.0.1 is a private address (an operator may allow the host in media_from_urls.allow_hosts)");
    assert!(started.elapsed() < CONNECT_TIMEOUT, "refused before any connection was tried");
    let r = refused(fetched(&ok, &server.url("localhost", "/to-loopback-ip"), MediaKind::Photo));
    assert!(r.why.starts_with("127.0.0.1 is a loopback address"), "{r}");
    assert_eq!(server.asked().last().map(String::as_str), Some("/to-loopback-ip"), "its target was never asked");
    assert_eq!(refused(fetched(&ok, &server.url("localhost", "/to-ftp"), MediaKind::Photo)).why, "a redirect to a ftp: URL");
}

#[test]
fn the_size_is_refused_by_content_length_and_while_reading() {
    let server = Server::start();
    let ok = allowing(&["localhost"]);
    let mut took = false;
    let r = fetch_within(&ok, &server.url("localhost", "/big.png"), MediaKind::Photo, Duration::from_secs(10), |_| {
        took = true;
        Ok::<_, io::Error>(())
    });
    let Err(Failure::Refused(r)) = r else { panic!("refused") };
    assert_eq!(r.to_string(), "failed to get HTTP URL content: the file is larger than 5 MiB, the limit for photos by URL");
    assert!(!took, "refused by its Content-Length, before anything was handed on");

    // No Content-Length: the consumer reads up to the limit and one byte more, then fails.
    let mut read = 0;
    let r = fetch_within(&ok, &server.url("localhost", "/big-unsized.png"), MediaKind::Photo, Duration::from_secs(10), |body| {
        let mut buf = vec![0u8; 70_000];
        loop {
            match body.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => read += n,
                Err(e) => return Err(e),
            }
        }
    });
    let Err(Failure::Refused(r)) = r else { panic!("refused") };
    assert!(r.why.starts_with("the file is larger than 5 MiB"), "{r}");
    assert_eq!(read as u64, URL_PHOTO_LIMIT, "the limit's bytes passed, not one more");
    // The same file is within a document's limit.
    let (bytes, ..) = fetched(&ok, &server.url("localhost", "/big-unsized.png"), MediaKind::Document).expect("a document");
    assert_eq!(bytes.len() as u64, URL_PHOTO_LIMIT + 1);

    // max_bytes lowers the limit; exactly the limit passes.
    let capped = |n| MediaFromUrls { max_bytes: Some(n), ..allowing(&["localhost"]) };
    let r = refused(fetched(&capped(999), &server.url("localhost", "/1000"), MediaKind::Document));
    assert_eq!(r.why, "the file is larger than 999 bytes, the limit media_from_urls.max_bytes sets");
    assert_eq!(fetched(&capped(1000), &server.url("localhost", "/1000"), MediaKind::Document).expect("exactly").0.len(), 1000);
}

#[test]
fn a_photo_that_is_no_image_and_other_failures_have_the_references_words() {
    let server = Server::start();
    let ok = allowing(&["localhost"]);
    let r = refused(fetched(&ok, &server.url("localhost", "/notes.txt"), MediaKind::Photo));
    assert_eq!(
        r.to_string(),
        "wrong type of the web page content: the content is not a JPEG, PNG, GIF, WEBP or BMP image (the server calls it text/plain)"
    );
    let (bytes, name, mime) = fetched(&ok, &server.url("localhost", "/notes.txt"), MediaKind::Document).expect("a document");
    assert_eq!((bytes.as_slice(), name.as_str(), mime.as_deref()), (&b"plain words, no image"[..], "notes.txt", Some("text/plain")));
    assert_eq!(refused(fetched(&ok, &server.url("localhost", "/missing"), MediaKind::Photo)).why, "the server answered 404");
    assert_eq!(refused(fetched(&ok, &server.url("localhost", "/empty"), MediaKind::Photo)).why, "the server sent an empty file");
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let closed = Url::parse(&format!("http://localhost:{port}/x")).expect("url");
    assert_eq!(refused(fetched(&ok, &closed, MediaKind::Photo)).why, "the connection was refused");

    let started = Instant::now();
    let r = fetch_within(&ok, &server.url("localhost", "/stall"), MediaKind::Photo, Duration::from_millis(500), |_| Ok::<_, io::Error>(()));
    let Err(Failure::Refused(r)) = r else { panic!("refused") };
    assert!(r.why.starts_with("the server did not send the file in time"), "{r}");
    assert!(started.elapsed() < Duration::from_millis(1400), "the deadline held");

    // The consumer's own failure is not the URL's.
    let r = fetch_within(&ok, &server.url("localhost", "/cat.png"), MediaKind::Photo, Duration::from_secs(10), |_| Err::<(), _>("platform down"));
    assert!(matches!(r, Err(Failure::Taking("platform down"))));
}

#[test]
fn urls_are_http_or_https_with_a_host_and_limits_follow_the_kind() {
    assert_eq!(parse(" https://cdn.example/a.png ").expect("ok").host_str(), Some("cdn.example"));
    assert!(parse("http://[::1]:8080/x").is_ok());
    for (bad, why) in [("http://", "not a valid URL"), ("https//x", "not a valid URL"), ("ftp://x/y", "a ftp: URL"), ("file:///etc/passwd", "a file: URL")] {
        let r = parse(bad).expect_err(bad);
        assert!(r.to_string().starts_with("wrong file identifier/HTTP URL specified: ") && r.why.contains(why), "{bad}: {r}");
    }
    let e = Refusal::unreachable("the server answered 404").to_api("photo");
    assert_eq!((e.status, e.description.as_str()), (400, "Bad Request: failed to get HTTP URL content: photo: the server answered 404"));

    let off = MediaFromUrls::default();
    assert_eq!((limit(&off, MediaKind::Photo), limit(&off, MediaKind::Video)), (5 << 20, 20 << 20));
    assert_eq!(limit(&off, MediaKind::Sticker), 20 << 20);
    let capped = MediaFromUrls { max_bytes: Some(10 << 20), ..off.clone() };
    assert_eq!((limit(&capped, MediaKind::Photo), limit(&capped, MediaKind::Document)), (5 << 20, 10 << 20));
    assert_eq!(limit_words(&capped, MediaKind::Photo), "5 MiB, the limit for photos by URL");
}

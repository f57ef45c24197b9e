//! An HTTPS webhook (issue 46, part 5, from the specification audit): the test makes its own CA
//! and a certificate for 127.0.0.1 and localhost with the `openssl` tool, serves the webhook
//! over TLS with that certificate, and the real gateway trusts the CA through `SSL_CERT_FILE`.
//! A delivery arrives with its secret header; a receiver whose certificate no trusted CA signed
//! gets nothing, and `getWebhookInfo` says why.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::World;

const SECRET_HEADER: &str = "x-compat-bot-api-secret-token";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("the openssl tool (scripts/setup.sh installs it)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA (`ca.pem`), a server certificate it signed for 127.0.0.1 and localhost (`server.pem`,
/// `server.key`), and a self-signed one for the same names that no CA vouches for (`rogue.*`).
fn make_certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Bot Gateway Test CA"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend(["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    openssl(dir, &["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext"]);
    let mut rogue = vec!["req", "-x509"];
    rogue.extend(ec);
    rogue.extend(["-keyout", "rogue.key", "-out", "rogue.pem", "-days", "2", "-subj", "/CN=localhost"]);
    rogue.extend(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]);
    openssl(dir, &rogue);
}

/// One webhook request as received: its headers (lowercase names) and JSON body.
struct Received {
    headers: Vec<(String, String)>,
    body: Value,
}

/// An HTTPS webhook receiver on 127.0.0.1 answering 200 to every request; stops when dropped.
struct TlsReceiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl TlsReceiver {
    fn start(dir: &Path, name: &str) -> TlsReceiver {
        let cert = std::fs::read(dir.join(format!("{name}.pem"))).expect("cert");
        let key = std::fs::read(dir.join(format!("{name}.key"))).expect("key");
        let identity = native_tls::Identity::from_pkcs8(&cert, &key).expect("identity");
        let acceptor = native_tls::TlsAcceptor::new(identity).expect("acceptor");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (got, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (seen, stopping) = (got.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(tcp) = tcp else { continue };
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                // A handshake the client refuses (the rogue certificate) fails here: nothing is read.
                let Ok(tls) = acceptor.accept(tcp) else { continue };
                let mut reader = BufReader::new(tls);
                let mut headers = Vec::new();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                    line.clear();
                }
                let length = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let mut tls = reader.into_inner();
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = tls.shutdown();
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().expect("lock").push(Received { headers, body });
            }
        });
        TlsReceiver { url: format!("https://127.0.0.1:{}/hook", addr.port()), got, stop, addr, thread: Some(thread) }
    }

    fn wait_for(&self, n: usize) -> Vec<(Vec<(String, String)>, Value)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let got = self.got.lock().expect("lock");
                if got.len() >= n {
                    return got.iter().map(|r| (r.headers.clone(), r.body.clone())).collect();
                }
            }
            assert!(Instant::now() < deadline, "no HTTPS delivery in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TlsReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr); // wakes the accept
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn ok(world: &World, method: &str, params: Value) -> Value {
    let (status, body) = world.gateway.call(method, params);
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{method}: {body}");
    body["result"].clone()
}

#[test]
fn an_https_webhook_with_a_trusted_ca_gets_its_update_and_an_untrusted_one_is_reported() {
    bot_gateway::crypto::init();
    let certs = tempfile::tempdir().expect("tempdir");
    make_certificates(certs.path());
    let ca = certs.path().join("ca.pem");
    std::env::set_var("BOT_GATEWAY_WEBHOOK_RETRY_START_MS", "200");
    let world = World::start_with("https_hook_bot", |cmd| {
        cmd.env("SSL_CERT_FILE", &ca);
    });
    let alice = world.user("alice_tls");
    let bot = format!("@{}", world.bot_username());

    let trusted = TlsReceiver::start(certs.path(), "server");
    ok(&world, "setWebhook", json!({"url": trusted.url, "secret_token": "tls-Secret_1"}));
    alice.send_text(&bot, "over https").expect("send");
    let got = trusted.wait_for(1);
    let (headers, body) = &got[0];
    assert_eq!(body["message"]["text"], "over https", "{body}");
    let secret = headers.iter().find(|(k, _)| k == SECRET_HEADER).map(|(_, v)| v.as_str());
    assert_eq!(secret, Some("tls-Secret_1"), "{headers:?}");
    let info = ok(&world, "getWebhookInfo", json!({}));
    assert_eq!(info["pending_update_count"], 0, "{info}");
    assert!(info.get("last_error_message").is_none(), "{info}");

    // A receiver whose certificate no trusted CA signed: nothing is delivered, and
    // getWebhookInfo says it was the certificate.
    let rogue = TlsReceiver::start(certs.path(), "rogue");
    ok(&world, "setWebhook", json!({"url": rogue.url}));
    alice.send_text(&bot, "not to the rogue").expect("send");
    let deadline = Instant::now() + Duration::from_secs(30);
    let info = loop {
        let info = ok(&world, "getWebhookInfo", json!({}));
        if info["last_error_message"].is_string() {
            break info;
        }
        assert!(Instant::now() < deadline, "no error reported: {info}; stderr:\n{}", world.gateway.proc.stderr_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = info["last_error_message"].as_str().expect("message");
    assert!(said.starts_with("SSL error") && said.contains("certificate"), "{said}");
    assert_eq!(info["pending_update_count"], 1, "kept for delivery: {info}");
    assert!(rogue.got.lock().expect("lock").is_empty(), "nothing reached the untrusted receiver");
}

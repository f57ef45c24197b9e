//! Hostile and broken HTTP clients against the real gateway (issue 7, cases 1–7): nothing they
//! send or withhold may crash the process, kill or starve its workers, leak a thread or a
//! descriptor, or get a message sent. Each part ends with the gateway still serving, and the
//! suite ends with a real message end to end. Cases 8–10 (parameters, links, logs) are in
//! tests/hostile_input.rs.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{threads_and_fds, World};

fn addr(world: &World) -> SocketAddr {
    world.gateway.base.trim_start_matches("http://").parse().expect("compat address")
}

fn connect(a: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(a).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
    s
}

/// Sends `raw`, half-closes, and reads until the server closes (bounded by the read timeout,
/// which fails the test: a hang).
fn exchange(a: SocketAddr, raw: &[u8]) -> String {
    let mut s = connect(a);
    s.write_all(raw).expect("write");
    let _ = s.shutdown(Shutdown::Write);
    read_to_close(&mut s)
}

fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("no close from the server (a hang): {e}; got {:?}", String::from_utf8_lossy(&out)),
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> u16 {
    response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The JSON envelope of a raw response.
fn envelope(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(Value::Null)
}

fn assert_alive(world: &mut World, context: &str) {
    assert!(world.gateway.proc.child.try_wait().expect("try_wait").is_none(), "the gateway died after {context}");
    let (status, body) = world.gateway.call("getMe", json!({}));
    assert_eq!(status, 200, "getMe after {context}: {body}");
    let health = world.gateway.health();
    assert_eq!(health["bot_api"]["serving"], true, "health after {context}: {health}");
}

/// Waits (bounded) until the gateway's threads and descriptors are back to `baseline`: the
/// workers started for hostile connections end 10 s after their last one.
fn assert_flat(world: &World, baseline: (usize, usize), context: &str) {
    let pid = world.gateway.proc.child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = threads_and_fds(pid);
        if now.0 <= baseline.0 && now.1 <= baseline.1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {context}: threads/fds {now:?}, baseline {baseline:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn hostile_clients_cannot_crash_starve_or_smuggle() {
    let mut world = World::start("hostile_bot");
    let a = addr(&world);
    let token = world.gateway.token.clone();
    let alice = world.user("alice");
    alice.send_text(&format!("@{}", world.bot_username()), "hi").expect("send hi");
    let updates = world.gateway.poll_until(0, 1);
    let chat_id = updates[0]["message"]["chat"]["id"].as_i64().expect("chat id");
    let offset = updates[0]["update_id"].as_i64().expect("update id") + 1;
    assert_eq!(world.gateway.call("getUpdates", json!({"offset": offset, "timeout": 0})).0, 200);

    let pid = world.gateway.proc.child.id();
    let baseline = threads_and_fds(pid);

    // 1 and 2. Huge Content-Length values, with and without a token: 413, never an abort or
    // a dead worker. More requests than there are workers.
    let huge = ["4611686018427387904", "9223372036854775807", "9223372036854775808", "18446744073709551615"];
    for (i, len) in huge.iter().cycle().take(48).enumerate() {
        let path = if i % 2 == 0 { "/healthz".to_string() } else { format!("/bot{token}/sendMessage") };
        let got = exchange(a, format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len}\r\n\r\n").as_bytes());
        assert_eq!(status_of(&got), 413, "Content-Length {len}: {got}");
        assert_eq!(envelope(&got)["ok"], false, "{got}");
    }
    for len in ["42949672960", "1099511627776"] {
        let got = exchange(a, format!("POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len}\r\n\r\n").as_bytes());
        assert_eq!(status_of(&got), 413, "{got}");
    }
    assert_alive(&mut world, "huge Content-Length values");

    // 3. Other HTTP versions, the HTTP/2 preface, upgrades, TE and bare LF: each is answered
    // and its connection closed; no thread or descriptor stays behind.
    let cases: [(&[u8], u16); 7] = [
        (b"GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505),
        (b"GET /healthz HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n", 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 200),
        (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTE: gzip\r\n\r\n", 200),
        (b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n", 200),
        (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ];
    for _ in 0..20 {
        for (raw, status) in cases {
            let got = exchange(a, raw);
            assert_eq!(status_of(&got), status, "{:?}: {got}", String::from_utf8_lossy(raw));
        }
    }
    assert_alive(&mut world, "HTTP/2, upgrades and bare LF");
    assert_flat(&world, baseline, "HTTP/2, upgrades and bare LF");

    // Limits on the request line and the header block.
    let long = format!("GET /bot{token}/getMe?{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "a".repeat(100_000));
    assert_eq!(status_of(&exchange(a, long.as_bytes())), 414);
    let fields: String = (0..5000).map(|i| format!("X-{i}: y\r\n")).collect();
    assert_eq!(status_of(&exchange(a, format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}\r\n").as_bytes())), 431);

    // 5. Connections that announce a body (or expect 100-continue) and send nothing, twice
    // as many as there are workers, and no token: the API goes on answering while they stall.
    let workers = world.gateway.health()["bot_api"]["workers"].as_u64().expect("workers") as usize;
    let mut stalled = Vec::new();
    for i in 0..2 * workers {
        let mut s = connect(a);
        let raw = match i % 4 {
            // A head that never ends (slowloris).
            0 => format!("POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
            // A body that never comes, read by the method (with the token).
            1 => format!("POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"),
            2 => format!("POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"),
            // And without a token.
            _ => "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n".to_string(),
        };
        s.write_all(raw.as_bytes()).expect("write");
        stalled.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..5 {
        let started = Instant::now();
        let (status, body) = world.gateway.call("getMe", json!({}));
        assert_eq!(status, 200, "{body}");
        assert!(started.elapsed() < Duration::from_secs(5), "getMe took {:?} while clients stall", started.elapsed());
        let started = Instant::now();
        assert_eq!(world.gateway.health()["ok"], true);
        assert!(started.elapsed() < Duration::from_secs(5), "/healthz took {:?}", started.elapsed());
    }
    drop(stalled);
    assert_alive(&mut world, "stalled bodies");

    // 6. A body cut off before its Content-Length: 400, and nothing is sent.
    for _ in 0..5 {
        let body = format!("{{\"chat_id\": {chat_id}, \"text\": \"truncated message that must not be sent\"}}");
        let head = format!(
            "POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len() + 50
        );
        let got = exchange(a, [head.as_bytes(), body.as_bytes()].concat().as_slice());
        assert_eq!(status_of(&got), 400, "{got}");
        assert!(envelope(&got)["description"].as_str().unwrap_or("").contains("ended before"), "{got}");
    }

    // 7. A chunked sendMessage smuggled in the body of a request that does not read it.
    let smuggled = format!(
        "POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        json!({"chat_id": chat_id, "text": "smuggled"}).to_string().len(),
        json!({"chat_id": chat_id, "text": "smuggled"})
    );
    let outer = format!(
        "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n",
        smuggled.len()
    );
    let got = exchange(a, outer.as_bytes());
    assert_eq!(got.matches("HTTP/1.1 ").count(), 1, "only the outer request is answered: {got}");
    assert_eq!(status_of(&got), 405, "{got}");

    assert_alive(&mut world, "all hostile cases");
    assert_flat(&world, baseline, "all hostile cases");

    // And a real message end to end: the first thing alice receives is this reply, so nothing
    // truncated or smuggled was sent before it.
    alice.send_text(&format!("@{}", world.bot_username()), "still there?").expect("send");
    let updates = world.gateway.poll_until(offset, 1);
    assert_eq!(updates[0]["message"]["text"], "still there?");
    let (status, body) = world.gateway.call("sendMessage", json!({"chat_id": chat_id, "text": "yes"}));
    assert_eq!(status, 200, "{body}");
    let got = alice.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["yes"]);
}

/// Case 4, descriptor exhaustion: with a small limit (systemd's default is 1024), a burst of held
/// connections exhausts the descriptors; the listener must come back once the load is gone.
#[test]
fn the_listener_survives_descriptor_exhaustion() {
    let mut world = World::start_with("fd_bot", |cmd| {
        // SAFETY: setrlimit is async-signal-safe; the closure runs in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit { rlim_cur: 96, rlim_max: 96 };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let a = addr(&world);
    let pid = world.gateway.proc.child.id();
    let (_, fds) = threads_and_fds(pid);
    assert!(fds < 96, "the gateway uses {fds} descriptors at rest");
    for round in 0..3 {
        let mut held = Vec::new();
        for _ in 0..300 {
            match TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
                Ok(s) => {
                    let _ = s.set_nonblocking(true);
                    let _ = (&s).write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
                    held.push(s);
                }
                Err(_) => break,
            }
        }
        assert!(held.len() > 96, "round {round}: only {} connections could be opened", held.len());
        drop(held);
        // Once the load is gone, the Bot API serves again (bounded wait).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = ureq::get(&format!("{}/healthz", world.gateway.base))
                .timeout(Duration::from_secs(2))
                .call()
                .ok()
                .and_then(|r| r.into_json::<Value>().ok())
                .is_some_and(|v| v["bot_api"]["serving"] == true);
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: the listener did not come back");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_alive(&mut world, "descriptor exhaustion");
    }
}

/// A loopback listener answers only loopback names in `Host` (a DNS-rebinding page sends its
/// own name), every request needs exactly one `Host`, and chunked framing takes CRLF only, with
/// nothing around a chunk size (issue 25, case 7). On both listeners.
#[test]
fn host_and_chunked_framing_are_strict() {
    let world = World::start("host_bot");
    let ext: SocketAddr = world.gateway.ext_base.trim_start_matches("http://").parse().expect("extensions address");
    for a in [addr(&world), ext] {
        let port = a.port();
        for (host, status) in [
            (format!("Host: 127.0.0.1:{port}\r\n"), 200),
            ("Host: localhost\r\n".to_string(), 200),
            (format!("Host: [::1]:{port}\r\n"), 200),
            ("Host: evil.example\r\n".to_string(), 421),
            (format!("Host: evil.example:{port}\r\n"), 421),
            (String::new(), 400),
            ("Host: localhost\r\nHost: localhost\r\n".to_string(), 400),
        ] {
            let got = exchange(a, format!("GET /healthz HTTP/1.1\r\n{host}Connection: close\r\n\r\n").as_bytes());
            assert_eq!(status_of(&got), status, "{host:?} on {a}: {got}");
            if status != 200 {
                assert!(!got.contains("host_bot"), "nothing of the bot to another host: {got}");
            }
        }
    }
    // A body the method reads: `{"a":1}` in one chunk of 7, framed badly in each way.
    let (a, token) = (addr(&world), world.gateway.token.clone());
    let post = |chunked: &str| {
        let raw = format!(
            "POST /bot{token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}"
        );
        exchange(a, raw.as_bytes())
    };
    for chunked in ["7\n{\"a\":1}\r\n0\r\n\r\n", "7\r\n{\"a\":1}\n0\r\n\r\n", " 7\r\n{\"a\":1}\r\n0\r\n\r\n", "7 \r\n{\"a\":1}\r\n0\r\n\r\n", "7\r\r\n{\"a\":1}\r\n0\r\n\r\n"] {
        let got = post(chunked);
        assert_eq!(status_of(&got), 400, "{chunked:?}: {got}");
        assert!(envelope(&got)["description"].as_str().is_some_and(|d| d.contains("chunked")), "{chunked:?}: {got}");
    }
    let got = post("7\r\n{\"a\":1}\r\n0\r\n\r\n");
    assert_eq!(envelope(&got)["description"], "Bad Request: chat_id is required", "well framed, the method reads it: {got}");
}

/// Every answer to a request without a valid token (401, 404, 405, /healthz) closes its
/// connection, so a client without a token cannot keep a worker with pipelined requests it never
/// reads; a valid token's answers, even a 404, keep it (issue 25, cases 1 and 3).
#[test]
fn refusals_without_a_token_close_the_connection() {
    let world = World::start("close_bot");
    let a = addr(&world);
    let token = world.gateway.token.clone();
    let wrong = format!("{}0", token);
    for (request, status, closes) in [
        (format!("GET /bot{wrong}/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 401, true),
        ("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_string(), 404, true),
        ("DELETE /bot1:x/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_string(), 405, true),
        (format!("GET /bot{token}/noSuchMethod HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 404, false),
        ("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_string(), 200, true),
    ] {
        // Pipelined: a second request after the first; a closing answer leaves it unanswered.
        let twice = format!("{request}{request}");
        let got = exchange(a, twice.as_bytes());
        assert_eq!(status_of(&got), status, "{request:?}: {got}");
        let answers = got.matches("HTTP/1.1 ").count();
        assert_eq!((answers, got.contains("Connection: close")), (if closes { 1 } else { 2 }, closes), "{request:?}: {got}");
    }
}

/// A body refused before it is read reaches its client as the refusal, not as a broken pipe:
/// the server keeps reading and discarding (bounded) before it closes. A plain client that
/// sends its whole body, then reads, sees the 413 and its description (issue 25, case 5).
#[test]
fn a_refused_body_is_answered_not_cut() {
    let world = World::start("big_bot");
    let url = format!("{}/bot{}/sendMessage", world.gateway.base, world.gateway.token);
    for mib in [4usize, 60] {
        let text = "x".repeat(mib << 20);
        let body = format!("{{\"chat_id\": 1, \"text\": \"{text}\"}}");
        match ureq::post(&url).timeout(Duration::from_secs(60)).set("Content-Type", "application/json").send_string(&body) {
            Err(ureq::Error::Status(413, r)) => {
                let v: Value = r.into_json().expect("the JSON envelope");
                assert!(v["description"].as_str().is_some_and(|d| d.starts_with("Request Entity Too Large") || d.contains("Too Large")), "{v}");
            }
            Ok(r) => panic!("{mib} MiB: answered {}", r.status()),
            Err(e) => panic!("{mib} MiB: the client did not read the refusal: {e}"),
        }
    }
    // Over the server's own limit (64 MiB), by declared size: refused before any byte is read.
    let mut s = connect(addr(&world));
    let head = format!(
        "POST /bot{}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        world.gateway.token,
        70usize << 20
    );
    s.write_all(head.as_bytes()).expect("head");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..8 {
        s.write_all(&chunk).expect("the server keeps reading while it refuses");
    }
    let _ = s.shutdown(Shutdown::Write);
    let got = read_to_close(&mut s);
    assert_eq!(status_of(&got), 413, "{got}");
}

/// Watches the Bot API for `for_` while attackers run: a bot's getMe (over a pooled
/// connection, as SDKs do) and `/healthz` every 100 ms. Returns the failed samples.
fn watch_bot_api(world: &World, for_: Duration) -> Vec<String> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(5)).build();
    let get_me = format!("{}/bot{}/getMe", world.gateway.base, world.gateway.token);
    let health = format!("{}/healthz", world.gateway.base);
    let mut failed = Vec::new();
    let end = Instant::now() + for_;
    while Instant::now() < end {
        for url in [&get_me, &health] {
            match agent.get(url).call() {
                Ok(r) if r.status() == 200 => {}
                Ok(r) => failed.push(format!("{url}: {}", r.status())),
                Err(e) => failed.push(format!("{}: {e}", url.replace(&world.gateway.token, "<token>"))),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    failed
}

/// Clients without a token cannot take the Bot API away (issue 25, cases 1, 2 and 8): more
/// connections than workers that pipeline requests and never read the answers; then as many
/// as there are workers that drip their heads a byte every 100 ms and reconnect whenever they
/// are cut off; and a crowd that connects meanwhile, each of which gets an answer at once
/// (200, or 503 when nothing could be cut off), never a wait in the backlog.
#[test]
fn clients_without_a_token_cannot_hold_the_workers() {
    let world = World::start("starve_bot");
    let a = addr(&world);
    let workers = world.gateway.health()["bot_api"]["workers"].as_u64().expect("workers") as usize;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = |stop: &std::sync::Arc<std::sync::atomic::AtomicBool>| stop.load(std::sync::atomic::Ordering::SeqCst);

    // Case 1: pipelined requests, never read.
    let mut attackers = Vec::new();
    for _ in 0..workers + 2 {
        let stop = stop.clone();
        attackers.push(std::thread::spawn(move || {
            let one = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(64);
            while !stopped(&stop) {
                let Ok(mut s) = TcpStream::connect(a) else { continue };
                let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                for _ in 0..64 {
                    if stopped(&stop) || s.write_all(&one).is_err() {
                        break;
                    }
                }
            }
        }));
    }
    let failed = watch_bot_api(&world, Duration::from_secs(4));
    assert!(failed.is_empty(), "pipelining clients without a token broke {} calls: {failed:?}", failed.len());
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in attackers.drain(..) {
        t.join().expect("attacker");
    }
    stop.store(false, std::sync::atomic::Ordering::SeqCst);

    // Case 2: heads dripped a byte every 100 ms, reconnecting after each close.
    for _ in 0..workers {
        let stop = stop.clone();
        attackers.push(std::thread::spawn(move || {
            while !stopped(&stop) {
                let Ok(mut s) = TcpStream::connect(a) else { continue };
                for b in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".iter().chain(std::iter::repeat(&b'a')) {
                    if stopped(&stop) || s.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }));
    }
    let failed = watch_bot_api(&world, Duration::from_secs(4));
    assert!(failed.is_empty(), "head drippers broke {} calls: {failed:?}", failed.len());

    // Case 8: a crowd connects while the drippers hold every worker they can; every one is
    // answered promptly.
    let crowd: Vec<_> = (0..50)
        .map(|_| {
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut s = connect(a);
                s.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
                let mut first = [0u8; 12];
                let answered = s.read_exact(&mut first).is_ok();
                (answered, started.elapsed())
            })
        })
        .collect();
    let results: Vec<(bool, Duration)> = crowd.into_iter().map(|t| t.join().expect("crowd thread")).collect();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in attackers {
        t.join().expect("attacker");
    }
    let unanswered = results.iter().filter(|(answered, _)| !answered).count();
    assert_eq!(unanswered, 0, "of 50 clients, {unanswered} got no answer in 15 s: {results:?}");
}

//! Shared harness of the end-to-end tests: the real `platform-server` and `bot-gateway`
//! binaries on ephemeral loopback ports with temporary directories, and users driven through
//! the client library. Every child process is killed when its handle drops.

#![allow(dead_code)]

pub mod chat;
pub mod group_member;
pub mod media;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A program of this package, found next to (or above) the running test or example binary,
/// so the harness serves both `tests/` and `examples/bench.rs`.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent();
    while let Some(d) = dir {
        let candidate = d.join(name);
        if candidate.is_file() {
            return candidate;
        }
        dir = d.parent();
    }
    panic!("{name} not found above {}; build it with cargo build --release --bins", exe.display());
}

pub fn platform_bin() -> PathBuf {
    bin_path("platform-server")
}

pub fn gateway_bin() -> PathBuf {
    bin_path("bot-gateway")
}

/// A child process that is killed on drop, with its stderr kept for failure messages.
pub struct Proc {
    pub child: Child,
    pub stderr: Arc<Mutex<String>>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command) -> (Proc, BufReader<std::process::ChildStdout>) {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut err = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::Builder::new()
            .name(format!("{name}-stderr"))
            .spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().expect("stderr lock").push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
            .expect("stderr thread");
        (Proc { child, stderr, name: name.to_string() }, stdout)
    }

    /// Keeps reading the child's stdout so the pipe stays open for as long as the child runs.
    pub fn drain_stdout(&self, mut out: BufReader<std::process::ChildStdout>) {
        std::thread::Builder::new()
            .name(format!("{}-stdout", self.name))
            .spawn(move || {
                let mut sink = Vec::new();
                let _ = out.read_to_end(&mut sink);
            })
            .expect("stdout thread");
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself (bounded); returns its exit status.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn free_port() -> u16 {
    // The kernel may hand the same ephemeral port to two binds in a row (the first listener is
    // closed by then): a port handed out once in this process is never handed out again, so
    // one config's two listen addresses always differ.
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if !handed.contains(&port) {
            handed.push(port);
            return port;
        }
    }
    panic!("no fresh loopback port in 1000 tries");
}

/// A platform server with its data directory.
pub struct PlatformServer {
    pub proc: Proc,
    pub url: String,
    pub data_dir: PathBuf,
}

impl PlatformServer {
    pub fn start(data_dir: &Path) -> PlatformServer {
        PlatformServer::start_on(data_dir, "127.0.0.1:0")
    }

    /// Stops the server (SIGKILL), as an outage would.
    pub fn stop(&mut self) {
        self.proc.kill();
    }

    /// Starts the server again on the address it had, with the same data.
    pub fn start_again(&mut self) {
        let addr = self.url.trim_start_matches("http://").to_string();
        *self = PlatformServer::start_on(&self.data_dir.clone(), &addr);
    }

    fn start_on(data_dir: &Path, listen: &str) -> PlatformServer {
        let mut cmd = Command::new(platform_bin());
        cmd.args(["--listen", listen, "--data-dir"]).arg(data_dir);
        let (proc, mut out) = Proc::spawn("platform-server", cmd);
        let mut line = String::new();
        out.read_line(&mut line).expect("read listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}; stderr: {}", proc.stderr_text()))
            .to_string();
        proc.drain_stdout(out);
        PlatformServer { proc, url: format!("http://{addr}"), data_dir: data_dir.to_path_buf() }
    }

    /// Creates a bot and returns the `create-bot` JSON.
    pub fn create_bot(&self, username: &str, name: &str) -> Value {
        let out = Command::new(platform_bin())
            .args(["create-bot", "--data-dir"])
            .arg(&self.data_dir)
            .args(["--username", username, "--name", name])
            .output()
            .expect("run create-bot");
        assert!(out.status.success(), "create-bot failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("create-bot prints JSON")
    }
}

/// A gateway config for one bot, with fresh loopback ports.
pub fn gateway_config(platform_url: &str, state_dir: &Path, bot: &Value) -> Value {
    json!({
        "compatibility_profile_id": "compat-v1-core-preview-4",
        "bot_platform_endpoint": platform_url,
        // Port 0: the gateway binds a free port and says which (`Gateway::start`), so no port
        // is picked before it is bound and taken by another test meanwhile.
        "compat_listen_addr": "127.0.0.1:0",
        "extensions_listen_addr": "127.0.0.1:0",
        "state_dir": state_dir,
        "bots": [{
            "bot_id_hex": bot["bot_id_hex"],
            "token": bot["token"],
            "identity_recovery_secret_hex": bot["identity_recovery_secret_hex"],
            "compat_user_id": bot["compat_user_id"],
            "username": bot["username"],
            "first_name": bot["first_name"],
        }]
    })
}

pub fn write_config(path: &Path, config: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(config).expect("json")).expect("write config");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod config");
}

/// The addresses the gateway says it listens on (`compat listening on ADDR`, `extensions
/// listening on ADDR` on its stdout, once bound), read within a minute; the rest of its stdout
/// is drained.
fn listening_addrs(proc: &Proc, mut out: BufReader<std::process::ChildStdout>) -> (String, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gateway-stdout".into())
        .spawn(move || {
            let mut line = String::new();
            while out.read_line(&mut line).is_ok_and(|n| n > 0) {
                let _ = tx.send(line.trim().to_string());
                line.clear();
            }
        })
        .expect("stdout thread");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut compat, mut extensions) = (None, None);
    while compat.is_none() || extensions.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the gateway did not say where it listens; stderr:\n{}", proc.stderr_text()));
        if let Some(addr) = line.strip_prefix("compat listening on ") {
            compat = Some(addr.to_string());
        } else if let Some(addr) = line.strip_prefix("extensions listening on ") {
            extensions = Some(addr.to_string());
        }
    }
    (compat.expect("compat"), extensions.expect("extensions"))
}

/// A running gateway.
pub struct Gateway {
    pub proc: Proc,
    pub base: String,
    pub ext_base: String,
    pub token: String,
    pub config_path: PathBuf,
}

impl Gateway {
    /// Starts `bot-gateway serve` and waits until `/healthz` says the bot is connected.
    pub fn start(config_path: &Path) -> Gateway {
        Gateway::start_with(config_path, |_| {})
    }

    /// [`Gateway::start`] with a last say on the command (environment, limits).
    pub fn start_with(config_path: &Path, configure: impl FnOnce(&mut Command)) -> Gateway {
        let config: Value = serde_json::from_slice(&std::fs::read(config_path).expect("read config")).expect("json");
        let mut cmd = Command::new(gateway_bin());
        cmd.arg("serve").arg(config_path).env("RUST_LOG", "info");
        configure(&mut cmd);
        let (proc, out) = Proc::spawn("bot-gateway", cmd);
        let (compat, extensions) = listening_addrs(&proc, out);
        // The ports it took are pinned in the config: a restart from it (a crash test) serves
        // at the same addresses, which the test's clients keep using.
        let mut pinned = config.clone();
        for (field, addr) in [("compat_listen_addr", &compat), ("extensions_listen_addr", &extensions)] {
            if pinned[field].as_str().is_some_and(|a| a.ends_with(":0")) {
                pinned[field] = json!(addr);
            }
        }
        if pinned != config {
            write_config(config_path, &pinned);
        }
        let gw = Gateway {
            proc,
            base: format!("http://{compat}"),
            ext_base: format!("http://{extensions}"),
            token: config["bots"][0]["token"].as_str().expect("token").to_string(),
            config_path: config_path.to_path_buf(),
        };
        gw.wait_connected();
        gw
    }

    pub fn wait_connected(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(resp) = ureq::get(&format!("{}/healthz", self.base)).timeout(Duration::from_secs(2)).call() {
                let v: Value = resp.into_json().expect("healthz json");
                if v["bots"][0]["connected"] == true {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "gateway not connected in time; stderr:\n{}", self.proc.stderr_text());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Calls a Bot API method with a JSON body; returns (HTTP status, body).
    pub fn call(&self, method: &str, params: Value) -> (u16, Value) {
        call_url(&format!("{}/bot{}/{}", self.base, self.token, method), params)
    }

    /// Calls a Bot API method with a multipart/form-data body: text fields, and files as
    /// (part name, file name, bytes) sent as application/octet-stream; (HTTP status, body).
    pub fn multipart(&self, method: &str, fields: &[(&str, String)], files: &[(&str, &str, &[u8])]) -> (u16, Value) {
        let boundary = "----supportTestBoundary7MA4YWxk";
        let mut body = Vec::new();
        for (name, value) in fields {
            body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes());
        }
        for (name, filename, bytes) in files {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let url = format!("{}/bot{}/{}", self.base, self.token, method);
        let result = ureq::post(&url)
            .timeout(Duration::from_secs(120))
            .set("Content-Type", &format!("multipart/form-data; boundary={boundary}"))
            .send_bytes(&body);
        match result {
            Ok(r) | Err(ureq::Error::Status(_, r)) => (r.status(), r.into_json().unwrap_or(Value::Null)),
            Err(e) => panic!("{method}: {e}"),
        }
    }

    /// `/healthz` of the Bot API listener, whatever its status (503 while not serving).
    pub fn health(&self) -> Value {
        match ureq::get(&format!("{}/healthz", self.base)).call() {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r.into_json().expect("healthz json"),
            Err(e) => panic!("healthz: {e}"),
        }
    }

    /// Polls until at least `n` updates are queued beyond `offset` (bounded); returns them.
    pub fn poll_until(&self, offset: i64, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = self.call("getUpdates", json!({ "offset": offset, "timeout": 5 }));
            assert_eq!(status, 200, "getUpdates failed: {body}");
            let updates = body["result"].as_array().expect("result array").clone();
            if updates.len() >= n {
                return updates;
            }
            assert!(Instant::now() < deadline, "only {} of {n} updates arrived; gateway stderr:\n{}", updates.len(), self.proc.stderr_text());
        }
    }
}

pub fn call_url(url: &str, params: Value) -> (u16, Value) {
    let result = ureq::post(url).timeout(Duration::from_secs(70)).send_json(params);
    match result {
        Ok(resp) => (resp.status(), resp.into_json().expect("json body")),
        Err(ureq::Error::Status(code, resp)) => (code, resp.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("request to {url} failed: {e}"),
    }
}

/// Threads and open descriptors of a running process (Linux /proc).
pub fn threads_and_fds(pid: u32) -> (usize, usize) {
    let count = |dir: String| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    (count(format!("/proc/{pid}/task")), count(format!("/proc/{pid}/fd")))
}

/// The value of the sample `name{labels}` (exactly that series) in a `/metrics` scrape.
pub fn metric_sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A `KiB` field of a process's /proc status (`VmRSS:`, `VmHWM:`); `pid` may be `self`. 0 when
/// unreadable.
pub fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The names of a running process's threads, as a thread dump shows them (Linux /proc).
pub fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// One complete world: platform, one bot, its gateway, in a temporary directory.
pub struct World {
    pub dir: tempfile::TempDir,
    pub platform: PlatformServer,
    pub bot: Value,
    pub gateway: Gateway,
}

impl World {
    pub fn start(bot_username: &str) -> World {
        World::start_with(bot_username, |_| {})
    }

    /// [`World::start`] with a last say on the gateway's command.
    pub fn start_with(bot_username: &str, configure: impl FnOnce(&mut Command)) -> World {
        bot_gateway::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let platform = PlatformServer::start(&dir.path().join("platform"));
        let bot = platform.create_bot(bot_username, "Test Bot");
        let config_path = dir.path().join("gateway.json");
        write_config(&config_path, &gateway_config(&platform.url, &dir.path().join("state"), &bot));
        let gateway = Gateway::start_with(&config_path, configure);
        World { dir, platform, bot, gateway }
    }

    pub fn bot_username(&self) -> String {
        self.bot["username"].as_str().expect("username").to_string()
    }

    /// Registers a user with a fresh profile directory.
    pub fn user(&self, username: &str) -> bot_gateway::client::Profile {
        let dir = self.dir.path().join(format!("user-{username}"));
        bot_gateway::client::Profile::register(&self.platform.url, &dir, username, &format!("User {username}"))
            .unwrap_or_else(|e| panic!("register {username}: {e}"))
    }

    pub fn restart_gateway(&mut self) {
        self.gateway.proc.kill();
        let path = self.gateway.config_path.clone();
        self.gateway = Gateway::start(&path);
    }
}

/// Waits (bounded: 30 s) for the first event of `user` that `pick` accepts; the others are
/// processed and dropped.
pub fn wait_for<T>(user: &bot_gateway::client::Profile, what: &str, mut pick: impl FnMut(&bot_gateway::client::Incoming) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what} did not arrive");
        let mut found = None;
        user.receive_events_with(left, 1, |e| {
            if found.is_none() {
                found = pick(e);
            }
        })
        .expect("receive");
        if let Some(v) = found {
            return v;
        }
    }
}

/// Sends `text` to the management bot and returns its reply (bounded wait).
pub fn ask_manager(user: &bot_gateway::client::Profile, text: &str) -> String {
    user.send_text("@BotManager", text).unwrap_or_else(|e| panic!("send {text:?} to @BotManager: {e}"));
    let got = user.receive(Duration::from_secs(30), 1).expect("receive from @BotManager");
    assert_eq!(got.len(), 1, "@BotManager answered {text:?}");
    assert!(got[0].sender.is_bot, "the reply comes from a bot");
    got[0].text.clone()
}

/// The value of the line `<key>: <value>` in a management bot reply.
pub fn reply_line(reply: &str, key: &str) -> String {
    reply
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key:?} line in {reply:?}"))
        .to_string()
}

/// Creates a bot through the `/newbot` dialog, its identity secret drawn by the owner's client
/// (`Profile::create_bot`); returns credentials shaped like `create-bot`'s.
pub fn create_bot_via_manager(owner: &bot_gateway::client::Profile, username: &str, name: &str) -> Value {
    let request = bot_gateway::client::NewBot {
        username: username.to_string(),
        display_name: name.to_string(),
        capabilities: "default".to_string(),
    };
    let bot = owner.create_bot("@BotManager", &request).unwrap_or_else(|e| panic!("/newbot @{username}: {e}"));
    owner.forget_bot_secret(&bot.bot_id_hex).expect("the test keeps the secret");
    json!({
        "token": bot.token,
        "bot_id_hex": bot.bot_id_hex,
        "identity_recovery_secret_hex": bot.secret_hex.as_str(),
        "compat_user_id": bot.compat_user_id,
        "username": username,
        "first_name": name,
    })
}

/// A webhook receiver for benchmarks: the gateway's HTTP server on 127.0.0.1:0, answering
/// every request 200 with an empty body and counting them. Stops when dropped.
pub struct CountingReceiver {
    pub url: String,
    server: Option<bot_gateway::http::Server>,
    count: Arc<(Mutex<usize>, std::sync::Condvar)>,
}

struct Counting(Arc<(Mutex<usize>, std::sync::Condvar)>);

impl bot_gateway::http::Handler for Counting {
    fn handle(&self, rq: &mut bot_gateway::http::Request<'_>) -> bot_gateway::http::Response {
        let _ = std::io::copy(rq.body(), &mut std::io::sink());
        let (lock, cv) = &*self.0;
        *lock.lock().expect("count lock") += 1;
        cv.notify_all();
        // A trusted answer keeps the connection, as a bot's own web server would (the
        // gateway's server closes after every untrusted one).
        bot_gateway::http::Response::new(200).served()
    }
}

impl CountingReceiver {
    pub fn start() -> CountingReceiver {
        let count = Arc::new((Mutex::new(0usize), std::sync::Condvar::new()));
        let limits = bot_gateway::http::Limits { workers: 4, ..Default::default() };
        let server =
            bot_gateway::http::Server::start("bench-recv", "127.0.0.1:0", limits, Arc::new(Counting(count.clone())))
                .expect("bind receiver");
        let url = format!("http://{}/bench", server.local_addr());
        CountingReceiver { url, server: Some(server), count }
    }

    /// Waits until `n` requests arrived; panics at `deadline` with `context`.
    pub fn wait_for(&self, n: usize, deadline: Instant, context: impl Fn() -> String) {
        if let Err(got) = self.try_wait_for(n, deadline) {
            panic!("only {got} of {n} requests arrived; {}", context());
        }
    }

    /// Waits until `n` requests arrived, or until `deadline`: then how many did.
    pub fn try_wait_for(&self, n: usize, deadline: Instant) -> Result<(), usize> {
        let (lock, cv) = &*self.count;
        let mut c = lock.lock().expect("count lock");
        while *c < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(*c);
            }
            c = cv.wait_timeout(c, left).expect("count lock").0;
        }
        Ok(())
    }

    /// Waits for the first request, then for `n` in all: the time from `since` to the first
    /// (it may start the sender's threads and connection: timed apart, once), and the rate of
    /// the rest per second. The webhook benches' one way of timing deliveries.
    pub fn first_then_rate(&self, since: Instant, n: usize, deadline: Instant, context: impl Fn() -> String) -> (Duration, f64) {
        self.wait_for(1, deadline, &context);
        let first = since.elapsed();
        let steady = Instant::now();
        self.wait_for(n, deadline, &context);
        (first, (n - 1).max(1) as f64 / steady.elapsed().as_secs_f64())
    }
}

impl Drop for CountingReceiver {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// Records device 1 of `user_id` (`keys`, certified by the identity key `identity_key`) as a
/// checked device in the e2e tables on `conn`, as `e2e::certify` does with the platform's
/// answer: a device opens a first message only from such a device. For the benches that open
/// messages in process, with no platform to ask.
pub fn certify_device_one(
    conn: &rusqlite::Connection,
    user_id: u64,
    identity_key: &[u8],
    keys: &bot_gateway::wire::platform::DeviceKeys,
) -> bot_gateway::e2e::Result<()> {
    use bot_gateway::wire::platform::{DeviceCertificate, GetDeviceCertificatesRequest, GetDeviceCertificatesResponse, Profile};
    let answer = GetDeviceCertificatesResponse {
        profile: protobuf::MessageField::some(Profile { user_id, identity_key: identity_key.to_vec(), ..Default::default() }),
        devices: vec![DeviceCertificate {
            device_id: 1,
            device_key: keys.device_key.clone(),
            device_certificate: keys.device_certificate.clone(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let request = GetDeviceCertificatesRequest { user_id, device_ids: vec![1], ..Default::default() };
    bot_gateway::e2e::record_certified_devices(conn, &request, &answer, bot_gateway::e2e::OnIdentityChange::Refuse)?;
    Ok(())
}

//! The web chat's HTTP handler: who may ask (the session token, `Host`, `Origin`), and what
//! each path answers. Everything is refused before it is routed unless the request carries the
//! session cookie, names this listener in `Host` (the server checks it is a loopback name) and,
//! when it says where it comes from (`Origin`, `Sec-Fetch-Site`), comes from this page.

use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use super::super::handle_line;
use super::answer::{asset, json_response, text};
use super::files;
use super::identity;
use super::input::Input;
use super::model::Page;
use crate::crypto::constant_time_eq;
use crate::http::percent::form_decode;
use crate::http::{Handler, Request, Response};

/// The page, embedded: no build step, nothing fetched from elsewhere.
const INDEX_HTML: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");
const APP_CSS: &str = include_str!("page/app.css");

/// Longest a poll for a change waits before it is answered with the same view.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// Largest typed line a page may post (a message is at most 4,096 characters).
const MAX_LINE_BODY: u64 = 64 * 1024;

/// What every answer carries: no script but our own file, nothing from another origin, no
/// framing, no sniffing, nothing cached, no referrer.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
         form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
];

pub struct WebHandler {
    token: String,
    /// `e2e_chat_<port>`: cookies are not kept apart by port, so two servers of two profiles
    /// on one machine do not overwrite each other's.
    cookie_name: String,
    page: Arc<Page>,
    input: Mutex<Input>,
}

impl WebHandler {
    pub fn new(token: String, port: u16, page: Arc<Page>, input: Input) -> WebHandler {
        WebHandler { token, cookie_name: format!("e2e_chat_{port}"), page, input: Mutex::new(input) }
    }

    fn has_token(&self, given: &str) -> bool {
        constant_time_eq(given.as_bytes(), self.token.as_bytes())
    }

    fn has_cookie(&self, rq: &Request<'_>) -> bool {
        let Some(cookies) = rq.header("cookie") else { return false };
        cookies.split(';').filter_map(|c| c.trim().split_once('=')).any(|(n, v)| n == self.cookie_name && self.has_token(v))
    }

    fn route(&self, rq: &mut Request<'_>) -> Response {
        let (path, query) = rq.target().split_once('?').unwrap_or((rq.target(), ""));
        let (path, query) = (path.to_string(), query.to_string());
        // The address printed on the command line: the token becomes the session's cookie.
        if rq.method() == "GET" && path == "/" {
            if let Some(token) = param(&query, "token") {
                if !self.has_token(&token) {
                    return text(401, "Unauthorized: that token is not this server's; open the address e2e-chat web printed");
                }
                let cookie = format!("{}={}; HttpOnly; SameSite=Strict; Path=/", self.cookie_name, self.token);
                return Response::new(303).with_header("Location", "/").with_header("Set-Cookie", &cookie);
            }
        }
        if !self.has_cookie(rq) {
            return text(401, "Unauthorized: open the address e2e-chat web printed (it carries the session token)");
        }
        match (rq.method(), path.as_str()) {
            ("GET", "/") => asset("text/html; charset=utf-8", INDEX_HTML),
            ("GET", "/app.js") => asset("text/javascript; charset=utf-8", APP_JS),
            ("GET", "/app.css") => asset("text/css; charset=utf-8", APP_CSS),
            ("GET", "/api/view") => {
                let instance = param(&query, "instance").unwrap_or_default();
                let after = param(&query, "after").and_then(|a| a.parse().ok()).unwrap_or(0);
                json_response(200, &self.page.newer(&instance, after, POLL_WAIT))
            }
            ("POST", "/api/line") => match read_json(rq, MAX_LINE_BODY) {
                Ok(body) => self.line(&body),
                Err(refused) => refused,
            },
            ("GET", "/api/file") => {
                let (chat, id) = (param(&query, "chat").unwrap_or_default(), param(&query, "id").and_then(|i| i.parse().ok()));
                match id {
                    Some(id) => files::serve(&self.lock_input(), &chat, id),
                    None => text(400, "Bad Request: id must be a message id"),
                }
            }
            ("POST", "/api/stage") => files::stage(&self.input, rq, &param(&query, "name").unwrap_or_default()),
            ("POST", "/api/send-files") => match read_json(rq, MAX_LINE_BODY) {
                Ok(body) => files::send(&mut self.lock_input(), &body),
                Err(refused) => refused,
            },
            ("GET", "/api/identity") => identity::show(&self.lock_input()),
            ("POST", "/api/identity") => match read_json(rq, MAX_LINE_BODY) {
                Ok(body) => identity::act(&self.lock_input(), &body),
                Err(refused) => refused,
            },
            (_, "/api/identity") => text(405, "Method Not Allowed").with_header("Allow", "GET, POST"),
            (_, "/" | "/app.js" | "/app.css" | "/api/view" | "/api/file") => text(405, "Method Not Allowed").with_header("Allow", "GET"),
            (_, "/api/line" | "/api/stage" | "/api/send-files") => text(405, "Method Not Allowed").with_header("Allow", "POST"),
            _ => text(404, "Not Found"),
        }
    }

    fn lock_input(&self) -> MutexGuard<'_, Input> {
        self.input.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A line typed on the page, as a terminal would take it: a message, a button's number,
    /// or a command (`/press`, `/switch`, `/vote`, ...).
    fn line(&self, body: &Value) -> Response {
        let Some(line) = body.get("text").and_then(Value::as_str) else {
            return text(400, "Bad Request: the body must be a JSON object with a string \"text\"");
        };
        let input = self.lock_input();
        if !handle_line(line, &input.screen, &input.typist, &input.target, &input.jobs) {
            let reason = "the web chat stops with Ctrl-C where e2e-chat web runs; closing the page leaves it running";
            input.screen.show(&crate::client::display::ChatEvent::Failed { command: "/quit", reason });
        }
        json_response(200, &json!({ "ok": true }))
    }
}

/// A JSON body of at most `max` bytes, or the answer refusing it.
fn read_json(rq: &mut Request<'_>, max: u64) -> Result<Value, Response> {
    if rq.body_length().is_some_and(|n| n > max) {
        return Err(text(413, &format!("Payload Too Large: a body here is at most {} KiB", max / 1024)));
    }
    let mut body = Vec::new();
    if let Err(e) = rq.body().take(max + 1).read_to_end(&mut body) {
        return Err(text(400, &format!("Bad Request: the body could not be read: {e}")));
    }
    if body.len() as u64 > max {
        return Err(text(413, &format!("Payload Too Large: a body here is at most {} KiB", max / 1024)));
    }
    serde_json::from_slice::<Value>(&body).map_err(|e| text(400, &format!("Bad Request: the body is not JSON: {e}")))
}

impl Handler for WebHandler {
    fn handle(&self, rq: &mut Request<'_>) -> Response {
        let response = match from_elsewhere(rq) {
            Some(refused) => refused,
            None => self.route(rq),
        };
        // A file's answer has its own, stricter CSP (`files`).
        let missing: Vec<_> = SECURITY_HEADERS.iter().filter(|(name, _)| response.header(name).is_none()).collect();
        missing.into_iter().fold(response, |r, (name, value)| r.with_header(name, value))
    }
}

/// A refusal for a request another site's page made: an `Origin` that is not this listener's
/// own (`http://` and the `Host` it was asked by), or a fetch the browser marks cross-site. A
/// request that changes something must say where it comes from.
fn from_elsewhere(rq: &Request<'_>) -> Option<Response> {
    let host = rq.header("host").unwrap_or_default();
    let origin = rq.header("origin");
    if let Some(origin) = origin {
        if origin != format!("http://{host}") {
            return Some(text(403, "Forbidden: this page belongs to another origin"));
        }
    }
    if let Some(site) = rq.header("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return Some(text(403, "Forbidden: a request from another site"));
        }
    }
    if rq.method() != "GET" && origin.is_none() {
        return Some(text(403, "Forbidden: a request that changes something must carry Origin"));
    }
    None
}

/// A query parameter, percent-decoded (`+` a space).
fn param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| String::from_utf8_lossy(&form_decode(v.as_bytes())).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_found_and_decoded() {
        assert_eq!(param("a=1&token=ab%2Fc+d", "token").as_deref(), Some("ab/c d"));
        assert_eq!(param("token=%zz%4", "token").as_deref(), Some("%zz%4"));
        assert_eq!(param("tokenx=1", "token"), None);
    }
}

//! The web chat's answers: plain text (every refusal says what was wrong), JSON, and the
//! embedded page's files. The security headers are added to all of them by the handler.

use serde_json::Value;

use crate::http::Response;

pub fn text(status: u16, body: &str) -> Response {
    Response::with_body(status, "text/plain; charset=utf-8", body.as_bytes().to_vec())
}

pub fn asset(content_type: &str, body: &str) -> Response {
    Response::with_body(200, content_type, body.as_bytes().to_vec()).served()
}

pub fn json_response(status: u16, body: &Value) -> Response {
    Response::with_body(status, "application/json", body.to_string().into_bytes()).served()
}

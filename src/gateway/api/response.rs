//! The Bot API response envelope (SDK-COMPAT §0.5, §5.1): success is HTTP 200
//! `{"ok":true,"result":...}`; an error is HTTP N with `{"ok":false,"error_code":N,
//! "description":"..."}` and `parameters.retry_after` when set. Always `application/json`,
//! never `ok:false` with a 2xx status, never `null` for an absent field.

use serde_json::{json, Map, Value};

use crate::gateway::botapi::ApiError;
pub use crate::http::Response as HttpResponse;

/// `{"ok":true,"result":result}`.
pub fn success_body(result: Value) -> Value {
    json!({"ok": true, "result": result})
}

/// `{"ok":false,"error_code":N,"description":"..."}` (+ `parameters`), and the HTTP status to
/// send it with. A status outside 400..=599 or an empty description is a bug upstream; it is
/// answered as a 500 rather than confusing the SDKs (PTB raises KeyError on `ok:false` + 200).
pub fn error_body(err: &ApiError) -> (u16, Value) {
    let (status, description) = if (400..=599).contains(&err.status) && !err.description.trim().is_empty() {
        (err.status, err.description.clone())
    } else {
        log::error!("invalid ApiError (status {}, description \"{}\"); answering 500", err.status, err.loggable());
        (500, format!("Internal Server Error: invalid error {}", err.status))
    };
    let mut o = Map::new();
    o.insert("ok".into(), json!(false));
    o.insert("error_code".into(), json!(status));
    o.insert("description".into(), json!(description));
    if let Some(secs) = err.retry_after {
        o.insert("parameters".into(), json!({"retry_after": secs}));
    }
    (status, Value::Object(o))
}

/// HTTP 200 with the success envelope.
pub fn success(result: Value) -> HttpResponse {
    json_response(200, &success_body(result))
}

/// The error envelope with its status; for [`ApiError::unanswered`], no answer at all (the
/// connection is closed).
pub fn error(err: &ApiError) -> HttpResponse {
    if err.is_unanswered() {
        log::debug!("no answer: {}", err.description);
        return HttpResponse::unanswered();
    }
    let (status, body) = error_body(err);
    json_response(status, &body)
}

/// Any JSON body with `Content-Type: application/json` (exactly; no charset parameter).
pub fn json_response(status: u16, body: &Value) -> HttpResponse {
    let bytes = serde_json::to_vec(body).expect("serialising a serde_json::Value cannot fail");
    HttpResponse::with_body(status, "application/json", bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(r: HttpResponse) -> (u16, String, Value) {
        let ct = r.header("Content-Type").expect("content type").to_string();
        (r.status(), ct, serde_json::from_slice(r.body_bytes()).expect("json"))
    }

    #[test]
    fn success_envelope() {
        let (status, ct, v) = body_of(success(json!([1, 2])));
        assert_eq!((status, ct.as_str()), (200, "application/json"));
        assert_eq!(v, json!({"ok": true, "result": [1, 2]}));
        let (_, _, v) = body_of(success(json!(true)));
        assert_eq!(v, json!({"ok": true, "result": true}));
    }

    #[test]
    fn error_envelope() {
        let (status, ct, v) = body_of(error(&ApiError::bad_request("chat_id is required")));
        assert_eq!((status, ct.as_str()), (400, "application/json"));
        assert_eq!(v, json!({"ok": false, "error_code": 400, "description": "Bad Request: chat_id is required"}));
        assert!(v.get("parameters").is_none());
    }

    #[test]
    fn retry_after_parameter() {
        let mut e = ApiError::new(429, "Too Many Requests: retry after 3");
        e.retry_after = Some(3);
        let (status, _, v) = body_of(error(&e));
        assert_eq!(status, 429);
        assert_eq!(v["error_code"], 429);
        assert_eq!(v["parameters"], json!({"retry_after": 3}));
    }

    #[test]
    fn invalid_errors_become_500() {
        for e in [ApiError::new(200, "oops"), ApiError::new(400, " ")] {
            let (status, _, v) = body_of(error(&e));
            assert_eq!(status, 500);
            assert_eq!(v["error_code"], 500);
            assert_eq!(v["ok"], false);
            assert!(!v["description"].as_str().expect("description").is_empty());
        }
    }
}

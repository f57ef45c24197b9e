//! The decoded parameters of one Bot API call, and the typed getters every method uses.
//!
//! Whatever the body shape (query string, form, JSON, multipart), a call ends up as one
//! [`Params`]: name → JSON value, plus uploaded files kept aside by part name. Form and
//! multipart text arrives untyped, so it is decoded per SDK-COMPAT §0.2 (JSON number, boolean,
//! object or array text becomes that value; anything else stays a string) while the raw text is
//! kept, so that a parameter read as a string (`text=1.50`, `text={"a":1}`) is exactly what the
//! client sent. The getters are lenient in the same spirit: a string parameter accepts a JSON
//! scalar, an integer accepts `"42"`, a boolean accepts `1`/`"true"`, and an object or array
//! accepts its JSON text. Errors are 400 "Bad Request: <name> ..." naming the parameter.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::e2e::file::{FileError, PendingUpload, UploadedFile as StoredFile};

use serde_json::{Map, Value};

use super::ApiError;

/// A file part of a multipart body: in memory (`bytes`), or, for a Bot API call, already
/// encrypted and streamed to the platform while the body was read (`streamed`; `bytes` empty).
#[derive(Clone, PartialEq, Eq)]
pub struct UploadedFile {
    /// The `filename` of the part's Content-Disposition (may be empty).
    pub filename: String,
    /// The part's own Content-Type, if it had one (telegraf sends none).
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    pub streamed: Option<Arc<StreamedFile>>,
}

impl UploadedFile {
    /// A part held in memory.
    pub fn in_memory(filename: &str, content_type: Option<&str>, bytes: Vec<u8>) -> UploadedFile {
        UploadedFile { filename: filename.to_string(), content_type: content_type.map(str::to_string), bytes, streamed: None }
    }

    /// Plaintext bytes.
    pub fn len(&self) -> u64 {
        self.streamed.as_ref().map_or(self.bytes.len() as u64, |s| s.plaintext_len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file part encrypted (`crypto::file`) and sent to the platform as the body was read, all
/// but its final piece: the platform stores it only when a method uses the part
/// ([`StreamedFile::store`]); a part no method uses is cancelled when the request ends, and the
/// platform keeps nothing. No plaintext touched disk or stayed in memory.
pub struct StreamedFile {
    /// Plaintext bytes.
    pub plaintext_len: u64,
    state: Mutex<Streamed>,
}

/// (One per file part of a request, behind its mutex: the pending upload's size does not matter.)
#[allow(clippy::large_enum_variant)]
enum Streamed {
    Pending(PendingUpload),
    Stored(StoredFile),
    /// Storing failed; later uses of the part get this description.
    Failed(String),
}

impl StreamedFile {
    pub fn pending(upload: PendingUpload) -> StreamedFile {
        StreamedFile { plaintext_len: upload.encrypted.plaintext_len, state: Mutex::new(Streamed::Pending(upload)) }
    }

    /// A part already stored (tests of the parser, which have no platform).
    pub fn stored(file: StoredFile) -> StreamedFile {
        StreamedFile { plaintext_len: file.size, state: Mutex::new(Streamed::Stored(file)) }
    }

    /// Has the platform store the file (once: a part used twice is one file); returns it.
    pub fn store(&self) -> Result<StoredFile, FileError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *state, Streamed::Failed("the upload was interrupted".into())) {
            Streamed::Pending(upload) => match upload.commit() {
                Ok(file) => {
                    *state = Streamed::Stored(file.clone());
                    Ok(file)
                }
                Err(e) => {
                    *state = Streamed::Failed(e.to_string());
                    Err(e)
                }
            },
            Streamed::Stored(file) => {
                *state = Streamed::Stored(file.clone());
                Ok(file)
            }
            Streamed::Failed(why) => {
                let e = FileError::Io(std::io::Error::other(why.clone()));
                *state = Streamed::Failed(why);
                Err(e)
            }
        }
    }
}

impl PartialEq for StreamedFile {
    /// The same streamed part, not equal bytes.
    fn eq(&self, other: &StreamedFile) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for StreamedFile {}

impl fmt::Debug for UploadedFile {
    // File contents are user plaintext: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadedFile")
            .field("filename", &self.filename)
            .field("content_type", &self.content_type)
            .field("len", &self.len())
            .field("streamed", &self.streamed.is_some())
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Param {
    value: Value,
    /// The untouched text when the value came from a form, query string or multipart text part.
    raw: Option<String>,
}

/// The parameters of one call. Later insertions of a name replace earlier ones (so a body
/// overrides the query string). `Debug` lists names only: values are user plaintext.
#[derive(Clone, Default, PartialEq)]
pub struct Params {
    values: BTreeMap<String, Param>,
    files: BTreeMap<String, UploadedFile>,
    /// Prefix for error messages of nested objects, e.g. `reply_parameters.`.
    prefix: String,
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Params")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .field("files", &self.files)
            .finish()
    }
}

impl Params {
    pub fn new() -> Self {
        Params::default()
    }

    /// Adds a value from a JSON body. `null` means absent (and removes an earlier value).
    pub fn insert_json(&mut self, name: &str, mut value: Value) {
        if value.is_null() {
            self.values.remove(name);
        } else {
            drop_nulls(&mut value);
            self.values.insert(name.to_string(), Param { value, raw: None });
        }
    }

    /// Adds a text value from a query string, a form or a multipart text part, decoded per
    /// SDK-COMPAT §0.2.
    pub fn insert_text(&mut self, name: &str, raw: String) {
        let value = decode_text_value(&raw);
        self.values.insert(name.to_string(), Param { value, raw: Some(raw) });
    }

    /// Adds an uploaded file under its part name.
    pub fn insert_file(&mut self, name: &str, file: UploadedFile) {
        self.files.insert(name.to_string(), file);
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name).map(|p| &p.value)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The text exactly as sent in a form/query/multipart body (`None` for JSON bodies).
    pub fn raw_text(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(|p| p.raw.as_deref())
    }

    /// The uploaded file whose part is named `name` (`attach://name` resolves here).
    pub fn file(&self, name: &str) -> Option<&UploadedFile> {
        self.files.get(name)
    }

    /// Part names of all uploaded files.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Names of all non-file parameters.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.files.is_empty()
    }

    // ── Typed getters ──

    /// An integer; `"42"` and `42.0` are accepted too.
    pub fn optional_i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => as_i64(v).map(Some).ok_or_else(|| self.invalid(name, "must be an integer")),
        }
    }

    /// Like [`Params::optional_i64`], but 400 "<name> is required" when absent.
    pub fn required_i64(&self, name: &str) -> Result<i64, ApiError> {
        self.optional_i64(name)?.ok_or_else(|| self.missing(name))
    }

    /// A finite number (`37.5`, `"37.5"`, `42`); NaN and infinities are refused.
    pub fn optional_f64(&self, name: &str) -> Result<Option<f64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => as_f64(v).map(Some).ok_or_else(|| self.invalid(name, "must be a number")),
        }
    }

    /// Like [`Params::optional_f64`], but 400 "<name> is required" when absent.
    pub fn required_f64(&self, name: &str) -> Result<f64, ApiError> {
        self.optional_f64(name)?.ok_or_else(|| self.missing(name))
    }

    /// A string. A JSON scalar (number, boolean) is accepted and its text used; form values
    /// return the raw text exactly as sent. Objects and arrays from a JSON body are refused.
    pub fn optional_str(&self, name: &str) -> Result<Option<String>, ApiError> {
        let Some(p) = self.values.get(name) else {
            return Ok(None);
        };
        if let Some(raw) = &p.raw {
            return Ok(Some(raw.clone()));
        }
        as_text(&p.value).map(Some).ok_or_else(|| self.invalid(name, "must be a string"))
    }

    /// Like [`Params::optional_str`], but 400 "<name> is required" when absent.
    pub fn required_str(&self, name: &str) -> Result<String, ApiError> {
        self.optional_str(name)?.ok_or_else(|| self.missing(name))
    }

    /// A boolean: `true`/`false`, `"true"`/`"false"` (any case), `1`/`0`, `"1"`/`"0"`.
    pub fn optional_bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => as_bool(v).map(Some).ok_or_else(|| self.invalid(name, "must be a boolean")),
        }
    }

    /// A boolean that defaults to `false` when absent.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        Ok(self.optional_bool(name)?.unwrap_or(false))
    }

    /// A list of strings: a JSON array of strings, or its JSON text.
    pub fn optional_string_list(&self, name: &str) -> Result<Option<Vec<String>>, ApiError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let arr = match v {
            Value::Array(a) => a.clone(),
            Value::String(s) => match parse_json_text(s) {
                Some(Value::Array(a)) => a,
                _ => return Err(self.invalid(name, "must be a JSON array of strings")),
            },
            _ => return Err(self.invalid(name, "must be a JSON array of strings")),
        };
        arr.into_iter()
            .map(|x| match x {
                Value::String(s) => Ok(s),
                _ => Err(self.invalid(name, "must be a JSON array of strings")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A JSON array, or its JSON text.
    pub fn optional_array(&self, name: &str) -> Result<Option<Vec<Value>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a.clone())),
            Some(Value::String(s)) => match parse_json_text(s) {
                Some(Value::Array(a)) => Ok(Some(a)),
                _ => Err(self.invalid(name, "must be a JSON array")),
            },
            Some(_) => Err(self.invalid(name, "must be a JSON array")),
        }
    }

    /// A JSON object, or its JSON text.
    pub fn optional_object(&self, name: &str) -> Result<Option<Map<String, Value>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o.clone())),
            Some(Value::String(s)) => match parse_json_text(s) {
                Some(Value::Object(o)) => Ok(Some(o)),
                _ => Err(self.invalid(name, "must be a JSON object")),
            },
            Some(_) => Err(self.invalid(name, "must be a JSON object")),
        }
    }

    /// A JSON object as its own [`Params`], so nested fields use the same getters; their
    /// errors name the full path (`reply_parameters.message_id is required`).
    pub fn optional_nested(&self, name: &str) -> Result<Option<Params>, ApiError> {
        Ok(self.optional_object(name)?.map(|obj| {
            let mut nested = Params { prefix: format!("{}{name}.", self.prefix), ..Params::default() };
            for (k, v) in obj {
                nested.insert_json(&k, v);
            }
            nested
        }))
    }

    /// Like [`Params::optional_nested`], with this request's file parts, so that the object's
    /// `attach://<part>` finds its part (editMessageMedia's InputMedia).
    pub fn optional_nested_with_files(&self, name: &str) -> Result<Option<Params>, ApiError> {
        Ok(self.optional_nested(name)?.map(|nested| Params { files: self.files.clone(), ..nested }))
    }

    /// The objects of the JSON array `name` (or its JSON text), each as its own [`Params`]
    /// named `name[i].` in errors, with this request's file parts, so that an item's
    /// `attach://<part>` finds its part (sendMediaGroup's InputMedia).
    pub fn nested_items(&self, name: &str) -> Result<Option<Vec<Params>>, ApiError> {
        let Some(items) = self.optional_array(name)? else {
            return Ok(None);
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let at = format!("{}{name}[{i}]", self.prefix);
                let Value::Object(obj) = item else {
                    return Err(ApiError::bad_request(format!("{at} must be a JSON object")));
                };
                let mut nested = Params { prefix: format!("{at}."), files: self.files.clone(), ..Params::default() };
                for (k, v) in obj {
                    nested.insert_json(&k, v);
                }
                Ok(nested)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// `name` as errors name it: with the path of a nested object (`media[0].media`).
    pub fn qualified(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn missing(&self, name: &str) -> ApiError {
        ApiError::bad_request(format!("{}{name} is required", self.prefix))
    }

    fn invalid(&self, name: &str, what: &str) -> ApiError {
        ApiError::bad_request(format!("{}{name} {what}", self.prefix))
    }
}

/// SDK-COMPAT §0.2: form and multipart values are JSON text unless they are plain strings.
/// Only numbers, booleans, objects and arrays are taken as JSON; `"quoted"` and `null` stay the
/// raw string.
pub fn decode_text_value(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(mut v @ (Value::Number(_) | Value::Bool(_) | Value::Object(_) | Value::Array(_))) => {
            drop_nulls(&mut v);
            v
        }
        _ => Value::String(raw.to_string()),
    }
}

/// JSON text a parameter carries (an object or array sent as a string), read as the gateway
/// reads every JSON it is given: `null` fields dropped (`drop_nulls`).
pub fn parse_json_text(text: &str) -> Option<Value> {
    let mut v = serde_json::from_str::<Value>(text).ok()?;
    drop_nulls(&mut v);
    Some(v)
}

/// Removes every object field whose value is `null`, at any depth: in the Bot API an optional
/// field sent as `null` is an absent one (`"url": null` in an entity, `"callback_data": null`
/// in a button), and libraries serialise unset fields so.
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// An integer from a JSON number (integral floats within 2^53 too) or a decimal string.
pub fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() <= (1u64 << 53) as f64).then_some(f as i64)
        }),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A finite number from a JSON number or a decimal string.
pub fn as_f64(v: &Value) -> Option<f64> {
    let f = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    f.is_finite().then_some(f)
}

/// A boolean from `true`/`false`, `1`/`0` or their string forms (any case).
pub fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A string from a JSON string, or the text of a number or boolean.
pub fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Params {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.insert_text(k, v.to_string());
        }
        p
    }

    fn json_params(v: Value) -> Params {
        let mut p = Params::new();
        for (k, v) in v.as_object().expect("object").clone() {
            p.insert_json(&k, v);
        }
        p
    }

    fn desc<T: fmt::Debug>(r: Result<T, ApiError>) -> String {
        let e = r.expect_err("expected an error");
        assert_eq!(e.status, 400);
        e.description
    }

    #[test]
    fn numbers_are_finite_decimals() {
        let p = form(&[("lat", "37.5"), ("lon", "-122"), ("nan", "NaN"), ("inf", "inf"), ("word", "north")]);
        assert_eq!(p.required_f64("lat").expect("form float"), 37.5);
        assert_eq!(p.required_f64("lon").expect("form integer"), -122.0);
        for name in ["nan", "inf", "word"] {
            assert_eq!(desc(p.optional_f64(name)), format!("Bad Request: {name} must be a number"));
        }
        assert_eq!(desc(p.required_f64("alt")), "Bad Request: alt is required");
        let j = json_params(json!({"lat": 1.25, "text": "2.5", "obj": {}}));
        assert_eq!((j.required_f64("lat").expect("json"), j.required_f64("text").expect("json text")), (1.25, 2.5));
        assert!(j.optional_f64("obj").is_err());
    }

    #[test]
    fn text_values_decode_per_sdk_compat() {
        let p = form(&[
            ("chat_id", "42"),
            ("ratio", "1.5"),
            ("text", "hello"),
            ("flag", "true"),
            ("markup", r#"{"inline_keyboard": [[{"text": "b", "callback_data": "c"}]]}"#),
            ("list", r#"["message"]"#),
            ("quoted", r#""x""#),
            ("nul", "null"),
            ("chan", "@chan"),
        ]);
        assert_eq!(p.get("chat_id"), Some(&json!(42)));
        assert_eq!(p.get("ratio"), Some(&json!(1.5)));
        assert_eq!(p.get("text"), Some(&json!("hello")));
        assert_eq!(p.get("flag"), Some(&json!(true)));
        assert_eq!(p.get("markup").and_then(|m| m["inline_keyboard"][0][0]["text"].as_str()), Some("b"));
        assert_eq!(p.get("list"), Some(&json!(["message"])));
        assert_eq!(p.get("quoted"), Some(&json!("\"x\"")));
        assert_eq!(p.get("nul"), Some(&json!("null")));
        assert_eq!(p.get("chan"), Some(&json!("@chan")));
    }

    #[test]
    fn string_getter_returns_raw_form_text() {
        let p = form(&[("a", "1.50"), ("b", "true"), ("c", r#"{"x": 1}"#), ("d", " 42 ")]);
        assert_eq!(p.required_str("a").expect("a"), "1.50");
        assert_eq!(p.required_str("b").expect("b"), "true");
        assert_eq!(p.required_str("c").expect("c"), r#"{"x": 1}"#);
        assert_eq!(p.required_str("d").expect("d"), " 42 ");
        let j = json_params(json!({"n": 42, "t": true, "s": "x", "o": {"a": 1}}));
        assert_eq!(j.required_str("n").expect("n"), "42");
        assert_eq!(j.required_str("t").expect("t"), "true");
        assert_eq!(j.required_str("s").expect("s"), "x");
        assert_eq!(desc(j.required_str("o")), "Bad Request: o must be a string");
        assert_eq!(desc(j.required_str("zz")), "Bad Request: zz is required");
    }

    #[test]
    fn integer_getters() {
        let p = json_params(json!({"a": 42, "b": "-17", "c": 3.0, "d": 3.5, "e": "x", "f": true, "g": null}));
        assert_eq!(p.required_i64("a").expect("a"), 42);
        assert_eq!(p.required_i64("b").expect("b"), -17);
        assert_eq!(p.required_i64("c").expect("c"), 3);
        assert_eq!(desc(p.required_i64("d")), "Bad Request: d must be an integer");
        assert_eq!(desc(p.required_i64("e")), "Bad Request: e must be an integer");
        assert_eq!(desc(p.required_i64("f")), "Bad Request: f must be an integer");
        assert_eq!(desc(p.required_i64("chat_id")), "Bad Request: chat_id is required");
        assert_eq!(p.optional_i64("g").expect("null is absent"), None);
        assert_eq!(form(&[("x", "007")]).required_i64("x").expect("decimal string"), 7);
    }

    #[test]
    fn bool_getter_is_lenient() {
        let p = json_params(json!({"a": true, "b": "false", "c": 1, "d": "0", "e": "TRUE", "f": 2, "g": "yes"}));
        assert_eq!(p.optional_bool("a").expect("a"), Some(true));
        assert_eq!(p.optional_bool("b").expect("b"), Some(false));
        assert_eq!(p.optional_bool("c").expect("c"), Some(true));
        assert_eq!(p.optional_bool("d").expect("d"), Some(false));
        assert_eq!(p.optional_bool("e").expect("e"), Some(true));
        assert_eq!(desc(p.optional_bool("f")), "Bad Request: f must be a boolean");
        assert_eq!(desc(p.optional_bool("g")), "Bad Request: g must be a boolean");
        assert!(!p.flag("absent").expect("absent"));
        let f = form(&[("x", "true"), ("y", "false")]);
        assert!(f.flag("x").expect("x"));
        assert!(!f.flag("y").expect("y"));
    }

    #[test]
    fn string_list_getter() {
        let p = json_params(json!({
            "a": ["message", "callback_query"], "b": "[\"message\"]", "c": [], "d": [1], "e": "message", "f": {}
        }));
        assert_eq!(
            p.optional_string_list("a").expect("a"),
            Some(vec!["message".to_string(), "callback_query".to_string()])
        );
        assert_eq!(p.optional_string_list("b").expect("b"), Some(vec!["message".to_string()]));
        assert_eq!(p.optional_string_list("c").expect("c"), Some(vec![]));
        assert_eq!(p.optional_string_list("none").expect("none"), None);
        for bad in ["d", "e", "f"] {
            assert_eq!(
                desc(p.optional_string_list(bad)),
                format!("Bad Request: {bad} must be a JSON array of strings")
            );
        }
        let f = form(&[("allowed_updates", r#"["callback_query","message"]"#)]);
        assert_eq!(f.optional_string_list("allowed_updates").expect("form").map(|v| v.len()), Some(2));
    }

    #[test]
    fn objects_arrays_and_nested_params() {
        let p = json_params(json!({
            "rp": {"message_id": 5, "allow_sending_without_reply": "true"},
            "rp_text": "{\"message_id\": \"6\"}",
            "bad": "{oops",
            "arr": "[1,2]"
        }));
        let rp = p.optional_nested("rp").expect("rp").expect("present");
        assert_eq!(rp.required_i64("message_id").expect("id"), 5);
        assert!(rp.flag("allow_sending_without_reply").expect("flag"));
        assert_eq!(desc(rp.required_i64("chat_id")), "Bad Request: rp.chat_id is required");
        let rp2 = p.optional_nested("rp_text").expect("rp_text").expect("present");
        assert_eq!(rp2.required_i64("message_id").expect("id"), 6);
        assert_eq!(desc(p.optional_object("bad")), "Bad Request: bad must be a JSON object");
        assert_eq!(p.optional_array("arr").expect("arr"), Some(vec![json!(1), json!(2)]));
        assert_eq!(desc(p.optional_array("rp")), "Bad Request: rp must be a JSON array");
    }

    #[test]
    fn later_values_replace_earlier_and_null_removes() {
        let mut p = form(&[("offset", "5")]);
        p.insert_text("offset", "6".into());
        assert_eq!(p.required_i64("offset").expect("offset"), 6);
        p.insert_json("offset", Value::Null);
        assert!(!p.contains("offset"));
    }

    #[test]
    fn params_debug_shows_names_only() {
        let p = form(&[("text", "my secret message")]);
        let s = format!("{p:?}");
        assert!(s.contains("text"), "{s}");
        assert!(!s.contains("secret"), "{s}");
    }

    #[test]
    fn uploaded_file_debug_hides_bytes() {
        let f = UploadedFile::in_memory("a.txt", None, b"secret plaintext".to_vec());
        let s = format!("{f:?}");
        assert!(!s.contains("secret"), "{s}");
        assert!(s.contains("16"), "{s}");
    }
}

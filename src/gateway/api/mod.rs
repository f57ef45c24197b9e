//! The Bot API served over HTTP: the routes on the HTTP server (`crate::http`), request
//! decoding, the response envelope, and the methods, one file per family with one table
//! (`methods`). The top layer of the gateway: it may use everything below it (the bot's state,
//! its store and threads, `updates`, `botapi`), and nothing below imports it.
//!
//! Flow of one call: `crate::http` reads the request; `server` routes `/bot<token>/<method>`
//! and authenticates the token (`Backend::bot`); `BotApi::preflight` checks revocation, the
//! method name and the delivery mode; `request` (+ `multipart`) decodes the body into
//! `botapi::Params`; `BotApi::call` runs the method's function from the table in `methods`;
//! `response` writes the envelope. `replies` runs the calls found in webhook answers through
//! the same decoding and table. `token` keeps secrets out of logged paths. `url_media` fetches
//! the files bots name by URL, when the config allows it (`media_from_urls`).

pub mod backend;
pub mod methods;
pub mod multipart;
pub mod replies;
pub mod request;
pub mod response;
pub mod server;
pub mod token;
pub mod url_media;

pub use backend::{Backend, BotApi, Download};
pub use server::{compat_limits, extensions_limits, Listener, ListenerKind};

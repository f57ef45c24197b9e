//! The Bot HTTP API boundary: listeners, request decoding, methods and JSON types.
//!
//! Flow of one call: the HTTP server (`crate::http`) reads the request; `server` routes
//! `/bot<token>/<method>` and authenticates the token (`Backend::bot`); `BotApi::preflight`
//! checks revocation, the method name and the delivery mode; `request` (+ `multipart`) decodes
//! the body into `params::Params`; `BotApi::call` runs the method's function from the table in
//! `methods` (one file per family); and `response` writes the envelope.
//! `types` builds the Bot API JSON objects the runtime returns; `text` turns `parse_mode`
//! markup into entities (one file per markup language) and holds the entity rules
//! (`text::entities`).

pub mod backend;
pub mod error;
pub mod methods;
pub mod multipart;
pub mod params;
pub mod request;
pub mod response;
pub mod server;
pub(crate) mod text;
pub mod token;
pub mod types;

pub use backend::{Backend, BotApi};
pub use error::ApiError;
pub use params::{Params, UploadedFile};
pub use server::{compat_limits, extensions_limits, Listener, ListenerKind};

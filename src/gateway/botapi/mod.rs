//! The Bot API's vocabulary, with no HTTP and no runtime in it: its objects as JSON (`types`:
//! User, Chat, Message, Update; `members`: ChatMember, ChatMemberUpdated, ChatFullInfo), formatting (`text`: `parse_mode` markup into entities, one
//! file per markup language, and the MessageEntity rules), method parameters as decoded from
//! any body shape (`params`), and its error (`error`: status and description). The layers
//! above use it: `gateway::updates` builds Update objects with it, and `gateway::api` serves
//! the methods.

pub mod error;
pub mod markup;
pub mod members;
pub mod params;
pub(crate) mod text;
pub mod types;

pub use error::ApiError;
pub use params::{Params, UploadedFile};

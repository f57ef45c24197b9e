//! What is wrong with a value one of the shared rules checks (a location's latitude, a command's
//! name, a poll, an endpoint): one sentence that names the field as the Bot API names it, so a
//! refusal reads the same in the gateway (400), the platform (INVALID_ARGUMENT) and the client.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl Invalid {
    pub fn new(why: impl Into<String>) -> Invalid {
        Invalid(why.into())
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// Compared with the sentence it says (tests read it so).
impl PartialEq<&str> for Invalid {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// The sentence, to read or match.
impl std::ops::Deref for Invalid {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

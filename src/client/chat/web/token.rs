//! The web chat's session token: 256 random bits as hex, kept in the profile directory
//! (`web-token`, mode 0600, beside the profile's keys) so that a page open in a browser keeps
//! working when `e2e-chat web` restarts. Whoever can read the profile can read the keys anyway;
//! deleting the file makes a new token at the next start.

use std::fs;
use std::path::Path;

use crate::cli::{CliError, Context};

const FILE: &str = "web-token";

/// The profile's token, made on first use.
pub fn load_or_create(dir: &Path) -> Result<String, CliError> {
    let path = dir.join(FILE);
    match fs::read_to_string(&path) {
        Ok(kept) if is_token(kept.trim()) => return Ok(kept.trim().to_string()),
        Ok(_) => log::warn!("{} is not a token; making a new one", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let token = crate::crypto::hex_encode(&crate::crypto::random_bytes::<32>());
    crate::client::cli_common::replace_private(&path, "tmp", token.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(token)
}

fn is_token(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = load_or_create(dir.path()).expect("made");
        assert!(is_token(&first), "{first}");
        let mode = fs::metadata(dir.path().join(FILE)).expect("file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(dir.path()).expect("kept"), first);
        fs::write(dir.path().join(FILE), "garbage").expect("spoil");
        let second = load_or_create(dir.path()).expect("made again");
        assert!(is_token(&second) && second != first);
    }
}

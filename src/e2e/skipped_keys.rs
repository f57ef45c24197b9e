//! Skipped message keys expire (`crypto::ratchet::consts::SKIPPED_KEY_MAX_AGE_SECS`, 30 days).
//! A session drops them when it next decrypts; this sweep takes them from every stored session,
//! so that one which never receives again keeps none either. The gateway runs it on its
//! upkeep, `e2e-chat` when it starts receiving.

use rusqlite::Connection;

use super::{store, Result};
use crate::crypto::Session;

/// Deletes the expired skipped keys of every stored session (current and previous) at `now`;
/// returns how many sessions changed.
pub fn expire_skipped_keys(conn: &Connection, now: i64) -> Result<usize> {
    let mut changed = 0;
    for (user_id, device_id, (current, previous)) in store::all_sessions(conn)? {
        let mut current = Session::from_bytes(&current)?;
        let mut previous = previous.map(|p| Session::from_bytes(&p)).transpose()?;
        let expired_current = current.expire_skipped(now);
        let expired_previous = previous.as_mut().is_some_and(|p| p.expire_skipped(now));
        if expired_current || expired_previous {
            let previous = previous.map(|p| p.to_bytes());
            store::put_sessions(conn, user_id, device_id, &current.to_bytes(), previous.as_deref().map(Vec::as_slice))?;
            changed += 1;
        }
    }
    if changed > 0 {
        // The sessions' old images, with the expired keys, leave the log at the commit.
        super::wal::secrets_deleted();
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{open_text, Device};
    use super::super::{add_sessions, open_envelope, E2eError};
    use super::*;
    use crate::clock::unix_now;
    use crate::crypto::ratchet::consts::SKIPPED_KEY_MAX_AGE_SECS;
    use crate::crypto::CryptoError;

    #[test]
    fn the_sweep_deletes_skipped_keys_older_than_thirty_days_from_stored_sessions() {
        let (alice, bob) = (Device::new(1, 1), Device::new(2, 1));
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("session");
        assert_eq!(open_text(&bob, &alice.send(&bob, "hello")), "hello");
        let lost = alice.send(&bob, "delayed");
        assert_eq!(open_text(&bob, &alice.send(&bob, "after")), "after");
        // Within 30 days nothing goes; the delayed message still opens after a sweep.
        assert_eq!(expire_skipped_keys(&bob.conn, unix_now() + SKIPPED_KEY_MAX_AGE_SECS - 60).expect("sweep"), 0);
        let late = alice.send(&bob, "late");
        assert_eq!(open_text(&bob, &alice.send(&bob, "latest")), "latest");
        assert_eq!(open_text(&bob, &lost), "delayed");

        super::super::wal::take_mark();
        assert_eq!(expire_skipped_keys(&bob.conn, unix_now() + SKIPPED_KEY_MAX_AGE_SECS - 60).expect("sweep"), 0);
        assert!(!super::super::wal::take_mark(), "nothing deleted, no checkpoint");
        assert_eq!(expire_skipped_keys(&bob.conn, unix_now() + SKIPPED_KEY_MAX_AGE_SECS + 60).expect("sweep"), 1);
        assert!(super::super::wal::take_mark(), "the expired keys' old images leave the log at the commit");
        assert!(
            matches!(open_envelope(&bob.conn, &late), Err(E2eError::Crypto(CryptoError::DuplicateMessage))),
            "its key is gone from the stored session"
        );
        assert_eq!(open_text(&bob, &alice.send(&bob, "the session goes on")), "the session goes on");
    }
}

//! Ids and dates the sender vouches for. A message's id and date are the platform's to give,
//! but the sender reserves them before it seals (`ReserveMessageIds`) and puts them into the
//! encrypted content (`Content.vouched`). A receiver refuses an envelope whose id or date is
//! not the one inside: the platform cannot swap two messages' ids, and with them what an edit,
//! a deletion, a reaction or a reply names, nor redate a message.
//!
//! Earlier releases vouch for nothing, so a content without `vouched` is accepted, until its
//! device has once vouched: from then on one without it is a downgrade, and refused. Chat
//! actions are never vouched for (they take no id anyone names).

use rusqlite::{params, Connection};

use super::{E2eError, Result};
use crate::wire::e2e::{content::Body, Content, Vouched};

/// The table of this module (a step of each database holding `e2e` tables).
pub const TABLES: &str = "
    CREATE TABLE e2e_vouching_devices (
        user_id   INTEGER NOT NULL,
        device_id INTEGER NOT NULL,
        PRIMARY KEY (user_id, device_id)
    ) WITHOUT ROWID;";

/// A reserved date further than this from the sender's clock is logged: the platform dates
/// messages, and a sender that vouches for a date should notice one that is far off.
const DATE_SKEW_WARN_SECS: i64 = 600;

/// Puts the reserved `message_id` and `date` into `content`, unless it carries them already
/// (sent again) or is a chat action.
pub fn vouch(content: &mut Content, message_id: u64, date: i64) {
    if content.vouched.is_some() || matches!(content.body, Some(Body::ChatAction(_))) {
        return;
    }
    let skew = date - crate::clock::unix_now();
    if skew.abs() > DATE_SKEW_WARN_SECS {
        log::warn!("the platform dated message {message_id} {skew} s away from this device's clock; vouching for its date anyway");
    }
    content.vouched = Some(Vouched { message_id, date, ..Default::default() }).into();
}

/// Checks that `content`, received from `sender` (user, device), vouches for the envelope it
/// came in: `message_id` and `date` as the platform delivered them.
pub fn check(conn: &Connection, sender: (u64, u32), content: &Content, message_id: u64, date: i64) -> Result<()> {
    let refused = |why: String| E2eError::Unvouched { user_id: sender.0, device_id: sender.1, message_id, why };
    match content.vouched.as_ref() {
        Some(v) if v.message_id != message_id => {
            Err(refused(format!("its sender sealed it as message {}", v.message_id)))
        }
        Some(v) if v.date != date => Err(refused(format!("its sender sealed it dated {}, the platform dates it {date}", v.date))),
        Some(_) => {
            conn.prepare_cached("INSERT OR IGNORE INTO e2e_vouching_devices (user_id, device_id) VALUES (?1, ?2)")?
                .execute(params![sender.0 as i64, sender.1 as i64])?;
            Ok(())
        }
        None if matches!(content.body, Some(Body::ChatAction(_))) => Ok(()),
        None => {
            let vouched_before: bool = conn
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM e2e_vouching_devices WHERE user_id = ?1 AND device_id = ?2)")?
                .query_row(params![sender.0 as i64, sender.1 as i64], |r| r.get(0))?;
            if vouched_before {
                return Err(refused("it carries no id of its sender's, though that device vouched for its messages before".into()));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        c.execute_batch(TABLES).expect("tables");
        c
    }

    fn vouched(id: u64, date: i64) -> Content {
        let mut c = crate::e2e::text_content("hi");
        vouch(&mut c, id, date);
        c
    }

    #[test]
    fn a_content_under_another_id_or_date_is_refused() {
        let c = db();
        let content = vouched(7, 1_000);
        assert!(check(&c, (1, 1), &content, 7, 1_000).is_ok());
        let swapped = check(&c, (1, 1), &content, 8, 1_000).expect_err("swapped id");
        assert!(matches!(swapped, E2eError::Unvouched { message_id: 8, .. }), "{swapped}");
        assert!(swapped.to_string().contains("sealed it as message 7"), "{swapped}");
        let redated = check(&c, (1, 1), &content, 7, 2_000).expect_err("redated");
        assert!(redated.to_string().contains("dated 1000"), "{redated}");
    }

    #[test]
    fn an_unvouched_content_is_refused_only_from_a_device_that_vouched_before() {
        let c = db();
        let plain = crate::e2e::text_content("from an earlier release");
        assert!(check(&c, (1, 1), &plain, 5, 1_000).is_ok(), "never vouched: accepted");
        check(&c, (1, 1), &vouched(6, 1_000), 6, 1_000).expect("vouched");
        let downgrade = check(&c, (1, 1), &plain, 7, 1_000).expect_err("downgrade");
        assert!(downgrade.to_string().contains("vouched for its messages before"), "{downgrade}");
        assert!(check(&c, (1, 2), &plain, 7, 1_000).is_ok(), "another device of the user has not vouched");
        let mut action = Content::new();
        action.set_chat_action(Default::default());
        assert!(check(&c, (1, 1), &action, 8, 1_000).is_ok(), "chat actions vouch for nothing");
    }

    #[test]
    fn a_content_sent_again_keeps_what_it_vouched_for() {
        let mut content = vouched(7, 1_000);
        vouch(&mut content, 9, 2_000);
        assert_eq!((content.vouched.message_id, content.vouched.date), (7, 1_000));
        let mut action = Content::new();
        action.set_chat_action(Default::default());
        vouch(&mut action, 9, 2_000);
        assert!(action.vouched.is_none());
    }
}

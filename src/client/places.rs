//! Locations, venues, contact cards, dice and polls as a user sends them: the one way to send
//! one (`shared_item::Shared`, its shapes and wire form) to a peer or a group
//! (`Profile::send_shared`, `Profile::send_group_shared`), and a vote in a poll
//! (`Profile::vote`). Whatever sends a location or a
//! contact card — the `send-location` and `send-contact` commands, chat mode, a reply
//! keyboard's request buttons — goes through here, so the rules (`wire::places`) are checked
//! once, before anything is encrypted.

use super::error::{ClientError, Result};
use super::group::SentGroupMessage;
use super::message::{GroupId, SentMessage};
use super::profile::Profile;
use crate::wire::e2e::content::Body;
use super::history;
pub use super::shared_item::{ContactCard, DiceInfo, LocationInfo, PollInfo, Shared, VenueInfo};
use crate::wire::e2e::{Content, PollVote};
use crate::wire::polls;

impl Profile {
    /// This user's own contact card: the display name (the username when there is none) as
    /// first name, the user's id, and no phone number (the platform has none).
    pub fn own_contact_card(&self) -> ContactCard {
        let name = if self.display_name().trim().is_empty() { self.username() } else { self.display_name() };
        ContactCard { first_name: name.to_string(), user_id: self.user_id(), ..Default::default() }
    }

    /// Shares a location, venue, contact card or dice with `peer` (a username, `@` optional),
    /// optionally as a reply.
    pub fn send_shared(&self, peer: &str, shared: &Shared, reply_to_message_id: Option<u64>) -> Result<SentMessage> {
        let content = shared.to_content(reply_to_message_id)?;
        let peer = self.lookup(peer)?;
        self.send_content(&peer, &content)
    }

    /// Votes in poll `message_id` of `peer`'s dialog: `option_ids` are the options' indexes
    /// (from 0); none retracts the vote. Checked against the poll this profile remembers
    /// (`wire::polls`) before it is sent; the bot checks again.
    pub fn vote(&self, peer: &str, message_id: u64, option_ids: &[u32]) -> Result<SentMessage> {
        let peer = self.lookup(peer)?;
        let name = peer.username.as_str();
        let message = history::load(&self.conn, peer.user_id, message_id)?
            .ok_or_else(|| ClientError::Invalid(format!("no message {message_id} from @{name} is known to this profile")))?;
        let Some(Body::Poll(poll)) = &message.body else {
            return Err(ClientError::Invalid(format!("message {message_id} from @{name} is no poll")));
        };
        let vote = PollVote { message_id, option_ids: option_ids.to_vec(), ..Default::default() };
        polls::check_vote(poll, &vote, false, crate::clock::unix_now())
            .map_err(|why| ClientError::Invalid(format!("vote in message {message_id} from @{name}: {why}")))?;
        let mut content = Content::new();
        content.set_poll_vote(vote);
        self.send_content(&peer, &content)
    }

    /// Shares a location, venue, contact card or dice in a group (MLS, as a group text).
    pub fn send_group_shared(&self, group: &GroupId, shared: &Shared, reply_to: Option<u64>) -> Result<SentGroupMessage> {
        let content = shared.to_content(reply_to)?;
        self.send_group_content(group, &content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_through_their_content() {
        let items = [
            Shared::Location(LocationInfo { live_period: 900, heading: 30, ..LocationInfo::point(52.5, 13.4) }),
            Shared::Venue(VenueInfo {
                location: LocationInfo::point(1.5, -2.5),
                title: "Cafe".into(),
                address: "Main St 1".into(),
                ..Default::default()
            }),
            Shared::Contact(ContactCard { first_name: "Ann".into(), user_id: 7, ..Default::default() }),
            Shared::Dice(DiceInfo { emoji: "🎯".into(), value: 3 }),
        ];
        for item in items {
            let content = item.to_content(Some(4)).expect("valid");
            assert_eq!(content.reply_to_message_id, 4);
            assert!(content.is_message());
            assert_eq!(Shared::from_content(&content), Some(item));
        }
    }

    #[test]
    fn a_broken_item_is_refused_before_sending() {
        let e = Shared::Location(LocationInfo::point(91.0, 0.0)).to_content(None).expect_err("latitude");
        assert!(e.to_string().contains("latitude must be a number between -90 and 90"), "{e}");
        let e = Shared::Contact(ContactCard::default()).to_content(None).expect_err("name");
        assert!(e.to_string().contains("first_name is required"), "{e}");
        assert!(Shared::Location(LocationInfo { live_period: 60, ..LocationInfo::point(0.0, 0.0) }).is_live(100, 159));
        assert!(!Shared::Location(LocationInfo::point(0.0, 0.0)).is_live(100, 101));
    }
}

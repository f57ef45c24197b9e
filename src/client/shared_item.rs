//! What a location, venue, contact card, dice or poll message carries, as the client shows it
//! (`Shared`), and its wire form both ways. Data only: the sending is `places.rs`.

use protobuf::MessageField;

use super::error::{ClientError, Result};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::poll::Type as PollType;
use crate::wire::e2e::{Contact, Content, Dice, Location, Poll, PollOption, Venue};
use crate::wire::places;

/// A point on the map; live while `live_period` runs (and it was not stopped).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocationInfo {
    pub latitude: f64,
    pub longitude: f64,
    /// Meters; 0 when not given.
    pub horizontal_accuracy: f64,
    /// Seconds from the message's date during which the sender may move it (0x7FFFFFFF: until
    /// stopped); 0 for a static point.
    pub live_period: u32,
    /// Degrees (1..360); 0 when not given.
    pub heading: u32,
    /// Meters; 0 when none.
    pub proximity_alert_radius: u32,
    /// The sender stopped the live location.
    pub live_stopped: bool,
}

impl LocationInfo {
    /// A static point.
    pub fn point(latitude: f64, longitude: f64) -> LocationInfo {
        LocationInfo { latitude, longitude, ..Default::default() }
    }

    fn from_wire(l: &Location) -> LocationInfo {
        LocationInfo {
            latitude: l.latitude,
            longitude: l.longitude,
            horizontal_accuracy: l.horizontal_accuracy,
            live_period: l.live_period,
            heading: l.heading,
            proximity_alert_radius: l.proximity_alert_radius,
            live_stopped: l.live_stopped,
        }
    }

    fn to_wire(&self) -> Location {
        Location {
            latitude: self.latitude,
            longitude: self.longitude,
            horizontal_accuracy: self.horizontal_accuracy,
            live_period: self.live_period,
            heading: self.heading,
            proximity_alert_radius: self.proximity_alert_radius,
            live_stopped: self.live_stopped,
            ..Default::default()
        }
    }
}

/// A place: a point with a title and an address (and directory ids when the sender gave them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VenueInfo {
    pub location: LocationInfo,
    pub title: String,
    pub address: String,
    pub foursquare_id: String,
    pub google_place_id: String,
}

/// A contact card. A platform user has no phone number, so a user's own card carries none
/// (docs/decisions.md, "Contact cards"); `user_id` names the platform user (0: none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContactCard {
    pub phone_number: String,
    pub first_name: String,
    pub last_name: String,
    pub user_id: u64,
    pub vcard: String,
}

/// An animated emoji and the value it landed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiceInfo {
    pub emoji: String,
    pub value: u32,
}

/// A poll or quiz as its sender last told it: the counts are the sender's (a bot tells them
/// when it stops the poll).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PollInfo {
    pub question: String,
    /// Each option's text and voter count; a vote names them by index, from 0.
    pub options: Vec<(String, u32)>,
    pub quiz: bool,
    pub is_anonymous: bool,
    pub allows_multiple_answers: bool,
    /// A quiz's correct options.
    pub correct_option_ids: Vec<u32>,
    /// A vote may be changed or retracted.
    pub allows_revoting: bool,
    pub explanation: String,
    /// Unix seconds after which votes no longer count; 0: none.
    pub close_date: i64,
    pub is_closed: bool,
    pub total_voter_count: u32,
}

impl PollInfo {
    /// A poll a person makes: anonymous, and a quiz when `correct_option_ids` (indexes, from
    /// 0) name its right options. A quiz's vote is final, a poll's may change, as the
    /// reference's clients make them.
    pub fn made(question: &str, options: impl IntoIterator<Item = String>, mut correct_option_ids: Vec<u32>) -> PollInfo {
        correct_option_ids.sort_unstable();
        correct_option_ids.dedup();
        let quiz = !correct_option_ids.is_empty();
        PollInfo {
            question: question.to_string(),
            options: options.into_iter().map(|o| (o, 0)).collect(),
            quiz,
            is_anonymous: true,
            correct_option_ids,
            allows_revoting: !quiz,
            ..Default::default()
        }
    }
}

/// What a location, venue, contact, dice or poll message carries.
#[derive(Clone, Debug, PartialEq)]
pub enum Shared {
    Location(LocationInfo),
    Venue(VenueInfo),
    Contact(ContactCard),
    Dice(DiceInfo),
    Poll(PollInfo),
}

impl Shared {
    /// The item a content carries; `None` for a text, a file or anything else.
    pub(crate) fn from_content(content: &Content) -> Option<Shared> {
        Some(match content.body.as_ref()? {
            Body::Location(l) => Shared::Location(LocationInfo::from_wire(l)),
            Body::Venue(v) => Shared::Venue(VenueInfo {
                location: LocationInfo::from_wire(v.location.get_or_default()),
                title: v.title.clone(),
                address: v.address.clone(),
                foursquare_id: v.foursquare_id.clone(),
                google_place_id: v.google_place_id.clone(),
            }),
            Body::Contact(c) => Shared::Contact(ContactCard {
                phone_number: c.phone_number.clone(),
                first_name: c.first_name.clone(),
                last_name: c.last_name.clone(),
                user_id: c.user_id,
                vcard: c.vcard.clone(),
            }),
            Body::Dice(d) => Shared::Dice(DiceInfo { emoji: d.emoji.clone(), value: d.value }),
            Body::Poll(p) => {
                let quiz = p.type_.enum_value() == Ok(PollType::QUIZ);
                Shared::Poll(PollInfo {
                    question: p.question.clone(),
                    options: p.options.iter().map(|o| (o.text.clone(), o.voter_count)).collect(),
                    quiz,
                    is_anonymous: p.is_anonymous,
                    allows_multiple_answers: p.allows_multiple_answers,
                    correct_option_ids: p.correct_option_ids.clone(),
                    allows_revoting: p.allows_revoting,
                    explanation: p.explanation.clone(),
                    close_date: p.close_date,
                    is_closed: p.is_closed,
                    total_voter_count: p.total_voter_count,
                })
            }
            _ => return None,
        })
    }

    /// The message content that shares this item, optionally as a reply; refused (before
    /// anything is sent) when it breaks a rule of `wire::places`.
    pub fn to_content(&self, reply_to_message_id: Option<u64>) -> Result<Content> {
        let mut content = Content::new();
        match self {
            Shared::Location(l) => content.set_location(l.to_wire()),
            Shared::Venue(v) => content.set_venue(Venue {
                location: MessageField::some(v.location.to_wire()),
                title: v.title.clone(),
                address: v.address.clone(),
                foursquare_id: v.foursquare_id.clone(),
                google_place_id: v.google_place_id.clone(),
                ..Default::default()
            }),
            Shared::Contact(c) => content.set_contact(Contact {
                phone_number: c.phone_number.clone(),
                first_name: c.first_name.clone(),
                last_name: c.last_name.clone(),
                user_id: c.user_id,
                vcard: c.vcard.clone(),
                ..Default::default()
            }),
            Shared::Dice(d) => content.set_dice(Dice { emoji: d.emoji.clone(), value: d.value, ..Default::default() }),
            Shared::Poll(p) => content.set_poll(Poll {
                question: p.question.clone(),
                options: p.options.iter().map(|(text, _)| PollOption { text: text.clone(), ..Default::default() }).collect(),
                type_: if p.quiz { PollType::QUIZ } else { PollType::REGULAR }.into(),
                is_anonymous: p.is_anonymous,
                allows_multiple_answers: p.allows_multiple_answers,
                correct_option_ids: p.correct_option_ids.clone(),
                allows_revoting: p.allows_revoting,
                explanation: p.explanation.clone(),
                close_date: p.close_date,
                ..Default::default()
            }),
        }
        places::check_shared(&content).map_err(ClientError::from)?;
        content.reply_to_message_id = reply_to_message_id.unwrap_or(0);
        Ok(content)
    }

    /// Whether this is a live location still running at `now` (sent at `date`).
    pub fn is_live(&self, date: i64, now: i64) -> bool {
        match self {
            Shared::Location(l) => places::is_live(&l.to_wire(), date, now),
            _ => false,
        }
    }
}

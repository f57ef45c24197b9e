//! Sharing places, people and chance: `sendLocation` (static or live), `sendVenue`,
//! `sendContact` and `sendDice`, and the location fields `editMessageLiveLocation` reads
//! (`editing.rs` moves and stops a live location). Each reads its parameters into the wire
//! shape, checks it by the rules every side shares (`wire::places`), and sends it as a new
//! message through the durable outbox, to a private chat or a group like `sendMessage`.

use protobuf::MessageField;
use serde_json::Value;

use super::messages::{reply_request, reply_target, send_new_to};
use super::target::{chat_id, target_chat};
use crate::crypto;
use crate::gateway::botapi::{markup, ApiError, Params};
use crate::gateway::ctx::Sending;
use crate::wire::e2e::{Contact, Content, Dice, Location, Venue};
use crate::wire::places;

/// The emoji `sendDice` throws when none is given (Bot API default).
const DEFAULT_DICE: &str = "🎲";

/// `sendLocation`: a point, live when `live_period` is given.
pub(super) fn send_location(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let location = location_request(params)?;
    let mut content = Content::new();
    content.set_location(location);
    send_shared(bot, params, content)
}

/// `sendVenue`: a point with a title and an address.
pub(super) fn send_venue(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let venue = venue_request(params)?;
    let mut content = Content::new();
    content.set_venue(venue);
    send_shared(bot, params, content)
}

/// `sendContact`: a contact card as the bot gives it.
pub(super) fn send_contact(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let contact = contact_request(params)?;
    let mut content = Content::new();
    content.set_contact(contact);
    send_shared(bot, params, content)
}

/// `sendDice`: the gateway, being the sender, throws the dice (libsodium's randombytes).
pub(super) fn send_dice(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let emoji = dice_emoji(params)?;
    let max = places::dice_max(&emoji).expect("dice_emoji returns a dice emoji");
    let value = crypto::random_below(u64::from(max)) as u32 + 1;
    let mut content = Content::new();
    content.set_dice(Dice { emoji, value, ..Default::default() });
    send_shared(bot, params, content)
}

/// What every one of these sends shares with `sendMessage`: the chat (private or group), the
/// reply target and the inline keyboard. Parameters are read before the chat is looked up,
/// so a malformed call is 400 whatever the chat.
fn send_shared(bot: &Sending, params: &Params, mut content: Content) -> Result<Value, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    let keyboard = markup::inline_keyboard(params)?;
    let (reply_to, allow_without) = reply_request(params, chat_id)?;
    let target = target_chat(bot, chat_id)?;
    content.reply_to_message_id = reply_target(bot, chat_id, reply_to, allow_without)?;
    content.keyboard = MessageField::from_option(keyboard);
    send_new_to(bot, &target, content)
}

/// A 400 from a rule of `wire::places`.
fn refused(why: crate::wire::Invalid) -> ApiError {
    ApiError::bad_request(why)
}

/// `sendLocation`'s point and live fields.
pub(super) fn location_request(params: &Params) -> Result<Location, ApiError> {
    let mut location = point(params)?;
    location.horizontal_accuracy = params.optional_f64("horizontal_accuracy")?.unwrap_or(0.0);
    location.live_period = live_period(params)?.unwrap_or(0);
    live_fields(params, &mut location)?;
    places::check_location(&location).map_err(refused)?;
    Ok(location)
}

/// `latitude` and `longitude`, both required.
fn point(params: &Params) -> Result<Location, ApiError> {
    Ok(Location {
        latitude: params.required_f64("latitude")?,
        longitude: params.required_f64("longitude")?,
        ..Default::default()
    })
}

/// The point `editMessageLiveLocation` moves a live location to: `latitude`, `longitude`
/// and, as given, `horizontal_accuracy`, `heading` and `proximity_alert_radius` (the Bot API
/// resets what is not given); `live_period` stays unless given.
pub(super) fn moved_location(params: &Params, now: &Location) -> Result<Location, ApiError> {
    let mut moved = point(params)?;
    moved.horizontal_accuracy = params.optional_f64("horizontal_accuracy")?.unwrap_or(0.0);
    moved.live_period = match live_period(params)? {
        // Bot API: a new period may not exceed the current one by more than a day.
        Some(p) if p != places::LIVE_FOREVER && now.live_period != places::LIVE_FOREVER && p > now.live_period + 86_400 => {
            return Err(ApiError::bad_request("live_period may exceed the current live period by at most a day (86400 seconds)"))
        }
        Some(p) => p,
        None => now.live_period,
    };
    live_fields(params, &mut moved)?;
    places::check_location(&moved).map_err(refused)?;
    Ok(moved)
}

/// `live_period`, when given: 60..86400 or 0x7FFFFFFF.
fn live_period(params: &Params) -> Result<Option<u32>, ApiError> {
    let Some(v) = params.optional_i64("live_period")? else { return Ok(None) };
    // A value outside u32 is refused below like any other wrong period.
    let period = u32::try_from(v).unwrap_or(0);
    places::check_live_period(period).map_err(refused)?;
    Ok(Some(period))
}

/// `heading` (1..360) and `proximity_alert_radius` (1..100000) when given; both only for a
/// live location (`check_location` says so).
fn live_fields(params: &Params, location: &mut Location) -> Result<(), ApiError> {
    if let Some(h) = params.optional_i64("heading")? {
        location.heading = u32::try_from(h)
            .ok()
            .filter(|h| (1..=360).contains(h))
            .ok_or_else(|| ApiError::bad_request("heading must be between 1 and 360 degrees"))?;
    }
    if let Some(r) = params.optional_i64("proximity_alert_radius")? {
        location.proximity_alert_radius = u32::try_from(r)
            .ok()
            .filter(|r| (1..=places::MAX_PROXIMITY_RADIUS).contains(r))
            .ok_or_else(|| {
                ApiError::bad_request(format!("proximity_alert_radius must be between 1 and {} meters", places::MAX_PROXIMITY_RADIUS))
            })?;
    }
    Ok(())
}

/// `sendVenue`'s point, title, address and directory fields.
pub(super) fn venue_request(params: &Params) -> Result<Venue, ApiError> {
    let location = point(params)?;
    let text = |name: &str| Ok::<_, ApiError>(params.optional_str(name)?.unwrap_or_default());
    let venue = Venue {
        location: MessageField::some(location),
        title: params.required_str("title")?,
        address: params.required_str("address")?,
        foursquare_id: text("foursquare_id")?,
        foursquare_type: text("foursquare_type")?,
        google_place_id: text("google_place_id")?,
        google_place_type: text("google_place_type")?,
        ..Default::default()
    };
    places::check_venue(&venue).map_err(refused)?;
    Ok(venue)
}

/// `sendContact`'s card. `phone_number` must be given but may be empty: a card of a platform
/// user has none, and a bot that sends back a card it received sends it as it came.
pub(super) fn contact_request(params: &Params) -> Result<Contact, ApiError> {
    let contact = Contact {
        phone_number: params.required_str("phone_number")?,
        first_name: params.required_str("first_name")?,
        last_name: params.optional_str("last_name")?.unwrap_or_default(),
        vcard: params.optional_str("vcard")?.unwrap_or_default(),
        ..Default::default()
    };
    places::check_contact(&contact).map_err(refused)?;
    Ok(contact)
}

/// `sendDice`'s `emoji`: one of the six, 🎲 when absent or empty.
pub(super) fn dice_emoji(params: &Params) -> Result<String, ApiError> {
    let emoji = params.optional_str("emoji")?.filter(|e| !e.is_empty()).unwrap_or_else(|| DEFAULT_DICE.to_string());
    if places::dice_max(&emoji).is_none() {
        return Err(ApiError::bad_request(format!("emoji must be one of {}", places::dice_names())));
    }
    Ok(emoji)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, form, p};
    use super::*;

    #[test]
    fn locations_read_from_json_and_forms() {
        let l = location_request(&form(&[("chat_id", "1"), ("latitude", "52.52"), ("longitude", "13.405")])).expect("form");
        assert_eq!((l.latitude, l.longitude, l.live_period), (52.52, 13.405, 0));
        let l = location_request(&p(json!({
            "latitude": -33.9, "longitude": 151.2, "live_period": 600, "heading": 45,
            "proximity_alert_radius": 200, "horizontal_accuracy": 12.5
        })))
        .expect("live");
        assert_eq!((l.live_period, l.heading, l.proximity_alert_radius, l.horizontal_accuracy), (600, 45, 200, 12.5));
        let forever = location_request(&p(json!({"latitude": 0, "longitude": 0, "live_period": 0x7FFF_FFFF}))).expect("until stopped");
        assert_eq!(forever.live_period, places::LIVE_FOREVER);
    }

    #[test]
    fn location_ranges_are_clear_400s() {
        let with = |v: Value| bad(location_request(&p(v)));
        assert_eq!(with(json!({"longitude": 1})), "Bad Request: latitude is required");
        assert_eq!(with(json!({"latitude": 1})), "Bad Request: longitude is required");
        assert_eq!(with(json!({"latitude": "north", "longitude": 1})), "Bad Request: latitude must be a number");
        assert_eq!(with(json!({"latitude": 90.1, "longitude": 1})), "Bad Request: latitude must be a number between -90 and 90");
        assert_eq!(
            with(json!({"latitude": 1, "longitude": -180.5})),
            "Bad Request: longitude must be a number between -180 and 180"
        );
        for period in [59, 86_401, -1, 0x8000_0000_i64] {
            assert!(
                with(json!({"latitude": 1, "longitude": 1, "live_period": period})).contains("live_period must be between 60 and 86400"),
                "{period}"
            );
        }
        assert!(with(json!({"latitude": 1, "longitude": 1, "horizontal_accuracy": 1501})).contains("horizontal_accuracy"));
        assert!(with(json!({"latitude": 1, "longitude": 1, "live_period": 60, "heading": 0})).contains("heading must be between 1 and 360"));
        assert!(with(json!({"latitude": 1, "longitude": 1, "live_period": 60, "heading": 361})).contains("heading"));
        assert!(with(json!({"latitude": 1, "longitude": 1, "live_period": 60, "proximity_alert_radius": 100_001}))
            .contains("proximity_alert_radius must be between 1 and 100000"));
        assert!(with(json!({"latitude": 1, "longitude": 1, "heading": 10})).contains("live locations only"));
    }

    #[test]
    fn a_moved_live_location_keeps_its_period_unless_given() {
        let now = Location { latitude: 1.0, longitude: 1.0, live_period: 600, heading: 10, ..Default::default() };
        let moved = moved_location(&p(json!({"latitude": 2, "longitude": 3})), &now).expect("moved");
        assert_eq!((moved.latitude, moved.longitude, moved.live_period, moved.heading), (2.0, 3.0, 600, 0));
        let longer = moved_location(&p(json!({"latitude": 2, "longitude": 3, "live_period": 3600})), &now).expect("longer");
        assert_eq!(longer.live_period, 3600);
        let e = bad(moved_location(&p(json!({"latitude": 2, "longitude": 3, "live_period": 87_001})), &now));
        assert!(e.contains("live_period"), "{e}");
        assert!(bad(moved_location(&p(json!({"latitude": 200, "longitude": 3})), &now)).contains("latitude"));
    }

    #[test]
    fn venues_and_contacts() {
        let v = venue_request(&p(json!({
            "latitude": 48.85, "longitude": 2.29, "title": "Tower", "address": "Champ de Mars", "foursquare_id": "4b"
        })))
        .expect("venue");
        assert_eq!((v.title.as_str(), v.foursquare_id.as_str(), v.location.latitude), ("Tower", "4b", 48.85));
        assert_eq!(bad(venue_request(&p(json!({"latitude": 1, "longitude": 1, "address": "A"})))), "Bad Request: title is required");
        assert_eq!(
            bad(venue_request(&p(json!({"latitude": 1, "longitude": 1, "title": "T", "address": " "})))),
            "Bad Request: address is required"
        );

        let c = contact_request(&form(&[("phone_number", "+15550100"), ("first_name", "Ann"), ("last_name", "Lee")])).expect("card");
        assert_eq!((c.phone_number.as_str(), c.first_name.as_str(), c.last_name.as_str(), c.user_id), ("+15550100", "Ann", "Lee", 0));
        contact_request(&p(json!({"phone_number": "", "first_name": "Ann"}))).expect("a card without a number, as received");
        assert_eq!(bad(contact_request(&p(json!({"first_name": "Ann"})))), "Bad Request: phone_number is required");
        assert_eq!(bad(contact_request(&p(json!({"phone_number": "1", "first_name": ""})))), "Bad Request: first_name is required");
        assert!(bad(contact_request(&p(json!({"phone_number": "1", "first_name": "A", "vcard": "v".repeat(2049)})))).contains("vcard"));
    }

    #[test]
    fn dice_emoji_default_and_refusal() {
        assert_eq!(dice_emoji(&p(json!({}))).expect("default"), "🎲");
        assert_eq!(dice_emoji(&p(json!({"emoji": "🎰"}))).expect("slot machine"), "🎰");
        assert_eq!(dice_emoji(&form(&[("emoji", "⚽")])).expect("football"), "⚽");
        let e = bad(dice_emoji(&p(json!({"emoji": "🃏"}))));
        assert_eq!(e, "Bad Request: emoji must be one of 🎲, 🎯, 🏀, ⚽, 🎳, 🎰");
        // Every throw is in range: the value comes from libsodium, the range from the emoji.
        crate::crypto::init();
        for (emoji, max) in places::DICE {
            for _ in 0..50 {
                let v = crate::crypto::random_below(u64::from(*max)) as u32 + 1;
                places::check_dice(&Dice { emoji: emoji.to_string(), value: v, ..Default::default() }).expect("in range");
            }
        }
    }
}

//! The rules of the shared-item contents — locations (static and live), venues, contact cards
//! and dice — in one place for the gateway (what a bot may send, what a user's message may
//! carry) and the client (what `e2e-chat` sends, what it shows). Each check names the field
//! the way the Bot API parameter is named, so a refusal reads the same on both sides.

use super::invalid::Invalid;
use super::e2e::content::Body;
use super::e2e::{Contact, Content, Dice, Location, Venue};

/// The live period that means "until stopped" (Bot API: 0x7FFFFFFF).
pub const LIVE_FOREVER: u32 = 0x7FFF_FFFF;
/// Shortest and longest finite live period, in seconds.
pub const LIVE_PERIOD_MIN: u32 = 60;
pub const LIVE_PERIOD_MAX: u32 = 86_400;
/// Largest `horizontal_accuracy`, in meters.
pub const MAX_ACCURACY: f64 = 1500.0;
/// Largest `proximity_alert_radius`, in meters.
pub const MAX_PROXIMITY_RADIUS: u32 = 100_000;
/// Longest venue title, address and directory fields, in characters.
pub const MAX_PLACE_TEXT: usize = 256;
/// Longest contact name (a platform display name is at most 128 characters) and phone number.
pub const MAX_CONTACT_NAME: usize = 128;
pub const MAX_PHONE_NUMBER: usize = 64;
/// Longest vCard, in bytes (Bot API: 0-2048 bytes).
pub const MAX_VCARD_BYTES: usize = 2048;

/// The dice emoji and the largest value of each (values start at 1).
pub const DICE: &[(&str, u32)] = &[("🎲", 6), ("🎯", 6), ("🏀", 5), ("⚽", 5), ("🎳", 6), ("🎰", 64)];

/// The largest value of a dice emoji; `None` for an emoji that is no dice. The Bot API also
/// takes ⚽ with its variation selector (⚽️), as the SDKs' constants may spell it.
pub fn dice_max(emoji: &str) -> Option<u32> {
    let emoji = emoji.strip_suffix('\u{FE0F}').unwrap_or(emoji);
    DICE.iter().find(|(e, _)| *e == emoji).map(|(_, max)| *max)
}

/// The dice emoji as one line for errors and help: "🎲, 🎯, 🏀, ⚽, 🎳, 🎰".
pub fn dice_names() -> String {
    DICE.iter().map(|(e, _)| *e).collect::<Vec<_>>().join(", ")
}

impl Content {
    /// Whether this content is a message that takes a place in its dialog's history (a text,
    /// a file, a location, venue, contact, dice or poll), rather than something done to one.
    pub fn is_message(&self) -> bool {
        matches!(
            self.body,
            Some(
                Body::Text(_)
                    | Body::Media(_)
                    | Body::Location(_)
                    | Body::Venue(_)
                    | Body::Contact(_)
                    | Body::Dice(_)
                    | Body::Poll(_)
            )
        )
    }

    /// Whether this content is a location, venue, contact or dice (checked by [`check_shared`]).
    pub fn is_shared_item(&self) -> bool {
        matches!(self.body, Some(Body::Location(_) | Body::Venue(_) | Body::Contact(_) | Body::Dice(_)))
    }
}

/// Checks the location, venue, contact, dice or poll a content carries (any other content
/// passes).
pub fn check_shared(content: &Content) -> Result<(), Invalid> {
    match &content.body {
        Some(Body::Poll(p)) => super::polls::check_poll(p),
        Some(Body::Location(l)) => check_location(l),
        Some(Body::Venue(v)) => check_venue(v),
        Some(Body::Contact(c)) => check_contact(c),
        Some(Body::Dice(d)) => check_dice(d),
        _ => Ok(()),
    }
}

/// A point on the map, and for a live one its period, heading and alert radius.
pub fn check_location(l: &Location) -> Result<(), Invalid> {
    check_degrees("latitude", l.latitude, 90.0)?;
    check_degrees("longitude", l.longitude, 180.0)?;
    if !l.horizontal_accuracy.is_finite() || !(0.0..=MAX_ACCURACY).contains(&l.horizontal_accuracy) {
        return Err(Invalid::new(format!("horizontal_accuracy must be between 0 and {MAX_ACCURACY} meters")));
    }
    if l.live_period != 0 {
        check_live_period(l.live_period)?;
    } else if l.heading != 0 || l.proximity_alert_radius != 0 || l.live_stopped {
        return Err(Invalid::new("heading and proximity_alert_radius apply to live locations only (give live_period)"));
    }
    if l.heading > 360 {
        return Err(Invalid::new("heading must be between 1 and 360 degrees"));
    }
    if l.proximity_alert_radius > MAX_PROXIMITY_RADIUS {
        return Err(Invalid::new(format!("proximity_alert_radius must be between 1 and {MAX_PROXIMITY_RADIUS} meters")));
    }
    Ok(())
}

/// 60..86400 seconds, or 0x7FFFFFFF for "until stopped".
pub fn check_live_period(period: u32) -> Result<(), Invalid> {
    if period == LIVE_FOREVER || (LIVE_PERIOD_MIN..=LIVE_PERIOD_MAX).contains(&period) {
        return Ok(());
    }
    Err(Invalid::new(format!(
        "live_period must be between {LIVE_PERIOD_MIN} and {LIVE_PERIOD_MAX} seconds, or {LIVE_FOREVER} (0x7FFFFFFF) for a live location that runs until stopped"
    )))
}

fn check_degrees(name: &str, v: f64, bound: f64) -> Result<(), Invalid> {
    if v.is_finite() && (-bound..=bound).contains(&v) {
        Ok(())
    } else {
        Err(Invalid::new(format!("{name} must be a number between -{bound} and {bound}")))
    }
}

/// A static point with a non-empty title and address.
pub fn check_venue(v: &Venue) -> Result<(), Invalid> {
    let location = v.location.as_ref().ok_or_else(|| Invalid::new("a venue needs its latitude and longitude"))?;
    check_location(location)?;
    if location.live_period != 0 {
        return Err(Invalid::new("a venue can't be a live location"));
    }
    check_text("title", &v.title, MAX_PLACE_TEXT, true)?;
    check_text("address", &v.address, MAX_PLACE_TEXT, true)?;
    for (name, value) in [
        ("foursquare_id", &v.foursquare_id),
        ("foursquare_type", &v.foursquare_type),
        ("google_place_id", &v.google_place_id),
        ("google_place_type", &v.google_place_type),
    ] {
        check_text(name, value, MAX_PLACE_TEXT, false)?;
    }
    Ok(())
}

/// A card with a first name; the phone number may be empty (a platform user has none).
pub fn check_contact(c: &Contact) -> Result<(), Invalid> {
    check_text("first_name", &c.first_name, MAX_CONTACT_NAME, true)?;
    check_text("last_name", &c.last_name, MAX_CONTACT_NAME, false)?;
    check_text("phone_number", &c.phone_number, MAX_PHONE_NUMBER, false)?;
    if c.vcard.len() > MAX_VCARD_BYTES {
        return Err(Invalid::new(format!("vcard must be at most {MAX_VCARD_BYTES} bytes")));
    }
    Ok(())
}

/// A dice emoji with a value in its range.
pub fn check_dice(d: &Dice) -> Result<(), Invalid> {
    let max = dice_max(&d.emoji).ok_or_else(|| Invalid::new(format!("emoji must be one of {}", dice_names())))?;
    if !(1..=max).contains(&d.value) {
        return Err(Invalid::new(format!("the value of {} must be between 1 and {max}", d.emoji)));
    }
    Ok(())
}

fn check_text(name: &str, value: &str, max_chars: usize, required: bool) -> Result<(), Invalid> {
    if required && value.trim().is_empty() {
        return Err(Invalid::new(format!("{name} is required")));
    }
    if value.chars().count() > max_chars {
        return Err(Invalid::new(format!("{name} must be at most {max_chars} characters")));
    }
    Ok(())
}

/// Whether a location sent at `date` is still live at `now`: a live period that has not run
/// out, and not stopped.
pub fn is_live(l: &Location, date: i64, now: i64) -> bool {
    if l.live_period == 0 || l.live_stopped {
        return false;
    }
    l.live_period == LIVE_FOREVER || now < date + i64::from(l.live_period)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(lat: f64, lon: f64) -> Location {
        Location { latitude: lat, longitude: lon, ..Default::default() }
    }

    #[test]
    fn locations_are_checked_field_by_field() {
        check_location(&point(-90.0, 180.0)).expect("the corners");
        assert!(check_location(&point(90.5, 0.0)).expect_err("lat").starts_with("latitude must be"));
        assert!(check_location(&point(0.0, -180.01)).expect_err("lon").starts_with("longitude must be"));
        assert!(check_location(&point(f64::NAN, 0.0)).is_err(), "NaN is no latitude");
        assert!(check_location(&point(0.0, f64::INFINITY)).is_err());
        let mut l = point(1.0, 2.0);
        l.horizontal_accuracy = 1500.5;
        assert!(check_location(&l).expect_err("accuracy").starts_with("horizontal_accuracy"));
        l.horizontal_accuracy = 10.0;
        l.heading = 90;
        assert!(check_location(&l).expect_err("static").contains("live locations only"));
        l.live_period = 59;
        assert!(check_location(&l).expect_err("short").starts_with("live_period must be between 60 and 86400"));
        for ok in [60, 86_400, LIVE_FOREVER] {
            l.live_period = ok;
            check_location(&l).expect("a live period");
        }
        l.live_period = 86_401;
        assert!(check_location(&l).is_err());
        l.live_period = 600;
        l.heading = 361;
        assert!(check_location(&l).expect_err("heading").starts_with("heading"));
        l.heading = 360;
        l.proximity_alert_radius = 100_001;
        assert!(check_location(&l).expect_err("radius").starts_with("proximity_alert_radius"));
    }

    #[test]
    fn venues_contacts_and_dice() {
        let mut v = Venue { title: "Cafe".into(), address: "Main St 1".into(), ..Default::default() };
        assert!(check_venue(&v).is_err(), "no point");
        v.location = protobuf::MessageField::some(point(1.0, 2.0));
        check_venue(&v).expect("venue");
        v.title = " ".into();
        assert_eq!(check_venue(&v).expect_err("title"), "title is required");
        v.title = "Cafe".into();
        v.location.as_mut().expect("point").live_period = 60;
        assert!(check_venue(&v).expect_err("live").contains("live"));

        let mut c = Contact { first_name: "Ann".into(), ..Default::default() };
        check_contact(&c).expect("no phone number is fine");
        c.first_name.clear();
        assert_eq!(check_contact(&c).expect_err("name"), "first_name is required");
        c.first_name = "Ann".into();
        c.vcard = "x".repeat(2049);
        assert!(check_contact(&c).is_err());

        for (emoji, max) in DICE {
            check_dice(&Dice { emoji: emoji.to_string(), value: *max, ..Default::default() }).expect("top value");
            assert!(check_dice(&Dice { emoji: emoji.to_string(), value: max + 1, ..Default::default() }).is_err());
            assert!(check_dice(&Dice { emoji: emoji.to_string(), value: 0, ..Default::default() }).is_err());
        }
        assert_eq!(dice_max("⚽\u{FE0F}"), Some(5));
        assert!(check_dice(&Dice { emoji: "🃏".into(), value: 1, ..Default::default() }).expect_err("emoji").contains("🎰"));
    }

    #[test]
    fn liveness_runs_out_or_stops() {
        let mut l = point(1.0, 2.0);
        assert!(!is_live(&l, 100, 100), "static");
        l.live_period = 60;
        assert!(is_live(&l, 100, 159) && !is_live(&l, 100, 160));
        l.live_period = LIVE_FOREVER;
        assert!(is_live(&l, 100, i64::from(u32::MAX)));
        l.live_stopped = true;
        assert!(!is_live(&l, 100, 101));
    }

    #[test]
    fn message_kinds_take_a_place_in_the_history() {
        let mut c = Content::new();
        assert!(!c.is_message());
        c.set_dice(Dice::new());
        assert!(c.is_message() && c.is_shared_item());
        c.set_edit(Default::default());
        assert!(!c.is_message() && !c.is_shared_item());
    }
}

//! `e2e-chat send-location` and `send-contact`, and how `listen` shows a location, venue,
//! contact or dice (`shared_field`). Both commands go through `Profile::send_shared`, the one
//! way the client shares such an item.

use serde_json::{json, Value};

use super::cli_common::{message_id_arg, open_profile, ordered, print_line, usage, Global, REPLY_TO};
use super::places::{LocationInfo, Shared};
use crate::cli::{Args, Opt};

/// The options of `send-location`.
pub(super) const LOCATION_OPTIONS: &[Opt] =
    &[REPLY_TO, Opt::value("--live"), Opt::value("--accuracy"), Opt::value("--heading")];

pub(super) fn send_location(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, location) = location_args(a)?;
    let reply_to = reply_to_arg("send-location", a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_shared(peer, &Shared::Location(location), reply_to)?;
    print_sent(sent.chat_id, sent.message_id, sent.date)
}

/// `vote @BOT MESSAGE_ID [OPTION...]`: OPTION is an option's number as shown, from 1; none
/// retracts the vote.
pub(super) fn vote(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, message_id, options) = vote_args(a)?;
    let profile = open_profile(global)?;
    let sent = profile.vote(peer, message_id, &options)?;
    print_line(&ordered(&[("chat_id", json!(sent.chat_id)), ("message_id", json!(sent.message_id))]))
}

/// The vote's peer, poll message and option indexes (from 0).
fn vote_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, u64, Vec<u32>)> {
    let [peer, message_id, options @ ..] = &a.words[..] else {
        return Err(usage("vote: expected @BOT MESSAGE_ID [OPTION...] (options by their number, from 1; none retracts)".into()));
    };
    let message_id = message_id_arg("vote: MESSAGE_ID", message_id)?;
    let options = options
        .iter()
        .map(|o| match o.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n - 1),
            _ => Err(usage(format!("vote: OPTION {o:?} is not an option's number (1, 2, ...)"))),
        })
        .collect::<anyhow::Result<Vec<u32>>>()?;
    Ok((peer, message_id, options))
}

pub(super) fn send_contact(global: &Global, a: &Args) -> anyhow::Result<()> {
    let peer = match a.words[..] {
        [peer] => peer,
        [] => return Err(usage("send-contact: @PEER missing".into())),
        [_, extra, ..] => return Err(usage(format!("send-contact: unexpected argument {extra:?} (your own card is sent)"))),
    };
    let reply_to = reply_to_arg("send-contact", a)?;
    let profile = open_profile(global)?;
    let card = profile.own_contact_card();
    let sent = profile.send_shared(peer, &Shared::Contact(card), reply_to)?;
    print_sent(sent.chat_id, sent.message_id, sent.date)
}

fn print_sent(chat_id: u64, message_id: u64, date: i64) -> anyhow::Result<()> {
    print_line(&ordered(&[("chat_id", json!(chat_id)), ("message_id", json!(message_id)), ("date", json!(date))]))
}

fn reply_to_arg(command: &str, a: &Args) -> anyhow::Result<Option<u64>> {
    a.value("--reply-to").map(|v| message_id_arg(&format!("{command}: --reply-to"), v)).transpose()
}

/// `send-location @PEER LATITUDE LONGITUDE [--live SECONDS] [--accuracy METERS] [--heading
/// DEGREES]`; the ranges are checked by `wire::places` when the item is sent.
fn location_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, LocationInfo)> {
    let [peer, latitude, longitude] = a.words[..] else {
        return Err(usage(
            "send-location: expected @PEER LATITUDE LONGITUDE (decimal degrees; a negative one goes after --: \
             send-location @bot -- -33.87 151.21)"
                .into(),
        ));
    };
    let number = |what: &str, v: &str| -> anyhow::Result<f64> {
        v.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| usage(format!("send-location: {what} {v:?} is not a number")))
    };
    let whole = |what: &str| -> anyhow::Result<u32> {
        match a.value(what) {
            None => Ok(0),
            Some(v) => v.parse::<u32>().map_err(|_| usage(format!("send-location: {what} {v:?} is not a whole number"))),
        }
    };
    let location = LocationInfo {
        latitude: number("LATITUDE", latitude)?,
        longitude: number("LONGITUDE", longitude)?,
        horizontal_accuracy: a.value("--accuracy").map(|v| number("--accuracy", v)).transpose()?.unwrap_or(0.0),
        live_period: whole("--live")?,
        heading: whole("--heading")?,
        ..Default::default()
    };
    Ok((peer, location))
}

/// The `listen` field of a location, venue, contact or dice message, named as in the Bot API:
/// `location` {latitude, longitude, + horizontal_accuracy, live_period, heading,
/// proximity_alert_radius, live_stopped when set}, `venue` {location, title, address, + ids},
/// `contact` {phone_number, first_name, + last_name, user_id, vcard}, `dice` {emoji, value}.
pub(super) fn shared_field(s: &Shared) -> (&'static str, String) {
    match s {
        Shared::Location(l) => ("location", location_json(l)),
        Shared::Venue(v) => {
            let mut fields = vec![
                ("location", location_json(&v.location)),
                ("title", json!(v.title).to_string()),
                ("address", json!(v.address).to_string()),
            ];
            push_set(&mut fields, "foursquare_id", &v.foursquare_id);
            push_set(&mut fields, "google_place_id", &v.google_place_id);
            ("venue", raw(&fields))
        }
        Shared::Contact(c) => {
            let mut fields =
                vec![("phone_number", json!(c.phone_number).to_string()), ("first_name", json!(c.first_name).to_string())];
            push_set(&mut fields, "last_name", &c.last_name);
            if c.user_id != 0 {
                fields.push(("user_id", json!(c.user_id).to_string()));
            }
            push_set(&mut fields, "vcard", &c.vcard);
            ("contact", raw(&fields))
        }
        Shared::Dice(d) => ("dice", ordered(&[("emoji", json!(d.emoji)), ("value", json!(d.value))])),
        Shared::Poll(p) => {
            let options: Vec<Value> = p.options.iter().map(|(text, n)| json!({"text": text, "voter_count": n})).collect();
            let mut fields = vec![
                ("question", json!(p.question).to_string()),
                ("options", Value::Array(options).to_string()),
                ("type", json!(if p.quiz { "quiz" } else { "regular" }).to_string()),
                ("is_anonymous", json!(p.is_anonymous).to_string()),
                ("allows_multiple_answers", json!(p.allows_multiple_answers).to_string()),
                ("is_closed", json!(p.is_closed).to_string()),
                ("total_voter_count", json!(p.total_voter_count).to_string()),
            ];
            fields.push(("allows_revoting", json!(p.allows_revoting).to_string()));
            if p.quiz {
                fields.push(("correct_option_ids", json!(p.correct_option_ids).to_string()));
            }
            push_set(&mut fields, "explanation", &p.explanation);
            if p.close_date != 0 {
                fields.push(("close_date", json!(p.close_date).to_string()));
            }
            ("poll", raw(&fields))
        }
    }
}

fn location_json(l: &LocationInfo) -> String {
    let mut fields: Vec<(&str, Value)> = vec![("latitude", json!(l.latitude)), ("longitude", json!(l.longitude))];
    if l.horizontal_accuracy > 0.0 {
        fields.push(("horizontal_accuracy", json!(l.horizontal_accuracy)));
    }
    for (name, v) in [("live_period", l.live_period), ("heading", l.heading), ("proximity_alert_radius", l.proximity_alert_radius)] {
        if v != 0 {
            fields.push((name, json!(v)));
        }
    }
    if l.live_stopped {
        fields.push(("live_stopped", json!(true)));
    }
    ordered(&fields)
}

fn push_set(fields: &mut Vec<(&'static str, String)>, name: &'static str, value: &str) {
    if !value.is_empty() {
        fields.push((name, json!(value).to_string()));
    }
}

/// A JSON object of fields whose values are JSON text already, in order.
fn raw(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{v}", Value::from(*k))).collect();
    format!("{{{}}}", body.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::places::{ContactCard, DiceInfo, VenueInfo};

    fn parse(words: &[&str]) -> anyhow::Result<(String, LocationInfo)> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let a = super::super::cli::parse_command("send-location", None, &args)?;
        location_args(&a).map(|(p, l)| (p.to_string(), l))
    }

    #[test]
    fn location_arguments() {
        let (peer, l) = parse(&["@bot", "52.52", "13.405", "--live", "600", "--heading", "90", "--accuracy", "5"]).expect("live");
        assert_eq!(peer, "@bot");
        assert_eq!((l.latitude, l.longitude, l.live_period, l.heading, l.horizontal_accuracy), (52.52, 13.405, 600, 90, 5.0));
        let (_, l) = parse(&["@bot", "--", "-33.87", "-151.21"]).expect("negatives after --");
        assert_eq!((l.latitude, l.longitude, l.live_period), (-33.87, -151.21, 0));
        let e = parse(&["@bot", "-33.87", "151.21"]).expect_err("a negative before --");
        assert!(e.to_string().contains("goes after --"), "{e}");
        assert!(parse(&["@bot", "north", "1"]).expect_err("word").to_string().contains("LATITUDE \"north\" is not a number"));
        assert!(parse(&["@bot", "NaN", "1"]).is_err());
        assert!(parse(&["@bot", "1"]).expect_err("one").to_string().contains("expected @PEER LATITUDE LONGITUDE"));
        assert!(parse(&["@bot", "1", "2", "--live", "-5"]).is_err());
    }

    #[test]
    fn vote_arguments_number_options_from_one() {
        let parse = |words: &[&str]| {
            let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let a = super::super::cli::parse_command("vote", None, &args).expect("parse");
            vote_args(&a).map(|(p, m, o)| (p.to_string(), m, o))
        };
        assert_eq!(parse(&["@bot", "5", "1", "3"]).expect("two"), ("@bot".to_string(), 5, vec![0, 2]));
        assert_eq!(parse(&["@bot", "5"]).expect("retract").2, Vec::<u32>::new());
        assert!(parse(&["@bot", "5", "0"]).expect_err("zero").to_string().contains("OPTION \"0\""));
        assert!(parse(&["@bot"]).is_err());
    }

    #[test]
    fn listen_fields_follow_the_bot_api_names() {
        let (name, v) = shared_field(&Shared::Location(LocationInfo { live_period: 60, ..LocationInfo::point(1.5, 2.0) }));
        assert_eq!((name, v.as_str()), ("location", r#"{"latitude":1.5,"longitude":2.0,"live_period":60}"#));
        let (name, v) = shared_field(&Shared::Venue(VenueInfo {
            location: LocationInfo::point(1.0, 2.0),
            title: "Cafe".into(),
            address: "Main St".into(),
            ..Default::default()
        }));
        assert_eq!(name, "venue");
        let v: Value = serde_json::from_str(&v).expect("json");
        assert_eq!(v, json!({"location": {"latitude": 1.0, "longitude": 2.0}, "title": "Cafe", "address": "Main St"}));
        let (name, v) = shared_field(&Shared::Contact(ContactCard { first_name: "Ann".into(), user_id: 3, ..Default::default() }));
        assert_eq!((name, v.as_str()), ("contact", r#"{"phone_number":"","first_name":"Ann","user_id":3}"#));
        let (name, v) = shared_field(&Shared::Dice(DiceInfo { emoji: "🎲".into(), value: 4 }));
        assert_eq!((name, v.as_str()), ("dice", r#"{"emoji":"🎲","value":4}"#));
    }
}

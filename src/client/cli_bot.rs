//! The e2e-chat commands that answer a bot the way its interface asks: `reply-button` (a
//! button of the bot's reply keyboard) and `start` (a bot link, or `/start PAYLOAD`).
//! Arguments are checked before the profile is opened, as for the other commands.

use serde_json::json;

use super::cli::json::sent_fields;
use super::cli_common::{open_profile, ordered, print_line, usage, Global};
use super::cli_places::{poll_args, poll_options_and};
use super::deep_link;
use super::places::{LocationInfo, Shared};
use crate::cli::{Args, CliError, Opt};

/// `reply-button`'s options: the location a location button sends, and those of the poll a
/// poll button sends.
pub(super) const REPLY_BUTTON_OPTIONS: [Opt; 5] = poll_options_and(Opt::value("--location"));

/// `reply-button @BOT N [--location LAT,LON | QUESTION OPTION OPTION... [poll options]]`: uses
/// button N of the bot's reply keyboard; a location button sends the location given, a poll
/// button the poll written after N.
pub(super) fn reply_button(global: &Global, a: &Args) -> Result<(), CliError> {
    let [peer, number, poll @ ..] = &a.words[..] else {
        return Err(usage("reply-button: expected @BOT BUTTON_NUMBER".into()));
    };
    let number = number
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| usage(format!("reply-button: {number:?} is not a button number (1, 2, ... as listen shows them)")))?;
    let location = a.value("--location").map(|v| location_arg("reply-button: --location", v)).transpose()?;
    let give = match (location, poll.is_empty()) {
        (Some(_), false) => return Err(usage("reply-button: a location or a poll, not both".into())),
        (Some((latitude, longitude)), true) => Some(Shared::Location(LocationInfo::point(latitude, longitude))),
        (None, false) => Some(Shared::Poll(poll_args("reply-button", poll, a)?)),
        (None, true) => None,
    };
    let profile = open_profile(global)?;
    let bot = profile.lookup(peer)?;
    let chosen = profile.choose_reply_button(bot.user_id, &format!("@{}", bot.username), number, give)?;
    let sent = profile.send_content(&bot, &chosen.content)?;
    profile.reply_keyboard_used(bot.user_id, chosen.keyboard_message_id)?;
    let mut fields = sent_fields(&sent);
    fields.extend([("button", json!(chosen.button.text)), ("sent", json!(chosen.button.request.name()))]);
    print_line(&ordered(&fields))
}

/// `start @BOT [PAYLOAD]` or `start LINK`: sends `/start` (with the payload) to the bot.
pub(super) fn start(global: &Global, a: &Args) -> Result<(), CliError> {
    let link = match a.words[..] {
        [link] => deep_link::parse(link),
        [bot, payload] => deep_link::with_payload(bot, payload),
        _ => return Err(usage("start: expected @BOT [PAYLOAD] or a bot link (https://t.me/BOT?start=PAYLOAD)".into())),
    }
    .map_err(|e| usage(format!("start: {e}")))?;
    let profile = open_profile(global)?;
    let sent = profile.send_text(&link.bot, &link.start_text())?;
    let mut fields = sent_fields(&sent);
    fields.push(("text", json!(link.start_text())));
    print_line(&ordered(&fields))
}

/// `LATITUDE,LONGITUDE` in degrees (-90..90, -180..180).
pub(super) fn location_arg(what: &str, v: &str) -> Result<(f64, f64), CliError> {
    let parsed = v.split_once(',').and_then(|(lat, lon)| Some((lat.trim().parse::<f64>().ok()?, lon.trim().parse::<f64>().ok()?)));
    match parsed {
        Some((lat, lon)) if (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon) => Ok((lat, lon)),
        _ => Err(usage(format!(
            "{what}: {v:?} is not LATITUDE,LONGITUDE in degrees (-90 to 90, -180 to 180), e.g. 52.52,13.40"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_two_numbers_in_range() {
        assert_eq!(location_arg("x", "52.52,13.405").expect("ok"), (52.52, 13.405));
        assert_eq!(location_arg("x", " -90 , 180 ").expect("ok"), (-90.0, 180.0));
        for bad in ["52.52", "91,0", "0,-181", "a,b", "", "1,2,3", "NaN,0"] {
            let e = location_arg("reply-button: --location", bad).expect_err(bad).to_string();
            assert!(e.contains("LATITUDE,LONGITUDE"), "{bad}: {e}");
        }
    }
}

//! `e2e-chat send-location`, `send-contact`, `send-poll` and `vote`. The sending commands go
//! through `Profile::send_shared`, the one way the client shares such an item; how `listen`
//! shows one is in `cli/json.rs`. `poll_args` also reads the poll of `group send-poll` and of
//! `reply-button` for a poll button.

use serde_json::json;

use super::cli::json::sent_json;
use super::cli_common::{message_id_arg, open_profile, ordered, print_line, usage, Global, REPLY_TO};
use super::places::{LocationInfo, PollInfo, Shared};
use crate::cli::{Args, CliError, Opt};

/// The options of `send-location`.
pub(super) const LOCATION_OPTIONS: &[Opt] =
    &[REPLY_TO, Opt::value("--live"), Opt::value("--accuracy"), Opt::value("--heading")];

pub(super) fn send_location(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, location) = location_args(a)?;
    let reply_to = reply_to_arg("send-location", a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_shared(peer, &Shared::Location(location), reply_to)?;
    print_line(&sent_json(&sent))
}

/// What makes a poll a quiz, lets several answers, shows who voted, and explains a quiz.
pub(super) const POLL_OPTIONS: [Opt; 4] =
    [Opt::value("--quiz"), Opt::switch("--multiple"), Opt::switch("--not-anonymous"), Opt::value("--explanation")];
/// The poll's options and `extra`.
pub(super) const fn poll_options_and(extra: Opt) -> [Opt; 5] {
    let [a, b, c, d] = POLL_OPTIONS;
    [a, b, c, d, extra]
}
/// The options of `send-poll`: the poll's, and a reply.
pub(super) const SEND_POLL_OPTIONS: [Opt; 5] = poll_options_and(REPLY_TO);
/// How a poll is written on the command line.
pub(super) const POLL_WORDS: &str =
    "QUESTION OPTION OPTION... [--quiz N[,N...]] [--multiple] [--not-anonymous] [--explanation TEXT]";

/// `send-poll @PEER QUESTION OPTION OPTION... [poll options] [--reply-to MESSAGE_ID]`.
pub(super) fn send_poll(global: &Global, a: &Args) -> Result<(), CliError> {
    let Some((peer, words)) = a.words.split_first() else {
        return Err(usage(format!("send-poll: expected @PEER {POLL_WORDS}")));
    };
    let poll = poll_args("send-poll", words, a)?;
    let reply_to = reply_to_arg("send-poll", a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_shared(peer, &Shared::Poll(poll), reply_to)?;
    print_line(&sent_json(&sent))
}

/// A poll the person makes from `words` (`QUESTION OPTION OPTION...`) and the poll options:
/// anonymous unless `--not-anonymous`; `--quiz N` (numbers from 1, several with
/// `--multiple`) makes a quiz with those correct options (`PollInfo::made`). The limits are
/// checked by `wire::polls` when it is sent.
pub(super) fn poll_args(command: &str, words: &[&str], a: &Args) -> Result<PollInfo, CliError> {
    let [question, options @ ..] = words else {
        return Err(usage(format!("{command}: expected {POLL_WORDS}")));
    };
    if options.len() < 2 {
        return Err(usage(format!("{command}: a poll needs a question and at least 2 options ({POLL_WORDS})")));
    }
    let correct = match a.value("--quiz") {
        None => Vec::new(),
        Some(v) => v
            .split(',')
            .map(|n| match n.trim().parse::<usize>() {
                Ok(n) if (1..=options.len()).contains(&n) => Ok(n as u32 - 1),
                _ => Err(usage(format!("{command}: --quiz {v:?}: the correct options by number, 1 to {}", options.len()))),
            })
            .collect::<Result<Vec<u32>, CliError>>()?,
    };
    let explanation = a.value("--explanation").unwrap_or_default().to_string();
    if correct.is_empty() && !explanation.is_empty() {
        return Err(usage(format!("{command}: --explanation is for a quiz (with --quiz N)")));
    }
    Ok(PollInfo {
        is_anonymous: !a.switch("--not-anonymous"),
        allows_multiple_answers: a.switch("--multiple"),
        explanation,
        ..PollInfo::made(question, options.iter().map(|o| o.to_string()), correct)
    })
}

/// `vote @BOT MESSAGE_ID [OPTION...]`: OPTION is an option's number as shown, from 1; none
/// retracts the vote.
pub(super) fn vote(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, message_id, options) = vote_args(a)?;
    let profile = open_profile(global)?;
    let sent = profile.vote(peer, message_id, &options)?;
    print_line(&ordered(&[("chat_id", json!(sent.chat_id)), ("message_id", json!(sent.message_id))]))
}

/// The vote's peer, poll message and option indexes (from 0).
fn vote_args<'a>(a: &Args<'a>) -> Result<(&'a str, u64, Vec<u32>), CliError> {
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
        .collect::<Result<Vec<u32>, CliError>>()?;
    Ok((peer, message_id, options))
}

pub(super) fn send_contact(global: &Global, a: &Args) -> Result<(), CliError> {
    let peer = match a.words[..] {
        [peer] => peer,
        [] => return Err(usage("send-contact: @PEER missing".into())),
        [_, extra, ..] => return Err(usage(format!("send-contact: unexpected argument {extra:?} (your own card is sent)"))),
    };
    let reply_to = reply_to_arg("send-contact", a)?;
    let profile = open_profile(global)?;
    let card = profile.own_contact_card();
    let sent = profile.send_shared(peer, &Shared::Contact(card), reply_to)?;
    print_line(&sent_json(&sent))
}

fn reply_to_arg(command: &str, a: &Args) -> Result<Option<u64>, CliError> {
    a.value("--reply-to").map(|v| message_id_arg(&format!("{command}: --reply-to"), v)).transpose()
}

/// `send-location @PEER LATITUDE LONGITUDE [--live SECONDS] [--accuracy METERS] [--heading
/// DEGREES]`; the ranges are checked by `wire::places` when the item is sent.
fn location_args<'a>(a: &Args<'a>) -> Result<(&'a str, LocationInfo), CliError> {
    let [peer, latitude, longitude] = a.words[..] else {
        return Err(usage(
            "send-location: expected @PEER LATITUDE LONGITUDE (decimal degrees; a negative one goes after --: \
             send-location @bot -- -33.87 151.21)"
                .into(),
        ));
    };
    let number = |what: &str, v: &str| -> Result<f64, CliError> {
        v.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| usage(format!("send-location: {what} {v:?} is not a number")))
    };
    let whole = |what: &str| -> Result<u32, CliError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<(String, LocationInfo), CliError> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let a = super::super::cli::parse_command("send-location", None, &args)?;
        location_args(&a).map(|(p, l)| (p.to_string(), l))
    }

    fn poll(words: &[&str]) -> Result<PollInfo, CliError> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let a = super::super::cli::parse_command("send-poll", None, &args)?;
        poll_args("send-poll", &a.words[1..], &a)
    }

    #[test]
    fn poll_arguments() {
        let p = poll(&["@bot", "Lunch?", "Pizza", "Soup"]).expect("regular");
        assert_eq!((p.question.as_str(), p.options.len(), p.quiz, p.is_anonymous, p.allows_revoting), ("Lunch?", 2, false, true, true));
        let p = poll(&["@bot", "2+2?", "3", "4", "5", "--quiz", "2", "--not-anonymous", "--explanation", "Count"]).expect("quiz");
        assert_eq!((p.quiz, p.correct_option_ids.clone(), p.is_anonymous, p.allows_revoting), (true, vec![1], false, false));
        assert_eq!(p.explanation, "Count");
        let p = poll(&["@bot", "Primes?", "2", "3", "4", "--quiz", "2,1", "--multiple"]).expect("two right answers");
        assert_eq!((p.correct_option_ids.clone(), p.allows_multiple_answers), (vec![0, 1], true));
        assert!(poll(&["@bot", "Q?", "A"]).expect_err("one option").to_string().contains("at least 2 options"));
        assert!(poll(&["@bot", "Q?", "A", "B", "--quiz", "3"]).expect_err("no option 3").to_string().contains("1 to 2"));
        assert!(poll(&["@bot", "Q?", "A", "B", "--explanation", "x"]).expect_err("not a quiz").to_string().contains("for a quiz"));
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
}

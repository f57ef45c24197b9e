//! What a line typed in chat mode asks for: a message to the peer, or one of chat mode's own
//! commands (`/press`, `/reply`, `/edit`, `/react`, `/inline`, `/choose`, `/location`, `/contact`,
//! `/vote`, `/poll`, `/quiz`, `/open`, `/switch`, `/commands`, `/quit`; `display::HELP` lists them). A line
//! `@name query` may be inline mode, and a bare number a reply keyboard's button: the caller
//! decides, as it knows who the peer is and which keyboard shows.

use super::super::message::{Button, Keyboard};
use super::super::places::PollInfo;

/// Button `wanted` of a keyboard: a number from 1 counts across rows as shown; anything else
/// (or a number beyond the buttons) is matched against the callback data. Returns the number too.
pub(super) fn pick_button<'k>(keyboard: &'k Keyboard, wanted: &str) -> Option<(usize, &'k Button)> {
    let buttons = keyboard.iter().flatten().enumerate().map(|(i, b)| (i + 1, b));
    if let Ok(n) = wanted.parse::<usize>() {
        if let Some(found) = buttons.clone().find(|(i, _)| *i == n) {
            return Some(found);
        }
    }
    buttons.clone().find(|(_, b)| b.callback_data == wanted)
}

/// The person's language from the locale (`LC_ALL`, `LC_MESSAGES`, `LANG`, the first set):
/// `de_DE.UTF-8` is `de`; `C`, `POSIX` or anything else not two letters is none.
pub(super) fn language_from_env() -> Option<String> {
    let value = ["LC_ALL", "LC_MESSAGES", "LANG"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))?;
    language_of_locale(&value)
}

fn language_of_locale(locale: &str) -> Option<String> {
    let lang = locale.split(['_', '.', '@', '-']).next()?;
    (lang.len() == 2 && lang.bytes().all(|b| b.is_ascii_alphabetic())).then(|| lang.to_ascii_lowercase())
}

/// What a typed line asks for. A line whose first word is one of the chat mode's commands is
/// ours (mistyped: `Usage`); `//x` sends `/x`; every other line, `/start` and the like
/// included, is a message to the peer.
#[derive(Debug, PartialEq)]
pub(super) enum Command<'a> {
    Quit,
    Nothing,
    Send(&'a str),
    Reply { message_id: u64, text: &'a str },
    /// Replace the text of a message of ours.
    Edit { message_id: u64, text: &'a str },
    /// `message_id` none: the last message with buttons.
    Press { message_id: Option<u64>, button: &'a str },
    /// An empty emoji removes our reaction.
    React { message_id: u64, emoji: &'a str },
    Inline(&'a str),
    Choose { session_id: u64, result_id: &'a str },
    /// `/choose N`: button N of the reply keyboard.
    ReplyButton(usize),
    /// `/open LINK`: a bot link.
    Open(&'a str),
    /// Share a point (decimal degrees; the ranges are checked when it is sent).
    Location { latitude: f64, longitude: f64 },
    /// Share our own contact card.
    Contact,
    /// Vote in a poll: option indexes from 0 (typed from 1); none retracts.
    Vote { message_id: u64, options: Vec<u32> },
    /// Make a poll or a quiz (the rules are checked when it is sent).
    Poll(PollInfo),
    Commands,
    /// Open another conversation: `@user` or a group's title.
    Switch(&'a str),
    Usage { command: &'static str, usage: &'static str },
}

pub(super) fn command(line: &str) -> Command<'_> {
    let text = line.trim_end_matches(['\r', '\n']);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Command::Nothing;
    }
    if let Some(literal) = text.trim_start().strip_prefix('/').filter(|rest| rest.starts_with('/')) {
        return Command::Send(literal);
    }
    let (word, rest) = split_word(trimmed);
    let usage = |command: &'static str, usage: &'static str| Command::Usage { command, usage };
    match word {
        "/quit" if rest.is_empty() => Command::Quit,
        "/quit" => usage("/quit", "takes nothing after it"),
        "/commands" if rest.is_empty() => Command::Commands,
        "/commands" => usage("/commands", "takes nothing after it"),
        "/press" if rest.is_empty() => usage("/press", "usage: /press [MESSAGE_ID] BUTTON"),
        "/press" => match split_word(rest) {
            (first, button) if !button.is_empty() && positive(first).is_some() => {
                Command::Press { message_id: positive(first), button }
            }
            _ => Command::Press { message_id: None, button: rest },
        },
        "/reply" => match split_word(rest) {
            (first, text) if !text.is_empty() => match positive(first) {
                Some(message_id) => Command::Reply { message_id, text },
                None => usage("/reply", "usage: /reply MESSAGE_ID TEXT"),
            },
            _ => usage("/reply", "usage: /reply MESSAGE_ID TEXT"),
        },
        "/edit" => match split_word(rest) {
            (first, text) if !text.is_empty() => match positive(first) {
                Some(message_id) => Command::Edit { message_id, text },
                None => usage("/edit", "usage: /edit MESSAGE_ID TEXT"),
            },
            _ => usage("/edit", "usage: /edit MESSAGE_ID TEXT"),
        },
        "/react" => {
            let (first, emoji) = split_word(rest);
            match positive(first) {
                Some(message_id) => Command::React { message_id, emoji },
                None => usage("/react", "usage: /react MESSAGE_ID [EMOJI] (no emoji: remove yours)"),
            }
        }
        "/inline" => Command::Inline(rest),
        "/location" => {
            // `LAT LON` or `LAT,LON`.
            let rest = rest.replacen(',', " ", 1);
            let (lat, lon) = split_word(&rest);
            match (degrees(lat), degrees(lon)) {
                (Some(latitude), Some(longitude)) => Command::Location { latitude, longitude },
                _ => usage("/location", "usage: /location LATITUDE LONGITUDE (decimal degrees, e.g. /location 52.52 13.405)"),
            }
        }
        "/vote" => {
            let (first, options) = split_word(rest);
            let options: Option<Vec<u32>> = options.split_whitespace().map(|o| positive(o).map(|n| n as u32 - 1)).collect();
            match (positive(first), options) {
                (Some(message_id), Some(options)) => Command::Vote { message_id, options },
                _ => usage("/vote", "usage: /vote MESSAGE_ID [N...] (options by their number; none retracts your vote)"),
            }
        }
        "/poll" => match poll_line(rest, None) {
            Some(poll) => Command::Poll(poll),
            None => usage("/poll", POLL_USAGE),
        },
        "/quiz" => {
            let (n, rest) = split_word(rest);
            match positive(n).and_then(|n| poll_line(rest, Some(n - 1))) {
                Some(poll) => Command::Poll(poll),
                None => usage("/quiz", QUIZ_USAGE),
            }
        }
        "/contact" if rest.is_empty() => Command::Contact,
        "/contact" => usage("/contact", "takes nothing after it (your own card is sent)"),
        "/switch" if rest.is_empty() => usage("/switch", "usage: /switch @NAME or /switch GROUP TITLE"),
        "/switch" => Command::Switch(rest),
        "/choose" => match split_word(rest) {
            (first, result_id) if !result_id.is_empty() => match positive(first) {
                Some(session_id) => Command::Choose { session_id, result_id },
                None => usage("/choose", CHOOSE_USAGE),
            },
            (first, _) => match positive(first) {
                Some(n) => Command::ReplyButton(n as usize),
                None => usage("/choose", CHOOSE_USAGE),
            },
        },
        "/open" if rest.is_empty() => usage("/open", "usage: /open LINK (https://t.me/BOT?start=PAYLOAD or @BOT)"),
        "/open" => Command::Open(rest),
        _ => Command::Send(text),
    }
}

const CHOOSE_USAGE: &str = "usage: /choose N (a reply keyboard's button) or /choose SESSION_ID RESULT_ID (an inline result)";

const POLL_USAGE: &str = "usage: /poll QUESTION | OPTION | OPTION... (2 to 12 options)";
const QUIZ_USAGE: &str = "usage: /quiz N QUESTION | OPTION | OPTION... (N: the correct option's number, from 1)";

/// `QUESTION | OPTION | OPTION...`: an anonymous poll whose vote may be changed, or with
/// `correct` (an option's index) a quiz, as `e2e-chat send-poll` makes them. `None` without
/// a question and two options, or when `correct` names no option.
fn poll_line(rest: &str, correct: Option<u64>) -> Option<PollInfo> {
    let mut parts = rest.split('|').map(str::trim);
    let question = parts.next().filter(|q| !q.is_empty())?;
    let options: Vec<String> = parts.map(str::to_string).collect();
    if options.len() < 2 || correct.is_some_and(|c| c as usize >= options.len()) {
        return None;
    }
    Some(PollInfo::made(question, options, correct.map(|c| c as u32).into_iter().collect()))
}

/// `@name query` (or `@name` alone): the name and the query, for inline mode.
pub(super) fn at_name(line: &str) -> Option<(&str, &str)> {
    let (word, rest) = split_word(line.trim());
    let name = word.strip_prefix('@')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some((name, rest))
}

/// A bare button number (`2`), as typed under a reply keyboard.
pub(super) fn bare_number(line: &str) -> Option<usize> {
    let t = line.trim();
    (t.len() <= 4).then(|| positive(t)).flatten().map(|n| n as usize)
}

/// The first word and the rest (leading whitespace dropped).
fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

/// A coordinate: a finite decimal number.
fn degrees(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|f| f.is_finite())
}

/// A message or session id: a positive whole number.
fn positive(s: &str) -> Option<u64> {
    s.parse::<u64>().ok().filter(|n| *n > 0)
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_and_bot_commands_go_to_the_peer() {
        assert_eq!(command("/quit"), Command::Quit);
        assert_eq!(command("  /quit \r\n"), Command::Quit);
        assert_eq!(command("   "), Command::Nothing);
        assert_eq!(command(""), Command::Nothing);
        assert_eq!(command("/start"), Command::Send("/start"));
        assert_eq!(command("/start@my_bot deep"), Command::Send("/start@my_bot deep"));
        assert_eq!(command("/help"), Command::Send("/help"), "a bot's /help is the bot's");
        assert_eq!(command("  two words  \r"), Command::Send("  two words  "));
        assert_eq!(command("/Press 1"), Command::Send("/Press 1"), "ours are lowercase");
    }

    #[test]
    fn a_double_slash_sends_the_literal_command() {
        assert_eq!(command("//quit"), Command::Send("/quit"));
        assert_eq!(command("  //press 1 2"), Command::Send("/press 1 2"));
        assert_eq!(command("//"), Command::Send("/"));
    }

    #[test]
    fn press_takes_a_button_and_optionally_the_message() {
        assert_eq!(command("/press 5 2"), Command::Press { message_id: Some(5), button: "2" });
        assert_eq!(command("/press 5 page:2"), Command::Press { message_id: Some(5), button: "page:2" });
        assert_eq!(command("/press 2"), Command::Press { message_id: None, button: "2" });
        assert_eq!(command("/press yes"), Command::Press { message_id: None, button: "yes" });
        assert_eq!(command("/press  yes please "), Command::Press { message_id: None, button: "yes please" });
        assert_eq!(command("/press 0 x"), Command::Press { message_id: None, button: "0 x" }, "0 is no message id");
        assert!(matches!(command("/press"), Command::Usage { command: "/press", .. }));
    }

    #[test]
    fn reply_react_inline_choose_and_commands_parse_their_arguments() {
        assert_eq!(command("/reply 4 sure thing"), Command::Reply { message_id: 4, text: "sure thing" });
        assert!(matches!(command("/reply 4"), Command::Usage { command: "/reply", .. }));
        assert!(matches!(command("/reply x hi"), Command::Usage { command: "/reply", .. }));
        assert_eq!(command("/edit 4 sure, thing"), Command::Edit { message_id: 4, text: "sure, thing" });
        assert!(matches!(command("/edit 4"), Command::Usage { command: "/edit", .. }));
        assert!(matches!(command("/edit x hi"), Command::Usage { command: "/edit", .. }));
        assert_eq!(command("//edit 4 x"), Command::Send("/edit 4 x"));
        assert_eq!(command("/react 4 👍"), Command::React { message_id: 4, emoji: "👍" });
        assert_eq!(command("/react 4"), Command::React { message_id: 4, emoji: "" });
        assert!(matches!(command("/react"), Command::Usage { command: "/react", .. }));
        assert!(matches!(command("/react -1 👍"), Command::Usage { command: "/react", .. }));
        assert_eq!(command("/inline cats  and dogs"), Command::Inline("cats  and dogs"));
        assert_eq!(command("/inline"), Command::Inline(""));
        assert_eq!(command("/choose 12 r-1"), Command::Choose { session_id: 12, result_id: "r-1" });
        assert_eq!(command("/choose 12"), Command::ReplyButton(12));
        assert!(matches!(command("/choose"), Command::Usage { command: "/choose", .. }));
        assert!(matches!(command("/choose x"), Command::Usage { command: "/choose", .. }));
        assert_eq!(command("/location 52.5,13.4"), Command::Location { latitude: 52.5, longitude: 13.4 });
        assert!(matches!(command("/location"), Command::Usage { command: "/location", .. }));
        assert_eq!(command("/open https://t.me/b?start=x"), Command::Open("https://t.me/b?start=x"));
        assert!(matches!(command("/open"), Command::Usage { command: "/open", .. }));
        assert!(matches!(command("/choose r-1 12x"), Command::Usage { command: "/choose", .. }));
        assert_eq!(command("/commands"), Command::Commands);
        assert!(matches!(command("/commands now"), Command::Usage { command: "/commands", .. }));
        assert!(matches!(command("/quit now"), Command::Usage { command: "/quit", .. }));
        assert_eq!(command("/switch @bob"), Command::Switch("@bob"));
        assert_eq!(command("/switch Cat lovers "), Command::Switch("Cat lovers"));
        assert!(matches!(command("/switch"), Command::Usage { command: "/switch", .. }));
        assert_eq!(command("/location -33.87 151.21"), Command::Location { latitude: -33.87, longitude: 151.21 });
        assert!(matches!(command("/location 52.5"), Command::Usage { command: "/location", .. }));
        assert!(matches!(command("/location north 1"), Command::Usage { command: "/location", .. }));
        assert!(matches!(command("/location 1 2 3"), Command::Usage { command: "/location", .. }));
        assert_eq!(command("/contact"), Command::Contact);
        let Command::Poll(p) = command("/poll Lunch? | Pizza |  Soup ") else { panic!("a poll") };
        assert_eq!((p.question.as_str(), p.options.clone(), p.quiz, p.allows_revoting), ("Lunch?", vec![("Pizza".into(), 0), ("Soup".into(), 0)], false, true));
        let Command::Poll(q) = command("/quiz 2 2+2? | 3 | 4") else { panic!("a quiz") };
        assert_eq!((q.quiz, q.correct_option_ids.clone(), q.allows_revoting), (true, vec![1], false));
        assert!(matches!(command("/poll Lunch? | Pizza"), Command::Usage { command: "/poll", .. }));
        assert!(matches!(command("/poll | a | b"), Command::Usage { command: "/poll", .. }));
        assert!(matches!(command("/quiz 3 Q | a | b"), Command::Usage { command: "/quiz", .. }));
        assert!(matches!(command("/quiz Q | a | b"), Command::Usage { command: "/quiz", .. }));
        assert_eq!(command("/vote 5 1 3"), Command::Vote { message_id: 5, options: vec![0, 2] });
        assert_eq!(command("/vote 5"), Command::Vote { message_id: 5, options: vec![] });
        assert!(matches!(command("/vote 5 0"), Command::Usage { command: "/vote", .. }));
        assert!(matches!(command("/vote"), Command::Usage { command: "/vote", .. }));
        assert!(matches!(command("/contact me"), Command::Usage { command: "/contact", .. }));
    }

    #[test]
    fn at_names_and_bare_numbers() {
        assert_eq!(at_name("@gif_bot cats and dogs"), Some(("gif_bot", "cats and dogs")));
        assert_eq!(at_name("  @gif_bot"), Some(("gif_bot", "")));
        assert_eq!(at_name("@ hi"), None);
        assert_eq!(at_name("hi @gif_bot"), None);
        assert_eq!(at_name("@a.b x"), None);
        assert_eq!(bare_number(" 2 "), Some(2));
        assert_eq!(bare_number("0"), None);
        assert_eq!(bare_number("2 apples"), None);
        assert_eq!(bare_number("123456"), None, "a long number is a message");
    }

    fn keyboard() -> Keyboard {
        let b = |text: &str, data: &str| Button { text: text.into(), callback_data: data.into(), ..Default::default() };
        vec![vec![b("Yes", "yes"), b("No", "7")], vec![b("Later", "2")]]
    }

    #[test]
    fn buttons_are_picked_by_shown_number_then_callback_data() {
        let k = keyboard();
        assert_eq!(pick_button(&k, "1").map(|(n, b)| (n, b.callback_data.as_str())), Some((1, "yes")));
        assert_eq!(pick_button(&k, "3").map(|(n, b)| (n, b.text.as_str())), Some((3, "Later")), "numbers run across rows");
        assert_eq!(pick_button(&k, "2").map(|(n, _)| n), Some(2), "a number shown wins over equal callback data");
        assert_eq!(pick_button(&k, "7").map(|(n, b)| (n, b.text.as_str())), Some((2, "No")), "beyond the numbers: data");
        assert_eq!(pick_button(&k, "yes").map(|(n, _)| n), Some(1));
        assert!(pick_button(&k, "maybe").is_none());
        assert!(pick_button(&k, "0").is_none());
        assert!(pick_button(&Vec::new(), "1").is_none());
    }

    #[test]
    fn the_language_comes_from_the_locale() {
        assert_eq!(language_of_locale("de_DE.UTF-8").as_deref(), Some("de"));
        assert_eq!(language_of_locale("PT-br").as_deref(), Some("pt"));
        assert_eq!(language_of_locale("en").as_deref(), Some("en"));
        assert_eq!(language_of_locale("C.UTF-8"), None);
        assert_eq!(language_of_locale("POSIX"), None);
        assert_eq!(language_of_locale(""), None);
    }
}

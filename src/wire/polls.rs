//! The rules of polls and quizzes and of a vote in one, for the gateway (a bot's `sendPoll`, a
//! vote arriving) and the client (what `e2e-chat vote` may send). Each refusal names the Bot
//! API parameter it is about.

use super::invalid::Invalid;
use super::e2e::poll::Type as PollType;
use super::e2e::{Poll, PollVote};

/// Bot API limits, in characters.
pub const MAX_QUESTION: usize = 300;
pub const MAX_OPTION_TEXT: usize = 100;
pub const MAX_EXPLANATION: usize = 200;
/// How many options a poll has.
pub const MIN_OPTIONS: usize = 2;
pub const MAX_OPTIONS: usize = 12;
/// `open_period`, and how far ahead `close_date` may be, in seconds.
pub const MIN_OPEN_PERIOD: i64 = 5;
pub const MAX_OPEN_PERIOD: i64 = 600;

/// A poll as a sender may send it.
pub fn check_poll(p: &Poll) -> Result<(), Invalid> {
    let chars = |s: &str| s.chars().count();
    if p.question.trim().is_empty() || chars(&p.question) > MAX_QUESTION {
        return Err(Invalid::new(format!("question must be 1 to {MAX_QUESTION} characters")));
    }
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&p.options.len()) {
        return Err(Invalid::new(format!("a poll must have {MIN_OPTIONS} to {MAX_OPTIONS} options, got {}", p.options.len())));
    }
    if let Some(i) = p.options.iter().position(|o| o.text.trim().is_empty() || chars(&o.text) > MAX_OPTION_TEXT) {
        return Err(Invalid::new(format!("options[{i}] must be 1 to {MAX_OPTION_TEXT} characters")));
    }
    if chars(&p.explanation) > MAX_EXPLANATION {
        return Err(Invalid::new(format!("explanation must be at most {MAX_EXPLANATION} characters")));
    }
    match p.type_.enum_value() {
        Ok(PollType::QUIZ) => {
            let ids = &p.correct_option_ids;
            if ids.is_empty() || ids.windows(2).any(|w| w[0] >= w[1]) || ids.iter().any(|&i| i as usize >= p.options.len()) {
                return Err(Invalid::new(format!(
                    "correct_option_ids must be ascending indexes of options (0 to {}), at least one",
                    p.options.len() - 1
                )));
            }
            if ids.len() > 1 && !p.allows_multiple_answers {
                return Err(Invalid::new("a quiz with several correct options must allow multiple answers"));
            }
        }
        Ok(PollType::REGULAR) if !p.correct_option_ids.is_empty() => {
            return Err(Invalid::new("correct_option_ids is for quizzes only"))
        }
        Ok(PollType::REGULAR) if !p.explanation.is_empty() => return Err(Invalid::new("explanation is for quizzes only")),
        Ok(PollType::REGULAR) => {}
        Err(_) => return Err(Invalid::new("type must be \"regular\" or \"quiz\"")),
    }
    Ok(())
}

/// Whether votes still count at `now`: not stopped, and not past its close date.
pub fn is_open(p: &Poll, now: i64) -> bool {
    !p.is_closed && (p.close_date == 0 || now < p.close_date)
}

/// A vote in `poll` at `now`: the poll is open, the options exist and are distinct, more than
/// one only where the poll allows it, and a vote is changed or retracted only where the poll
/// allows revoting.
pub fn check_vote(poll: &Poll, vote: &PollVote, had_voted: bool, now: i64) -> Result<(), Invalid> {
    if !is_open(poll, now) {
        return Err(Invalid::new("the poll is closed"));
    }
    let mut seen = vec![false; poll.options.len()];
    for &id in &vote.option_ids {
        match seen.get_mut(id as usize) {
            Some(s) if !*s => *s = true,
            Some(_) => return Err(Invalid::new(format!("option {id} is chosen twice"))),
            None => return Err(Invalid::new(format!("the poll has no option {id} (options are 0 to {})", poll.options.len().saturating_sub(1)))),
        }
    }
    if vote.option_ids.len() > 1 && !poll.allows_multiple_answers {
        return Err(Invalid::new("the poll allows one answer only"));
    }
    if had_voted && !poll.allows_revoting {
        return Err(Invalid::new("the poll does not allow changing a vote"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::PollOption;

    fn poll(options: &[&str]) -> Poll {
        Poll {
            question: "Q?".into(),
            options: options.iter().map(|t| PollOption { text: t.to_string(), ..Default::default() }).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn polls_are_checked() {
        check_poll(&poll(&["a", "b"])).expect("two options");
        assert!(check_poll(&poll(&["a"])).expect_err("one").contains("2 to 12 options"));
        assert!(check_poll(&poll(&["a"; 13])).is_err());
        assert_eq!(check_poll(&poll(&["a", " "])).expect_err("empty"), "options[1] must be 1 to 100 characters");
        let mut p = poll(&["a", "b"]);
        p.question = "x".repeat(301);
        assert!(check_poll(&p).expect_err("long").starts_with("question"));
        let mut quiz = poll(&["a", "b", "c"]);
        quiz.type_ = PollType::QUIZ.into();
        assert!(check_poll(&quiz).expect_err("none").starts_with("correct_option_ids"));
        quiz.correct_option_ids = vec![3];
        assert!(check_poll(&quiz).expect_err("no such option").starts_with("correct_option_ids"));
        quiz.correct_option_ids = vec![1];
        check_poll(&quiz).expect("quiz");
        quiz.correct_option_ids = vec![2, 1];
        assert!(check_poll(&quiz).is_err(), "not ascending");
        quiz.correct_option_ids = vec![1, 2];
        assert!(check_poll(&quiz).expect_err("single answer").contains("multiple answers"));
        quiz.allows_multiple_answers = true;
        check_poll(&quiz).expect("two correct options");
        let mut regular = poll(&["a", "b"]);
        regular.correct_option_ids = vec![0];
        assert!(check_poll(&regular).is_err());
    }

    #[test]
    fn votes_are_checked_against_their_poll() {
        let mut p = poll(&["a", "b", "c"]);
        p.allows_revoting = true;
        let vote = |ids: &[u32]| PollVote { message_id: 1, option_ids: ids.to_vec(), ..Default::default() };
        check_vote(&p, &vote(&[2]), false, 10).expect("one");
        check_vote(&p, &vote(&[]), true, 10).expect("retract");
        assert!(check_vote(&p, &vote(&[3]), false, 10).expect_err("range").contains("no option 3"));
        assert!(check_vote(&p, &vote(&[0, 1]), false, 10).expect_err("single").contains("one answer"));
        p.allows_multiple_answers = true;
        check_vote(&p, &vote(&[0, 1]), false, 10).expect("multiple");
        assert!(check_vote(&p, &vote(&[1, 1]), false, 10).expect_err("twice").contains("twice"));
        p.close_date = 10;
        assert!(check_vote(&p, &vote(&[0]), false, 10).expect_err("closed").contains("closed"));
        p.close_date = 0;
        p.allows_revoting = false;
        assert!(check_vote(&p, &vote(&[1]), true, 10).expect_err("final").contains("changing a vote"));
        check_vote(&p, &vote(&[1]), false, 10).expect("a first vote");
        p.is_closed = true;
        assert!(!is_open(&p, 0));
    }
}

//! What the web chat's requests act through: the session's screen, target and jobs (chat
//! mode's), a profile connection of the server's own, and the files the page staged.

use std::collections::HashMap;
use std::path::PathBuf;

use crossbeam_channel::Sender;

use super::super::super::profile::Profile;
use super::super::screen::Screen;
use super::super::{Job, SharedTarget};

/// Where typed lines go: the same step as a terminal's (`handle_line`), through a profile
/// connection of the server's own.
pub struct Input {
    pub typist: Profile,
    pub screen: Screen,
    pub target: SharedTarget,
    pub jobs: Sender<Job>,
    /// Where files the page uploads wait (`files::make_stage`).
    pub stage_dir: PathBuf,
    pub staged: Staged,
}

/// Files the page uploaded, by id: their directory (named by the id) holds the file under the
/// name it had, which the message carries.
#[derive(Default)]
pub struct Staged {
    pub files: HashMap<String, PathBuf>,
}

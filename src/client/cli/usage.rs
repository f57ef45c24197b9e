//! The `e2e-chat --help` text, and the lists that usage errors name: the `group` and
//! `channel` subcommands and `send-file`'s options.

use crate::cli::UsageError;

pub(super) const USAGE: &str = "\
e2e-chat: a terminal client for people on the platform (end-to-end encrypted dialogs with bots)

Usage:
  e2e-chat [--server URL] [--profile DIR] <command> [arguments]

Options may come anywhere before --: before the command, or before, between or after its
arguments (--name VALUE or --name=VALUE). Everything after -- is an argument, so a text that
starts with - goes after it: e2e-chat send @bot -- -5 degrees. -h or --help before -- shows
the command's help.

Global options (anywhere before --):
  --server URL    platform server, e.g. http://127.0.0.1:50051 (needed for register;
                  stored in the profile, and overrides it for one run when given later)
  --profile DIR   profile directory (default: $E2E_CHAT_PROFILE, else ~/.e2e-chat)
  -h, --help      this help (COMMAND --help or help COMMAND: that command's part)
  -V, --version   the version and the compatibility_profile_id

Commands:
  register USERNAME [--name NAME]
        create the profile and a user; prints {\"user_id\":N,\"username\":\"U\",\"device_id\":D}
  send @PEER TEXT... [--reply-to MESSAGE_ID]
        send the words of TEXT joined by spaces, optionally as a reply (a TEXT that starts
        with - goes after --); prints {\"chat_id\":N,\"message_id\":M,\"date\":T}
  edit @PEER MESSAGE_ID TEXT...
        replace the text of a message you sent (only your own texts; its reply stays);
        the peer sees it edited, a bot gets edited_message; prints {\"chat_id\":N,
        \"message_id\":M,\"edit_date\":T}
  press @BOT MESSAGE_ID CALLBACK_DATA [--timeout SECONDS]
        press the button with CALLBACK_DATA under a received message and wait (default 30 s)
        for the bot's answer; prints {\"event\":\"callback_answer\",\"chat_id\":N,
        \"press_id\":P,\"text\":T,\"show_alert\":B}. What else arrives meanwhile is
        processed but not printed. No answer in time: exit status 1
  reply-button @BOT N [--location LATITUDE,LONGITUDE | QUESTION OPTION OPTION... [--quiz N]
               [--multiple] [--not-anonymous] [--explanation TEXT]]
        use button N (from 1, across rows, as listen lists them) of the reply keyboard
        the bot shows: its text is sent as your message (a contact button sends your
        contact card, a location button the location given, a poll button the poll
        written after N, as send-poll takes it: a quiz where the button asks for one);
        a one-time keyboard is gone afterwards; prints {\"chat_id\":N,\"message_id\":M,
        \"date\":T,\"button\":TEXT,\"sent\":\"text\"|\"contact\"|\"location\"|\"poll\"}
  start @BOT [PAYLOAD] | start LINK
        open a bot the way its link does: sends /start PAYLOAD (the deep-link form) to
        the bot; LINK is https://t.me/BOT?start=PAYLOAD or tg://resolve?domain=BOT&start=
        PAYLOAD; PAYLOAD is up to 64 of A-Z a-z 0-9 _ -; prints {\"chat_id\",
        \"message_id\",\"date\",\"text\"}
  react @PEER MESSAGE_ID [EMOJI]
        set your reaction to a message (no EMOJI: remove it);
        prints {\"chat_id\":N,\"message_id\":M} of the reaction's envelope
  inline @BOT QUERY... [--timeout SECONDS]
        type \"@BOT QUERY\" (inline mode): open a session and wait (default 30 s) for the
        bot's results; prints {\"event\":\"inline_results\",\"chat_id\":N,\"session_id\":S,
        \"results\":[{\"id\",\"title\",\"description\",\"text\"}]}. No results in time: exit 1
  choose @BOT SESSION_ID RESULT_ID
        pick a result of an inline session: its text is sent to the bot's dialog via the bot;
        prints {\"chat_id\":N,\"message_id\":M,\"date\":T} (the same again for a repeated choice)
  send-file @PEER PATH [PATH...] [--as photo|document|audio|video|voice|animation|video_note|sticker] [--caption TEXT]
        send a file (up to 50 MiB), encrypted while it streams to the platform; the kind is
        guessed from the extension without --as (images: photo, .ogg/.oga: voice,
        .mp3/.m4a: audio, .mp4: video, else document); prints {\"chat_id\":N,
        \"message_id\":M,\"date\":T}. With 2 to 10 files: an album, one message
        per file sharing a media_group_id, the caption on the first; one line each
  send-location @PEER LATITUDE LONGITUDE [--live SECONDS] [--accuracy METERS]
                [--heading DEGREES] [--reply-to MESSAGE_ID]
        share a point (decimal degrees: latitude -90..90, longitude -180..180; a negative
        one goes after --: send-location @bot -- -33.87 151.21); --live 60..86400 (or
        2147483647: until stopped) makes it a live location, --heading 1..360 is for a
        live one; prints {\"chat_id\":N,\"message_id\":M,\"date\":T}
  send-contact @PEER [--reply-to MESSAGE_ID]
        share your own contact card: your display name (else username) and user id; no
        phone number, the platform has none; prints {\"chat_id\",\"message_id\",\"date\"}
  send-poll @PEER QUESTION OPTION OPTION... [--quiz N[,N...]] [--multiple] [--not-anonymous]
            [--explanation TEXT] [--reply-to MESSAGE_ID]
        make a poll (2 to 12 options; quote words with spaces): anonymous unless
        --not-anonymous; --multiple lets a voter choose several; --quiz N makes it a quiz
        whose correct option is N (from 1; several with --multiple), --explanation is shown
        after a quiz vote; prints {\"chat_id\",\"message_id\",\"date\"}
  vote @BOT MESSAGE_ID [OPTION...]
        vote in a bot's poll: OPTION is an option's number as shown, from 1 (several
        where the poll allows several answers); none retracts your vote (where the
        poll allows changing it); prints {\"chat_id\",\"message_id\"}
  download @PEER MESSAGE_ID OUT_PATH
        fetch the file of a received message, verify all of it, then write OUT_PATH
        (through OUT_PATH.part, mode 0600; nothing is written when verification fails);
        prints {\"path\":P,\"size\":N}
  listen [--timeout SECONDS] [--count N]
        print what arrives as one JSON object per line; stop after SECONDS (default 30) or
        after N objects. A message: chat_id, message_id, date, from, text, and when present
        entities, reply_to_message_id, keyboard ([[{\"text\",\"callback_data\"}]], a link
        button {\"text\",\"url\"}), reply_keyboard ({\"rows\":[[{\"text\",\"request\"}]],
        \"one_time\",\"placeholder\"}: answer with reply-button), remove_keyboard: true,
        force_reply ({\"placeholder\"}: the bot asks for an answer), forward_origin
        ({\"sender_user_id\",\"sender_username\",...,\"date\"}, or for a channel's post
        {\"channel_title\",\"channel_message_id\",\"date\"}); a file message has \"media\":{\"kind\",\"file_name\",
        \"mime_type\",\"size\"} (+ width, height, duration when known) and \"caption\"
        (+ caption_entities) instead of text; a location, venue, contact or dice message has
        \"location\":{\"latitude\",\"longitude\"} (+ horizontal_accuracy, live_period,
        heading, proximity_alert_radius, live_stopped when set), \"venue\":{\"location\",
        \"title\",\"address\"}, \"contact\":{\"phone_number\",\"first_name\"} (+ last_name,
        user_id), \"dice\":{\"emoji\",\"value\"} or \"poll\":{\"question\",\"options\":[{\"text\",
        \"voter_count\"}],\"type\",\"is_anonymous\",\"allows_multiple_answers\",\"is_closed\",
        \"total_voter_count\"} instead of text (an edited live location or a stopped poll: the
        same field in the edited event). Anything else has an \"event\" field: edited, deleted, reaction,
        chat_action, callback_answer, and for groups (each with \"group\":{\"id\",\"title\"}):
        group_message (message_id, date, from, text, ... as a message), chat_action
        (from, action), group_joined,
        group_membership (user, old_role, new_role, actor), group_edited (message_id, from,
        edit_date, text, entities, keyboard), group_commit (epoch, added,
        removed: [{\"user_id\",\"device_id\"}], removed_me)
  newbot USERNAME --name NAME [--capabilities CAPS] [--config FILE [--state-dir DIR]
         | --out FILE] [--force] [--manager @BotManager]
        create a bot in your dialog with @BotManager (/newbot and its three questions),
        with its identity secret drawn on this device: only the Bot ID and a proof that
        you hold the secret go to the platform, which never sees the secret. CAPS is
        default (private messages) or a list of dm, groups, channels. --config writes a
        whole gateway config to FILE (mode 0600; state_dir: --state-dir or state-USERNAME
        beside FILE), --out the bots[] entry alone; without either the secret is printed
        and kept in this profile until save-config writes it. Prints {\"bot\",
        \"compat_user_id\",\"bot_id_hex\",\"short_form\",\"token\"} and \"config\" (+
        \"state_dir\"), \"out\" or \"identity_recovery_secret_hex\"
  rekey @BOT [--config FILE] [--manager @BotManager]
        give one of your bots a new identity drawn on this device (/rekey with the new
        key's proof): a new Bot ID, every device of the old one removed, the token kept.
        Users see a security warning until they verify the new Bot ID. --config updates
        the bot's entry of that gateway config (bot_id_hex, identity_recovery_secret_hex,
        and the old secret as previous_identity_recovery_secret_hex, so the restarted
        gateway keeps its queue and state); without it the new secret is printed.
        Prints {\"bot\",\"compat_user_id\",\"bot_id_hex\",\"short_form\",\"removed_devices\"}
        and \"config\" or \"identity_recovery_secret_hex\"
  save-config @BotManager FILE [--state-dir DIR] [--bot @NAME] [--force]
        write the gateway config that @BotManager sent at /newbot (with the newest token
        a later /token issued) to FILE, mode 0600, with state_dir filled in (default: a
        directory state-BOTNAME beside FILE) and the recovery secret newbot drew here
        (then forgotten by this profile; --force over that config keeps the secret it
        holds); the newest bot's, or --bot's. Then:
        bot-gateway serve FILE. Prints {\"path\",\"bot\",\"state_dir\",\"token_replaced\"}
  commands @BOT [--lang XX]
        what the bot offers in your private chat with it: first one line
        {\"bot\":\"B\",\"description\":\"...\",\"short_description\":\"...\"}, then one line
        {\"command\":\"start\",\"description\":\"...\"} per command; --lang picks the bot's
        texts in that two-letter language where it has them
  verify @PEER [--mark]
        who PEER is, as this profile pinned them the first time it met them (their account
        identity key; a later change is refused until you `trust` it): one line
        {\"user\",\"user_id\",\"is_bot\",\"bot_id\",\"short_form\"} for a bot (its Bot ID, which its
        owner publishes, and 30 digits to read aloud), {\"user\",\"user_id\",\"is_bot\",
        \"identity_key\",\"safety_number\"} for a user (60 digits you and they both see), then
        \"verified\" (+ \"verified_at\") and \"key_changed\" (+ \"served_key\": what the platform
        serves now). --mark records that you compared them (docs/verify.md)
  trust @PEER
        accept the identity key the platform serves now for PEER in place of the pinned one
        (after you checked it: a new account key); an earlier --mark no longer counts.
        Prints the verify line
  chat @PEER
        interactive dialog. On a terminal the screen is drawn and kept current: each
        message with its time, sender and formatting, buttons numbered under it
        (`[1 Yes] [2 No]`), a one-line quote of the message it replies to, edits in place,
        deletions struck through; each line you type shows at once and turns from
        \"⧗ sending\" to \"#id ✓\". Typed while the platform is unreachable, it waits in
        the profile's outbox and is sent, in order and once, when the platform is back.
        Other dialogs and groups are counted unread in the status line. Without a terminal
        it prints one line per thing: `[@sender] text (#id)`, `[you] text (#id)`, ...
        Commands: /press [ID] BUTTON (its number or callback data; no ID: the last message
        with buttons), /reply ID TEXT, /edit ID TEXT (a text of yours, shown edited),
        /react ID [EMOJI] (none: remove), /inline QUERY,
        /choose SESSION RESULT_ID, /location LAT LON (share a point), /contact (share your
        contact card), /vote ID [N...] (a poll's options by number; none retracts),
        /poll QUESTION | OPTION | OPTION... (make a poll), /quiz N QUESTION | OPTION | ...
        (a quiz whose correct option is N; either answers a poll button),
        N or /choose N (button N of the bot's reply keyboard, drawn above the status
        line), /open LINK (a bot link: /start PAYLOAD), @BOT QUERY (inline mode),
        /switch @NAME or GROUP (another conversation),
        /commands (the bot's commands and these), /quit; //x sends /x, any other /x (like
        /start) goes to the peer. /quit, Ctrl-D or end of input leaves; Ctrl-C clears the
        line. NO_COLOR turns colour off. Control characters in what arrives are shown
        escaped (\\e, \\x07, \\u{9b}), never obeyed
  web [@PEER] [--listen ADDR] [--open]
        the chat in a browser: serves a page on loopback (default 127.0.0.1:8090) and
        prints the address to open, with the session token (kept in the profile as
        web-token). The page shows what chat mode shows, live: conversations with unread
        counts, messages with formatting, replies, edits and deletions, inline buttons and
        the reply keyboard; what you type there is what you would type in chat mode.
        Decryption stays in this process. @PEER (default @BotManager) is the dialog it
        opens with; --open asks the desktop to open the address. Ctrl-C stops it
  group create|add|remove|send|edit|press|title|members|leave|list ...
        groups, end-to-end encrypted with MLS. GROUP is a group's id (64 hex digits, or a
        unique prefix of 8 or more) or the exact title of a group you know.
        group create TITLE...           a group with you as its owner; prints
                                        {\"group_id\":HEX,\"title\":T}
        group add GROUP @USER_OR_BOT    admit someone: a user's devices are added at once
                                        (they join when their inbox is read), a bot joins
                                        by itself (it needs the groups capability); prints
                                        {\"group_id\",\"user\":{...},\"devices_added\":N}
        group remove GROUP @USER        remove a member (owner or administrator); they can
                                        read nothing sent after; prints {\"group_id\",
                                        \"user_id\",\"leaves_removed\":B}
        group send GROUP TEXT... [--reply-to M]
                                        prints {\"group_id\",\"message_id\",\"date\"}
        group send-poll GROUP QUESTION OPTION OPTION... [--quiz N] [--multiple] [--not-anonymous]
                                        a poll into the group, as send-poll makes it;
                                        prints {\"group_id\",\"message_id\",\"date\"}
        group send-file GROUP PATH [--as KIND] [--caption TEXT]
                                        a file into the group (not a channel), its key
                                        inside the MLS message; prints {\"group_id\",
                                        \"message_id\",\"date\"}
        group download GROUP MESSAGE_ID OUT
                                        the file of a group message, verified whole, to
                                        OUT; prints {\"group_id\",\"message_id\",\"path\",
                                        \"size\"}
        group edit GROUP MESSAGE_ID TEXT...
                                        replace the text of your message (your post, in
                                        a channel); prints {\"group_id\",\"message_id\",
                                        \"edit_date\"}
        group press GROUP MESSAGE_ID CALLBACK_DATA [--timeout S]
                                        press a button of a bot's group message (privately
                                        to the bot); prints the bot's answer
        group title GROUP TITLE...      change the title (owner, or an administrator
                                        with can_change_info); prints {\"group_id\",\"title\"}
        group members GROUP             one line per member: {\"user_id\",\"username\",
                                        \"display_name\",\"is_bot\",\"role\"}
        group leave GROUP               leave, and forget the group on this device
        group list                      one line per group: {\"group_id\",\"title\",
                                        \"role\",\"joined\"} (joined: this device is in it)
        group promote GROUP @USER_OR_BOT RIGHTS
                                        set administrator rights: a comma-separated list of
                                        post, delete, restrict, invite, promote, change_info,
                                        manage; none demotes
        group ban GROUP @USER [--until T]
                                        remove and keep out (until unix time T)
        group unban GROUP @USER         let a banned user join again
        group restrict GROUP @USER [--until T]
                                        the platform refuses their messages
        group unrestrict GROUP @USER    lift it
        group link GROUP [--name N] [--expire T] [--limit N] [--request]
                                        a new invite link (--request: users ask, an
                                        administrator approves); prints the link
        group revoke-link GROUP LINK    nobody joins by it any more
        group export-link GROUP         a new primary link
        group approve|decline GROUP @USER   a pending join request
        group delete GROUP MESSAGE_ID   delete a message for everyone (yours, or any with
                                        the delete right)
        channel create TITLE...         a channel: you post, its members read; prints
                                        {\"group_id\",\"title\",\"type\":\"channel\"}
        channel post CHANNEL TEXT...    post (owner, or an administrator with post)
        join LINK                       join by an invite link (e2e://join/...), or ask to
                                        (prints \"status\": \"joined\" or \"requested\"; once
                                        approved, this device joins when its inbox is read)
        Sending or committing may first read what the inbox holds for the group: a device
        has one inbox stream, so a listen of this profile running meanwhile may end
        (chat reconnects)

Errors go to stderr as one line and make the exit status non-zero: 2 for a usage error
(an unknown command or option, a missing, extra or malformed argument), 1 for any other
failure.
Set RUST_LOG=info (or debug) for more detail on stderr.
";

/// `send-file`'s options, as its usage errors show them.
pub(super) const SEND_FILE_OPTIONS: &str = "[--as photo|document|audio|video|voice|animation|video_note|sticker] [--caption TEXT]";

/// The `group` and `channel` subcommands, as usage errors list them.
pub(super) const GROUP_SUBCOMMANDS: &str = "create, add, remove, send, send-file, send-poll, download, edit, press, title, members, leave, list, promote, ban, unban, restrict, unrestrict, link, revoke-link, export-link, approve, decline, delete";
pub(super) const CHANNEL_SUBCOMMANDS: &str = "create, post";

/// The usage error of a `group` subcommand that does not exist.
pub(super) fn unknown_group_command(other: &str) -> UsageError {
    UsageError(format!("unknown group command {other:?}; the group commands are: {GROUP_SUBCOMMANDS}"))
}

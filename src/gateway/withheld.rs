//! Messages the platform withheld from the bot: each user's device numbers what it sends to
//! a conversation (`e2e::sequence`), the import notes the gaps (`FollowUp::GapNoted`), and
//! when that is due and on the hourly upkeep the ones still open a minute later are logged at warn and counted
//! (`botgw_withheld_messages_total`). The bot's own updates are not touched: what never
//! arrived cannot be delivered, only told.

use crate::e2e::sequence;
use crate::gateway::metrics::BotMetrics;
use crate::gateway::ctx::Ctx;

/// Reports the gaps noticed `sequence::GRACE_SECS` before `now` (the project's clock; a test
/// passes a later time).
pub fn report_withheld(cx: &Ctx, now: i64) {
    let before = now - sequence::GRACE_SECS;
    // A read first: after almost every batch there is nothing to report.
    match cx.store.read(move |c| Ok(sequence::withheld_due(c, before)?)) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => return log::warn!("bot @{}: reading the gaps in what users sent: {e}", cx.name),
    }
    match cx.store.write(move |c| Ok(sequence::take_withheld(c, before)?)) {
        Ok(withheld) => {
            for w in withheld {
                BotMetrics::add(&cx.metrics.withheld_messages, w.count);
                log::warn!("bot @{}: {}", cx.name, w.describe());
            }
        }
        Err(e) => log::warn!("bot @{}: taking the gaps in what users sent: {e}", cx.name),
    }
}

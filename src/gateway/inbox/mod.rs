//! The inbox of one bot device: `ins/<n>` holds the platform's server stream (`stream`) and
//! hands envelopes over a bounded channel to `in/<n>`, which decrypts a batch, stores
//! "advanced sessions + updates + cursor" in ONE transaction, and only after that commit
//! acknowledges the envelopes to the platform (`import`). A crash at any point loses nothing
//! and duplicates nothing: unacknowledged envelopes come again and the stored cursor and the
//! memory of processed events skip them. The import returns what each batch left to do
//! (`e2e::follow_up::FollowUp`), and `in/<n>` runs it after the acknowledgement
//! (`follow_up`). `in/<n>` also keeps the device's keys up (`upkeep`).

mod follow_up;
mod import;
mod private;
mod stream;
mod upkeep;

use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::wire::platform::InboxEnvelope;

/// The tests of other modules import batches as `in/<n>` does.
#[cfg(test)]
pub(crate) use import::import_reported;
pub use import::Importer;
pub use stream::stream_loop;
pub use upkeep::{replenish_prekeys, SignedPrekeyUpkeep};

/// Envelopes imported in one transaction at most.
const BATCH: usize = 256;
/// Envelopes buffered between the stream and the decrypting thread: the next batch while one
/// is imported. When full the stream thread blocks, and gRPC flow control pushes back on the
/// platform. (The buffer is allocated whole, 168 bytes a slot, for every bot: a deeper one
/// was 168 KiB of each idle bot.)
const CHANNEL_CAPACITY: usize = BATCH;
/// The delays between tries of the stream's reconnections and of the platform calls an import
/// waits on.
const RECONNECT_START: Duration = Duration::from_millis(500);
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// The bounded channel from `ins/<n>` to `in/<n>` (the threads are started by
/// `gateway::threads`).
pub fn channel() -> (Sender<InboxEnvelope>, Receiver<InboxEnvelope>) {
    bounded(CHANNEL_CAPACITY)
}

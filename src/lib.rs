//! Bot Gateway: the Bot HTTP API over an end-to-end encrypted platform transport.
//!
//! One package, three programs (see docs/ARCHITECTURE.md):
//! - `bot-gateway` (src/main.rs, module `gateway`): the product, a device of the bot.
//! - `platform-server` (module `platform`): the reference platform server.
//! - `e2e-chat` (module `client`): a terminal client for a human user; drives the tests too.
//!
//! Shared layers: `http` (the hardened HTTP/1.1 server under the Bot API), `wire` (generated gRPC/protobuf code), `crypto` (every libsodium call),
//! `e2e` (device keys, sessions and envelopes over SQLite, used by the gateway and the client),
//! `migrations` (the numbered schema versions of every SQLite database).

pub mod backoff;
pub mod cli;
pub mod client;
pub mod clock;
pub mod compat;
pub mod demand;
pub mod crypto;
pub mod e2e;
pub mod gateway;
pub mod http;
pub mod memory;
pub mod migrations;
pub mod platform;
pub mod signals;
pub mod wire;

//! Wire code generated from `proto/` by `build.rs`: protobuf messages and grpcio stubs.
//!
//! `platform` is the gRPC contract with the platform server; `e2e` holds shapes that only ever
//! travel inside end-to-end encryption or lie in our encrypted state. `token` is the one
//! bot-token parser of both sides; `places` the rules of locations, venues, contacts and dice; `polls` those of polls and votes; `roles` who may post in a channel.

#[allow(clippy::all, unused_mut, unused_imports, unused_results, unknown_lints, non_camel_case_types, non_upper_case_globals, non_snake_case, missing_docs)]
pub mod platform {
    include!(concat!(env!("OUT_DIR"), "/platform.rs"));
}

#[allow(clippy::all, unused_mut, unused_imports, unused_results, unknown_lints, non_camel_case_types, non_upper_case_globals, non_snake_case, missing_docs)]
pub mod e2e {
    include!(concat!(env!("OUT_DIR"), "/e2e.rs"));
}

include!(concat!(env!("OUT_DIR"), "/services.rs"));

pub mod bot_account;
pub mod bot_profile;
pub mod connect;
mod content;
pub mod grpc_debug;
pub mod in_flight;
pub mod invalid;
pub mod places;
pub mod polls;
pub mod roles;
pub mod rpc;
pub mod token;

pub use connect::{Credential, Platform};
pub use invalid::Invalid;

/// HTTP/2 stream window of both ends (gRPC's default is 64 KiB): a file transfer moves 256 KiB
/// messages, which a small window splits into round trips between the processes.
pub const FILE_WINDOW_BYTES: i32 = 1 << 20;
/// Largest HTTP/2 frame either end accepts (default 16 KiB): fewer frames per file chunk.
pub const FILE_FRAME_BYTES: i32 = 256 * 1024;

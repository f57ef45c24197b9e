//! The implemented contract's identity (SPEC "Versioning" 1), shared by the gateway, which
//! checks it in its config, and the platform's management bot, which writes it into the
//! config it hands out.

/// `compatibility_profile_id` of the contract this release implements.
pub const COMPATIBILITY_PROFILE_ID: &str = "compat-v1-core-preview-4";

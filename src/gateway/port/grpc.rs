//! The real platform port: the bot device's gRPC channel, its credential on every call and
//! the default deadline (`wire::Platform`).

use super::{unary_calls, InboxStream, Pending, PendingAck, PendingCheck, PlatformPort, Reply};
use crate::e2e::file::FileTransport;
use crate::wire::platform::*;
use crate::wire::{Credential, Platform};

/// The platform server over gRPC.
pub struct GrpcPort {
    platform: Platform,
}

impl GrpcPort {
    pub fn new(platform: Platform) -> GrpcPort {
        GrpcPort { platform }
    }

    /// Calls from now on as `credential` (the registered device, after registration).
    pub fn set_credential(&mut self, credential: Credential) {
        self.platform.set_credential(credential);
    }

    /// Sends a unary call without waiting (the generated client is synchronous only; its
    /// channel sends without waiting).
    fn start<Req, Resp: Send + Unpin + 'static>(&self, method: &grpcio::Method<Req, Resp>, req: &Req) -> Pending<Resp> {
        self.platform.start(method, req, self.platform.opt())
    }
}

macro_rules! grpc_calls {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        impl PlatformPort for GrpcPort {
            $(fn $name(&self, req: &$req) -> Reply<$resp> {
                let started = std::time::Instant::now();
                let answer = self.platform.client.$name(req, self.platform.opt());
                crate::gateway::metrics::PLATFORM_CALLS.observe(stringify!($name), started.elapsed());
                answer
            })*

            fn start_verify_credential(&self) -> PendingCheck {
                self.start(&crate::wire::platform_grpc::METHOD_PLATFORM_VERIFY_CREDENTIAL, &VerifyCredentialRequest::new())
            }

            fn start_ack(&self, req: &AckRequest) -> PendingAck {
                self.start(&crate::wire::platform_grpc::METHOD_PLATFORM_ACK, req)
            }

            fn inbox(&self) -> Reply<InboxStream> {
                let stream = self.platform.client.inbox(&InboxRequest::new(), self.platform.opt_with_timeout(None))?;
                Ok(Box::pin(stream))
            }

            fn files(&self) -> &dyn FileTransport {
                &self.platform
            }

            fn device_id(&self) -> u32 {
                match self.platform.credential() {
                    Credential::Bot { device_id, .. } => device_id.unwrap_or(0),
                    Credential::Device { device_id, .. } => *device_id,
                    Credential::Anonymous => 0,
                }
            }
        }
    };
}
unary_calls!(grpc_calls);

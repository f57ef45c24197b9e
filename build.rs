//! Generates the wire code from `proto/`: protobuf 3 messages with protobuf-codegen's pure-Rust
//! parser (no `protoc` needed), and grpcio service stubs written here, because grpcio-compiler
//! only targets protobuf 2 and prost.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let protos: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = fs::read_dir("proto")
            .expect("proto/ exists")
            .map(|e| e.expect("readable proto/ entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "proto"))
            .collect();
        v.sort();
        v
    };
    println!("cargo:rerun-if-changed=proto");
    for p in &protos {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let gen_dir = out_dir.join("protos");
    fs::create_dir_all(&gen_dir).expect("create OUT_DIR/protos");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .inputs(&protos)
        .out_dir(&gen_dir)
        .run_from_script();

    // One flat file per proto package, without the generated inner attributes and docs, so that
    // src/wire/mod.rs can `include!` it inside a `pub mod` block.
    let mut services = String::new();
    for p in &protos {
        let stem = p.file_stem().expect("file stem").to_string_lossy().to_string();
        let generated = fs::read_to_string(gen_dir.join(format!("{stem}.rs"))).expect("generated file");
        let cleaned: String = generated
            .lines()
            .filter(|l| {
                // Inner attributes and inner doc comments are not allowed inside `include!`.
                let t = l.trim_start();
                !t.starts_with("#![") && !t.starts_with("//!")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(out_dir.join(format!("{stem}.rs")), cleaned).expect("write message module");
        services.push_str(&grpc_stubs(p, &stem));
    }
    fs::write(out_dir.join("services.rs"), services).expect("write services.rs");
}

struct Rpc {
    name: String,
    req: String,
    resp: String,
    server_streaming: bool,
    client_streaming: bool,
}

impl Rpc {
    /// grpcio's method type, its server sink and how a handler is added.
    fn kind(&self) -> (&'static str, &'static str, &'static str) {
        match (self.client_streaming, self.server_streaming) {
            (false, false) => ("Unary", "UnarySink", "add_unary_handler"),
            (false, true) => ("ServerStreaming", "ServerStreamingSink", "add_server_streaming_handler"),
            (true, false) => ("ClientStreaming", "ClientStreamingSink", "add_client_streaming_handler"),
            (true, true) => panic!("bidirectional streaming is not generated ({})", self.name),
        }
    }
}

/// Writes a `<package>_grpc` module per proto file that declares services: a `grpcio::Method`
/// constant per RPC (unary, server streaming or client streaming), a client wrapper and a server trait with a `create_<service>` function.
fn grpc_stubs(path: &Path, stem: &str) -> String {
    let text = fs::read_to_string(path).expect("read proto");
    let package = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package ").map(|r| r.trim_end_matches(';').trim().to_string()))
        .unwrap_or_default();
    let mut out = String::new();
    let mut service: Option<(String, Vec<Rpc>)> = None;
    let mut all = Vec::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("service ") {
            service = Some((rest.trim_end_matches('{').trim().to_string(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("rpc ") {
            // rpc Name(Req) returns (stream Resp);
            let (name, rest) = rest.split_once('(').expect("rpc name");
            let (req, rest) = rest.split_once(')').expect("rpc request");
            let (_, rest) = rest.split_once('(').expect("rpc returns");
            let (resp, _) = rest.split_once(')').expect("rpc response");
            let resp = resp.trim();
            let (server_streaming, resp) = match resp.strip_prefix("stream ") {
                Some(r) => (true, r.trim()),
                None => (false, resp),
            };
            let req = req.trim();
            let (client_streaming, req) = match req.strip_prefix("stream ") {
                Some(r) => (true, r.trim()),
                None => (false, req),
            };
            if let Some((_, rpcs)) = service.as_mut() {
                rpcs.push(Rpc {
                    name: name.trim().to_string(),
                    req: req.to_string(),
                    resp: resp.to_string(),
                    server_streaming,
                    client_streaming,
                });
            }
        } else if line == "}" {
            if let Some(s) = service.take() {
                all.push(s);
            }
        }
    }
    if all.is_empty() {
        return out;
    }
    writeln!(out, "pub mod {stem}_grpc {{").unwrap();
    writeln!(out, "    #![allow(dead_code, clippy::all)]").unwrap();
    writeln!(out, "    use super::{stem}::*;").unwrap();
    for (svc, rpcs) in &all {
        let svc_upper = snake(svc).to_uppercase();
        for r in rpcs {
            let (ty, _, _) = r.kind();
            writeln!(
                out,
                "    pub const METHOD_{svc_upper}_{m}: ::grpcio::Method<{req}, {resp}> = ::grpcio::Method {{ ty: ::grpcio::MethodType::{ty}, name: \"/{package}.{svc}/{name}\", req_mar: ::grpcio::Marshaller {{ ser: ::grpcio::pb_ser, de: ::grpcio::pb_de }}, resp_mar: ::grpcio::Marshaller {{ ser: ::grpcio::pb_ser, de: ::grpcio::pb_de }} }};",
                m = snake(&r.name).to_uppercase(),
                req = r.req,
                resp = r.resp,
                name = r.name,
            )
            .unwrap();
        }
        // Client.
        writeln!(out, "    #[derive(Clone)]\n    pub struct {svc}Client {{ pub client: ::grpcio::Client }}").unwrap();
        writeln!(out, "    impl {svc}Client {{").unwrap();
        writeln!(out, "        pub fn new(channel: ::grpcio::Channel) -> Self {{ {svc}Client {{ client: ::grpcio::Client::new(channel) }} }}").unwrap();
        for r in rpcs {
            let m = snake(&r.name);
            let c = format!("METHOD_{svc_upper}_{}", m.to_uppercase());
            if r.client_streaming {
                // The caller sends `(chunk, WriteFlags)` into the sender, closes it, then awaits the receiver.
                writeln!(out, "        pub fn {m}(&self, opt: ::grpcio::CallOption) -> ::grpcio::Result<(::grpcio::ClientCStreamSender<{req}>, ::grpcio::ClientCStreamReceiver<{resp}>)> {{ self.client.client_streaming(&{c}, opt) }}", req = r.req, resp = r.resp).unwrap();
            } else if r.server_streaming {
                writeln!(out, "        pub fn {m}(&self, req: &{req}, opt: ::grpcio::CallOption) -> ::grpcio::Result<::grpcio::ClientSStreamReceiver<{resp}>> {{ self.client.server_streaming(&{c}, req, opt) }}", req = r.req, resp = r.resp).unwrap();
            } else {
                writeln!(out, "        pub fn {m}(&self, req: &{req}, opt: ::grpcio::CallOption) -> ::grpcio::Result<{resp}> {{ self.client.unary_call(&{c}, req, opt) }}", req = r.req, resp = r.resp).unwrap();
            }
        }
        writeln!(out, "    }}").unwrap();
        // Server trait.
        writeln!(out, "    pub trait {svc} {{").unwrap();
        for r in rpcs {
            let (_, sink, _) = r.kind();
            let req = if r.client_streaming { format!("::grpcio::RequestStream<{}>", r.req) } else { r.req.clone() };
            writeln!(out, "        fn {m}(&mut self, ctx: ::grpcio::RpcContext, req: {req}, sink: ::grpcio::{sink}<{resp}>);", m = snake(&r.name), resp = r.resp).unwrap();
        }
        writeln!(out, "    }}").unwrap();
        writeln!(out, "    pub fn create_{s}<S: {svc} + Send + Clone + 'static>(s: S) -> ::grpcio::Service {{", s = snake(svc)).unwrap();
        writeln!(out, "        let mut builder = ::grpcio::ServiceBuilder::new();").unwrap();
        for r in rpcs {
            let m = snake(&r.name);
            let c = format!("METHOD_{svc_upper}_{}", m.to_uppercase());
            let (_, _, add) = r.kind();
            writeln!(out, "        let mut instance = s.clone();\n        builder = builder.{add}(&{c}, move |ctx, req, resp| instance.{m}(ctx, req, resp));").unwrap();
        }
        writeln!(out, "        builder.build()\n    }}").unwrap();
    }
    writeln!(out, "}}").unwrap();
    out
}

fn snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

//! Which `Host` a listener answers. A listener on loopback answers only loopback names (an IP
//! literal that is loopback, or `localhost`, with or without a port) and the names its
//! configuration adds: a web page that rebinds its own DNS name to 127.0.0.1 sends its name as
//! `Host`, and so cannot reach the gateway through a browser. Every request to a gateway
//! listener needs exactly one `Host` header.

use std::net::{IpAddr, SocketAddr};

use super::head::Head;
use super::HttpError;

/// The names a listener accepts in `Host`, besides the loopback ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRule {
    /// Exactly one `Host` is required (a listener of the gateway; not a test's server).
    one_required: bool,
    /// Only loopback names and `extra` are accepted (the listener is on loopback).
    loopback_only: bool,
    /// Names the configuration adds, lower case, without a port.
    extra: Vec<String>,
}

impl HostRule {
    /// No rule: any `Host`, or none (the default of `Limits`, for servers in tests).
    pub fn any() -> HostRule {
        HostRule::default()
    }

    /// The rule for a listener bound to `addr`: exactly one `Host`, naming a loopback name or
    /// one of `extra` when the address is loopback, any name otherwise (say `0.0.0.0:8081` in a
    /// container, where the names it is reached by are not known here).
    pub fn for_listener(addr: SocketAddr, extra: &[String]) -> HostRule {
        HostRule {
            one_required: true,
            loopback_only: addr.ip().is_loopback(),
            extra: extra.iter().map(|n| n.to_ascii_lowercase()).collect(),
        }
    }

    /// Ok when the head names exactly one `Host` this listener answers.
    pub fn check(&self, head: &Head) -> Result<(), HttpError> {
        if !self.one_required {
            return Ok(());
        }
        let mut hosts = head.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("host")).map(|(_, v)| v.trim());
        let (Some(host), None) = (hosts.next(), hosts.next()) else {
            return Err(HttpError::new(400, "Bad Request: a request needs exactly one Host header"));
        };
        if !self.loopback_only || self.accepts(host) {
            return Ok(());
        }
        Err(HttpError::new(
            421,
            "Misdirected Request: this listener is on loopback and answers only Host 127.0.0.1, localhost or [::1] \
             (with or without a port), or a name in the config's allowed_host_names",
        ))
    }

    fn accepts(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        if let Ok(ip) = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return ip.is_loopback();
        }
        self.extra.iter().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// The name part of a `Host` value: without its port, brackets kept for an IPv6 literal.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(hosts: &[&str]) -> Head {
        let mut raw = String::from("GET /healthz HTTP/1.1\r\n");
        for h in hosts {
            raw.push_str(&format!("Host: {h}\r\n"));
        }
        raw.push_str("\r\n");
        super::super::head::parse(raw.as_bytes(), 8192, 100).expect("head")
    }

    #[test]
    fn a_loopback_listener_answers_loopback_names_and_the_configured_ones_only() {
        let rule = HostRule::for_listener("127.0.0.1:8081".parse().expect("addr"), &["Gateway.Internal".into()]);
        for ok in ["127.0.0.1", "127.0.0.1:8081", "localhost", "LOCALHOST:8081", "[::1]", "[::1]:8081", "127.0.0.2", "gateway.internal:80"] {
            assert_eq!(rule.check(&head(&[ok])), Ok(()), "{ok}");
        }
        for refused in ["evil.example", "evil.example:8081", "10.0.0.1", "[2001:db8::1]:8081", "localhost.evil.example", ""] {
            assert_eq!(rule.check(&head(&[refused])).map_err(|e| e.status), Err(421), "{refused:?}");
        }
    }

    #[test]
    fn every_request_needs_exactly_one_host_whatever_the_listener() {
        let open = HostRule::for_listener("0.0.0.0:8081".parse().expect("addr"), &[]);
        for rule in [open.clone(), HostRule::for_listener("127.0.0.1:0".parse().expect("addr"), &[])] {
            assert_eq!(rule.check(&head(&[])).map_err(|e| e.status), Err(400));
            assert_eq!(rule.check(&head(&["localhost", "localhost"])).map_err(|e| e.status), Err(400));
        }
        assert_eq!(open.check(&head(&["gateway.example:8081"])), Ok(()), "not on loopback: any name");
        assert_eq!(HostRule::any().check(&head(&[])), Ok(()), "no rule");
    }
}

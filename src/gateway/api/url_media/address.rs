//! Which addresses a file by URL may come from. The gateway runs beside other services, so a
//! URL a bot was handed (or a redirect it leads to) must not make the gateway fetch from this
//! machine or its networks: loopback, private, link-local, shared (CGNAT) and unique-local
//! addresses are refused unless the operator names the host in `media_from_urls.allow_hosts`;
//! unspecified, multicast, broadcast and reserved ones never serve a file. The addresses are
//! checked after DNS resolution, and the connection goes to exactly the checked ones, so a name
//! that resolves differently a moment later (DNS rebinding) changes nothing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use url::Host;

/// Why an address is not fetched from by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, and IPv6 unique-local fc00::/7 (and the old site-local fec0::/10).
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 100.64/10, carrier-grade NAT.
    Shared,
    /// 0/8, `::`: "this host".
    Unspecified,
    Multicast,
    Broadcast,
    /// 240/4: reserved for future use.
    Reserved,
}

impl Local {
    /// What an operator may allow for a named host: a media server on this machine or in its
    /// networks. The others are never a server's address.
    fn allowable(self) -> bool {
        matches!(self, Local::Loopback | Local::Private | Local::LinkLocal | Local::Shared)
    }
}

impl fmt::Display for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Local::Loopback => "a loopback address",
            Local::Private => "a private address",
            Local::LinkLocal => "a link-local address",
            Local::Shared => "a shared (CGNAT) address",
            Local::Unspecified => "an unspecified address",
            Local::Multicast => "a multicast address",
            Local::Broadcast => "the broadcast address",
            Local::Reserved => "a reserved address",
        })
    }
}

/// The class of an address that is not a public unicast one; `None` for a public one
/// (documentation ranges included: they route nowhere).
pub fn classify(ip: IpAddr) -> Option<Local> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Local> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        _ if ip.is_broadcast() => Local::Broadcast,
        (0, _) => Local::Unspecified,
        (127, _) => Local::Loopback,
        (10, _) | (172, 16..=31) | (192, 168) => Local::Private,
        (169, 254) => Local::LinkLocal,
        (100, 64..=127) => Local::Shared,
        (224..=239, _) => Local::Multicast,
        (240..=255, _) => Local::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Local> {
    let first = ip.segments()[0];
    Some(match first {
        _ if ip.is_unspecified() => Local::Unspecified,
        _ if ip.is_loopback() => Local::Loopback,
        0xfc00..=0xfdff | 0xfec0..=0xfeff => Local::Private,
        0xfe80..=0xfebf => Local::LinkLocal,
        0xff00..=0xffff => Local::Multicast,
        _ => return None,
    })
}

/// The IPv4 address an IPv6 one carries to the same place: IPv4-mapped `::ffff:a.b.c.d` (a
/// dual-stack socket connects to the IPv4 address), the old IPv4-compatible `::a.b.c.d`, and
/// the NAT64 prefix `64:ff9b::/96` (a translator forwards to it). `::` and `::1` are not.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s[..6] {
        [0, 0, 0, 0, 0, 0xffff] | [0x64, 0xff9b, 0, 0, 0, 0] => Some(tail),
        [0, 0, 0, 0, 0, 0] if !ip.is_unspecified() && !ip.is_loopback() => Some(tail),
        _ => None,
    }
}

/// Resolves `host` and keeps the addresses it may be fetched from (every local one too when
/// the operator allows the host); the connection must go to these and no others. Why not,
/// when none is left.
pub fn checked(host: &Host<&str>, port: u16, host_allowed: bool) -> Result<Vec<SocketAddr>, String> {
    let resolved: Vec<SocketAddr> = match host {
        Host::Ipv4(ip) => vec![SocketAddr::new(IpAddr::V4(*ip), port)],
        Host::Ipv6(ip) => vec![SocketAddr::new(IpAddr::V6(*ip), port)],
        // (getaddrinfo cannot be given a deadline: a name server that stalls holds the call.)
        Host::Domain(name) => match (*name, port).to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(_) => return Err(format!("the host name {name} does not resolve")),
        },
    };
    let mut refused = None;
    let kept: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|a| match classify(a.ip()) {
            Some(local) if !(host_allowed && local.allowable()) => {
                refused.get_or_insert(local);
                false
            }
            _ => true,
        })
        .collect();
    match (kept.is_empty(), refused) {
        (false, _) => Ok(kept),
        (true, None) => Err(format!("the host name {host} has no address")),
        (true, Some(local)) => {
            let what = match host {
                Host::Domain(name) => format!("the host {name} resolves to {local}"),
                ip => format!("{ip} is {local}"),
            };
            Err(if local.allowable() {
                format!("{what} (an operator may allow the host in media_from_urls.allow_hosts)")
            } else {
                what
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> Option<Local> {
        classify(ip.parse().expect("an address"))
    }

    #[test]
    fn every_local_range_is_classified_and_public_addresses_are_not() {
        let cases = [
            ("127.0.0.1", Some(Local::Loopback)),
            ("127.255.255.254", Some(Local::Loopback)),
            ("::1", Some(Local::Loopback)),
            ("10.0.0.1", Some(Local::Private)),
            ("10.255.255.255", Some(Local::Private)),
            ("172.16.0.1", Some(Local::Private)),
            ("172.31.255.255", Some(Local::Private)),
            ("192.168.1.1", Some(Local::Private)),
            ("fc00::1", Some(Local::Private)),
            ("fd12:3456::1", Some(Local::Private)),
            ("fec0::1", Some(Local::Private)),
            ("169.254.169.254", Some(Local::LinkLocal)),
            ("fe80::1", Some(Local::LinkLocal)),
            ("febf::1", Some(Local::LinkLocal)),
            ("100.64.0.1", Some(Local::Shared)),
            ("100.127.255.255", Some(Local::Shared)),
            ("0.0.0.0", Some(Local::Unspecified)),
            ("0.1.2.3", Some(Local::Unspecified)),
            ("::", Some(Local::Unspecified)),
            ("224.0.0.1", Some(Local::Multicast)),
            ("239.255.255.250", Some(Local::Multicast)),
            ("ff02::1", Some(Local::Multicast)),
            ("255.255.255.255", Some(Local::Broadcast)),
            ("240.0.0.1", Some(Local::Reserved)),
            // Public, and the neighbours of each range.
            ("8.8.8.8", None),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.169.0.1", None),
            ("169.253.0.1", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("11.0.0.1", None),
            ("223.255.255.255", None),
            ("2001:4860:4860::8888", None),
            ("fbff::1", None),
            ("fe7f::1", None),
            // Documentation ranges route nowhere: either answer would do.
            ("192.0.2.1", None),
            ("2001:db8::1", None),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_what_they_carry() {
        for (ip, want) in [
            ("::ffff:127.0.0.1", Some(Local::Loopback)),
            ("::ffff:10.1.2.3", Some(Local::Private)),
            ("::ffff:169.254.169.254", Some(Local::LinkLocal)),
            ("::ffff:100.64.0.1", Some(Local::Shared)),
            ("::ffff:0.0.0.0", Some(Local::Unspecified)),
            ("::ffff:224.0.0.1", Some(Local::Multicast)),
            ("::ffff:255.255.255.255", Some(Local::Broadcast)),
            ("::127.0.0.1", Some(Local::Loopback)),
            ("::10.0.0.1", Some(Local::Private)),
            ("64:ff9b::7f00:1", Some(Local::Loopback)),
            ("64:ff9b::a00:1", Some(Local::Private)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::808:808", None),
        ] {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn only_checked_addresses_are_kept_and_an_allowed_host_reaches_its_local_ones() {
        let lo = Host::Ipv4(Ipv4Addr::LOCALHOST);
        let e = checked(&lo, 80, false).expect_err("loopback");
        assert_eq!(e, "127.0.0.1 is a loopback address (an operator may allow the host in media_from_urls.allow_hosts)");
        assert_eq!(checked(&lo, 80, true).expect("allowed"), ["127.0.0.1:80".parse::<SocketAddr>().expect("addr")]);
        // Never a server, allowed or not.
        for host in [Host::Ipv4(Ipv4Addr::UNSPECIFIED), Host::Ipv4(Ipv4Addr::new(224, 0, 0, 1)), Host::Ipv6(Ipv6Addr::UNSPECIFIED)] {
            let e = checked(&host, 80, true).expect_err("never");
            assert!(!e.contains("allow_hosts"), "{e}");
        }
        let mapped = Host::Ipv6("::ffff:10.0.0.1".parse().expect("v6"));
        assert!(checked(&mapped, 443, false).expect_err("mapped").contains("is a private address"));
        let public = Host::Ipv4(Ipv4Addr::new(93, 184, 215, 14));
        assert_eq!(checked(&public, 443, false).expect("public").len(), 1);
        // A name is resolved first, and judged by what it resolves to.
        let e = checked(&Host::Domain("localhost"), 8080, false).expect_err("localhost");
        assert!(e.starts_with("the host localhost resolves to a loopback address"), "{e}");
        let kept = checked(&Host::Domain("localhost"), 8080, true).expect("allowed");
        assert!(!kept.is_empty() && kept.iter().all(|a| a.ip().is_loopback() && a.port() == 8080), "{kept:?}");
        let e = checked(&Host::Domain("no-such-host.invalid"), 80, true).expect_err("unresolved");
        assert!(e.contains("does not resolve"), "{e}");
    }
}

//! Server configuration, shared by both environments. The binary parses it once (flags and
//! environment variables, see docs/server.md) and passes it down; nothing in this crate reads the
//! process environment.

use std::time::Duration;

/// Everything the protocol layer needs to serve one environment.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Most named HTTP sessions (`--max-sessions`); the default session is reserved outside it.
    pub max_sessions: usize,
    /// Named sessions one client may hold (`--max-sessions-per-client`, default a quarter of
    /// `max_sessions`); past it the client's least recently used session is closed for the new
    /// one.
    pub max_sessions_per_client: usize,
    /// An idle session, campaign or self-improvement run expires after this long
    /// (`--session-idle-secs`).
    pub session_idle: Duration,
    pub ws: crate::ws_config::WsConfig,
    pub security: SecurityConfig,
    pub timeouts: Timeouts,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_sessions: 1024,
            max_sessions_per_client: crate::sessions::default_per_client(1024),
            session_idle: Duration::from_secs(1800),
            ws: Default::default(),
            security: Default::default(),
            timeouts: Default::default(),
        }
    }
}

/// Default of [`Timeouts::max_connections`]: well above a trainer's or load test's connections
/// and the slow clients the header-read timeout reclaims, and a bound on per-connection buffers.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;

/// Connection limits: the timeouts and the cap on open connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A connection waiting for a request head (a new connection, or a keep-alive connection
    /// between requests) is closed after this long: hyper arms the header-read timer whenever the
    /// connection waits for a head, so this is also the keep-alive idle timeout.
    pub header_read: Duration,
    /// A request body must arrive completely within this long (408 otherwise).
    pub body_read: Duration,
    /// After SIGTERM/SIGINT, in-flight requests get this long to finish.
    pub shutdown_grace: Duration,
    /// Most HTTP connections open at once (`--max-connections`, at least 1); past it, new
    /// connections wait in the listen backlog until one closes. A connection upgraded to a
    /// WebSocket leaves the count (WebSocket sessions have their own limits).
    pub max_connections: usize,
    /// Most HTTP connections open at once from one client address
    /// (`--max-connections-per-client`); past it a new connection from that address is answered
    /// 503 and closed, so one client cannot hold every slot.
    pub max_connections_per_client: usize,
}

/// Default of [`Timeouts::max_connections_per_client`]: a quarter of the connection cap.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: u32 = 256;

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(15),
            body_read: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT as usize,
        }
    }
}

/// Origin, Host, operator key, proxies and rate limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `CORS_ORIGINS`: origins allowed to call the server from a browser (`*` for any). Empty
    /// (the default): CORS is off and a request carrying any `Origin` other than the server's
    /// own is refused.
    pub cors_origins: Vec<String>,
    /// `ALLOWED_HOSTS`: `Host` names served. On a loopback bind loopback names are always
    /// served besides these; on another bind, when set, only these are (DNS-rebinding guard).
    pub allowed_hosts: Vec<String>,
    /// Whether the server is bound to a loopback address (set by the binary from `--host`).
    pub loopback_bind: bool,
    /// The operator credential (`ADMIN_API_KEY`, or the key the binary generated at start):
    /// operator routes need `X-API-Key: <key>` from every address. `None`: operator routes are
    /// refused to everyone (there is no address-based exemption).
    pub admin_api_key: Option<String>,
    /// `TRUST_PROXY_HEADERS`: take the client address from `X-Forwarded-For` / `X-Real-IP`, but
    /// only on connections from [`SecurityConfig::trusted_proxies`].
    pub trust_proxy_headers: bool,
    /// `TRUSTED_PROXIES`: the reverse proxies whose forwarding headers are read (addresses or
    /// CIDR ranges). Empty with `trust_proxy_headers` on: loopback peers only (a proxy on the
    /// same host).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `RATE_LIMIT_PER_MIN`: requests per minute per client address.
    pub client_rate_per_min: u32,
    /// `RATE_LIMIT_SESSION_PER_MIN`: requests per minute per session id.
    pub session_rate_per_min: u32,
    /// `RATE_LIMIT_LOOPBACK`: also throttle loopback clients (off: a client whose connection
    /// comes from loopback, not through a proxy, runs unthrottled).
    pub rate_limit_loopback: bool,
    /// Most clients the rate limiter remembers (least recently seen forgotten first).
    pub rate_limit_clients: usize,
}

/// Default of [`SecurityConfig::rate_limit_clients`].
pub const DEFAULT_RATE_LIMIT_CLIENTS: usize = 65_536;

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            cors_origins: vec![],
            allowed_hosts: vec![],
            loopback_bind: true,
            admin_api_key: None,
            trust_proxy_headers: false,
            trusted_proxies: vec![],
            client_rate_per_min: 6000,
            session_rate_per_min: 1200,
            rate_limit_loopback: false,
            rate_limit_clients: DEFAULT_RATE_LIMIT_CLIENTS,
        }
    }
}

/// Parse a boolean setting the way shells and container files write them: `1/0`, `true/false`,
/// `yes/no`, `on/off`, any case; empty (`VAR=`, as a container file leaves an unset value) is
/// off; anything else is an error naming what was given.
pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "'{}' is not a boolean: use 1/0, true/false, yes/no or on/off",
            crate::error::prefix(v)
        )),
    }
}

/// Parse a comma-separated list of proxy addresses or CIDR ranges (`10.0.0.1`, `10.0.0.0/8`).
pub fn parse_proxies(v: &str) -> Result<Vec<ipnet::IpNet>, String> {
    split_list(v)
        .iter()
        .map(|item| {
            item.parse::<ipnet::IpNet>()
                .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    format!(
                        "TRUSTED_PROXIES: '{}' is not an address or CIDR range",
                        crate::error::prefix(item)
                    )
                })
        })
        .collect()
}

/// Split a comma-separated list, trimming and dropping empty items.
pub fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|o| o.trim().to_owned())
        .filter(|o| !o.is_empty())
        .collect()
}

impl SecurityConfig {
    /// Check the lists: every origin must be a valid header value (or `*`).
    pub fn validate(&self) -> Result<(), String> {
        for o in &self.cors_origins {
            if o != "*" && axum::http::HeaderValue::from_str(o).is_err() {
                return Err(format!(
                    "CORS_ORIGINS: invalid origin '{}'",
                    crate::error::prefix(o)
                ));
            }
        }
        if self.client_rate_per_min == 0 || self.session_rate_per_min == 0 {
            return Err("rate limits must be at least 1 per minute".into());
        }
        if self.rate_limit_clients == 0 {
            return Err("the rate limiter must remember at least 1 client".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_validation() {
        assert_eq!(
            split_list(" https://a.example, ,https://b.example "),
            vec!["https://a.example", "https://b.example"]
        );
        let mut c = SecurityConfig {
            cors_origins: vec!["bad\norigin".into()],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("CORS_ORIGINS"));
        c.cors_origins = vec!["*".into(), "https://a.example".into()];
        assert!(c.validate().is_ok());
        c.client_rate_per_min = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn booleans_and_proxies() {
        for v in ["1", "true", "TRUE", "Yes", "on", " ON "] {
            assert_eq!(parse_bool(v), Ok(true), "{v}");
        }
        for v in ["0", "false", "False", "no", "OFF", "", "  "] {
            assert_eq!(parse_bool(v), Ok(false), "{v:?}");
        }
        for v in ["2", "y", "enable", "truee"] {
            assert!(parse_bool(v).unwrap_err().contains("not a boolean"), "{v}");
        }
        let p = parse_proxies("10.0.0.0/8, 192.168.1.7,::1").unwrap();
        assert_eq!(p.len(), 3);
        assert!(p[1].contains(&"192.168.1.7".parse::<std::net::IpAddr>().unwrap()));
        assert!(parse_proxies("10.0.0.0/99")
            .unwrap_err()
            .contains("TRUSTED_PROXIES"));
    }
}

//! The operator credential of `serve`: operator routes need it from every address. When none is
//! configured (`ADMIN_API_KEY` / `--admin-api-key`), the server generates one at start from the
//! operating system's random source and writes it to a file only the user can read (0600, the
//! convention of local notebook servers), then prints where it is (stderr). Clients read the key
//! from that file (or `ADMIN_API_KEY`).

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Variable naming the operator key file (flag `--operator-key-file`).
pub const ENV_KEY_FILE: &str = "LEDGERSHIELD_OPERATOR_KEY_FILE";

/// The default key file of the server on `port`: `operator-key-<port>` in
/// `$XDG_STATE_HOME/ledgershield/`, else `$HOME/.local/state/ledgershield/`, else `data/`. One
/// file per port, so two servers on one machine never replace each other's key.
pub fn default_path(get: impl Fn(&str) -> Option<String>, port: u16) -> PathBuf {
    let non_empty = |k: &str| get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let state = non_empty("XDG_STATE_HOME")
        .or_else(|| non_empty("HOME").map(|h| h.join(".local").join("state")));
    let name = format!("operator-key-{port}");
    match state {
        Some(dir) => dir.join("ledgershield").join(name),
        None => PathBuf::from("data").join(name),
    }
}

/// A new key: 256 bits from the operating system's random source, as hex.
fn generate() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Write `key` to `path`, readable and writable by the user only (the directory is created
/// 0700 when missing; an existing file is replaced and its mode reset to 0600).
pub fn write_key(path: &Path, key: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o
        .open(path)
        .with_context(|| format!("writing the operator key to {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    std::io::Write::write_all(&mut f, format!("{key}\n").as_bytes())?;
    Ok(())
}

/// Make sure the server has an operator key: the configured one, or a generated one written to
/// `file` (default [`default_path`]). Logs where it is, and warns when the server is reachable
/// from the network without a configured key or without a Host allow-list.
pub fn ensure(
    security: &mut ls_server::SecurityConfig,
    file: Option<PathBuf>,
    addr: SocketAddr,
) -> Result<()> {
    let network = !addr.ip().is_loopback();
    if network && security.allowed_hosts.is_empty() {
        tracing::warn!(
            %addr,
            "bound to a non-loopback address without ALLOWED_HOSTS: the Host header is not checked (set --allowed-hosts to the names clients use)"
        );
    }
    if security.admin_api_key.is_some() {
        tracing::info!("operator routes need the configured ADMIN_API_KEY (X-API-Key)");
        return Ok(());
    }
    let path = file.unwrap_or_else(|| default_path(|k| std::env::var(k).ok(), addr.port()));
    let key = generate();
    write_key(&path, &key)?;
    security.admin_api_key = Some(key);
    if network {
        tracing::warn!(
            %addr,
            "reachable from the network with no ADMIN_API_KEY configured: a generated operator key guards the operator routes; it is in {}",
            path.display()
        );
    }
    // On stderr: stdout's first line stays the "listening on" line scripts read.
    eprintln!(
        "Operator key (send as X-API-Key on operator routes) written to {} (mode 0600)",
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_location_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            default_path(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")]), 8000),
            PathBuf::from("/s/ledgershield/operator-key-8000")
        );
        assert_eq!(
            default_path(env(&[("HOME", "/h")]), 8001),
            PathBuf::from("/h/.local/state/ledgershield/operator-key-8001")
        );
        assert_eq!(
            default_path(env(&[]), 9),
            PathBuf::from("data/operator-key-9")
        );
    }

    #[test]
    fn written_key_is_private_and_read_back() {
        let dir = std::env::temp_dir().join(format!("ls-opkey-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("sub").join("operator-key");
        let key = generate();
        assert_eq!(key.len(), 64);
        assert_ne!(key, generate());
        write_key(&path, &key).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), key);
        // Rewriting replaces the key and keeps the mode.
        let next = generate();
        write_key(&path, &next).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), next);
        let _ = std::fs::remove_dir_all(dir);
    }
}

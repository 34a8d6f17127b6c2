//! The database target as the command line shows it: a `postgres://` URL with its password
//! replaced by `***` (help text, log lines, errors), a file path as it is. The target itself is
//! only ever handed to the store.

use std::path::Path;

/// `target` fit to print: the password of a URL (`scheme://user:password@host…`) masked.
pub fn shown(target: &Path) -> String {
    redact(&target.to_string_lossy())
}

/// [`shown`] of a target given as text.
pub fn redact(target: &str) -> String {
    let Some((scheme, rest)) = target.split_once("://") else {
        return target.to_owned();
    };
    // The authority ends at the first '/', '?' or '#'; user info ends at its last '@'.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return redact_query(target);
    };
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    redact_query(&format!("{scheme}://{user}@{host}{tail}"))
}

/// A `password=` query parameter (libpq's URL form allows one) masked too.
fn redact_query(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{head}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_and_paths_kept() {
        assert_eq!(
            redact("postgres://ls:s3cr3t@db.internal:5432/ledgershield"),
            "postgres://ls:***@db.internal:5432/ledgershield"
        );
        assert_eq!(
            redact("postgresql://ls:p@ss:w@rd@db/x?sslmode=disable"),
            "postgresql://ls:***@db/x?sslmode=disable"
        );
        assert_eq!(
            redact("postgres://ls@db/x?password=hunter2&application_name=a"),
            "postgres://ls@db/x?password=***&application_name=a"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact("data/ledgershield.db"), "data/ledgershield.db");
        assert_eq!(
            shown(Path::new("/tmp/a:b@c.db")),
            "/tmp/a:b@c.db",
            "a file path is not a URL"
        );
    }
}

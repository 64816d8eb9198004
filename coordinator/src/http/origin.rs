//! The `Origin` check of `/mcp`: a request that carries an `Origin` must
//! come from the coordinator's own (its public URL's `scheme://host[:port]`);
//! one without is served (clients outside a browser send none).

use axum::http::{HeaderMap, header};
use drover_wire::ErrorCode;

use crate::error::Error;

/// `scheme://host[:port]` of an `http(s)` URL or origin, lowercased and
/// without the scheme's default port; `None` for anything else (`null`).
pub(super) fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let authority = authority.strip_suffix(default_port).unwrap_or(&authority);
    Some(format!("{scheme}://{authority}"))
}

/// Refuses a request whose `Origin` is present and is not `public_url`'s.
pub(super) fn same_origin(headers: &HeaderMap, public_url: &str) -> Result<(), Error> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let own = origin_of(public_url);
    let theirs = origin.to_str().ok().and_then(origin_of);
    if theirs.is_some() && theirs == own {
        return Ok(());
    }
    Err(Error::api(
        ErrorCode::ForbiddenOrigin,
        format!(
            "/mcp serves no web page of another site: the Origin {:?} is not this coordinator's ({}); clients outside a browser send no Origin",
            String::from_utf8_lossy(origin.as_bytes())
                .chars()
                .take(200)
                .collect::<String>(),
            own.as_deref().unwrap_or(public_url)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_by_scheme_host_and_port() {
        let own = origin_of("https://CI.example.com:443/drover").unwrap();
        assert_eq!(own, "https://ci.example.com");
        assert_eq!(
            origin_of("https://ci.example.com").as_deref(),
            Some(own.as_str())
        );
        assert_eq!(
            origin_of("http://[::1]:7700").as_deref(),
            Some("http://[::1]:7700")
        );
        assert_ne!(origin_of("http://ci.example.com"), Some(own.clone()));
        assert_ne!(origin_of("https://ci.example.com:8443"), Some(own));
        for bad in [
            "null",
            "",
            "ci.example.com",
            "file:///x",
            "https://u@ci.example.com",
        ] {
            assert_eq!(origin_of(bad), None, "{bad}");
        }
    }
}

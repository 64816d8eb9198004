//! `drover://` links: `pair?url=…&code=dpc_…` pairs this device to a
//! member; `join?url=…&ref=…&token=djt_…` lends it to a (workspace) pool.

use crate::error::{AppError, AppResult};

#[derive(Clone, PartialEq, Eq)]
pub enum Link {
    Pair {
        url: String,
        code: String,
    },
    Join {
        url: String,
        reference: String,
        token: String,
    },
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pair { url, .. } => write!(f, "Pair {{ url: {url:?}, .. }}"),
            Self::Join { url, reference, .. } => {
                write!(f, "Join {{ url: {url:?}, ref: {reference:?}, .. }}")
            }
        }
    }
}

impl Link {
    pub fn coordinator(&self) -> &str {
        match self {
            Self::Pair { url, .. } | Self::Join { url, .. } => url,
        }
    }

    pub fn parse(text: &str) -> AppResult<Self> {
        let bad = |why: &str| AppError::new("BAD_LINK", format!("not a Drover link: {why}"));
        let url = url::Url::parse(text.trim()).map_err(|_| bad("it does not parse as a URL"))?;
        if url.scheme() != "drover" {
            return Err(bad("it does not start with drover://"));
        }
        let query = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| bad(&format!("it has no {name}=")))
        };
        let coordinator = query("url")?;
        let parsed = url::Url::parse(&coordinator).map_err(|_| bad("its url= is not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(bad("its url= must be an http(s) URL"));
        }
        let coordinator = coordinator.trim_end_matches('/').to_owned();
        let secret = |name: &str, prefix: &str| {
            let value = query(name)?;
            let ok = value.starts_with(prefix)
                && value.len() <= 200
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            ok.then_some(value)
                .ok_or_else(|| bad(&format!("its {name}= is not a {prefix}… value")))
        };
        match url.host_str() {
            Some("pair") => Ok(Self::Pair {
                url: coordinator,
                code: secret("code", "dpc_")?,
            }),
            Some("join") => Ok(Self::Join {
                url: coordinator,
                reference: query("ref")?,
                token: secret("token", "djt_")?,
            }),
            _ => Err(bad("it is neither drover://pair nor drover://join")),
        }
    }
}

/// The first `drover://` link among a process's arguments.
pub fn find_in_args<I: IntoIterator<Item = String>>(args: I) -> Option<String> {
    args.into_iter().find(|a| a.starts_with("drover://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_and_join_links_parse() {
        let pair =
            Link::parse("drover://pair?url=http%3A%2F%2F127.0.0.1%3A8080%2F&code=dpc_abc").unwrap();
        assert_eq!(
            pair,
            Link::Pair {
                url: "http://127.0.0.1:8080".into(),
                code: "dpc_abc".into()
            }
        );
        let join =
            Link::parse("drover://join?url=https://c.example&ref=ws%3Aacme%3Abuild&token=djt_x1")
                .unwrap();
        assert_eq!(
            join,
            Link::Join {
                url: "https://c.example".into(),
                reference: "ws:acme:build".into(),
                token: "djt_x1".into()
            }
        );
        assert!(!format!("{join:?}").contains("djt_x1"));
    }

    #[test]
    fn bad_links_say_why() {
        for (link, why) in [
            ("http://pair?url=http://c&code=dpc_a", "drover://"),
            ("drover://pair?code=dpc_a", "url="),
            ("drover://pair?url=file:///etc&code=dpc_a", "http(s)"),
            ("drover://pair?url=http://c&code=abc", "dpc_"),
            ("drover://pair?url=http://c&code=dpc_a%20b", "dpc_"),
            ("drover://join?url=http://c&token=djt_a", "ref="),
            ("drover://steal?url=http://c", "neither"),
            ("not a link", "parse"),
        ] {
            let e = Link::parse(link).unwrap_err();
            assert_eq!(e.code, "BAD_LINK");
            assert!(e.message.contains(why), "{link}: {}", e.message);
        }
    }

    #[test]
    fn the_link_is_found_among_arguments() {
        let args = [
            "drover-desktop",
            "--flag",
            "drover://pair?url=http://c&code=dpc_a",
        ];
        assert_eq!(
            find_in_args(args.map(String::from)).as_deref(),
            Some("drover://pair?url=http://c&code=dpc_a")
        );
        assert_eq!(find_in_args(["x".to_owned()]), None);
    }
}

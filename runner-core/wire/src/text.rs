//! The wire's two text conventions, shared by the coordinator and its
//! clients: times are Unix milliseconds, read as UTC calendar dates here;
//! link and query values are percent-encoded here.

/// `s` for a URL's query: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`percent_encode`] (any `%XX`, the rest as it is);
/// `None` for a malformed escape or bytes that are not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Runner-milliseconds as runner-minutes, to a tenth (the domain's).
pub use drover_domain::billing::runner_minutes;

/// Calendar dates in UTC: the domain's (`drover_domain::calendar`).
pub use drover_domain::calendar::{civil_from_days, days_from_civil};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(
            percent_encode("https://ci.example.com:8443/drover?x=1&y"),
            "https%3A%2F%2Fci.example.com%3A8443%2Fdrover%3Fx%3D1%26y"
        );
        assert_eq!(percent_encode("dpc_0a-z.~"), "dpc_0a-z.~");
        assert_eq!(percent_encode("é"), "%C3%A9");
        for s in ["https://ci.example.com:8443/x?y=1&z", "dpc_0a-z.~", "é"] {
            assert_eq!(percent_decode(&percent_encode(s)).as_deref(), Some(s));
        }
        for bad in ["%", "%4", "%zz", "%FF"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn runner_minutes_round_to_a_tenth() {
        assert_eq!(runner_minutes(0), "0.0");
        assert_eq!(runner_minutes(2_999), "0.0");
        assert_eq!(runner_minutes(3_000), "0.1");
        assert_eq!(runner_minutes(90_000), "1.5");
    }
}

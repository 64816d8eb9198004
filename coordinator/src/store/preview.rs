//! A job's summary in lists: its command or script cut to a short preview,
//! so that listing jobs never reads (or answers) a megabyte command whole.
//! `GET /v1/jobs/{id}` still answers the whole spec. A large spec's summary
//! is written at submit (`jobs.summary`, migration 0018); a list reads a
//! small spec whole, and of an older job's spec only its first characters,
//! decoded as far as they go. Also the rows and pages of a list.

use serde::{Deserialize, Serialize};

use sqlx::FromRow;

use super::job_row::JobRow;
use super::model::Job;
use crate::store::error::{Error, Result};
use drover_domain::job::JobSpec;

/// Characters (and bytes: a spec of more bytes gets a summary) of a stored
/// spec that a list reads.
pub const SPEC_PREFIX_CHARS: i64 = 4096;

/// Bytes of command (all its arguments, each counting one more) or of
/// script that a list shows.
pub const PREVIEW_BYTES: usize = 512;

/// What a list shows of a job's spec; stored as JSON in `jobs.summary`.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub command: Vec<String>,
    pub script: Option<String>,
    /// Something was left out: the command or script is longer than this.
    pub truncated: bool,
}

/// A page of a job list (`Store::list_jobs`).
#[derive(Debug)]
pub struct JobPage {
    pub jobs: Vec<ListedJob>,
    /// Where the next (older) page starts, when there may be one.
    pub next: Option<i64>,
}

/// A job in a list: its spec is a preview (`job.spec_truncated` when cut).
#[derive(Debug)]
pub struct ListedJob {
    pub job: Job,
    /// Pass as `before` for the jobs older than this one.
    pub cursor: i64,
}

#[derive(FromRow)]
pub(super) struct ListRow {
    #[sqlx(flatten)]
    job: JobRow,
    seq: i64,
    summary: Option<String>,
    spec_chars: i64,
}

impl ListRow {
    /// About the bytes this row takes in an answer (before JSON escapes).
    pub(super) fn approx_size(&self) -> usize {
        let r = &self.job;
        let texts = [
            &r.id,
            &r.state,
            &r.runtime_ref,
            &r.runtime_id,
            &r.submitter_id,
        ];
        let optional = [&r.pinned_runner_id, &r.error, &r.ran_by, &r.ran_by_owner];
        // Field names, numbers and punctuation: under 400 bytes.
        400 + texts.iter().map(|t| t.len()).sum::<usize>()
            + optional
                .iter()
                .flat_map(|t| t.as_ref())
                .map(String::len)
                .sum::<usize>()
            + r.requires.len()
            + (r.spec.len() + self.summary.as_ref().map_or(0, String::len)).min(2 * PREVIEW_BYTES)
    }

    pub(super) fn into_listed(self) -> Result<ListedJob> {
        let shown = match &self.summary {
            Some(summary) => serde_json::from_str(summary)
                .map_err(|e| Error::Corrupt(format!("job summary: {e}")))?,
            None => preview(&self.job.spec, self.spec_chars <= SPEC_PREFIX_CHARS),
        };
        let mut job = JobRow {
            spec: String::from("{}"),
            ..self.job
        }
        .into_job()?;
        job.spec.command = shown.command;
        job.spec.script = shown.script;
        job.spec_truncated = shown.truncated;
        Ok(ListedJob {
            job,
            cursor: self.seq,
        })
    }
}

/// The `jobs.summary` of a spec stored as `spec_json`: `None` when a list
/// may read the spec itself.
pub fn summary(spec_json: &str) -> Option<String> {
    (spec_json.len() > SPEC_PREFIX_CHARS as usize)
        .then(|| serde_json::to_string(&preview(spec_json, true)).ok())
        .flatten()
}

/// The preview of a spec whose stored JSON starts with `prefix`; `whole`
/// when `prefix` is all of it.
pub fn preview(prefix: &str, whole: bool) -> Preview {
    let (command, script, complete) = match whole
        .then(|| serde_json::from_str::<JobSpec>(prefix).ok())
        .flatten()
    {
        Some(spec) => (spec.command, spec.script, true),
        None => lenient(prefix),
    };
    let mut truncated = !complete;
    let mut left = PREVIEW_BYTES;
    let mut shown = Vec::new();
    for arg in command {
        if left == 0 {
            truncated = true;
            break;
        }
        let cost = arg.len() + 1;
        if cost <= left {
            left -= cost;
            shown.push(arg);
        } else {
            shown.push(cut(arg, left - 1));
            truncated = true;
            left = 0;
        }
    }
    let script = script.map(|s| {
        if s.len() > PREVIEW_BYTES {
            truncated = true;
        }
        cut(s, PREVIEW_BYTES)
    });
    Preview {
        command: shown,
        script,
        truncated,
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Decodes `command` and `script` from the start of a spec's JSON (as
/// `JobSpec` writes it: `{"command":[…],"script":…,…}`), keeping what is
/// there of a string the prefix cuts. The flag: both were read to their end.
fn lenient(prefix: &str) -> (Vec<String>, Option<String>, bool) {
    let mut sc = Scan {
        s: prefix.as_bytes(),
        i: 0,
    };
    let (mut command, mut script) = (Vec::new(), None);
    let (mut seen_command, mut seen_script) = (false, false);
    if !sc.eat(b'{') {
        return (command, script, false);
    }
    while let Some((key, true)) = sc.string() {
        if !sc.eat(b':') {
            break;
        }
        match key.as_str() {
            "command" => {
                if !sc.eat(b'[') {
                    break;
                }
                if !sc.eat(b']') {
                    loop {
                        let Some((arg, closed)) = sc.string() else {
                            return (command, script, false);
                        };
                        command.push(arg);
                        if !closed {
                            return (command, script, false);
                        }
                        if sc.eat(b',') {
                            continue;
                        }
                        if !sc.eat(b']') {
                            return (command, script, false);
                        }
                        break;
                    }
                }
                seen_command = true;
            }
            "script" => {
                if !sc.null() {
                    let Some((text, closed)) = sc.string() else {
                        break;
                    };
                    script = Some(text);
                    if !closed {
                        break;
                    }
                }
                seen_script = true;
            }
            // The other fields come after these two.
            _ => break,
        }
        if seen_command && seen_script || !sc.eat(b',') {
            break;
        }
    }
    (command, script, seen_command && seen_script)
}

struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.skip_space();
        let hit = self.s.get(self.i) == Some(&b);
        self.i += usize::from(hit);
        hit
    }

    fn null(&mut self) -> bool {
        self.skip_space();
        let hit = self.s[self.i..].starts_with(b"null");
        if hit {
            self.i += 4;
        }
        hit
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = std::str::from_utf8(self.s.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A JSON string: its text, and whether it ended before the input did.
    /// `None` when no string starts here.
    fn string(&mut self) -> Option<(String, bool)> {
        if !self.eat(b'"') {
            return None;
        }
        let mut out = Vec::new();
        let mut closed = false;
        while let Some(&b) = self.s.get(self.i) {
            match b {
                b'"' => {
                    self.i += 1;
                    closed = true;
                    break;
                }
                b'\\' => {
                    let Some(&e) = self.s.get(self.i + 1) else {
                        break;
                    };
                    let simple = match e {
                        b'"' | b'\\' | b'/' => Some(e),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        out.push(c);
                        self.i += 2;
                        continue;
                    }
                    if e != b'u' {
                        break;
                    }
                    let Some(unit) = self.hex4(self.i + 2) else {
                        break;
                    };
                    let (c, len) = if (0xD800..0xDC00).contains(&unit) {
                        // A surrogate pair: `\uD83D\uDE00`.
                        match (self.s.get(self.i + 6..self.i + 8), self.hex4(self.i + 8)) {
                            (Some(b"\\u"), Some(low)) if (0xDC00..0xE000).contains(&low) => {
                                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                                (char::from_u32(c), 12)
                            }
                            _ if self.s.len() < self.i + 12 => break,
                            _ => (None, 6),
                        }
                    } else {
                        (char::from_u32(unit), 6)
                    };
                    let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    self.i += len;
                }
                _ => {
                    out.push(b);
                    self.i += 1;
                }
            }
        }
        Some((String::from_utf8_lossy(&out).into_owned(), closed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_json(command: &[&str], script: Option<&str>) -> String {
        serde_json::to_string(&JobSpec {
            command: command.iter().map(|s| s.to_string()).collect(),
            script: script.map(str::to_owned),
            timeout_seconds: Some(60),
            image: Some("alpine".into()),
        })
        .unwrap()
    }

    fn prefix(s: &str, chars: usize) -> (String, bool) {
        let p: String = s.chars().take(chars).collect();
        let whole = p.len() == s.len();
        (p, whole)
    }

    #[test]
    fn a_small_spec_is_shown_whole() {
        let json = spec_json(&["make", "-j4", "test"], None);
        let p = preview(&json, true);
        assert_eq!(p.command, ["make", "-j4", "test"]);
        assert_eq!(p.script, None);
        assert!(!p.truncated);
        let json = spec_json(&[], Some("echo hi\nexit 0"));
        let p = preview(&json, true);
        assert_eq!(p.script.as_deref(), Some("echo hi\nexit 0"));
        assert!(p.command.is_empty() && !p.truncated);
    }

    #[test]
    fn a_megabyte_command_is_cut_to_the_preview() {
        let big = "x".repeat(1 << 20);
        let json = spec_json(&["sh", "-c", &big], None);
        let (head, whole) = prefix(&json, SPEC_PREFIX_CHARS as usize);
        assert!(!whole);
        let p = preview(&head, whole);
        assert!(p.truncated);
        assert_eq!(p.command[..2], ["sh", "-c"]);
        assert_eq!(p.command.len(), 3);
        let shown: usize = p.command.iter().map(|a| a.len() + 1).sum();
        assert!(shown <= PREVIEW_BYTES, "{shown}");
        assert!(p.command[2].chars().all(|c| c == 'x'));

        let json = spec_json(&[], Some(&big));
        let (head, whole) = prefix(&json, SPEC_PREFIX_CHARS as usize);
        let p = preview(&head, whole);
        assert!(p.truncated);
        assert_eq!(p.script.unwrap().len(), PREVIEW_BYTES);
    }

    #[test]
    fn only_a_large_spec_gets_a_summary() {
        assert_eq!(summary(&spec_json(&["true"], None)), None);
        let json = spec_json(&["echo", &"y".repeat(5000)], None);
        let stored = summary(&json).expect("a summary");
        let p: Preview = serde_json::from_str(&stored).unwrap();
        assert!(p.truncated && p.command[0] == "echo");
        assert!(stored.len() < 2 * PREVIEW_BYTES, "{}", stored.len());
    }

    #[test]
    fn many_arguments_are_cut_too() {
        let args: Vec<String> = (0..4096).map(|_| String::new()).collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let p = preview(&spec_json(&refs, None), true);
        assert!(p.truncated);
        assert_eq!(p.command.len(), PREVIEW_BYTES);
    }

    #[test]
    fn escapes_decode_and_a_cut_escape_is_dropped() {
        let text = "é\"\\\n\t\u{1}😀 tail";
        let json = spec_json(&[text], None);
        let ascii = json.replace('é', "\\u00e9").replace('😀', "\\ud83d\\ude00");
        for source in [&json, &ascii] {
            let p = preview(source, true);
            assert_eq!(p.command, [text]);
            // Every cut of the JSON decodes to a prefix of the text.
            for n in 0..source.chars().count() {
                let (head, whole) = prefix(source, n);
                let p = preview(&head, whole);
                assert!(p.command.len() <= 1);
                if let Some(a) = p.command.first() {
                    assert!(text.starts_with(a.as_str()), "{n}: {a:?}");
                }
                // Only what follows the command and script may be missing.
                assert!(p.truncated || head.contains(r#""script":null"#), "{n}");
            }
        }
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character_boundary() {
        let json = spec_json(&[], Some(&"é".repeat(1000)));
        let p = preview(&json, true);
        let script = p.script.unwrap();
        assert!(script.len() <= PREVIEW_BYTES && script.chars().all(|c| c == 'é'));
        assert!(p.truncated);
    }

    #[test]
    fn an_unexpected_shape_gives_an_empty_truncated_preview() {
        for odd in [
            "",
            "[1,2]",
            "{\"image\":\"x\",\"command\":[\"a\"]}",
            "{\"command\":5}",
        ] {
            let p = preview(odd, false);
            assert!(p.truncated, "{odd}");
            assert!(p.command.len() <= 1);
        }
    }
}

//! Seed 001's memory: `POST /v1/memory/write {general_session_id, target:
//! "long_term" | "daily", content}` → `{path}`, and `GET
//! /v1/memory/search?q&kind&limit` → `{results: [{path, excerpt,
//! line_start?, line_end?, score?}]}` (the optional fields as the seed's
//! published schema has them). A write goes in the conversation's
//! session; a search names none (the seed's query has no session).
//!
//! Everything the service says is read to a shape before anyone sees it:
//! an answer of another shape is `BAD_ANSWER`, never half-shown, and an
//! error answer keeps the service's own code, message and details. Bounds
//! are the link's: bodies of at most 1 MiB either way, one deadline per
//! command, and the terminal shows only escaped text.

use std::time::Duration;

use hyper::Method;
use serde::Serialize;
use serde_json::{Value, json};

use super::super::http::{Failure, Service, query_component};
use super::session::Session;
pub use crate::cli::MemoryTarget as Target;

/// Bytes of a note written.
pub const MAX_CONTENT: usize = 1 << 20;
/// Characters of a search query.
pub const MAX_QUERY: usize = 1000;
/// Characters of a `kind`.
const MAX_KIND: usize = 64;
/// Characters of a path the service names.
const MAX_PATH: usize = 4096;

/// Why a memory command did not do its work: the service's own error
/// (its code, message and details, with the HTTP status), or ours.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The input was wrong and nothing was sent (exit 2); whatever code
    /// a service uses, its errors are never this.
    #[serde(skip)]
    pub bad_input: bool,
}

impl Problem {
    pub fn ours(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            status: None,
            details: None,
            bad_input: false,
        }
    }

    /// The input was wrong: `INVALID_INPUT`, nothing sent.
    pub fn input(message: impl Into<String>) -> Self {
        Self {
            bad_input: true,
            ..Self::ours("INVALID_INPUT", message)
        }
    }

    /// One line for the terminal: escaped, cut.
    pub fn shown(&self) -> String {
        let status = self
            .status
            .map(|s| format!(" (HTTP {s})"))
            .unwrap_or_default();
        let text = format!("{}: {}{status}", self.code, self.message);
        crate::shared::escape::line(&text.chars().take(600).collect::<String>()).into_owned()
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    pub path: String,
    pub excerpt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_end: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// `chat memory write`'s answer.
#[derive(Debug, Serialize)]
pub struct Written {
    pub ok: bool,
    pub path: String,
    pub target: &'static str,
    pub general_session_id: String,
}

/// `chat memory search`'s answer.
#[derive(Debug, Serialize)]
pub struct Searched {
    pub ok: bool,
    pub query: String,
    pub results: Vec<Found>,
}

/// A search as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub query: String,
    pub kind: Option<String>,
    pub limit: Option<u16>,
}

/// A note worth sending: not blank, at most [`MAX_CONTENT`] bytes.
pub fn check_content(content: &str) -> Result<(), Problem> {
    if content.trim().is_empty() {
        return Err(Problem::input("nothing to write: the note is empty"));
    }
    if content.len() > MAX_CONTENT {
        return Err(Problem::input(format!(
            "the note is {} bytes; at most {MAX_CONTENT} are sent",
            content.len()
        )));
    }
    Ok(())
}

/// A search worth sending: a query of 1 to [`MAX_QUERY`] characters, a
/// kind of letters, digits, `_`, `-` and `.`, a limit of at least 1.
pub fn check_search(search: &Search) -> Result<(), Problem> {
    let bad = |why: String| Err(Problem::input(why));
    if search.query.trim().is_empty() {
        return bad("nothing to search for: the query is empty".into());
    }
    if search.query.chars().count() > MAX_QUERY {
        return bad(format!("the query is longer than {MAX_QUERY} characters"));
    }
    if let Some(kind) = &search.kind
        && (kind.is_empty()
            || kind.chars().count() > MAX_KIND
            || !kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
    {
        return bad(format!(
            "kind {:?} is not 1 to {MAX_KIND} letters, digits, '_', '-' or '.'",
            kind.chars().take(80).collect::<String>()
        ));
    }
    if search.limit == Some(0) {
        return bad("a limit of 0 asks for nothing".into());
    }
    Ok(())
}

/// Writes `content` to `target` memory in the conversation's session
/// (opened, or resumed, first); the path the service names. Each request
/// is bounded a little past `within`, the caller's [`deadline`] for it all.
pub async fn write(
    session: &Session,
    target: Target,
    content: &str,
    within: Duration,
) -> Result<String, Problem> {
    check_content(content)?;
    let each = slack(within);
    {
        let mut id = match session.id() {
            id if !id.is_empty() => id,
            _ => session.open(true, each).await?,
        };
        let mut reopened = false;
        loop {
            let body =
                json!({"general_session_id": id, "target": target.name(), "content": content});
            let (status, answer) = session
                .service()
                .exchange(
                    Method::POST,
                    "/v1/memory/write",
                    Some(&body),
                    None,
                    each,
                    super::MAX_ANSWER,
                )
                .await
                .map_err(failed)?;
            // A 404: the session forgotten (the service restarted), or
            // re-created. Asked to resume it, the service hands back the
            // one to use; the note is tried once more there, and a second
            // 404 (an endpoint it does not have) is told.
            if status == 404 && !reopened {
                reopened = true;
                id = session.open(true, each).await?;
                continue;
            }
            return read_write_answer(status, &answer);
        }
    }
}

/// Searches the service's memory (its request bounded as a write's).
pub async fn search(
    service: &Service,
    search: &Search,
    within: Duration,
) -> Result<Vec<Found>, Problem> {
    check_search(search)?;
    let mut path = format!("/v1/memory/search?q={}", query_component(&search.query));
    if let Some(kind) = &search.kind {
        path += &format!("&kind={}", query_component(kind));
    }
    if let Some(limit) = search.limit {
        path += &format!("&limit={limit}");
    }
    let (status, answer) = service
        .exchange(
            Method::GET,
            &path,
            None,
            None,
            slack(within),
            super::MAX_ANSWER,
        )
        .await
        .map_err(failed)?;
    let mut found = read_search_answer(status, &answer)?;
    if let Some(limit) = search.limit {
        found.truncate(usize::from(limit));
    }
    Ok(found)
}

/// A request's own limit inside a command's `within`: later, so that the
/// command's deadline (told as `TIMEOUT`) is the one that ends it.
fn slack(within: Duration) -> Duration {
    within + Duration::from_secs(1)
}

/// One command's deadline: `work`, or `TIMEOUT` after `within`.
pub async fn deadline<T>(
    within: Duration,
    work: impl Future<Output = Result<T, Problem>>,
) -> Result<T, Problem> {
    tokio::time::timeout(within, work)
        .await
        .unwrap_or_else(|_| Err(timed_out(within)))
}

/// A command that took longer than `within`.
fn timed_out(within: Duration) -> Problem {
    Problem::ours(
        "TIMEOUT",
        format!(
            "the command did not finish within {} s",
            within.as_secs_f64()
        ),
    )
}

/// A request that got no usable answer.
pub(super) fn failed(failure: Failure) -> Problem {
    match failure {
        Failure::Network(why) => Problem::ours("UNAVAILABLE", why),
        Failure::Status(status, why) => bad_answer(status, why),
    }
}

/// `POST /v1/memory/write`'s answer: the path, or why not.
pub fn read_write_answer(status: u16, answer: &Value) -> Result<String, Problem> {
    if !(200..300).contains(&status) {
        return Err(service_problem(status, answer));
    }
    match answer["path"].as_str() {
        Some(path) if !path.is_empty() && path.chars().count() <= MAX_PATH => Ok(path.to_owned()),
        _ => Err(bad_answer(
            status,
            format!(
                "the write was answered without a path (1 to {MAX_PATH} characters): {}",
                super::cut(&answer.to_string())
            ),
        )),
    }
}

/// `GET /v1/memory/search`'s answer: every result, or why not (a result
/// of another shape fails the whole answer, naming it).
pub fn read_search_answer(status: u16, answer: &Value) -> Result<Vec<Found>, Problem> {
    if !(200..300).contains(&status) {
        return Err(service_problem(status, answer));
    }
    let Some(results) = answer["results"].as_array() else {
        return Err(bad_answer(
            status,
            format!(
                "the search was answered without a results list: {}",
                super::cut(&answer.to_string())
            ),
        ));
    };
    results
        .iter()
        .enumerate()
        .map(|(i, r)| read_found(r).map_err(|why| bad_answer(status, format!("results[{i}]{why}"))))
        .collect()
}

fn read_found(result: &Value) -> Result<Found, String> {
    if !result.is_object() {
        return Err(" is not an object".into());
    }
    let text = |field: &str| match &result[field] {
        Value::String(s) => Ok(s.clone()),
        _ => Err(format!(".{field} is not a string")),
    };
    let line = |field: &str| match &result[field] {
        Value::Null => Ok(None),
        v => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| format!(".{field} is not a line number (a whole number from 1)")),
    };
    let path = text("path")?;
    if path.is_empty() || path.chars().count() > MAX_PATH {
        return Err(format!(".path is not 1 to {MAX_PATH} characters"));
    }
    let found = Found {
        path,
        excerpt: text("excerpt")?,
        line_start: line("line_start")?,
        line_end: line("line_end")?,
        score: match &result["score"] {
            Value::Null => None,
            v => Some(v.as_f64().ok_or(".score is not a number")?),
        },
    };
    if let (Some(start), Some(end)) = (found.line_start, found.line_end)
        && end < start
    {
        return Err(format!(".line_end {end} is before line_start {start}"));
    }
    Ok(found)
}

pub(super) fn bad_answer(status: u16, why: String) -> Problem {
    Problem {
        status: Some(status),
        ..Problem::ours("BAD_ANSWER", why)
    }
}

/// A non-2xx answer in the service's words: the seed's error model
/// `{error: {code, message, details}}`, a bare `{error: "…"}`, or
/// whatever it sent, cut.
pub fn service_problem(status: u16, answer: &Value) -> Problem {
    let error = &answer["error"];
    let (code, message) = match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(message)) => (code.to_owned(), message.to_owned()),
        (None, Some(message)) => (format!("HTTP_{status}"), message.to_owned()),
        _ => match (error.as_str(), answer) {
            (Some(text), _) => (format!("HTTP_{status}"), text.to_owned()),
            (None, Value::Null) => (format!("HTTP_{status}"), "(an empty answer)".into()),
            // A body that is not JSON, as the service wrote it (cut).
            (None, Value::String(text)) => (format!("HTTP_{status}"), super::cut(text)),
            (None, _) => (format!("HTTP_{status}"), super::cut(&answer.to_string())),
        },
    };
    Problem {
        status: Some(status),
        details: error.get("details").filter(|d| !d.is_null()).cloned(),
        ..Problem::ours(&code, message)
    }
}

/// What a write says to the person at the terminal.
pub fn shown_write(target: Target, path: &str) -> String {
    let which = match target {
        Target::LongTerm => "long-term memory",
        Target::Daily => "today's memory",
    };
    format!("saved to {which}: {}\n", crate::shared::escape::line(path))
}

/// Search results as the person at the terminal reads them: where each
/// is (path and lines, to cite or open), then its excerpt, indented.
pub fn shown_found(query: &str, found: &[Found]) -> String {
    let query = crate::shared::escape::line(query);
    if found.is_empty() {
        return format!("no memory matches \"{query}\"\n");
    }
    let mut out = format!(
        "{} result{} for \"{query}\":\n",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    for f in found {
        out += &crate::shared::escape::line(&f.path);
        match (f.line_start, f.line_end) {
            (Some(start), Some(end)) if end != start => out += &format!(":{start}-{end}"),
            (Some(line), _) | (None, Some(line)) => out += &format!(":{line}"),
            (None, None) => {}
        }
        if let Some(score) = f.score {
            out += &format!(" (score {score})");
        }
        out.push('\n');
        for line in crate::shared::escape::text(f.excerpt.trim_end()).lines() {
            out += "    ";
            out += line;
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_to_the_seed_shapes_or_refused_naming_what_is_wrong() {
        assert_eq!(
            read_write_answer(200, &json!({"path": "memory/MEMORY.md"})).unwrap(),
            "memory/MEMORY.md"
        );
        let e = read_write_answer(200, &json!({"ok": true})).unwrap_err();
        assert_eq!((e.code.as_str(), e.status), ("BAD_ANSWER", Some(200)));
        let found = read_search_answer(
            200,
            &json!({"results": [
                {"path": "memory/MEMORY.md", "excerpt": "a", "line_start": 1, "line_end": 3, "score": 0.78},
                {"path": "memory/2026-11-26.md", "excerpt": "b", "extra": true}
            ]}),
        )
        .unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].line_start, found[0].line_end), (Some(1), Some(3)));
        assert_eq!(found[1].line_start, None);
        for (bad, says) in [
            (
                json!({"results": [{"path": "p", "excerpt": "e", "line_start": 0}]}),
                "results[0].line_start",
            ),
            (
                json!({"results": [{"path": "p", "excerpt": "e", "line_start": 5, "line_end": 2}]}),
                "before",
            ),
            (
                json!({"results": [{"path": "", "excerpt": "e"}]}),
                "results[0].path",
            ),
            (
                json!({"results": [{"path": "p", "excerpt": 1}]}),
                ".excerpt",
            ),
            (
                json!({"results": [{"path": "p", "excerpt": "e"}, 3]}),
                "results[1] is not an object",
            ),
            (
                json!({"results": [{"path": "p", "excerpt": "e", "score": "high"}]}),
                ".score",
            ),
            (json!({"hits": []}), "without a results list"),
        ] {
            let e = read_search_answer(200, &bad).unwrap_err();
            assert_eq!(e.code, "BAD_ANSWER");
            assert!(e.message.contains(says), "{says}: {}", e.message);
        }
    }

    #[test]
    fn the_services_error_model_is_kept_in_its_own_words() {
        let e = read_search_answer(
            400,
            &json!({"error": {"code": "INVALID_KIND", "message": "kind must be long_term or daily", "details": {"kind": "x"}}}),
        )
        .unwrap_err();
        assert_eq!(e.code, "INVALID_KIND");
        assert_eq!(e.message, "kind must be long_term or daily");
        assert_eq!(e.status, Some(400));
        assert_eq!(e.details, Some(json!({"kind": "x"})));
        assert_eq!(
            service_problem(503, &json!({"error": "down"})).code,
            "HTTP_503"
        );
        assert_eq!(
            service_problem(500, &Value::Null).message,
            "(an empty answer)"
        );
        // A body that is not JSON keeps its words; a service's code is
        // never taken for bad input of ours.
        assert_eq!(
            service_problem(503, &json!("upstream down")).message,
            "upstream down"
        );
        let theirs = service_problem(
            400,
            &json!({"error": {"code": "INVALID_INPUT", "message": "m"}}),
        );
        assert!(!theirs.bad_input);
        // The terminal gets the words escaped.
        let shown = service_problem(
            500,
            &json!({"error": {"code": "X", "message": "a\u{1b}[2Jb\nforged line"}}),
        )
        .shown();
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\n'),
            "{shown}"
        );
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_sent() {
        assert!(check_content(" \n").is_err());
        assert!(check_content(&"x".repeat(MAX_CONTENT + 1)).is_err());
        assert!(check_content("note").is_ok());
        let search = |query: &str, kind: Option<&str>, limit| Search {
            query: query.into(),
            kind: kind.map(Into::into),
            limit,
        };
        assert!(check_search(&search("deep work", Some("daily"), Some(5))).is_ok());
        assert!(check_search(&search("  ", None, None)).is_err());
        assert!(check_search(&search(&"q".repeat(MAX_QUERY + 1), None, None)).is_err());
        assert!(check_search(&search("q", Some("daily&limit=1"), None)).is_err());
        assert!(check_search(&search("q", Some(""), None)).is_err());
        assert!(check_search(&search("q", None, Some(0))).is_err());
    }

    #[test]
    fn results_show_where_they_are_and_escape_what_the_service_wrote() {
        let shown = shown_found(
            "plan",
            &[
                Found {
                    path: "memory/MEMORY.md".into(),
                    excerpt: "Prefer mornings.\nTwo blocks.\u{1b}[31m".into(),
                    line_start: Some(1),
                    line_end: Some(3),
                    score: Some(0.78),
                },
                Found {
                    path: "memory/x\u{202e}.md".into(),
                    excerpt: "one".into(),
                    line_start: Some(4),
                    line_end: None,
                    score: None,
                },
            ],
        );
        assert_eq!(
            shown,
            "2 results for \"plan\":\nmemory/MEMORY.md:1-3 (score 0.78)\n    Prefer mornings.\n    Two blocks.\\u{1b}[31m\nmemory/x\\u{202e}.md:4\n    one\n"
        );
        assert_eq!(shown_found("q", &[]), "no memory matches \"q\"\n");
    }
}

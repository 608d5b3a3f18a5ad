//! What a line of the conversation asks for: a message for the agent, or
//! one of `chat`'s own commands (the memory, help). Only the commands
//! named here are taken: any other line, `/`-led or not, is a message, and
//! `//` sends a line that starts with `/` as it is.

use super::memory::{Search, Target};

pub const HELP: &str = "\
/remember TEXT      save TEXT to the agent's long-term memory
/daily TEXT         save TEXT to today's memory
/search [--kind K] [--limit N] QUERY
                    search the agent's memory (paths and lines to cite)
/help               this list
//TEXT              send /TEXT to the agent as it is
Any other line is a message for the agent.
";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Say(String),
    Remember(Target, String),
    Search(Search),
    Help,
    /// A command used wrongly: why.
    Wrong(String),
}

/// What `line` (trimmed, not empty) asks for.
pub fn parse(line: &str) -> Line {
    if let Some(rest) = line.strip_prefix("//") {
        return Line::Say(format!("/{rest}"));
    }
    let Some(command) = line.strip_prefix('/') else {
        return Line::Say(line.to_owned());
    };
    let (word, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(w, r)| (w, r.trim()));
    match word {
        "remember" | "daily" => {
            let target = if word == "daily" {
                Target::Daily
            } else {
                Target::LongTerm
            };
            if rest.is_empty() {
                Line::Wrong(format!("/{word} needs the text to save: /{word} TEXT"))
            } else {
                Line::Remember(target, rest.to_owned())
            }
        }
        "search" => search(rest),
        "help" if rest.is_empty() => Line::Help,
        _ => Line::Say(line.to_owned()),
    }
}

/// `/search [--kind K] [--limit N] QUERY`: options first, then the query
/// (the rest of the line, as typed).
fn search(mut rest: &str) -> Line {
    let mut kind = None;
    let mut limit = None;
    loop {
        let (word, after) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(w, r)| (w, r.trim_start()));
        match word {
            "--kind" | "--limit" => {
                let (value, after) = after
                    .split_once(char::is_whitespace)
                    .map_or((after, ""), |(v, r)| (v, r.trim_start()));
                if value.is_empty() || value.starts_with("--") {
                    return Line::Wrong(format!("/search {word} needs a value"));
                }
                if word == "--kind" {
                    kind = Some(value.to_owned());
                } else {
                    match value.parse::<u16>() {
                        Ok(n) if n >= 1 => limit = Some(n),
                        _ => {
                            return Line::Wrong(format!(
                                "/search --limit takes a whole number from 1 to {}, not {:?}",
                                u16::MAX,
                                value.chars().take(40).collect::<String>()
                            ));
                        }
                    }
                }
                rest = after;
            }
            _ => break,
        }
    }
    if rest.is_empty() {
        return Line::Wrong("/search needs what to look for: /search QUERY".into());
    }
    Line::Search(Search {
        query: rest.to_owned(),
        kind,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_taken_and_every_other_line_is_a_message() {
        assert_eq!(parse("hello"), Line::Say("hello".into()));
        assert_eq!(
            parse("/remember I prefer  mornings"),
            Line::Remember(Target::LongTerm, "I prefer  mornings".into())
        );
        assert_eq!(
            parse("/daily stand-up moved"),
            Line::Remember(Target::Daily, "stand-up moved".into())
        );
        assert_eq!(
            parse("/search --kind daily --limit 3 deep  work"),
            Line::Search(Search {
                query: "deep  work".into(),
                kind: Some("daily".into()),
                limit: Some(3)
            })
        );
        assert_eq!(
            parse("/search plan"),
            Line::Search(Search {
                query: "plan".into(),
                kind: None,
                limit: None
            })
        );
        assert_eq!(parse("/help"), Line::Help);
        // Not ours: sent as typed. `//` sends a leading slash.
        assert_eq!(
            parse("/etc/hosts says what?"),
            Line::Say("/etc/hosts says what?".into())
        );
        assert_eq!(parse("/helpme"), Line::Say("/helpme".into()));
        assert_eq!(parse("//remember x"), Line::Say("/remember x".into()));
        for wrong in [
            "/remember",
            "/daily",
            "/search",
            "/search --limit 0 q",
            "/search --limit x q",
            "/search --kind",
        ] {
            assert!(matches!(parse(wrong), Line::Wrong(_)), "{wrong}");
        }
    }
}

//! Server-sent events as seed 001 streams them: `event:` and `data:` lines,
//! `:` comments (the heartbeat), a blank line ending each event, and the
//! `id:` a service may add so that a dropped stream can be resumed with
//! `Last-Event-ID` (the last id set, as the SSE spec keeps it: it carries
//! over to later events until another `id:` changes it). Bounded: a line
//! or an event past the limit is an error, not a growing buffer.
//!
//! Why ours and not `sse-stream` (0.2.6, already in the lock file through
//! rmcp; read for issue 24): the stream is a stranger's, and the crate
//! does not bound it. Its unfinished line, an event's joined `data:` and
//! the queue of parsed events all grow without a limit, so a peer that
//! sends one endless line (or endless `data:` lines with no blank line)
//! takes memory until the process dies; bounding it from outside would
//! mean counting bytes between its lines, which is this parser again. It
//! is also stricter than the SSE spec where a hostile or sloppy peer
//! lives: a line without `:`, an unknown field, a second `event:` in one
//! event or bytes that are not UTF-8 end the whole stream with an error,
//! where the spec (and this parser) ignores the line or decodes lossily
//! and the turn goes on. And it is a `Stream` over an HTTP body, not a
//! `feed(bytes)`, so the fuzz target that cuts the stream anywhere
//! (`sse_stream`, through `src/fuzzing.rs`) would need a body and a waker
//! around it. What it has that we lack: a lone `\r` as a line end and the
//! BOM; seed 001 sends neither. TODO: take the crate if it grows limits.

/// One event: its name (`message` when none was given), its data, and
/// the stream's last event id when it was dispatched (None: none set, or
/// set to empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
    /// Shared, not copied: one long id carried over by many events costs
    /// its bytes once.
    pub id: Option<std::sync::Arc<str>>,
    /// The event set its id itself (an `id:` line of its own), rather
    /// than carrying over an earlier one.
    pub own_id: bool,
}

/// Bytes one event may hold.
pub const MAX_EVENT: usize = 1 << 20;

#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    /// The last event id buffer (the spec's): set by `id:`, kept across
    /// events.
    last_id: Option<std::sync::Arc<str>>,
    /// An `id:` line came since the last event.
    id_set: bool,
}

impl Parser {
    /// A parser for a stream resumed after event `id` (the last event id
    /// buffer starts with it, as the spec keeps it across a reconnection).
    pub fn resuming(id: Option<&str>) -> Self {
        Self {
            last_id: id.map(std::sync::Arc::from),
            ..Self::default()
        }
    }

    /// Feeds `bytes`; the events they complete, or why the stream is bad.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, String> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() >= MAX_EVENT {
                    return Err(format!("an event line is longer than {MAX_EVENT} bytes"));
                }
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    events.push(Event {
                        name: self.name.take().unwrap_or_else(|| "message".into()),
                        data,
                        id: self.last_id.clone(),
                        own_id: self.id_set,
                    });
                }
                self.name = None;
                self.id_set = false;
                continue;
            }
            if line.starts_with(':') {
                continue; // a comment: the heartbeat
            }
            let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.name = Some(value.to_owned()),
                "data" => {
                    let data = self.data.get_or_insert_with(String::new);
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    if data.len() + value.len() > MAX_EVENT {
                        return Err(format!("an event is larger than {MAX_EVENT} bytes"));
                    }
                    data.push_str(value);
                }
                // A NUL makes the spec ignore the field; an empty id
                // clears the buffer (nothing to resume from).
                "id" if !value.contains('\0') => {
                    self.last_id = Some(value)
                        .filter(|v| !v.is_empty())
                        .map(std::sync::Arc::from);
                    self.id_set = true;
                }
                _ => {} // retry (our backoff is the seed's), unknown fields
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_stream_parses_across_any_chunking() {
        let stream = b"event: assistant.delta\ndata: {\"text\":\"Sure - \"}\n\n: heartbeat\n\nevent: tool.request\r\ndata: {\"id\":\"t1\"}\r\n\r\nevent: assistant.final\ndata: {\"text\":\"Done.\"}\n\n";
        for size in [1, 3, 7, stream.len()] {
            let mut parser = Parser::default();
            let mut events = Vec::new();
            for chunk in stream.chunks(size) {
                events.extend(parser.feed(chunk).unwrap());
            }
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(
                names,
                ["assistant.delta", "tool.request", "assistant.final"],
                "chunks of {size}"
            );
            assert_eq!(events[1].data, "{\"id\":\"t1\"}");
        }
    }

    #[test]
    fn multi_line_data_joins_and_oversized_lines_fail() {
        let mut parser = Parser::default();
        let events = parser.feed(b"data: a\ndata: b\n\n").unwrap();
        assert_eq!(
            events,
            [Event {
                name: "message".into(),
                data: "a\nb".into(),
                id: None,
                own_id: false,
            }]
        );
        let mut parser = Parser::default();
        assert!(parser.feed(&vec![b'x'; MAX_EVENT + 1]).is_err());
    }

    #[test]
    fn an_id_carries_over_to_later_events_until_changed_or_cleared() {
        let mut parser = Parser::default();
        let events = parser
            .feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 7\ndata: c\n\nid\ndata: d\n\nid: x\0y\ndata: e\n\n")
            .unwrap();
        let ids: Vec<Option<&str>> = events.iter().map(|e| e.id.as_deref()).collect();
        // A bare `id` sets it empty (cleared); one holding a NUL is ignored.
        assert_eq!(ids, [Some("1"), Some("1"), Some("7"), None, None]);
        let own: Vec<bool> = events.iter().map(|e| e.own_id).collect();
        assert_eq!(own, [true, false, true, true, false]);
        // An id alone, with no data, dispatches nothing but is kept.
        let mut parser = Parser::default();
        assert!(parser.feed(b"id: 3\n\n").unwrap().is_empty());
        assert_eq!(
            parser.feed(b"data: z\n\n").unwrap()[0].id.as_deref(),
            Some("3")
        );
    }
}

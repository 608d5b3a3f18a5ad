//! The parameters of `screen.snapshot` and `computer.act` as OpenClaw's
//! computer-use contract reads them (`computer-use-contract` in its dist:
//! `ScreenSnapshotParamsSchema`, `ComputerActParamsSchema`): closed
//! objects, every field typed, one branch per group of actions. What fails
//! is answered with the contract's own words, `COMPUTER_INVALID_REQUEST:
//! params must be valid JSON` / `…: invalid params` / `…: executionId is
//! required`.
//!
//! Must never: accept a key the contract does not name (an agent's
//! misspelt field is an error, not a silent default), or read a number
//! into a type it does not fit (JSON numbers are checked as JavaScript
//! checks them: an "integer" is a finite number without a fraction).

use serde_json::{Map, Value};

use super::error;
use crate::tools::ToolError;

/// The actions this node performs (the contract's v1 desktop actions).
pub const V1_ACTIONS: [&str; 13] = [
    "left_click",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "mouse_move",
    "left_click_drag",
    "left_mouse_down",
    "left_mouse_up",
    "scroll",
    "type",
    "key",
    "hold_key",
];

/// The contract's v2 actions: known, but not performed by an X11 node
/// (windows, accessibility, browsers, recordings).
const V2_ACTIONS: [&str; 25] = [
    "list_apps",
    "list_windows",
    "get_accessibility_tree",
    "get_cursor_position",
    "get_window_state",
    "launch_app",
    "kill_app",
    "bring_to_front",
    "set_value",
    "zoom",
    "get_browser_state",
    "browser_prepare",
    "browser_navigate",
    "browser_click",
    "browser_type",
    "browser_dialog",
    "browser_set_input_files",
    "browser_download",
    "browser_pointer",
    "escalate_scope",
    "get_recording_state",
    "start_recording",
    "stop_recording",
    "replay_trajectory",
    "invoke_menu",
];

/// `paramsJSON` as JavaScript's `JSON.parse(paramsJSON ?? "{}")` takes it:
/// any JSON value (the schema judges it), absent is `{}`.
pub fn parse(text: Option<&str>) -> Result<Value, ToolError> {
    serde_json::from_str(text.unwrap_or("{}"))
        .map_err(|_| error("COMPUTER_INVALID_REQUEST: params must be valid JSON"))
}

/// The `executionId` of a call, checked before anything else: absent is
/// `None`; present, it must be a lowercase UUID v1–5.
pub fn execution_id(params: &Value) -> Result<Option<String>, ToolError> {
    let Some(id) = params.as_object().and_then(|o| o.get("executionId")) else {
        return Ok(None);
    };
    match id.as_str().filter(|id| is_execution_id(id)) {
        Some(id) => Ok(Some(id.to_owned())),
        None => Err(execution_required()),
    }
}

pub fn execution_required() -> ToolError {
    error("COMPUTER_INVALID_REQUEST: executionId is required")
}

fn invalid() -> ToolError {
    error("COMPUTER_INVALID_REQUEST: invalid params")
}

/// `^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`
fn is_execution_id(id: &str) -> bool {
    let b = id.as_bytes();
    let hex = |c: &u8| c.is_ascii_digit() || (b'a'..=b'f').contains(c);
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => (b'1'..=b'5').contains(c),
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => hex(c),
        })
}

/// What a field may hold (TypeBox's kinds, as the contract uses them).
#[derive(Clone, Copy)]
enum Kind {
    Str,
    NonEmpty,
    ExecutionId,
    /// A number `≥ min`.
    Number(f64),
    /// An integer `≥ min`.
    Integer(f64),
    OneOf(&'static [&'static str]),
}

impl Kind {
    fn admits(self, v: &Value) -> bool {
        match self {
            Kind::Str => v.is_string(),
            Kind::NonEmpty => v.as_str().is_some_and(|s| !s.is_empty()),
            Kind::ExecutionId => v.as_str().is_some_and(is_execution_id),
            Kind::Number(min) => v.as_f64().is_some_and(|n| n >= min),
            Kind::Integer(min) => v.as_f64().is_some_and(|n| n >= min && n.fract() == 0.0),
            Kind::OneOf(names) => v.as_str().is_some_and(|s| names.contains(&s)),
        }
    }
}

const SCREEN_FIELDS: [(&str, Kind); 2] = [
    ("screenIndex", Kind::Integer(0.0)),
    ("refWidth", Kind::Integer(1.0)),
];
const REFERENCE_FIELDS: [(&str, Kind); 4] = [
    ("windowRef", Kind::NonEmpty),
    ("elementRef", Kind::NonEmpty),
    ("observationId", Kind::NonEmpty),
    ("deliveryMode", Kind::OneOf(&["background", "foreground"])),
];
const POINT_FIELDS: [(&str, Kind); 3] = [
    ("displayFrameId", Kind::Str),
    ("x", Kind::Number(0.0)),
    ("y", Kind::Number(0.0)),
];

/// Whether `o` holds only `fields` (plus `action` and `executionId`),
/// each of its kind.
fn closed(o: &Map<String, Value>, fields: &[&[(&str, Kind)]]) -> bool {
    o.iter().all(|(key, v)| match key.as_str() {
        "action" => true,
        "executionId" => Kind::ExecutionId.admits(v),
        _ => fields
            .iter()
            .flat_map(|group| group.iter())
            .find(|(name, _)| name == key)
            .is_some_and(|(_, kind)| kind.admits(v)),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "jpeg",
            Format::Png => "png",
        }
    }
}

/// `screen.snapshot`'s parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub screen_index: Option<f64>,
    pub max_width: Option<f64>,
    pub quality: Option<f64>,
    pub format: Format,
}

impl Snapshot {
    pub fn parse(params: &Value) -> Result<Self, ToolError> {
        let fields = [
            ("screenIndex", Kind::Integer(0.0)),
            ("maxWidth", Kind::Integer(1.0)),
            ("quality", Kind::Number(f64::MIN)),
            ("format", Kind::OneOf(&["jpeg", "png"])),
        ];
        let o = params.as_object().ok_or_else(invalid)?;
        if o.contains_key("action") || !closed(o, &[&fields]) {
            return Err(invalid());
        }
        Ok(Snapshot {
            screen_index: o.get("screenIndex").and_then(Value::as_f64),
            max_width: o.get("maxWidth").and_then(Value::as_f64),
            quality: o.get("quality").and_then(Value::as_f64),
            format: match o.get("format").and_then(Value::as_str) {
                Some("png") => Format::Png,
                _ => Format::Jpeg,
            },
        })
    }
}

/// One `computer.act` call, validated against its action's branch.
#[derive(Debug, Clone, PartialEq)]
pub struct Act {
    pub action: &'static str,
    pub display_frame_id: Option<String>,
    pub x: Option<f64>,
    pub y: Option<f64>,
    pub from_x: Option<f64>,
    pub from_y: Option<f64>,
    pub duration_ms: Option<f64>,
    pub modifiers: Option<String>,
    pub scroll_direction: Option<String>,
    pub scroll_amount: Option<f64>,
    pub text: Option<String>,
    pub keys: Option<String>,
    pub screen_index: Option<f64>,
    pub ref_width: Option<f64>,
    pub delivery_mode: bool,
}

/// What a `computer.act` call asks for.
pub enum Asked {
    Act(Box<Act>),
    /// A contract action an X11 node does not perform.
    Unsupported(String),
}

impl Act {
    pub fn parse(params: &Value) -> Result<Asked, ToolError> {
        let o = params.as_object().ok_or_else(invalid)?;
        let action = o.get("action").and_then(Value::as_str).unwrap_or("");
        if let Some(known) = V2_ACTIONS.iter().find(|a| **a == action) {
            // Their fields are not checked: none of them is run here.
            return Ok(Asked::Unsupported((*known).to_owned()));
        }
        let Some(action) = V1_ACTIONS.iter().copied().find(|a| *a == action) else {
            return Err(invalid());
        };
        let modifiers: &[(&str, Kind)] = &[("modifiers", Kind::Str)];
        let drag: &[(&str, Kind)] = &[
            ("fromX", Kind::Number(0.0)),
            ("fromY", Kind::Number(0.0)),
            ("durationMs", Kind::Integer(0.0)),
        ];
        let scroll: &[(&str, Kind)] = &[
            (
                "scrollDirection",
                Kind::OneOf(&["up", "down", "left", "right"]),
            ),
            ("scrollAmount", Kind::Integer(1.0)),
        ];
        let text: &[(&str, Kind)] = &[("text", Kind::Str)];
        let keys: &[(&str, Kind)] = &[("keys", Kind::Str)];
        let hold: &[(&str, Kind)] = &[("keys", Kind::Str), ("durationMs", Kind::Integer(0.0))];
        let own: &[&[(&str, Kind)]] = match action {
            "left_click_drag" => &[&POINT_FIELDS, drag],
            "scroll" => &[&POINT_FIELDS, modifiers, scroll],
            "type" => &[text],
            "key" => &[keys],
            "hold_key" => &[hold],
            _ => &[&POINT_FIELDS, modifiers],
        };
        let mut fields: Vec<&[(&str, Kind)]> = own.to_vec();
        fields.extend([&SCREEN_FIELDS[..], &REFERENCE_FIELDS[..]]);
        if !closed(o, &fields) {
            return Err(invalid());
        }
        let number = |key: &str| o.get(key).and_then(Value::as_f64);
        let string = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(Asked::Act(Box::new(Act {
            action,
            display_frame_id: string("displayFrameId"),
            x: number("x"),
            y: number("y"),
            from_x: number("fromX"),
            from_y: number("fromY"),
            duration_ms: number("durationMs"),
            modifiers: string("modifiers"),
            scroll_direction: string("scrollDirection"),
            scroll_amount: number("scrollAmount"),
            text: string("text"),
            keys: string("keys"),
            screen_index: number("screenIndex"),
            ref_width: number("refWidth"),
            delivery_mode: o.contains_key("deliveryMode"),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "0b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6f";

    fn message(e: ToolError) -> String {
        e.message
    }

    #[test]
    fn params_are_any_json_and_absent_is_an_empty_object() {
        assert_eq!(parse(None).unwrap(), json!({}));
        assert_eq!(parse(Some("null")).unwrap(), Value::Null);
        for bad in ["", "{", "nope"] {
            assert_eq!(
                message(parse(Some(bad)).unwrap_err()),
                "Error: COMPUTER_INVALID_REQUEST: params must be valid JSON"
            );
        }
    }

    #[test]
    fn an_execution_id_is_a_lowercase_uuid_of_versions_1_to_5() {
        assert!(is_execution_id(ID));
        for bad in [
            "0B5C3F0E-8D1A-4C2B-9E7F-1A2B3C4D5E6F",
            "0b5c3f0e-8d1a-6c2b-9e7f-1a2b3c4d5e6f",
            "0b5c3f0e-8d1a-4c2b-7e7f-1a2b3c4d5e6f",
            "0b5c3f0e8d1a4c2b9e7f1a2b3c4d5e6f",
            "0b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6fa",
            "",
        ] {
            assert!(!is_execution_id(bad), "{bad}");
        }
        assert_eq!(execution_id(&json!({})).unwrap(), None);
        assert_eq!(execution_id(&json!([1])).unwrap(), None);
        assert_eq!(
            execution_id(&json!({"executionId": ID})).unwrap(),
            Some(ID.to_owned())
        );
        for bad in [json!({"executionId": 5}), json!({"executionId": "x"})] {
            assert_eq!(
                message(execution_id(&bad).unwrap_err()),
                "Error: COMPUTER_INVALID_REQUEST: executionId is required"
            );
        }
    }

    #[test]
    fn a_snapshot_takes_the_contracts_fields_only() {
        let p = Snapshot::parse(
            &json!({"executionId": ID, "screenIndex": 0, "maxWidth": 640.0,
                                        "quality": 7, "format": "png"}),
        )
        .unwrap();
        assert_eq!(p.max_width, Some(640.0));
        assert_eq!(p.format, Format::Png);
        assert_eq!(Snapshot::parse(&json!({})).unwrap().format, Format::Jpeg);
        for bad in [
            json!(null),
            json!([]),
            json!({"maxWidth": 0}),
            json!({"maxWidth": 1.5}),
            json!({"maxWidth": "640"}),
            json!({"screenIndex": -1}),
            json!({"format": "JPEG"}),
            json!({"format": "gif"}),
            json!({"quality": "high"}),
            json!({"extra": 1}),
            json!({"action": "screenshot"}),
        ] {
            assert_eq!(
                message(Snapshot::parse(&bad).unwrap_err()),
                "Error: COMPUTER_INVALID_REQUEST: invalid params",
                "{bad}"
            );
        }
    }

    fn act(v: Value) -> Result<Act, String> {
        match Act::parse(&v) {
            Ok(Asked::Act(a)) => Ok(*a),
            Ok(Asked::Unsupported(a)) => Err(format!("unsupported {a}")),
            Err(e) => Err(e.message),
        }
    }

    #[test]
    fn each_action_takes_its_branchs_fields_only() {
        let click = act(
            json!({"action": "left_click", "executionId": ID, "x": 1.5, "y": 2,
                               "displayFrameId": "f", "refWidth": 640, "screenIndex": 0,
                               "modifiers": "shift", "deliveryMode": "foreground"}),
        )
        .unwrap();
        assert_eq!((click.x, click.y), (Some(1.5), Some(2.0)));
        assert!(click.delivery_mode);
        act(json!({"action": "left_click_drag", "fromX": 0, "fromY": 0, "x": 1, "y": 1, "durationMs": 10}))
            .unwrap();
        act(json!({"action": "scroll", "scrollDirection": "up", "scrollAmount": 3})).unwrap();
        act(json!({"action": "type", "text": "hi"})).unwrap();
        act(json!({"action": "hold_key", "keys": "a", "durationMs": 0})).unwrap();
        let invalid = "Error: COMPUTER_INVALID_REQUEST: invalid params";
        for bad in [
            json!({"action": "screenshot"}),
            json!({"action": "LEFT_CLICK"}),
            json!({}),
            json!({"action": "left_click", "x": -1}),
            json!({"action": "left_click", "x": "1"}),
            json!({"action": "left_click", "fromX": 1}),
            json!({"action": "left_click", "refWidth": 0}),
            json!({"action": "left_click", "deliveryMode": "later"}),
            json!({"action": "left_click", "windowRef": ""}),
            json!({"action": "left_click_drag", "modifiers": "shift"}),
            json!({"action": "scroll", "scrollAmount": 0}),
            json!({"action": "scroll", "scrollDirection": "sideways"}),
            json!({"action": "type", "x": 1}),
            json!({"action": "type", "text": 5}),
            json!({"action": "key", "durationMs": 5}),
            json!({"action": "hold_key", "durationMs": 1.5}),
            json!({"action": "mouse_move", "executionId": "X"}),
        ] {
            assert_eq!(act(bad.clone()).unwrap_err(), invalid, "{bad}");
        }
        assert_eq!(
            act(json!({"action": "list_apps", "anything": 1})).unwrap_err(),
            "unsupported list_apps"
        );
    }
}

//! `computer.act`'s v1 actions as xdotool command lines, and the keys an
//! agent may name.
//!
//! Keys follow OpenClaw's reference provider's table (`cua-computer`'s
//! `actions.ts`): a chord is `mod+…+key`, modifiers by their aliases
//! (`ctrl`/`control`, `shift`, `alt`/`option`/`menu`/`mod1`,
//! `cmd`/`command`/`meta`/`super`/`win`/`windows`/`mod4` — the last group
//! is X11's Super key), named keys (`return`/`enter`, `esc`, `pgup`,
//! `f1`–`f12`, …) and single letters; anything else is
//! `COMPUTER_UNSUPPORTED_KEY`, never passed to xdotool as a keysym of the
//! agent's choosing.
//!
//! Bounds (ours; OpenClaw's provider has none of its own): `type` text at
//! most [`MAX_TEXT`] characters, a key chord at most [`MAX_CHORD`]
//! characters, a scroll at most 50 wheel clicks (the reference
//! provider's cap), a drag or a held key at most 10 s.
//!
//! Must never: pass agent text where xdotool reads options (`--` comes
//! first), or leave a key or button pressed when an action stops half way
//! (each plan says how to release what it presses).

use std::time::Duration;

use super::error;
use super::params::Act;
use crate::tools::ToolError;

/// Characters `type` takes at most (xdotool types about 80 a second).
pub const MAX_TEXT: usize = 2_000;
/// Characters a key chord or a modifier list may have.
pub const MAX_CHORD: usize = 64;
/// Wheel clicks one scroll may turn.
pub const MAX_SCROLL: f64 = 50.0;
/// The longest drag or held key.
pub const MAX_HOLD_MS: f64 = 10_000.0;

/// What xdotool is asked to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Xdo(Vec<String>),
    Sleep(Duration),
}

/// An action's steps, and what undoes a press if they stop half way.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub release: Vec<String>,
}

fn unsupported_key(message: String) -> ToolError {
    error(format!("COMPUTER_UNSUPPORTED_KEY: {message}"))
}

/// A modifier's xdotool name.
fn modifier(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "ctrl" | "control" => "ctrl",
        "shift" => "shift",
        "alt" | "menu" | "option" | "mod1" => "alt",
        "cmd" | "command" | "meta" | "super" | "win" | "windows" | "mod4" => "super",
        _ => return None,
    })
}

/// A named key's X keysym.
fn named(name: &str) -> Option<String> {
    let key = match name {
        "return" | "enter" => "Return",
        "tab" => "Tab",
        "escape" | "esc" => "Escape",
        "space" => "space",
        "backspace" => "BackSpace",
        "delete" | "del" => "Delete",
        "insert" | "ins" => "Insert",
        "home" => "Home",
        "end" => "End",
        "pageup" | "pgup" => "Prior",
        "pagedown" | "pgdn" => "Next",
        "up" => "Up",
        "down" => "Down",
        "left" => "Left",
        "right" => "Right",
        "capslock" => "Caps_Lock",
        "numlock" => "Num_Lock",
        f => {
            let n: u8 = f.strip_prefix('f')?.parse().ok()?;
            return (1..=12).contains(&n).then(|| format!("F{n}"));
        }
    };
    Some(key.to_owned())
}

fn modifiers_of(parts: &[&str]) -> Result<Vec<String>, ToolError> {
    parts
        .iter()
        .map(|raw| {
            let raw = raw.trim();
            modifier(raw)
                .map(str::to_owned)
                .ok_or_else(|| unsupported_key(format!("unknown modifier {}", quoted(raw))))
        })
        .collect()
}

/// `modifiers` of a click or scroll: `shift+ctrl`, blank for none.
pub fn modifiers(text: Option<&str>) -> Result<Vec<String>, ToolError> {
    let text = text.unwrap_or("");
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    check_length(text)?;
    modifiers_of(&text.split('+').collect::<Vec<_>>())
}

/// A key chord as xdotool names it: `ctrl+shift+t`.
pub fn chord(text: Option<&str>) -> Result<String, ToolError> {
    let text = text.unwrap_or("");
    check_length(text)?;
    let mut parts: Vec<&str> = if text.is_empty() && text.split('+').count() == 1 {
        Vec::new()
    } else {
        text.split('+').map(str::trim).collect()
    };
    let Some(raw) = parts.pop().filter(|k| !k.is_empty()) else {
        return Err(unsupported_key("key chord is empty".into()));
    };
    let mut keys = modifiers_of(&parts)?;
    let lowered = raw.to_ascii_lowercase();
    let key = match modifier(&lowered)
        .map(str::to_owned)
        .or_else(|| named(&lowered))
    {
        Some(key) => key,
        None if raw.len() == 1 && raw.as_bytes()[0].is_ascii_alphabetic() => lowered,
        None if raw.chars().count() == 1 => {
            return Err(unsupported_key(format!(
                "single-character key {} depends on the keyboard layout; use the type action instead",
                quoted(raw)
            )));
        }
        None => return Err(unsupported_key(format!("unknown key {}", quoted(raw)))),
    };
    keys.push(key);
    Ok(keys.join("+"))
}

fn check_length(text: &str) -> Result<(), ToolError> {
    if text.chars().count() > MAX_CHORD {
        return Err(unsupported_key(format!(
            "key chord exceeds {MAX_CHORD} characters"
        )));
    }
    Ok(())
}

/// JavaScript's `JSON.stringify` of a short string.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn xdo<const N: usize>(words: [&str; N]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// No `--sync`: xdotool 3.2016 waits forever for a motion that a move to
/// where the pointer already is never makes; requests of one xdotool run
/// reach the X server in order, and it exits only once all were handled.
fn move_to((x, y): (u32, u32)) -> Vec<String> {
    xdo(["mousemove", &x.to_string(), &y.to_string()])
}

/// Presses `mods`, then `words`, then releases them, as one run.
fn with_modifiers(mods: &[String], words: Vec<String>) -> Plan {
    if mods.is_empty() {
        return Plan {
            steps: vec![Step::Xdo(words)],
            release: Vec::new(),
        };
    }
    let chord = mods.join("+");
    let mut all = xdo(["keydown", &chord]);
    all.extend(words);
    all.extend(xdo(["keyup", &chord]));
    Plan {
        steps: vec![Step::Xdo(all)],
        release: xdo(["keyup", &chord]),
    }
}

/// A pointer action at `at` (the current pointer position when `None`).
fn pointer(at: Option<(u32, u32)>, mods: &[String], words: Vec<String>) -> Plan {
    let mut plan = with_modifiers(mods, words);
    if let (Some(at), Some(Step::Xdo(first))) = (at, plan.steps.first_mut()) {
        let mut moved = move_to(at);
        moved.append(first);
        *first = moved;
    }
    plan
}

fn hold_time(ms: Option<f64>, default: f64) -> Duration {
    Duration::from_millis(ms.unwrap_or(default).clamp(0.0, MAX_HOLD_MS) as u64)
}

/// The plan of `act`, with its points already placed on the screen
/// (`at` the action's point, `from` a drag's start).
pub fn plan(
    act: &Act,
    at: Option<(u32, u32)>,
    from: Option<(u32, u32)>,
) -> Result<Plan, ToolError> {
    let mods = modifiers(act.modifiers.as_deref())?;
    let click = |button: &str, count: u32| {
        let mut words = xdo(["click"]);
        if count > 1 {
            words.extend(xdo(["--repeat", &count.to_string(), "--delay", "80"]));
        }
        words.push(button.to_owned());
        pointer(at, &mods, words)
    };
    Ok(match act.action {
        "left_click" => click("1", 1),
        "right_click" => click("3", 1),
        "middle_click" => click("2", 1),
        "double_click" => click("1", 2),
        "triple_click" => click("1", 3),
        "mouse_move" => pointer(at, &[], Vec::new()),
        "left_mouse_down" => pointer(at, &mods, xdo(["mousedown", "1"])),
        "left_mouse_up" => pointer(at, &mods, xdo(["mouseup", "1"])),
        "left_click_drag" => {
            let (Some(from), Some(to)) = (from, at) else {
                return Err(error(
                    "COMPUTER_INVALID_REQUEST: drag coordinates are required",
                ));
            };
            let mut down = move_to(from);
            down.extend(xdo(["mousedown", "1"]));
            let mut up = move_to(to);
            up.extend(xdo(["mouseup", "1"]));
            Plan {
                steps: vec![
                    Step::Xdo(down),
                    Step::Sleep(hold_time(act.duration_ms, 0.0)),
                    Step::Xdo(up),
                ],
                release: xdo(["mouseup", "1"]),
            }
        }
        "scroll" => {
            let button = match act.scroll_direction.as_deref() {
                Some("up") => "4",
                Some("down") => "5",
                Some("left") => "6",
                Some("right") => "7",
                _ => {
                    return Err(error(
                        "COMPUTER_INVALID_REQUEST: scrollDirection is required for scroll",
                    ));
                }
            };
            let clicks = act.scroll_amount.unwrap_or(3.0).min(MAX_SCROLL);
            let words = xdo([
                "click",
                "--repeat",
                &format!("{clicks}"),
                "--delay",
                "20",
                button,
            ]);
            pointer(at, &mods, words)
        }
        "type" => {
            let text = act.text.as_deref().unwrap_or("");
            if text.is_empty() {
                return Err(error("COMPUTER_INVALID_REQUEST: text is required for type"));
            }
            if text.chars().count() > MAX_TEXT {
                return Err(error(format!(
                    "COMPUTER_INVALID_REQUEST: text exceeds {MAX_TEXT} characters; type it in parts"
                )));
            }
            if text.contains('\0') {
                return Err(error(
                    "COMPUTER_INVALID_REQUEST: text contains a NUL character",
                ));
            }
            Plan {
                steps: vec![Step::Xdo(xdo(["type", "--delay", "12", "--", text]))],
                release: Vec::new(),
            }
        }
        "key" => {
            let chord = chord(act.keys.as_deref())?;
            Plan {
                steps: vec![Step::Xdo(xdo(["key", "--", &chord]))],
                release: Vec::new(),
            }
        }
        "hold_key" => {
            let chord = chord(act.keys.as_deref())?;
            Plan {
                steps: vec![
                    Step::Xdo(xdo(["keydown", "--", &chord])),
                    Step::Sleep(hold_time(act.duration_ms, 1000.0)),
                    Step::Xdo(xdo(["keyup", "--", &chord])),
                ],
                release: xdo(["keyup", "--", &chord]),
            }
        }
        other => return Err(error(format!("COMPUTER_UNSUPPORTED_ACTION: {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::screen::params::{Act, Asked};
    use serde_json::json;

    fn act(v: serde_json::Value) -> Act {
        match Act::parse(&v).unwrap() {
            Asked::Act(a) => *a,
            Asked::Unsupported(a) => panic!("{a}"),
        }
    }

    fn argv(plan: &Plan) -> Vec<String> {
        plan.steps
            .iter()
            .map(|s| match s {
                Step::Xdo(words) => words.join(" "),
                Step::Sleep(d) => format!("<sleep {}ms>", d.as_millis()),
            })
            .collect()
    }

    #[test]
    fn chords_follow_the_reference_providers_key_table() {
        assert_eq!(chord(Some("ctrl+shift+t")).unwrap(), "ctrl+shift+t");
        assert_eq!(chord(Some("Return")).unwrap(), "Return");
        assert_eq!(chord(Some("cmd+A")).unwrap(), "super+a");
        assert_eq!(chord(Some(" Control + esc ")).unwrap(), "ctrl+Escape");
        assert_eq!(chord(Some("pgdn")).unwrap(), "Next");
        assert_eq!(chord(Some("alt+f4")).unwrap(), "alt+F4");
        assert_eq!(chord(Some("super")).unwrap(), "super");
        assert_eq!(
            chord(Some("ctrl+alt+BackSpace")).unwrap(),
            "ctrl+alt+BackSpace"
        );
        let refused = |keys: Option<&str>| chord(keys).unwrap_err().message;
        assert_eq!(
            refused(None),
            "Error: COMPUTER_UNSUPPORTED_KEY: key chord is empty"
        );
        assert_eq!(
            refused(Some("ctrl+")),
            "Error: COMPUTER_UNSUPPORTED_KEY: key chord is empty"
        );
        assert_eq!(
            refused(Some("hyper+a")),
            "Error: COMPUTER_UNSUPPORTED_KEY: unknown modifier \"hyper\""
        );
        assert_eq!(
            refused(Some("XF86PowerOff")),
            "Error: COMPUTER_UNSUPPORTED_KEY: unknown key \"XF86PowerOff\""
        );
        assert_eq!(
            refused(Some("f13")),
            "Error: COMPUTER_UNSUPPORTED_KEY: unknown key \"f13\""
        );
        assert!(refused(Some("1")).contains("single-character key \"1\""));
        assert!(refused(Some("ctrl+é")).contains("single-character key \"é\""));
        assert!(refused(Some(&"a+".repeat(40))).contains("exceeds 64 characters"));
        // A keysym xdotool would take but the table does not name.
        assert!(refused(Some("--help")).contains("unknown key"));
    }

    #[test]
    fn clicks_move_then_press_with_their_modifiers_held_and_released() {
        let a = act(json!({"action": "double_click", "modifiers": "shift+ctrl"}));
        let plan = plan(&a, Some((512, 384)), None).unwrap();
        assert_eq!(
            argv(&plan),
            ["mousemove 512 384 keydown shift+ctrl click --repeat 2 --delay 80 1 keyup shift+ctrl"]
        );
        assert_eq!(plan.release, ["keyup", "shift+ctrl"]);
        let right = plan_of(json!({"action": "right_click"}), Some((1, 2)));
        assert_eq!(argv(&right), ["mousemove 1 2 click 3"]);
        assert!(right.release.is_empty());
        let moved = plan_of(json!({"action": "mouse_move"}), Some((5, 6)));
        assert_eq!(argv(&moved), ["mousemove 5 6"]);
    }

    fn plan_of(v: serde_json::Value, at: Option<(u32, u32)>) -> Plan {
        plan(&act(v), at, None).unwrap()
    }

    #[test]
    fn scrolls_are_wheel_clicks_capped_at_fifty() {
        let p = plan_of(
            json!({"action": "scroll", "scrollDirection": "down", "scrollAmount": 1_000_000_000}),
            None,
        );
        assert_eq!(argv(&p), ["click --repeat 50 --delay 20 5"]);
        let p = plan_of(
            json!({"action": "scroll", "scrollDirection": "left"}),
            Some((3, 4)),
        );
        assert_eq!(argv(&p), ["mousemove 3 4 click --repeat 3 --delay 20 6"]);
        let e = plan(&act(json!({"action": "scroll"})), None, None).unwrap_err();
        assert_eq!(
            e.message,
            "Error: COMPUTER_INVALID_REQUEST: scrollDirection is required for scroll"
        );
    }

    #[test]
    fn text_is_typed_after_the_end_of_options_and_bounded() {
        let p = plan_of(json!({"action": "type", "text": "--help\nrm -rf /"}), None);
        assert_eq!(
            p.steps,
            [Step::Xdo(xdo([
                "type",
                "--delay",
                "12",
                "--",
                "--help\nrm -rf /"
            ]))]
        );
        let refused = |t: &str| {
            plan(&act(json!({"action": "type", "text": t})), None, None)
                .unwrap_err()
                .message
        };
        assert_eq!(
            refused(""),
            "Error: COMPUTER_INVALID_REQUEST: text is required for type"
        );
        assert!(refused(&"é".repeat(MAX_TEXT + 1)).contains("exceeds 2000 characters"));
        plan_of(
            json!({"action": "type", "text": "é".repeat(MAX_TEXT)}),
            None,
        );
        assert!(refused("a\0b").contains("NUL"));
    }

    #[test]
    fn held_keys_and_drags_are_bounded_and_say_how_to_release() {
        let p = plan_of(
            json!({"action": "hold_key", "keys": "shift", "durationMs": 600_000}),
            None,
        );
        assert_eq!(
            argv(&p),
            ["keydown -- shift", "<sleep 10000ms>", "keyup -- shift"]
        );
        assert_eq!(p.release, ["keyup", "--", "shift"]);
        let d = plan(
            &act(json!({"action": "left_click_drag", "durationMs": 250})),
            Some((9, 8)),
            Some((1, 2)),
        )
        .unwrap();
        assert_eq!(
            argv(&d),
            [
                "mousemove 1 2 mousedown 1",
                "<sleep 250ms>",
                "mousemove 9 8 mouseup 1"
            ]
        );
        assert_eq!(d.release, ["mouseup", "1"]);
    }
}

//! A page as the model reads it: Chromium's accessibility tree (CDP
//! `Accessibility.getFullAXTree`) as OpenClaw's two snapshot forms —
//! `ai`, an indented text with a ref on each element
//! (`- button "Place order" [ref=e8]`, `- textbox "Your name" [ref=e3]: Ada`),
//! and `aria`, the same elements as a list of nodes. A ref names a DOM
//! node of the tab's current document (see `state::Refs`), so `act` can
//! find the element again; the text need not match Playwright's byte for
//! byte.
//!
//! Pure: nodes in, text out; bounded by `limit` elements and `maxChars`.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::state::Refs;

/// Roles a model can act on (`interactive=true` keeps only these).
const INTERACTIVE: &[&str] = &[
    "button",
    "checkbox",
    "combobox",
    "link",
    "listbox",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "option",
    "radio",
    "searchbox",
    "slider",
    "spinbutton",
    "switch",
    "tab",
    "textbox",
    "treeitem",
];

/// Roles that are only structure: their children take their place.
const SPLICED: &[&str] = &[
    "none",
    "presentation",
    "LabelText",
    "MenuListPopup",
    "InlineTextBox",
    "LineBreak",
];

/// Roles whose value is what the user typed or chose.
const VALUED: &[&str] = &["textbox", "searchbox", "combobox", "spinbutton", "slider"];

/// `maxChars` of an `ai` snapshot when none is asked (OpenClaw's), and of
/// an efficient one.
pub const DEFAULT_MAX_CHARS: usize = 40_000;
pub const EFFICIENT_MAX_CHARS: usize = 8_000;
/// Elements listed at most.
pub const MAX_LIMIT: usize = 5_000;
/// Nodes nested deeper than this are not walked (the walk recurses, on
/// a runtime worker's stack, and a page nests as deep as its script
/// likes; Chromium's own parser stops nesting at 512).
const MAX_NESTING: usize = 512;
/// The characters a name, value or text line shows at most.
const MAX_TEXT: usize = 500;

/// How to render.
#[derive(Debug, Clone)]
pub struct Options {
    pub interactive: bool,
    pub compact: bool,
    pub depth: Option<usize>,
    pub limit: usize,
    pub max_chars: usize,
    /// Render only the subtree of this DOM node (`selector`).
    pub root: Option<i64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interactive: false,
            compact: false,
            depth: None,
            limit: MAX_LIMIT,
            max_chars: DEFAULT_MAX_CHARS,
            root: None,
        }
    }
}

/// A rendered snapshot.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub text: String,
    pub nodes: Vec<Value>,
    pub refs: Map<String, Value>,
    pub interactive: usize,
    pub truncated: bool,
}

/// One element worth showing.
struct Element<'a> {
    role: &'a str,
    name: &'a str,
    value: Option<&'a str>,
    description: Option<&'a str>,
    backend: Option<i64>,
    flags: Vec<String>,
    url: Option<&'a str>,
}

struct Tree<'a> {
    by_id: HashMap<&'a str, &'a Value>,
}

impl<'a> Tree<'a> {
    fn children(&self, node: &'a Value) -> Vec<&'a Value> {
        node["childIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id.as_str()?).copied())
            .collect()
    }

    /// All text under a node, for a nameless element's single text line.
    fn text_of(&self, node: &'a Value, out: &mut String, budget: &mut usize) {
        for child in self.children(node) {
            if *budget == 0 {
                return;
            }
            if role(child) == "StaticText" {
                let t = str_of(&child["name"]);
                if !out.is_empty() && !t.is_empty() {
                    out.push(' ');
                }
                out.push_str(t);
                *budget = budget.saturating_sub(1);
            } else if is_spliced(child) {
                self.text_of(child, out, budget);
            }
        }
    }
}

fn role(node: &Value) -> &str {
    node["role"]["value"].as_str().unwrap_or("")
}

fn str_of(v: &Value) -> &str {
    v["value"].as_str().unwrap_or("")
}

fn is_spliced(node: &Value) -> bool {
    node["ignored"] == true
        || SPLICED.contains(&role(node))
        || (matches!(role(node), "generic" | "form") && str_of(&node["name"]).is_empty())
}

fn element(node: &Value) -> Element<'_> {
    let mut flags = Vec::new();
    let mut url = None;
    for p in node["properties"].as_array().into_iter().flatten() {
        let v = &p["value"]["value"];
        match p["name"].as_str().unwrap_or("") {
            "checked" | "pressed" => match v.as_str() {
                Some("true") => flags.push(p["name"].as_str().unwrap_or("").to_owned()),
                Some("mixed") => flags.push(format!("{}=mixed", p["name"].as_str().unwrap_or(""))),
                _ => {}
            },
            "disabled" if v == true => flags.push("disabled".into()),
            "expanded" if v == true => flags.push("expanded".into()),
            "selected" if v == true => flags.push("selected".into()),
            "required" if v == true => flags.push("required".into()),
            "level" => {
                if let Some(level) = v.as_u64() {
                    flags.push(format!("level={level}"));
                }
            }
            "url" => url = v.as_str(),
            _ => {}
        }
    }
    let r = role(node);
    Element {
        role: r,
        name: str_of(&node["name"]),
        value: Some(str_of(&node["value"])).filter(|v| !v.is_empty() && VALUED.contains(&r)),
        description: Some(str_of(&node["description"])).filter(|d| !d.is_empty()),
        backend: node["backendDOMNodeId"].as_i64(),
        flags,
        url: url.filter(|_| r == "link"),
    }
}

/// Quotes a name as the ai form shows it.
fn quoted(name: &str) -> String {
    serde_json::to_string(&readable(name)).unwrap_or_default()
}

/// A name, value or text as the model reads it: cut to [`MAX_TEXT`]
/// characters (one long label cannot push the rest of the page past
/// `maxChars`), and the characters that reorder or hide text on display
/// (bidi overrides, isolates, marks) written out as `\u202e` — a page
/// cannot make "Cancel" read "Pay".
fn readable(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_TEXT {
            out.push('…');
            break;
        }
        match c {
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            _ => out.push(c),
        }
    }
    out
}

struct Render<'a, 'r> {
    tree: Tree<'a>,
    options: &'r Options,
    refs: &'r mut Refs,
    out: Snapshot,
    elements: usize,
    /// Nodes walked: each once, whatever ids the browser sent.
    seen: HashSet<*const Value>,
    /// How deep the walk is now.
    nesting: usize,
}

impl<'a> Render<'a, '_> {
    fn line(&mut self, indent: usize, text: &str) {
        if self.out.truncated {
            return;
        }
        let needed = indent * 2 + text.len() + 1;
        if self.out.text.len() + needed > self.options.max_chars {
            self.out.truncated = true;
            return;
        }
        for _ in 0..indent {
            self.out.text.push_str("  ");
        }
        self.out.text.push_str(text);
        self.out.text.push('\n');
    }

    fn walk(&mut self, node: &'a Value, depth: usize) {
        if self.nesting >= MAX_NESTING {
            self.out.truncated = true;
            return;
        }
        self.nesting += 1;
        self.visit(node, depth);
        self.nesting -= 1;
    }

    /// One node: its line, then its children at the depth it says. Only
    /// what the recursion needs lives in this frame.
    fn visit(&mut self, node: &'a Value, depth: usize) {
        if !self.seen.insert(node as *const Value) {
            return;
        }
        if self.out.truncated || self.elements >= self.options.limit {
            self.out.truncated |= self.elements >= self.options.limit;
            return;
        }
        let Some(next_depth) = self.show(node, depth) else {
            return;
        };
        for child in self.tree.children(node) {
            self.walk(child, next_depth);
        }
    }

    /// Writes a node's own lines; the depth of its children, or none when
    /// they are not walked.
    #[inline(never)]
    fn show(&mut self, node: &'a Value, depth: usize) -> Option<usize> {
        let r = role(node);
        if r == "StaticText" {
            if !self.options.interactive {
                let t = str_of(&node["name"]).trim().to_owned();
                if !t.is_empty() {
                    self.line(depth, &format!("- text: {}", readable(&t)));
                }
            }
            return None;
        }
        if is_spliced(node) || r == "RootWebArea" {
            return Some(depth);
        }
        let e = element(node);
        let interactive = INTERACTIVE.contains(&e.role);
        let shown = !self.options.interactive || interactive;
        let too_deep = self.options.depth.is_some_and(|d| depth > d);
        let children = self.tree.children(node);
        // A nameless element whose only content is text shows it inline.
        let mut inline = String::new();
        let only_text = children.iter().all(|c| {
            role(c) == "StaticText" || (is_spliced(c) && self.tree.children(c).is_empty())
        });
        if only_text {
            self.tree.text_of(node, &mut inline, &mut 64);
        }
        // The text that is the name already is not said twice.
        if inline.trim() == e.name.trim() {
            inline.clear();
        }
        let skip_in_compact =
            self.options.compact && !interactive && e.name.is_empty() && inline.is_empty();
        let next_depth = if shown && !too_deep && !skip_in_compact {
            let mut text = format!("- {}", e.role);
            if !e.name.is_empty() {
                text.push(' ');
                text.push_str(&quoted(e.name));
            }
            for flag in &e.flags {
                text.push_str(&format!(" [{flag}]"));
            }
            let reference = e.backend.map(|b| self.refs.of(b));
            if let Some(reference) = &reference {
                text.push_str(&format!(" [ref={reference}]"));
            }
            let value = e
                .value
                .map(str::to_owned)
                .or_else(|| Some(inline.trim().to_owned()).filter(|t| !t.is_empty()));
            let nested = !only_text || e.url.is_some();
            match (&value, nested && !self.options.interactive) {
                (Some(v), _) => text.push_str(&format!(": {}", readable(v))),
                (None, true) if !children.is_empty() || e.url.is_some() => text.push(':'),
                _ => {}
            }
            self.line(depth, &text);
            self.elements += 1;
            if interactive {
                self.out.interactive += 1;
            }
            if let Some(reference) = reference {
                let mut entry = json!({ "role": e.role });
                if !e.name.is_empty() {
                    entry["name"] = json!(readable(e.name));
                }
                self.out.refs.insert(reference.clone(), entry);
                let mut node = json!({ "ref": reference, "role": e.role, "name": readable(e.name), "depth": depth });
                if let Some(v) = e.value {
                    node["value"] = json!(readable(v));
                }
                if let Some(d) = e.description {
                    node["description"] = json!(d);
                }
                self.out.nodes.push(node);
            }
            if let (Some(url), false) = (e.url, self.options.interactive) {
                self.line(depth + 1, &format!("- /url: {url}"));
            }
            if !nested || only_text || self.options.depth.is_some_and(|d| depth >= d) {
                return None;
            }
            if self.options.interactive {
                depth
            } else {
                depth + 1
            }
        } else {
            if too_deep {
                return None;
            }
            depth
        };
        Some(next_depth)
    }
}

/// Renders `nodes` (CDP AX nodes), naming elements through `refs`.
pub fn render(nodes: &[Value], refs: &mut Refs, options: &Options) -> Snapshot {
    let tree = Tree {
        by_id: nodes
            .iter()
            .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
            .collect(),
    };
    let start = match options.root {
        Some(backend) => nodes
            .iter()
            .find(|n| n["backendDOMNodeId"].as_i64() == Some(backend)),
        None => nodes
            .iter()
            .find(|n| n.get("parentId").is_none())
            .or(nodes.first()),
    };
    let mut render = Render {
        tree,
        options,
        refs,
        out: Snapshot::default(),
        elements: 0,
        seen: HashSet::new(),
        nesting: 0,
    };
    if let Some(start) = start {
        render.walk(start, 0);
    }
    render.out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page as Chromium 156 reports it (ignored body, a label spliced).
    fn page() -> Vec<Value> {
        let n = |id: &str,
                 parent: Option<&str>,
                 role: &str,
                 name: &str,
                 kids: &[&str],
                 backend: i64| {
            let mut v = json!({
                "nodeId": id, "ignored": false,
                "role": {"type": "role", "value": role},
                "name": {"type": "computedString", "value": name},
                "childIds": kids, "backendDOMNodeId": backend,
            });
            if let Some(p) = parent {
                v["parentId"] = json!(p);
            }
            v
        };
        let mut body = n("13", Some("7"), "generic", "", &["14", "15", "2", "47"], 13);
        body["ignored"] = json!(true);
        let mut textbox = n("3", Some("2"), "textbox", "Your name", &[], 3);
        textbox["value"] = json!({"type": "string", "value": "Ada"});
        let mut check = n("5", Some("2"), "checkbox", "Gift wrap", &[], 5);
        check["properties"] =
            json!([{"name": "checked", "value": {"type": "tristate", "value": "true"}}]);
        let mut heading = n("14", Some("13"), "heading", "Order form", &["51"], 14);
        heading["properties"] =
            json!([{"name": "level", "value": {"type": "integer", "value": 1}}]);
        let mut link = n("47", Some("13"), "link", "Second page", &["63"], 47);
        link["properties"] =
            json!([{"name": "url", "value": {"type": "string", "value": "http://h/second.html"}}]);
        vec![
            n("7", None, "RootWebArea", "Test", &["13"], 7),
            body,
            heading,
            n("51", Some("14"), "StaticText", "Order form", &[], 51),
            n("15", Some("13"), "paragraph", "", &["52"], 15),
            n("52", Some("15"), "StaticText", "Nothing yet.", &[], 52),
            n("2", Some("13"), "form", "Order", &["16", "3", "5", "35"], 2),
            n("16", Some("2"), "LabelText", "", &["53"], 16),
            n("53", Some("16"), "StaticText", "Your name", &[], 53),
            textbox,
            check,
            n("35", Some("2"), "button", "Place order", &["56"], 35),
            n("56", Some("35"), "StaticText", "Place order", &[], 56),
            link,
            n("63", Some("47"), "StaticText", "Second page", &[], 63),
        ]
    }

    fn refs() -> Refs {
        Refs {
            document: 1,
            ..Refs::default()
        }
    }

    #[test]
    fn the_ai_form_nests_names_values_flags_and_refs() {
        let mut r = refs();
        let s = render(&page(), &mut r, &Options::default());
        assert_eq!(
            s.text,
            "- heading \"Order form\" [level=1] [ref=e1]\n\
             - paragraph [ref=e2]: Nothing yet.\n\
             - form \"Order\" [ref=e3]:\n\
             \x20 - text: Your name\n\
             \x20 - textbox \"Your name\" [ref=e4]: Ada\n\
             \x20 - checkbox \"Gift wrap\" [checked] [ref=e5]\n\
             \x20 - button \"Place order\" [ref=e6]\n\
             - link \"Second page\" [ref=e7]:\n\
             \x20 - /url: http://h/second.html\n"
        );
        assert_eq!(
            s.refs["e6"],
            json!({"role": "button", "name": "Place order"})
        );
        assert_eq!(r.nodes["e4"], 3);
        assert_eq!(s.interactive, 4);
        assert!(!s.truncated);
        // The same document, snapshot again: the same refs.
        let again = render(&page(), &mut r, &Options::default());
        assert_eq!(again.text, s.text);
    }

    #[test]
    fn a_long_or_reordering_name_cannot_hide_or_disguise_the_page() {
        let mut nodes = page();
        // One 50,000-character label before the form, a name that reads
        // backwards on display.
        nodes[2]["name"]["value"] = json!("x".repeat(50_000));
        nodes[10]["name"]["value"] = json!("Cancel \u{202e}yaP");
        let s = render(&nodes, &mut refs(), &Options::default());
        assert!(
            s.text.contains(&format!("\"{}…\"", "x".repeat(MAX_TEXT))),
            "{}",
            s.text
        );
        assert!(s.text.contains("button \"Place order\""), "{}", s.text);
        assert!(s.text.contains("\"Cancel \\\\u202eyaP\""), "{}", s.text);
        assert!(!s.text.contains('\u{202e}'));
    }

    #[test]
    fn a_nameless_form_is_no_landmark() {
        // ARIA maps <form> to `form` only when it has a name; OpenClaw's
        // snapshot shows a nameless one as a plain group, and so do we
        // (its children take its place).
        let mut nodes = page();
        nodes[6]["name"]["value"] = json!("");
        let s = render(&nodes, &mut refs(), &Options::default());
        assert!(!s.text.contains("- form"), "{}", s.text);
        assert!(
            s.text.contains("\n- textbox \"Your name\" [ref=e3]: Ada\n"),
            "{}",
            s.text
        );
    }

    #[test]
    fn interactive_lists_only_what_can_be_acted_on() {
        let s = render(
            &page(),
            &mut refs(),
            &Options {
                interactive: true,
                ..Options::default()
            },
        );
        assert_eq!(
            s.text,
            "- textbox \"Your name\" [ref=e1]: Ada\n\
             - checkbox \"Gift wrap\" [checked] [ref=e2]\n\
             - button \"Place order\" [ref=e3]\n\
             - link \"Second page\" [ref=e4]\n"
        );
        assert_eq!(s.nodes.len(), 4);
        assert_eq!(s.nodes[0]["value"], "Ada");
    }

    #[test]
    fn limits_cut_and_say_so() {
        let s = render(
            &page(),
            &mut refs(),
            &Options {
                max_chars: 60,
                ..Options::default()
            },
        );
        assert!(s.truncated);
        assert!(s.text.len() <= 60);
        let s = render(
            &page(),
            &mut refs(),
            &Options {
                limit: 2,
                ..Options::default()
            },
        );
        assert!(s.truncated);
        assert_eq!(s.refs.len(), 2);
        let s = render(
            &page(),
            &mut refs(),
            &Options {
                depth: Some(0),
                ..Options::default()
            },
        );
        assert!(!s.text.contains("textbox"), "{}", s.text);
        assert!(s.text.contains("- form \"Order\" [ref=e3]"));
    }

    #[test]
    fn a_deeply_nested_page_cannot_overflow_the_stack() {
        // A page can nest elements as deep as its script likes; the walk
        // runs on a runtime worker's stack (2 MiB): half of it must do.
        let depth = 100_000;
        let mut nodes =
            vec![json!({"nodeId": "0", "role": {"value": "RootWebArea"}, "childIds": ["1"]})];
        for i in 1..depth {
            // Nameless wrappers: spliced, so no line and no element counts.
            nodes.push(json!({
                "nodeId": i.to_string(), "parentId": (i - 1).to_string(),
                "role": {"value": "generic"}, "childIds": [(i + 1).to_string()],
                "backendDOMNodeId": i,
            }));
        }
        nodes.push(
            json!({"nodeId": depth.to_string(), "parentId": (depth - 1).to_string(),
            "role": {"value": "StaticText"}, "name": {"value": "bottom"}}),
        );
        let s = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || render(&nodes, &mut refs(), &Options::default()))
            .unwrap()
            .join()
            .expect("the renderer survived");
        assert!(s.truncated);
        assert!(!s.text.contains("bottom"));
    }

    #[test]
    fn a_selector_roots_the_snapshot_and_garbage_renders_nothing() {
        let s = render(
            &page(),
            &mut refs(),
            &Options {
                root: Some(2),
                ..Options::default()
            },
        );
        assert!(
            s.text.starts_with("- form \"Order\" [ref=e1]:"),
            "{}",
            s.text
        );
        assert!(!s.text.contains("heading"));
        let junk = vec![
            json!(null),
            json!({"nodeId": 5}),
            json!({"childIds": [1, {}]}),
        ];
        let s = render(&junk, &mut refs(), &Options::default());
        assert!(s.refs.is_empty());
        // A cycle in what the browser sent cannot loop for ever.
        let cycle = vec![
            json!({"nodeId": "1", "role": {"value": "generic"}, "childIds": ["2"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "generic"}, "childIds": ["1"]}),
        ];
        let s = render(&cycle, &mut refs(), &Options::default());
        assert!(s.text.is_empty());
    }
}

//! A small element tree over quick-xml that remembers where everything came
//! from, so that validation errors can name a line and column.

use quick_xml::Reader;
use quick_xml::events::Event;

/// A byte offset into the spec text.
pub type Pos = usize;

#[derive(Debug, Clone)]
pub struct Attr {
    pub name: String,
    pub value: String,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub attrs: Vec<Attr>,
    pub children: Vec<Node>,
    /// Character data directly inside the element, trimmed.
    pub text: String,
    /// Where the text starts (the element's position when there is none).
    pub text_pos: Pos,
    pub pos: Pos,
}

/// The deepest a spec's elements may nest: far more than a spec has, far
/// less than would strain the stack.
pub const MAX_DEPTH: usize = 64;

/// Parses `src` into its root element. Errors carry the byte offset of the problem.
pub fn parse(src: &str) -> Result<Node, (Pos, String)> {
    let mut reader = Reader::from_str(src);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Node> = Vec::new();
    let mut root: Option<Node> = None;
    loop {
        let before = reader.buffer_position() as usize;
        let event = reader.read_event().map_err(|e| (reader.error_position() as usize, describe_xml_error(&e)))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let before = char_floor(src, before);
                let tag_pos = src[before..].find('<').map_or(before, |o| before + o);
                let name = e.name().as_ref().to_owned();
                let tag_end = reader.buffer_position() as usize;
                let mut attrs = Vec::new();
                let mut cursor = tag_pos;
                for attr in e.attributes().with_checks(false) {
                    let attr = attr.map_err(|err| (tag_pos, format!("malformed attribute in <{name}>: {err}")))?;
                    let key = attr.key.as_ref().to_owned();
                    let value = attr
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|err| (tag_pos, format!("bad value of attribute `{key}`: {err}")))?
                        .into_owned();
                    let pos = attribute_pos(src, cursor, tag_end, &key);
                    cursor = pos + key.len();
                    if attrs.iter().any(|a: &Attr| a.name == key) {
                        return Err((pos, format!("attribute `{key}` appears twice on <{name}>")));
                    }
                    attrs.push(Attr { name: key, value, pos });
                }
                let node =
                    Node { name, attrs, children: Vec::new(), text: String::new(), text_pos: tag_pos, pos: tag_pos };
                if matches!(event, Event::Empty(_)) {
                    close(node, &mut stack, &mut root, tag_pos)?;
                } else if stack.len() >= MAX_DEPTH {
                    // A tree that deep would overflow the stack as it is dropped.
                    return Err((
                        tag_pos,
                        format!(
                            "<{}> is nested more than {MAX_DEPTH} elements deep; a spec nests two (<problem> and its elements)",
                            node.name
                        ),
                    ));
                } else {
                    stack.push(node);
                }
            }
            Event::End(_) => {
                let node = stack.pop().expect("quick-xml checks end names");
                close(node, &mut stack, &mut root, before)?;
            }
            Event::Text(t) => {
                let text = t.xml10_content();
                append_text(&mut stack, &text, before, src)?;
            }
            Event::CData(t) => {
                let text = t.into_inner().into_owned();
                append_text(&mut stack, &text, before, src)?;
            }
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => {
                        let name = r.into_inner().into_owned();
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .map(str::to_owned)
                            .ok_or_else(|| (before, format!("unknown entity `&{name};`")))?
                    }
                };
                append_text(&mut stack, &text, before, src)?;
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err((open.pos, format!("<{}> is never closed", open.name)));
    }
    root.ok_or((0, "the file holds no XML element; expected <problem>".to_owned()))
}

fn close(node: Node, stack: &mut [Node], root: &mut Option<Node>, pos: Pos) -> Result<(), (Pos, String)> {
    match stack.last_mut() {
        Some(parent) => parent.children.push(node),
        None if root.is_none() => *root = Some(node),
        None => {
            return Err((pos, "a second top-level element; a spec holds one <problem>".to_owned()));
        }
    }
    Ok(())
}

fn append_text(stack: &mut [Node], text: &str, pos: Pos, src: &str) -> Result<(), (Pos, String)> {
    if text.trim().is_empty() {
        return Ok(());
    }
    let pos = char_floor(src, pos);
    let lead = src[pos..].len() - src[pos..].trim_start().len();
    match stack.last_mut() {
        Some(node) => {
            if node.text.is_empty() {
                node.text_pos = pos + lead;
            }
            node.text.push_str(text);
            Ok(())
        }
        None => Err((pos + lead, "text outside the <problem> element".to_owned())),
    }
}

/// Finds `key=` between `start` and the end of the tag at `end`.
fn attribute_pos(src: &str, start: Pos, end: Pos, key: &str) -> Pos {
    let (start, end) = (char_floor(src, start), char_floor(src, end));
    let tag = &src[start..end.max(start)];
    let bytes = tag.as_bytes();
    let mut from = 0;
    while let Some(off) = tag[from..].find(key) {
        let at = from + off;
        let before_ok = at > 0 && bytes[at - 1].is_ascii_whitespace();
        let after = tag[at + key.len()..].trim_start();
        if before_ok && after.starts_with('=') {
            return start + at;
        }
        from = at + key.len();
    }
    start
}

fn describe_xml_error(e: &quick_xml::Error) -> String {
    format!("malformed XML: {e}")
}

/// Converts a byte offset into a 1-based line and column (in characters).
pub fn line_col(src: &str, pos: Pos) -> (usize, usize) {
    let before = &src[..char_floor(src, pos)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// The largest char boundary at or before `pos`: quick-xml's offsets and a
/// key length added to them may fall inside a multi-byte character.
fn char_floor(src: &str, pos: Pos) -> Pos {
    let mut pos = pos.min(src.len());
    while !src.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

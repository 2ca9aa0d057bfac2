//! Where in the file a field or a key is written: the line an error points at.

pub(super) fn line_of_offset(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

/// The first line where `key` is written as a key (`key =`, `"key" =`) or a table header
/// (`[key]`, `[[key]]`).
pub(super) fn key_line(source: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    source
        .lines()
        .position(|l| {
            let l = l.trim_start();
            let assigned = l
                .strip_prefix(key)
                .or_else(|| l.strip_prefix(&quoted))
                .is_some_and(|r| r.trim_start().starts_with('='));
            let header = l.starts_with('[')
                && l.trim_start_matches('[')
                    .strip_prefix(key)
                    .is_some_and(|r| r.starts_with(']'));
            assigned || header
        })
        .map(|i| i + 1)
}

/// The line of a field path such as `routes[1].gateway` or `interfaces[0].addresses[2]`:
/// the deepest part of the path found in the document.
pub(super) fn field_line(
    doc: &toml_edit::ImDocument<String>,
    source: &str,
    field: &str,
) -> Option<usize> {
    let mut item: &toml_edit::Item = doc.as_item();
    let mut span = None;
    for segment in field.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let Some(next) = item.get(key) else { break };
        item = next;
        span = item.span().or(span);
        if let Some(i) = index {
            let Some(next) = item.get(i) else { break };
            item = next;
            span = item.span().or(span);
        }
    }
    span.map(|s| line_of_offset(source, s.start))
}

/// The field written on `line` (1-based) of `source`, for an error the parser gives only
/// a place to: the key there under its table (`daemon.cpu`, `interfaces[1].mac`), or the
/// table a header there opens; the enclosing table for any other line, `file` at the
/// top.
pub(super) fn field_on_line(source: &str, line: usize) -> String {
    let mut table = String::new();
    let mut entries: Vec<(String, usize)> = Vec::new();
    let text_of = |l: &str| l.split('#').next().unwrap_or("").trim().to_string();
    for (n, raw) in source.lines().enumerate().take(line) {
        let l = text_of(raw);
        let header = if let Some(name) = l.strip_prefix("[[") {
            let name = name.split("]]").next().unwrap_or("").trim().to_string();
            let k = match entries.iter_mut().find(|(t, _)| *t == name) {
                Some((_, k)) => {
                    *k += 1;
                    *k
                }
                None => {
                    entries.push((name.clone(), 0));
                    0
                }
            };
            Some(format!("{name}[{k}]"))
        } else {
            l.strip_prefix('[')
                .map(|name| name.split(']').next().unwrap_or("").trim().to_string())
        };
        if let Some(header) = header {
            table = header;
            if n + 1 == line {
                return table;
            }
            continue;
        }
        if n + 1 == line {
            // `key = value`, or the key a mistyped line starts with.
            let written = l.split_once('=').map_or(l.as_str(), |(k, _)| k).trim();
            let key = written
                .split_whitespace()
                .next()
                .map(|k| k.trim_matches('"').to_string())
                .filter(|k| !k.is_empty());
            return match (key, table.is_empty()) {
                (Some(k), true) => k,
                (Some(k), false) if k.contains('.') => format!("{table}.\"{k}\""),
                (Some(k), false) => format!("{table}.{k}"),
                (None, false) => table,
                (None, true) => "file".to_string(),
            };
        }
    }
    if table.is_empty() {
        "file".to_string()
    } else {
        table
    }
}

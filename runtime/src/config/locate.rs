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

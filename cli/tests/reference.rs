//! docs/config.md, docs/knobs.md and docs/metrics.md are what `polld_runtime::reference`
//! writes from the declarations: this test fails when a knob, counter or metric changes and the page was
//! not regenerated. `POLLD_BLESS=1 cargo test -p polld --test reference` rewrites them.

use std::path::PathBuf;

fn check(page: &str, generated: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(page);
    if std::env::var_os("POLLD_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("writing the reference page");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != generated {
        let first = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
        panic!(
            "docs/{page} differs from the declarations from line {} on \
             (file: {:?}, declarations: {:?}); regenerate it with \
             POLLD_BLESS=1 cargo test -p polld --test reference",
            first + 1,
            on_disk.lines().nth(first),
            generated.lines().nth(first)
        );
    }
}

#[test]
fn the_config_reference_is_what_the_config_modules_say() {
    check("config.md", polld_runtime::reference::config_markdown());
}

#[test]
fn the_knob_reference_is_what_the_declarations_say() {
    check("knobs.md", polld_runtime::reference::knobs_markdown());
}

#[test]
fn the_metrics_reference_is_what_the_declarations_say() {
    check("metrics.md", polld_runtime::reference::metrics_markdown());
}

//! The broken configuration files of `tests/configs/broken/`: each one is refused, and
//! each of its errors names the line, the field and a fix, as the file's own
//! `# expect: line=N field=FIELD fix~=TEXT` lines say (one per mistake: a file with
//! several mistakes reports every one of them, and nothing else). A file with a
//! `# check` line is checked as `polld run --check` checks it (the knobs applied, the
//! control socket's directory, the capabilities); the others as `polld run` reads them
//! (the knobs applied too). Every error also comes out of `--check --json` with all of
//! its fields filled.

use std::path::{Path, PathBuf};

use polld_runtime::check;
use polld_runtime::config::{RunConfig, RunConfigError};
use polld_runtime::RunError;

/// One `# expect:` line.
#[derive(Debug)]
struct Expect {
    line: usize,
    field: String,
    fix: String,
}

/// The `# expect:` lines of `text`, and whether it has a `# check` line.
fn expectations(text: &str) -> Result<(Vec<Expect>, bool), String> {
    let mut expects = Vec::new();
    let mut check = false;
    for l in text.lines() {
        if l.trim() == "# check" {
            check = true;
        }
        let Some(rest) = l.strip_prefix("# expect: ") else {
            continue;
        };
        let (line, rest) = rest
            .strip_prefix("line=")
            .and_then(|r| r.split_once(" field="))
            .ok_or_else(|| format!("malformed: {l}"))?;
        let (field, fix) = rest
            .split_once(" fix~=")
            .ok_or_else(|| format!("malformed: {l}"))?;
        expects.push(Expect {
            line: line
                .parse()
                .map_err(|_| format!("malformed line number: {l}"))?,
            field: field.to_string(),
            fix: fix.to_string(),
        });
    }
    Ok((expects, check))
}

/// The errors `path` is refused with, as `polld run` (or with `check`, `polld run
/// --check`) finds them; an error string when it is accepted or refused otherwise.
fn errors_of(path: &Path, check: bool) -> Result<Vec<RunConfigError>, String> {
    let result = RunConfig::load(path)
        .map_err(RunError::Config)
        .and_then(|config| {
            if check {
                let socket = config
                    .daemon
                    .socket
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(polld_control::client::DEFAULT_SOCKET));
                check::check(&config, &socket).map(drop)
            } else {
                check::dataplanes(&config).map(drop)
            }
        });
    match result {
        Ok(()) => Err("accepted".to_string()),
        Err(RunError::Config(errors)) => Ok(errors.into_vec()),
        Err(e) => Err(format!("refused without a line: {e}")),
    }
}

/// What is wrong with how `path` is refused, if anything; `check` files are skipped
/// (`Ok`) without `root` (the capabilities are then missing as well).
fn verdict(path: &Path, root: bool) -> Result<(), String> {
    let text =
        String::from_utf8_lossy(&std::fs::read(path).map_err(|e| e.to_string())?).into_owned();
    let (expects, check) = expectations(&text)?;
    if expects.is_empty() {
        return Err("no `# expect:` line".to_string());
    }
    if check && !root {
        return Ok(());
    }
    let errors = errors_of(path, check)?;
    let shown = || {
        errors
            .iter()
            .map(|e| format!("\n    {e}"))
            .collect::<String>()
    };
    if errors.len() != expects.len() {
        return Err(format!(
            "{} error(s) for {} expected:{}",
            errors.len(),
            expects.len(),
            shown()
        ));
    }
    for x in &expects {
        let found = errors.iter().any(|e| {
            let (field, _, fix) = e.parts();
            e.line == Some(x.line)
                && field == Some(x.field.as_str())
                && fix.is_some_and(|f| f.contains(&x.fix))
        });
        if !found {
            return Err(format!(
                "no error at line {} on {} with a fix containing {:?}:{}",
                x.line,
                x.field,
                x.fix,
                shown()
            ));
        }
    }
    let mut json = Vec::new();
    let refused = Err(RunError::Config(
        polld_runtime::config::RunConfigErrors::new(errors.clone()).expect("not empty"),
    ));
    check::print(path, &refused, true, &mut json).map_err(|e| e.to_string())?;
    let json: serde_json::Value = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    let listed = json["errors"].as_array().map_or(0, Vec::len);
    if listed != errors.len() {
        return Err(format!("--json lists {listed} error(s): {json}"));
    }
    for e in json["errors"].as_array().into_iter().flatten() {
        let filled = ["path", "field", "message", "fix"]
            .iter()
            .all(|k| e[k].as_str().is_some_and(|s| !s.is_empty()))
            && e["line"].as_u64().is_some_and(|l| l > 0);
        if !filled {
            return Err(format!("--json error with a field not filled: {e}"));
        }
    }
    Ok(())
}

#[test]
fn every_broken_file_is_refused_with_each_mistake_at_its_line_and_field_with_a_fix() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/broken");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 100, "only {} broken files", files.len());
    let several = files
        .iter()
        .filter(|f| {
            let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
            text.matches("# expect: ").count() > 1
        })
        .count();
    assert!(several >= 5, "only {several} files with several mistakes");
    let root = polld_testsupport::root_or_skip("the files with `# check` need root");
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| {
            verdict(f, root)
                .err()
                .map(|why| format!("{}: {why}", f.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_expectation_that_does_not_hold_is_caught() {
    let dir = std::env::temp_dir().join(format!("polld-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("wrong.toml");
    let text = "# expect: line=3 field=daemon.cpu fix~=nothing like this\n[daemon]\ncpu = \"x\"\n";
    std::fs::write(&file, text).unwrap();
    let why = verdict(&file, true).unwrap_err();
    assert!(why.contains("no error at line 3 on daemon.cpu"), "{why}");
    // A second mistake the file does not expect.
    let second = format!(
        "{}[knobs]\n\"kern.polling.hz\" = true\n",
        text.replace("nothing like this", "write")
    );
    std::fs::write(&file, second).unwrap();
    let why = verdict(&file, true).unwrap_err();
    assert!(why.contains("2 error(s) for 1 expected"), "{why}");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! `polld completions SHELL`: the completion script clap writes from the command line's
//! declarations, and for bash the names it cannot know: `polld ctl` completes the entries
//! of the running polld (every declared knob and counter when none answers), and `polld
//! ifconfig` its interfaces (the host's when none answers), then the actions and modes.

use std::io::{self, Write};

use clap_complete::Shell;
use polld_core::dataplane::DEV_NODE;

/// The modes `polld ifconfig IF mode MODE` takes.
const MODES: &str = "interrupt polling adaptive busy auto";
/// The actions `polld ifconfig IF` takes.
const ACTIONS: &str = "polling -polling auto mode";

/// Writes the completion script for `shell` to `out`.
pub fn write(shell: Shell, cmd: &mut clap::Command, out: &mut dyn Write) -> io::Result<()> {
    clap_complete::generate(shell, cmd, "polld", out);
    if shell == Shell::Bash {
        out.write_all(bash_names().as_bytes())?;
    }
    Ok(())
}

/// The bash function that completes names before clap's does, and its registration.
fn bash_names() -> String {
    let mut declared: Vec<String> = polld_runtime::reference::declared_entries()
        .iter()
        .filter(|r| !r.node.starts_with(DEV_NODE))
        .map(|r| r.name())
        .collect();
    declared.sort();
    format!(
        r#"
# Names clap cannot know: the running polld's entries and interfaces.
_polld_names() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} sub="" i words=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in
            -*) ;;
            *) words+=("${{COMP_WORDS[i]}}") ;;
        esac
    done
    sub=${{words[0]}}
    if [[ $cur == -* && ! ( $sub == ifconfig && ${{#words[@]}} -ge 2 ) ]]; then
        _polld "$@"
        return
    fi
    case $sub in
        ctl)
            local names
            names=$(polld ctl -a 2>/dev/null | cut -d: -f1)
            [[ -n $names ]] || names="{declared}"
            COMPREPLY=($(compgen -W "$names" -- "$cur"))
            ;;
        ifconfig)
            if [[ ${{#words[@]}} -eq 1 ]]; then
                local ifs
                ifs=$(polld ctl {DEV_NODE} 2>/dev/null | sed -n 's/^{DEV_NODE}\.\([^.]*\)\..*/\1/p' | sort -u)
                [[ -n $ifs ]] || ifs=$(ls /sys/class/net 2>/dev/null)
                COMPREPLY=($(compgen -W "$ifs" -- "$cur"))
            elif [[ ${{words[${{#words[@]}}-1]}} == mode ]]; then
                COMPREPLY=($(compgen -W "{MODES}" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "{ACTIONS}" -- "$cur"))
            fi
            ;;
        *) _polld "$@" ;;
    esac
}}
complete -F _polld_names -o bashdefault -o default polld
"#,
        declared = declared.join(" ")
    )
}
